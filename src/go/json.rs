//! Go's `strconv.ParseInt`, `ParseBool` and `ParseFloat`, and `json.Unmarshal` into
//! `map[string]interface {}` or `[]interface {}`, with Go's error messages.

use serde_json::Value;

use super::fmt as gofmt;

/// Why a `strconv` parse failed (`ErrSyntax` or `ErrRange`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NumErrorKind {
    /// `invalid syntax`.
    #[error("invalid syntax")]
    Syntax,
    /// `value out of range`.
    #[error("value out of range")]
    Range,
}

/// Go's `strconv.NumError`: `strconv.ParseInt: parsing "x": invalid syntax`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("strconv.{func}: parsing {}: {kind}", gofmt::quote(.num))]
pub struct NumError {
    /// The function: `ParseInt`, `ParseBool` or `ParseFloat`.
    pub func: &'static str,
    /// The input.
    pub num: String,
    /// What is wrong with it.
    pub kind: NumErrorKind,
}

fn num_error(func: &'static str, num: &str, kind: NumErrorKind) -> NumError {
    NumError {
        func,
        num: num.to_string(),
        kind,
    }
}

/// Go's `strconv.ParseInt(s, 10, 64)`: an optional sign and decimal digits only.
pub fn parse_int(s: &str) -> Result<i64, NumError> {
    let err = |kind| num_error("ParseInt", s, kind);
    let (neg, digits) = match s.as_bytes().first() {
        Some(b'+') => (false, s.get(1..).unwrap_or_default()),
        Some(b'-') => (true, s.get(1..).unwrap_or_default()),
        _ => (false, s),
    };
    if digits.is_empty() {
        return Err(err(NumErrorKind::Syntax));
    }
    // ParseUint: a bad digit or an overflow, whichever comes first, ends the scan.
    const CUTOFF: u64 = u64::MAX / 10 + 1;
    let mut n: u64 = 0;
    for c in digits.bytes() {
        if !c.is_ascii_digit() {
            return Err(err(NumErrorKind::Syntax));
        }
        if n >= CUTOFF {
            return Err(err(NumErrorKind::Range));
        }
        n = match (n * 10).checked_add(u64::from(c - b'0')) {
            Some(n) => n,
            None => return Err(err(NumErrorKind::Range)),
        };
    }
    const LIMIT: u64 = 1 << 63;
    if (!neg && n >= LIMIT) || (neg && n > LIMIT) {
        return Err(err(NumErrorKind::Range));
    }
    // -2^63 wraps onto itself.
    let v = n as i64;
    Ok(if neg { v.wrapping_neg() } else { v })
}

/// Go's `strconv.ParseBool`.
pub fn parse_bool(s: &str) -> Result<bool, NumError> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(num_error("ParseBool", s, NumErrorKind::Syntax)),
    }
}

/// Go's `underscoreOK` for a decimal number: underscores only between digits.
fn underscore_ok(s: &str) -> bool {
    let s = s.strip_prefix(['+', '-']).unwrap_or(s);
    // '^' start, '0' digit, '_' underscore, '!' anything else.
    let mut saw = '^';
    for c in s.chars() {
        if c.is_ascii_digit() {
            saw = '0';
        } else if c == '_' {
            if saw != '0' {
                return false;
            }
            saw = '_';
        } else {
            if saw == '_' {
                return false;
            }
            saw = '!';
        }
    }
    saw != '_'
}

