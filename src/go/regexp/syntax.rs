//! Does Go's `regexp.Compile` accept a pattern, and if not, why.
//!
//! Crossplane compiles the regular expressions of a Composition (`match` transform
//! patterns of type `regexp`, `string` transforms of type `Regexp`) with Go's
//! `regexp.Compile`, that is `regexp/syntax.Parse(pattern, syntax.Perl)`; compiling the
//! parsed expression cannot fail after that. [`check`] answers the same question without
//! building anything that matches: it is a port of the parser of Go 1.25's
//! `regexp/syntax` (`parse.go`) that keeps the parse stack, the operators and the counts
//! that decide acceptance, and drops the character sets, case folding and simplification
//! that only decide what a pattern matches. It never recurses, and its time and memory
//! are linear in the pattern's length (a 64 KiB pattern takes well under a millisecond).
//!
//! It was checked against Go's own `regexp.Compile` (Go 1.19, whose parser is Go 1.25's
//! but for `(?<name>`, the `\p` name lookup and the name of the size-limit error) on
//! some 3.5 million generated patterns: same verdict, same reason and same quoted
//! expression, but for the factoring described below.
//!
//! Go's rules, all of them implemented as `parse.go` states them:
//! - `{` that does not start a well-formed `{n}`, `{n,}` or `{n,m}` (decimal, no leading
//!   zero) is a literal: `{`, `a{,5}`, `a{x}`, `a{01}`; a count over 1000, or `n > m`, is
//!   `invalid repeat count`, and so is a repetition whose nesting multiplies to more than
//!   1000 copies, such as `(a{100}){11}`;
//! - a repetition operator right after another (`a**`, `a+*`, `a{2}{3}`, `a*{2}`, `a*??`)
//!   is `invalid nested repetition operator`; one `?` after an operator makes it
//!   non-greedy; a group, `(?i)` or `\Q\E` in between resets this, as in Go;
//! - an operator with nothing before it (`*`, `(+)`, `a|?`, `(?i)*`) is `missing argument
//!   to repetition operator`;
//! - groups: `(re)`, `(?:re)`, `(?flags)`, `(?flags:re)` with flags among `i`, `m`, `s`,
//!   `U` and one `-`; `(?P<name>re)` and `(?<name>re)` with a non-empty name of ASCII
//!   letters, digits and `_` (a name may repeat, Go allows it); anything else after `(?`
//!   (`(?x)`, `(?=`, `(?!`, `(?P=n)`) is `invalid or unsupported Perl syntax`, and a
//!   look-behind `(?<=`/`(?<!` is `invalid named capture`, as Go reads it as a name;
//! - escapes: `\a \f \t \n \r \v`, octal `\0`, `\012`, `\123` (a single `\1`..`\7` is a
//!   back reference: an error), `\x7F`, `\x{10FFFF}`, `\d \D \s \S \w \W`, `\pL`, `\p{..}`,
//!   `\PL`, `\P{..}`, `\b \B \A \z`, `\Q...\E`, and any ASCII punctuation; everything
//!   else (`\Z`, `\e`, `\h`, `\k<n>`, `\1`, `\8`, `\C`, an escaped non-ASCII character)
//!   is `invalid escape sequence`; `\b{start}` is accepted, as `\b` then the literal text
//!   `{start}`;
//! - character classes: `]` first is literal, `-` is literal first, last or after a
//!   range, `[[:alpha:]]` and the other POSIX names, class escapes inside; Rust's set
//!   operations `&&`, `--`, `~~` mean nothing in Go (`[a-z&&[^aeiou]]` is a class
//!   followed by a literal `]`); a reversed range or an unknown `[:name:]` is `invalid
//!   character class range`, and so is a class escape used as a range end (`[a-\d]` is
//!   `invalid escape sequence`);
//! - `\p` names as Go 1.25 looks them up: the general categories (`L`, `Lu`, `LC`, `Cn`,
//!   ...), their Unicode aliases (`Letter`, `digit`, ...), `Any`, `ASCII`, `Assigned`
//!   and the Unicode 15.0 scripts, matched ignoring case, spaces, `_` and `-`, with an
//!   optional leading `^` for negation; anything else is `invalid character class range`
//!   (Go 1.24 and older knew only the exact names of categories and scripts and `Any`);
//! - parentheses must balance (`missing closing )`, `unexpected )`), a class must close
//!   (`missing closing ]`), a pattern may not end in a lone `\`;
//! - `invalid UTF-8` for bytes that are not UTF-8 (only reachable through
//!   [`check_bytes`]: a `&str` is always UTF-8).
//!
//! Go's two resource limits follow Go's own bookkeeping: the tree height (`expression
//! nests too deeply` above 1000, non-capturing groups add no level) and the estimated
//! program size (`expression too large` above about 3.3 million instructions, counted
//! only once Go's allocation-count gate opens, with Go's stale cached sizes for merged
//! literals). Two things are not modelled:
//! - Go factors alternatives that start with the same literal text or character class
//!   (`ab|ac` becomes `a(?:b|c)`, then `a[bc]`) before it measures them; here they are
//!   measured unfactored. Only patterns of thousands of characters that approach either
//!   limit through such an alternation are judged differently (e.g. a repeated
//!   alternation of 1100 two-letter words sharing their first letter inside `{1000}`);
//! - Go's limit on the runes held by character classes, which takes some 26 000 `\pL`
//!   in one pattern (more than 64 KiB).

use std::collections::HashSet;
use std::sync::OnceLock;

use thiserror::Error;

/// The reasons Go's `regexp/syntax` gives for rejecting a pattern: its `ErrorCode`s.
///
/// [`ErrorCode::as_str`] (and `Display`) give Go's wording, e.g. `missing closing )`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// `invalid character class range`: a reversed range (`[z-a]`), an unknown POSIX
    /// class (`[[:foo:]]`) or an unknown `\p` name (`\p{Foo}`).
    InvalidCharRange,
    /// `invalid escape sequence`: a backslash before a letter or digit Go gives no
    /// meaning to (`\Z`, `\e`, `\1`), a malformed `\x`, or `\C`.
    InvalidEscape,
    /// `invalid named capture`: `(?P<`/`(?<` without `>`, or an empty or non-word name.
    InvalidNamedCapture,
    /// `invalid or unsupported Perl syntax`: `(?` followed by anything but flags among
    /// `imsU`, `:`, `)` or a named group (`(?x)`, `(?=`, `(?!`).
    InvalidPerlOp,
    /// `invalid nested repetition operator`: a repetition right after another (`a**`).
    InvalidRepeatOp,
    /// `invalid repeat count`: `{n,m}` with a count over 1000, `n > m`, or nested
    /// repetitions multiplying to more than 1000.
    InvalidRepeatSize,
    /// `invalid UTF-8`.
    InvalidUtf8,
    /// `missing closing ]`.
    MissingBracket,
    /// `missing closing )`.
    MissingParen,
    /// `missing argument to repetition operator`: `*`, `+`, `?` or `{n}` with nothing to
    /// repeat.
    MissingRepeatArgument,
    /// `trailing backslash at end of expression`.
    TrailingBackslash,
    /// `unexpected )`.
    UnexpectedParen,
    /// `expression nests too deeply`: the parse tree is more than 1000 high.
    NestingDepth,
    /// `expression too large`: Go's estimate of the compiled program is over its limit.
    Large,
}

impl ErrorCode {
    /// Go's wording of the reason, the string value of its `ErrorCode`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidCharRange => "invalid character class range",
            ErrorCode::InvalidEscape => "invalid escape sequence",
            ErrorCode::InvalidNamedCapture => "invalid named capture",
            ErrorCode::InvalidPerlOp => "invalid or unsupported Perl syntax",
            ErrorCode::InvalidRepeatOp => "invalid nested repetition operator",
            ErrorCode::InvalidRepeatSize => "invalid repeat count",
            ErrorCode::InvalidUtf8 => "invalid UTF-8",
            ErrorCode::MissingBracket => "missing closing ]",
            ErrorCode::MissingParen => "missing closing )",
            ErrorCode::MissingRepeatArgument => "missing argument to repetition operator",
            ErrorCode::TrailingBackslash => "trailing backslash at end of expression",
            ErrorCode::UnexpectedParen => "unexpected )",
            ErrorCode::NestingDepth => "expression nests too deeply",
            ErrorCode::Large => "expression too large",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why Go's `regexp.Compile` rejects a pattern.
///
/// Displays Go's wording of the reason (e.g. `missing closing )`); [`Self::expr`] is the
/// part of the pattern Go quotes with it, and [`Self::go_message`] the whole message Go's
/// error prints.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{code}")]
pub struct GoRegexpError {
    code: ErrorCode,
    expr: String,
}

impl GoRegexpError {
    /// The reason.
    pub fn code(&self) -> ErrorCode {
        self.code
    }

