//! The on-device UI server this phone emulates: the uiautomator2 project's
//! `u2.jar` (`docs/screen-component.md`), as its official Python client
//! (PyPI `uiautomator2`) and the bridge start and speak to it.
//!
//! It is started like the real one, by a shell command line
//! `CLASSPATH=/data/local/tmp/u2.jar app_process / com.wetest.uia2.Main -p
//! PORT` ([`launch`]) after the jar was sent with the file service; it then
//! answers HTTP on that device port (`tcp:PORT` streams, what `adb forward`
//! opens) until that shell stream closes. The adb side (streams, the
//! running servers) is `adb::conn`'s; this module is the pure part: the
//! launch line, HTTP framing, and the JSON-RPC methods, answered from the
//! same screen model as `uiautomator dump` and `input` (`screen::layout`),
//! so every path sees one screen.
//!
//! The methods the official client's `dump_hierarchy`, `info`,
//! `clipboard`, `set_clipboard`, `send_keys` (on a phone without its IME),
//! `click`, `press` and `d(text=…)` selectors use are implemented;
//! `waitForExists` answers at once (this screen never animates). Others
//! answer JSON-RPC's "method not found".

use super::screen::{self, Widget};
use crate::state::PhoneState;
use serde_json::{Value, json};

/// The server's port when the launch line names none.
pub(crate) const DEFAULT_PORT: u16 = 9008;

/// The most bytes one request may take (head and body).
pub(crate) const MAX_REQUEST: usize = 1024 * 1024;

/// The jar and port of a launch line, or `None` when `command` is not one.
pub(crate) fn launch(command: &str) -> Option<(String, u16)> {
    let words: Vec<&str> = command.split_whitespace().collect();
    let jar = words.first()?.strip_prefix("CLASSPATH=")?;
    if words.get(1) != Some(&"app_process") || !words.contains(&"com.wetest.uia2.Main") {
        return None;
    }
    let port = match words.iter().position(|w| *w == "-p") {
        Some(i) => words.get(i + 1)?.parse().ok()?,
        None => DEFAULT_PORT,
    };
    Some((jar.to_owned(), port))
}

/// One HTTP request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Request {
    /// `GET`, `POST` …
    pub(crate) method: String,
    /// The path, e.g. `/jsonrpc/0`.
    pub(crate) path: String,
    /// The body.
    pub(crate) body: Vec<u8>,
}

/// What the bytes received so far on a stream hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Parsed {
    /// Not a whole request yet.
    Partial,
    /// A whole request.
    Whole(Request),
    /// Not HTTP (answered with 400, then the stream closes).
    Bad(String),
}

/// Parses the bytes received so far.
pub(crate) fn parse_request(buf: &[u8]) -> Parsed {
    if buf.len() > MAX_REQUEST {
        return Parsed::Bad(format!("a request over {MAX_REQUEST} bytes"));
    }
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut req = httparse::Request::new(&mut headers);
    let head = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Parsed::Partial,
        Err(e) => return Parsed::Bad(e.to_string()),
    };
    let length = req
        .headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("content-length"))
        .map(|h| String::from_utf8_lossy(h.value).trim().parse::<usize>());
    let length = match length {
        None => 0,
        Some(Ok(n)) => n,
        Some(Err(_)) => return Parsed::Bad("a bad Content-Length".into()),
    };
    if buf.len() < head + length {
        return Parsed::Partial;
    }
    Parsed::Whole(Request {
        method: req.method.unwrap_or("").to_owned(),
        path: req.path.unwrap_or("").to_owned(),
        body: buf[head..head + length].to_vec(),
    })
}

/// A whole HTTP/1.1 answer that closes the connection, as NanoHTTPD sends
/// when asked to.
pub(crate) fn response(status: u16, reason: &str, content_type: &str, body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

/// What the server does with one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Served {
    /// Answer these bytes, then close the stream.
    Answer(Vec<u8>),
    /// The server crashed on it: no answer, and it is gone.
    Died,
}

