//! Go's `strconv`: `ParseUint`, `ParseInt`, `ParseBool` and `ParseFloat` with their
//! `NumError`s, `FormatFloat`, and the quoting of `Quote`, `QuoteRune` and their `ToASCII`
//! forms with `IsPrint` and `CanBackquote` (`atoi.go`, `atof.go`, `ftoa.go`, `quote.go`).
//!
//! Only base 10 and 64-bit floats are read, as everything here reads them; Go's
//! hexadecimal floats (`0x1p-2`) are refused as invalid syntax. `FormatFloat` takes the
//! shortest digits from Rust's formatter (both print the shortest decimal that reads back
//! exactly) and lays them out as `ftoa.go` does.

use std::fmt::Write as _;
use std::sync::LazyLock;

use regex::Regex;

/// Go's `lowerhex`.
const LOWER_HEX: &[u8; 16] = b"0123456789abcdef";
/// Go's `upperhex`.
const UPPER_HEX: &[u8; 16] = b"0123456789ABCDEF";

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
#[error("strconv.{func}: parsing {}: {kind}", quote(.num))]
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

/// Go's `strconv.ParseUint(s, 10, bit_size)`: decimal digits only (no sign, no
/// underscores), at most `2^bit_size - 1`; a bad digit or an overflow, whichever comes
/// first, ends the scan.
pub fn parse_uint(s: &str, bit_size: u32) -> Result<u64, NumError> {
    let err = |kind| num_error("ParseUint", s, kind);
    if s.is_empty() {
        return Err(err(NumErrorKind::Syntax));
    }
    let max = match bit_size {
        1..=63 => (1u64 << bit_size) - 1,
        _ => u64::MAX,
    };
    // The smallest number that overflows when multiplied by 10.
    const CUTOFF: u64 = u64::MAX / 10 + 1;
    let mut n: u64 = 0;
    for c in s.bytes() {
        if !c.is_ascii_digit() {
            return Err(err(NumErrorKind::Syntax));
        }
        if n >= CUTOFF {
            return Err(err(NumErrorKind::Range));
        }
        n *= 10;
        match n.checked_add(u64::from(c - b'0')) {
            Some(n1) if n1 <= max => n = n1,
            _ => return Err(err(NumErrorKind::Range)),
        }
    }
    Ok(n)
}