    /// The part of the pattern Go quotes with the reason: the offending piece (`(?x`,
    /// `**`, `\Z`, `z-a`, `{1001}`), or the whole pattern for unbalanced parentheses and
    /// the size limits.
    pub fn expr(&self) -> &str {
        &self.expr
    }

    /// The message of Go's error: ``error parsing regexp: CODE: `EXPR` ``.
    pub fn go_message(&self) -> String {
        format!("error parsing regexp: {}: `{}`", self.code, self.expr)
    }
}

/// Checks `pattern` as Go's `regexp.Compile` parses it: `Ok(())` exactly when Go
/// accepts it, otherwise the reason Go gives (see the module documentation).
pub fn check(pattern: &str) -> Result<(), GoRegexpError> {
    check_bytes(pattern.as_bytes())
}

/// [`check`] for a pattern given as bytes, as a Go string may hold bytes that are not
/// UTF-8 (Go then says `invalid UTF-8`).
pub fn check_bytes(pattern: &[u8]) -> Result<(), GoRegexpError> {
    Parser::new(pattern).parse().map(|_| ())
}

/// The number of capturing groups of `pattern` (numbered and named, as Go's
/// `Regexp.NumSubexp` counts them), or why Go rejects it.
pub fn capture_groups(pattern: &str) -> Result<usize, GoRegexpError> {
    Parser::new(pattern.as_bytes()).parse()
}

/// Go's `maxRepeat`: the largest count in `{n,m}`, and the largest product of nested
/// counts.
const MAX_REPEAT: u64 = 1000;
/// Go's `maxHeight`: the largest height of the parse tree.
const MAX_HEIGHT: u32 = 1000;
/// Go's `maxSize`: 128 MiB of 40-byte instructions.
const MAX_SIZE: u64 = (128 << 20) / 40;

/// What a finished expression is, as far as the checks need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// A literal string of `runes` runes, case-folded or not (Go merges adjacent
    /// literals of the same folding into one node).
    Literal { runes: u64, fold: bool },
    /// One character out of a set: a class, `.`, a class escape.
    Class,
    /// The empty expression.
    Empty,
    /// A concatenation (Go flattens nested ones).
    Concat,
    /// An alternation (Go flattens nested ones).
    Alternate,
    /// Anything else: anchors, captures, repetitions.
    Other,
}

/// A finished expression on the parse stack, summarised.
#[derive(Debug, Clone, Copy)]
struct Node {
    shape: Shape,
    /// Go's `calcSize`, as Go's cache holds it.
    size: u64,
    /// Height of Go's parse tree.
    height: u32,
    /// For concatenations and alternations: the height of their highest element, after
    /// flattening.
    inner: u32,
    /// The largest product of nested repetition counts on a path down the tree, as Go's
    /// `repeatIsValid` walks it.
    reps: u64,
    /// For a counted repetition `{min,max}` at the top: its count as Go's `checkSize`
    /// multiplies it into `repeats` (max, or min for `{min,}`, at least 1), each time
    /// the node is checked.
    count: Option<u64>,
}

impl Node {
    fn leaf(shape: Shape) -> Node {
        let size = match shape {
            Shape::Literal { runes, .. } => runes.max(1),
            _ => 1,
        };
        Node {
            shape,
            size,
            height: 1,
            inner: 0,
            reps: 1,
            count: None,
        }
    }

    /// Go's `isCharClass`: a single-rune literal, a class or a dot.
    fn is_char_class(&self) -> bool {
        matches!(self.shape, Shape::Class | Shape::Literal { runes: 1, .. })
    }

    /// The height this node contributes to a flattened concatenation or alternation of
    /// kind `shape`.
    fn flat_height(&self, shape: Shape) -> u32 {
        if self.shape == shape {
            self.inner
        } else {
            self.height
        }
    }
}

/// An entry of the parse stack: a finished expression, or one of Go's pseudo-operators.
#[derive(Debug, Clone, Copy)]
enum Item {
    /// `(`, `(?:`, `(?flags:` or a named group; `fold` is the case folding to restore at
    /// its `)`.
    LeftParen {
        capture: bool,
        fold: bool,
    },
    /// `|` with the finished alternatives below it.
    VerticalBar,
    Node(Node),
}

/// A repetition operator.
#[derive(Debug, Clone, Copy)]
enum Repeat {
    Star,
    Plus,
    Quest,
    /// `{min,max}`; `max` is -1 for `{min,}`.
    Counted {
        min: i64,
        max: i64,
    },
}

/// The POSIX classes Go knows, as written inside a class.
const POSIX_CLASSES: &[&str] = &[
    "alnum", "alpha", "ascii", "blank", "cntrl", "digit", "graph", "lower", "print", "punct",
    "space", "upper", "word", "xdigit",
];

/// Go 1.25's `unicode.Categories` keys, plus the names `regexp/syntax` adds.
const UNICODE_CATEGORIES: &[&str] = &[
    "Any", "ASCII", "Assigned", "C", "Cc", "Cf", "Cn", "Co", "Cs", "L", "LC", "Ll", "Lm", "Lo",
    "Lt", "Lu", "M", "Mc", "Me", "Mn", "N", "Nd", "Nl", "No", "P", "Pc", "Pd", "Pe", "Pf", "Pi",
    "Po", "Ps", "S", "Sc", "Sk", "Sm", "So", "Z", "Zl", "Zp", "Zs",
];

/// Go 1.25's `unicode.CategoryAliases` keys (Unicode's `gc` value aliases).
const UNICODE_CATEGORY_ALIASES: &[&str] = &[
    "Other",
    "Control",
    "cntrl",
    "Format",
    "Unassigned",
    "Private_Use",
    "Surrogate",
    "Letter",
    "Cased_Letter",
    "Lowercase_Letter",
    "Modifier_Letter",
    "Other_Letter",
    "Titlecase_Letter",
    "Uppercase_Letter",
    "Mark",
    "Combining_Mark",
    "Spacing_Mark",
    "Enclosing_Mark",
    "Nonspacing_Mark",
    "Number",
    "Decimal_Number",
    "digit",
    "Letter_Number",
    "Other_Number",
    "Punctuation",
    "punct",
    "Connector_Punctuation",
    "Dash_Punctuation",
    "Close_Punctuation",
    "Final_Punctuation",
    "Initial_Punctuation",
    "Other_Punctuation",
    "Open_Punctuation",
    "Symbol",
    "Currency_Symbol",
    "Modifier_Symbol",
    "Math_Symbol",
    "Other_Symbol",
    "Separator",
    "Line_Separator",
    "Paragraph_Separator",
    "Space_Separator",
];