/// Answers one request from the phone's state (which it may change: a
/// click, a paste).
pub(crate) fn serve(st: &mut PhoneState, req: &Request) -> Served {
    if st.ui.ui_server_dies > 0 {
        st.ui.ui_server_dies -= 1;
        return Served::Died;
    }
    Served::Answer(match (req.method.as_str(), req.path.as_str()) {
        ("GET", "/ping") => response(200, "OK", "text/plain", b"pong"),
        ("POST", "/jsonrpc/0") => {
            let answer = match serde_json::from_slice::<Value>(&req.body) {
                Ok(call) => {
                    let id = call.get("id").cloned().unwrap_or(Value::Null);
                    let method = call.get("method").and_then(Value::as_str).unwrap_or("");
                    let params = call.get("params").cloned().unwrap_or(Value::Null);
                    match rpc(st, method, &params) {
                        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
                        Err((code, message)) => json!({
                            "jsonrpc": "2.0",
                            "id": id,
                            "error": {"code": code, "message": message},
                        }),
                    }
                }
                Err(e) => json!({
                    "jsonrpc": "2.0",
                    "id": null,
                    "error": {"code": -32700, "message": format!("Parse error: {e}")},
                }),
            };
            response(200, "OK", "application/json", answer.to_string().as_bytes())
        }
        _ => response(404, "Not Found", "text/plain", b"Not Found"),
    })
}

/// JSON-RPC's "method not found".
const NO_METHOD: i64 = -32601;
/// JSON-RPC's "invalid params".
const BAD_PARAMS: i64 = -32602;
/// The server's code for a selector that matches nothing.
const NOT_FOUND: i64 = -32002;

type RpcResult = Result<Value, (i64, String)>;

/// The `n`th positional parameter (the client sends `[]`, or `{}` when a
/// method takes none).
fn arg(params: &Value, n: usize) -> Option<&Value> {
    params.as_array().and_then(|a| a.get(n))
}

fn number(params: &Value, n: usize) -> Result<f64, (i64, String)> {
    arg(params, n)
        .and_then(Value::as_f64)
        .ok_or_else(|| (BAD_PARAMS, format!("parameter {n} must be a number")))
}

