//! Go's `encoding/json` on the values Kubernetes decodes: `Marshal` (`encode.go`), and
//! `Unmarshal` into `map[string]interface {}` or `[]interface {}` with the syntax errors of
//! its scanner (`scanner.go`) and its type errors (`decode.go`).

use std::fmt::Write as _;

use serde_json::Value;

use super::strconv::{format_float, quote};
use super::value::GoValue;

/// Go's `json.Marshal` of a value decoded from Kubernetes JSON: map keys sorted, `<`, `>`,
/// `&`, U+2028 and U+2029 escaped, `int64` in decimal and `float64` as `encoding/json`
/// writes it (`1e+21`, `1e-7`, `0.5`).
pub fn marshal(v: &Value) -> String {
    let mut out = String::new();
    encode(&mut out, v);
    out
}

fn encode(out: &mut String, v: &Value) {
    match GoValue::of(v) {
        GoValue::Nil => out.push_str("null"),
        GoValue::Bool(b) => out.push_str(if b { "true" } else { "false" }),
        GoValue::Int(i) => {
            let _ = write!(out, "{i}");
        }
        GoValue::Float(x) => out.push_str(&encode_float(x)),
        GoValue::Str(s) => encode_string(out, s),
        GoValue::Slice(items) => {
            out.push('[');
            for (k, item) in items.iter().enumerate() {
                if k > 0 {
                    out.push(',');
                }
                encode(out, item);
            }
            out.push(']');
        }
        GoValue::Map(m) => {
            out.push('{');
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            for (k, key) in keys.into_iter().enumerate() {
                if k > 0 {
                    out.push(',');
                }
                encode_string(out, key);
                out.push(':');
                if let Some(value) = m.get(key) {
                    encode(out, value);
                }
            }
            out.push('}');
        }
    }
}

/// `encoding/json`'s float encoder: `'f'` format, or `'e'` below 1e-6 and from 1e21 on,
/// with `e-07` cleaned to `e-7`.
fn encode_float(x: f64) -> String {
    let abs = x.abs();
    let fmt = if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        b'e'
    } else {
        b'f'
    };
    let mut s = format_float(x, fmt, -1);
    if fmt == b'e' {
        let b = s.as_bytes();
        let n = b.len();
        if n >= 4 && b[n - 4] == b'e' && b[n - 3] == b'-' && b[n - 2] == b'0' {
            s.remove(n - 2);
        }
    }
    s
}

/// `encoding/json`'s string encoder with HTML escaping (Go 1.22+ short escapes).
fn encode_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '\\' | '"' => {
                out.push('\\');
                out.push(c);
            }
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A Go string holding any bytes, as `Marshal` writes it: each byte that is not part of
/// valid UTF-8 becomes U+FFFD.
pub fn string_from_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    let mut rest = bytes;
    loop {
        match std::str::from_utf8(rest) {
            Ok(s) => {
                out.push_str(s);
                return out;
            }
            Err(e) => {
                let (valid, after) = rest.split_at(e.valid_up_to());
                out.push_str(std::str::from_utf8(valid).unwrap_or_default());
                let bad = e.error_len().unwrap_or(after.len()).max(1);
                out.extend(std::iter::repeat_n(char::REPLACEMENT_CHARACTER, bad));
                rest = after.get(bad..).unwrap_or_default();
            }
        }
    }
}

/// What `json.Unmarshal` decodes into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// `map[string]interface {}`.
    Object,
    /// `[]interface {}`.
    Array,
}

impl Target {
    fn go_type(self) -> &'static str {
        match self {
            Target::Object => "map[string]interface {}",
            Target::Array => "[]interface {}",
        }
    }
}

