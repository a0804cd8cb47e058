//! Plain JSON text walked without a tree: each value checked as a parse would check it, and
//! found where it starts and ends, so that the scan reads a review in one pass over its
//! bytes. serde_json's skipping restarts its search at every escape (about 100 instructions
//! an escaped quote, and a last-applied annotation has thousands of them); a string here is
//! read from masks of its quotes, backslashes and control characters, 64 bytes at a time
//! (sixteen a comparison), an escape costing a few instructions and no new search.
//!
//! A value is *plain* when reading it into a tree cannot fail: valid JSON, with no escape
//! that may be half of a surrogate pair (`\uD800`-`\uDFFF`, which a parse refuses unpaired),
//! no number that may overflow a float (an exponent, or a run of 300 digits), nested at most
//! [`SHALLOW`] levels deep. Anything else is refused, and the review goes the long way.

use std::borrow::Cow;

use serde::Deserialize;

/// How deep a value may nest (serde_json's limit on what it reads).
pub const SHALLOW: usize = 128;

/// A run of this many digits may overflow a float.
const LONG_DIGITS: usize = 300;

/// Whether `raw` is one plain JSON value (whitespace around it allowed).
pub fn plain(raw: &[u8]) -> bool {
    std::str::from_utf8(raw).is_ok_and(|text| {
        let mut walk = Walk::new(text);
        walk.value().is_some() && walk.end().is_some()
    })
}

/// A position in a JSON text, moved past what is read. Every method returns `None` when the
/// text there is not plain, the position then left anywhere.
pub struct Walk<'t> {
    text: &'t str,
    at: usize,
    /// Whether the size of each container walked is noted in `sizes`.
    recording: bool,
    /// The sizes noted ([`Walk::record`]).
    sizes: Vec<u32>,
}

/// Set in a noted size when the container is an array, clear for an object.
pub const ARRAY: u32 = 1 << 31;

/// The most sizes a walk notes (256 KiB of them, held before the review's budget counts
/// anything): the containers past them are decoded without a size, growing as before. A
/// Composition of 42 resources and 209 KB of YAML has a few thousand.
pub const MAX_SIZES: usize = 1 << 16;

impl<'t> Walk<'t> {
    /// At the start of `text`.
    pub fn new(text: &'t str) -> Self {
        Walk {
            text,
            at: 0,
            recording: false,
            sizes: Vec::new(),
        }
    }

    /// From now on (`on`) or no more, notes the size of each object and array the walk
    /// reads: its members or elements, and [`ARRAY`] for an array, in the order they open.
    /// Decoding the same text builds its containers in that order, each at its size. Returns
    /// whether it was recording.
    pub fn record(&mut self, on: bool) -> bool {
        std::mem::replace(&mut self.recording, on)
    }

    /// The sizes noted so far, taken.
    pub fn take_sizes(&mut self) -> Vec<u32> {
        std::mem::take(&mut self.sizes)
    }

    /// Notes a container opening when recording (its size 0 for now, or 1 if `nonempty`):
    /// where its size is, to count its further members (nowhere when not recording).
    fn open(&mut self, array: bool, nonempty: bool) -> usize {
        // Past the most, none: the sizes noted stay those of the first containers, in order.
        if !self.recording || self.sizes.len() >= MAX_SIZES {
            return usize::MAX;
        }
        self.sizes
            .push(u32::from(nonempty) | if array { ARRAY } else { 0 });
        self.sizes.len() - 1
    }