/// Go's `strconv.ParseFloat(s, 64)` for decimal input: `inf`, `infinity` (with a sign) and
/// `nan` (without) in any case, underscores between digits, and a range error past the
/// largest float64. Go's hexadecimal floats (`0x1p-2`) are refused as invalid syntax.
pub fn parse_float(s: &str) -> Result<f64, NumError> {
    let err = |kind| num_error("ParseFloat", s, kind);
    let (sign, rest) = match s.as_bytes().first() {
        Some(b'+') => (Some(1.0), s.get(1..).unwrap_or_default()),
        Some(b'-') => (Some(-1.0), s.get(1..).unwrap_or_default()),
        _ => (None, s),
    };
    if rest.eq_ignore_ascii_case("inf") || rest.eq_ignore_ascii_case("infinity") {
        return Ok(sign.unwrap_or(1.0) * f64::INFINITY);
    }
    if rest.eq_ignore_ascii_case("nan") {
        return match sign {
            None => Ok(f64::NAN),
            Some(_) => Err(err(NumErrorKind::Syntax)),
        };
    }
    let cleaned = if s.contains('_') {
        if !underscore_ok(s) {
            return Err(err(NumErrorKind::Syntax));
        }
        s.replace('_', "")
    } else {
        s.to_string()
    };
    // Rust's grammar is Go's decimal one but for the words handled above.
    if !cleaned
        .bytes()
        .all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E' | b'+' | b'-'))
    {
        return Err(err(NumErrorKind::Syntax));
    }
    match cleaned.parse::<f64>() {
        Ok(f) if f.is_infinite() => Err(err(NumErrorKind::Range)),
        Ok(f) => Ok(f),
        Err(_) => Err(err(NumErrorKind::Syntax)),
    }
}

/// What `json.Unmarshal` decodes into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonTarget {
    /// `map[string]interface {}`.
    Object,
    /// `[]interface {}`.
    Array,
}

impl JsonTarget {
    fn go_type(self) -> &'static str {
        match self {
            JsonTarget::Object => "map[string]interface {}",
            JsonTarget::Array => "[]interface {}",
        }
    }
}

/// Go's `json.Unmarshal(s, &target)`: Go's syntax errors, its type mismatch errors, `null`
/// giving a nil map or slice, and every number a `float64`.
pub fn unmarshal(s: &str, target: JsonTarget) -> Result<Value, String> {
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
        (JsonTarget::Object, "object") | (JsonTarget::Array, "array")
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
    Ok(go_decoded(v))
}

/// A JSON value as `json.Unmarshal` into `interface {}` gives it: every number a float64.
pub(crate) fn go_decoded(v: Value) -> Value {
    match v {
        Value::Number(n) if n.as_i64().is_some() || n.as_u64().is_some() => n
            .as_f64()
            .and_then(serde_json::Number::from_f64)
            .map_or(Value::Number(n), Value::Number),
        Value::Array(items) => Value::Array(items.into_iter().map(go_decoded).collect()),
        Value::Object(m) => Value::Object(m.into_iter().map(|(k, v)| (k, go_decoded(v))).collect()),
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
            let q = gofmt::quote(char::from(c).encode_utf8(&mut [0u8; 4]));
            format!("'{}'", q.get(1..q.len() - 1).unwrap_or_default())
        }
    }
}