/// Go 1.25's `unicode.Scripts` keys (Unicode 15.0).
const UNICODE_SCRIPTS: &[&str] = &[
    "Adlam",
    "Ahom",
    "Anatolian_Hieroglyphs",
    "Arabic",
    "Armenian",
    "Avestan",
    "Balinese",
    "Bamum",
    "Bassa_Vah",
    "Batak",
    "Bengali",
    "Bhaiksuki",
    "Bopomofo",
    "Brahmi",
    "Braille",
    "Buginese",
    "Buhid",
    "Canadian_Aboriginal",
    "Carian",
    "Caucasian_Albanian",
    "Chakma",
    "Cham",
    "Cherokee",
    "Chorasmian",
    "Common",
    "Coptic",
    "Cuneiform",
    "Cypriot",
    "Cypro_Minoan",
    "Cyrillic",
    "Deseret",
    "Devanagari",
    "Dives_Akuru",
    "Dogra",
    "Duployan",
    "Egyptian_Hieroglyphs",
    "Elbasan",
    "Elymaic",
    "Ethiopic",
    "Georgian",
    "Glagolitic",
    "Gothic",
    "Grantha",
    "Greek",
    "Gujarati",
    "Gunjala_Gondi",
    "Gurmukhi",
    "Han",
    "Hangul",
    "Hanifi_Rohingya",
    "Hanunoo",
    "Hatran",
    "Hebrew",
    "Hiragana",
    "Imperial_Aramaic",
    "Inherited",
    "Inscriptional_Pahlavi",
    "Inscriptional_Parthian",
    "Javanese",
    "Kaithi",
    "Kannada",
    "Katakana",
    "Kawi",
    "Kayah_Li",
    "Kharoshthi",
    "Khitan_Small_Script",
    "Khmer",
    "Khojki",
    "Khudawadi",
    "Lao",
    "Latin",
    "Lepcha",
    "Limbu",
    "Linear_A",
    "Linear_B",
    "Lisu",
    "Lycian",
    "Lydian",
    "Mahajani",
    "Makasar",
    "Malayalam",
    "Mandaic",
    "Manichaean",
    "Marchen",
    "Masaram_Gondi",
    "Medefaidrin",
    "Meetei_Mayek",
    "Mende_Kikakui",
    "Meroitic_Cursive",
    "Meroitic_Hieroglyphs",
    "Miao",
    "Modi",
    "Mongolian",
    "Mro",
    "Multani",
    "Myanmar",
    "Nabataean",
    "Nag_Mundari",
    "Nandinagari",
    "New_Tai_Lue",
    "Newa",
    "Nko",
    "Nushu",
    "Nyiakeng_Puachue_Hmong",
    "Ogham",
    "Ol_Chiki",
    "Old_Hungarian",
    "Old_Italic",
    "Old_North_Arabian",
    "Old_Permic",
    "Old_Persian",
    "Old_Sogdian",
    "Old_South_Arabian",
    "Old_Turkic",
    "Old_Uyghur",
    "Oriya",
    "Osage",
    "Osmanya",
    "Pahawh_Hmong",
    "Palmyrene",
    "Pau_Cin_Hau",
    "Phags_Pa",
    "Phoenician",
    "Psalter_Pahlavi",
    "Rejang",
    "Runic",
    "Samaritan",
    "Saurashtra",
    "Sharada",
    "Shavian",
    "Siddham",
    "SignWriting",
    "Sinhala",
    "Sogdian",
    "Sora_Sompeng",
    "Soyombo",
    "Sundanese",
    "Syloti_Nagri",
    "Syriac",
    "Tagalog",
    "Tagbanwa",
    "Tai_Le",
    "Tai_Tham",
    "Tai_Viet",
    "Takri",
    "Tamil",
    "Tangsa",
    "Tangut",
    "Telugu",
    "Thaana",
    "Thai",
    "Tibetan",
    "Tifinagh",
    "Tirhuta",
    "Toto",
    "Ugaritic",
    "Vai",
    "Vithkuqi",
    "Wancho",
    "Warang_Citi",
    "Yezidi",
    "Yi",
    "Zanabazar_Square",
];

/// Go's `canonicalName`: drop spaces, `_` and `-`, upper-case the first ASCII letter and
/// lower-case the others.
fn canonical_name(name: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(name.len());
    let mut first = true;
    for &c in name {
        match c {
            b'_' | b'-' | b' ' => {}
            _ if first => {
                out.push(c.to_ascii_uppercase());
                first = false;
            }
            _ => out.push(c.to_ascii_lowercase()),
        }
    }
    out
}

/// Whether Go's `unicodeTable` knows `name` (after any `^`).
fn is_unicode_class_name(name: &[u8]) -> bool {
    static NAMES: OnceLock<HashSet<Vec<u8>>> = OnceLock::new();
    let names = NAMES.get_or_init(|| {
        UNICODE_CATEGORIES
            .iter()
            .chain(UNICODE_CATEGORY_ALIASES)
            .chain(UNICODE_SCRIPTS)
            .map(|n| canonical_name(n.as_bytes()))
            .collect()
    });
    names.contains(&canonical_name(name))
}

/// Go's `isValidCaptureName`: `[A-Za-z0-9_]+`.
fn is_valid_capture_name(name: &[u8]) -> bool {
    !name.is_empty() && name.iter().all(|&c| c == b'_' || c.is_ascii_alphanumeric())
}

fn is_octal(c: u8) -> bool {
    (b'0'..=b'7').contains(&c)
}

fn unhex(c: u32) -> Option<u32> {
    char::from_u32(c).and_then(|c| c.to_digit(16))
}

/// `a * b`, saturated at `u64::MAX`.
fn mul(a: u64, b: u64) -> u64 {
    a.saturating_mul(b)
}

/// The parser: Go's `parser` with summaries in place of regexps.
struct Parser<'a> {
    src: &'a [u8],
    stack: Vec<Item>,
    /// Go's `FoldCase` flag: the only flag that changes how Go builds its tree (literals
    /// of different folding are not merged).
    fold: bool,
    /// Go's `numRegexp`: regexp nodes allocated, net of its free list.
    num_regexp: u64,
    /// Nodes on Go's free list.
    free: u64,
    /// Go's `repeats`: the product of all repetition counts seen before size tracking.
    repeats: u64,
    /// Whether Go tracks sizes (`p.size != nil`).
    size_tracking: bool,
    /// Whether Go tracks heights (`p.height != nil`).
    height_tracking: bool,
    /// The last search for `:]`: from where, and what it found.
    colon_bracket: Option<(usize, Option<usize>)>,
    /// Capturing groups opened so far (Go's `numCap`).
    captures: usize,
}

impl<'a> Parser<'a> {
    fn new(src: &'a [u8]) -> Self {
        Parser {
            src,
            stack: Vec::new(),
            fold: false,
            num_regexp: 0,
            free: 0,
            repeats: 1,
            size_tracking: false,
            height_tracking: false,
            colon_bracket: None,
            captures: 0,
        }
    }

    fn len(&self) -> usize {
        self.src.len()
    }

    fn at(&self, pos: usize) -> Option<u8> {
        self.src.get(pos).copied()
    }

    /// An error quoting `src[start..end]`.
    fn error(&self, code: ErrorCode, start: usize, end: usize) -> GoRegexpError {
        let expr = self
            .src
            .get(start..end.min(self.len()))
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default();
        GoRegexpError { code, expr }
    }

    /// An error quoting the whole pattern.
    fn error_whole(&self, code: ErrorCode) -> GoRegexpError {
        self.error(code, 0, self.len())
    }

    /// Go's `nextRune` on `src[pos..end]`: the rune at `pos` and where the next starts;
    /// at `end`, U+FFFD and `end` (Go's `utf8.DecodeRuneInString("")`).
    fn next_rune_in(&self, pos: usize, end: usize) -> Result<(u32, usize), GoRegexpError> {
        let Some(&b0) = self.src.get(pos).filter(|_| pos < end) else {
            return Ok((0xFFFD, pos));
        };
        if b0 < 0x80 {
            return Ok((u32::from(b0), pos + 1));
        }
        let width = match b0 {
            0xC2..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF4 => 4,
            _ => 0,
        };
        let decoded = self
            .src
            .get(pos..pos + width)
            .filter(|_| width > 0 && pos + width <= end)
            .and_then(|bytes| std::str::from_utf8(bytes).ok())
            .and_then(|s| s.chars().next());
        match decoded {
            Some(c) => Ok((u32::from(c), pos + width)),
            None => Err(self.error(ErrorCode::InvalidUtf8, pos, end)),
        }
    }

    fn next_rune(&self, pos: usize) -> Result<(u32, usize), GoRegexpError> {
        self.next_rune_in(pos, self.len())
    }

    /// Go's `checkUTF8` on `src[start..end]`.
    fn check_utf8(&self, start: usize, end: usize) -> Result<(), GoRegexpError> {
        let mut pos = start;
        while pos < end {
            pos = self.next_rune_in(pos, end)?.1;
        }
        Ok(())
    }

    /// Go's `newRegexp`: take a node from the free list, or allocate one.
    fn alloc(&mut self) {
        if self.free > 0 {
            self.free -= 1;
        } else {
            self.num_regexp += 1;
        }
    }

    /// Go's `reuse`: give a node back to the free list.
    fn reuse(&mut self) {
        self.free += 1;
    }