fn rpc(st: &mut PhoneState, method: &str, params: &Value) -> RpcResult {
    match method {
        "deviceInfo" => Ok(device_info(st)),
        "dumpWindowHierarchy" => Ok(Value::String(screen::dump_xml(st))),
        "click" => {
            let (x, y) = (number(params, 0)?, number(params, 1)?);
            if arg(params, 2).is_some() {
                // A long click: the screen reacts to it as to a tap.
                screen::swipe(st, (x as i32, y as i32), (x as i32, y as i32));
            } else {
                screen::tap(st, x as i32, y as i32);
            }
            Ok(Value::Bool(true))
        }
        "swipe" => {
            let [fx, fy, tx, ty] = [0, 1, 2, 3].map(|i| number(params, i));
            let from = (fx? as i32, fy? as i32);
            screen::swipe(st, from, (tx? as i32, ty? as i32));
            Ok(Value::Bool(true))
        }
        "pressKey" | "pressKeyCode" => {
            let key = match arg(params, 0) {
                Some(Value::String(name)) => name.to_ascii_uppercase(),
                Some(Value::Number(code)) => code.to_string(),
                _ => return Err((BAD_PARAMS, "a key name or code".into())),
            };
            let done = super::services::input(st, &["keyevent".into(), key]);
            Ok(Value::Bool(done.status == 0))
        }
        "wakeUp" => {
            st.display.screen_on = true;
            Ok(Value::Null)
        }
        "sleep" => {
            st.display.screen_on = false;
            Ok(Value::Null)
        }
        "setClipboard" => {
            let text = arg(params, 1)
                .and_then(Value::as_str)
                .ok_or((BAD_PARAMS, "setClipboard(label, text)".to_owned()))?;
            st.ui.clipboard = Some(text.to_owned());
            Ok(Value::Null)
        }
        "getClipboard" => Ok(st.ui.clipboard.clone().map_or(Value::Null, Value::String)),
        "pasteClipboard" => {
            let clip = st.ui.clipboard.clone().unwrap_or_default();
            screen::paste(st, &clip);
            Ok(Value::Null)
        }
        "clearInputText" => {
            if st.ui.text_focused {
                st.ui.text.clear();
            }
            Ok(Value::Null)
        }
        "objInfo" => {
            let found = find(st, params)?;
            found.map(|w| info(&w)).ok_or_else(|| {
                (
                    NOT_FOUND,
                    "androidx.test.uiautomator.UiObjectNotFoundException".into(),
                )
            })
        }
        "waitForExists" | "exist" => Ok(Value::Bool(find(st, params)?.is_some())),
        "waitUntilGone" => Ok(Value::Bool(find(st, params)?.is_none())),
        "count" => {
            let selector = arg(params, 0).cloned().unwrap_or(Value::Null);
            let n = screen::layout(st)
                .iter()
                .filter(|w| matches(w, &selector).unwrap_or(false))
                .count();
            Ok(json!(n))
        }
        "getText" => find(st, params)?
            .map(|w| Value::String(w.text))
            .ok_or_else(|| {
                (
                    NOT_FOUND,
                    "androidx.test.uiautomator.UiObjectNotFoundException".into(),
                )
            }),
        "setText" | "clearTextField" => {
            let Some(w) = find(st, params)? else {
                return Err((
                    NOT_FOUND,
                    "androidx.test.uiautomator.UiObjectNotFoundException".into(),
                ));
            };
            if w.class != "android.widget.EditText" {
                return Ok(Value::Bool(false));
            }
            st.ui.text = arg(params, 1)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            Ok(Value::Bool(true))
        }
        other => Err((NO_METHOD, format!("Method not found: {other}"))),
    }
}

fn device_info(st: &PhoneState) -> Value {
    let d = &st.display;
    let (w, h) = if d.rotation % 2 == 1 {
        (d.height, d.width)
    } else {
        (d.width, d.height)
    };
    let dp = |px: u32| px * 160 / d.density.max(1);
    json!({
        "currentPackageName": st.foreground_package(),
        "displayHeight": h,
        "displayWidth": w,
        "displayRotation": d.rotation,
        "displaySizeDpX": dp(w),
        "displaySizeDpY": dp(h),
        "naturalOrientation": d.rotation.is_multiple_of(2),
        "productName": st.props.name,
        "screenOn": d.screen_on,
        "sdkInt": st.props.sdk,
    })
}

/// The widget the selector in the first parameter picks (its `instance`th
/// match), if any.
fn find(st: &PhoneState, params: &Value) -> Result<Option<Widget>, (i64, String)> {
    let selector = arg(params, 0)
        .filter(|s| s.is_object())
        .ok_or((BAD_PARAMS, "a selector object".to_owned()))?;
    let instance = selector
        .get("instance")
        .and_then(Value::as_u64)
        .unwrap_or(0) as usize;
    let mut hits = Vec::new();
    for w in screen::layout(st) {
        if matches(&w, selector)? {
            hits.push(w);
        }
    }
    Ok(hits.into_iter().nth(instance))
}