/// Go's `json.Unmarshal(s, &target)`: Go's syntax errors, its type mismatch errors, `null`
/// giving a nil map or slice, and every number a `float64`.
pub fn unmarshal(s: &str, target: Target) -> Result<Value, String> {
    let overflow = check_valid(s.as_bytes())?;
    let first = s.bytes().find(|c| !is_space(*c)).unwrap_or(b'n');
    let found = match first {
        b'{' => "object",
        b'[' => "array",
        b'"' => "string",
        b't' | b'f' => "bool",
        b'n' => return Ok(Value::Null),
        _ => "number",
    };
    let matches = matches!(
        (target, found),
        (Target::Object, "object") | (Target::Array, "array")
    );
    if !matches {
        return Err(format!(
            "json: cannot unmarshal {found} into Go value of type {}",
            target.go_type()
        ));
    }
    if let Some(number) = overflow {
        return Err(format!(
            "json: cannot unmarshal number {number} into Go value of type float64"
        ));
    }
    // Valid JSON as Go reads it; serde only refuses nesting deeper than 128 and lone
    // surrogate escapes, which Go accepts.
    let v: Value = serde_json::from_str(s).map_err(|e| e.to_string())?;
    Ok(decoded(v))
}

/// A JSON value as `json.Unmarshal` into `interface {}` gives it: every number a float64.
pub fn decoded(v: Value) -> Value {
    match v {
        Value::Number(n) if n.as_i64().is_some() || n.as_u64().is_some() => n
            .as_f64()
            .and_then(serde_json::Number::from_f64)
            .map_or(Value::Number(n), Value::Number),
        Value::Array(items) => Value::Array(items.into_iter().map(decoded).collect()),
        Value::Object(m) => Value::Object(m.into_iter().map(|(k, v)| (k, decoded(v))).collect()),
        other => other,
    }
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

/// Go's `quoteChar`: the byte as a rune (Latin-1) in single quotes.
fn quote_char(c: u8) -> String {
    match c {
        b'\'' => r"'\''".to_string(),
        b'"' => "'\"'".to_string(),
        _ => {
            let q = quote(char::from(c).encode_utf8(&mut [0u8; 4]));
            format!("'{}'", q.get(1..q.len() - 1).unwrap_or_default())
        }
    }
}

/// Go's `maxNestingDepth`: the deepest nesting `Unmarshal` reads.
pub const MAX_NESTING_DEPTH: usize = 10_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Parse {
    ObjectKey,
    ObjectValue,
    ArrayValue,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    BeginValue,
    BeginValueOrEmpty,
    BeginStringOrEmpty,
    BeginString,
    EndValue,
    EndTop,
    InString,
    InStringEsc,
    /// Hex digits of a `\u` escape still expected.
    InStringEscU(u8),
    Neg,
    One,
    Zero,
    Dot,
    Dot0,
    E,
    ESign,
    E0,
    /// A literal (`true`, `false`, `null`): its name and the bytes still expected.
    Literal(&'static str, &'static [u8]),
}

/// Go's `json` scanner (`scanner.go`), run over the whole input as `checkValid` does.
struct Scanner {
    state: State,
    stack: Vec<Parse>,
    end_top: bool,
    /// Start of the current number literal.
    number_start: Option<usize>,
    /// The first number literal beyond float64.
    overflow: Option<String>,
}

fn syntax(c: u8, context: &str) -> String {
    format!("invalid character {} {context}", quote_char(c))
}

/// Go's `checkValid`: `Ok` with the first number that overflows float64 (Go reports it
/// only when decoding), or Go's syntax error.
fn check_valid(data: &[u8]) -> Result<Option<String>, String> {
    let mut s = Scanner {
        state: State::BeginValue,
        stack: Vec::new(),
        end_top: false,
        number_start: None,
        overflow: None,
    };
    for (i, &c) in data.iter().enumerate() {
        s.step(data, i, c)?;
    }
    // eof
    if !s.end_top {
        s.step(data, data.len(), b' ')?;
        if !s.end_top {
            return Err("unexpected end of JSON input".to_string());
        }
    }
    Ok(s.overflow)
}

impl Scanner {
    fn push(&mut self, c: u8, p: Parse) -> Result<(), String> {
        self.stack.push(p);
        if self.stack.len() > MAX_NESTING_DEPTH {
            return Err(syntax(c, "exceeded max depth"));
        }
        Ok(())
    }

    fn pop(&mut self) {
        self.stack.pop();
        if self.stack.is_empty() {
            self.state = State::EndTop;
            self.end_top = true;
        } else {
            self.state = State::EndValue;
        }
    }

    /// Ends a number literal at `end`, noting it when it overflows float64.
    fn end_number(&mut self, data: &[u8], end: usize) {
        if let Some(start) = self.number_start.take() {
            let text = String::from_utf8_lossy(data.get(start..end).unwrap_or_default());
            if self.overflow.is_none() && text.parse::<f64>().is_ok_and(f64::is_infinite) {
                self.overflow = Some(text.into_owned());
            }
        }
    }

    fn step(&mut self, data: &[u8], i: usize, c: u8) -> Result<(), String> {
        match self.state {
            State::BeginValueOrEmpty => {
                if is_space(c) {
                    return Ok(());
                }
                if c == b']' {
                    return self.end_value(data, i, c);
                }
                self.begin_value(i, c)
            }
            State::BeginValue => self.begin_value(i, c),
            State::BeginStringOrEmpty => {
                if is_space(c) {
                    return Ok(());
                }
                if c == b'}' {
                    if let Some(top) = self.stack.last_mut() {
                        *top = Parse::ObjectValue;
                    }
                    return self.end_value(data, i, c);
                }
                self.begin_string(c)
            }
            State::BeginString => self.begin_string(c),
            State::EndValue => self.end_value(data, i, c),
            State::EndTop => {
                if is_space(c) {
                    Ok(())
                } else {
                    Err(syntax(c, "after top-level value"))
                }
            }
            State::InString => {
                match c {
                    b'"' => self.state = State::EndValue,
                    b'\\' => self.state = State::InStringEsc,
                    c if c < 0x20 => return Err(syntax(c, "in string literal")),
                    _ => {}
                }
                Ok(())
            }
            State::InStringEsc => match c {
                b'b' | b'f' | b'n' | b'r' | b't' | b'\\' | b'/' | b'"' => {
                    self.state = State::InString;
                    Ok(())
                }
                b'u' => {
                    self.state = State::InStringEscU(4);
                    Ok(())
                }
                _ => Err(syntax(c, "in string escape code")),
            },
            State::InStringEscU(left) => {
                if !c.is_ascii_hexdigit() {
                    return Err(syntax(c, "in \\u hexadecimal character escape"));
                }
                self.state = if left <= 1 {
                    State::InString
                } else {
                    State::InStringEscU(left - 1)
                };
                Ok(())
            }
            State::Neg => match c {
                b'0' => {
                    self.state = State::Zero;
                    Ok(())
                }
                b'1'..=b'9' => {
                    self.state = State::One;
                    Ok(())
                }
                _ => Err(syntax(c, "in numeric literal")),
            },
            State::One => {
                if c.is_ascii_digit() {
                    return Ok(());
                }
                self.zero(data, i, c)
            }
            State::Zero => self.zero(data, i, c),
            State::Dot => {
                if c.is_ascii_digit() {
                    self.state = State::Dot0;
                    return Ok(());
                }
                Err(syntax(c, "after decimal point in numeric literal"))
            }
            State::Dot0 => {
                if c.is_ascii_digit() {
                    return Ok(());
                }
                if c == b'e' || c == b'E' {
                    self.state = State::E;
                    return Ok(());
                }
                self.end_value(data, i, c)
            }
            State::E => {
                if c == b'+' || c == b'-' {
                    self.state = State::ESign;
                    return Ok(());
                }
                self.e_sign(c)
            }
            State::ESign => self.e_sign(c),
            State::E0 => {
                if c.is_ascii_digit() {
                    return Ok(());
                }
                self.end_value(data, i, c)
            }
            State::Literal(name, rest) => match rest.split_first() {
                Some((&want, tail)) if want == c => {
                    self.state = if tail.is_empty() {
                        State::EndValue
                    } else {
                        State::Literal(name, tail)
                    };
                    Ok(())
                }
                Some((&want, _)) => Err(syntax(
                    c,
                    &format!("in literal {name} (expecting {})", quote_char(want)),
                )),
                None => self.end_value(data, i, c),
            },
        }
    }

    fn begin_value(&mut self, i: usize, c: u8) -> Result<(), String> {
        if is_space(c) {
            return Ok(());
        }
        match c {
            b'{' => {
                self.state = State::BeginStringOrEmpty;
                return self.push(c, Parse::ObjectKey);
            }
            b'[' => {
                self.state = State::BeginValueOrEmpty;
                return self.push(c, Parse::ArrayValue);
            }
            b'"' => self.state = State::InString,
            b'-' => self.state = State::Neg,
            b'0' => self.state = State::Zero,
            b'1'..=b'9' => self.state = State::One,
            b't' => self.state = State::Literal("true", b"rue"),
            b'f' => self.state = State::Literal("false", b"alse"),
            b'n' => self.state = State::Literal("null", b"ull"),
            _ => return Err(syntax(c, "looking for beginning of value")),
        }
        if matches!(self.state, State::Neg | State::Zero | State::One) {
            self.number_start = Some(i);
        }
        Ok(())
    }

    fn begin_string(&mut self, c: u8) -> Result<(), String> {
        if is_space(c) {
            return Ok(());
        }
        if c == b'"' {
            self.state = State::InString;
            return Ok(());
        }
        Err(syntax(c, "looking for beginning of object key string"))
    }

    fn zero(&mut self, data: &[u8], i: usize, c: u8) -> Result<(), String> {
        match c {
            b'.' => {
                self.state = State::Dot;
                Ok(())
            }
            b'e' | b'E' => {
                self.state = State::E;
                Ok(())
            }
            _ => self.end_value(data, i, c),
        }
    }

    fn e_sign(&mut self, c: u8) -> Result<(), String> {
        if c.is_ascii_digit() {
            self.state = State::E0;
            return Ok(());
        }
        Err(syntax(c, "in exponent of numeric literal"))
    }

    fn end_value(&mut self, data: &[u8], i: usize, c: u8) -> Result<(), String> {
        self.end_number(data, i);
        let Some(&top) = self.stack.last() else {
            // The top-level value ended before this byte.
            self.state = State::EndTop;
            self.end_top = true;
            return self.step(data, i, c);
        };
        if is_space(c) {
            self.state = State::EndValue;
            return Ok(());
        }
        match top {
            Parse::ObjectKey => {
                if c == b':' {
                    if let Some(t) = self.stack.last_mut() {
                        *t = Parse::ObjectValue;
                    }
                    self.state = State::BeginValue;
                    return Ok(());
                }
                Err(syntax(c, "after object key"))
            }
            Parse::ObjectValue => match c {
                b',' => {
                    if let Some(t) = self.stack.last_mut() {
                        *t = Parse::ObjectKey;
                    }
                    self.state = State::BeginString;
                    Ok(())
                }
                b'}' => {
                    self.pop();
                    Ok(())
                }
                _ => Err(syntax(c, "after object key:value pair")),
            },
            Parse::ArrayValue => match c {
                b',' => {
                    self.state = State::BeginValue;
                    Ok(())
                }
                b']' => {
                    self.pop();
                    Ok(())
                }
                _ => Err(syntax(c, "after array element")),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `json.Marshal` of decoded values (`encode_test.go`'s float and HTML-escaping rules):
    /// sorted keys, `int64` in decimal, `float64` in `'f'` form between 1e-6 and 1e21 and
    /// `'e'` form outside, `<`, `>`, `&`, U+2028 and U+2029 escaped, DEL kept.
    #[test]
    fn marshals_as_go() {
        let table = [
            (
                json!({"b": "<&>", "a": [1, 1.5, 1e21, 1e-7, 0.000001, null, true]}),
                r#"{"a":[1,1.5,1e+21,1e-7,0.000001,null,true],"b":"\u003c\u0026\u003e"}"#,
            ),
            (
                json!({"b": 1.0, "a": [1e21, 1e-7, 0.5, "x"]}),
                r#"{"a":[1e+21,1e-7,0.5,"x"],"b":1}"#,
            ),
            (
                json!("\u{8}\u{c}\u{1}\u{2028}\"\\\u{7f}"),
                "\"\\b\\f\\u0001\\u2028\\\"\\\\\u{7f}\"",
            ),
            (json!(2.0), "2"),
            (json!(-0.0), "-0"),
            (json!(123456789.0), "123456789"),
            (json!(1e20), "100000000000000000000"),
            (json!(1.2e-6), "0.0000012"),
            (json!(1.5e300), "1.5e+300"),
            // Above int64, a number is a float64.
            (json!(18446744073709551615u64), "18446744073709552000"),
            (json!({"k": {"z": [], "a": {}}}), r#"{"k":{"a":{},"z":[]}}"#),
        ];
        for (value, want) in table {
            assert_eq!(marshal(&value), want, "{value}");
        }
    }

    #[test]
    fn bytes_become_a_string_as_marshal_writes_it() {
        for (bytes, want) in [
            (&b"ok"[..], "ok"),
            (b"\xff", "\u{fffd}"),
            (b"a\xe0\xa0z", "a\u{fffd}\u{fffd}z"),
            (b"\xed\xa0\x80", "\u{fffd}\u{fffd}\u{fffd}"),
            (b"\xc3", "\u{fffd}"),
            ("é".as_bytes(), "é"),
        ] {
            assert_eq!(string_from_bytes(bytes), want, "{bytes:?}");
        }
    }

    #[test]
    fn unmarshal_like_go() {
        let obj = Target::Object;
        assert_eq!(
            unmarshal(r#"{"a": 1, "b": [true, null]}"#, obj),
            Ok(json!({"a": 1.0, "b": [true, null]}))
        );
        assert_eq!(unmarshal(" null ", obj), Ok(Value::Null));
        assert_eq!(unmarshal("[1, 2]", Target::Array), Ok(json!([1.0, 2.0])));
        let err = |s: &str, t| unmarshal(s, t).err().unwrap_or_default();
        assert_eq!(err("", obj), "unexpected end of JSON input");
        assert_eq!(err("{\"a\":", obj), "unexpected end of JSON input");
        assert_eq!(
            err("x", obj),
            "invalid character 'x' looking for beginning of value"
        );
        assert_eq!(
            err("{a}", obj),
            "invalid character 'a' looking for beginning of object key string"
        );
        assert_eq!(
            err("{\"a\" 1}", obj),
            "invalid character '1' after object key"
        );
        assert_eq!(
            err("{\"a\":1 \"b\"}", obj),
            "invalid character '\"' after object key:value pair"
        );
        assert_eq!(
            err("[1 2]", Target::Array),
            "invalid character '2' after array element"
        );
        assert_eq!(
            err("{} x", obj),
            "invalid character 'x' after top-level value"
        );
        assert_eq!(
            err("[tru]", Target::Array),
            "invalid character ']' in literal true (expecting 'e')"
        );
        assert_eq!(
            err("[01]", Target::Array),
            "invalid character '1' after array element"
        );
        assert_eq!(
            err("[1.]", Target::Array),
            "invalid character ']' after decimal point in numeric literal"
        );
        assert_eq!(
            err("[-x]", Target::Array),
            "invalid character 'x' in numeric literal"
        );
        assert_eq!(
            err("[1e]", Target::Array),
            "invalid character ']' in exponent of numeric literal"
        );
        assert_eq!(
            err("[\"\\x\"]", Target::Array),
            "invalid character 'x' in string escape code"
        );
        assert_eq!(
            err("[\"\\u12g\"]", Target::Array),
            "invalid character 'g' in \\u hexadecimal character escape"
        );
        assert_eq!(
            err("[\"a\nb\"]", Target::Array),
            "invalid character '\\n' in string literal"
        );
        assert_eq!(
            err("é", obj),
            "invalid character 'Ã' looking for beginning of value"
        );
        assert_eq!(
            err("[1]", obj),
            "json: cannot unmarshal array into Go value of type map[string]interface {}"
        );
        assert_eq!(
            err("\"s\"", obj),
            "json: cannot unmarshal string into Go value of type map[string]interface {}"
        );
        assert_eq!(
            err("{}", Target::Array),
            "json: cannot unmarshal object into Go value of type []interface {}"
        );
        assert_eq!(
            err("1", Target::Array),
            "json: cannot unmarshal number into Go value of type []interface {}"
        );
        assert_eq!(
            err("true", obj),
            "json: cannot unmarshal bool into Go value of type map[string]interface {}"
        );
        assert_eq!(
            err("[1e400]", Target::Array),
            "json: cannot unmarshal number 1e400 into Go value of type float64"
        );
        let deep = format!("{}{}", "[".repeat(10_001), "]".repeat(10_001));
        assert_eq!(
            err(&deep, Target::Array),
            "invalid character '[' exceeded max depth"
        );
    }
}