    /// Counts one more member or element of the container noted at `slot`.
    fn more(&mut self, slot: usize) {
        if let Some(size) = self.sizes.get_mut(slot) {
            // A body that the scan reads has fewer values than 2^31 bytes.
            *size = size.saturating_add(1);
        }
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    fn whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    /// Past whitespace and then `b`.
    fn eat(&mut self, b: u8) -> Option<()> {
        self.whitespace();
        (self.peek() == Some(b)).then(|| self.at += 1)
    }

    /// Whether only whitespace is left.
    pub fn end(mut self) -> Option<()> {
        self.whitespace();
        (self.at == self.text.len()).then_some(())
    }

    /// The object that comes next, each member given to `member` with its key and the walk
    /// at its value, which `member` must read. A key with an escape is not plain (rare, and
    /// it would have to be decoded to be matched).
    pub fn object(
        &mut self,
        mut member: impl FnMut(&mut Self, &'t str) -> Option<()>,
    ) -> Option<()> {
        self.eat(b'{')?;
        self.whitespace();
        if self.peek() == Some(b'}') {
            self.at += 1;
            self.open(false, false);
            return Some(());
        }
        let slot = self.open(false, false);
        loop {
            self.more(slot);
            self.whitespace();
            if self.peek() != Some(b'"') {
                return None;
            }
            self.at += 1;
            let start = self.at;
            if self.string_rest()? {
                return None;
            }
            let key = self.text.get(start..self.at - 1)?;
            self.eat(b':')?;
            member(self, key)?;
            self.whitespace();
            match self.peek()? {
                b',' => self.at += 1,
                b'}' => {
                    self.at += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// The text of the value that comes next (without the whitespace around it).
    pub fn value(&mut self) -> Option<&'t str> {
        self.whitespace();
        let start = self.at;
        self.skip()?;
        self.text.get(start..self.at)
    }

    /// The string that comes next, borrowed from the text unless it holds an escape.
    pub fn string(&mut self) -> Option<Cow<'t, str>> {
        self.whitespace();
        if self.peek() != Some(b'"') {
            return None;
        }
        let start = self.at;
        self.at += 1;
        let escaped = self.string_rest()?;
        let raw = self.text.get(start..self.at)?;
        if escaped {
            serde_json::from_str::<String>(raw).ok().map(Cow::Owned)
        } else {
            raw.get(1..raw.len() - 1).map(Cow::Borrowed)
        }
    }

    /// The value that comes next, read by serde_json as a `T` once it is found plain.
    pub fn read<T: Deserialize<'t>>(&mut self) -> Option<T> {
        serde_json::from_str(self.value()?).ok()
    }

    /// Past the value that comes next. Containers are followed on a stack of one bit a
    /// level (set for an object), not by recursion.
    fn skip(&mut self) -> Option<()> {
        let mut objects: u128 = 0;
        let mut depth = 0usize;
        // Where each open container's size is noted, when recording.
        let mut slots = [usize::MAX; SHALLOW];
        loop {
            self.whitespace();
            match self.peek()? {
                b'"' => {
                    self.at += 1;
                    self.string_rest()?;
                }
                open @ (b'{' | b'[') => {
                    self.at += 1;
                    if depth == SHALLOW {
                        return None;
                    }
                    let object = open == b'{';
                    if object {
                        objects |= 1 << depth;
                    } else {
                        objects &= !(1 << depth);
                    }
                    depth += 1;
                    self.whitespace();
                    let empty = self.peek() == Some(if object { b'}' } else { b']' });
                    slots[depth - 1] = self.open(!object, !empty);
                    if empty {
                        self.at += 1;
                        depth -= 1;
                    } else {
                        if object {
                            self.member_key()?;
                        }
                        continue;
                    }
                }
                b't' => self.literal(b"true")?,
                b'f' => self.literal(b"false")?,
                b'n' => self.literal(b"null")?,
                b'-' | b'0'..=b'9' => self.number()?,
                _ => return None,
            }
            // A value ended: close the containers it ends, or go on to the next element.
            loop {
                if depth == 0 {
                    return Some(());
                }
                self.whitespace();
                let object = objects & (1 << (depth - 1)) != 0;
                match (self.peek()?, object) {
                    (b',', _) => {
                        self.at += 1;
                        self.more(slots[depth - 1]);
                        if object {
                            self.member_key()?;
                        }
                        break;
                    }
                    (b'}', true) | (b']', false) => {
                        self.at += 1;
                        depth -= 1;
                    }
                    _ => return None,
                }
            }
        }
    }

    /// Past a skipped member's key and its colon.
    fn member_key(&mut self) -> Option<()> {
        self.whitespace();
        if self.peek() != Some(b'"') {
            return None;
        }
        self.at += 1;
        self.string_rest()?;
        self.eat(b':')
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let rest = self.text.as_bytes().get(self.at..)?;
        rest.starts_with(word).then(|| self.at += word.len())
    }

    /// Past a number: JSON's grammar, without an exponent.
    fn number(&mut self) -> Option<()> {
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        match self.peek()? {
            b'0' => self.at += 1,
            b'1'..=b'9' => self.digits()?,
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.at += 1;
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return None;
            }
            self.digits()?;
        }
        (!matches!(self.peek(), Some(b'e' | b'E'))).then_some(())
    }

    fn digits(&mut self) -> Option<()> {
        let start = self.at;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.at += 1;
        }
        (self.at - start < LONG_DIGITS).then_some(())
    }

    /// Past the rest of a string (the walk just past its opening quote) and its closing
    /// quote; whether it holds an escape. Sixty-four bytes at a time (a last-applied
    /// annotation has an escape every few bytes, each of which would otherwise start a new
    /// search); the text's last bytes padded with quotes into a block of their own.
    fn string_rest(&mut self) -> Option<bool> {
        let bytes = self.text.as_bytes();
        // Most strings (keys, names) end within sixteen bytes without an escape.
        if let Some(chunk) = bytes.get(self.at..).and_then(<[u8]>::first_chunk::<16>) {
            let found = Specials::of16(chunk);
            let stops = found.quote | found.backslash | found.control;
            if stops & stops.wrapping_neg() & found.quote != 0 {
                self.at += stops.trailing_zeros() as usize + 1;
                return Some(false);
            }
            if stops == 0 {
                // Nothing there a block would need to see again.
                self.at += 16;
            }
        }
        let mut escaped = false;
        loop {
            let rest = bytes.get(self.at..)?;
            let (step, ended) = match rest.first_chunk::<64>() {
                Some(block) => block_rest(bytes, self.at, block, &mut escaped)?,
                None => {
                    let mut block = [b'"'; 64];
                    block[..rest.len()].copy_from_slice(rest);
                    let (step, ended) = block_rest(bytes, self.at, &block, &mut escaped)?;
                    // A string that ends only in the padding does not end.
                    if step > rest.len() {
                        return None;
                    }
                    (step, ended)
                }
            };
            self.at += step;
            if ended {
                return Some(escaped);
            }
        }
    }
}

/// The size of each container of `value` in the order they open, as a recording walk of its
/// text notes them ([`Walk::record`]).
#[cfg(test)]
pub(super) fn sizes_of(value: &serde_json::Value) -> Vec<u32> {
    use serde_json::Value;
    fn walk_into(value: &Value, out: &mut Vec<u32>) {
        match value {
            Value::Object(map) => {
                out.push(map.len() as u32);
                map.values().for_each(|v| walk_into(v, out));
            }
            Value::Array(items) => {
                out.push(items.len() as u32 | ARRAY);
                items.iter().for_each(|v| walk_into(v, out));
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk_into(value, &mut out);
    out
}

/// Whether `b`, after a backslash, makes a whole escape (`\"`, `\n`, ...); a `u` starts a
/// longer one.
fn short_escape(b: u8) -> bool {
    matches!(b, b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't')
}

/// The length of the escape whose backslash is at `at` in `bytes`, if it is one a parse
/// accepts and no half of a surrogate pair.
fn escape(bytes: &[u8], at: usize) -> Option<usize> {
    match *bytes.get(at + 1)? {
        b if short_escape(b) => Some(2),
        b'u' => {
            let hex = bytes.get(at + 2..at + 6)?;
            let surrogate = matches!(hex[0], b'd' | b'D') && !matches!(hex[1], b'0'..=b'7');
            (!surrogate && hex.iter().all(u8::is_ascii_hexdigit)).then_some(6)
        }
        _ => None,
    }
}

/// One block of a string's rest, `block` at `at` in `bytes`: how far the walk moves, and
/// whether that is past the closing quote. Which bytes the string's backslashes escape is
/// found from the block's masks (each backslash escapes the byte after it unless it is
/// escaped itself), so an escape costs a few instructions and no new search. A backslash
/// that is the block's last byte is left for the next block, which starts at it.
fn block_rest(
    bytes: &[u8],
    at: usize,
    block: &[u8; 64],
    escaped: &mut bool,
) -> Option<(usize, bool)> {
    let found = Specials::of(block);
    let mut backslashes = found.backslash;
    let mut escapes = 0u64;
    while backslashes != 0 {
        let i = backslashes.trailing_zeros();
        if i == 63 {
            break;
        }
        escapes |= 2 << i;
        // The backslash and the byte it escapes (a backslash too, perhaps) are done.
        backslashes &= !(3 << i);
    }
    let ends = found.quote & !escapes;
    let (within, step) = if ends != 0 {
        let end = ends.trailing_zeros();
        ((1u64 << end) - 1, end as usize + 1)
    } else if backslashes != 0 {
        (u64::MAX >> 1, 63)
    } else {
        (u64::MAX, 64)
    };
    if found.control & within != 0 {
        return None;
    }
    let mut escapes = escapes & within;
    if escapes != 0 {
        *escaped = true;
        while escapes != 0 {
            let i = escapes.trailing_zeros() as usize;
            // A `\u` escape (or none a parse accepts) is looked at whole.
            if !short_escape(block[i]) {
                escape(bytes, at + i - 1)?;
            }
            escapes &= escapes - 1;
        }
    }
    Some((step, ends != 0))
}

/// Of a block of bytes, a bit for each quote, backslash and control character.
#[derive(Debug, Default, PartialEq, Eq)]
struct Specials {
    quote: u64,
    backslash: u64,
    control: u64,
}

impl Specials {
    /// Of 64 bytes, sixteen at a time.
    fn of(block: &[u8; 64]) -> Self {
        let mut found = Specials::default();
        for (k, chunk) in block.as_chunks::<16>().0.iter().enumerate() {
            let part = Specials::of16(chunk);
            found.quote |= part.quote << (16 * k);
            found.backslash |= part.backslash << (16 * k);
            found.control |= part.control << (16 * k);
        }
        found
    }

    /// Of 16 bytes, in the low bits: one comparison each (SSE2, which every x86-64 has).
    #[cfg(target_arch = "x86_64")]
    fn of16(chunk: &[u8; 16]) -> Self {
        use std::arch::x86_64::{
            _mm_cmpeq_epi8, _mm_loadu_si128, _mm_max_epu8, _mm_movemask_epi8, _mm_set1_epi8,
        };
        // SAFETY: SSE2 is part of every x86-64 processor, and `chunk` is 16 readable bytes,
        // which `loadu` reads at any alignment.
        let (quote, backslash, control) = unsafe {
            let v = _mm_loadu_si128(chunk.as_ptr().cast());
            // A byte is at most 0x1f when the larger of it and 0x1f is 0x1f.
            let low = _mm_set1_epi8(0x1f);
            (
                _mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8))),
                _mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8))),
                _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_max_epu8(v, low), low)),
            )
        };
        let mask = |m: i32| u64::from(m as u16);
        Specials {
            quote: mask(quote),
            backslash: mask(backslash),
            control: mask(control),
        }
    }

    /// A byte at a time elsewhere.
    #[cfg(not(target_arch = "x86_64"))]
    fn of16(chunk: &[u8; 16]) -> Self {
        Self::bytewise(chunk)
    }

    /// A byte at a time: the reference the tests hold [`Specials::of`] to.
    #[cfg_attr(target_arch = "x86_64", allow(dead_code))]
    fn bytewise(bytes: &[u8]) -> Self {
        let mut found = Specials::default();
        for (i, &b) in bytes.iter().enumerate() {
            found.quote |= u64::from(b == b'"') << i;
            found.backslash |= u64::from(b == b'\\') << i;
            found.control |= u64::from(b < 0x20) << i;
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn plain_text_is_text_a_parse_accepts() {
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        let cases = [
            (r#"{"a":[1,-2,3.5,true,null,"x"]}"#.to_string(), true),
            (" { \"a\" : [ ] , \"b\" : { } }\n".into(), true),
            // In a string, what looks like an exponent or a surrogate is text.
            (
                r#"["1e5 and 1E5",{"2e":"\\uD800 \"\\\uD7FF"}]"#.into(),
                true,
            ),
            (
                "\"ñ and 日本 and \\u00e9, \\/ \\b\\f\\n\\r\\t\"".into(),
                true,
            ),
            ("1e5".into(), false),
            ("[1.5E3]".into(), false),
            ("-2e-3".into(), false),
            (r#""\uD800""#.into(), false),
            (r#"["\udc00"]"#.into(), false),
            (r#""\"\\\uDBFF""#.into(), false),
            ("9".repeat(299), true),
            ("9".repeat(300), false),
            (format!("0.{}", "9".repeat(300)), false),
            (format!("\"{}\"", "9".repeat(400)), true),
            (deep(SHALLOW), true),
            (deep(SHALLOW + 1), false),
            (format!("\"{}\"", deep(SHALLOW + 1)), true),
            // Not JSON.
            ("[1,]".into(), false),
            ("{\"a\":1,}".into(), false),
            ("{\"a\"}".into(), false),
            ("{\"a\" 1}".into(), false),
            ("{1:2}".into(), false),
            ("[1 2]".into(), false),
            ("[1}".into(), false),
            ("{\"a\":1]".into(), false),
            ("01".into(), false),
            ("-".into(), false),
            ("1.".into(), false),
            (".5".into(), false),
            ("+1".into(), false),
            ("tru".into(), false),
            ("nul".into(), false),
            ("truex".into(), false),
            ("\"a".into(), false),
            ("\"a\\\"".into(), false),
            ("\"\\x\"".into(), false),
            ("\"\\u12G4\"".into(), false),
            ("\"\\u12\"".into(), false),
            ("\"a\tb\"".into(), false),
            ("\"a\nb\"".into(), false),
            ("[".into(), false),
            ("".into(), false),
            ("1 2".into(), false),
        ];
        for (text, expected) in cases {
            assert_eq!(plain(text.as_bytes()), expected, "{text}");
            let mut de = serde_json::Deserializer::from_str(&text);
            de.disable_recursion_limit();
            if expected {
                assert!(Value::deserialize(&mut de).is_ok(), "{text}");
            }
        }
        // What plain refuses, a parse may refuse.
        for text in [r#""\uD800""#, &"9".repeat(400), "1e999"] {
            assert!(serde_json::from_str::<Value>(text).is_err(), "{text}");
            assert!(!plain(text.as_bytes()), "{text}");
        }
        assert!(!plain(b"\"\xff\""), "not UTF-8");
    }

    #[test]
    fn a_string_is_found_wherever_its_special_bytes_fall_in_a_word() {
        // Each special byte at each offset from the string's start, and strings ending in
        // the word's tail.
        for at in 0..20 {
            for special in ["\\\"", "\\\\", "\\u00e9", "ñ"] {
                let inner = format!("{}{special}{}", "a".repeat(at), "b".repeat(at % 7));
                let text = format!("[\"{inner}\",1]");
                let mut walk = Walk::new(&text[1..]);
                let expected = serde_json::from_str::<String>(&text[1..text.len() - 3]);
                assert_eq!(walk.string().as_deref(), expected.ok().as_deref(), "{text}");
                assert!(plain(text.as_bytes()), "{text}");
                let control = format!("[\"{}\u{1}{}\"]", "a".repeat(at), "b".repeat(at % 7));
                assert!(!plain(control.as_bytes()), "{control:?}");
                let open = format!("[\"{}", "a".repeat(at));
                assert!(!plain(open.as_bytes()), "{open}");
            }
        }
    }

    #[test]
    fn reads_an_object_member_by_member() {
        let text = r#" {"a": "x\"y", "b":[1, {"c": null}], "d" : {"e":"f"}, "g":true } "#;
        let mut seen = Vec::new();
        let mut walk = Walk::new(text);
        walk.object(|walk, key| {
            let value = match key {
                "a" => walk.string()?.into_owned(),
                "d" => walk.read::<Value>()?.to_string(),
                _ => walk.value()?.to_string(),
            };
            seen.push((key, value));
            Some(())
        })
        .expect("an object");
        assert!(walk.end().is_some());
        assert_eq!(
            seen,
            [
                ("a", "x\"y".to_string()),
                ("b", r#"[1, {"c": null}]"#.into()),
                ("d", r#"{"e":"f"}"#.into()),
                ("g", "true".into())
            ]
        );
        // A key with an escape, a member the reader leaves unread, a trailing comma.
        for odd in [r#"{"\u0061":1}"#, r#"{"a":1,}"#, "[]", r#"{"a":1"#] {
            let mut walk = Walk::new(odd);
            assert!(walk.object(|w, _| w.value().map(drop)).is_none(), "{odd}");
        }
        let mut walk = Walk::new(r#"{"a":1}"#);
        assert!(
            walk.object(|_, _| Some(())).is_none(),
            "the value left unread"
        );
    }

    /// A string's rest a byte at a time, as a parse reads it (and refusing half a surrogate
    /// pair): the reference the block walk is held to. Whether it holds an escape, and where
    /// it ends.
    fn string_rest_bytewise(text: &str) -> Option<(bool, usize)> {
        let bytes = text.as_bytes();
        let (mut at, mut escaped) = (0, false);
        loop {
            match *bytes.get(at)? {
                b'"' => return Some((escaped, at + 1)),
                b'\\' => {
                    escaped = true;
                    at += escape(bytes, at)?;
                }
                0..=0x1f => return None,
                _ => at += 1,
            }
        }
    }

    /// Texts of a string's rest: runs of backslashes, escaped and unescaped quotes,
    /// `\u` escapes (surrogates, bad hex), control characters and multi-byte characters,
    /// long enough to cross several 64-byte blocks at every offset.
    fn string_rest_text() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let piece = prop_oneof![
            4 => Just("a"),
            2 => Just("abcdefghijklmnopqrstuvwxyz012345"),
            2 => Just(r"\\"),
            2 => Just(r#"\""#),
            1 => Just(r#"""#),
            1 => Just(r#"\\\""#),
            1 => Just(r"\n"),
            1 => Just(r"\u00e9"),
            1 => Just(r"\uD83D"),
            1 => Just(r"\ud7ff"),
            1 => Just(r"\u12G4"),
            1 => Just(r"\x"),
            1 => Just(r"\"),
            1 => Just("\u{1}"),
            1 => Just("\t"),
            1 => Just("é日"),
        ];
        proptest::collection::vec(piece, 0..80).prop_map(|p| p.concat())
    }

    /// JSON texts with what [`plain`] looks for: exponents, long numbers, escapes.
    fn json_text() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let piece = prop_oneof![
            Just("a"),
            Just("1e5"),
            Just(r"\uD800"),
            Just(r"\udc01"),
            Just(r"\u0041"),
            Just(r"\\"),
            Just(r#"\""#),
            Just(r"\n"),
            Just("é日"),
            Just("abcdefghijklmnop"),
        ];
        let leaf = prop_oneof![
            Just("1".to_string()),
            Just("-0.5".to_string()),
            Just("1e999".to_string()),
            Just("2E-3".to_string()),
            Just("true".to_string()),
            Just("null".to_string()),
            proptest::collection::vec(piece, 0..6).prop_map(|p| format!("\"{}\"", p.concat())),
            (1usize..400).prop_map(|n| "9".repeat(n)),
        ];
        leaf.prop_recursive(8, 64, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6)
                    .prop_map(|v| format!("[{}]", v.join(","))),
                proptest::collection::vec(inner, 0..6).prop_map(|v| {
                    let members: Vec<String> = v
                        .iter()
                        .enumerate()
                        .map(|(i, x)| format!("\"k{i}\" : {x}"))
                        .collect();
                    format!("{{ {} }}", members.join(", "))
                }),
            ]
        })
    }

    #[test]
    fn notes_sizes_only_while_recording() {
        let text = r#"{"a": [1, [], {}], "b": {"c": [{"d": 1, "e": 2}]}, "f": [3]}"#;
        let mut walk = Walk::new(text);
        walk.object(|walk, key| {
            // Not "b", nor the object around.
            walk.record(key != "b");
            walk.value().map(drop)
        })
        .expect("an object");
        assert_eq!(walk.take_sizes(), [ARRAY | 3, ARRAY, 0, ARRAY | 1]);
        let mut walk = Walk::new(text);
        walk.record(true);
        walk.object(|walk, _| walk.value().map(drop))
            .expect("an object");
        assert_eq!(
            walk.take_sizes(),
            [3, ARRAY | 3, ARRAY, 0, 1, ARRAY | 1, 2, ARRAY | 1]
        );
    }

    #[test]
    fn notes_the_first_sizes_only() {
        let text = format!("[{}{{}}]", "[1],".repeat(MAX_SIZES));
        let mut walk = Walk::new(&text);
        walk.record(true);
        walk.value().expect("plain text");
        let sizes = walk.take_sizes();
        assert_eq!(sizes.len(), MAX_SIZES);
        assert_eq!(sizes[0], ARRAY | (MAX_SIZES as u32 + 1));
        assert!(sizes[1..].iter().all(|s| *s == ARRAY | 1));
    }

    proptest::proptest! {
        /// A plain text's containers noted at the sizes a parse builds them, in the order it
        /// builds them, whether walked as one value or member by member.
        #[test]
        fn a_walk_notes_the_sizes_a_parse_builds(text in json_text()) {
            let mut walk = Walk::new(&text);
            walk.record(true);
            if walk.value().is_none() {
                return Ok(());
            }
            let parsed: Value = serde_json::from_str(&text).expect("plain text parses");
            let expected = sizes_of(&parsed);
            proptest::prop_assert_eq!(walk.take_sizes(), expected.clone(), "{}", text);
            if parsed.is_object() {
                let mut walk = Walk::new(&text);
                walk.record(true);
                walk.object(|walk, _| walk.value().map(drop)).expect("an object");
                proptest::prop_assert_eq!(walk.take_sizes(), expected, "{}", text);
            }
        }

        #[test]
        fn a_plain_text_parses(text in json_text()) {
            let parsed = serde_json::from_str::<Value>(&text);
            if plain(text.as_bytes()) {
                proptest::prop_assert!(parsed.is_ok(), "{}: {:?}", text, parsed);
            } else {
                // Refused only for what it looks for.
                proptest::prop_assert!(
                    text.contains(['e', 'E']) || text.contains(r"\u") || text.contains(&"9".repeat(300)),
                    "{}", text
                );
            }
        }

        /// A string's rest is walked by blocks as it is byte by byte: to the same end, with
        /// the same escapes, refused alike.
        #[test]
        fn a_string_is_walked_by_blocks_as_byte_by_byte(text in string_rest_text(), at in 0usize..70) {
            let text = format!("{}{text}", "a".repeat(at));
            let mut blocks = Walk::new(&text);
            let by_blocks = blocks.string_rest().map(|e| (e, blocks.at));
            let byte_by_byte = string_rest_bytewise(&text);
            proptest::prop_assert_eq!(by_blocks, byte_by_byte, "{:?}", text);
            let quoted = format!("\"{text}");
            let mut parse = serde_json::Deserializer::from_str(&quoted).into_iter::<String>();
            if let Some(Ok(read)) = parse.next() {
                // Where a parse ends the string (whitespace may follow it), the walk ends it
                // too, unless it refused half a surrogate pair.
                if let Some((_, end)) = by_blocks {
                    proptest::prop_assert_eq!(end + 1, parse.byte_offset(), "{:?} read as {:?}", text, read);
                }
            }
        }

        #[test]
        fn a_block_is_masked_as_byte_by_byte(block in proptest::collection::vec(proptest::prelude::any::<u8>(), 64)) {
            let block: [u8; 64] = block.try_into().expect("64 bytes");
            proptest::prop_assert_eq!(Specials::of(&block), Specials::bytewise(&block));
        }

        /// Whatever a change to a JSON text makes of it, what is plain parses.
        #[test]
        fn a_changed_text_is_plain_only_if_it_parses(
            text in json_text(),
            changes in proptest::collection::vec((0usize..1000, 0usize..12), 1..4),
        ) {
            const BYTES: &[u8] = b"\"\\{}[],: 0-.";
            let mut bytes = text.into_bytes();
            for (at, byte) in changes {
                if bytes.is_empty() {
                    break;
                }
                let at = at % bytes.len();
                match byte % 3 {
                    0 => bytes[at] = BYTES[byte],
                    1 => {
                        bytes.remove(at);
                    }
                    _ => bytes.insert(at, BYTES[byte]),
                }
            }
            if plain(&bytes) {
                let parsed = serde_json::from_slice::<Value>(&bytes);
                proptest::prop_assert!(parsed.is_ok(), "{}: {:?}", String::from_utf8_lossy(&bytes), parsed);
            }
        }
    }
}
