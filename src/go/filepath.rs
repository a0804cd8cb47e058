//! Go's `path/filepath.Match` (Go 1.22 to 1.25, on Linux: `/` the separator, `\` an
//! escape), which Crossplane's ManagedResourceActivationPolicies match MRD names with
//! (`apis/apiextensions/v1alpha1/mrd_policy_types.go`: `ActivationPolicy.Match`).
//!
//! The pattern syntax:
//!
//! - `*` matches any sequence of non-`/` bytes, `?` one non-`/` rune;
//! - `[` `^`? ranges `]` a class of runes (`lo-hi`, or one rune; not empty), `\c` in it a
//!   literal `c`;
//! - `\c` matches `c`; any other byte matches itself.
//!
//! The whole name must match. A malformed pattern is [`BadPattern`], also when the name has
//! already failed to match (Go checks the rest of the pattern before answering `false`),
//! but not when a trailing `*` or an early match ends the walk first: `Match("a*", "ab[")`
//! is fine, `Match("[", "a")` is not, exactly as Go.

use thiserror::Error;

/// Go's `filepath.ErrBadPattern`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("syntax error in pattern")]
pub struct BadPattern;

/// The path separator on Linux.
const SEPARATOR: u8 = b'/';

/// Go's `utf8.RuneError`.
const RUNE_ERROR: u32 = 0xFFFD;

/// Go's `filepath.Match(pattern, name)`.
pub fn matches(pattern: &str, name: &str) -> Result<bool, BadPattern> {
    let mut pattern = pattern.as_bytes();
    let mut name = name.as_bytes();
    // Go reads a chunk to its end after a mismatch, for errors: with a star before it that is
    // |name| reads of the whole chunk. A pattern checked well formed once (one pass) cannot
    // err, so a mismatch stops at once: the same answers, at most |name| steps a try.
    let full = !well_formed(pattern);
    'pattern: while !pattern.is_empty() {
        let (star, chunk, rest) = scan_chunk(pattern);
        pattern = rest;
        if star && chunk.is_empty() {
            // A trailing `*` matches the rest unless it holds a separator.
            return Ok(!name.contains(&SEPARATOR));
        }
        // A match at the current position; the last chunk must also use up the name, or
        // the star may still find a longer one.
        let (t, ok, err) = match_chunk(chunk, name, full);
        if ok && (t.is_empty() || !pattern.is_empty()) {
            name = t;
            continue;
        }
        if let Some(err) = err {
            return Err(err);
        }
        if star {
            // Skip i+1 bytes, never a separator.
            let mut i = 0;
            while i < name.len() && name[i] != SEPARATOR {
                let (t, ok, err) = match_chunk(chunk, &name[i + 1..], full);
                if ok {
                    if pattern.is_empty() && !t.is_empty() {
                        i += 1;
                        continue;
                    }
                    name = t;
                    continue 'pattern;
                }
                if let Some(err) = err {
                    return Err(err);
                }
                i += 1;
            }
        }
        // No match: the rest of the pattern must still be well formed.
        while full && !pattern.is_empty() {
            let (_, chunk, rest) = scan_chunk(pattern);
            pattern = rest;
            if let (_, _, Some(err)) = match_chunk(chunk, b"", true) {
                return Err(err);
            }
        }
        return Ok(false);
    }
    Ok(name.is_empty())
}

/// Whether no chunk of `pattern` is malformed (then no walk of it meets an error).
fn well_formed(mut pattern: &[u8]) -> bool {
    while !pattern.is_empty() {
        let (_, chunk, rest) = scan_chunk(pattern);
        pattern = rest;
        if match_chunk(chunk, b"", true).2.is_some() {
            return false;
        }
    }
    true
}

/// The next chunk of `pattern`: whether stars precede it, the chunk (up to the next star
/// outside a class) and the rest.
fn scan_chunk(mut pattern: &[u8]) -> (bool, &[u8], &[u8]) {
    let mut star = false;
    while let Some((b'*', rest)) = pattern.split_first() {
        pattern = rest;
        star = true;
    }
    let mut in_range = false;
    let mut i = 0;
    while i < pattern.len() {
        match pattern[i] {
            // A trailing `\` is left for match_chunk to refuse.
            b'\\' if i + 1 < pattern.len() => i += 1,
            b'[' => in_range = true,
            b']' => in_range = false,
            b'*' if !in_range => break,
            _ => {}
        }
        i += 1;
    }
    (star, &pattern[..i], &pattern[i..])
}

