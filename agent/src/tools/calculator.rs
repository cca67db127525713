//! The `calculator` tool: a small recursive-descent parser over numbers,
//! `+ - * / % ^`, parentheses, a few functions (`sqrt abs ln log10 log2 exp
//! sin cos tan floor ceil round min max pow`) and the constants `pi` and `e`.
//! Nothing is ever evaluated as code; input length and nesting are bounded.

/// Longest accepted expression, in bytes.
const MAX_LEN: usize = 512;
/// Deepest accepted nesting (parentheses, unary signs, function calls).
const MAX_DEPTH: usize = 64;

/// Evaluate an arithmetic expression.
///
/// # Errors
/// A message that says what is wrong and where, for the model to correct.
pub fn evaluate(expr: &str) -> Result<f64, String> {
    if expr.len() > MAX_LEN {
        return Err(format!("expression longer than {MAX_LEN} characters"));
    }
    let mut p = Parser {
        src: expr.as_bytes(),
        pos: 0,
        depth: 0,
    };
    let v = p.expr()?;
    p.skip_ws();
    if p.pos != p.src.len() {
        return Err(format!(
            "unexpected {:?} at position {}",
            p.src[p.pos] as char, p.pos
        ));
    }
    if v.is_finite() {
        Ok(v)
    } else {
        Err("the result is not a finite number (division by zero or overflow)".into())
    }
}

struct Parser<'a> {
    src: &'a [u8],
    pos: usize,
    depth: usize,
}

impl Parser<'_> {
    fn skip_ws(&mut self) {
        while self.pos < self.src.len() && self.src[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.src.get(self.pos).copied()
    }

    fn enter(&mut self) -> Result<(), String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            Err("expression nested too deeply".into())
        } else {
            Ok(())
        }
    }

    /// `parse` one level deeper (refused beyond `MAX_DEPTH`).
    fn nested(&mut self, parse: fn(&mut Self) -> Result<f64, String>) -> Result<f64, String> {
        self.enter()?;
        let v = parse(self)?;
        self.depth -= 1;
        Ok(v)
    }

    // expr := term (('+' | '-') term)*
    fn expr(&mut self) -> Result<f64, String> {
        let mut v = self.term()?;
        while let Some(c @ (b'+' | b'-')) = self.peek() {
            self.pos += 1;
            let r = self.term()?;
            v = if c == b'+' { v + r } else { v - r };
        }
        Ok(v)
    }

    // term := unary (('*' | '/' | '%') unary)*
    fn term(&mut self) -> Result<f64, String> {
        let mut v = self.unary()?;
        while let Some(c @ (b'*' | b'/' | b'%')) = self.peek() {
            self.pos += 1;
            let r = self.unary()?;
            v = match c {
                b'*' => v * r,
                b'/' => v / r,
                _ => v % r,
            };
        }
        Ok(v)
    }

    // unary := ('-' | '+') unary | power
    fn unary(&mut self) -> Result<f64, String> {
        match self.peek() {
            Some(sign @ (b'-' | b'+')) => {
                self.pos += 1;
                let v = self.nested(Self::unary)?;
                Ok(if sign == b'-' { -v } else { v })
            }
            _ => self.power(),
        }
    }

    // power := atom ('^' unary)?   (right-associative)
    fn power(&mut self) -> Result<f64, String> {
        let base = self.atom()?;
        if self.peek() == Some(b'^') {
            self.pos += 1;
            let exp = self.nested(Self::unary)?;
            return Ok(base.powf(exp));
        }
        Ok(base)
    }

    fn atom(&mut self) -> Result<f64, String> {
        match self.peek() {
            Some(b'(') => {
                self.pos += 1;
                let v = self.nested(Self::expr)?;
                self.expect(b')')?;
                Ok(v)
            }
            Some(c) if c.is_ascii_digit() || c == b'.' => self.number(),
            Some(c) if c.is_ascii_alphabetic() => {
                let start = self.pos;
                while self.pos < self.src.len()
                    && (self.src[self.pos].is_ascii_alphanumeric() || self.src[self.pos] == b'_')
                {
                    self.pos += 1;
                }
                let name = std::str::from_utf8(&self.src[start..self.pos])
                    .unwrap_or_default()
                    .to_ascii_lowercase();
                match name.as_str() {
                    "pi" => return Ok(std::f64::consts::PI),
                    "e" => return Ok(std::f64::consts::E),
                    _ => {}
                }
                self.expect(b'(')
                    .map_err(|_| format!("unknown name {name:?}; functions need parentheses"))?;
                self.enter()?;
                let mut args = vec![self.expr()?];
                while self.peek() == Some(b',') {
                    self.pos += 1;
                    args.push(self.expr()?);
                }
                self.depth -= 1;
                self.expect(b')')?;
                call(&name, &args)
            }
            Some(c) => Err(format!(
                "unexpected {:?} at position {}",
                c as char, self.pos
            )),
            None => Err("unexpected end of expression".into()),
        }
    }

    fn number(&mut self) -> Result<f64, String> {
        let start = self.pos;
        while self.pos < self.src.len()
            && (self.src[self.pos].is_ascii_digit() || self.src[self.pos] == b'.')
        {
            self.pos += 1;
        }
        if self.pos < self.src.len() && matches!(self.src[self.pos], b'e' | b'E') {
            let save = self.pos;
            self.pos += 1;
            if self.pos < self.src.len() && matches!(self.src[self.pos], b'+' | b'-') {
                self.pos += 1;
            }
            let digits = self.pos;
            while self.pos < self.src.len() && self.src[self.pos].is_ascii_digit() {
                self.pos += 1;
            }
            if self.pos == digits {
                self.pos = save;
            }
        }
        let text = std::str::from_utf8(&self.src[start..self.pos]).unwrap_or_default();
        text.parse::<f64>()
            .map_err(|_| format!("invalid number {text:?} at position {start}"))
    }

    fn expect(&mut self, c: u8) -> Result<(), String> {
        if self.peek() == Some(c) {
            self.pos += 1;
            Ok(())
        } else {
            Err(format!("expected {:?} at position {}", c as char, self.pos))
        }
    }
}

