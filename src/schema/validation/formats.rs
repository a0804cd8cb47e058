//! The string formats the API server checks in custom resources, as kube-openapi's `strfmt`
//! registry checks them (apiextensions' supported list: every other format is ignored).
//!
//! Names are normalized by dropping dashes (`date-time` is `datetime`). The numeric formats
//! (`int32`, `int64`, `float`, `double`) are not on the list: the API server does not check
//! them, so neither do we.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::LazyLock;

use regex::Regex;

/// A format check.
pub(super) type Check = fn(&str) -> bool;

/// Whether the API server checks format `name`.
pub(super) fn is_supported(name: &str) -> bool {
    checker(name).is_some()
}

/// The check for format `name` (dashes ignored), if the API server has one.
pub(super) fn checker(name: &str) -> Option<Check> {
    let check: Check = match name.replace('-', "").as_str() {
        "bsonobjectid" => is_bson_object_id,
        "uri" => is_request_uri,
        "email" => is_email,
        "hostname" => is_hostname,
        "ipv4" => is_ipv4,
        "ipv6" => is_ipv6,
        "cidr" => is_cidr,
        "mac" => is_mac,
        "uuid" => |s| UUID.is_match(s),
        "uuid3" => |s| UUID3.is_match(s),
        "uuid4" => |s| UUID4.is_match(s),
        "uuid5" => |s| UUID5.is_match(s),
        "isbn" => |s| is_isbn10(s) || is_isbn13(s),
        "isbn10" => is_isbn10,
        "isbn13" => is_isbn13,
        "creditcard" => is_credit_card,
        "ssn" => |s| s.len() == 11 && SSN.is_match(s),
        "hexcolor" => |s| HEX_COLOR.is_match(s),
        "rgbcolor" => |s| RGB_COLOR.is_match(s),
        "byte" => |s| BASE64.is_match(s),
        "password" => |_| true,
        "date" => is_date,
        "duration" => is_duration,
        "datetime" => is_date_time,
        // Since Kubernetes 1.34.
        "k8sshortname" => |s| s.len() <= 63 && DNS1123_LABEL.is_match(s),
        "k8slongname" => |s| s.len() <= 253 && DNS1123_SUBDOMAIN.is_match(s),
        _ => return None,
    };
    Some(check)
}

fn re(pattern: &str) -> Regex {
    // Constant patterns, covered by the tests below.
    Regex::new(pattern).unwrap_or_else(|e| panic!("format regex {pattern:?}: {e}"))
}

// Go's `\d` and `\s` are ASCII-only; the classes are spelled out to match.
static UUID: LazyLock<Regex> =
    LazyLock::new(|| re("(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$"));
static UUID3: LazyLock<Regex> =
    LazyLock::new(|| re("(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$"));
static UUID4: LazyLock<Regex> = LazyLock::new(|| {
    re("(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$")
});
static UUID5: LazyLock<Regex> = LazyLock::new(|| {
    re("(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$")
});
static SSN: LazyLock<Regex> = LazyLock::new(|| re("^[0-9]{3}[- ]?[0-9]{2}[- ]?[0-9]{4}$"));
static HEX_COLOR: LazyLock<Regex> = LazyLock::new(|| re("^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$"));
static RGB_COLOR: LazyLock<Regex> = LazyLock::new(|| {
    let n = "(0|[1-9][0-9]?|1[0-9][0-9]?|2[0-4][0-9]|25[0-5])";
    let s = "[\t\n\x0c\r ]*";
    re(&format!("^rgb\\({s}{n}{s},{s}{n}{s},{s}{n}{s}\\)$"))
});
static BASE64: LazyLock<Regex> = LazyLock::new(|| {
    re("^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$")
});
static CREDIT_CARD: LazyLock<Regex> = LazyLock::new(|| {
    re(
        "^(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|6(?:011|5[0-9][0-9])[0-9]{12}|3[47][0-9]{13}|3(?:0[0-5]|[68][0-9])[0-9]{11}|(?:2131|1800|35[0-9]{3})[0-9]{11})$",
    )
});
static DATE_TIME: LazyLock<Regex> =
    LazyLock::new(|| re("^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$"));
static DNS1123_LABEL: LazyLock<Regex> = LazyLock::new(|| re("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"));
static DNS1123_SUBDOMAIN: LazyLock<Regex> =
    LazyLock::new(|| re("^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"));
