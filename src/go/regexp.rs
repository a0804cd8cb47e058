//! Go's `regexp.Compile` and `regexp.MatchString`: Go's verdict and error words come from
//! [`syntax`], a port of Go's parser; an accepted pattern is rewritten into the `regex`
//! crate's dialect with Go's meaning, then compiled.
//!
//! Where the dialects differ for a pattern Go accepts, the rewrite keeps Go's meaning:
//! `\d \w \s \b` are ASCII-only (`\s` without `\v`); `\Q...\E` is literal text; `{` that does
//! not start a well-formed repetition is a literal; `\<` and `\>` are literals (word
//! boundaries in Rust); `\p{^Name}` is `\P{Name}`; group names are dropped (Go allows a name
//! twice, Rust does not, and matching only needs group numbers); inside a class `[` is a
//! literal unless it opens `[:name:]`, and `&`, `~` and a `-` that is not a range are
//! literals (Rust's set operators).

pub mod syntax;

use regex::{Regex, RegexBuilder};

/// Why a pattern was not compiled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegexpError {
    /// Go refuses it, with Go's message.
    #[error("{0}")]
    Invalid(String),
    /// Go compiles it, but its program here would be larger than the review's memory
    /// allows: a limit of this tool, not an error of the pattern.
    #[error("{0}")]
    TooLarge(String),
}

/// Compiles `pattern` as Go's `regexp.Compile` does, or gives Go's error message
/// (``error parsing regexp: missing closing ): `(a` ``). For a pattern that is only checked;
/// one that will search an input is compiled by [`compile_to_search`].
pub fn compile(pattern: &str) -> Result<Regex, RegexpError> {
    compile_within(pattern, None)
}

/// [`compile`] for a search of `haystack`: refused as [`RegexpError::TooLarge`] when the
/// compiled program times the input's length passes [`MAX_SEARCH_WORK`], because a search
/// cannot be interrupted and the review's deadline is only checked between searches.
pub fn compile_to_search(pattern: &str, haystack: &str) -> Result<Regex, RegexpError> {
    compile_within(pattern, Some(haystack.len()))
}

fn compile_within(pattern: &str, haystack: Option<usize>) -> Result<Regex, RegexpError> {
    syntax::check(pattern).map_err(|e| RegexpError::Invalid(e.go_message()))?;
    let translated = translate(pattern);
    // Go compiles whatever its parser accepts; the regex crate stops at a size of its own
    // (10 MiB by default), which is no error of the pattern. The review's budget decides.
    // Compiling takes about twice the program's size at its peak.
    let memory_limit = crate::budget::remaining()
        .map_or(MAX_COMPILED_BYTES, |r| r / 2)
        .min(MAX_COMPILED_BYTES);
    let search_limit =
        haystack.map(|n| usize::try_from(MAX_SEARCH_WORK / n.max(1) as u64).unwrap_or(usize::MAX));
    let limit = search_limit.map_or(memory_limit, |s| s.min(memory_limit));
    RegexBuilder::new(&translated)
        .octal(true)
        .size_limit(limit)
        .build()
        .map_err(|e| {
            if let regex::Error::CompiledTooBig(_) = e {
                return RegexpError::TooLarge(match (haystack, search_limit) {
                    (Some(n), Some(s)) if s < memory_limit => format!(
                        "the regexp `{}` is too large to search {} of input here: one \
                         search may take at most {MAX_SEARCH_WORK} units of work (its \
                         compiled size times the input's length), and a search is not \
                         interrupted at the deadline",
                        shorten(pattern),
                        crate::budget::human_bytes(n)
                    ),
                    _ => format!(
                        "the compiled regexp `{}` would take more than {} MiB here (Go's is \
                         smaller)",
                        shorten(pattern),
                        limit / (1024 * 1024)
                    ),
                });
            }
            // Only Rust's own limits get here; keep its reason in Go's frame.
            let reason = e.to_string();
            let reason = reason
                .lines()
                .last()
                .unwrap_or_default()
                .trim_start_matches("error: ")
                .to_string();
            RegexpError::Invalid(format!("error parsing regexp: {reason}: `{pattern}`"))
        })
}

/// Go's `regexp.MatchString(pattern, s)`: whether `pattern` matches somewhere in `s`, or
/// `None` when Go refuses the pattern or it cannot be compiled (or searched) here.
pub fn match_string(pattern: &str, s: &str) -> Option<bool> {
    compile_to_search(pattern, s).ok().map(|re| re.is_match(s))
}

