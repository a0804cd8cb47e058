//! Crossplane's field path grammar (crossplane-runtime `pkg/fieldpath`).
//!
//! A path is a sequence of segments: `spec.containers[0].name`,
//! `metadata.labels[app.kubernetes.io/name]`, `data[.config.yml]`, `spec.items[*].id`.
//! Bracket contents that parse as an unsigned 32-bit decimal integer are indexes, everything
//! else is a field name; `'` and `"` around names are trimmed. Parse errors carry the byte
//! position, worded as upstream words them (`unexpected '.' at position 9`).

use std::fmt;

/// One segment of a field path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Segment {
    /// An object field (or map key). `*` is the wildcard the runtime expands.
    Field(String),
    /// An array index.
    Index(u32),
}

/// A parsed field path.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Segments(pub Vec<Segment>);

impl Segments {
    /// The segments as a slice.
    pub fn as_slice(&self) -> &[Segment] {
        &self.0
    }

    /// Whether the path has no segments (the empty path).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Number of segments.
    pub fn len(&self) -> usize {
        self.0.len()
    }
}

impl AsRef<[Segment]> for Segments {
    fn as_ref(&self) -> &[Segment] {
        &self.0
    }
}

/// A syntax error in a field path, at a byte position.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} at position {position}")]
pub struct ParseError {
    /// What went wrong, e.g. `unexpected '.'`.
    pub kind: ParseErrorKind,
    /// Byte offset of the offending character in the path.
    pub position: usize,
}

/// The kinds of field path syntax errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseErrorKind {
    /// A character that may not appear where it does (`.`, `[` or `]`).
    Unexpected(char),
    /// A `[` with no `]` after it.
    Unterminated(char),
}

impl fmt::Display for ParseErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseErrorKind::Unexpected(c) => write!(f, "unexpected '{c}'"),
            ParseErrorKind::Unterminated(c) => write!(f, "unterminated '{c}'"),
        }
    }
}

fn err(kind: ParseErrorKind, position: usize) -> ParseError {
    ParseError { kind, position }
}

/// A segment borrowed from the path it was parsed from: what checks that only read a path
/// use, without a `String` per field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SegmentRef<'a> {
    /// An object field (or map key), quotes trimmed. `*` is the wildcard.
    Field(&'a str),
    /// An array index.
    Index(u32),
}

impl SegmentRef<'_> {
    /// The owned segment.
    pub fn to_owned_segment(self) -> Segment {
        match self {
            SegmentRef::Field(f) => Segment::Field(f.to_string()),
            SegmentRef::Index(i) => Segment::Index(i),
        }
    }
}

impl Segment {
    /// The segment borrowed.
    pub fn as_ref(&self) -> SegmentRef<'_> {
        match self {
            Segment::Field(f) => SegmentRef::Field(f),
            Segment::Index(i) => SegmentRef::Index(*i),
        }
    }
}

/// Parses a field path. The empty string is the empty path.
///
/// Iterative, linear in the length of the path: a path of any length parses without recursion.
pub fn parse(path: &str) -> Result<Segments, ParseError> {
    // Most paths have at most four segments (`spec.forProvider.tags[Name]`).
    let mut segments = Vec::with_capacity(4);
    parse_each(path, |s| segments.push(s.to_owned_segment()))?;
    Ok(Segments(segments))
}

/// Segments borrowed from a path, up to eight of them inline: a patch's paths are parsed on
/// every review, and most have three or four segments.
pub type SegmentRefs<'a> = smallvec::SmallVec<[SegmentRef<'a>; 8]>;

/// [`parse`] into segments borrowed from `path`.
pub fn parse_borrowed(path: &str) -> Result<SegmentRefs<'_>, ParseError> {
    let mut segments = SegmentRefs::new();
    parse_each(path, |s| segments.push(s))?;
    Ok(segments)
}

/// Whether `path` parses, and the error [`parse`] gives if not; allocates nothing.
pub fn check(path: &str) -> Result<(), ParseError> {
    parse_each(path, |_| {})
}