/// A hostname character: `[a-zA-Z0-9\p{S}\p{L}]`.
static HOST_CHAR: LazyLock<Regex> = LazyLock::new(|| re("^[a-zA-Z0-9\\p{S}\\p{L}]$"));
static TLD: LazyLock<Regex> = LazyLock::new(|| re("^[a-zA-Z\\p{L}]{2,63}$"));
static DURATION_SHAPE: LazyLock<Regex> =
    LazyLock::new(|| re("^[\t\n\x0c\r ]*(?:[0-9]+[\t\n\x0c\r ]*[A-Za-zµ]+[\t\n\x0c\r ]*)+$"));
static DURATION_PART: LazyLock<Regex> = LazyLock::new(|| re("([0-9]+)[\t\n\x0c\r ]*([A-Za-zµ]+)"));

fn is_bson_object_id(s: &str) -> bool {
    s.len() == 24 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `net/mail.ParseAddress` (an address, optionally with a display name).
fn is_email(s: &str) -> bool {
    email_address::EmailAddress::is_valid(s)
}

/// Go's `url.ParseRequestURI`: an absolute URI or an absolute path, with valid escapes, host
/// and port.
fn is_request_uri(s: &str) -> bool {
    if s.is_empty() || s.bytes().any(|b| b < 0x20 || b == 0x7f) || !valid_escapes(s) {
        return false;
    }
    let (scheme, rest) = match split_scheme(s) {
        Ok(parts) => parts,
        Err(()) => return false,
    };
    let rest = rest.split_once('?').map_or(rest, |(before, _)| before);
    if !rest.starts_with('/') {
        // An opaque URI (`mailto:x`) needs a scheme; a relative path is refused.
        return scheme.is_some();
    }
    match rest.strip_prefix("//") {
        Some(after) if scheme.is_some() && !after.starts_with('/') => {
            let authority = after.split('/').next().unwrap_or_default();
            valid_authority(authority)
        }
        _ => true,
    }
}

fn valid_escapes(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let ok = b.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && b.get(i + 2).is_some_and(u8::is_ascii_hexdigit);
            if !ok {
                return false;
            }
            i += 3;
        } else {
            i += 1;
        }
    }
    true
}

/// `getScheme`: `Ok((Some(scheme), rest))`, `Ok((None, s))` without a scheme, `Err` for a
/// missing scheme (`:x`).
fn split_scheme(s: &str) -> Result<(Option<&str>, &str), ()> {
    for (i, c) in s.char_indices() {
        match c {
            'a'..='z' | 'A'..='Z' => {}
            '0'..='9' | '+' | '-' | '.' if i > 0 => {}
            ':' if i == 0 => return Err(()),
            ':' => return Ok((Some(&s[..i]), &s[i + 1..])),
            _ => return Ok((None, s)),
        }
    }
    Ok((None, s))
}

fn valid_authority(authority: &str) -> bool {
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if let Some(bracketed) = host_port.strip_prefix('[') {
        let Some((host, port)) = bracketed.split_once(']') else {
            return false;
        };
        let address = host.split_once('%').map_or(host, |(a, _)| a);
        return address.parse::<Ipv6Addr>().is_ok() && valid_port(port);
    }
    let (host, port) = match host_port.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (host_port, None),
    };
    let host_ok = host
        .bytes()
        .all(|b| b >= 0x80 || b.is_ascii_alphanumeric() || b"-._~%!$&'()*+,;=[]<>\"".contains(&b));
    host_ok && port.is_none_or(|p| valid_port(&format!(":{p}")))
}

/// `validOptionalPort`: empty, or `:` followed by digits.
fn valid_port(port: &str) -> bool {
    port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit()))
}

/// kube-openapi's hostname pattern: a single label (`[c](-?[c]{0,62})?`, so at most one dash,
/// right after the first character) or dot-separated labels ending in a 2-63 letter TLD, at
/// most 255 bytes, labels at most 63 bytes.
fn is_hostname(s: &str) -> bool {
    if s.len() > 255 || s.split('.').any(|label| label.len() > 63) {
        return false;
    }
    let is_c = |c: char| {
        let mut buf = [0u8; 4];
        HOST_CHAR.is_match(c.encode_utf8(&mut buf))
    };
    let parts: Vec<&str> = s.split('.').collect();
    if let [single] = parts.as_slice() {
        let mut chars = single.chars();
        if !chars.next().is_some_and(is_c) {
            return false;
        }
        let rest = chars.as_str();
        let rest = rest.strip_prefix('-').unwrap_or(rest);
        return rest.chars().count() <= 62 && rest.chars().all(is_c);
    }
    let Some((tld, labels)) = parts.split_last() else {
        return false;
    };
    TLD.is_match(tld)
        && labels.iter().all(|label| {
            let chars: Vec<char> = label.chars().collect();
            match chars.as_slice() {
                [] => false,
                [one] => is_c(*one),
                [first, middle @ .., last] => {
                    middle.len() <= 61
                        && is_c(*first)
                        && is_c(*last)
                        && middle.iter().all(|c| *c == '-' || is_c(*c))
                }
            }
        })
}

