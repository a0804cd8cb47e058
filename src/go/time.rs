//! Go's `time.ParseDuration` and `time.Parse` with the layout `2006-01-02` (`time/format.go`):
//! the API server's `?timeout=` on webhook calls, and kube-openapi's `duration` and `date`
//! formats.

/// Why `ParseDuration` refused a string, in Go's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// `time: invalid duration "x"`: no number, a number too large, or no unit at all.
    #[error("time: invalid duration {}", quote(.0))]
    Invalid(String),
    /// `time: missing unit in duration "1"`.
    #[error("time: missing unit in duration {}", quote(.0))]
    MissingUnit(String),
    /// `time: unknown unit "d" in duration "1d"`.
    #[error("time: unknown unit {} in duration {}", quote(.unit), quote(.duration))]
    UnknownUnit {
        /// The unit.
        unit: String,
        /// The whole duration.
        duration: String,
    },
}

/// Go's `time.ParseDuration`, in nanoseconds: a possibly signed sequence of decimal numbers,
/// each with an optional fraction and a unit (`ns`, `us`, `µs`, `μs`, `ms`, `s`, `m`, `h`),
/// such as `300ms`, `-1.5h` or `2h45m`, or `0`; at most 2^63-1 nanoseconds either way, and
/// -2^63.
pub fn parse_duration(orig: &str) -> Result<i64, DurationError> {
    let invalid = || DurationError::Invalid(orig.to_string());
    let mut s = orig.as_bytes();
    let mut neg = false;
    if let Some(&c @ (b'-' | b'+')) = s.first() {
        neg = c == b'-';
        s = s.get(1..).unwrap_or_default();
    }
    if s == b"0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    let mut d: u64 = 0;
    while let Some(&first) = s.first() {
        if !(first == b'.' || first.is_ascii_digit()) {
            return Err(invalid());
        }
        let before = s.len();
        let (v, rest) = leading_int(s).ok_or_else(invalid)?;
        s = rest;
        let pre = before != s.len();
        let (mut f, mut scale, mut post) = (0u64, 1f64, false);
        if s.first() == Some(&b'.') {
            s = s.get(1..).unwrap_or_default();
            let before = s.len();
            (f, scale, s) = leading_fraction(s);
            post = before != s.len();
        }
        if !pre && !post {
            // No digits, as in ".s" or "-.s".
            return Err(invalid());
        }
        let i = s
            .iter()
            .position(|&c| c == b'.' || c.is_ascii_digit())
            .unwrap_or(s.len());
        if i == 0 {
            return Err(DurationError::MissingUnit(orig.to_string()));
        }
        let (u, rest) = s.split_at(i);
        s = rest;
        let unit: u64 = match u {
            b"ns" => 1,
            b"us" | b"\xc2\xb5s" | b"\xce\xbcs" => 1_000,
            b"ms" => 1_000_000,
            b"s" => 1_000_000_000,
            b"m" => 60_000_000_000,
            b"h" => 3_600_000_000_000,
            _ => {
                return Err(DurationError::UnknownUnit {
                    unit: String::from_utf8_lossy(u).into_owned(),
                    duration: orig.to_string(),
                });
            }
        };
        if v > (1u64 << 63) / unit {
            return Err(invalid());
        }
        let mut v = v * unit;
        if f > 0 {
            // Go's float64 arithmetic: nanosecond-exact for fractions of hours.
            v += (f as f64 * (unit as f64 / scale)) as u64;
            if v > 1 << 63 {
                return Err(invalid());
            }
        }
        // Go adds in uint64, which wraps at 2^64 as Go's does.
        d = d.wrapping_add(v);
        if d > 1 << 63 {
            return Err(invalid());
        }
    }
    if neg {
        // -2^63 wraps onto itself.
        return Ok((d as i64).wrapping_neg());
    }
    if d > i64::MAX as u64 {
        return Err(invalid());
    }
    Ok(d as i64)
}

