//! YAML and JSON inputs as located documents.
//!
//! Every input (a file, stdin, a byte buffer) is parsed with `serde-saphyr` into one
//! [`Document`] per YAML document: a [`serde_json::Value`] (what the Kubernetes API server
//! would see after its YAML-to-JSON conversion) plus a compact tree of source positions
//! (line and column), so that findings can point at `file:line` (and a column, for SARIF)
//! for a Kubernetes-style field path such as `spec.resources[0].patches[1].toFieldPath`.
//!
//! Scalars are typed as Kubernetes' YAML 1.1 reader types them: `yes`/`on`/`y` are
//! booleans (as keys too), `0x10`, `0755` (octal), `1_000` are integers, dates and times
//! stay strings. Duplicate keys are errors, as with kubectl's strict decoding.
//!
//! Inputs are bounded: at most [`MAX_INPUT_BYTES`] bytes, [`MAX_NODES`] nodes and
//! [`MAX_DEPTH`] levels of nesting, so hostile inputs fail cleanly instead of exhausting
//! memory or the stack.

use std::borrow::Cow;
use std::cell::Cell;
use std::fmt;
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use serde::de::{self, Deserialize, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use serde_saphyr::{Budget, MessageFormatter, Spanned, UserMessageFormatter};

/// Largest input accepted, in bytes (64 MiB); larger inputs are rejected before parsing.
pub const MAX_INPUT_BYTES: usize = 64 * 1024 * 1024;

/// The shape of a JSON text, read without building it: how deep it nests and about how many
/// values it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct JsonShape {
    /// How deeply arrays and objects nest (counted no further than just past the scan's
    /// `stop`).
    pub depth: usize,
    /// Values (arrays, objects, and the elements and members they hold): at least as many
    /// as the text has.
    pub values: usize,
}

/// Scans JSON `bytes` for their [`JsonShape`] (strings skipped, no recursion), stopping once
/// they nest deeper than `stop`: what a recursive reader will face, and the nodes it will
/// build.
pub fn json_shape(bytes: &[u8], stop: usize) -> JsonShape {
    let mut shape = JsonShape {
        depth: 0,
        values: 1,
    };
    let mut depth = 0usize;
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        i += 1;
        match b {
            // Unterminated: the rest is the string's.
            b'"' => i = json_string_end(bytes, i, |_| true).unwrap_or(bytes.len()),
            b'[' | b'{' => {
                depth += 1;
                // The container's first element or member.
                shape.values += 1;
                if depth > shape.depth {
                    shape.depth = depth;
                    if depth > stop {
                        break;
                    }
                }
            }
            b',' => shape.values += 1,
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    shape
}

/// Where the JSON string whose text starts at `start` (just past its opening quote) ends: just
/// past its closing quote. `None` when it is unterminated, or when `escape`, given the bytes
/// from each backslash on, returns false. Its bytes are skipped by memchr (SIMD): most of a
/// review is strings.
pub fn json_string_end(
    bytes: &[u8],
    start: usize,
    mut escape: impl FnMut(&[u8]) -> bool,
) -> Option<usize> {
    let mut i = start;
    loop {
        let rest = bytes.get(i..)?;
        let at = memchr::memchr2(b'"', b'\\', rest)?;
        if rest[at] == b'"' {
            return Some(i + at + 1);
        }
        if !escape(&rest[at..]) {
            return None;
        }
        // Past the backslash and the byte it escapes.
        i += at + 2;
    }
}

/// Deepest nesting of sequences and mappings accepted.
pub const MAX_DEPTH: usize = 256;

/// Most YAML nodes (scalars, sequences, mappings) accepted in one input.
///
/// Multi-megabyte provider CRD bundles hold a few million nodes; the library default
/// (250,000) is far too low for them.
pub const MAX_NODES: usize = 8_000_000;

/// Most documents accepted in one input (a bundle of every CRD of a large provider has
/// around a thousand).
pub const MAX_DOCUMENTS: usize = 100_000;

/// Name used for standard input in messages.
pub const STDIN_NAME: &str = "<stdin>";

/// An error while reading or parsing an input.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DocumentError {
    /// The input is not valid YAML (or JSON), or breaks a parsing limit at a known place.
    #[error("{file}:{line}:{column}: {message}")]
    Syntax {
        /// Name of the input (a path or `<stdin>`).
        file: String,
        /// 1-based line of the problem.
        line: u32,
        /// 1-based column of the problem.
        column: u32,
        /// One-line description in plain words.
        message: String,
        /// Multi-line rendering with the offending source lines, for terminals.
        snippet: String,
    },
    /// A document of the input is not what it should be (not an object, an unusable CRD),
    /// at a known place.
    #[error("{file}:{line}: {message}")]
    InvalidAt {
        /// Name of the input.
        file: String,
        /// 1-based line of the offending field.
        line: u32,
        /// 1-based column of the offending field.
        column: u32,
        /// One-line description in plain words.
        message: String,
    },
    /// The input is invalid, but the parser gave no position.
    #[error("{file}: {message}")]
    Invalid {
        /// Name of the input.
        file: String,
        /// One-line description in plain words.
        message: String,
    },
    /// The input is larger than [`MAX_INPUT_BYTES`].
    #[error("{file}: input is larger than the limit of {} MiB", limit / (1024 * 1024))]
    TooLarge {
        /// Name of the input.
        file: String,
        /// The limit that was exceeded, in bytes.
        limit: usize,
    },
    /// The input is not UTF-8 text.
    #[error("{file}: not valid UTF-8 text (first invalid byte at offset {offset})")]
    NotUtf8 {
        /// Name of the input.
        file: String,
        /// Byte offset of the first invalid sequence.
        offset: usize,
    },
    /// The input could not be read (missing, permission denied, a directory...).
    #[error("{file}: {source}")]
    Io {
        /// Name of the input.
        file: String,
        /// The underlying I/O error.
        #[source]
        source: io::Error,
    },
}

impl DocumentError {
    /// The name of the input the error is about.
    #[must_use]
    pub fn file(&self) -> &str {
        match self {
            Self::Syntax { file, .. }
            | Self::InvalidAt { file, .. }
            | Self::Invalid { file, .. }
            | Self::TooLarge { file, .. }
            | Self::NotUtf8 { file, .. }
            | Self::Io { file, .. } => file,
        }
    }

    /// The 1-based line of the error, when known.
    #[must_use]
    pub const fn line(&self) -> Option<u32> {
        match self.position() {
            Some((line, _)) => Some(line),
            None => None,
        }
    }

    /// The 1-based line and column of the error, when known.
    #[must_use]
    pub const fn position(&self) -> Option<(u32, u32)> {
        match self {
            Self::Syntax { line, column, .. } | Self::InvalidAt { line, column, .. } => {
                Some((*line, *column))
            }
            _ => None,
        }
    }
}

/// One YAML (or JSON) document of an input, with the source position of every node.
#[derive(Debug, Clone)]
pub struct Document {
    /// The document as JSON, keys in source order.
    pub value: Value,
    /// Name of the input: a file path, `<stdin>` or a caller-chosen label.
    pub source: String,
    /// 0-based position of the document among the non-empty documents of the input.
    pub index: usize,
    /// 1-based line where the document's top-level node starts (0 when unknown).
    pub first_line: u32,
    /// Positions of every node, mirroring `value` as parsed (later edits to `value` are not
    /// reflected).
    locations: Loc,
}

impl Document {
    /// A document with no source positions (for values that did not come from text, such
    /// as an admission request); [`Document::line_of`] returns `None` for it.
    #[must_use]
    pub fn without_locations(source: impl Into<String>, index: usize, value: Value) -> Self {
        Self {
            value,
            source: source.into(),
            index,
            first_line: 0,
            locations: Loc::leaf(0, 0),
        }
    }

    /// The 1-based source line of a Kubernetes-style field path such as
    /// `spec.resources[0].patches[1].toFieldPath` or `metadata.labels[app.kubernetes.io/name]`.
    ///
    /// A map entry is located at its key, a list item where the item starts. When the path
    /// does not exist (a missing required field, a defaulted value), this is the line of
    /// the deepest ancestor that does, so the user is pointed near the problem. `None` only
    /// when the document has no positions at all.
    #[must_use]
    pub fn line_of(&self, field: &str) -> Option<u32> {
        self.position_of(field).map(|(line, _)| line)
    }