fn call(name: &str, args: &[f64]) -> Result<f64, String> {
    let one = |f: fn(f64) -> f64| {
        if args.len() == 1 {
            Ok(f(args[0]))
        } else {
            Err(format!("{name} takes one argument, got {}", args.len()))
        }
    };
    let two = |f: fn(f64, f64) -> f64| {
        if args.len() == 2 {
            Ok(f(args[0], args[1]))
        } else {
            Err(format!("{name} takes two arguments, got {}", args.len()))
        }
    };
    match name {
        "sqrt" => one(f64::sqrt),
        "abs" => one(f64::abs),
        "ln" => one(f64::ln),
        "log10" | "log" => one(f64::log10),
        "log2" => one(f64::log2),
        "exp" => one(f64::exp),
        "sin" => one(f64::sin),
        "cos" => one(f64::cos),
        "tan" => one(f64::tan),
        "floor" => one(f64::floor),
        "ceil" => one(f64::ceil),
        "round" => one(f64::round),
        "pow" => two(f64::powf),
        "min" | "max" if !args.is_empty() => Ok(args.iter().copied().fold(
            if name == "min" {
                f64::INFINITY
            } else {
                f64::NEG_INFINITY
            },
            if name == "min" { f64::min } else { f64::max },
        )),
        _ => Err(format!(
            "unknown function {name:?}; known: sqrt abs ln log10 log2 exp sin cos tan floor ceil round pow min max"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::evaluate;

    fn check(expr: &str, expected: Result<f64, &str>) {
        match (evaluate(expr), expected) {
            (Ok(v), Ok(e)) => assert!((v - e).abs() < 1e-9, "{expr}: {v} != {e}"),
            (Err(m), Err(e)) => assert!(m.contains(e), "{expr}: {m:?} lacks {e:?}"),
            (got, want) => panic!("{expr}: got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn arithmetic() {
        check("1 + 2 * 3", Ok(7.0));
        check("(1 + 2) * 3", Ok(9.0));
        check("2 ^ 3 ^ 2", Ok(512.0));
        check("-2 ^ 2", Ok(-4.0));
        check("10 % 4", Ok(2.0));
        check("sqrt(16) + abs(-3)", Ok(7.0));
        check("max(1, 5, 3) - min(4, 2)", Ok(3.0));
        check("1.5e3 / 3", Ok(500.0));
        check("round(pi * 100)", Ok(314.0));
        check("40 * 255 / 100", Ok(102.0));
    }

    #[test]
    fn errors_are_readable() {
        check("1 / 0", Err("not a finite number"));
        check("2 +", Err("unexpected end"));
        check("2 + x", Err("unknown name"));
        check("import os", Err("unknown name"));
        check("__import__('os')", Err("unexpected"));
        check("foo(1)", Err("unknown function"));
        check("(1", Err("expected ')'"));
        check("1 2", Err("unexpected '2'"));
        check(&"(".repeat(100), Err("nested too deeply"));
        check(&"1+".repeat(400), Err("longer than"));
    }
}