/// Go's `leadingInt`: the leading `[0-9]*` and the rest, `None` past 2^63.
fn leading_int(s: &[u8]) -> Option<(u64, &[u8])> {
    let digits = s.iter().take_while(|c| c.is_ascii_digit()).count();
    let mut x: u64 = 0;
    for &c in &s[..digits] {
        if x > (1 << 63) / 10 {
            return None;
        }
        x = x * 10 + u64::from(c - b'0');
        if x > 1 << 63 {
            return None;
        }
    }
    Some((x, &s[digits..]))
}

/// Go's `leadingFraction`: the leading `[0-9]*` as a numerator and its scale, the digits
/// past int64's precision dropped.
fn leading_fraction(s: &[u8]) -> (u64, f64, &[u8]) {
    let digits = s.iter().take_while(|c| c.is_ascii_digit()).count();
    let (mut x, mut scale, mut overflow) = (0u64, 1f64, false);
    for &c in &s[..digits] {
        if overflow {
            continue;
        }
        if x > (i64::MAX as u64) / 10 {
            overflow = true;
            continue;
        }
        let y = x * 10 + u64::from(c - b'0');
        if y > 1 << 63 {
            overflow = true;
            continue;
        }
        x = y;
        scale *= 10.0;
    }
    (x, scale, &s[digits..])
}

/// Whether Go's `time.Parse(time.DateOnly, s)` succeeds: a four-digit year, a two-digit
/// month from 01 to 12 and a two-digit day of that month (`getnum` with `fixed`), nothing
/// after; year 0000 and leap days included.
pub fn is_date_only(s: &str) -> bool {
    let b = s.as_bytes();
    let number = |range: std::ops::Range<usize>| -> Option<u32> {
        let digits = b.get(range)?;
        digits
            .iter()
            .all(u8::is_ascii_digit)
            .then(|| digits.iter().fold(0, |n, &c| n * 10 + u32::from(c - b'0')))
    };
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let (Some(year), Some(month), Some(day)) = (number(0..4), number(5..7), number(8..10)) else {
        return false;
    };
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day)
}