    /// The 1-based line and column of a field path, found as [`Document::line_of`] finds the
    /// line: the column of the key for a map entry, of the item's first character for a list
    /// item. Columns count characters (Unicode scalar values), not bytes.
    #[must_use]
    pub fn position_of(&self, field: &str) -> Option<(u32, u32)> {
        let (at, _) = self.locations.resolve(field);
        (at.0 != 0).then_some(at)
    }

    /// Like [`Document::line_of`], but `None` unless the whole path exists in the source.
    #[must_use]
    pub fn line_of_exact(&self, field: &str) -> Option<u32> {
        match self.locations.resolve(field) {
            ((line, _), true) if line != 0 => Some(line),
            _ => None,
        }
    }
}

/// Source positions of a node and its children.
#[derive(Debug, Clone)]
struct Loc {
    /// For a map entry the line of its key; for a list item or a document root, where the
    /// node starts. 0 when unknown.
    line: u32,
    /// The 1-based column (in characters) on `line`; 0 when unknown.
    column: u32,
    children: Children,
}

#[derive(Debug, Clone)]
enum Children {
    Leaf,
    Seq(Box<[Loc]>),
    /// Sorted by key for binary search.
    Map(Box<[(Box<str>, Loc)]>),
}

impl Loc {
    const fn leaf(line: u32, column: u32) -> Self {
        Self {
            line,
            column,
            children: Children::Leaf,
        }
    }

    fn child(&self, segment: &Segment<'_>) -> Option<&Self> {
        match (&self.children, segment) {
            (Children::Map(entries), Segment::Field(key) | Segment::Bracket(key)) => entries
                .binary_search_by(|(k, _)| (**k).cmp(key))
                .ok()
                .and_then(|i| entries.get(i))
                .map(|(_, loc)| loc),
            (Children::Seq(items), Segment::Field(index) | Segment::Bracket(index)) => {
                index.parse::<usize>().ok().and_then(|i| items.get(i))
            }
            (Children::Leaf, _) => None,
        }
    }

    /// The line and column of the deepest node on `field`'s path, and whether the whole
    /// path matched. Nodes without a known line (0) take their parent's position.
    fn resolve(&self, field: &str) -> ((u32, u32), bool) {
        let mut node = self;
        let mut at = (self.line, self.column);
        for segment in (Segments { rest: field }) {
            match segment.ok().and_then(|segment| node.child(&segment)) {
                Some(child) => node = child,
                None => return (at, false),
            }
            if node.line != 0 {
                at = (node.line, node.column);
            }
        }
        (at, true)
    }
}

/// One step of a field path.
#[derive(Debug, PartialEq, Eq)]
enum Segment<'a> {
    /// `name` (between dots).
    Field(&'a str),
    /// `[text]`: a list index, or a map key that may contain dots and slashes.
    Bracket(&'a str),
}

/// Splits `a.b[0].c[x.y/z]` into segments; yields `Err` once at a malformed spot.
struct Segments<'a> {
    rest: &'a str,
}

impl<'a> Iterator for Segments<'a> {
    type Item = Result<Segment<'a>, ()>;

    fn next(&mut self) -> Option<Self::Item> {
        let rest = self.rest.strip_prefix('.').unwrap_or(self.rest);
        if rest.is_empty() {
            self.rest = rest;
            return None;
        }
        if let Some(inner) = rest.strip_prefix('[') {
            let Some(end) = inner.find(']') else {
                self.rest = "";
                return Some(Err(()));
            };
            let (key, after) = inner.split_at(end);
            self.rest = after.get(1..).unwrap_or("");
            return Some(Ok(Segment::Bracket(unquote(key))));
        }
        let end = rest.find(['.', '[']).unwrap_or(rest.len());
        let (name, after) = rest.split_at(end);
        self.rest = after;
        if name.is_empty() {
            // Only reachable for `..`: stop rather than loop.
            self.rest = "";
            return Some(Err(()));
        }
        Some(Ok(Segment::Field(name)))
    }
}

/// `'a.b'` and `"a.b"` -> `a.b`; anything else unchanged.
fn unquote(key: &str) -> &str {
    for quote in ['\'', '"'] {
        if let Some(inner) = key.strip_prefix(quote).and_then(|k| k.strip_suffix(quote)) {
            return inner;
        }
    }
    key
}

/// Parses every non-empty document of `text`; `source` names the input in messages and in
/// [`Document::source`].
///
/// Empty documents and documents holding only comments (or only `null`) are skipped. A
/// top-level value that is not a mapping is kept. Plain JSON is accepted too (JSON is
/// YAML; JSON that the YAML parser rejects, such as tab-indented JSON, is handled).
///
/// # Errors
///
/// [`DocumentError::Syntax`] for invalid YAML, duplicate keys, too deep nesting or too
/// many nodes, [`DocumentError::TooLarge`] for an input over [`MAX_INPUT_BYTES`].
pub fn parse_documents(source: &str, text: &str) -> Result<Vec<Document>, DocumentError> {
    if text.len() > MAX_INPUT_BYTES {
        return Err(DocumentError::TooLarge {
            file: source.to_owned(),
            limit: MAX_INPUT_BYTES,
        });
    }
    // The parser and our visitors recurse once per nesting level, with large frames in
    // debug builds; a dedicated stack keeps [`MAX_DEPTH`] levels safe whatever thread
    // (a small async worker, a test thread) the caller runs on. The memory is only
    // reserved, and touched only as deep as the input goes.
    std::thread::scope(|scope| {
        let parser = std::thread::Builder::new()
            .name("yaml-parser".to_owned())
            .stack_size(PARSER_STACK_BYTES)
            .spawn_scoped(scope, || parse_on_this_thread(source, text))
            .map_err(|source_err| DocumentError::Io {
                file: source.to_owned(),
                source: source_err,
            })?;
        parser.join().unwrap_or_else(|_| {
            Err(DocumentError::Invalid {
                file: source.to_owned(),
                message: "internal error: the YAML parser failed unexpectedly".to_owned(),
            })
        })
    })
}

/// Stack for the parser thread: measured use is about 40 KiB per nesting level in debug
/// builds (a few KiB in release), so this covers [`MAX_DEPTH`] with a wide margin.
const PARSER_STACK_BYTES: usize = 64 * 1024 * 1024;

/// How many continuation lines of quoted scalars [`reindent_quoted_continuation`] may fix in
/// one input (each fix costs a re-parse).
const MAX_REINDENTS: usize = 64;

/// Inputs larger than this are not re-parsed to fix quoted-scalar indentation.
const MAX_REINDENT_BYTES: usize = 4 * 1024 * 1024;

fn parse_on_this_thread(source: &str, text: &str) -> Result<Vec<Document>, DocumentError> {
    let mut fixed: Option<String> = None;
    let mut reindents = 0;
    let yaml_error = loop {
        let current = fixed.as_deref().unwrap_or(text);
        match parse_yaml(current) {
            Ok(roots) => return Ok(into_documents(source, roots)),
            // go-yaml (kubectl) accepts continuation lines of a quoted scalar that are not
            // indented past their key; the YAML spec and serde-saphyr do not. Indenting such
            // a line changes nothing (leading blanks of continuation lines are folded away)
            // and keeps every line number, so real manifests written that way still load.
            Err(err)
                if reindents < MAX_REINDENTS
                    && text.len() <= MAX_REINDENT_BYTES
                    && plain_message(&err)
                        .contains("invalid indentation in multiline quoted scalar") =>
            {
                let line = err.location().map(|l| l.line()).unwrap_or(0);
                match reindent_quoted_continuation(current, line as usize) {
                    Some(next) => {
                        fixed = Some(next);
                        reindents += 1;
                    }
                    None => break err,
                }
            }
            Err(err) => break err,
        }
    };
    // YAML forbids some things valid JSON may contain (tabs for indentation, keys over
    // 1024 characters). Only then, and only for text that really is JSON, look further;
    // never past a limit, which must hold for JSON too.
    if limit_breach(&yaml_error).is_some() || serde_json::from_str::<de::IgnoredAny>(text).is_err()
    {
        return Err(syntax_error(source, &yaml_error));
    }
    // In valid JSON a raw tab can only be whitespace between tokens (tabs inside strings
    // must be escaped), so spaces mean the same and keep every position.
    if text.contains('\t') {
        match parse_yaml(&text.replace('\t', " ")) {
            Ok(roots) => return Ok(into_documents(source, roots)),
            Err(err) if limit_breach(&err).is_some() => return Err(syntax_error(source, &err)),
            // The JSON reader below reports anything else (duplicate keys) itself.
            Err(_) => {}
        }
    }
    // Last resort: the JSON reader, still rejecting duplicate keys, but without lines
    // (everything points at line 1).
    let mut json = serde_json::Deserializer::from_str(text);
    let nodes = Cell::new(0);
    let plain = BuiltSeed {
        plain_nodes: Some(&nodes),
    };
    match plain
        .deserialize(&mut json)
        .and_then(|root| json.end().map(|()| root))
    {
        Ok(root) => Ok(vec![Document {
            value: root.value,
            source: source.to_owned(),
            index: 0,
            first_line: 1,
            locations: Loc {
                line: 1,
                column: 1,
                children: root.children,
            },
        }]),
        // Valid JSON, so this is one of our own checks (duplicate keys, too many values).
        Err(err) => Err(json_error(source, &err)),
    }
}