/// Whether `chunk` (no stars) matches the start of `s`: the rest of `s`, whether it matched,
/// and the pattern's error. After a failure the chunk is still read to its end for errors
/// when `full`, else not.
fn match_chunk<'s>(
    mut chunk: &[u8],
    mut s: &'s [u8],
    full: bool,
) -> (&'s [u8], bool, Option<BadPattern>) {
    let mut failed = false;
    while let Some(&first) = chunk.first() {
        if !failed && s.is_empty() {
            failed = true;
        }
        if failed && !full {
            return (b"", false, None);
        }
        match first {
            b'[' => {
                let mut r = 0;
                if !failed {
                    let (rune, n) = decode_rune(s);
                    r = rune;
                    s = &s[n..];
                }
                chunk = &chunk[1..];
                let negated = chunk.first() == Some(&b'^');
                if negated {
                    chunk = &chunk[1..];
                }
                let mut matched = false;
                let mut ranges = 0;
                loop {
                    if chunk.first() == Some(&b']') && ranges > 0 {
                        chunk = &chunk[1..];
                        break;
                    }
                    let (lo, rest) = match get_esc(chunk) {
                        Ok(v) => v,
                        Err(e) => return (b"", false, Some(e)),
                    };
                    chunk = rest;
                    let mut hi = lo;
                    // get_esc leaves at least one byte.
                    if chunk.first() == Some(&b'-') {
                        match get_esc(&chunk[1..]) {
                            Ok((h, rest)) => {
                                hi = h;
                                chunk = rest;
                            }
                            Err(e) => return (b"", false, Some(e)),
                        }
                    }
                    if lo <= r && r <= hi {
                        matched = true;
                    }
                    ranges += 1;
                }
                if matched == negated {
                    failed = true;
                }
            }
            b'?' => {
                if !failed {
                    if s[0] == SEPARATOR {
                        failed = true;
                    }
                    let (_, n) = decode_rune(s);
                    s = &s[n..];
                }
                chunk = &chunk[1..];
            }
            _ => {
                if first == b'\\' {
                    chunk = &chunk[1..];
                    if chunk.is_empty() {
                        return (b"", false, Some(BadPattern));
                    }
                }
                if !failed {
                    if chunk[0] != s[0] {
                        failed = true;
                    }
                    s = &s[1..];
                }
                chunk = &chunk[1..];
            }
        }
    }
    if failed {
        (b"", false, None)
    } else {
        (s, true, None)
    }
}

/// Go's `getEsc`: a possibly escaped rune of a class, and what follows it (never empty: a
/// class needs its `]`).
fn get_esc(chunk: &[u8]) -> Result<(u32, &[u8]), BadPattern> {
    let mut chunk = match chunk.first() {
        None | Some(b'-' | b']') => return Err(BadPattern),
        Some(_) => chunk,
    };
    if chunk[0] == b'\\' {
        chunk = &chunk[1..];
        if chunk.is_empty() {
            return Err(BadPattern);
        }
    }
    let (r, n) = decode_rune(chunk);
    let rest = &chunk[n..];
    if (r == RUNE_ERROR && n == 1) || rest.is_empty() {
        return Err(BadPattern);
    }
    Ok((r, rest))
}