/// Whether `w` fits every field of a selector (`mask` and the child
/// selectors, which this screen has no use for, are ignored).
fn matches(w: &Widget, selector: &Value) -> Result<bool, (i64, String)> {
    let Some(fields) = selector.as_object() else {
        return Ok(false);
    };
    for (key, want) in fields {
        let s = want.as_str().unwrap_or("");
        let b = want.as_bool();
        let fits = match key.as_str() {
            "mask" | "childOrSibling" | "childOrSiblingSelector" | "instance" => true,
            "text" => w.text == s,
            "textContains" => w.text.contains(s),
            "textStartsWith" => w.text.starts_with(s),
            "textMatches" => regex_fits(s, &w.text)?,
            "className" => w.class == s,
            "classNameMatches" => regex_fits(s, w.class)?,
            "description" => w.desc == s,
            "descriptionContains" => w.desc.contains(s),
            "descriptionStartsWith" => w.desc.starts_with(s),
            "descriptionMatches" => regex_fits(s, &w.desc)?,
            "resourceId" => w.id == s,
            "resourceIdMatches" => regex_fits(s, &w.id)?,
            "packageName" => w.package == s,
            "packageNameMatches" => regex_fits(s, w.package)?,
            "checkable" => b == Some(w.checkable),
            "checked" => b == Some(w.checked),
            "clickable" => b == Some(w.clickable),
            "focusable" => b == Some(w.focusable),
            "focused" => b == Some(w.focused),
            "enabled" => b == Some(true),
            "scrollable" | "longClickable" | "selected" => b == Some(false),
            other => {
                return Err((
                    BAD_PARAMS,
                    format!("selector field {other} is not supported"),
                ));
            }
        };
        if !fits {
            return Ok(false);
        }
    }
    Ok(true)
}

/// A `…Matches` field: the whole value must match, as Java's `matches` does.
fn regex_fits(pattern: &str, value: &str) -> Result<bool, (i64, String)> {
    regex::Regex::new(&format!("^(?:{pattern})$"))
        .map(|r| r.is_match(value))
        .map_err(|e| (BAD_PARAMS, format!("bad pattern: {e}")))
}