    /// Parses the whole pattern; the number of capturing groups on success.
    fn parse(mut self) -> Result<usize, GoRegexpError> {
        let len = self.len();
        let mut pos = 0;
        let mut last_repeat: Option<usize> = None;
        while pos < len {
            let mut repeat = None;
            match self.src[pos] {
                b'(' => {
                    if self.at(pos + 1) == Some(b'?') {
                        pos = self.parse_perl_flags(pos)?;
                    } else {
                        self.alloc();
                        self.push(Item::LeftParen {
                            capture: true,
                            fold: self.fold,
                        })?;
                        pos += 1;
                    }
                }
                b'|' => {
                    self.parse_vertical_bar()?;
                    pos += 1;
                }
                b')' => {
                    self.parse_right_paren()?;
                    pos += 1;
                }
                b'^' | b'$' => {
                    self.op(Shape::Other)?;
                    pos += 1;
                }
                b'.' => {
                    self.op(Shape::Class)?;
                    pos += 1;
                }
                b'[' => pos = self.parse_class(pos)?,
                c @ (b'*' | b'+' | b'?') => {
                    let op = match c {
                        b'*' => Repeat::Star,
                        b'+' => Repeat::Plus,
                        _ => Repeat::Quest,
                    };
                    let before = pos;
                    pos = self.repeat(op, before, before + 1, last_repeat)?;
                    repeat = Some(before);
                }
                b'{' => match self.parse_repeat(pos) {
                    None => {
                        // Not a repetition: `{` is a literal.
                        self.literal()?;
                        pos += 1;
                    }
                    Some((min, max, after)) => {
                        if min < 0
                            || min > MAX_REPEAT as i64
                            || max > MAX_REPEAT as i64
                            || (max >= 0 && min > max)
                        {
                            return Err(self.error(ErrorCode::InvalidRepeatSize, pos, after));
                        }
                        let before = pos;
                        pos =
                            self.repeat(Repeat::Counted { min, max }, before, after, last_repeat)?;
                        repeat = Some(before);
                    }
                },
                b'\\' => pos = self.parse_backslash(pos)?,
                _ => {
                    pos = self.next_rune(pos)?.1;
                    self.literal()?;
                }
            }
            last_repeat = repeat;
        }

        self.concat()?;
        if self.swap_vertical_bar() {
            self.stack.pop();
        }
        self.alternate()?;
        if self.stack.len() != 1 {
            return Err(self.error_whole(ErrorCode::MissingParen));
        }
        Ok(self.captures)
    }

    /// Go's `push`: merge the two literals on top (`maybeConcat`), push, check limits.
    fn push(&mut self, mut item: Item) -> Result<(), GoRegexpError> {
        if let Item::LeftParen { capture: true, .. } = item {
            self.captures += 1;
        }
        self.maybe_concat();
        if let Item::Node(node) = &mut item
            && let Shape::Literal { runes, .. } = node.shape
        {
            // Go sizes a pushed node afresh.
            node.size = runes.max(1);
        }
        self.stack.push(item);
        // Go checks the limits for pseudo-operators too (as one-node expressions).
        let node = match item {
            Item::Node(node) => node,
            _ => Node::leaf(Shape::Other),
        };
        self.check_limits(node)
    }

    /// Go's `op`: a new leaf node.
    fn op(&mut self, shape: Shape) -> Result<(), GoRegexpError> {
        self.alloc();
        self.push(Item::Node(Node::leaf(shape)))
    }

    /// Go's `literal`: one rune, folded or not as the flags say.
    fn literal(&mut self) -> Result<(), GoRegexpError> {
        self.op(Shape::Literal {
            runes: 1,
            fold: self.fold,
        })
    }

    /// Go's `maybeConcat(-1, 0)`: if the two top entries are literals of the same
    /// folding, merge them into one.
    fn maybe_concat(&mut self) {
        let n = self.stack.len();
        if n < 2 {
            return;
        }
        if let (
            Item::Node(Node {
                shape:
                    Shape::Literal {
                        runes: r1,
                        fold: f1,
                    },
                ..
            }),
            Item::Node(Node {
                shape:
                    Shape::Literal {
                        runes: r2,
                        fold: f2,
                    },
                ..
            }),
        ) = (self.stack[n - 1], self.stack[n - 2])
            && f1 == f2
        {
            self.stack.pop();
            // Go appends the top literal to the one below it. Once Go tracks sizes, that
            // node keeps the size it had when last checked, until it is pushed again.
            let mut merged = Node::leaf(Shape::Literal {
                runes: r1.saturating_add(r2),
                fold: f1,
            });
            if self.size_tracking
                && let Item::Node(below) = self.stack[n - 2]
            {
                merged.size = below.size;
            }
            self.stack[n - 2] = Item::Node(merged);
            self.reuse();
        }
    }

    /// Go's `checkLimits` for a node just pushed or made a repetition: the size limit
    /// (`checkSize`) and the height limit (`checkHeight`).
    fn check_limits(&mut self, node: Node) -> Result<(), GoRegexpError> {
        if !self.size_tracking {
            if let Some(n) = node.count {
                self.repeats = if n > MAX_SIZE / self.repeats {
                    MAX_SIZE
                } else {
                    self.repeats * n
                };
            }
            if self.num_regexp >= MAX_SIZE / self.repeats {
                self.size_tracking = true;
                if self.stack_exceeds(|n| n.size > MAX_SIZE) {
                    return Err(self.error_whole(ErrorCode::Large));
                }
            }
        }
        if self.size_tracking && node.size > MAX_SIZE {
            return Err(self.error_whole(ErrorCode::Large));
        }
        if self.num_regexp >= u64::from(MAX_HEIGHT) {
            if !self.height_tracking {
                self.height_tracking = true;
                if self.stack_exceeds(|n| n.height > MAX_HEIGHT) {
                    return Err(self.error_whole(ErrorCode::NestingDepth));
                }
            }
            if node.height > MAX_HEIGHT {
                return Err(self.error_whole(ErrorCode::NestingDepth));
            }
        }
        Ok(())
    }

    /// Whether a node on the stack satisfies `over`.
    fn stack_exceeds(&self, over: impl Fn(&Node) -> bool) -> bool {
        self.stack.iter().any(|item| match item {
            Item::Node(node) => over(node),
            _ => false,
        })
    }

    /// Where the entries above the topmost pseudo-operator (`(` or `|`) start.
    fn top_run_start(&self) -> usize {
        self.stack
            .iter()
            .rposition(|item| !matches!(item, Item::Node(_)))
            .map_or(0, |i| i + 1)
    }

    /// Go's `concat`: replace the entries above the topmost `(` or `|` with their
    /// concatenation.
    fn concat(&mut self) -> Result<(), GoRegexpError> {
        self.maybe_concat();
        let start = self.top_run_start();
        let node = self.collapse(start, Shape::Concat);
        self.push(Item::Node(node))
    }

    /// Go's `alternate`: replace the entries above the topmost `(` with their
    /// alternation.
    fn alternate(&mut self) -> Result<(), GoRegexpError> {
        let start = self.top_run_start();
        let node = self.collapse(start, Shape::Alternate);
        self.push(Item::Node(node))
    }

    /// Go's `collapse`: pop the nodes from `start` and combine them with `shape`
    /// (`Concat` or `Alternate`), flattening nested ones.
    fn collapse(&mut self, start: usize, shape: Shape) -> Node {
        let subs = self.stack.len() - start;
        if subs == 0 {
            // Go: an empty concatenation is an empty match (an empty alternation, a
            // no-match, cannot happen).
            self.alloc();
            return Node::leaf(Shape::Empty);
        }
        if subs == 1
            && let Some(&Item::Node(node)) = self.stack.last()
        {
            self.stack.pop();
            return node;
        }
        self.alloc();
        let mut size: u64 = 0;
        let mut inner: u32 = 0;
        let mut reps: u64 = 1;
        let mut hoisted = 0;
        let mut members: u64 = 0;
        for item in self.stack.drain(start..) {
            if let Item::Node(node) = item {
                size = size.saturating_add(node.size);
                inner = inner.max(node.flat_height(shape));
                reps = reps.max(node.reps);
                if node.shape == shape {
                    hoisted += 1;
                }
                members += 1;
            }
        }
        self.free += hoisted;
        if shape == Shape::Alternate {
            // Go adds one instruction per alternative but the first.
            size = size.saturating_add(members - 1);
        }
        Node {
            shape,
            size: size.max(1),
            height: inner.saturating_add(1),
            inner,
            reps,
            count: None,
        }
    }

    /// Go's `parseVerticalBar`.
    fn parse_vertical_bar(&mut self) -> Result<(), GoRegexpError> {
        self.concat()?;
        if !self.swap_vertical_bar() {
            self.alloc();
            self.push(Item::VerticalBar)?;
        }
        Ok(())
    }