fn json_error(source: &str, err: &serde_json::Error) -> DocumentError {
    let full = err.to_string();
    let suffix = format!(" at line {} column {}", err.line(), err.column());
    let message = one_line(full.strip_suffix(&suffix).unwrap_or(&full));
    DocumentError::Syntax {
        file: source.to_owned(),
        line: u32::try_from(err.line()).unwrap_or(u32::MAX),
        column: u32::try_from(err.column()).unwrap_or(u32::MAX),
        snippet: format!(
            "error: {message}\n  --> {source}:{}:{}",
            err.line(),
            err.column()
        ),
        message,
    }
}

fn into_documents(source: &str, roots: Vec<Spanned<Built>>) -> Vec<Document> {
    roots
        .into_iter()
        .enumerate()
        .map(|(index, root)| {
            let (first_line, column) = position(&root.referenced);
            Document {
                value: root.value.value,
                source: source.to_owned(),
                index,
                first_line,
                locations: Loc {
                    line: first_line,
                    column,
                    children: root.value.children,
                },
            }
        })
        .collect()
}

fn parse_options() -> serde_saphyr::Options {
    let mut budget = Budget::default();
    budget.max_depth = MAX_DEPTH;
    budget.flow_nesting_limit = MAX_DEPTH;
    budget.max_nodes = MAX_NODES;
    // Events are nodes plus ends of collections and documents: a few per node at most.
    budget.max_events = MAX_NODES.saturating_mul(3);
    budget.max_documents = MAX_DOCUMENTS;
    serde_saphyr::options! {
        budget: Some(budget),
        // Duplicate keys are an error, as with kubectl's strict decoding.
        duplicate_keys: serde_saphyr::DuplicateKeyPolicy::Error,
        // Kubernetes reads YAML 1.1: `0755` is octal (493) there.
        legacy_octal_numbers: true,
    }
}

/// Indents 1-based `line` one column past the line before it (a continuation line of a
/// quoted scalar that go-yaml accepts at its key's indentation). `None` when that changes
/// nothing.
fn reindent_quoted_continuation(text: &str, line: usize) -> Option<String> {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let target = *lines.get(line.checked_sub(1)?)?;
    let previous = lines[..line - 1]
        .iter()
        .rev()
        .find(|l| !l.trim().is_empty())?;
    let indent = |l: &str| l.len() - l.trim_start_matches(' ').len();
    let wanted = indent(previous) + 1;
    let have = indent(target);
    if have >= wanted {
        return None;
    }
    let mut out = String::with_capacity(text.len() + wanted - have);
    for (i, l) in lines.iter().enumerate() {
        if i == line - 1 {
            out.extend(std::iter::repeat_n(' ', wanted - have));
        }
        out.push_str(l);
    }
    Some(out)
}

fn parse_yaml(text: &str) -> Result<Vec<Spanned<Built>>, serde_saphyr::Error> {
    serde_saphyr::from_multiple_with_options(text, parse_options())
}

fn line_number(location: &serde_saphyr::Location) -> u32 {
    u32::try_from(location.line()).unwrap_or(u32::MAX)
}

/// A 1-based line and column (in characters); `(0, 0)` when unknown.
type LineColumn = (u32, u32);

/// The line and column of a location.
fn position(location: &serde_saphyr::Location) -> LineColumn {
    (
        line_number(location),
        u32::try_from(location.column()).unwrap_or(u32::MAX),
    )
}

fn syntax_error(source: &str, err: &serde_saphyr::Error) -> DocumentError {
    let message = plain_message(err);
    match err.location() {
        Some(location) if location.line() > 0 => DocumentError::Syntax {
            file: source.to_owned(),
            line: line_number(&location),
            column: u32::try_from(location.column()).unwrap_or(u32::MAX),
            message,
            snippet: err.render_with_options(serde_saphyr::render_options! {
                formatter: &PlainWords,
                source_name: Some(source),
            }),
        },
        _ => DocumentError::Invalid {
            file: source.to_owned(),
            message,
        },
    }
}

/// A one-line message in plain words.
fn plain_message(err: &serde_saphyr::Error) -> String {
    one_line(&PlainWords.format_message(innermost(err)))
}

/// serde-saphyr's user-facing wording, with our own for the parsing limits (the library
/// names them in Rust terms); also used for the snippet.
struct PlainWords;

impl MessageFormatter for PlainWords {
    fn format_message<'a>(&self, err: &'a serde_saphyr::Error) -> Cow<'a, str> {
        limit_breach(err).map_or_else(|| UserMessageFormatter.format_message(err), Cow::Owned)
    }
}

/// The error under serde-saphyr's snippet and alias wrappers.
fn innermost(mut err: &serde_saphyr::Error) -> &serde_saphyr::Error {
    while let serde_saphyr::Error::WithSnippet { error, .. }
    | serde_saphyr::Error::AliasError { error, .. } = err
    {
        err = error;
    }
    err
}

/// Our message for an error that is one of the parsing limits (the library's own
/// messages name them in Rust terms).
fn limit_breach(err: &serde_saphyr::Error) -> Option<String> {
    use serde_saphyr::budget::BudgetBreach;

    let too_deep = || format!("nesting is deeper than {MAX_DEPTH} levels");
    match innermost(err) {
        serde_saphyr::Error::Budget { breach, .. } => Some(match breach {
            BudgetBreach::Depth { .. } => too_deep(),
            BudgetBreach::Nodes { .. } | BudgetBreach::Events { .. } => too_many_nodes(),
            BudgetBreach::Documents { .. } => {
                format!("input has more than {MAX_DOCUMENTS} documents")
            }
            BudgetBreach::ScalarBytes { .. } => {
                format!("input has more than {MAX_INPUT_BYTES} bytes of values")
            }
            BudgetBreach::Aliases { .. }
            | BudgetBreach::AliasAnchorRatio { .. }
            | BudgetBreach::RecordedAnchorEvents { .. }
            | BudgetBreach::RecordedAnchorBytes { .. } => {
                "aliases expand to too much data".to_owned()
            }
            BudgetBreach::MergeKeys { .. } => "too many merge keys (`<<`)".to_owned(),
            _ => "input is too large or too complex".to_owned(),
        }),
        // The scanner's own limit on nested flow collections (`[[[...`).
        inner if UserMessageFormatter.format_message(inner) == "recursion limit exceeded" => {
            Some(too_deep())
        }
        _ => None,
    }
}

fn too_many_nodes() -> String {
    format!("input has more than {MAX_NODES} values")
}

/// Collapses whitespace runs (including line breaks) so messages stay on one line.
fn one_line(message: &str) -> String {
    message.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Reads and parses an input from `reader`, named `name` in messages.
///
/// # Errors
///
/// [`DocumentError::Io`] when reading fails, [`DocumentError::TooLarge`] past
/// [`MAX_INPUT_BYTES`], [`DocumentError::NotUtf8`], or any error of [`parse_documents`].
pub fn load_reader(name: &str, reader: impl Read) -> Result<Vec<Document>, DocumentError> {
    let mut bytes = Vec::new();
    // Read one byte past the limit to tell "exactly at the limit" from "over it".
    let limit = u64::try_from(MAX_INPUT_BYTES).unwrap_or(u64::MAX);
    reader
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|source| DocumentError::Io {
            file: name.to_owned(),
            source,
        })?;
    if bytes.len() > MAX_INPUT_BYTES {
        return Err(DocumentError::TooLarge {
            file: name.to_owned(),
            limit: MAX_INPUT_BYTES,
        });
    }
    let text = String::from_utf8(bytes).map_err(|err| DocumentError::NotUtf8 {
        file: name.to_owned(),
        offset: err.utf8_error().valid_up_to(),
    })?;
    parse_documents(name, &text)
}

