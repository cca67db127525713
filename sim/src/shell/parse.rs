//! Tokenizer and parser for the subset of POSIX `sh` that ADB clients send.
//!
//! Supported: single quotes, double quotes (with `\$ \` \" \\ \newline`
//! escapes), backslashes, `;` `&` `&&` `||` `|` and newline separators, `!`,
//! comments, `$?` and other parameters, command substitution with `$(…)` and
//! backticks (unquoted or inside double quotes) and simple redirections
//! (`>`, `>>`, `<`, `N>&M`). Anything else that `sh` would treat specially
//! (subshells, arithmetic, here-documents, `${x:-y}`) is a syntax error here
//! rather than a silently wrong parse. Pure: no execution happens in this module.

use std::fmt;

/// A piece of a word, before expansion.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Part {
    /// Literal text; `quoted` text is never field-split.
    Lit { text: String, quoted: bool },
    /// `$?`.
    LastStatus { quoted: bool },
    /// `$NAME`, `${NAME}` or a special parameter such as `$$`.
    Param { name: String, quoted: bool },
    /// `$(…)` or a backtick substitution, already parsed.
    Subst { script: Script, quoted: bool },
}

/// A word: parts that expand and concatenate into zero or more fields.
pub(crate) type Word = Vec<Part>;

/// Redirection operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RedirOp {
    /// `>` (and `>|`).
    Out,
    /// `>>`.
    Append,
    /// `>&`.
    DupOut,
    /// `<`.
    In,
    /// `<&`.
    DupIn,
}

/// One redirection of a simple command.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Redir {
    /// The file descriptor (default 1 for output, 0 for input).
    pub(crate) fd: u32,
    pub(crate) op: RedirOp,
    pub(crate) target: Word,
}

/// A simple command: words and redirections.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Command {
    pub(crate) words: Vec<Word>,
    pub(crate) redirs: Vec<Redir>,
}

/// Commands joined by `|`, optionally negated with `!`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Pipeline {
    pub(crate) negate: bool,
    pub(crate) commands: Vec<Command>,
}

/// `&&` / `||`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Connector {
    And,
    Or,
}

/// Pipelines joined by `&&` and `||`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AndOr {
    pub(crate) first: Pipeline,
    pub(crate) rest: Vec<(Connector, Pipeline)>,
}

/// A whole command line: and-or lists separated by `;`, `&` or newlines.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Script {
    pub(crate) items: Vec<AndOr>,
}

/// Why a command line could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ParseError {
    /// A token that cannot appear where it does.
    Unexpected(String),
    /// The line ended inside a construct.
    UnexpectedEof,
    /// An unterminated quote or backtick.
    NoClosingQuote,
    /// A valid `sh` construct this shell does not implement.
    Unsupported(String),
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unexpected(tok) => write!(f, "syntax error: '{tok}' unexpected"),
            Self::UnexpectedEof => write!(f, "syntax error: unexpected EOF"),
            Self::NoClosingQuote => write!(f, "syntax error: no closing quote"),
            Self::Unsupported(what) => write!(f, "syntax error: {what} not supported"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Semi,
    Amp,
    AndIf,
    OrIf,
    Pipe,
    Newline,
}

impl Op {
    fn text(self) -> &'static str {
        match self {
            Self::Semi => ";",
            Self::Amp => "&",
            Self::AndIf => "&&",
            Self::OrIf => "||",
            Self::Pipe => "|",
            Self::Newline => "newline",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Word(Word),
    Op(Op),
    Redir { fd: Option<u32>, op: RedirOp },
}

/// Parses a command line.
pub(crate) fn parse(src: &str) -> Result<Script, ParseError> {
    let chars: Vec<char> = src.chars().collect();
    let mut lexer = Lexer {
        chars: &chars,
        pos: 0,
    };
    let tokens = lexer.tokens(false)?;
    Parser { tokens, pos: 0 }.script()
}

struct Lexer<'a> {
    chars: &'a [char],
    pos: usize,
}

fn push_part(word: &mut Option<Word>, part: Part) {
    let w = word.get_or_insert_with(Vec::new);
    if let Part::Lit { text, quoted } = &part
        && let Some(Part::Lit {
            text: last,
            quoted: last_quoted,
        }) = w.last_mut()
        && last_quoted == quoted
    {
        last.push_str(text);
        return;
    }
    w.push(part);
}

