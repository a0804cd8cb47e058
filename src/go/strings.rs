//! Go's `strings.ToUpper`, `strings.ToLower` and `strings.ReplaceAll`, with the rune
//! mappings of `unicode.ToUpper` and `unicode.ToLower`.
//!
//! Go maps case rune by rune with Unicode's simple mappings: a rune whose upper or lower
//! case is several runes (`ß`, `ŉ`) stays as it is, unlike Rust's `to_uppercase`.

use crate::budget::{self, Exceeded};

/// Go's `unicode.ToUpper` for one rune: the simple mapping, so `ß` stays `ß`.
fn upper_rune(c: char) -> char {
    let r = u32::from(c);
    // Greek with ypogegrammeni: a simple mapping to the titlecase letter.
    let simple = match r {
        0x1F80..=0x1F87 | 0x1F90..=0x1F97 | 0x1FA0..=0x1FA7 => Some(r + 8),
        0x1FB3 => Some(0x1FBC),
        0x1FC3 => Some(0x1FCC),
        0x1FF3 => Some(0x1FFC),
        _ => None,
    };
    if let Some(s) = simple.and_then(char::from_u32) {
        return s;
    }
    let mut up = c.to_uppercase();
    match (up.next(), up.next()) {
        (Some(u), None) => u,
        // Several runes is a full mapping; the simple one keeps the rune.
        _ => c,
    }
}

/// Go's `unicode.ToLower` for one rune.
fn lower_rune(c: char) -> char {
    if c == '\u{130}' {
        return 'i';
    }
    let mut low = c.to_lowercase();
    match (low.next(), low.next()) {
        (Some(l), None) => l,
        _ => c,
    }
}

/// Go's `strings.ToUpper`.
pub fn to_upper(s: &str) -> String {
    s.chars().map(upper_rune).collect()
}

/// Go's `strings.ToLower`.
pub fn to_lower(s: &str) -> String {
    s.chars().map(lower_rune).collect()
}

/// Go's `strings.ReplaceAll`. An empty `old` inserts `new` before every rune and at the
/// end, as Go does. The result's size is asked of the review's budget first.
pub fn replace_all(s: &str, old: &str, new: &str) -> Result<String, Exceeded> {
    if old.is_empty() {
        let runes = s.chars().count() + 1;
        budget::reserve(s.len().saturating_add(runes.saturating_mul(new.len())))?;
        let mut out = String::new();
        for c in s.chars() {
            budget::step()?;
            out.push_str(new);
            out.push(c);
        }
        out.push_str(new);
        return Ok(out);
    }
    let count = s.matches(old).count();
    budget::reserve(s.len().saturating_add(count.saturating_mul(new.len())))?;
    budget::steps(count as u64)?;
    Ok(s.replace(old, new))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `strings_test.go`'s `upperTests` and `lowerTests`, and the runes whose simple and
    /// full mappings differ.
    #[test]
    fn maps_case_as_go() {
        for (s, upper) in [
            ("", ""),
            ("ONLYUPPER", "ONLYUPPER"),
            ("abc", "ABC"),
            ("AbC123", "ABC123"),
            ("azAZ09_", "AZAZ09_"),
            (
                "longStrinGwitHmixofsmaLLandcAps",
                "LONGSTRINGWITHMIXOFSMALLANDCAPS",
            ),
            (
                "RENAN BASTOS 93 AOSDAJDJAIDJAIDAJIaidsjjaidijadsjiadjiOOKKO",
                "RENAN BASTOS 93 AOSDAJDJAIDJAIDAJIAIDSJJAIDIJADSJIADJIOOKKO",
            ),
            (
                "long\u{0250}string\u{0250}with\u{0250}nonascii\u{2C6F}chars",
                "LONG\u{2C6F}STRING\u{2C6F}WITH\u{2C6F}NONASCII\u{2C6F}CHARS",
            ),
            (
                "\u{0250}\u{0250}\u{0250}\u{0250}\u{0250}",
                "\u{2C6F}\u{2C6F}\u{2C6F}\u{2C6F}\u{2C6F}",
            ),
            ("a\u{0080}\u{10FFFF}", "A\u{0080}\u{10FFFF}"),
            ("straße", "STRAßE"),
            ("ŉ", "ŉ"),
            ("\u{1F80}\u{1FB3}", "\u{1F88}\u{1FBC}"),
        ] {
            assert_eq!(to_upper(s), upper, "ToUpper({s:?})");
        }
        for (s, lower) in [
            ("", ""),
            ("abc", "abc"),
            ("AbC123", "abc123"),
            ("azAZ09_", "azaz09_"),
            (
                "longStrinGwitHmixofsmaLLandcAps",
                "longstringwithmixofsmallandcaps",
            ),
            (
                "LONG\u{2C6F}STRING\u{2C6F}WITH\u{2C6F}NONASCII\u{2C6F}CHARS",
                "long\u{0250}string\u{0250}with\u{0250}nonascii\u{0250}chars",
            ),
            (
                "\u{2C6D}\u{2C6D}\u{2C6D}\u{2C6D}\u{2C6D}",
                "\u{0251}\u{0251}\u{0251}\u{0251}\u{0251}",
            ),
            ("A\u{0080}\u{10FFFF}", "a\u{0080}\u{10FFFF}"),
            ("CrossPlane İ", "crossplane i"),
        ] {
            assert_eq!(to_lower(s), lower, "ToLower({s:?})");
        }
    }

    /// `strings_test.go`'s `ReplaceAll` rows (`replaceTests` with n = -1).
    #[test]
    fn replaces_as_go() {
        for (s, old, new, want) in [
            ("hello", "l", "L", "heLLo"),
            ("hello", "x", "X", "hello"),
            ("", "x", "X", ""),
            ("radar", "r", "<r>", "<r>ada<r>"),
            ("", "", "<>", "<>"),
            ("banana", "a", "<>", "b<>n<>n<>"),
            ("banana", "ana", "<>", "b<>na"),
            ("banana", "", "<>", "<>b<>a<>n<>a<>n<>a<>"),
            ("banana", "a", "a", "banana"),
            ("☺☻☹", "", "<>", "<>☺<>☻<>☹<>"),
            ("Crossplane", "Cr", "B", "Bossplane"),
        ] {
            assert_eq!(
                replace_all(s, old, new).as_deref(),
                Ok(want),
                "ReplaceAll({s:?}, {old:?}, {new:?})"
            );
        }
    }
}