/// Reads and parses the file at `path`; `-` reads standard input (named `<stdin>`).
///
/// # Errors
///
/// [`DocumentError::Io`] when the file cannot be read, [`DocumentError::TooLarge`] when
/// it is over [`MAX_INPUT_BYTES`] (checked before reading), or any error of
/// [`load_reader`].
pub fn load_path(path: &Path) -> Result<Vec<Document>, DocumentError> {
    if path == Path::new("-") {
        return load_reader(STDIN_NAME, io::stdin().lock());
    }
    let name = path.display().to_string();
    let io_error = |source| DocumentError::Io {
        file: name.clone(),
        source,
    };
    let file = fs::File::open(path).map_err(io_error)?;
    let metadata = file.metadata().map_err(io_error)?;
    if metadata.is_dir() {
        return Err(io_error(io::Error::new(
            io::ErrorKind::IsADirectory,
            "is a directory",
        )));
    }
    if metadata.len() > u64::try_from(MAX_INPUT_BYTES).unwrap_or(u64::MAX) {
        return Err(DocumentError::TooLarge {
            file: name,
            limit: MAX_INPUT_BYTES,
        });
    }
    load_reader(&name, file)
}

/// The input files named by `path`.
///
/// A directory is walked recursively for `*.yaml`, `*.yml` and `*.json` files (any case),
/// in sorted order, skipping hidden files and directories (such as `.git` and
/// `.gitlab-ci.yml`) and not following symbolic links to directories (so link loops
/// cannot hang the walk). Any other path, whatever its extension, and `-` (standard input)
/// are returned as they are.
///
/// # Errors
///
/// [`DocumentError::Io`] naming the path that does not exist or cannot be listed.
pub fn collect_files(path: &Path) -> Result<Vec<PathBuf>, DocumentError> {
    if path == Path::new("-") {
        return Ok(vec![path.to_path_buf()]);
    }
    let metadata = fs::metadata(path).map_err(|source| DocumentError::Io {
        file: path.display().to_string(),
        source,
    })?;
    if !metadata.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files = Vec::new();
    walk(path, &mut files)?;
    Ok(files)
}

/// Depth-first, entries in name order; iterative so deep trees cannot exhaust the stack.
fn walk(root: &Path, files: &mut Vec<PathBuf>) -> Result<(), DocumentError> {
    let mut pending = vec![sorted_entries(root)?.into_iter()];
    while let Some(entries) = pending.last_mut() {
        let Some(entry) = entries.next() else {
            pending.pop();
            continue;
        };
        // Hidden entries are tool files (`.git`, `.github`, `.gitlab-ci.yml`, editor
        // backups), not manifests.
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let path = entry.path();
        let file_type = entry.file_type().map_err(|source| DocumentError::Io {
            file: path.display().to_string(),
            source,
        })?;
        if file_type.is_dir() {
            pending.push(sorted_entries(&path)?.into_iter());
        } else if has_input_extension(&path) {
            // A link to a directory named `x.yaml` is not an input (links to directories
            // are not followed); a broken link is kept so that loading it reports it.
            if file_type.is_symlink() && fs::metadata(&path).is_ok_and(|m| m.is_dir()) {
                continue;
            }
            files.push(path);
        }
    }
    Ok(())
}

fn sorted_entries(dir: &Path) -> Result<Vec<fs::DirEntry>, DocumentError> {
    let io_error = |source| DocumentError::Io {
        file: dir.display().to_string(),
        source,
    };
    let mut entries = fs::read_dir(dir)
        .map_err(io_error)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(io_error)?;
    entries.sort_by_key(fs::DirEntry::file_name);
    Ok(entries)
}

fn has_input_extension(path: &Path) -> bool {
    path.extension()
        .and_then(|ext| ext.to_str())
        .is_some_and(|ext| {
            ["yaml", "yml", "json"]
                .iter()
                .any(|known| ext.eq_ignore_ascii_case(known))
        })
}

/// A node being built: its JSON value and the positions of its children.
struct Built {
    value: Value,
    children: Children,
}

impl Built {
    const fn scalar(value: Value) -> Self {
        Self {
            value,
            children: Children::Leaf,
        }
    }
}

impl<'de> Deserialize<'de> for Built {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        BuiltSeed { plain_nodes: None }.deserialize(deserializer)
    }
}

/// Builds a node. Children are read as `Spanned` from serde-saphyr (which enforces the
/// limits), or, for the JSON fallback, without positions and counted here.
#[derive(Clone, Copy)]
struct BuiltSeed<'a> {
    /// `None` for serde-saphyr; the running node count for the JSON fallback.
    plain_nodes: Option<&'a Cell<usize>>,
}

impl<'de> DeserializeSeed<'de> for BuiltSeed<'_> {
    type Value = Built;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Built, D::Error> {
        if let Some(nodes) = self.plain_nodes {
            nodes.set(nodes.get().saturating_add(1));
            if nodes.get() > MAX_NODES {
                return Err(de::Error::custom(too_many_nodes()));
            }
        }
        deserializer.deserialize_any(self)
    }
}

impl BuiltSeed<'_> {
    fn next_item<'de, A: SeqAccess<'de>>(
        self,
        seq: &mut A,
    ) -> Result<Option<(Built, LineColumn)>, A::Error> {
        if self.plain_nodes.is_none() {
            Ok(seq
                .next_element::<Spanned<Built>>()?
                .map(|item| (item.value, position(&item.referenced))))
        } else {
            Ok(seq.next_element_seed(self)?.map(|item| (item, (0, 0))))
        }
    }

    fn next_key<'de, A: MapAccess<'de>>(
        self,
        map: &mut A,
    ) -> Result<Option<(String, LineColumn)>, A::Error> {
        if self.plain_nodes.is_none() {
            Ok(map
                .next_key::<Spanned<Key>>()?
                .map(|key| (key.value.0, position(&key.referenced))))
        } else {
            Ok(map.next_key::<Key>()?.map(|key| (key.0, (0, 0))))
        }
    }

    fn next_value<'de, A: MapAccess<'de>>(self, map: &mut A) -> Result<Built, A::Error> {
        if self.plain_nodes.is_none() {
            map.next_value::<Built>()
        } else {
            map.next_value_seed(self)
        }
    }
}