/// Go's `strconv.ParseInt(s, 10, 64)`: an optional sign, then [`parse_uint`]'s digits.
pub fn parse_int(s: &str) -> Result<i64, NumError> {
    let err = |kind| num_error("ParseInt", s, kind);
    let (neg, digits) = match s.as_bytes().first() {
        Some(b'+') => (false, s.get(1..).unwrap_or_default()),
        Some(b'-') => (true, s.get(1..).unwrap_or_default()),
        _ => (false, s),
    };
    let n = match parse_uint(digits, 64) {
        Ok(n) => n,
        // Go keeps the largest value and checks it against int64's range below.
        Err(e) if e.kind == NumErrorKind::Range => u64::MAX,
        Err(_) => return Err(err(NumErrorKind::Syntax)),
    };
    const CUTOFF: u64 = 1 << 63;
    if (!neg && n >= CUTOFF) || (neg && n > CUTOFF) {
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

/// The decimal digits of a float (`strconv`'s `decimalSlice`): `0.d1d2d3... * 10^dp`.
struct Digits {
    d: Vec<u8>,
    dp: i64,
}

impl Digits {
    /// Parses Rust's `{:e}` form (`d.ddde-5`) of a non-negative float.
    fn from_sci(sci: &str) -> Self {
        let (mantissa, exp) = sci.split_once('e').unwrap_or((sci, "0"));
        let exp: i64 = exp.parse().unwrap_or(0);
        let mut d: Vec<u8> = mantissa.bytes().filter(u8::is_ascii_digit).collect();
        while d.last() == Some(&b'0') {
            d.pop();
        }
        if d.is_empty() {
            // Zero: no digits, exponent 0.
            return Digits { d, dp: 0 };
        }
        Digits { d, dp: exp + 1 }
    }

    fn nd(&self) -> i64 {
        i64::try_from(self.d.len()).unwrap_or(i64::MAX)
    }

    fn digit(&self, i: i64) -> u8 {
        usize::try_from(i)
            .ok()
            .and_then(|i| self.d.get(i).copied())
            .unwrap_or(b'0')
    }
}

/// Go's `strconv.FormatFloat(v, fmt, prec, 64)` for the formats `b e E f g G x X`
/// (`prec` -1 is the shortest representation that reads back exactly).
pub fn format_float(v: f64, fmt: u8, prec: i64) -> String {
    if !super::room(usize::try_from(prec).unwrap_or(0)) {
        return String::new();
    }
    let bits = v.to_bits();
    let neg = bits >> 63 != 0;
    let mut exp = ((bits >> 52) & 0x7FF) as i64;
    let mut mant = bits & ((1u64 << 52) - 1);
    match exp {
        0x7FF => {
            return if mant != 0 {
                "NaN"
            } else if neg {
                "-Inf"
            } else {
                "+Inf"
            }
            .to_string();
        }
        // Denormalized.
        0 => exp += 1,
        _ => mant |= 1u64 << 52,
    }
    exp -= 1023;
    match fmt {
        b'b' => return fmt_b(neg, mant, exp),
        b'x' | b'X' => return fmt_x(prec, fmt, neg, mant, exp),
        b'e' | b'E' | b'f' | b'g' | b'G' => {}
        // Go's answer to a format it does not know.
        other => return format!("%{}", char::from(other)),
    }

    let abs = v.abs();
    let shortest = prec < 0;
    let mut out = String::new();
    if fmt == b'f' && !shortest {
        // Rust rounds the exact binary value half to even at a decimal position, as Go does.
        if neg {
            out.push('-');
        }
        // Rust's formatter panics past 65,535 digits; a float64 has no more than
        // MAX_FRACTION_DIGITS after the point, the rest are zeros.
        let prec = usize::try_from(prec).unwrap_or(0);
        let exact = prec.min(MAX_FRACTION_DIGITS);
        let _ = write!(out, "{abs:.exact$}");
        pad_zeros(&mut out, prec - exact);
        return out;
    }
    let (digs, prec) = if shortest {
        let digs = Digits::from_sci(&format!("{abs:e}"));
        let prec = match fmt {
            b'e' | b'E' => (digs.nd() - 1).max(0),
            b'f' => (digs.nd() - digs.dp).max(0),
            _ => digs.nd(),
        };
        (digs, prec)
    } else {
        let (digits, prec) = match fmt {
            b'e' | b'E' => (prec.saturating_add(1), prec),
            b'g' | b'G' => {
                let p = prec.max(1);
                (p, p)
            }
            _ => (1, prec),
        };
        // No more than MAX_SIGNIFICANT_DIGITS are significant; Digits reads the missing
        // ones as zeros, as Go's decimal does.
        let frac = usize::try_from(digits - 1)
            .unwrap_or(0)
            .min(MAX_SIGNIFICANT_DIGITS);
        (Digits::from_sci(&format!("{abs:.frac$e}")), prec)
    };
    format_digits(&mut out, shortest, neg, &digs, prec, fmt);
    out
}

/// The most digits after the decimal point a float64 has (the smallest subnormal,
/// 2^-1074, has 1074).
const MAX_FRACTION_DIGITS: usize = 1074;
/// The most significant decimal digits a float64 has (767); more are zeros.
const MAX_SIGNIFICANT_DIGITS: usize = 800;

/// Appends `n` zeros.
fn pad_zeros(out: &mut String, n: usize) {
    out.extend(std::iter::repeat_n('0', n));
}

/// Go's `formatDigits`.
fn format_digits(out: &mut String, shortest: bool, neg: bool, digs: &Digits, prec: i64, fmt: u8) {
    match fmt {
        b'e' | b'E' => fmt_e(out, neg, digs, prec, fmt),
        b'f' => fmt_f(out, neg, digs, prec),
        _ => {
            let mut prec = prec;
            let mut eprec = prec;
            if eprec > digs.nd() && digs.nd() >= digs.dp {
                eprec = digs.nd();
            }
            // %e is used if the exponent from the conversion is less than -4 or greater
            // than or equal to the precision; shortest uses precision 6 for this decision.
            if shortest {
                eprec = 6;
            }
            let exp = digs.dp - 1;
            if exp < -4 || exp >= eprec {
                if prec > digs.nd() {
                    prec = digs.nd();
                }
                let e = if fmt == b'G' { b'E' } else { b'e' };
                fmt_e(out, neg, digs, prec - 1, e);
            } else {
                if prec > digs.dp {
                    prec = digs.nd();
                }
                fmt_f(out, neg, digs, (prec - digs.dp).max(0));
            }
        }
    }
}

/// Go's `fmtE`: `-d.dddde±dd`.
fn fmt_e(out: &mut String, neg: bool, d: &Digits, prec: i64, fmt: u8) {
    if neg {
        out.push('-');
    }
    out.push(char::from(d.digit(0)));
    if prec > 0 {
        out.push('.');
        for i in 1..=prec {
            out.push(char::from(d.digit(i)));
        }
    }
    out.push(char::from(fmt));
    let mut exp = d.dp - 1;
    // Zero has exponent 0.
    if d.d.is_empty() {
        exp = 0;
    }
    out.push(if exp < 0 { '-' } else { '+' });
    let exp = exp.unsigned_abs();
    if exp < 10 {
        out.push('0');
    }
    let _ = write!(out, "{exp}");
}

/// Go's `fmtF`: `-ddddddd.ddddd`.
fn fmt_f(out: &mut String, neg: bool, d: &Digits, prec: i64) {
    if neg {
        out.push('-');
    }
    if d.dp > 0 {
        for i in 0..d.dp {
            out.push(char::from(d.digit(i)));
        }
    } else {
        out.push('0');
    }
    if prec > 0 {
        out.push('.');
        for i in 1..=prec {
            out.push(char::from(d.digit(d.dp + i - 1)));
        }
    }
}

/// Go's `fmtB`: `-ddddp±ddd`, the mantissa and a power of two.
fn fmt_b(neg: bool, mant: u64, exp: i64) -> String {
    let exp = exp - 52;
    let sign = if neg { "-" } else { "" };
    let esign = if exp >= 0 { "+" } else { "" };
    format!("{sign}{mant}p{esign}{exp}")
}

/// Go's `fmtX`: `-0x1.yyyyyp±dd`, hexadecimal mantissa and a power of two.
fn fmt_x(prec: i64, fmt: u8, neg: bool, mut mant: u64, mut exp: i64) -> String {
    if mant == 0 {
        exp = 0;
    }
    // Shift digits so the leading 1 (if any) is at bit 60.
    mant <<= 60 - 52;
    while mant != 0 && mant & (1 << 60) == 0 {
        mant <<= 1;
        exp -= 1;
    }
    // Round if requested.
    if (0..15).contains(&prec) {
        let shift = u32::try_from(prec * 4).unwrap_or(0);
        let extra = (mant << shift) & ((1 << 60) - 1);
        mant >>= 60 - shift;
        if extra | (mant & 1) > 1 << 59 {
            mant += 1;
        }
        mant <<= 60 - shift;
        if mant & (1 << 61) != 0 {
            // Wrapped around.
            mant >>= 1;
            exp += 1;
        }
    }
    let hex: &[u8; 16] = if fmt == b'X' { UPPER_HEX } else { LOWER_HEX };
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    out.push('0');
    out.push(char::from(fmt));
    out.push(char::from(b'0' + ((mant >> 60) & 1) as u8));
    // Remove the leading 0 or 1.
    mant <<= 4;
    let nibble = |m: u64| char::from(hex.get(((m >> 60) & 15) as usize).copied().unwrap_or(b'0'));
    if prec < 0 && mant != 0 {
        out.push('.');
        while mant != 0 {
            out.push(nibble(mant));
            mant <<= 4;
        }
    } else if prec > 0 {
        out.push('.');
        for _ in 0..prec {
            out.push(nibble(mant));
            mant <<= 4;
        }
    }
    out.push(if fmt == b'X' { 'P' } else { 'p' });
    out.push(if exp < 0 { '-' } else { '+' });
    let exp = exp.unsigned_abs();
    if exp < 10 {
        out.push('0');
    }
    let _ = write!(out, "{exp}");
    out
}

/// Letters, marks, numbers, punctuation and symbols: the runes Go prints unescaped.
static PRINTABLE: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"^[\p{L}\p{M}\p{N}\p{P}\p{S}]$").ok());