fn lit(text: impl Into<String>, quoted: bool) -> Part {
    Part::Lit {
        text: text.into(),
        quoted,
    }
}

fn flush(word: &mut Option<Word>, tokens: &mut Vec<Token>) {
    if let Some(w) = word.take() {
        tokens.push(Token::Word(w));
    }
}

impl Lexer<'_> {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek();
        if c.is_some() {
            self.pos += 1;
        }
        c
    }

    /// Consumes `c` if it is the next character; tells whether it did.
    fn eat(&mut self, c: char) -> bool {
        let next = self.peek() == Some(c);
        if next {
            self.pos += 1;
        }
        next
    }

    /// Lexes until the end, or with `in_subst` until the `)` closing a `$(`.
    fn tokens(&mut self, in_subst: bool) -> Result<Vec<Token>, ParseError> {
        let mut tokens = Vec::new();
        let mut word: Option<Word> = None;
        loop {
            let Some(c) = self.peek() else {
                if in_subst {
                    return Err(ParseError::UnexpectedEof);
                }
                flush(&mut word, &mut tokens);
                return Ok(tokens);
            };
            match c {
                ' ' | '\t' => {
                    self.bump();
                    flush(&mut word, &mut tokens);
                }
                '\n' => {
                    self.bump();
                    flush(&mut word, &mut tokens);
                    tokens.push(Token::Op(Op::Newline));
                }
                ';' => {
                    self.bump();
                    flush(&mut word, &mut tokens);
                    if self.peek() == Some(';') {
                        return Err(ParseError::Unexpected(";;".to_owned()));
                    }
                    tokens.push(Token::Op(Op::Semi));
                }
                '&' | '|' => {
                    self.bump();
                    flush(&mut word, &mut tokens);
                    let op = match (c, self.eat(c)) {
                        ('&', true) => Op::AndIf,
                        ('&', false) => Op::Amp,
                        (_, true) => Op::OrIf,
                        (_, false) => Op::Pipe,
                    };
                    tokens.push(Token::Op(op));
                }
                '(' => return Err(ParseError::Unexpected("(".to_owned())),
                ')' => {
                    if in_subst {
                        self.bump();
                        flush(&mut word, &mut tokens);
                        return Ok(tokens);
                    }
                    return Err(ParseError::Unexpected(")".to_owned()));
                }
                '>' | '<' => {
                    let fd = io_number(&word);
                    if fd.is_some() {
                        word = None;
                    } else {
                        flush(&mut word, &mut tokens);
                    }
                    self.bump();
                    let op = if c == '>' {
                        if self.eat('>') {
                            RedirOp::Append
                        } else if self.eat('&') {
                            RedirOp::DupOut
                        } else {
                            // `>|` is a plain `>`.
                            self.eat('|');
                            RedirOp::Out
                        }
                    } else if self.eat('&') {
                        RedirOp::DupIn
                    } else if self.peek() == Some('<') {
                        return Err(ParseError::Unsupported("here-document".to_owned()));
                    } else {
                        RedirOp::In
                    };
                    tokens.push(Token::Redir { fd, op });
                }
                '#' if word.is_none() => {
                    while let Some(c) = self.peek() {
                        if c == '\n' {
                            break;
                        }
                        self.bump();
                    }
                }
                '\'' => {
                    self.bump();
                    let mut text = String::new();
                    loop {
                        match self.bump() {
                            None => return Err(ParseError::NoClosingQuote),
                            Some('\'') => break,
                            Some(ch) => text.push(ch),
                        }
                    }
                    push_part(&mut word, lit(text, true));
                }
                '"' => {
                    self.bump();
                    self.double_quoted(&mut word)?;
                }
                '\\' => {
                    self.bump();
                    match self.bump() {
                        None => push_part(&mut word, lit("\\", false)),
                        Some('\n') => {}
                        Some(ch) => push_part(&mut word, lit(ch, true)),
                    }
                }
                '$' => {
                    self.bump();
                    self.dollar(&mut word, false)?;
                }
                '`' => {
                    self.bump();
                    self.backtick(&mut word, false)?;
                }
                other => {
                    self.bump();
                    push_part(&mut word, lit(other, false));
                }
            }
        }
    }

    fn double_quoted(&mut self, word: &mut Option<Word>) -> Result<(), ParseError> {
        // `""` is an (empty) word of its own.
        push_part(word, lit("", true));
        loop {
            match self.bump() {
                None => return Err(ParseError::NoClosingQuote),
                Some('"') => return Ok(()),
                Some('\\') => match self.peek() {
                    Some(c @ ('$' | '`' | '"' | '\\')) => {
                        self.bump();
                        push_part(word, lit(c, true));
                    }
                    Some('\n') => {
                        self.bump();
                    }
                    _ => push_part(word, lit('\\', true)),
                },
                Some('$') => self.dollar(word, true)?,
                Some('`') => self.backtick(word, true)?,
                Some(c) => push_part(word, lit(c, true)),
            }
        }
    }

    /// After a `$`.
    fn dollar(&mut self, word: &mut Option<Word>, quoted: bool) -> Result<(), ParseError> {
        match self.peek() {
            Some('?') => {
                self.bump();
                push_part(word, Part::LastStatus { quoted });
            }
            Some('(') => {
                self.bump();
                if self.peek() == Some('(') {
                    return Err(ParseError::Unsupported("arithmetic expansion".to_owned()));
                }
                let tokens = self.tokens(true)?;
                let script = Parser { tokens, pos: 0 }.script()?;
                push_part(word, Part::Subst { script, quoted });
            }
            Some('{') => {
                self.bump();
                let mut name = String::new();
                loop {
                    match self.bump() {
                        None => return Err(ParseError::UnexpectedEof),
                        Some('}') => break,
                        Some(c) => name.push(c),
                    }
                }
                let valid = name == "?"
                    || (!name.is_empty()
                        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                        && !name.starts_with(|c: char| c.is_ascii_digit() && name.len() > 1));
                if !valid {
                    return Err(ParseError::Unsupported(format!("${{{name}}}")));
                }
                if name == "?" {
                    push_part(word, Part::LastStatus { quoted });
                } else {
                    push_part(word, Part::Param { name, quoted });
                }
            }
            Some(c) if c.is_ascii_alphabetic() || c == '_' => {
                let mut name = String::new();
                while let Some(c) = self.peek() {
                    if c.is_ascii_alphanumeric() || c == '_' {
                        name.push(c);
                        self.bump();
                    } else {
                        break;
                    }
                }
                push_part(word, Part::Param { name, quoted });
            }
            Some(c @ ('$' | '#' | '!' | '@' | '*' | '-' | '0'..='9')) => {
                self.bump();
                push_part(
                    word,
                    Part::Param {
                        name: c.to_string(),
                        quoted,
                    },
                );
            }
            _ => push_part(word, lit('$', quoted)),
        }
        Ok(())
    }

    /// After an opening backtick.
    fn backtick(&mut self, word: &mut Option<Word>, quoted: bool) -> Result<(), ParseError> {
        let mut inner = String::new();
        loop {
            match self.bump() {
                None => return Err(ParseError::NoClosingQuote),
                Some('`') => break,
                Some('\\') => match self.peek() {
                    Some(c @ ('`' | '\\' | '$')) => {
                        self.bump();
                        inner.push(c);
                    }
                    Some('"') if quoted => {
                        self.bump();
                        inner.push('"');
                    }
                    _ => inner.push('\\'),
                },
                Some(c) => inner.push(c),
            }
        }
        let chars: Vec<char> = inner.chars().collect();
        let tokens = Lexer {
            chars: &chars,
            pos: 0,
        }
        .tokens(false)?;
        let script = Parser { tokens, pos: 0 }.script()?;
        push_part(word, Part::Subst { script, quoted });
        Ok(())
    }
}