impl<'de> Visitor<'de> for BuiltSeed<'_> {
    type Value = Built;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Built, E> {
        Ok(Built::scalar(Value::Bool(v)))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Built, E> {
        Ok(Built::scalar(Value::Number(v.into())))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Built, E> {
        Ok(Built::scalar(Value::Number(v.into())))
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Built, E> {
        match i64::try_from(v) {
            Ok(small) => self.visit_i64(small),
            // Too big for JSON integers: like Kubernetes, keep it as a float.
            #[allow(clippy::cast_precision_loss)]
            Err(_) => self.visit_f64(v as f64),
        }
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Built, E> {
        match u64::try_from(v) {
            Ok(small) => self.visit_u64(small),
            #[allow(clippy::cast_precision_loss)]
            Err(_) => self.visit_f64(v as f64),
        }
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Built, E> {
        Number::from_f64(v)
            .map(|n| Built::scalar(Value::Number(n)))
            .ok_or_else(|| E::custom(format!("{v} cannot be represented in JSON")))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Built, E> {
        Ok(Built::scalar(Value::String(v.to_owned())))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Built, E> {
        Ok(Built::scalar(Value::String(v)))
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Built, E> {
        String::from_utf8(v.to_vec())
            .map(|s| Built::scalar(Value::String(s)))
            .map_err(|_| E::custom("binary value is not UTF-8 text"))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Built, E> {
        Ok(Built::scalar(Value::Null))
    }

    fn visit_none<E: de::Error>(self) -> Result<Built, E> {
        Ok(Built::scalar(Value::Null))
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Built, D::Error> {
        self.deserialize(deserializer)
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Built, D::Error> {
        self.deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Built, A::Error> {
        let mut values = Vec::new();
        let mut lines = Vec::new();
        while let Some((item, (line, column))) = self.next_item(&mut seq)? {
            values.push(item.value);
            lines.push(Loc {
                line,
                column,
                children: item.children,
            });
        }
        Ok(Built {
            value: Value::Array(values),
            children: Children::Seq(lines.into_boxed_slice()),
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Built, A::Error> {
        let mut object = Map::new();
        let mut lines: Vec<(Box<str>, Loc)> = Vec::new();
        while let Some((key, (line, column))) = self.next_key(&mut map)? {
            if object.contains_key(&key) {
                // The YAML parser rejects duplicates itself; this catches spellings it keeps
                // apart but that become the same JSON key (`1` and `"1"`), and duplicates in
                // the JSON fallback. Failing inside the value lets the parser attach the
                // position.
                return map.next_value_seed(Reject(format!(
                    "duplicate mapping key `{key}` is not allowed here"
                )));
            }
            let value = self.next_value(&mut map)?;
            lines.push((
                key.as_str().into(),
                Loc {
                    line,
                    column,
                    children: value.children,
                },
            ));
            object.insert(key, value.value);
        }
        lines.sort_unstable_by(|(a, _), (b, _)| a.cmp(b));
        Ok(Built {
            value: Value::Object(object),
            children: Children::Map(lines.into_boxed_slice()),
        })
    }
}

/// A mapping key in its JSON (string) form: `1: x` and `true: y` have keys "1" and "true",
/// as with Kubernetes' YAML reader.
struct Key(String);

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(KeyVisitor)
    }
}

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Key;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a scalar mapping key")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Key, E> {
        Ok(Key(v.to_string()))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Key, E> {
        Ok(Key(v.to_string()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Key, E> {
        Ok(Key(v.to_string()))
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Key, E> {
        Ok(Key(v.to_string()))
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Key, E> {
        Ok(Key(v.to_string()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Key, E> {
        Ok(Key(v.to_string()))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Key, E> {
        Ok(Key(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Key, E> {
        Ok(Key(v))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Key, E> {
        Ok(Key("null".to_owned()))
    }

    fn visit_none<E: de::Error>(self) -> Result<Key, E> {
        self.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Key, D::Error> {
        Key::deserialize(deserializer)
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, deserializer: D) -> Result<Key, D::Error> {
        Key::deserialize(deserializer)
    }
}

/// Fails with its message whatever value it is given (so the parser attaches the value's
/// position to the error).
struct Reject(String);

impl<'de> DeserializeSeed<'de> for Reject {
    type Value = Built;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Built, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Reject {
    type Value = Built;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Built, E> {
        Err(E::custom(self.0))
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Built, E> {
        Err(E::custom(self.0))
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Built, E> {
        Err(E::custom(self.0))
    }

    fn visit_i128<E: de::Error>(self, _: i128) -> Result<Built, E> {
        Err(E::custom(self.0))
    }

    fn visit_u128<E: de::Error>(self, _: u128) -> Result<Built, E> {
        Err(E::custom(self.0))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Built, E> {
        Err(E::custom(self.0))
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Built, E> {
        Err(E::custom(self.0))
    }

    fn visit_bytes<E: de::Error>(self, _: &[u8]) -> Result<Built, E> {
        Err(E::custom(self.0))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Built, E> {
        Err(E::custom(self.0))
    }

    fn visit_none<E: de::Error>(self) -> Result<Built, E> {
        Err(E::custom(self.0))
    }

    fn visit_some<D: Deserializer<'de>>(self, _: D) -> Result<Built, D::Error> {
        Err(de::Error::custom(self.0))
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, _: D) -> Result<Built, D::Error> {
        Err(de::Error::custom(self.0))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<Built, A::Error> {
        Err(de::Error::custom(self.0))
    }

    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<Built, A::Error> {
        Err(de::Error::custom(self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("testdata/document")
            .join(name)
    }

    fn parse(text: &str) -> Vec<Document> {
        match parse_documents("test.yaml", text) {
            Ok(docs) => docs,
            Err(err) => panic!("unexpected error: {err}"),
        }
    }

    fn parse_err(text: &str) -> DocumentError {
        match parse_documents("test.yaml", text) {
            Ok(docs) => panic!("expected an error, got {} documents", docs.len()),
            Err(err) => err,
        }
    }

    fn composition_fixture() -> Vec<Document> {
        match load_path(&fixture("composition.yaml")) {
            Ok(docs) => docs,
            Err(err) => panic!("fixture failed to load: {err}"),
        }
    }

    #[test]
    fn json_shape_skips_strings_and_their_escapes() {
        let body = br#"{"a":"x\"{[,\\","b":[1,2,{"c":3}]}"#;
        let shape = json_shape(body, 10);
        assert_eq!((shape.depth, shape.values), (3, 7));
        // Stops once deeper than asked.
        assert_eq!(json_shape(b"[[[[1]]]]", 2).depth, 3);
        // An unterminated string or escape at the end is no error here.
        assert_eq!(json_shape(br#"["a\"#, 10).depth, 1);
    }

    /// The shape as a byte-at-a-time loop reads it: what the memchr loop must equal.
    fn json_shape_bytewise(bytes: &[u8], stop: usize) -> JsonShape {
        let mut shape = JsonShape {
            depth: 0,
            values: 1,
        };
        let (mut depth, mut i, mut in_string) = (0usize, 0, false);
        while let Some(&b) = bytes.get(i) {
            i += 1;
            match (in_string, b) {
                (true, b'\\') => i += 1,
                (true, b'"') | (false, b'"') => in_string = !in_string,
                (true, _) => {}
                (false, b'[' | b'{') => {
                    depth += 1;
                    shape.values += 1;
                    if depth > shape.depth {
                        shape.depth = depth;
                        if depth > stop {
                            break;
                        }
                    }
                }
                (false, b',') => shape.values += 1,
                (false, b']' | b'}') => depth = depth.saturating_sub(1),
                (false, _) => {}
            }
        }
        shape
    }

    proptest::proptest! {
        #[test]
        fn json_shape_is_the_bytewise_shape(
            text in proptest::collection::vec(
                proptest::sample::select(br#"{}[],"\ a:1"#.to_vec()), 0..200),
            stop in 0usize..6,
        ) {
            proptest::prop_assert_eq!(json_shape(&text, stop), json_shape_bytewise(&text, stop));
        }
    }

    #[test]
    fn fixture_documents_have_file_absolute_positions() {
        let docs = composition_fixture();
        // The comment-only document between the XRD and the first Composition is skipped.
        assert_eq!(docs.len(), 3);
        let summary: Vec<_> = docs
            .iter()
            .map(|d| {
                (
                    d.index,
                    d.first_line,
                    d.value["kind"].as_str().unwrap_or(""),
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                (0, 2, "CompositeResourceDefinition"),
                (1, 26, "Composition"),
                (2, 74, "Composition")
            ]
        );
        assert!(docs.iter().all(|d| d.source.ends_with("composition.yaml")));
    }

    #[test]
    fn lines_of_kubernetes_field_paths() {
        let docs = composition_fixture();
        let resources = &docs[1];
        let pipeline = &docs[2];
        let cases = [
            (resources, "spec.resources[0].patches[1].toFieldPath", 59),
            (
                resources,
                "metadata.annotations[crossplane.io/composition-schema-aware-validation-mode]",
                31,
            ),
            (
                resources,
                "spec.resources[0].base.metadata.labels[app.kubernetes.io/name]",
                45,
            ),
            (
                pipeline,
                "spec.pipeline[0].input.resources[2].patches[0]",
                98,
            ),
            // A map entry is located at its key, not at its first item.
            (resources, "spec.resources[0].patches", 52),
            (resources, "spec.resources", 38),
            // A list item is located where it starts: `-` alone on line 56, content on 57.
            (resources, "spec.resources[0].patches[1]", 57),
            (resources, "spec.resources[1]", 63),
            // Flow style.
            (
                resources,
                "spec.resources[0].base.spec.forProvider.tags.team",
                51,
            ),
            (
                resources,
                "spec.resources[0].patches[1].transforms[0].string.fmt",
                62,
            ),
            (pipeline, "spec.compositeTypeRef.kind", 79),
            (
                pipeline,
                "spec.pipeline[0].input.resources[1].base.kind",
                92,
            ),
            // Merged from an anchor: the `<<: *defaults` line.
            (
                resources,
                "spec.resources[1].base.spec.forProvider.region",
                69,
            ),
            (
                resources,
                "spec.resources[1].base.spec.forProvider.policy",
                70,
            ),
            (resources, "", 26),
            (resources, "spec", 34),
        ];
        for (doc, path, line) in cases {
            assert_eq!(doc.line_of(path), Some(line), "{path}");
            assert_eq!(doc.line_of_exact(path), Some(line), "{path}");
        }
    }

    #[test]
    fn columns_point_where_lines_do() {
        let docs = composition_fixture();
        let resources = &docs[1];
        let cases = [
            // A map entry at its key.
            (
                resources,
                "spec.resources[0].patches[1].toFieldPath",
                (59, 11),
            ),
            (
                resources,
                "spec.resources[0].base.metadata.labels[app.kubernetes.io/name]",
                (45, 13),
            ),
            // A quoted key at its opening quote.
            (
                resources,
                "spec.resources[0].base.metadata.labels[1]",
                (46, 13),
            ),
            // A list item at its first character, past the `-` (alone on line 56).
            (resources, "spec.resources[0].patches[0]", (53, 11)),
            (resources, "spec.resources[0].patches[1]", (57, 11)),
            (resources, "spec.resources[1]", (63, 7)),
            // Flow style.
            (
                resources,
                "spec.resources[0].base.spec.forProvider.tags.team",
                (51, 20),
            ),
            (
                resources,
                "spec.resources[0].patches[1].transforms[0].string.fmt",
                (62, 38),
            ),
            // The document root.
            (resources, "", (26, 1)),
        ];
        for (doc, path, at) in cases {
            assert_eq!(doc.position_of(path), Some(at), "{path}");
            assert_eq!(doc.line_of(path), Some(at.0), "{path}");
        }
        // A missing field: its deepest existing ancestor, line and column.
        assert_eq!(
            resources.position_of("spec.resources[0].patches[1].policy"),
            Some((57, 11))
        );
        let bare = Document::without_locations("request", 0, json!({"a": 1}));
        assert_eq!(bare.position_of("a"), None);
    }

    #[test]
    fn columns_count_characters_and_json_has_them_too() {
        let docs = parse(
            "é: {ü: 1, x: 2}
",
        );
        assert_eq!(docs[0].position_of("é"), Some((1, 1)));
        // `x` is the 11th character and the 13th byte.
        assert_eq!(docs[0].position_of("é.x"), Some((1, 11)));
        let docs = parse("{\n  \"a\": {\"b\": [1, {\"c\": true}]},\n  \"d\": 2\n}\n");
        assert_eq!(docs[0].position_of("a"), Some((2, 3)));
        assert_eq!(docs[0].position_of("a.b"), Some((2, 9)));
        assert_eq!(docs[0].position_of("a.b[1]"), Some((2, 18)));
        assert_eq!(docs[0].position_of("a.b[1].c"), Some((2, 19)));
        assert_eq!(docs[0].position_of("d"), Some((3, 3)));
        // Tab-indented JSON (which YAML refuses) keeps its columns: a tab is one character.
        let tabs = match load_path(&fixture("tabs.json")) {
            Ok(docs) => docs,
            Err(err) => panic!("{err}"),
        };
        assert_eq!(
            tabs[0].position_of("spec.resources[0].patches[0].toFieldPath"),
            Some((17, 7))
        );
    }

    #[test]
    fn block_scalars_and_comments_keep_lines_right() {
        let xrd = &composition_fixture()[0];
        let schema = "spec.versions[0].schema.openAPIV3Schema";
        assert_eq!(xrd.line_of(&format!("{schema}.description")), Some(16));
        // The key after a multi-line block scalar.
        assert_eq!(xrd.line_of(&format!("{schema}.properties")), Some(19));
        assert_eq!(
            xrd.value["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"],
            "A bucket.\nSpans several lines: with a colon, and [brackets].\n"
        );
        assert_eq!(xrd.line_of("spec.names.plural"), Some(8));
    }

    #[test]
    fn fixture_values_are_plain_json() {
        let docs = composition_fixture();
        let resources = &docs[1].value["spec"]["resources"];
        assert_eq!(
            resources[0]["base"]["metadata"]["labels"],
            json!({"app.kubernetes.io/name": "bucket", "1": "quoted-one", "2": "plain-two"})
        );
        // The anchor is reused through the merge key, explicit keys first.
        assert_eq!(
            resources[1]["base"]["spec"]["forProvider"],
            json!({
                "policy": "{\"Version\": \"2012-10-17\"}\n",
                "region": "us-east-1",
                "tags": {"team": "platform", "cost-center": "42"}
            })
        );
        assert_eq!(resources[1]["patches"], json!([]));
        assert_eq!(
            docs[1].value["metadata"]["annotations"]["crossplane.io/composition-schema-aware-validation-mode"],
            "strict"
        );
    }

    #[test]
    fn missing_paths_point_at_the_deepest_existing_ancestor() {
        let docs = composition_fixture();
        let doc = &docs[1];
        let cases = [
            ("spec.resources[0].patches[1].policy.fromFieldPath", 57),
            ("spec.resources[7].name", 38),
            ("spec.resources[0].base.spec.forProvider.missing", 49),
            ("spec.writeConnectionSecretsToNamespace", 34),
            ("spec.pipeline[0].step", 34),
            ("status", 26),
            // Indexing a mapping with a non-key, and a scalar with anything.
            ("spec.resources[0].name.deeper", 39),
            ("spec.resources[x]", 38),
        ];
        for (path, line) in cases {
            assert_eq!(doc.line_of(path), Some(line), "{path}");
            assert_eq!(doc.line_of_exact(path), None, "{path}");
        }
        // A document built from a value has no positions at all.
        let bare = Document::without_locations("request", 0, json!({"a": 1}));
        assert_eq!(bare.line_of("a"), None);
        assert_eq!(bare.line_of(""), None);
    }

    #[test]
    fn bracket_keys_may_be_quoted_or_numeric() {
        let docs = composition_fixture();
        let doc = &docs[1];
        let labels = "spec.resources[0].base.metadata.labels";
        for key in [
            "[app.kubernetes.io/name]",
            "['app.kubernetes.io/name']",
            "[\"app.kubernetes.io/name\"]",
        ] {
            assert_eq!(
                doc.line_of_exact(&format!("{labels}{key}")),
                Some(45),
                "{key}"
            );
        }
        // `[1]` on a mapping is the key "1": quoted `"1"` and plain `2` are both string keys.
        assert_eq!(doc.line_of_exact(&format!("{labels}[1]")), Some(46));
        assert_eq!(doc.line_of_exact(&format!("{labels}[2]")), Some(47));
        assert_eq!(doc.line_of_exact(&format!("{labels}.2")), Some(47));
        // An unclosed bracket stops at the last complete segment.
        assert_eq!(
            doc.line_of(&format!("{labels}[app.kubernetes.io")),
            Some(44)
        );
        assert_eq!(
            doc.line_of_exact(&format!("{labels}[app.kubernetes.io")),
            None
        );
    }

    #[test]
    fn field_path_segments() {
        let segments: Vec<_> = Segments {
            rest: "spec.resources[0].base.metadata['a.b/c'][\"d\"][e.f]x.y",
        }
        .collect();
        assert_eq!(
            segments,
            [
                Ok(Segment::Field("spec")),
                Ok(Segment::Field("resources")),
                Ok(Segment::Bracket("0")),
                Ok(Segment::Field("base")),
                Ok(Segment::Field("metadata")),
                Ok(Segment::Bracket("a.b/c")),
                Ok(Segment::Bracket("d")),
                Ok(Segment::Bracket("e.f")),
                Ok(Segment::Field("x")),
                Ok(Segment::Field("y")),
            ]
        );
        let broken: Vec<_> = Segments { rest: "a..b" }.collect();
        assert_eq!(broken, [Ok(Segment::Field("a")), Err(())]);
        assert_eq!(Segments { rest: "" }.count(), 0);
    }

    #[test]
    fn scalars_follow_kubernetes_yaml() {
        let docs = parse(concat!(
            "yes_: yes\non_: on\nno_: n\noff_: Off\n",
            "hex: 0x10\nunderscore: 1_000\noctal: 0755\noctal2: 0o17\nbinary: 0b101\n",
            "date: 2024-01-01\ntime: 2024-01-01T10:00:00Z\nclock: 12:30:00\n",
            "float: 1.5\nexp: 1e3\nwhole: 1.0\nnull1: ~\nnull2:\nnull3: null\n",
            "quoted: '123'\ntagged: !!str 123\ncustom: !thing value\n",
            "big: 99999999999999999999\nneg: -12\nplus: +12\nnot_octal: 08\n",
        ));
        assert_eq!(
            docs[0].value,
            json!({
                "yes_": true, "on_": true, "no_": false, "off_": false,
                "hex": 16, "underscore": 1000, "octal": 493, "octal2": 15, "binary": 5,
                "date": "2024-01-01", "time": "2024-01-01T10:00:00Z", "clock": "12:30:00",
                "float": 1.5, "exp": 1000.0, "whole": 1.0,
                "null1": null, "null2": null, "null3": null,
                "quoted": "123", "tagged": "123", "custom": "value",
                "big": 1e20, "neg": -12, "plus": 12, "not_octal": 8.0,
            })
        );
    }

    #[test]
    fn non_string_keys_become_strings() {
        let docs = parse("1: one\ntrue: yes\n0x10: hex\n~: nothing\n1.5: float\n");
        assert_eq!(
            docs[0].value,
            json!({"1": "one", "true": true, "16": "hex", "null": "nothing", "1.5": "float"})
        );
        assert_eq!(docs[0].line_of_exact("[16]"), Some(3));
        assert_eq!(docs[0].line_of_exact("true"), Some(2));
        // YAML 1.1 booleans are booleans as keys too, as in Kubernetes: `on:` is "true"
        // (and `on:` next to `yes:` is a duplicate key).
        assert_eq!(
            parse("on: 1\nn: 2\n")[0].value,
            json!({"true": 1, "false": 2})
        );
        assert!(parse_documents("x", "on: 1\nyes: 2\n").is_err());
    }

    #[test]
    fn anchors_and_aliases() {
        let docs = parse("a: &list\n  - 1\n  - 2\nb: *list\nc:\n  <<: {x: 1}\n  z: 2\n");
        assert_eq!(
            docs[0].value,
            json!({"a": [1, 2], "b": [1, 2], "c": {"z": 2, "x": 1}})
        );
        assert_eq!(docs[0].line_of_exact("b"), Some(4));
        assert_eq!(docs[0].line_of_exact("a[1]"), Some(3));
        assert_eq!(docs[0].line_of_exact("c.x"), Some(6));
    }

    #[test]
    fn empty_and_comment_only_documents_are_skipped() {
        assert!(parse("").is_empty());
        assert!(parse("# nothing\n").is_empty());
        assert!(parse("---\n---\n# only a comment\n...\n").is_empty());
        let docs = parse("---\n# c\n---\na: 1\n---\n---\n- x\n---\njust text\n---\n~\n");
        let found: Vec<_> = docs
            .iter()
            .map(|d| (d.index, d.first_line, d.value.clone()))
            .collect();
        // Top-level values that are not mappings are kept for the caller to judge.
        assert_eq!(
            found,
            [
                (0, 4, json!({"a": 1})),
                (1, 7, json!(["x"])),
                (2, 9, json!("just text")),
            ]
        );
    }

    #[test]
    fn syntax_error_in_the_second_document() {
        let err = match load_path(&fixture("second-document-error.yaml")) {
            Ok(_) => panic!("expected a syntax error"),
            Err(err) => err,
        };
        let DocumentError::Syntax {
            file,
            line,
            column,
            message,
            snippet,
        } = &err
        else {
            panic!("expected a syntax error, got {err:?}");
        };
        assert!(file.ends_with("testdata/document/second-document-error.yaml"));
        assert_eq!((*line, *column), (10, 14));
        assert_eq!(message, "mapping values are not allowed in this context");
        assert_eq!(
            err.to_string(),
            format!("{file}:10:14: mapping values are not allowed in this context")
        );
        assert!(snippet.contains("namespace: default"), "{snippet}");
        assert_eq!(err.line(), Some(10));
        assert_eq!(err.file(), file);
    }

    #[test]
    fn error_messages_are_one_line() {
        let err = parse_err("a:\n  b: 1\n c: 2\n");
        assert_eq!(
            err.to_string(),
            "test.yaml:3:2: while parsing a block mapping, did not find expected key"
        );
        let err = parse_err("a: [1, 2\nb: 3\n");
        assert!(!err.to_string().contains('\n'), "{err}");
        assert_eq!(err.line(), Some(2));
        let err = parse_err("a: *nowhere\n");
        assert_eq!(err.to_string(), "test.yaml:1:4: reference to unknown value");
    }

    #[test]
    fn duplicate_keys_are_errors_naming_the_line() {
        let err = parse_err("a: 1\n---\nmetadata:\n  name: x\n  labels: {}\n  name: y\n");
        assert_eq!(
            err.to_string(),
            "test.yaml:6:3: duplicate mapping key `name` is not allowed here"
        );
        // Different YAML spellings of the same JSON key.
        let err = parse_err("labels:\n  '1': a\n  1: b\n");
        assert_eq!(err.line(), Some(3), "{err}");
        assert!(
            err.to_string().contains("duplicate mapping key `1`"),
            "{err}"
        );
        let err = parse_err("y: 1\ntrue: 2\n");
        assert_eq!(err.line(), Some(2), "{err}");
        // Duplicates in JSON too.
        let err = parse_err("{\"a\": 1,\n \"a\": 2}\n");
        assert_eq!(err.line(), Some(2), "{err}");
    }

    #[test]
    fn non_finite_floats_are_errors() {
        let err = parse_err("a: .nan\n");
        assert_eq!(
            err.to_string(),
            "test.yaml:1:4: value `.nan` is not a finite number"
        );
        assert!(parse_documents("x", "a: 1e400\n").is_err());
    }

    #[test]
    fn deep_flow_nesting_is_a_clean_error() {
        let err = parse_err(&"[".repeat(100_000));
        assert_eq!(
            err.to_string(),
            format!("test.yaml:1:257: nesting is deeper than {MAX_DEPTH} levels")
        );
        let balanced = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(parse_err(&balanced).line(), Some(1));
    }

    fn nested_mappings(levels: usize) -> String {
        let mut text = String::new();
        for level in 0..levels - 1 {
            text.push_str(&" ".repeat(level));
            text.push_str("a:\n");
        }
        text.push_str(&" ".repeat(levels - 1));
        text.push_str("b: 1\n");
        text
    }

    #[test]
    fn deep_block_nesting_is_a_clean_error() {
        let err = parse_err(&nested_mappings(10_000));
        assert_eq!(
            err.to_string(),
            format!("test.yaml:257:257: nesting is deeper than {MAX_DEPTH} levels")
        );
        assert!(parse_documents("x", &nested_mappings(MAX_DEPTH + 1)).is_err());
    }

    #[test]
    fn nesting_up_to_the_limit_loads_on_a_small_stack() {
        // The caller's thread may be small (test threads, async workers): parsing runs on
        // its own stack.
        let worker = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(|| {
                let maps = parse_documents("x", &nested_mappings(MAX_DEPTH)).map(|docs| {
                    let path = vec!["a"; MAX_DEPTH - 1].join(".") + ".b";
                    docs.first().and_then(|doc| doc.line_of_exact(&path))
                });
                let flow = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
                let flow = parse_documents("x", &flow).map(|docs| docs.len());
                (maps.ok(), flow.ok())
            });
        let joined = worker.map(std::thread::JoinHandle::join);
        assert!(
            matches!(joined, Ok(Ok((Some(Some(256)), Some(1))))),
            "{joined:?}"
        );
    }

    #[test]
    fn inputs_over_64_mib_are_rejected_before_parsing() {
        let text = "#".repeat(MAX_INPUT_BYTES + 1);
        let err = parse_err(&text);
        assert!(matches!(err, DocumentError::TooLarge { .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            "test.yaml: input is larger than the limit of 64 MiB"
        );
        // From a reader, without reading it all.
        let endless = io::repeat(b'#');
        let err = match load_reader("<pipe>", endless) {
            Ok(_) => panic!("expected an error"),
            Err(err) => err,
        };
        assert!(matches!(err, DocumentError::TooLarge { .. }), "{err:?}");
    }

    /// A bundle shaped like a provider's CRDs: many documents of nested schemas.
    fn crd_bundle(target_bytes: usize) -> String {
        let mut text = String::new();
        let mut n = 0;
        while text.len() < target_bytes {
            text.push_str(&format!(
                "---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n\
                 metadata:\n  name: things{n}.example.org\nspec:\n  group: example.org\n  \
                 names: {{kind: Thing{n}, plural: things{n}}}\n  versions:\n  - name: v1beta1\n    \
                 served: true\n    schema:\n      openAPIV3Schema:\n        type: object\n        \
                 properties:\n"
            ));
            for f in 0..40 {
                text.push_str(&format!(
                    "          field{f}:\n            description: Field {f} configures \
                     something important for the provider.\n            type: object\n            \
                     properties:\n              name: {{type: string, maxLength: 63}}\n              \
                     count:\n                type: integer\n                format: int64\n              \
                     tags:\n                type: array\n                items: {{type: string}}\n"
                ));
            }
            n += 1;
        }
        text
    }

    fn count_nodes(value: &Value) -> usize {
        1 + match value {
            Value::Array(items) => items.iter().map(count_nodes).sum(),
            Value::Object(entries) => entries.values().map(|v| 1 + count_nodes(v)).sum(),
            _ => 0,
        }
    }

    #[test]
    fn a_5_mb_bundle_with_300k_nodes_loads() {
        let text = crd_bundle(5 * 1024 * 1024);
        let docs = parse(&text);
        let nodes: usize = docs.iter().map(|d| count_nodes(&d.value)).sum();
        assert!(nodes > 300_000, "{nodes}");
        let last = docs.len() - 1;
        assert_eq!(docs[last].index, last);
        assert_eq!(
            docs[last].line_of_exact("spec.versions[0].schema.openAPIV3Schema.properties.field39.properties.tags.items.type"),
            u32::try_from(text.lines().count()).ok()
        );
    }

    #[test]
    fn json_with_tabs() {
        let docs = match load_path(&fixture("tabs.json")) {
            Ok(docs) => docs,
            Err(err) => panic!("{err}"),
        };
        assert_eq!(docs.len(), 1);
        let doc = &docs[0];
        assert_eq!(
            doc.value["metadata"]["labels"]["app.kubernetes.io/name"],
            "tabbed"
        );
        assert_eq!(doc.value["spec"]["replicas"], 3);
        assert_eq!(doc.value["spec"]["ratio"], 0.5);
        assert_eq!(doc.value["spec"]["nothing"], Value::Null);
        assert_eq!(
            doc.line_of_exact("metadata.labels[app.kubernetes.io/name]"),
            Some(7)
        );
        assert_eq!(
            doc.line_of_exact("spec.resources[0].patches[0].toFieldPath"),
            Some(17)
        );
        // Duplicates in tab-indented JSON.
        let err = parse_err("{\n\t\"a\": 1,\n\t\"a\": 2\n}\n");
        assert_eq!(err.line(), Some(3), "{err}");
        assert!(
            err.to_string().contains("duplicate mapping key `a`"),
            "{err}"
        );
        // Tabs in YAML indentation stay an error.
        assert_eq!(parse_err("a:\n\tb: 1\n").line(), Some(2));
        // Key order is kept.
        let keys: Vec<_> = doc
            .value
            .as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default();
        assert_eq!(keys, ["apiVersion", "kind", "metadata", "spec"]);
    }

    #[test]
    fn json_the_yaml_parser_rejects_still_loads() {
        // YAML limits implicit keys to 1024 characters; JSON does not.
        let key = "k".repeat(2000);
        let text = format!("{{\n  \"a\": {{\"b\": 1}},\n  \"{key}\": true\n}}\n");
        let docs = parse(&text);
        assert_eq!(docs[0].value["a"]["b"], 1);
        assert_eq!(docs[0].value[key.as_str()], true);
        // No positions beyond the first line.
        assert_eq!(docs[0].line_of("a.b"), Some(1));
        assert_eq!(docs[0].line_of_exact("a.b"), Some(1));
        // Duplicates are still errors.
        let text = format!("{{\"{key}\": true,\n \"a\": 1,\n \"a\": 2}}");
        let err = parse_err(&text);
        assert_eq!(
            err.to_string(),
            "test.yaml:3:7: duplicate mapping key `a` is not allowed here"
        );
    }

    fn scratch_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "composition-webhook-document-{}-{name}",
            std::process::id()
        ));
        // Left over from an earlier run of the same process id: start afresh.
        let _ = fs::remove_dir_all(&dir);
        if let Err(err) = fs::create_dir_all(&dir) {
            panic!("cannot create {}: {err}", dir.display());
        }
        dir
    }

    fn write(path: &Path, text: &[u8]) {
        if let Some(parent) = path.parent()
            && let Err(err) = fs::create_dir_all(parent)
        {
            panic!("cannot create {}: {err}", parent.display());
        }
        if let Err(err) = fs::write(path, text) {
            panic!("cannot write {}: {err}", path.display());
        }
    }

    #[test]
    fn collect_files_walks_directories_in_order() {
        let dir = scratch_dir("walk");
        for name in [
            "b.yaml",
            "a.yml",
            "c.json",
            "notes.txt",
            "sub/z.YAML",
            "sub/deeper/y.yaml",
            ".git/config.yaml",
            ".hidden/x.yaml",
            "zz/.w.yaml",
            "zz/w.yaml",
        ] {
            write(&dir.join(name), b"a: 1\n");
        }
        #[cfg(unix)]
        {
            // A loop back to the root, and a link to a file.
            let _ = std::os::unix::fs::symlink(&dir, dir.join("sub/loop"));
            let _ = std::os::unix::fs::symlink(&dir, dir.join("sub/loop.yaml"));
            let _ = std::os::unix::fs::symlink(dir.join("b.yaml"), dir.join("link.yaml"));
        }
        let files = match collect_files(&dir) {
            Ok(files) => files,
            Err(err) => panic!("{err}"),
        };
        let relative: Vec<_> = files
            .iter()
            .filter_map(|f| f.strip_prefix(&dir).ok())
            .map(|f| f.to_string_lossy().into_owned())
            .collect();
        let mut expected = vec!["a.yml", "b.yaml", "c.json"];
        if cfg!(unix) {
            expected.push("link.yaml");
        }
        expected.extend(["sub/deeper/y.yaml", "sub/z.YAML", "zz/w.yaml"]);
        assert_eq!(relative, expected);

        // An explicit file is taken whatever its extension; `-` is stdin.
        let notes = dir.join("notes.txt");
        assert!(matches!(collect_files(&notes), Ok(files) if files == [notes.clone()]));
        assert!(
            matches!(collect_files(Path::new("-")), Ok(files) if files == [PathBuf::from("-")])
        );

        let missing = dir.join("missing");
        match collect_files(&missing) {
            Err(DocumentError::Io { file, .. }) => assert!(file.ends_with("missing")),
            other => panic!("expected an I/O error, got {other:?}"),
        }
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn load_path_errors_name_the_file() {
        let dir = scratch_dir("load");
        let latin1 = dir.join("latin1.yaml");
        write(&latin1, b"name: caf\xe9\n");
        match load_path(&latin1) {
            Err(err @ DocumentError::NotUtf8 { offset: 9, .. }) => {
                assert_eq!(
                    err.to_string(),
                    format!(
                        "{}: not valid UTF-8 text (first invalid byte at offset 9)",
                        latin1.display()
                    )
                );
            }
            other => panic!("expected a UTF-8 error, got {other:?}"),
        }
        let missing = dir.join("missing.yaml");
        match load_path(&missing) {
            Err(err @ DocumentError::Io { .. }) => {
                assert!(
                    err.to_string()
                        .starts_with(&format!("{}: ", missing.display()))
                );
            }
            other => panic!("expected an I/O error, got {other:?}"),
        }
        assert!(matches!(load_path(&dir), Err(DocumentError::Io { .. })));
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn load_reader_names_the_input() {
        let docs = match load_reader(STDIN_NAME, "a: 1\n---\nb: 2\n".as_bytes()) {
            Ok(docs) => docs,
            Err(err) => panic!("{err}"),
        };
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[1].source, "<stdin>");
        assert_eq!(docs[1].first_line, 3);
        let err = match load_reader(STDIN_NAME, "a: [\n".as_bytes()) {
            Ok(_) => panic!("expected an error"),
            Err(err) => err,
        };
        assert!(err.to_string().starts_with("<stdin>:1:"), "{err}");
    }
}