/// The parser: calls `emit` with each segment in order; on an error, some segments may have
/// been emitted already.
fn parse_each<'a>(path: &'a str, mut emit: impl FnMut(SegmentRef<'a>)) -> Result<(), ParseError> {
    // Upstream emits nothing for an empty run (e.g. between `]` and `.`).
    fn push_field<'a>(raw: &'a str, emit: &mut impl FnMut(SegmentRef<'a>)) {
        if !raw.is_empty() {
            emit(SegmentRef::Field(trim_quotes(raw)));
        }
    }
    let bytes = path.as_bytes();
    let mut pos = 0;
    let mut start = 0;
    // The state machine of upstream's lexer: a field, then '.', '[' or the end. Field names
    // are skipped to the next character that matters.
    while let Some(skip) = bytes[pos..]
        .iter()
        .position(|b| matches!(b, b'.' | b'[' | b']'))
    {
        pos += skip;
        match bytes[pos] {
            b'.' => {
                // A period may not lead, trail or repeat, nor be followed by '['.
                if pos == 0 || pos == bytes.len() - 1 || bytes[pos - 1] == b'.' {
                    return Err(err(ParseErrorKind::Unexpected('.'), pos));
                }
                push_field(&path[start..pos], &mut emit);
                pos += 1;
                match bytes[pos] {
                    b'[' => return Err(err(ParseErrorKind::Unexpected('['), pos)),
                    b'.' => return Err(err(ParseErrorKind::Unexpected('.'), pos)),
                    _ => {}
                }
                start = pos;
            }
            b'[' => {
                push_field(&path[start..pos], &mut emit);
                let open = pos;
                let Some(rel_close) = bytes[open..].iter().position(|&b| b == b']') else {
                    return Err(err(ParseErrorKind::Unterminated('['), open));
                };
                let content_start = open + 1;
                let close = open + rel_close;
                if close == content_start {
                    return Err(err(ParseErrorKind::Unexpected(']'), content_start));
                }
                let content = &path[content_start..close];
                if let Some(nested) = content.bytes().position(|b| b == b'[') {
                    return Err(err(ParseErrorKind::Unexpected('['), content_start + nested));
                }
                emit(field_or_index_ref(content));
                pos = close + 1;
                start = pos;
            }
            _ => return Err(err(ParseErrorKind::Unexpected(']'), pos)),
        }
    }
    push_field(&path[start..], &mut emit);
    Ok(())
}

fn trim_quotes(s: &str) -> &str {
    let quote = |b: &u8| matches!(b, b'\'' | b'"');
    // Most names have no quotes: the check on the two ends is all they cost.
    if !s.as_bytes().first().is_some_and(quote) && !s.as_bytes().last().is_some_and(quote) {
        return s;
    }
    s.trim_matches(|c| c == '\'' || c == '"')
}

/// Interprets the content of a bracket: an unsigned 32-bit decimal integer is an index,
/// anything else a field name with surrounding quotes trimmed.
pub fn field_or_index(content: &str) -> Segment {
    field_or_index_ref(content).to_owned_segment()
}

/// [`field_or_index`], borrowing the name.
pub fn field_or_index_ref(content: &str) -> SegmentRef<'_> {
    let trimmed = trim_quotes(content);
    // Upstream's `strconv.ParseUint(s, 10, 32)`, which only digits can pass (a name is not
    // tried: its error would be built for nothing).
    if !trimmed.is_empty()
        && trimmed.bytes().all(|b| b.is_ascii_digit())
        && let Ok(index) = crate::go::strconv::parse_uint(trimmed, 32)
        && let Ok(index) = u32::try_from(index)
    {
        return SegmentRef::Index(index);
    }
    SegmentRef::Field(trimmed)
}

impl fmt::Display for Segments {
    /// Renders the path as upstream's `Segments.String()`: fields containing a period, and the
    /// wildcard, in brackets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_path(f, &self.0)
    }
}

/// A segment owned ([`Segment`]) or borrowed from its path ([`SegmentRef`]): what walking a
/// value by a path reads, so that a path parsed once can be walked without copying it.
pub trait AsSegment {
    /// The segment, borrowed.
    fn as_segment(&self) -> SegmentRef<'_>;
}

impl AsSegment for Segment {
    fn as_segment(&self) -> SegmentRef<'_> {
        self.as_ref()
    }
}