/// The `time` package's own `quote`: ASCII kept (with `"` and `\` escaped), every byte of
/// anything else as `\xNN`.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if c.is_ascii() && c >= ' ' {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        } else {
            for b in c.encode_utf8(&mut [0u8; 4]).bytes() {
                out.push_str(&format!("\\x{b:02x}"));
            }
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const NS: i64 = 1;
    const US: i64 = 1_000;
    const MS: i64 = 1_000_000;
    const S: i64 = 1_000_000_000;
    const M: i64 = 60 * S;
    const H: i64 = 60 * M;

    /// Go's `time_test.go`: `parseDurationTests`.
    const PARSE_DURATION: &[(&str, i64)] = &[
        ("0", 0),
        ("5s", 5 * S),
        ("30s", 30 * S),
        ("1478s", 1478 * S),
        ("-5s", -5 * S),
        ("+5s", 5 * S),
        ("-0", 0),
        ("+0", 0),
        ("5.0s", 5 * S),
        ("5.6s", 5 * S + 600 * MS),
        ("5.s", 5 * S),
        (".5s", 500 * MS),
        ("1.0s", S),
        ("1.00s", S),
        ("1.004s", S + 4 * MS),
        ("1.0040s", S + 4 * MS),
        ("100.00100s", 100 * S + MS),
        ("10ns", 10 * NS),
        ("11us", 11 * US),
        ("12µs", 12 * US),
        ("12μs", 12 * US),
        ("13ms", 13 * MS),
        ("14s", 14 * S),
        ("15m", 15 * M),
        ("16h", 16 * H),
        ("3h30m", 3 * H + 30 * M),
        ("10.5s4m", 4 * M + 10 * S + 500 * MS),
        ("-2m3.4s", -(2 * M + 3 * S + 400 * MS)),
        (
            "1h2m3s4ms5us6ns",
            H + 2 * M + 3 * S + 4 * MS + 5 * US + 6 * NS,
        ),
        ("39h9m14.425s", 39 * H + 9 * M + 14 * S + 425 * MS),
        ("52763797000ns", 52763797000 * NS),
        ("0.3333333333333333333h", 20 * M),
        ("9007199254740993ns", (1 << 53) + 1),
        ("9223372036854775807ns", i64::MAX),
        ("9223372036854775.807us", i64::MAX),
        ("9223372036s854ms775us807ns", i64::MAX),
        ("-9223372036854775808ns", i64::MIN),
        ("-9223372036854775.808us", i64::MIN),
        ("-9223372036s854ms775us808ns", i64::MIN),
        ("-2562047h47m16.854775808s", i64::MIN),
        ("0.100000000000000000000h", 6 * M),
        ("0.830103483285477580700h", 49 * M + 48 * S + 372539827 * NS),
    ];

    /// Go's `time_test.go`: `parseDurationErrorTests`, with the messages of `format.go`.
    const PARSE_DURATION_ERRORS: &[(&str, &str)] = &[
        ("", r#"time: invalid duration """#),
        ("3", r#"time: missing unit in duration "3""#),
        ("-", r#"time: invalid duration "-""#),
        ("s", r#"time: invalid duration "s""#),
        (".", r#"time: invalid duration ".""#),
        ("-.", r#"time: invalid duration "-.""#),
        (".s", r#"time: invalid duration ".s""#),
        ("+.s", r#"time: invalid duration "+.s""#),
        ("1d", r#"time: unknown unit "d" in duration "1d""#),
        ("1S", r#"time: unknown unit "S" in duration "1S""#),
        ("\u{FFFD}", r#"time: invalid duration "\xef\xbf\xbd""#),
        (
            "1\u{FFFD}",
            r#"time: unknown unit "\xef\xbf\xbd" in duration "1\xef\xbf\xbd""#,
        ),
        (
            "9223372036854775810ns",
            r#"time: invalid duration "9223372036854775810ns""#,
        ),
        (
            "9223372036854775808ns",
            r#"time: invalid duration "9223372036854775808ns""#,
        ),
        (
            "-9223372036854775809ns",
            r#"time: invalid duration "-9223372036854775809ns""#,
        ),
        (
            "9223372036854776us",
            r#"time: invalid duration "9223372036854776us""#,
        ),
        ("3000000h", r#"time: invalid duration "3000000h""#),
        (
            "9223372036854775.808us",
            r#"time: invalid duration "9223372036854775.808us""#,
        ),
        (
            "9223372036854ms775us808ns",
            r#"time: invalid duration "9223372036854ms775us808ns""#,
        ),
    ];

    #[test]
    fn parses_durations_as_go() {
        for &(s, want) in PARSE_DURATION {
            assert_eq!(parse_duration(s), Ok(want), "ParseDuration({s:?})");
        }
        for &(s, want) in PARSE_DURATION_ERRORS {
            assert_eq!(
                parse_duration(s).map_err(|e| e.to_string()),
                Err(want.to_string()),
                "ParseDuration({s:?})"
            );
        }
    }

    /// `time.Parse("2006-01-02", s)`: `format_test.go`'s `DateOnly` row, then each rule of
    /// the parse (digits fixed in number, month and day ranges, leap years, no extra text).
    #[test]
    fn parses_dates_as_go() {
        for (s, want) in [
            ("2006-01-02", true),
            ("2024-02-29", true),
            ("2000-02-29", true),
            ("0000-02-29", true),
            ("9999-12-31", true),
            ("2023-02-29", false),
            ("1900-02-29", false),
            ("2024-04-31", false),
            ("2024-00-10", false),
            ("2024-13-01", false),
            ("2024-01-00", false),
            ("2024-1-01", false),
            ("2024-01-1", false),
            ("24-01-01", false),
            ("+024-01-01", false),
            ("2024-01-01 ", false),
            ("2024-01-01T00:00:00Z", false),
            ("2024/01/01", false),
            ("é024-01-1", false),
            ("", false),
        ] {
            assert_eq!(is_date_only(s), want, "Parse(DateOnly, {s:?})");
        }
    }
}