/// Go's `ParseIPSloppy` for IPv4: four decimal parts, leading zeros allowed.
fn parse_ipv4_sloppy(s: &str) -> Option<Ipv4Addr> {
    let mut octets = [0u8; 4];
    let mut parts = s.split('.');
    for octet in &mut octets {
        let part = parts.next()?;
        if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let digits = part.trim_start_matches('0');
        if digits.len() > 3 {
            return None;
        }
        *octet = u8::try_from(digits.parse::<u16>().unwrap_or(0)).ok()?;
    }
    parts.next().is_none().then(|| Ipv4Addr::from(octets))
}

/// `isIPv4`: `ParseIPSloppy` succeeds and the text has a dot (so `::ffff:1.2.3.4` counts).
fn is_ipv4(s: &str) -> bool {
    parse_ipv4_sloppy(s).is_some() || (s.contains('.') && s.parse::<Ipv6Addr>().is_ok())
}

/// `govalidator.IsIPv6`: `net.ParseIP` succeeds and the text has a colon.
fn is_ipv6(s: &str) -> bool {
    s.contains(':') && s.parse::<Ipv6Addr>().is_ok()
}

/// `ParseCIDRSloppy`: an address and a decimal prefix length within its size.
fn is_cidr(s: &str) -> bool {
    let Some((address, prefix)) = s.split_once('/') else {
        return false;
    };
    let bits = if parse_ipv4_sloppy(address).is_some() {
        32
    } else if address.parse::<Ipv6Addr>().is_ok() {
        128
    } else {
        return false;
    };
    !prefix.is_empty()
        && prefix.bytes().all(|b| b.is_ascii_digit())
        && prefix
            .trim_start_matches('0')
            .parse::<u32>()
            .map_or(prefix.bytes().all(|b| b == b'0'), |n| n <= bits)
}

/// `net.ParseMAC`: 6, 8 or 20 octets as `xx:xx:..`, `xx-xx-..` or `xxxx.xxxx...`.
fn is_mac(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 14 {
        return false;
    }
    let hex_groups = |sep: u8, width: usize| {
        s.split(sep as char)
            .all(|g| g.len() == width && g.bytes().all(|c| c.is_ascii_hexdigit()))
    };
    let octets = if b[2] == b':' || b[2] == b'-' {
        if !(b.len() + 1).is_multiple_of(3) || !hex_groups(b[2], 2) {
            return false;
        }
        (b.len() + 1) / 3
    } else if b[4] == b'.' {
        if !(b.len() + 1).is_multiple_of(5) || !hex_groups(b'.', 4) {
            return false;
        }
        2 * (b.len() + 1) / 5
    } else {
        return false;
    };
    matches!(octets, 6 | 8 | 20)
}

/// ISBN check digits after dropping spaces and dashes (`govalidator.IsISBN`).
fn isbn_digits(s: &str) -> Vec<u8> {
    s.bytes()
        .filter(|b| !matches!(b, b'\t' | b'\n' | b'\x0c' | b'\r' | b' ' | b'-'))
        .collect()
}

fn is_isbn10(s: &str) -> bool {
    let d = isbn_digits(s);
    let shape = d.len() == 10
        && d[..9].iter().all(u8::is_ascii_digit)
        && (d[9].is_ascii_digit() || d[9] == b'X');
    if !shape {
        return false;
    }
    let mut sum: u32 = (0..9)
        .map(|i| (i as u32 + 1) * u32::from(d[i] - b'0'))
        .sum();
    sum += 10
        * if d[9] == b'X' {
            10
        } else {
            u32::from(d[9] - b'0')
        };
    sum.is_multiple_of(11)
}

fn is_isbn13(s: &str) -> bool {
    let d = isbn_digits(s);
    if d.len() != 13 || !d.iter().all(u8::is_ascii_digit) {
        return false;
    }
    let sum: u32 = (0..12)
        .map(|i| if i % 2 == 0 { 1 } else { 3 } * u32::from(d[i] - b'0'))
        .sum();
    u32::from(d[12] - b'0') == (10 - sum % 10) % 10
}