    /// Go's `swapVerticalBar`: if the top sits above a `|`, swap them, merging it into
    /// the alternative below the `|` when both are single characters.
    fn swap_vertical_bar(&mut self) -> bool {
        let n = self.stack.len();
        if n >= 3
            && let (Item::Node(re3), Item::VerticalBar, Item::Node(re1)) =
                (self.stack[n - 3], self.stack[n - 2], self.stack[n - 1])
            && re1.is_char_class()
            && re3.is_char_class()
        {
            self.stack[n - 3] = Item::Node(Node::leaf(Shape::Class));
            self.stack.pop();
            self.reuse();
            return true;
        }
        if n >= 2 && matches!(self.stack[n - 2], Item::VerticalBar) {
            self.stack.swap(n - 2, n - 1);
            return true;
        }
        false
    }

    /// Go's `parseRightParen`.
    fn parse_right_paren(&mut self) -> Result<(), GoRegexpError> {
        self.concat()?;
        if self.swap_vertical_bar() {
            self.stack.pop();
        }
        self.alternate()?;
        if self.stack.len() < 2 {
            return Err(self.error_whole(ErrorCode::UnexpectedParen));
        }
        let (Some(Item::Node(sub)), Some(Item::LeftParen { capture, fold })) =
            (self.stack.pop(), self.stack.pop())
        else {
            return Err(self.error_whole(ErrorCode::UnexpectedParen));
        };
        self.fold = fold;
        let node = if capture {
            Node {
                shape: Shape::Other,
                size: sub.size.saturating_add(2),
                height: sub.height.saturating_add(1),
                inner: 0,
                reps: sub.reps,
                count: None,
            }
        } else {
            sub
        };
        self.push(Item::Node(node))
    }

    /// Go's `repeat`: make the top of the stack the operand of `op`, which spans
    /// `before..after` in the pattern; returns where parsing goes on.
    fn repeat(
        &mut self,
        op: Repeat,
        before: usize,
        mut after: usize,
        last_repeat: Option<usize>,
    ) -> Result<usize, GoRegexpError> {
        if self.at(after) == Some(b'?') {
            // Non-greedy.
            after += 1;
        }
        if let Some(last) = last_repeat {
            return Err(self.error(ErrorCode::InvalidRepeatOp, last, after));
        }
        let Some(&Item::Node(sub)) = self.stack.last() else {
            return Err(self.error(ErrorCode::MissingRepeatArgument, before, after));
        };
        self.alloc();
        let (size, reps) = match op {
            Repeat::Star => (sub.size.saturating_add(2), sub.reps),
            Repeat::Plus | Repeat::Quest => (sub.size.saturating_add(1), sub.reps),
            Repeat::Counted { min, max } => {
                let min_u = u64::try_from(min).unwrap_or(0);
                let size = if max == -1 {
                    if min == 0 {
                        sub.size.saturating_add(2)
                    } else {
                        mul(min_u, sub.size).saturating_add(1)
                    }
                } else {
                    let max_u = u64::try_from(max).unwrap_or(0);
                    mul(max_u, sub.size).saturating_add(max_u.saturating_sub(min_u))
                };
                // Go's repeatIsValid: x{0} is fine whatever x is; x{0,} counts once.
                let m = if max == -1 { min } else { max };
                let reps = if max == 0 {
                    1
                } else if m == 0 {
                    sub.reps
                } else {
                    mul(u64::try_from(m).unwrap_or(0), sub.reps)
                };
                (size, reps)
            }
        };
        let count = match op {
            Repeat::Counted { min, max } => {
                let n = if max == -1 { min } else { max };
                Some(u64::try_from(n).unwrap_or(0).max(1))
            }
            _ => None,
        };
        let node = Node {
            shape: Shape::Other,
            size: size.max(1),
            height: sub.height.saturating_add(1),
            inner: 0,
            reps,
            count,
        };
        if let Some(top) = self.stack.last_mut() {
            *top = Item::Node(node);
        }
        self.check_limits(node)?;
        if let Repeat::Counted { min, max } = op
            && (min >= 2 || max >= 2)
            && node.reps > MAX_REPEAT
        {
            return Err(self.error(ErrorCode::InvalidRepeatSize, before, after));
        }
        Ok(after)
    }

    /// Go's `parseInt` at `pos`: a decimal without leading zero; -1 when it reaches 10^8.
    fn parse_int(&self, pos: usize) -> Option<(i64, usize)> {
        let first = self.at(pos).filter(u8::is_ascii_digit)?;
        if first == b'0' && self.at(pos + 1).is_some_and(|c| c.is_ascii_digit()) {
            return None;
        }
        let end = self.src[pos..]
            .iter()
            .position(|c| !c.is_ascii_digit())
            .map_or(self.len(), |i| pos + i);
        let mut n: i64 = 0;
        for &d in &self.src[pos..end] {
            if n >= 100_000_000 {
                n = -1;
                break;
            }
            n = n * 10 + i64::from(d - b'0');
        }
        Some((n, end))
    }

    /// Go's `parseRepeat` at a `{`: `(min, max, after)` for `{min}`, `{min,}` (max -1) or
    /// `{min,max}`; min -1 if a number is too big; `None` if it is not a repetition.
    fn parse_repeat(&self, pos: usize) -> Option<(i64, i64, usize)> {
        let (mut min, mut s) = self.parse_int(pos + 1)?;
        let max;
        match self.at(s)? {
            b',' => {
                s += 1;
                if self.at(s)? == b'}' {
                    max = -1;
                } else {
                    let (m, rest) = self.parse_int(s)?;
                    max = m;
                    s = rest;
                    if max < 0 {
                        min = -1;
                    }
                }
            }
            _ => max = min,
        }
        (self.at(s)? == b'}').then_some((min, max, s + 1))
    }

    /// Go's `parsePerlFlags` at `(?`: a named group, a flag change or a non-capturing
    /// group; returns where parsing goes on.
    fn parse_perl_flags(&mut self, start: usize) -> Result<usize, GoRegexpError> {
        let len = self.len();
        let rest = len - start;
        let starts_with_p =
            rest > 4 && self.at(start + 2) == Some(b'P') && self.at(start + 3) == Some(b'<');
        let starts_with_name = rest > 3 && self.at(start + 2) == Some(b'<');
        if starts_with_p || starts_with_name {
            let name_start = start + if starts_with_name { 3 } else { 4 };
            let Some(end) = self.src[start..]
                .iter()
                .position(|&c| c == b'>')
                .map(|i| start + i)
            else {
                self.check_utf8(start, len)?;
                return Err(self.error(ErrorCode::InvalidNamedCapture, start, len));
            };
            self.check_utf8(name_start, end)?;
            if !is_valid_capture_name(self.src.get(name_start..end).unwrap_or_default()) {
                return Err(self.error(ErrorCode::InvalidNamedCapture, start, end + 1));
            }
            self.alloc();
            self.push(Item::LeftParen {
                capture: true,
                fold: self.fold,
            })?;
            return Ok(end + 1);
        }

        let mut pos = start + 2;
        let mut fold = self.fold;
        let mut negated = false;
        let mut saw_flag = false;
        while pos < len {
            let (c, next) = self.next_rune(pos)?;
            pos = next;
            match char::from_u32(c) {
                Some('i') => {
                    fold = !negated;
                    saw_flag = true;
                }
                Some('m' | 's' | 'U') => saw_flag = true,
                Some('-') => {
                    if negated {
                        break;
                    }
                    negated = true;
                    saw_flag = false;
                }
                Some(c @ (':' | ')')) => {
                    if negated && !saw_flag {
                        break;
                    }
                    if c == ':' {
                        // Open a group; its `)` restores the flags of now.
                        self.alloc();
                        self.push(Item::LeftParen {
                            capture: false,
                            fold: self.fold,
                        })?;
                    }
                    self.fold = fold;
                    return Ok(pos);
                }
                _ => break,
            }
        }
        Err(self.error(ErrorCode::InvalidPerlOp, start, pos))
    }