/// `objInfo`'s answer for one widget.
fn info(w: &Widget) -> Value {
    let [l, t, r, b] = w.bounds;
    let bounds = json!({"left": l, "top": t, "right": r, "bottom": b});
    json!({
        "bounds": bounds,
        "visibleBounds": bounds,
        "childCount": 0,
        "className": w.class,
        "contentDescription": if w.desc.is_empty() { Value::Null } else { Value::String(w.desc.clone()) },
        "packageName": w.package,
        "resourceName": if w.id.is_empty() { Value::Null } else { Value::String(w.id.clone()) },
        "text": w.text,
        "checkable": w.checkable,
        "checked": w.checked,
        "clickable": w.clickable,
        "enabled": true,
        "focusable": w.focusable,
        "focused": w.focused,
        "longClickable": false,
        "scrollable": false,
        "selected": false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where the official client (and the bridge) put the jar.
    const JAR: &str = "/data/local/tmp/u2.jar";

    fn call(st: &mut PhoneState, method: &str, params: Value) -> Value {
        let body =
            json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
        let req = Request {
            method: "POST".into(),
            path: "/jsonrpc/0".into(),
            body: body.into_bytes(),
        };
        let Served::Answer(raw) = serve(st, &req) else {
            panic!("the server died");
        };
        let text = String::from_utf8(raw).unwrap();
        let body = text.split("\r\n\r\n").nth(1).unwrap();
        serde_json::from_str(body).unwrap()
    }

    #[test]
    fn launch_lines() {
        assert_eq!(
            launch("CLASSPATH=/data/local/tmp/u2.jar app_process / com.wetest.uia2.Main -p 9008"),
            Some((JAR.to_owned(), 9008))
        );
        assert_eq!(
            launch("CLASSPATH=/x.jar app_process / com.wetest.uia2.Main"),
            Some(("/x.jar".to_owned(), 9008))
        );
        assert_eq!(launch("CLASSPATH=/x.jar app_process / other.Main"), None);
        assert_eq!(launch("app_process / com.wetest.uia2.Main"), None);
        assert_eq!(
            launch("CLASSPATH=/x app_process / com.wetest.uia2.Main -p x"),
            None
        );
    }

    #[test]
    fn requests_wait_for_their_body() {
        let whole = b"POST /jsonrpc/0 HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}";
        assert_eq!(parse_request(&whole[..20]), Parsed::Partial);
        assert_eq!(parse_request(&whole[..whole.len() - 1]), Parsed::Partial);
        assert_eq!(
            parse_request(whole),
            Parsed::Whole(Request {
                method: "POST".into(),
                path: "/jsonrpc/0".into(),
                body: b"{}".to_vec()
            })
        );
        assert!(matches!(
            parse_request(b"\x01\x02 nonsense\r\n\r\n"),
            Parsed::Bad(_)
        ));
        assert!(matches!(
            parse_request(b"POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n"),
            Parsed::Bad(_)
        ));
    }

    #[test]
    fn ping_and_unknown_paths() {
        let mut st = PhoneState::default();
        let get = |path: &str| Request {
            method: "GET".into(),
            path: path.into(),
            body: Vec::new(),
        };
        let Served::Answer(pong) = serve(&mut st, &get("/ping")) else {
            panic!()
        };
        assert!(pong.ends_with(b"\r\n\r\npong"));
        let Served::Answer(missing) = serve(&mut st, &get("/nope")) else {
            panic!()
        };
        assert!(missing.starts_with(b"HTTP/1.1 404"));
        st.ui.ui_server_dies = 1;
        assert_eq!(serve(&mut st, &get("/ping")), Served::Died);
        assert!(matches!(serve(&mut st, &get("/ping")), Served::Answer(_)));
    }

    #[test]
    fn clipboard_paste_types_any_text_into_the_focused_field() {
        let mut st = PhoneState::default();
        let text = "Grüße, \"quoted\" 100% $HOME; 你好 👋";
        assert_eq!(
            call(&mut st, "getClipboard", json!({}))["result"],
            Value::Null
        );
        call(&mut st, "setClipboard", json!([null, text]));
        assert_eq!(
            call(&mut st, "getClipboard", json!({}))["result"],
            json!(text)
        );
        // Nothing focused: nothing typed.
        call(&mut st, "pasteClipboard", json!({}));
        assert_eq!(st.ui.text, "");
        let field = call(
            &mut st,
            "objInfo",
            json!([{"className": "android.widget.EditText", "mask": 16}]),
        );
        let b = &field["result"]["bounds"];
        let x = (b["left"].as_i64().unwrap() + b["right"].as_i64().unwrap()) / 2;
        let y = (b["top"].as_i64().unwrap() + b["bottom"].as_i64().unwrap()) / 2;
        assert_eq!(call(&mut st, "click", json!([x, y]))["result"], json!(true));
        call(&mut st, "pasteClipboard", json!({}));
        assert_eq!(st.ui.text, text);
        assert!(
            call(&mut st, "dumpWindowHierarchy", json!([false, 50]))["result"]
                .as_str()
                .unwrap()
                .contains("你好 👋")
        );
    }

    #[test]
    fn selectors_find_tap_and_report_missing_objects() {
        let mut st = PhoneState::default();
        assert_eq!(
            call(
                &mut st,
                "waitForExists",
                json!([{"text": "Settings", "mask": 1}, 1000])
            )["result"],
            json!(true)
        );
        assert_eq!(
            call(&mut st, "count", json!([{"textMatches": "C.*", "mask": 4}]))["result"],
            json!(4)
        );
        let missing = call(&mut st, "objInfo", json!([{"text": "Nope", "mask": 1}]));
        assert_eq!(missing["error"]["code"], json!(NOT_FOUND));
        let unknown = call(&mut st, "noSuchMethod", json!([]));
        assert_eq!(unknown["error"]["code"], json!(NO_METHOD));
        let info = call(&mut st, "deviceInfo", json!({}));
        assert_eq!(info["result"]["displayWidth"], json!(1080));
        assert_eq!(
            info["result"]["currentPackageName"],
            json!("com.android.launcher3")
        );
        assert_eq!(
            call(&mut st, "pressKey", json!(["home"]))["result"],
            json!(true)
        );
    }
}