/// The card pattern on the digits only, then the Luhn check.
fn is_credit_card(s: &str) -> bool {
    let digits: String = s.chars().filter(char::is_ascii_digit).collect();
    if !CREDIT_CARD.is_match(&digits) {
        return false;
    }
    let sum: u32 = digits
        .bytes()
        .rev()
        .enumerate()
        .map(|(i, b)| {
            let n = u32::from(b - b'0');
            if i % 2 == 1 {
                let doubled = n * 2;
                if doubled >= 10 {
                    doubled % 10 + 1
                } else {
                    doubled
                }
            } else {
                n
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

/// strfmt's `IsDate`: Go's `time.Parse("2006-01-02", s)` succeeds.
fn is_date(s: &str) -> bool {
    crate::go::time::is_date_only(s)
}

/// strfmt's `IsDateTime`: a date, `t`, and `hh:mm:ss[.frac](z|±hh:mm)`, case-insensitive.
fn is_date_time(s: &str) -> bool {
    if s.len() < 4 {
        return false;
    }
    let lower = s.to_lowercase();
    let mut parts = lower.split('t');
    let (Some(date), Some(time)) = (parts.next(), parts.next()) else {
        return false;
    };
    if !is_date(date) {
        return false;
    }
    DATE_TIME.captures(time).is_some_and(|m| {
        let field = |i: usize| m.get(i).map_or("", |g| g.as_str());
        field(1) <= "23" && field(2) <= "59" && field(3) <= "59"
    })
}

/// strfmt's `IsDuration`: [`strfmt_duration`] reads it.
fn is_duration(s: &str) -> bool {
    strfmt_duration(s).is_some()
}

/// strfmt's `ParseDuration`, in nanoseconds: Go's `time.ParseDuration`, or a list of
/// `<n> <unit>` with units like `ns`, `ms`, `sec`, `min`, `hours`, `days`, `weeks` (summed
/// with Go's wrapping arithmetic); `None` when strfmt refuses the text. What a `duration`
/// string is to CEL on the API server.
pub(super) fn strfmt_duration(s: &str) -> Option<i64> {
    if let Ok(ns) = crate::go::time::parse_duration(s) {
        return Some(ns);
    }
    if !DURATION_SHAPE.is_match(s) {
        return None;
    }
    const HOUR: i64 = 3_600_000_000_000;
    const UNITS: [(&[&str], i64); 8] = [
        (&["ns", "nano"], 1),
        (&["us", "µs", "micro"], 1_000),
        (&["ms", "milli"], 1_000_000),
        (&["s", "sec"], 1_000_000_000),
        (&["m", "min"], 60_000_000_000),
        (&["h", "hr", "hour"], HOUR),
        (&["d", "day"], 24 * HOUR),
        (&["w", "wk", "week"], 7 * 24 * HOUR),
    ];
    let mut matched = false;
    let mut total: i64 = 0;
    for part in DURATION_PART.captures_iter(s) {
        let number = part.get(1).map_or("", |m| m.as_str());
        // strconv.Atoi fails on overflow, failing the whole parse.
        let factor = number.parse::<i64>().ok()?;
        let unit = part.get(2).map_or("", |m| m.as_str()).to_lowercase();
        for (variants, multiplier) in UNITS {
            let last = variants.len() - 1;
            for (i, variant) in variants.iter().enumerate() {
                if (i == last && unit.starts_with(variant)) || variant.eq_ignore_ascii_case(&unit) {
                    matched = true;
                    total = total.wrapping_add(factor.wrapping_mul(multiplier));
                }
            }
        }
    }
    matched.then_some(total)
}

/// Go's `time.ParseDuration` ([`crate::go::time::parse_duration`]) in seconds; `None` when
/// Go refuses the text.
pub fn go_duration_seconds(s: &str) -> Option<f64> {
    crate::go::time::parse_duration(s)
        .ok()
        .map(|ns| ns as f64 / 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(name: &str) -> Check {
        checker(name).expect("supported format")
    }

    #[test]
    fn every_regex_compiles() {
        for r in [
            &UUID,
            &UUID3,
            &UUID4,
            &UUID5,
            &SSN,
            &HEX_COLOR,
            &RGB_COLOR,
            &BASE64,
            &CREDIT_CARD,
            &DATE_TIME,
            &DNS1123_LABEL,
            &DNS1123_SUBDOMAIN,
            &HOST_CHAR,
            &TLD,
            &DURATION_SHAPE,
            &DURATION_PART,
        ] {
            LazyLock::force(r);
        }
    }

    #[test]
    fn supported_list_and_normalization() {
        for name in ["date-time", "datetime", "u-u-i-d", "k8s-short-name", "byte"] {
            assert!(is_supported(name), "{name}");
        }
        for name in ["int32", "int64", "float", "double", "made-up", "quantity"] {
            assert!(!is_supported(name), "{name}");
        }
    }

    #[test]
    fn formats_accept_and_refuse_like_strfmt() {
        let cases: &[(&str, &[&str], &[&str])] = &[
            (
                "uri",
                &["https://example.com/a?b=c", "/abs/path", "mailto:x@y"],
                &["bad", "", "http://exa mple.com", "%zz", ":x"],
            ),
            (
                "email",
                &["a@b.example", "Name <a@b.example>"],
                &["a@", "plain"],
            ),
            (
                "hostname",
                &["example.com", "a", "a-b", "sub.example.london"],
                &["my-host", "-a.com", "10.0.0.1", "a..b"],
            ),
            (
                "ipv4",
                &["10.0.0.1", "010.0.0.1", "::ffff:1.2.3.4"],
                &["10.0.0", "256.0.0.1", "::1"],
            ),
            (
                "ipv6",
                &["::1", "fe80::1", "::ffff:1.2.3.4"],
                &["1.2.3.4", "fe80::1%eth0", "x"],
            ),
            (
                "cidr",
                &["10.0.0.0/8", "::/0", "10.0.0.0/32"],
                &["10.0.0.0/33", "10.0.0.0", "10.0.0.0/"],
            ),
            (
                "mac",
                &[
                    "00:00:5e:00:53:01",
                    "00-00-5E-00-53-01",
                    "0000.5e00.5301",
                    "00:00:00:00:fe:80:00:00",
                ],
                &["00:00:5e:00:53", "0000:5e00:5301", "zz:00:5e:00:53:01"],
            ),
            (
                "uuid",
                &[
                    "123e4567-e89b-12d3-a456-426614174000",
                    "123E4567E89B12D3A456426614174000",
                ],
                &["123e4567-e89b-12d3-a456"],
            ),
            (
                "uuid4",
                &["123e4567-e89b-42d3-a456-426614174000"],
                &["123e4567-e89b-12d3-a456-426614174000"],
            ),
            ("isbn10", &["0321751043", "0-321-75104-3"], &["0321751044"]),
            ("isbn13", &["978-0321751041"], &["9780321751042"]),
            ("isbn", &["0321751043", "978-0321751041"], &["123"]),
            (
                "creditcard",
                &["4111 1111 1111 1111"],
                &["4111 1111 1111 1112"],
            ),
            (
                "ssn",
                &["123-45-6789", "123 45 6789"],
                &["123456789", "123-45-678"],
            ),
            ("hexcolor", &["#fff", "A0B1C2"], &["#ffff"]),
            ("rgbcolor", &["rgb(255, 0, 10)"], &["rgb(256,0,0)"]),
            ("byte", &["aGVsbG8=", "aGk="], &["aGVsbG8", "", "a b="]),
            ("password", &["anything"], &[]),
            (
                "date",
                &["2024-02-29"],
                &["2023-02-29", "2024-2-1", "24-02-01", "é24-02-1"],
            ),
            (
                "date-time",
                &["2024-01-02T03:04:05Z", "2024-01-02t03:04:05.123+02:00"],
                &["2024-01-02", "2024-01-02T24:00:00Z", "2024-01-02T03:04:05"],
            ),
            (
                "duration",
                &["1h30m", "-1.5s", "0", "3 days", "5 minutes", "2wk"],
                &["1x", "", "h", "5 months"],
            ),
            (
                "bsonobjectid",
                &["507f1f77bcf86cd799439011"],
                &["507f1f77bcf86cd79943901"],
            ),
            ("k8s-short-name", &["my-name"], &["My-Name", "a."]),
            ("k8s-long-name", &["a.b-c.d"], &["a_b"]),
        ];
        for (format, good, bad) in cases {
            let f = check(format);
            for s in *good {
                assert!(f(s), "{format}: {s:?} should be valid");
            }
            for s in *bad {
                assert!(!f(s), "{format}: {s:?} should be invalid");
            }
        }
    }
}