    /// The main loop's `\` case at `pos`; returns where parsing goes on.
    fn parse_backslash(&mut self, pos: usize) -> Result<usize, GoRegexpError> {
        match self.at(pos + 1) {
            Some(b'A' | b'b' | b'B' | b'z') => {
                self.op(Shape::Other)?;
                return Ok(pos + 2);
            }
            Some(b'C') => return Err(self.error(ErrorCode::InvalidEscape, pos, pos + 2)),
            Some(b'Q') => {
                // \Q ... \E: everything up to \E (or the end) is literal.
                let body = pos + 2;
                let (end, next) = match self.src[body..].windows(2).position(|w| w == b"\\E") {
                    Some(i) => (body + i, body + i + 2),
                    None => (self.len(), self.len()),
                };
                let mut at = body;
                while at < end {
                    at = self.next_rune_in(at, end)?.1;
                    self.literal()?;
                }
                return Ok(next);
            }
            _ => {}
        }
        // Go allocates a class node here, and gives it back if the escape is no class.
        self.alloc();
        if let Some(next) = self.parse_unicode_class(pos)? {
            self.push(Item::Node(Node::leaf(Shape::Class)))?;
            return Ok(next);
        }
        if let Some(next) = self.perl_class_escape(pos) {
            self.push(Item::Node(Node::leaf(Shape::Class)))?;
            return Ok(next);
        }
        self.reuse();
        let (_, next) = self.parse_escape(pos)?;
        self.literal()?;
        Ok(next)
    }

    /// Go's `parsePerlClassEscape`: `\d \D \s \S \w \W` at `pos`.
    fn perl_class_escape(&self, pos: usize) -> Option<usize> {
        (self.at(pos) == Some(b'\\')
            && matches!(
                self.at(pos + 1),
                Some(b'd' | b'D' | b's' | b'S' | b'w' | b'W')
            ))
        .then_some(pos + 2)
    }

    /// Go's `parseUnicodeClass` at `pos`: `None` if there is no `\p` or `\P` there, the
    /// end of the class escape if it names a known table, else an error.
    fn parse_unicode_class(&self, pos: usize) -> Result<Option<usize>, GoRegexpError> {
        if self.at(pos) != Some(b'\\') || !matches!(self.at(pos + 1), Some(b'p' | b'P')) {
            return Ok(None);
        }
        let (c, mut next) = self.next_rune(pos + 2)?;
        let (seq_end, name_start, name_end);
        if c != u32::from(b'{') {
            // Single-letter name.
            (seq_end, name_start, name_end) = (next, pos + 2, next);
        } else {
            let Some(end) = self.src[pos..]
                .iter()
                .position(|&c| c == b'}')
                .map(|i| pos + i)
            else {
                self.check_utf8(pos, self.len())?;
                return Err(self.error(ErrorCode::InvalidCharRange, pos, self.len()));
            };
            self.check_utf8(pos + 3, end)?;
            (seq_end, name_start, name_end) = (end + 1, pos + 3, end);
            next = end + 1;
        }
        let mut name = self.src.get(name_start..name_end).unwrap_or_default();
        if let Some(negated) = name.strip_prefix(b"^") {
            name = negated;
        }
        if !is_unicode_class_name(name) {
            return Err(self.error(ErrorCode::InvalidCharRange, pos, seq_end));
        }
        Ok(Some(next))
    }

    /// Go's `parseNamedClass` at a `[:` inside a class: `None` if no `:]` follows, the
    /// end of the POSIX class if it is known, else an error.
    fn parse_named_class(&mut self, pos: usize) -> Result<Option<usize>, GoRegexpError> {
        let from = pos + 2;
        // Searches go forward with the parse; reuse the last one while it still holds.
        let found = match self.colon_bracket {
            Some((searched_from, found))
                if searched_from <= from && found.is_none_or(|f| f >= from) =>
            {
                found
            }
            _ => {
                let found = self.src[from.min(self.len())..]
                    .windows(2)
                    .position(|w| w == b":]")
                    .map(|i| from + i);
                self.colon_bracket = Some((from, found));
                found
            }
        };
        let Some(close) = found else {
            return Ok(None);
        };
        let name = self.src.get(from..close).unwrap_or_default();
        let name = name.strip_prefix(b"^").unwrap_or(name);
        if POSIX_CLASSES.iter().any(|p| p.as_bytes() == name) {
            Ok(Some(close + 2))
        } else {
            Err(self.error(ErrorCode::InvalidCharRange, pos, close + 2))
        }
    }

    /// Go's `parseClass` at a `[`; returns where parsing goes on.
    fn parse_class(&mut self, start: usize) -> Result<usize, GoRegexpError> {
        self.alloc();
        let mut t = start + 1;
        if self.at(t) == Some(b'^') {
            t += 1;
        }
        // `]` is a literal as the first character.
        let mut first = true;
        while self.at(t) != Some(b']') || first {
            first = false;
            if self.at(t) == Some(b'[')
                && self.at(t + 1) == Some(b':')
                && self.len() - t > 2
                && let Some(next) = self.parse_named_class(t)?
            {
                t = next;
                continue;
            }
            if let Some(next) = self.parse_unicode_class(t)? {
                t = next;
                continue;
            }
            if let Some(next) = self.perl_class_escape(t) {
                t = next;
                continue;
            }
            // A character or a range.
            let range_start = t;
            let (lo, next) = self.parse_class_char(t, start)?;
            t = next;
            if self.at(t) == Some(b'-') && self.at(t + 1).is_some_and(|c| c != b']') {
                let (hi, next) = self.parse_class_char(t + 1, start)?;
                t = next;
                if hi < lo {
                    return Err(self.error(ErrorCode::InvalidCharRange, range_start, t));
                }
            }
        }
        self.push(Item::Node(Node::leaf(Shape::Class)))?;
        Ok(t + 1)
    }

    /// Go's `parseClassChar`: a character of a class at `pos`, escaped or not.
    fn parse_class_char(
        &self,
        pos: usize,
        class_start: usize,
    ) -> Result<(u32, usize), GoRegexpError> {
        match self.at(pos) {
            None => Err(self.error(ErrorCode::MissingBracket, class_start, self.len())),
            Some(b'\\') => self.parse_escape(pos),
            Some(_) => self.next_rune(pos),
        }
    }