/// Go's `strconv.IsPrint`: letters, marks, numbers, punctuation, symbols and the ASCII space.
pub fn is_print(c: char) -> bool {
    let r = u32::from(c);
    if r <= 0xFF {
        // Latin-1: ASCII space to '~', and '¡' to 'ÿ' but the soft hyphen.
        return (0x20..=0x7E).contains(&r) || ((0xA1..=0xFF).contains(&r) && r != 0xAD);
    }
    match PRINTABLE.as_ref() {
        Some(re) => re.is_match(c.encode_utf8(&mut [0u8; 4])),
        None => !c.is_control() && !c.is_whitespace(),
    }
}

/// Go's `strconv.Quote`: a double-quoted Go string literal, printable runes kept.
pub fn quote(s: &str) -> String {
    quote_with(s, '"', false)
}

/// Go's `appendQuotedWith`: `ascii_only` is `strconv.QuoteToASCII`.
pub(super) fn quote_with(s: &str, quote: char, ascii_only: bool) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        escape_rune(&mut out, c, quote, ascii_only);
    }
    out.push(quote);
    out
}

/// Go's `strconv.QuoteRune` (`ascii_only`: `QuoteRuneToASCII`).
pub(super) fn quote_rune(c: char, ascii_only: bool) -> String {
    let mut out = String::from('\'');
    escape_rune(&mut out, c, '\'', ascii_only);
    out.push('\'');
    out
}