/// Go's `maxNestingDepth`.
const MAX_NESTING_DEPTH: usize = 10_000;

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

    #[test]
    fn strconv_parses_like_go() {
        assert_eq!(parse_int("42"), Ok(42));
        assert_eq!(parse_int("+7"), Ok(7));
        assert_eq!(parse_int("-9223372036854775808"), Ok(i64::MIN));
        assert_eq!(
            parse_int("9223372036854775808").map_err(|e| e.to_string()),
            Err(r#"strconv.ParseInt: parsing "9223372036854775808": value out of range"#.into())
        );
        assert_eq!(
            parse_int("1.5").map_err(|e| e.to_string()),
            Err(r#"strconv.ParseInt: parsing "1.5": invalid syntax"#.into())
        );
        assert_eq!(
            parse_int("-").map_err(|e| e.to_string()),
            Err(r#"strconv.ParseInt: parsing "-": invalid syntax"#.into())
        );
        assert_eq!(
            parse_int("99999999999999999999x").map_err(|e| e.kind),
            Err(NumErrorKind::Range)
        );
        assert_eq!(parse_bool("T"), Ok(true));
        assert_eq!(parse_bool("False"), Ok(false));
        assert_eq!(
            parse_bool("yes").map_err(|e| e.to_string()),
            Err(r#"strconv.ParseBool: parsing "yes": invalid syntax"#.into())
        );
        assert_eq!(parse_float("1.5"), Ok(1.5));
        assert_eq!(parse_float("1_000.5"), Ok(1000.5));
        assert_eq!(parse_float(".5e1"), Ok(5.0));
        assert_eq!(parse_float("-Infinity"), Ok(f64::NEG_INFINITY));
        assert!(parse_float("NaN").is_ok_and(f64::is_nan));
        assert_eq!(
            parse_float("+nan").map_err(|e| e.kind),
            Err(NumErrorKind::Syntax)
        );
        assert_eq!(
            parse_float("1__0").map_err(|e| e.kind),
            Err(NumErrorKind::Syntax)
        );
        assert_eq!(
            parse_float("1e400").map_err(|e| e.to_string()),
            Err(r#"strconv.ParseFloat: parsing "1e400": value out of range"#.into())
        );
        assert_eq!(parse_float("1e-400"), Ok(0.0));
        assert_eq!(
            parse_float("abc").map_err(|e| e.to_string()),
            Err(r#"strconv.ParseFloat: parsing "abc": invalid syntax"#.into())
        );
    }

    #[test]
    fn unmarshal_like_go() {
        let obj = JsonTarget::Object;
        assert_eq!(
            unmarshal(r#"{"a": 1, "b": [true, null]}"#, obj),
            Ok(json!({"a": 1.0, "b": [true, null]}))
        );
        assert_eq!(unmarshal(" null ", obj), Ok(Value::Null));
        assert_eq!(
            unmarshal("[1, 2]", JsonTarget::Array),
            Ok(json!([1.0, 2.0]))
        );
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
            err("[1 2]", JsonTarget::Array),
            "invalid character '2' after array element"
        );
        assert_eq!(
            err("{} x", obj),
            "invalid character 'x' after top-level value"
        );
        assert_eq!(
            err("[tru]", JsonTarget::Array),
            "invalid character ']' in literal true (expecting 'e')"
        );
        assert_eq!(
            err("[01]", JsonTarget::Array),
            "invalid character '1' after array element"
        );
        assert_eq!(
            err("[1.]", JsonTarget::Array),
            "invalid character ']' after decimal point in numeric literal"
        );
        assert_eq!(
            err("[-x]", JsonTarget::Array),
            "invalid character 'x' in numeric literal"
        );
        assert_eq!(
            err("[1e]", JsonTarget::Array),
            "invalid character ']' in exponent of numeric literal"
        );
        assert_eq!(
            err("[\"\\x\"]", JsonTarget::Array),
            "invalid character 'x' in string escape code"
        );
        assert_eq!(
            err("[\"\\u12g\"]", JsonTarget::Array),
            "invalid character 'g' in \\u hexadecimal character escape"
        );
        assert_eq!(
            err("[\"a\nb\"]", JsonTarget::Array),
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
            err("{}", JsonTarget::Array),
            "json: cannot unmarshal object into Go value of type []interface {}"
        );
        assert_eq!(
            err("1", JsonTarget::Array),
            "json: cannot unmarshal number into Go value of type []interface {}"
        );
        assert_eq!(
            err("true", obj),
            "json: cannot unmarshal bool into Go value of type map[string]interface {}"
        );
        assert_eq!(
            err("[1e400]", JsonTarget::Array),
            "json: cannot unmarshal number 1e400 into Go value of type float64"
        );
        let deep = format!("{}{}", "[".repeat(10_001), "]".repeat(10_001));
        assert_eq!(
            err(&deep, JsonTarget::Array),
            "invalid character '[' exceeded max depth"
        );
    }
}