/// Go's `utf8.DecodeRune`: the first rune of `s` and its width; an invalid byte is
/// `RuneError` of width 1 (a name split inside a rune by a byte-wise literal comes here).
fn decode_rune(s: &[u8]) -> (u32, usize) {
    let head = &s[..s.len().min(4)];
    let valid = match std::str::from_utf8(head) {
        Ok(text) => text,
        // The valid prefix is a valid string by construction.
        Err(e) => std::str::from_utf8(&head[..e.valid_up_to()]).unwrap_or_default(),
    };
    match valid.chars().next() {
        Some(c) => (u32::from(c), c.len_utf8()),
        None => (RUNE_ERROR, 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Go's own table: `matchTests` of `src/path/filepath/match_test.go` (golang/go, Go 1.22
    /// to 1.25), every row, in order: pattern, name, match, whether `ErrBadPattern`.
    const GO_MATCH_TESTS: &[(&str, &str, bool, bool)] = &[
        ("abc", "abc", true, false),
        ("*", "abc", true, false),
        ("*c", "abc", true, false),
        ("a*", "a", true, false),
        ("a*", "abc", true, false),
        ("a*", "ab/c", false, false),
        ("a*/b", "abc/b", true, false),
        ("a*/b", "a/c/b", false, false),
        ("a*b*c*d*e*/f", "axbxcxdxe/f", true, false),
        ("a*b*c*d*e*/f", "axbxcxdxexxx/f", true, false),
        ("a*b*c*d*e*/f", "axbxcxdxe/xxx/f", false, false),
        ("a*b*c*d*e*/f", "axbxcxdxexxx/fff", false, false),
        ("a*b?c*x", "abxbbxdbxebxczzx", true, false),
        ("a*b?c*x", "abxbbxdbxebxczzy", false, false),
        ("ab[c]", "abc", true, false),
        ("ab[b-d]", "abc", true, false),
        ("ab[e-g]", "abc", false, false),
        ("ab[^c]", "abc", false, false),
        ("ab[^b-d]", "abc", false, false),
        ("ab[^e-g]", "abc", true, false),
        ("a\\*b", "a*b", true, false),
        ("a\\*b", "ab", false, false),
        ("a?b", "a☺b", true, false),
        ("a[^a]b", "a☺b", true, false),
        ("a???b", "a☺b", false, false),
        ("a[^a][^a][^a]b", "a☺b", false, false),
        ("[a-ζ]*", "α", true, false),
        ("*[a-ζ]", "A", false, false),
        ("a?b", "a/b", false, false),
        ("a*b", "a/b", false, false),
        ("[\\]a]", "]", true, false),
        ("[\\-]", "-", true, false),
        ("[x\\-]", "x", true, false),
        ("[x\\-]", "-", true, false),
        ("[x\\-]", "z", false, false),
        ("[\\-x]", "x", true, false),
        ("[\\-x]", "-", true, false),
        ("[\\-x]", "a", false, false),
        ("[]a]", "]", false, true),
        ("[-]", "-", false, true),
        ("[x-]", "x", false, true),
        ("[x-]", "-", false, true),
        ("[x-]", "z", false, true),
        ("[-x]", "x", false, true),
        ("[-x]", "-", false, true),
        ("[-x]", "a", false, true),
        ("\\", "a", false, true),
        ("[a-b-c]", "a", false, true),
        ("[", "a", false, true),
        ("[^", "a", false, true),
        ("[^bc", "a", false, true),
        ("a[", "a", false, true),
        ("a[", "ab", false, true),
        ("a[", "x", false, true),
        ("a/b[", "x", false, true),
        ("*x", "xxx", true, false),
    ];

    #[test]
    fn gos_match_table() {
        for &(pattern, name, matched, bad) in GO_MATCH_TESTS {
            let want = if bad { Err(BadPattern) } else { Ok(matched) };
            assert_eq!(matches(pattern, name), want, "Match({pattern:?}, {name:?})");
        }
    }

    /// Crossplane's own cases for `ActivationPolicy.Match` (`TestActivationPolicyMatch` of
    /// `apis/apiextensions/v1alpha1/mrd_policy_types_test.go`, crossplane/crossplane v2.3.x),
    /// which discards the error: a bad pattern matches nothing.
    #[test]
    fn crossplanes_activation_policy_cases() {
        let cases: &[(&str, &str, bool)] = &[
            ("bucket.aws.crossplane.io", "bucket.aws.crossplane.io", true),
            (
                "bucket.aws.crossplane.io",
                "instance.aws.crossplane.io",
                false,
            ),
            ("*.aws.crossplane.io", "bucket.aws.crossplane.io", true),
            (
                "*.aws.crossplane.io",
                "rds.instance.aws.crossplane.io",
                true,
            ),
            ("*.aws.crossplane.io", "bucket.gcp.crossplane.io", false),
            ("bucket.*", "bucket.aws.crossplane.io", true),
            ("bucket.*", "instance.aws.crossplane.io", false),
            ("*aws*", "bucket.aws.crossplane.io", true),
            ("*aws*", "bucket.gcp.crossplane.io", false),
            ("*", "anything.goes.here", true),
            ("", "bucket.aws.crossplane.io", false),
            ("", "", true),
            ("bucket.aws.crossplane.io", "", false),
            ("*bucket*.aws.*", "s3bucket.aws.crossplane.io", true),
            ("*bucket*.aws.*", "instance.aws.crossplane.io", false),
            (
                "bucket?.aws.crossplane.io",
                "bucket1.aws.crossplane.io",
                true,
            ),
            (
                "bucket?.aws.crossplane.io",
                "bucket123.aws.crossplane.io",
                false,
            ),
            (
                "bucket[0-9].aws.crossplane.io",
                "bucket5.aws.crossplane.io",
                true,
            ),
            (
                "bucket[0-9].aws.crossplane.io",
                "bucketa.aws.crossplane.io",
                false,
            ),
            (
                "bucket\\*.aws.crossplane.io",
                "bucket*.aws.crossplane.io",
                true,
            ),
            (
                "bucket\\*.aws.crossplane.io",
                "bucket123.aws.crossplane.io",
                false,
            ),
            ("Bucket.aws.crossplane.io", "Bucket.aws.crossplane.io", true),
            (
                "Bucket.aws.crossplane.io",
                "bucket.aws.crossplane.io",
                false,
            ),
            ("*.AWS.crossplane.io", "bucket.AWS.crossplane.io", true),
            ("*.AWS.crossplane.io", "bucket.aws.crossplane.io", false),
            ("*.crossplane.io", "bucket.aws.crossplane.io", true),
        ];
        for &(pattern, name, want) in cases {
            assert_eq!(
                matches(pattern, name).unwrap_or(false),
                want,
                "{pattern:?} {name:?}"
            );
        }
    }

    /// Where Go stops before reading the whole pattern, a malformed rest is not seen; a
    /// literal compared byte by byte may leave the name inside a rune.
    #[test]
    fn errors_only_where_go_reads_them_and_runes_split_by_bytes() {
        assert_eq!(matches("a*", "ab["), Ok(true));
        assert_eq!(matches("*", "a/b"), Ok(false));
        assert_eq!(matches("a*[", "abc"), Err(BadPattern));
        assert_eq!(matches("x*[", "abc"), Err(BadPattern));
        assert_eq!(matches("ab\\", "ab"), Err(BadPattern));
        assert_eq!(matches("[]", "a"), Err(BadPattern));
        // A star skips bytes, not runes: inside `☺` (E2 98 BA) a class reads invalid bytes,
        // each `RuneError`, which `[\u{fffd}]` holds (traced through Go's code).
        assert_eq!(matches("*[\u{fffd}]", "☺"), Ok(true));
        assert_eq!(matches("*[^\u{fffd}]", "☺"), Ok(true));
        assert_eq!(matches("[\u{fffd}]", "☺"), Ok(false));
        assert_eq!(decode_rune(&[0xE2, 0x98]), (RUNE_ERROR, 1));
        assert_eq!(decode_rune("☺x".as_bytes()), (0x263A, 3));
    }

    /// A well-formed pattern's mismatch stops at once: a star before a megabyte of
    /// literal tries each start of the name without reading the megabyte each time (the
    /// answer is Go's; the cost, |name| short tries, is what the early stop bounds).
    #[test]
    fn a_long_chunk_after_a_star_is_not_read_at_every_start() {
        let pattern = format!("*{}b", "a".repeat(1 << 20));
        let name = "a".repeat(253);
        assert_eq!(matches(&pattern, &name), Ok(false));
        // Malformed, the same length: Go's error, found on the first try.
        let bad = format!("*{}[", "a".repeat(1 << 20));
        assert_eq!(matches(&bad, &name), Err(BadPattern));
    }
}