/// Go's `appendEscapedRune`.
fn escape_rune(out: &mut String, c: char, quote: char, ascii_only: bool) {
    if c == quote || c == '\\' {
        out.push('\\');
        out.push(c);
        return;
    }
    if ascii_only {
        if c.is_ascii() && is_print(c) {
            out.push(c);
            return;
        }
    } else if is_print(c) {
        out.push(c);
        return;
    }
    let r = u32::from(c);
    match c {
        '\u{7}' => out.push_str("\\a"),
        '\u{8}' => out.push_str("\\b"),
        '\u{c}' => out.push_str("\\f"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\u{b}' => out.push_str("\\v"),
        _ if r < 0x20 || r == 0x7F => {
            let _ = write!(out, "\\x{r:02x}");
        }
        _ if r < 0x10000 => {
            let _ = write!(out, "\\u{r:04x}");
        }
        _ => {
            let _ = write!(out, "\\U{r:08x}");
        }
    }
}

/// Go's `strconv.CanBackquote`: no control characters but tab, no backquote, no BOM.
pub(super) fn can_backquote(s: &str) -> bool {
    s.chars().all(|c| match c {
        '\u{FEFF}' | '`' | '\u{7F}' => false,
        '\t' => true,
        c => c >= ' ',
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use NumErrorKind::{Range, Syntax};

    /// Go's `atoi_test.go`: `parseUint64Tests` and `parseUint32Tests`; and base 10 has no
    /// underscores (only base 0 does).
    const PARSE_UINT: &[(&str, u32, Result<u64, NumErrorKind>)] = &[
        ("", 64, Err(Syntax)),
        ("0", 64, Ok(0)),
        ("1", 64, Ok(1)),
        ("12345", 64, Ok(12345)),
        ("012345", 64, Ok(12345)),
        ("12345x", 64, Err(Syntax)),
        ("98765432100", 64, Ok(98765432100)),
        ("18446744073709551615", 64, Ok(u64::MAX)),
        ("18446744073709551616", 64, Err(Range)),
        ("18446744073709551620", 64, Err(Range)),
        ("", 32, Err(Syntax)),
        ("0", 32, Ok(0)),
        ("1", 32, Ok(1)),
        ("12345", 32, Ok(12345)),
        ("012345", 32, Ok(12345)),
        ("12345x", 32, Err(Syntax)),
        ("987654321", 32, Ok(987654321)),
        ("4294967295", 32, Ok(4294967295)),
        ("4294967296", 32, Err(Range)),
        ("+1", 64, Err(Syntax)),
        ("1_000", 64, Err(Syntax)),
    ];

    /// Go's `atoi_test.go`: `parseInt64Tests`, and the overflow that ends a scan before a
    /// bad digit.
    const PARSE_INT: &[(&str, Result<i64, NumErrorKind>)] = &[
        ("", Err(Syntax)),
        ("0", Ok(0)),
        ("-0", Ok(0)),
        ("1", Ok(1)),
        ("-1", Ok(-1)),
        ("12345", Ok(12345)),
        ("-12345", Ok(-12345)),
        ("012345", Ok(12345)),
        ("-012345", Ok(-12345)),
        ("98765432100", Ok(98765432100)),
        ("-98765432100", Ok(-98765432100)),
        ("9223372036854775807", Ok(i64::MAX)),
        ("-9223372036854775807", Ok(-i64::MAX)),
        ("9223372036854775808", Err(Range)),
        ("-9223372036854775808", Ok(i64::MIN)),
        ("9223372036854775809", Err(Range)),
        ("-9223372036854775809", Err(Range)),
        ("+7", Ok(7)),
        ("-", Err(Syntax)),
        ("1.5", Err(Syntax)),
        ("99999999999999999999x", Err(Range)),
    ];

    /// Go's `atob_test.go`: `atobtests`.
    const PARSE_BOOL: &[(&str, Result<bool, NumErrorKind>)] = &[
        ("", Err(Syntax)),
        ("asdf", Err(Syntax)),
        ("0", Ok(false)),
        ("f", Ok(false)),
        ("F", Ok(false)),
        ("FALSE", Ok(false)),
        ("false", Ok(false)),
        ("False", Ok(false)),
        ("1", Ok(true)),
        ("t", Ok(true)),
        ("T", Ok(true)),
        ("TRUE", Ok(true)),
        ("true", Ok(true)),
        ("True", Ok(true)),
    ];

    /// Go's `atof_test.go` (`atoftests`: the decimal rows, the words and the underscores),
    /// the result as `FormatFloat(f, 'g', -1, 64)` prints it.
    const PARSE_FLOAT: &[(&str, Result<&str, NumErrorKind>)] = &[
        ("", Err(Syntax)),
        ("1", Ok("1")),
        ("+1", Ok("1")),
        ("1x", Err(Syntax)),
        ("1.1.", Err(Syntax)),
        ("1e23", Ok("1e+23")),
        ("1E23", Ok("1e+23")),
        ("100000000000000000000000", Ok("1e+23")),
        ("1e-100", Ok("1e-100")),
        ("123456700", Ok("1.234567e+08")),
        ("99999999999999974834176", Ok("9.999999999999997e+22")),
        ("-1", Ok("-1")),
        ("-0.1", Ok("-0.1")),
        ("-0", Ok("-0")),
        ("1e-20", Ok("1e-20")),
        ("625e-3", Ok("0.625")),
        ("1.7976931348623157e308", Ok("1.7976931348623157e+308")),
        ("-1.7976931348623157e308", Ok("-1.7976931348623157e+308")),
        ("1.7976931348623159e308", Err(Range)),
        ("1e308", Ok("1e+308")),
        ("2e308", Err(Range)),
        ("1e310", Err(Range)),
        ("-1e310", Err(Range)),
        ("1e400", Err(Range)),
        ("1e-4294967296", Ok("0")),
        ("1e-350", Ok("0")),
        ("4.9406564584124654e-324", Ok("5e-324")),
        (".5e1", Ok("5")),
        ("1e", Err(Syntax)),
        ("1e-", Err(Syntax)),
        (".e-1", Err(Syntax)),
        ("inf", Ok("+Inf")),
        ("-Inf", Ok("-Inf")),
        ("+INF", Ok("+Inf")),
        ("-Infinity", Ok("-Inf")),
        ("+INFINITY", Ok("+Inf")),
        ("Infinity", Ok("+Inf")),
        ("nan", Ok("NaN")),
        ("NaN", Ok("NaN")),
        ("NAN", Ok("NaN")),
        ("+nan", Err(Syntax)),
        ("-NaN", Err(Syntax)),
        ("1_23.50_0_0e+1_2", Ok("1.235e+14")),
        ("1_000.5", Ok("1000.5")),
        ("-_123.5e+12", Err(Syntax)),
        ("+_123.5e+12", Err(Syntax)),
        ("_123.5e+12", Err(Syntax)),
        ("1__23.5e+12", Err(Syntax)),
        ("123_.5e+12", Err(Syntax)),
        ("123._5e+12", Err(Syntax)),
        ("123.5_e+12", Err(Syntax)),
        ("123.5__0e+12", Err(Syntax)),
        ("123.5e_+12", Err(Syntax)),
        ("123.5e+_12", Err(Syntax)),
        ("123.5e_-12", Err(Syntax)),
        ("123.5e-_12", Err(Syntax)),
        ("123.5e+1__2", Err(Syntax)),
        ("123.5e+12_", Err(Syntax)),
        ("abc", Err(Syntax)),
    ];

    #[test]
    fn parses_as_go() {
        for &(s, bits, want) in PARSE_UINT {
            assert_eq!(
                parse_uint(s, bits).map_err(|e| e.kind),
                want,
                "{s:?} {bits}"
            );
        }
        for &(s, want) in PARSE_INT {
            assert_eq!(parse_int(s).map_err(|e| e.kind), want, "{s:?}");
        }
        for &(s, want) in PARSE_BOOL {
            assert_eq!(parse_bool(s).map_err(|e| e.kind), want, "{s:?}");
        }
        for &(s, want) in PARSE_FLOAT {
            let got = parse_float(s).map(|f| format_float(f, b'g', -1));
            assert_eq!(got.as_deref().map_err(|e| e.kind), want, "{s:?}");
        }
    }

    #[test]
    fn num_errors_read_as_gos() {
        let message = |r: Result<(), NumError>| r.err().map(|e| e.to_string());
        assert_eq!(
            message(parse_int("9223372036854775808").map(drop)),
            Some(r#"strconv.ParseInt: parsing "9223372036854775808": value out of range"#.into())
        );
        assert_eq!(
            message(parse_int("-").map(drop)),
            Some(r#"strconv.ParseInt: parsing "-": invalid syntax"#.into())
        );
        assert_eq!(
            message(parse_uint("4294967296", 32).map(drop)),
            Some(r#"strconv.ParseUint: parsing "4294967296": value out of range"#.into())
        );
        assert_eq!(
            message(parse_bool("yes").map(drop)),
            Some(r#"strconv.ParseBool: parsing "yes": invalid syntax"#.into())
        );
        assert_eq!(
            message(parse_float("1e400").map(drop)),
            Some(r#"strconv.ParseFloat: parsing "1e400": value out of range"#.into())
        );
        // Go's `numErrorTests`: the input is quoted.
        assert_eq!(
            message(parse_float("1\u{0}.2").map(drop)),
            Some(r#"strconv.ParseFloat: parsing "1\x00.2": invalid syntax"#.into())
        );
    }

    /// Go's `ftoa_test.go`: `ftoatests`, its literals as it writes them.
    #[allow(clippy::excessive_precision)]
    const FORMAT_FLOAT: &[(f64, u8, i64, &str)] = &[
        (1.0, b'e', 5, "1.00000e+00"),
        (1.0, b'f', 5, "1.00000"),
        (1.0, b'g', 5, "1"),
        (1.0, b'g', -1, "1"),
        (1.0, b'x', -1, "0x1p+00"),
        (1.0, b'x', 5, "0x1.00000p+00"),
        (20.0, b'g', -1, "20"),
        (20.0, b'x', -1, "0x1.4p+04"),
        (1234567.8, b'g', -1, "1.2345678e+06"),
        (1234567.8, b'x', -1, "0x1.2d687cccccccdp+20"),
        (200000.0, b'g', -1, "200000"),
        (200000.0, b'x', -1, "0x1.86ap+17"),
        (200000.0, b'X', -1, "0X1.86AP+17"),
        (2000000.0, b'g', -1, "2e+06"),
        (400.0, b'g', 2, "4e+02"),
        (40.0, b'g', 2, "40"),
        (4.0, b'g', 2, "4"),
        (0.4, b'g', 2, "0.4"),
        (0.04, b'g', 2, "0.04"),
        (0.004, b'g', 2, "0.004"),
        (0.0004, b'g', 2, "0.0004"),
        (0.00004, b'g', 2, "4e-05"),
        (0.000004, b'g', 2, "4e-06"),
        (0.0, b'e', 5, "0.00000e+00"),
        (0.0, b'f', 5, "0.00000"),
        (0.0, b'g', 5, "0"),
        (0.0, b'g', -1, "0"),
        (0.0, b'x', 5, "0x0.00000p+00"),
        (-1.0, b'e', 5, "-1.00000e+00"),
        (-1.0, b'f', 5, "-1.00000"),
        (-1.0, b'g', 5, "-1"),
        (-1.0, b'g', -1, "-1"),
        (12.0, b'e', 5, "1.20000e+01"),
        (12.0, b'f', 5, "12.00000"),
        (12.0, b'g', 5, "12"),
        (12.0, b'g', -1, "12"),
        (123456700.0, b'e', 5, "1.23457e+08"),
        (123456700.0, b'f', 5, "123456700.00000"),
        (123456700.0, b'g', 5, "1.2346e+08"),
        (123456700.0, b'g', -1, "1.234567e+08"),
        (1.2345e6, b'e', 5, "1.23450e+06"),
        (1.2345e6, b'f', 5, "1234500.00000"),
        (1.2345e6, b'g', 5, "1.2345e+06"),
        (1e23, b'e', 17, "9.99999999999999916e+22"),
        (1e23, b'f', 17, "99999999999999991611392.00000000000000000"),
        (1e23, b'g', 17, "9.9999999999999992e+22"),
        (1e23, b'e', -1, "1e+23"),
        (1e23, b'f', -1, "100000000000000000000000"),
        (1e23, b'g', -1, "1e+23"),
        (
            99999999999999974834176.0,
            b'e',
            17,
            "9.99999999999999748e+22",
        ),
        (
            99999999999999974834176.0,
            b'f',
            17,
            "99999999999999974834176.00000000000000000",
        ),
        (
            99999999999999974834176.0,
            b'g',
            17,
            "9.9999999999999975e+22",
        ),
        (99999999999999974834176.0, b'e', -1, "9.999999999999997e+22"),
        (
            99999999999999974834176.0,
            b'f',
            -1,
            "99999999999999970000000",
        ),
        (99999999999999974834176.0, b'g', -1, "9.999999999999997e+22"),
        (
            100000000000000008388608.0,
            b'e',
            17,
            "1.00000000000000008e+23",
        ),
        (
            100000000000000008388608.0,
            b'f',
            17,
            "100000000000000008388608.00000000000000000",
        ),
        (
            100000000000000008388608.0,
            b'g',
            17,
            "1.0000000000000001e+23",
        ),
        (
            100000000000000008388608.0,
            b'e',
            -1,
            "1.0000000000000001e+23",
        ),
        (
            100000000000000008388608.0,
            b'f',
            -1,
            "100000000000000010000000",
        ),
        (
            100000000000000008388608.0,
            b'g',
            -1,
            "1.0000000000000001e+23",
        ),
        (5e-324, b'g', -1, "5e-324"),
        (-5e-324, b'g', -1, "-5e-324"),
        (32.0, b'g', -1, "32"),
        (32.0, b'g', 0, "3e+01"),
        (100.0, b'x', -1, "0x1.9p+06"),
        (100.0, b'y', -1, "%y"),
        (f64::NAN, b'g', -1, "NaN"),
        (-f64::NAN, b'g', -1, "NaN"),
        (f64::INFINITY, b'g', -1, "+Inf"),
        (f64::NEG_INFINITY, b'g', -1, "-Inf"),
        (-1.0, b'b', -1, "-4503599627370496p-52"),
        (0.9, b'f', 1, "0.9"),
        (0.09, b'f', 1, "0.1"),
        (0.0999, b'f', 1, "0.1"),
        (0.05, b'f', 1, "0.1"),
        (0.05, b'f', 0, "0"),
        (0.5, b'f', 1, "0.5"),
        (0.5, b'f', 0, "0"),
        (1.5, b'f', 0, "2"),
        (2.2250738585072012e-308, b'g', -1, "2.2250738585072014e-308"),
        (2.2250738585072011e-308, b'g', -1, "2.225073858507201e-308"),
        (383260575764816448.0, b'f', 0, "383260575764816448"),
        (383260575764816448.0, b'g', -1, "3.8326057576481645e+17"),
        (498484681984085570.0, b'f', -1, "498484681984085570"),
        (-5.8339553793802237e+23, b'g', -1, "-5.8339553793802237e+23"),
        (2.275555555555555, b'x', -1, "0x1.23456789abcdep+01"),
        (2.275555555555555, b'x', 0, "0x1p+01"),
        (2.275555555555555, b'x', 2, "0x1.23p+01"),
        (2.275555555555555, b'x', 16, "0x1.23456789abcde000p+01"),
        (2.275555555555555, b'x', 21, "0x1.23456789abcde00000000p+01"),
        (2.2755555510520935, b'x', -1, "0x1.2345678p+01"),
        (2.2755555510520935, b'x', 6, "0x1.234568p+01"),
        (2.275555431842804, b'x', -1, "0x1.2345668p+01"),
        (2.275555431842804, b'x', 6, "0x1.234566p+01"),
        (3.999969482421875, b'x', -1, "0x1.ffffp+01"),
        (3.999969482421875, b'x', 4, "0x1.ffffp+01"),
        (3.999969482421875, b'x', 3, "0x1.000p+02"),
        (3.999969482421875, b'x', 2, "0x1.00p+02"),
        (3.999969482421875, b'x', 1, "0x1.0p+02"),
        (3.999969482421875, b'x', 0, "0x1p+02"),
        // Beyond the table: the precisions Go allows, and the shortest 'f' of tiny values.
        (1e21, b'f', -1, "1000000000000000000000"),
        (1.5e-7, b'f', -1, "0.00000015"),
        (0.0, b'e', -1, "0e+00"),
    ];

    #[test]
    fn formats_floats_as_go() {
        for &(f, fmt, prec, want) in FORMAT_FLOAT {
            assert_eq!(
                format_float(f, fmt, prec),
                want,
                "FormatFloat({f:e}, '{}', {prec})",
                char::from(fmt)
            );
        }
    }

    /// Go's `quote_test.go`: `quotetests` (`Quote`, `QuoteToASCII`; the row of bytes that
    /// are not UTF-8 has no `&str`) and `quoterunetests` (`QuoteRune`, `QuoteRuneToASCII`).
    const QUOTE: &[(&str, &str, &str)] = &[
        (
            "\u{7}\u{8}\u{c}\r\n\t\u{b}",
            r#""\a\b\f\r\n\t\v""#,
            r#""\a\b\f\r\n\t\v""#,
        ),
        ("\\", r#""\\""#, r#""\\""#),
        ("\u{263a}", "\"☺\"", r#""\u263a""#),
        ("\u{10ffff}", r#""\U0010ffff""#, r#""\U0010ffff""#),
        ("\u{4}", r#""\x04""#, r#""\x04""#),
        (
            "!\u{a0}!\u{2000}!\u{3000}!",
            r#""!\u00a0!\u2000!\u3000!""#,
            r#""!\u00a0!\u2000!\u3000!""#,
        ),
        ("\u{7f}", r#""\x7f""#, r#""\x7f""#),
        // The soft hyphen and the line separator are not printable.
        (
            "a\u{ad}\u{2028}b",
            r#""a\u00ad\u2028b""#,
            r#""a\u00ad\u2028b""#,
        ),
    ];

    const QUOTE_RUNE: &[(char, &str, &str)] = &[
        ('a', "'a'", "'a'"),
        ('\u{7}', r"'\a'", r"'\a'"),
        ('\\', r"'\\'", r"'\\'"),
        ('\u{ff}', "'ÿ'", r"'\u00ff'"),
        ('\u{263a}', "'☺'", r"'\u263a'"),
        ('\u{fffd}', "'\u{fffd}'", r"'\ufffd'"),
        ('\u{10ffff}', r"'\U0010ffff'", r"'\U0010ffff'"),
        ('\u{4}', r"'\x04'", r"'\x04'"),
        ('\u{a0}', r"'\u00a0'", r"'\u00a0'"),
        ('\u{2000}', r"'\u2000'", r"'\u2000'"),
        ('\u{3000}', r"'\u3000'", r"'\u3000'"),
    ];

    #[test]
    fn quotes_as_go() {
        for &(s, quoted, ascii) in QUOTE {
            assert_eq!(quote(s), quoted, "Quote({s:?})");
            assert_eq!(quote_with(s, '"', true), ascii, "QuoteToASCII({s:?})");
        }
        for &(c, quoted, ascii) in QUOTE_RUNE {
            assert_eq!(quote_rune(c, false), quoted, "QuoteRune({c:?})");
            assert_eq!(quote_rune(c, true), ascii, "QuoteRuneToASCII({c:?})");
        }
    }

    /// Go's `quote_test.go`: `canbackquotetests`, but the rows of bytes that are not UTF-8.
    #[test]
    fn can_backquote_as_go() {
        for c in (0u8..0x20).filter(|&c| c != b'\t') {
            assert!(!can_backquote(&char::from(c).to_string()), "{c:#x}");
        }
        for (s, want) in [
            ("`", false),
            ("\t", true),
            ("\u{7f}", false),
            (r##"' !"#$%&'()*+,-./:;<=>?@[\]^_{|}~"##, true),
            ("0123456789", true),
            ("ABCDEFGHIJKLMNOPQRSTUVWXYZ", true),
            ("abcdefghijklmnopqrstuvwxyz", true),
            ("☺", true),
            ("\u{feff}abc", false),
            ("a\u{feff}z", false),
        ] {
            assert_eq!(can_backquote(s), want, "{s:?}");
        }
    }
}