    /// Go's `parseEscape` at a `\`: the rune it stands for and where it ends.
    fn parse_escape(&self, pos: usize) -> Result<(u32, usize), GoRegexpError> {
        if pos + 1 >= self.len() {
            return Err(self.error(ErrorCode::TrailingBackslash, 0, 0));
        }
        let (c, mut t) = self.next_rune(pos + 1)?;
        let invalid = |t: usize| Err(self.error(ErrorCode::InvalidEscape, pos, t));
        let Some(ch) = char::from_u32(c) else {
            return invalid(t);
        };
        match ch {
            '1'..='7' if !self.at(t).is_some_and(is_octal) => invalid(t),
            '0'..='7' => {
                // Up to three octal digits.
                let mut r = c - u32::from(b'0');
                for _ in 1..3 {
                    match self.at(t).filter(|&d| is_octal(d)) {
                        Some(d) => {
                            r = r * 8 + u32::from(d - b'0');
                            t += 1;
                        }
                        None => break,
                    }
                }
                Ok((r, t))
            }
            'x' => {
                if t >= self.len() {
                    return invalid(t);
                }
                let (c, next) = self.next_rune(t)?;
                t = next;
                if c == u32::from(b'{') {
                    // Any number of hex digits in braces, at least one, at most U+10FFFF.
                    let mut nhex = 0;
                    let mut r: u32 = 0;
                    loop {
                        if t >= self.len() {
                            return invalid(t);
                        }
                        let (c, next) = self.next_rune(t)?;
                        t = next;
                        if c == u32::from(b'}') {
                            break;
                        }
                        let Some(v) = unhex(c) else {
                            return invalid(t);
                        };
                        r = r * 16 + v;
                        if r > 0x10FFFF {
                            return invalid(t);
                        }
                        nhex += 1;
                    }
                    if nhex == 0 {
                        return invalid(t);
                    }
                    return Ok((r, t));
                }
                // Two hex digits.
                let x = unhex(c);
                let (c, next) = self.next_rune(t)?;
                t = next;
                match (x, unhex(c)) {
                    (Some(x), Some(y)) => Ok((x * 16 + y, t)),
                    _ => invalid(t),
                }
            }
            'a' => Ok((0x07, t)),
            'f' => Ok((0x0C, t)),
            'n' => Ok((0x0A, t)),
            'r' => Ok((0x0D, t)),
            't' => Ok((0x09, t)),
            'v' => Ok((0x0B, t)),
            // Escaped ASCII punctuation is itself.
            c if c.is_ascii() && !c.is_ascii_alphanumeric() => Ok((u32::from(c), t)),
            _ => invalid(t),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use ErrorCode::*;

    /// `Ok` or the code Go gives. Unless marked, each row was checked against Go's own
    /// `regexp.Compile` (Go 1.19, whose parser is Go 1.25's but for `(?<name>` and the
    /// `\p` name lookup); the rows marked 1.25 follow Go 1.25's `parse.go`.
    const TABLE: &[(&str, Option<ErrorCode>)] = &[
        // Crossplane-style patterns.
        (r"^arn:aws:iam::(\d+):role/(.*)$", None),
        (r"^(?P<region>[a-z]{2}-[a-z]+-\d)$", None),
        (r"^[\w.-]{1,253}$", None),
        (r"(?i)^[\w\s]{1,256}$", None),
        (r".*", None),
        (r"^$", None),
        (r"", None),
        (r"^projects/([^/]+)/locations/([^/]+)$", None),
        (r"^(.+)-(\d{8})$", None),
        (r"^https?://[^/]+/(.*)$", None),
        (r"(?m)^\s*#.*$", None),
        (
            r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?)(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
            None,
        ),
        (r"[", Some(MissingBracket)),
        (r"?", Some(MissingRepeatArgument)),
        (r"a(b", Some(MissingParen)),
        (r"a)b", Some(UnexpectedParen)),
        (r"x{2}{3}", Some(InvalidRepeatOp)),
        (r"\Q1.2\E\d+", None),
        // Braces that are no repetition are literals; counts are at most 1000.
        (r"{", None),
        (r"}", None),
        (r"a{,5}", None),
        (r"a{x}", None),
        (r"a{01}", None),
        (r"a{1,02}", None),
        (r"a{2", None),
        (r"a{2,", None),
        (r"a{1000}", None),
        (r"a{1000,}", None),
        (r"a{0,1000}", None),
        (r"a{1001}", Some(InvalidRepeatSize)),
        (r"a{2,1001}", Some(InvalidRepeatSize)),
        (r"a{1001,}", Some(InvalidRepeatSize)),
        (r"a{3,2}", Some(InvalidRepeatSize)),
        (r"a{9876543210}", Some(InvalidRepeatSize)),
        (r"{2}", Some(MissingRepeatArgument)),
        (r"a|{2}", Some(MissingRepeatArgument)),
        // Nested counts multiply.
        (r"(a{100}){10}", None),
        (r"(a{100}){11}", Some(InvalidRepeatSize)),
        (r"(?:[a-z]{4}){0,250}", None),
        (r"(?:[a-z]{4}){0,251}", Some(InvalidRepeatSize)),
        (r"(?:a{1000}){0}", None),
        (r"(?:a{1000}){0,1}", None),
        (r"((a{1000}){0,1}){2}", Some(InvalidRepeatSize)),
        (r"(?:a{2,}){500}", None),
        (r"(?:a{2,}){501}", Some(InvalidRepeatSize)),
        (r"(?:a*){1000}", None),
        // Nested repetition operators.
        (r"a**", Some(InvalidRepeatOp)),
        (r"a+*", Some(InvalidRepeatOp)),
        (r"a*{2}", Some(InvalidRepeatOp)),
        (r"a*??", Some(InvalidRepeatOp)),
        (r"a{2}*", Some(InvalidRepeatOp)),
        (r"a*?", None),
        (r"a+?", None),
        (r"a??", None),
        (r"a{2}?", None),
        (r"a{2,5}?b", None),
        (r"(a*)*", None),
        (r"(?:a+)+", None),
        (r"a*(?i)*", None),
        (r"a*\Q\E*", None),
        (r"a*{", None),
        (r"a*{,2}", None),
        (r"**", Some(MissingRepeatArgument)),
        (r"(*)", Some(MissingRepeatArgument)),
        (r"a|*", Some(MissingRepeatArgument)),
        (r"(?i)*", Some(MissingRepeatArgument)),
        (r"\Q\E*", Some(MissingRepeatArgument)),
        (r"^*$+\b?", None),
        // Flags and groups.
        (r"(?i)abc", None),
        (r"(?im-sU:x)", None),
        (r"(?)", None),
        (r"(?:)", None),
        (r"()", None),
        (r"(|)", None),
        (r"a|b|", None),
        (r"(?-)", Some(InvalidPerlOp)),
        (r"(?i-)", Some(InvalidPerlOp)),
        (r"(?x)a", Some(InvalidPerlOp)),
        (r"(?i", Some(InvalidPerlOp)),
        (r"(?", Some(InvalidPerlOp)),
        (r"(?--i)", Some(InvalidPerlOp)),
        (r"(?P<name>a)", None),
        (r"(?P<a>x)(?P<a>y)", None),
        (r"(?P<_1>x)", None),
        (r"(?P<>a)", Some(InvalidNamedCapture)),
        (r"(?P<a-b>x)", Some(InvalidNamedCapture)),
        (r"(?P<name", Some(InvalidNamedCapture)),
        (r"(?P<名>x)", Some(InvalidNamedCapture)),
        (r"(?P=name)", Some(InvalidPerlOp)),
        (r"(?=a)", Some(InvalidPerlOp)),
        (r"(?!a)", Some(InvalidPerlOp)),
        (r"(a))", Some(UnexpectedParen)),
        (r"((a)", Some(MissingParen)),
        (r")", Some(UnexpectedParen)),
        // Go 1.22+ named groups; look-behind reads as a bad name (1.25).
        (r"(?<name>a)", None),
        (r"(?<n>a)(?P<n>b)", None),
        (r"(?<name", Some(InvalidNamedCapture)),
        (r"(?<>a)", Some(InvalidNamedCapture)),
        (r"(?<=a)b", Some(InvalidNamedCapture)),
        (r"(?<!a)b", Some(InvalidNamedCapture)),
        (r"(?<", Some(InvalidPerlOp)),
        // Escapes.
        (r"\a\f\t\n\r\v", None),
        (r"\0\012\123\7777", None),
        (r"\x7F\x{10FFFF}\x{0041}", None),
        (r"\x{D800}", None),
        (r"\x{110000}", Some(InvalidEscape)),
        (r"\x{}", Some(InvalidEscape)),
        (r"\xZ1", Some(InvalidEscape)),
        (r"\x4", Some(InvalidEscape)),
        (r"\x{41", Some(InvalidEscape)),
        (r"\pL\p{Greek}\PL\P{Greek}\p{^Greek}\P{^Greek}", None),
        (r"\d\D\s\S\w\W\b\B\A\z", None),
        (r"\Z", Some(InvalidEscape)),
        (r"\e", Some(InvalidEscape)),
        (r"\h", Some(InvalidEscape)),
        (r"\k<n>", Some(InvalidEscape)),
        (r"(a)\1", Some(InvalidEscape)),
        (r"\8", Some(InvalidEscape)),
        (r"\C", Some(InvalidEscape)),
        (r"\<\>\_\-\.\ \#\%", None),
        (r"\é", Some(InvalidEscape)),
        (r"\b{start}", None),
        (r"a\\", None),
        ("a\\", Some(TrailingBackslash)),
        // Classes; Rust's set operations are plain characters in Go.
        (r"[[:alpha:]]", None),
        (r"[[:^digit:]x]", None),
        (r"[[:word:][:xdigit:]]", None),
        (r"[[:foo:]]", Some(InvalidCharRange)),
        (r"[[:alpha:]", Some(MissingBracket)),
        (r"[[:alpha]]", None),
        (r"[a-z&&[^aeiou]]", None),
        (r"[a-z--b]", None),
        (r"[a--]", Some(InvalidCharRange)),
        (r"[~~]", None),
        (r"[a-b-c]", None),
        (r"[z-a]", Some(InvalidCharRange)),
        (r"[]a]", None),
        (r"[^]a]", None),
        (r"[]", Some(MissingBracket)),
        (r"[^]", Some(MissingBracket)),
        (r"[a-\d]", Some(InvalidEscape)),
        (r"[\d-z]", None),
        (r"[a-]", None),
        (r"[-a]", None),
        (r"[a", Some(MissingBracket)),
        (r"[\b]", Some(InvalidEscape)),
        (r"[\Q]\E]", Some(InvalidEscape)),
        (r"[\pL\p{Greek}\d]", None),
        (r"[α-ε☺]", None),
        (r"[\x00-\x{10FFFF}]", None),
        (r"[\x{10FFFF}-\x00]", Some(InvalidCharRange)),
        // \p names.
        (r"\p{Foo}", Some(InvalidCharRange)),
        (r"\pX", Some(InvalidCharRange)),
        (r"\p", Some(InvalidCharRange)),
        (r"\p{L", Some(InvalidCharRange)),
        (r"\p{}", Some(InvalidCharRange)),
        (r"[\p{Foo}]", Some(InvalidCharRange)),
        (r"\p{IsGreek}", Some(InvalidCharRange)),
        (r"\p{Lu}\p{Nd}\p{Han}\p{Latin}\p{Cyrillic}", None),
        // Go 1.25 names: aliases, Any/ASCII/Assigned, LC, Cn, any case, `_- ` ignored.
        (
            r"\p{Letter}\p{digit}\p{Cased_Letter}\p{Any}\p{ASCII}\p{Assigned}",
            None,
        ),
        (
            r"\p{LC}\p{Cn}\p{greek}\pl\p{ascii}\p{upper case-let ter}",
            None,
        ),
        (r"\p{Kawi}\p{Nag_Mundari}\p{Old_Italic}", None),
        (r"\p{^Letter}\P{^any}", None),
        (r"\p{Letters}", Some(InvalidCharRange)),
    ];

    #[test]
    fn table_matches_go() {
        assert!(TABLE.len() >= 60);
        for &(pattern, want) in TABLE {
            let got = check(pattern).err().map(|e| e.code());
            assert_eq!(got, want, "pattern {pattern:?}");
        }
    }

    #[test]
    fn quotes_what_go_quotes() {
        for (pattern, expr) in [
            (r"(?x)a", "(?x"),
            (r"a**", "**"),
            (r"a*??", "*??"),
            (r"a{1001}", "{1001}"),
            (r"(a{100}){11}", "{11}"),
            (r"x{2}{3}", "{2}{3}"),
            (r"b|*?", "*?"),
            (r"[z-a]", "z-a"),
            (r"\Z", r"\Z"),
            (r"\x{110000}", r"\x{110000"),
            (r"[[:foo:]]", "[:foo:]"),
            (r"\p{Foo}x", r"\p{Foo}"),
            (r"\p{Foo", r"\p{Foo"),
            (r"(?P<a-b>x)", "(?P<a-b>"),
            (r"(?P<a", "(?P<a"),
            (r"a[bc", "[bc"),
            (r"a)b", "a)b"),
            (r"(a", "(a"),
            ("a\\", ""),
        ] {
            let err = check(pattern).expect_err(pattern);
            assert_eq!(err.expr(), expr, "pattern {pattern:?}");
        }
    }

    #[test]
    fn displays_go_wording() {
        let err = check("a(b").expect_err("unbalanced");
        assert_eq!(err.to_string(), "missing closing )");
        assert_eq!(
            err.go_message(),
            "error parsing regexp: missing closing ): `a(b`"
        );
        let err = check("a**").expect_err("nested");
        assert_eq!(err.to_string(), "invalid nested repetition operator");
        assert_eq!(
            err.go_message(),
            "error parsing regexp: invalid nested repetition operator: `**`"
        );
    }

    #[test]
    fn invalid_utf8() {
        for pattern in [
            &b"\xff"[..],
            b"a\xffb",
            b"[\xff]",
            b"\\\xff",
            b"(?P<\xff>a)",
            b"\\p{\xff}",
            b"\\Q\xff\\E",
        ] {
            let err = check_bytes(pattern).expect_err("invalid UTF-8");
            assert_eq!(err.code(), InvalidUtf8, "pattern {pattern:?}");
        }
        assert_eq!(check_bytes(b"\xc3\xa9+"), Ok(()));
    }

    #[test]
    fn nesting_depth_limit() {
        let parens = |n| "(".repeat(n) + &")".repeat(n);
        assert_eq!(check(&parens(999)), Ok(()));
        assert_eq!(
            check(&parens(1000)).map_err(|e| e.code()),
            Err(NestingDepth)
        );
        let stars = |n| "(?:".repeat(n) + &")*".repeat(n);
        assert_eq!(check(&stars(999)), Ok(()));
        assert_eq!(check(&stars(1000)).map_err(|e| e.code()), Err(NestingDepth));
        // Non-capturing groups add no tree level, nor does a flat alternation.
        assert_eq!(
            check(&("(?:".repeat(20_000) + "a" + &")".repeat(20_000))),
            Ok(())
        );
        assert_eq!(check(&("(".to_owned() + &"|".repeat(12_345) + ")")), Ok(()));
    }

    #[test]
    fn size_limit() {
        let too_large = [
            "(".to_owned() + &"(xx?)".repeat(1000) + "){1000}",
            "(xx?){1000}".repeat(1000),
            "(?:".to_owned() + &"a".repeat(3400) + "){1000}",
        ];
        for pattern in &too_large {
            assert_eq!(check(pattern).map_err(|e| e.code()), Err(Large));
        }
        assert_eq!(
            check(&("(?:".to_owned() + &"a".repeat(3300) + "){1000}")),
            Ok(())
        );
        assert_eq!(check("(?:(?:a{10}){10}){10}"), Ok(()));
    }

    #[test]
    fn unicode_names() {
        assert_eq!(UNICODE_SCRIPTS.len(), 163);
        assert_eq!(UNICODE_CATEGORY_ALIASES.len(), 42);
        for name in UNICODE_CATEGORIES
            .iter()
            .chain(UNICODE_CATEGORY_ALIASES)
            .chain(UNICODE_SCRIPTS)
        {
            for pattern in [
                format!(r"\p{{{name}}}"),
                format!(r"\P{{^{name}}}"),
                format!(r"[\p{{{}}}]", name.to_lowercase()),
                format!(r"\p{{{}}}", name.to_uppercase().replace('_', " ")),
            ] {
                assert_eq!(check(&pattern), Ok(()), "pattern {pattern:?}");
            }
        }
        for letter in "CLMNPSZ".chars() {
            assert_eq!(check(&format!(r"\p{letter}\P{letter}")), Ok(()));
        }
        for bad in [
            "Foo",
            "Latn",
            "Greek_Extended",
            "IsLatin",
            "Script=Greek",
            "L&",
            "Lx",
        ] {
            assert_eq!(
                check(&format!(r"\p{{{bad}}}")).map_err(|e| e.code()),
                Err(InvalidCharRange),
                "name {bad:?}"
            );
        }
    }

    #[test]
    fn differs_from_the_regex_crate() {
        // Accepted by Go, rejected by the `regex` crate 1.13 (compiled-size limits, `\Q`,
        // literal braces, surrogates, repeated group names).
        for pattern in [
            r"(?P<a>x)(?P<a>y)",
            r"^[\w.-]{1,253}$",
            r"(?i)^[\w\s]{1,256}$",
            r"\Qa.b\E",
            r"a{,5}",
            r"\x{D800}",
        ] {
            assert_eq!(check(pattern), Ok(()), "pattern {pattern:?}");
        }
        // Rejected by Go, accepted by the `regex` crate 1.13.
        for (pattern, code) in [
            (r"a{1001}", InvalidRepeatSize),
            (r"a**", InvalidRepeatOp),
            (r"x{2}{3}", InvalidRepeatOp),
            (r"(?x)a b", InvalidPerlOp),
            (r"\p{sc=Greek}", InvalidCharRange),
            (r"[\d--\w]", InvalidEscape),
        ] {
            assert_eq!(
                check(pattern).map_err(|e| e.code()),
                Err(code),
                "pattern {pattern:?}"
            );
        }
    }

    #[test]
    fn big_patterns_are_fast() {
        const SIZE: usize = 64 * 1024;
        let fill = |unit: &str| unit.repeat(SIZE / unit.len());
        let patterns = [
            fill("a"),
            fill("a*"),
            fill("(a)"),
            fill("(?:"),
            fill("("),
            fill(")"),
            fill("a|"),
            fill(r"\pL"),
            fill(r"\p{Greek}"),
            "[".to_owned() + &fill("[:"),
            "[".to_owned() + &fill("[:a"),
            fill("{1"),
            fill("{99999"),
            "a".to_owned() + &fill("{2}"),
            fill("(?i)"),
            fill("(?P<a>"),
            r"\Q".to_owned() + &fill("x"),
            "(?:".to_owned() + &fill("ab|") + ")",
            "[".to_owned() + &fill(r"\x{41}") + "]",
        ];
        let start = std::time::Instant::now();
        for pattern in &patterns {
            let _ = check(pattern);
        }
        let elapsed = start.elapsed();
        // Linear: a quadratic parse of these takes minutes.
        assert!(elapsed.as_secs() < 30, "took {elapsed:?}");
    }
}