/// The most work one search may take: the compiled program's size in bytes times the
/// input's length. The regex crate's slowest search (a lazy DFA that keeps rebuilding its
/// states, or the PikeVM) took 0.26-0.37 ns per unit in a release build on a loaded 2-core
/// machine, so one search ends within about 0.8 s: a review stops that soon after its
/// deadline. An ordinary pattern still searches most of a megabyte (`^(.*)-(.*)$` is a
/// program of 2,240 bytes, `[a-z]+` of 320).
pub const MAX_SEARCH_WORK: u64 = 1 << 31;

/// The first 80 characters of a pattern, for messages.
fn shorten(pattern: &str) -> String {
    match pattern.char_indices().nth(80) {
        Some((i, _)) => format!("{}...", &pattern[..i]),
        None => pattern.to_string(),
    }
}

/// The largest compiled program outside a budget: above what Go's parser accepts.
const MAX_COMPILED_BYTES: usize = 256 * 1024 * 1024;

const DIGIT: &str = "0-9";
const WORD: &str = "0-9A-Za-z_";
const SPACE: &str = r"\t\n\f\r ";

/// Rewrites a pattern Go accepts into the `regex` crate's dialect, keeping Go's meaning.
fn translate(pattern: &str) -> String {
    let chars: Vec<char> = pattern.chars().collect();
    let at = |i: usize| chars.get(i).copied();
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut i = 0;
    while let Some(c) = at(i) {
        match c {
            '\\' => {
                let Some(e) = at(i + 1) else {
                    out.push('\\');
                    break;
                };
                match e {
                    'd' => out.push_str("[0-9]"),
                    'D' => out.push_str("[^0-9]"),
                    'w' => out.push_str("[0-9A-Za-z_]"),
                    'W' => out.push_str("[^0-9A-Za-z_]"),
                    's' => out.push_str(r"[\t\n\f\r ]"),
                    'S' => out.push_str(r"[^\t\n\f\r ]"),
                    'b' => out.push_str(r"(?-u:\b)"),
                    'B' => out.push_str(r"(?-u:\B)"),
                    'Q' => {
                        // Literal text up to \E or the end.
                        i += 2;
                        while let Some(q) = at(i) {
                            if q == '\\' && at(i + 1) == Some('E') {
                                i += 2;
                                break;
                            }
                            out.push_str(&regex::escape(q.encode_utf8(&mut [0u8; 4])));
                            i += 1;
                        }
                        continue;
                    }
                    'p' | 'P' | 'x' => {
                        i = copy_escape(&chars, i, &mut out);
                        continue;
                    }
                    e if e.is_ascii_punctuation() => {
                        out.push_str(&regex::escape(e.encode_utf8(&mut [0u8; 4])));
                    }
                    e => {
                        // \a \f \t \n \r \v, octal, \A \z: the same in both dialects.
                        out.push('\\');
                        out.push(e);
                    }
                }
                i += 2;
            }
            '[' => i = translate_class(&chars, i, &mut out),
            '(' => {
                out.push('(');
                i += 1;
                // (?P<name> and (?<name> become plain groups.
                let named =
                    if at(i) == Some('?') && at(i + 1) == Some('P') && at(i + 2) == Some('<') {
                        Some(i + 3)
                    } else if at(i) == Some('?') && at(i + 1) == Some('<') {
                        Some(i + 2)
                    } else {
                        None
                    };
                if let Some(start) = named {
                    let mut j = start;
                    while at(j).is_some_and(|n| n != '>') {
                        j += 1;
                    }
                    i = j + 1;
                }
            }
            '{' => match repeat_len(&chars, i) {
                Some(len) => {
                    out.extend(chars.iter().skip(i).take(len));
                    i += len;
                }
                None => {
                    out.push_str(r"\{");
                    i += 1;
                }
            },
            '}' => {
                out.push_str(r"\}");
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

/// Copies the escape at `chars[i]` (`\pL`, `\p{Name}`, `\x41`, `\x{41}`, `\n`, `\012`, ...)
/// to `out`, turning `\p{^Name}` into `\P{Name}`; returns the index after it.
fn copy_escape(chars: &[char], i: usize, out: &mut String) -> usize {
    let at = |k: usize| chars.get(k).copied();
    let Some(e) = at(i + 1) else {
        out.push('\\');
        return i + 1;
    };
    match e {
        'p' | 'P' | 'x' if at(i + 2) == Some('{') => {
            let mut j = i + 3;
            let mut body = String::new();
            while let Some(c) = at(j) {
                j += 1;
                if c == '}' {
                    break;
                }
                body.push(c);
            }
            let (e, body) = match (e, body.strip_prefix('^')) {
                ('p', Some(rest)) => ('P', rest.to_string()),
                ('P', Some(rest)) => ('p', rest.to_string()),
                _ => (e, body),
            };
            out.push('\\');
            out.push(e);
            out.push('{');
            out.push_str(&body);
            out.push('}');
            j
        }
        'p' | 'P' => {
            out.push('\\');
            out.push(e);
            if let Some(name) = at(i + 2) {
                out.push(name);
            }
            i + 3
        }
        'x' => {
            out.push_str("\\x");
            out.extend(chars.iter().skip(i + 2).take(2));
            i + 4
        }
        '0'..='7' => {
            // Up to three octal digits.
            let mut j = i + 1;
            out.push('\\');
            while j < i + 4 && at(j).is_some_and(|c| ('0'..='7').contains(&c)) {
                if let Some(c) = at(j) {
                    out.push(c);
                }
                j += 1;
            }
            j
        }
        e => {
            out.push('\\');
            out.push(e);
            i + 2
        }
    }
}

/// Translates the class starting at `chars[i] == '['`; returns the index after it.
fn translate_class(chars: &[char], i: usize, out: &mut String) -> usize {
    let at = |k: usize| chars.get(k).copied();
    out.push('[');
    let mut i = i + 1;
    if at(i) == Some('^') {
        out.push('^');
        i += 1;
    }
    // ']' and '-' are literals first in a class.
    let mut first = true;
    while let Some(c) = at(i) {
        if c == ']' && !first {
            break;
        }
        first = false;
        // [:alpha:] and [:^alpha:]
        if c == '['
            && at(i + 1) == Some(':')
            && let Some(end) = find_posix_end(chars, i + 2)
        {
            out.extend(chars.iter().skip(i).take(end - i));
            i = end;
            continue;
        }
        if c == '\\' {
            let perl = match at(i + 1) {
                Some('d') => Some(DIGIT.to_string()),
                Some('D') => Some(format!("[^{DIGIT}]")),
                Some('w') => Some(WORD.to_string()),
                Some('W') => Some(format!("[^{WORD}]")),
                Some('s') => Some(SPACE.to_string()),
                Some('S') => Some(format!("[^{SPACE}]")),
                _ => None,
            };
            if let Some(perl) = perl {
                out.push_str(&perl);
                i += 2;
                continue;
            }
            if matches!(at(i + 1), Some('p' | 'P')) {
                i = copy_escape(chars, i, out);
                continue;
            }
        }
        // A single character, or a range of two.
        i = class_char(chars, i, out);
        if at(i) == Some('-') && at(i + 1).is_some_and(|n| n != ']') {
            out.push('-');
            i = class_char(chars, i + 1, out);
        }
    }
    out.push(']');
    i + 1
}

/// Copies one class character (literal or escape) at `chars[i]`; returns the index after.
fn class_char(chars: &[char], i: usize, out: &mut String) -> usize {
    match chars.get(i).copied() {
        None => i,
        Some('\\') => match chars.get(i + 1).copied() {
            Some(e) if e.is_ascii_punctuation() => {
                push_class_literal(e, out);
                i + 2
            }
            _ => copy_escape(chars, i, out),
        },
        Some(c) => {
            push_class_literal(c, out);
            i + 1
        }
    }
}

/// A literal inside a class, escaped where Rust gives it a meaning Go does not.
fn push_class_literal(c: char, out: &mut String) {
    if matches!(c, '[' | ']' | '\\' | '-' | '^' | '&' | '~') {
        out.push('\\');
    }
    out.push(c);
}

/// The index after the `:]` closing a POSIX class name starting at `chars[i]`.
fn find_posix_end(chars: &[char], i: usize) -> Option<usize> {
    let mut j = i;
    while let Some(c) = chars.get(j).copied() {
        if c == ':' && chars.get(j + 1) == Some(&']') {
            return Some(j + 2);
        }
        if !(c.is_ascii_alphabetic() || c == '^') {
            return None;
        }
        j += 1;
    }
    None
}

/// Go's `parseRepeat`: the length of `{n}`, `{n,}` or `{n,m}` at `chars[i]` (decimal
/// numbers without leading zeros), or `None` when `{` is a literal.
fn repeat_len(chars: &[char], i: usize) -> Option<usize> {
    let at = |k: usize| chars.get(k).copied();
    let number = |start: usize| -> Option<usize> {
        let mut j = start;
        while at(j).is_some_and(|c| c.is_ascii_digit()) {
            j += 1;
        }
        let len = j - start;
        if len == 0 || (len > 1 && at(start) == Some('0')) {
            return None;
        }
        Some(j)
    };
    let mut j = number(i + 1)?;
    if at(j) == Some(',') {
        j += 1;
        if at(j) != Some('}') {
            j = number(j)?;
        }
    }
    (at(j) == Some('}')).then_some(j + 1 - i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn translation_keeps_gos_meaning() {
        assert_eq!(
            translate(r"^(\d+)-\w\s$"),
            r"^([0-9]+)-[0-9A-Za-z_][\t\n\f\r ]$"
        );
        assert_eq!(translate(r"[\d\S]"), r"[0-9[^\t\n\f\r ]]");
        assert_eq!(
            translate(r"a{2}b{x}c{,3}d{01}"),
            r"a{2}b\{x\}c\{,3\}d\{01\}"
        );
        assert_eq!(translate(r"\Q.*\E+"), r"\.\*+");
        assert_eq!(translate(r"(?P<a>x)(?<a>y)"), r"(x)(y)");
        assert_eq!(
            translate(r"\p{^Greek}\pL\x{41}\x41\<"),
            r"\P{Greek}\pL\x{41}\x41<"
        );
        assert_eq!(translate(r"[[a&&b~~c]"), r"[\[a\&\&b\~\~c]");
        assert_eq!(
            translate(r"[]a-][+--][[:alpha:]]"),
            r"[\]a\-][+-\-][[:alpha:]]"
        );
        assert_eq!(translate(r"\bx\B"), r"(?-u:\b)x(?-u:\B)");
    }

    /// One search is bounded by its program's size times the input's length: the pattern of
    /// the outside probe's regexp hog (86 s of CPU over a long input) is searched over a short
    /// input and refused over a long one; an ordinary pattern searches a megabyte.
    #[test]
    fn searches_are_bounded_by_program_and_input() {
        let hog: Vec<String> = (0..30).map(|i| format!("[ab]*a[ab]{{300}}x{i}")).collect();
        let hog = hog.join("|");
        assert!(compile_to_search(&hog, "ab").is_ok());
        let long = "ab".repeat(50_000);
        let Err(RegexpError::TooLarge(message)) = compile_to_search(&hog, &long) else {
            panic!("searched 100,000 bytes");
        };
        assert_eq!(
            message,
            "the regexp `[ab]*a[ab]{300}x0|[ab]*a[ab]{300}x1|[ab]*a[ab]{300}x2|[ab]*a[ab]{300}x3|\
             [ab]*a[a...` is too large to search 97.7 KiB of input here: one \
             search may take at most 2147483648 units of work (its compiled size times the \
             input's length), and a search is not interrupted at the deadline"
        );
        // Only checked, it compiles.
        assert!(compile(&hog).is_ok());
        let long = format!("{}-x", "a".repeat(512 << 10));
        let re = compile_to_search(r"^(.*)-(.*)$", &long).expect("an ordinary pattern");
        assert_eq!(
            re.captures(&long).map(|c| c[2].to_string()),
            Some("x".into())
        );
        assert_eq!(match_string("x$", &long), Some(true));
        assert_eq!(match_string(&hog, &long), None);
    }

    #[test]
    fn compiled_expressions_match_as_go() {
        let re = |p: &str| compile(p).map_err(|e| e.to_string());
        assert!(re(r"^\d+$").is_ok_and(|r| r.is_match("123") && !r.is_match("١٢٣")));
        assert!(re(r"\w").is_ok_and(|r| !r.is_match("é")));
        assert!(re(r"a{x}").is_ok_and(|r| r.is_match("a{x}")));
        assert!(re(r"(?i)straße").is_ok_and(|r| !r.is_match("STRASSE") && r.is_match("STRAßE")));
        assert!(re(r"[+--]").is_ok_and(|r| r.is_match(",") && !r.is_match("0")));
        assert_eq!(
            re("(abc").err(),
            Some("error parsing regexp: missing closing ): `(abc`".to_string())
        );
        assert_eq!(
            re("a**").err(),
            Some("error parsing regexp: invalid nested repetition operator: `**`".to_string())
        );
        assert_eq!(
            re(r"\Z").err(),
            Some(r"error parsing regexp: invalid escape sequence: `\Z`".to_string())
        );
    }

    /// `example_test.go`'s `ExampleMatchString`, and patterns whose meaning in Go differs
    /// from the `regex` crate's.
    #[test]
    fn match_string_as_go() {
        for (pattern, s, want) in [
            ("foo.*", "seafood", Some(true)),
            ("bar.*", "seafood", Some(false)),
            ("a(b", "seafood", None),
            (r"^\d+$", "123", Some(true)),
            (r"^\d+$", "١٢٣", Some(false)),
            (r"\w", "é", Some(false)),
            (r"^\s$", "\u{b}", Some(false)),
            (r"a{,5}", "a{,5}", Some(true)),
            (r"\Qa.b\E", "axb", Some(false)),
            (r"\Qa.b\E", "a.b", Some(true)),
            (r"(?i)straße", "STRASSE", Some(false)),
            (r"(?P<x>a)(?P<x>b)", "ab", Some(true)),
        ] {
            assert_eq!(
                match_string(pattern, s),
                want,
                "MatchString({pattern:?}, {s:?})"
            );
        }
    }
}