/// A word made only of unquoted digits right before `>`/`<` is a descriptor.
fn io_number(word: &Option<Word>) -> Option<u32> {
    match word.as_deref() {
        Some(
            [
                Part::Lit {
                    text,
                    quoted: false,
                },
            ],
        ) if !text.is_empty() && text.chars().all(|c| c.is_ascii_digit()) => text.parse().ok(),
        _ => None,
    }
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    fn unexpected(&self) -> ParseError {
        match self.peek() {
            None => ParseError::UnexpectedEof,
            Some(Token::Op(op)) => ParseError::Unexpected(op.text().to_owned()),
            Some(Token::Redir { .. }) => ParseError::Unexpected(">".to_owned()),
            Some(Token::Word(_)) => ParseError::Unexpected("word".to_owned()),
        }
    }

    fn skip_newlines(&mut self) {
        while self.peek() == Some(&Token::Op(Op::Newline)) {
            self.pos += 1;
        }
    }

    fn script(mut self) -> Result<Script, ParseError> {
        let mut items = Vec::new();
        self.skip_newlines();
        while self.peek().is_some() {
            items.push(self.and_or()?);
            match self.peek() {
                None => break,
                Some(Token::Op(Op::Semi | Op::Amp | Op::Newline)) => {
                    self.pos += 1;
                    self.skip_newlines();
                }
                Some(_) => return Err(self.unexpected()),
            }
        }
        Ok(Script { items })
    }

    fn and_or(&mut self) -> Result<AndOr, ParseError> {
        let first = self.pipeline()?;
        let mut rest = Vec::new();
        loop {
            let connector = match self.peek() {
                Some(Token::Op(Op::AndIf)) => Connector::And,
                Some(Token::Op(Op::OrIf)) => Connector::Or,
                _ => break,
            };
            self.pos += 1;
            self.skip_newlines();
            rest.push((connector, self.pipeline()?));
        }
        Ok(AndOr { first, rest })
    }

    fn pipeline(&mut self) -> Result<Pipeline, ParseError> {
        let mut negate = false;
        if let Some(Token::Word(w)) = self.peek()
            && w.as_slice()
                == [Part::Lit {
                    text: "!".to_owned(),
                    quoted: false,
                }]
        {
            negate = true;
            self.pos += 1;
        }
        let mut commands = vec![self.command()?];
        while self.peek() == Some(&Token::Op(Op::Pipe)) {
            self.pos += 1;
            self.skip_newlines();
            commands.push(self.command()?);
        }
        Ok(Pipeline { negate, commands })
    }

    fn command(&mut self) -> Result<Command, ParseError> {
        let mut cmd = Command::default();
        loop {
            match self.peek() {
                Some(Token::Word(w)) => {
                    cmd.words.push(w.clone());
                    self.pos += 1;
                }
                Some(Token::Redir { fd, op }) => {
                    let (fd, op) = (*fd, *op);
                    self.pos += 1;
                    let Some(Token::Word(target)) = self.peek() else {
                        return Err(self.unexpected());
                    };
                    let target = target.clone();
                    self.pos += 1;
                    let default_fd = if matches!(op, RedirOp::In | RedirOp::DupIn) {
                        0
                    } else {
                        1
                    };
                    cmd.redirs.push(Redir {
                        fd: fd.unwrap_or(default_fd),
                        op,
                        target,
                    });
                }
                _ => break,
            }
        }
        if cmd.words.is_empty() && cmd.redirs.is_empty() {
            return Err(self.unexpected());
        }
        Ok(cmd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(text: &str, quoted: bool) -> Part {
        lit(text, quoted)
    }

    fn words(src: &str) -> Vec<Word> {
        let script = parse(src).expect("parses");
        assert_eq!(script.items.len(), 1, "{src}");
        script.items[0].first.commands[0].words.clone()
    }

    #[test]
    fn quoting() {
        assert_eq!(
            words("echo 'a;b'"),
            vec![vec![l("echo", false)], vec![l("a;b", true)]]
        );
        assert_eq!(
            words(r#"echo "a b" c\ d"#),
            vec![
                vec![l("echo", false)],
                vec![l("a b", true)],
                vec![l("c", false), l(" ", true), l("d", false)],
            ]
        );
        assert_eq!(
            words("echo ''"),
            vec![vec![l("echo", false)], vec![l("", true)]]
        );
        assert_eq!(
            words(r#"echo "x\"y\$z\\w\q""#),
            vec![vec![l("echo", false)], vec![l(r#"x"y$z\w\q"#, true)]]
        );
        assert_eq!(
            words("echo 'it'\\''s'"),
            vec![vec![l("echo", false)], vec![l("it's", true)]]
        );
        assert_eq!(
            words("echo '$(id)' '`id`'"),
            vec![
                vec![l("echo", false)],
                vec![l("$(id)", true)],
                vec![l("`id`", true)],
            ]
        );
        assert_eq!(
            words("echo 'a\nb'"),
            vec![vec![l("echo", false)], vec![l("a\nb", true)]]
        );
    }

    #[test]
    fn operators_separate_commands() {
        let s = parse("a; b && c || d | e\nf & g").expect("parses");
        assert_eq!(s.items.len(), 4);
        assert_eq!(s.items[1].rest.len(), 2);
        assert_eq!(s.items[1].rest[0].0, Connector::And);
        assert_eq!(s.items[1].rest[1].0, Connector::Or);
        assert_eq!(s.items[1].rest[1].1.commands.len(), 2);
        assert!(parse("").expect("empty").items.is_empty());
        assert!(parse("  \n ; ").is_err());
        assert_eq!(parse("true;").expect("trailing ;").items.len(), 1);
    }

    #[test]
    fn parameters_and_substitutions() {
        let w = words("echo rc=$? \"$?\" $HOME ${X} $");
        assert_eq!(
            w[1],
            vec![l("rc=", false), Part::LastStatus { quoted: false }]
        );
        assert_eq!(w[2], vec![l("", true), Part::LastStatus { quoted: true }]);
        assert_eq!(
            w[3],
            vec![Part::Param {
                name: "HOME".to_owned(),
                quoted: false
            }]
        );
        assert_eq!(
            w[4],
            vec![Part::Param {
                name: "X".to_owned(),
                quoted: false
            }]
        );
        assert_eq!(w[5], vec![l("$", false)]);
        let w = words("echo $(getprop ro.serialno) \"[`id -u`]\"");
        assert!(
            matches!(&w[1][0], Part::Subst { quoted: false, script } if script.items.len() == 1)
        );
        assert!(matches!(&w[2][1], Part::Subst { quoted: true, .. }));
        // Nested substitution with quotes inside.
        let w = words("echo \"$(echo \"$(echo 'a)b')\")\"");
        assert!(matches!(&w[1][1], Part::Subst { quoted: true, .. }));
    }

    #[test]
    fn redirections() {
        let s = parse("cmd 2>&1 >/dev/null <in 3>>log").expect("parses");
        let c = &s.items[0].first.commands[0];
        assert_eq!(c.words.len(), 1);
        let r: Vec<_> = c.redirs.iter().map(|r| (r.fd, r.op)).collect();
        assert_eq!(
            r,
            vec![
                (2, RedirOp::DupOut),
                (1, RedirOp::Out),
                (0, RedirOp::In),
                (3, RedirOp::Append)
            ]
        );
    }

    #[test]
    fn negation_and_comments() {
        let s = parse("! false # a comment; not a command").expect("parses");
        assert!(s.items[0].first.negate);
        assert_eq!(s.items.len(), 1);
        assert_eq!(
            words("echo a#b"),
            vec![vec![l("echo", false)], vec![l("a#b", false)]]
        );
    }

    #[test]
    fn syntax_errors() {
        let check = |src: &str, err: ParseError| assert_eq!(parse(src), Err(err), "{src}");
        check("echo 'abc", ParseError::NoClosingQuote);
        check("echo \"abc", ParseError::NoClosingQuote);
        check("echo `abc", ParseError::NoClosingQuote);
        check("echo $(abc", ParseError::UnexpectedEof);
        check("; ls", ParseError::Unexpected(";".to_owned()));
        check("ls &&", ParseError::UnexpectedEof);
        check("ls | | wc", ParseError::Unexpected("|".to_owned()));
        check("ls ;; ls", ParseError::Unexpected(";;".to_owned()));
        check("(ls)", ParseError::Unexpected("(".to_owned()));
        check("echo )", ParseError::Unexpected(")".to_owned()));
        check("echo >", ParseError::UnexpectedEof);
        check(
            "echo $((1+1))",
            ParseError::Unsupported("arithmetic expansion".to_owned()),
        );
        check(
            "echo ${x:-y}",
            ParseError::Unsupported("${x:-y}".to_owned()),
        );
        assert_eq!(
            ParseError::Unexpected(";".to_owned()).to_string(),
            "syntax error: ';' unexpected"
        );
    }
}