impl AsSegment for SegmentRef<'_> {
    fn as_segment(&self) -> SegmentRef<'_> {
        *self
    }
}

/// `path` as [`Segments`] displays it.
pub fn path_string<S: AsSegment>(path: &[S]) -> String {
    struct Shown<'a, S>(&'a [S]);
    impl<S: AsSegment> fmt::Display for Shown<'_, S> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write_path(f, self.0)
        }
    }
    Shown(path).to_string()
}

fn write_path<S: AsSegment>(f: &mut fmt::Formatter<'_>, path: &[S]) -> fmt::Result {
    for (i, segment) in path.iter().enumerate() {
        match segment.as_segment() {
            SegmentRef::Field(name) if name == "*" || name.contains('.') => write!(f, "[{name}]")?,
            SegmentRef::Field(name) if i == 0 => f.write_str(name)?,
            SegmentRef::Field(name) => write!(f, ".{name}")?,
            SegmentRef::Index(index) => write!(f, "[{index}]")?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(s: &str) -> Segment {
        Segment::Field(s.to_string())
    }

    #[test]
    fn parses_fields_indexes_and_bracket_keys() {
        assert_eq!(
            parse("metadata.labels[app.kubernetes.io/name]").unwrap().0,
            vec![
                field("metadata"),
                field("labels"),
                field("app.kubernetes.io/name")
            ]
        );
        assert_eq!(
            parse("a[0]b").unwrap().0,
            vec![field("a"), Segment::Index(0), field("b")]
        );
        assert_eq!(
            parse("metadata.annotations[\"foo\"]").unwrap().0,
            vec![field("metadata"), field("annotations"), field("foo")]
        );
        assert!(parse("").unwrap().is_empty());
    }

    #[test]
    fn index_rules_follow_go_parse_uint() {
        assert_eq!(field_or_index("+3"), field("+3"));
        assert_eq!(field_or_index("1_0"), field("1_0"));
        assert_eq!(field_or_index("007"), Segment::Index(7));
        assert_eq!(field_or_index("4294967295"), Segment::Index(u32::MAX));
        assert_eq!(field_or_index("''"), field(""));
    }

    #[test]
    fn errors_carry_byte_positions() {
        assert_eq!(
            parse(".").unwrap_err().to_string(),
            "unexpected '.' at position 0"
        );
        assert_eq!(
            parse("a[0].").unwrap_err().to_string(),
            "unexpected '.' at position 4"
        );
        assert_eq!(
            parse("ä..b").unwrap_err().to_string(),
            "unexpected '.' at position 3"
        );
        assert_eq!(
            parse("a[").unwrap_err().to_string(),
            "unterminated '[' at position 1"
        );
    }

    #[test]
    fn very_long_paths_parse_linearly() {
        let path = vec!["seg"; 10_000].join(".");
        assert_eq!(parse(&path).unwrap().len(), 10_000);
        let path = "a".to_string() + &"[1]".repeat(10_000);
        assert_eq!(parse(&path).unwrap().len(), 10_001);
    }

    #[test]
    fn borrowed_parse_and_check_agree_with_parse() {
        for path in [
            "",
            "a",
            "spec.forProvider.tags[Name]",
            "metadata.labels[app.kubernetes.io/name]",
            "a[0]b",
            "a[0].b['c']",
            "x[\"q\"][*].y",
            "a[4294967296]",
            "a['']",
            "'quoted'.b",
            ".",
            "a.",
            "a..b",
            "a.[0]",
            "a[",
            "a[]",
            "a[b[c]]",
            "a]b",
            "a[0]]",
            "ä..b",
            "a[0].",
        ] {
            let owned = parse(path);
            let borrowed = parse_borrowed(path).map(|s| {
                s.into_iter()
                    .map(SegmentRef::to_owned_segment)
                    .collect::<Vec<_>>()
            });
            assert_eq!(borrowed, owned.clone().map(|s| s.0), "{path}");
            assert_eq!(check(path), owned.map(|_| ()), "{path}");
        }
    }

    #[test]
    fn renders_like_upstream() {
        let s = parse("spec.items[*].data[.config.yml][0]").unwrap();
        assert_eq!(s.to_string(), "spec.items[*].data[.config.yml][0]");
    }
}
