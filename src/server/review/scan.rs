//! The scan: a review read the way the API server sends it in one streaming pass that builds
//! no tree, for its echo and the verdict cache's key before it waits for a worker, and the
//! places of the text that decoding would only skip.

use std::ops::Range;

use k8s_openapi::api::authentication::v1::UserInfo;
use kube_core::admission::Operation;
use kube_core::gvk::GroupVersionKind;
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, MapAccess, Visitor};
use serde_json::value::RawValue;
use std::collections::BTreeMap;
use std::fmt;

use super::{
    Checked, Echo, KIND, Key, LAST_APPLIED, MAX_DEPTH, ObjectEcho, VALUE_BYTES, answered_version,
    is_composition, is_json, may_be_surrogate, no_surrogate,
};
use crate::document::{JsonShape, json_string_end};
use crate::model::{LEGACY_MODE_ANNOTATION, MODE_ANNOTATION};
use crate::server::verdicts::{self, Field, Streamed};

/// Reads a review with `de`; `None` if it is not JSON. serde_json's own nesting limit (128)
/// bounds the recursion.
fn scan_from<'de, R: serde_json::de::Read<'de>>(
    mut de: serde_json::Deserializer<R>,
    review: ScanReview<'_>,
) -> Option<()> {
    de::Deserializer::deserialize_map(&mut de, review).ok()?;
    de.end().ok()
}

/// Whether skipping `raw` (JSON text that serde_json's skipping accepted, its UTF-8 checked)
/// is as good as parsing it into a tree: no escape in a string that may be a surrogate
/// (`\uD800`-`\uDFFF`, which a parse refuses unpaired), no number that may overflow a float
/// (an exponent, or 300 digits or more), and nesting no deeper than 128 levels (serde_json's
/// limit on what it reads; skipping has none). One pass, a string's bytes skipped with
/// `memchr`.
pub fn plain(raw: &[u8]) -> bool {
    let (mut i, mut depth, mut digits) = (0, 0usize, 0u32);
    while let Some(&b) = raw.get(i) {
        i += 1;
        match b {
            b'"' => match json_string_end(raw, i, |escape| !may_be_surrogate(escape)) {
                Some(end) => i = end,
                None => return false,
            },
            b'[' | b'{' => {
                depth += 1;
                if depth > SHALLOW {
                    return false;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            b'0'..=b'9' => {
                digits += 1;
                if digits >= 300 {
                    return false;
                }
                continue;
            }
            b'e' | b'E' if digits > 0 => return false,
            _ => {}
        }
        digits = 0;
    }
    true
}

/// A review read in one streaming pass that builds no tree ([`scan`]).
#[derive(Debug, Clone)]
pub struct Scanned {
    /// What [`salvage`](super::salvage) reads of the body (the same).
    pub echo: Echo,
    /// The verdict cache's key of the review, when its answer may be cached (of the
    /// object's text: [`verdicts::Streamed`]).
    pub key: Option<verdicts::Key>,
    /// The body's shape, for [`decode_with_shape`](super::decode_with_shape): measured for a body larger than a tree
    /// budget's worth of values, bounded for a smaller one (a value per byte at most, and
    /// [`SCANNED_DEPTH`] levels, the most a body the scan reads can nest), so that decoding
    /// does not walk the body again.
    pub shape: Option<JsonShape>,
    /// Where the body holds text that decoding reads only to skip (`oldObject`, and of a
    /// Composition `metadata.managedFields` and the [`LAST_APPLIED`] annotation): checked by
    /// the scan as decoding would, and blanked by [`blank_unread`] before decoding.
    pub unread: Vec<Range<usize>>,
}

/// Reads a review the way the API server sends it without building a tree: its echo (as
/// [`salvage`](super::salvage) reads it) and the verdict cache's key, so that an answer cached before can be
/// given before the review waits for a worker, and a body read once where it used to be read
/// three times (salvage, the shape, the key's walk of the tree).
///
/// `None` unless [`decode`](super::decode) would read the body: JSON, within `max_tree_bytes` and the
/// nesting limit, an AdmissionReview of a version this webhook answers, with a request of the
/// right types; and unless the body is plain: the fields in the API server's order
/// (`apiVersion` and `kind` before `request`; `uid`, `kind` and `operation` before `object`),
/// no field repeated, the object a map with `metadata` whose name and generateName are
/// strings and whose annotations and labels are maps of strings, nested at most 128 levels
/// deep. Any other body goes the long way (salvage, decode).
pub fn scan(content_type: Option<&str>, body: &[u8], max_tree_bytes: usize) -> Option<Scanned> {
    if content_type.is_some_and(|ct| !is_json(ct)) {
        return None;
    }
    // A body holds fewer values than bytes: a small one fits the budget unscanned. (Its depth
    // is another matter: skipped values nest without a limit, so decoding measures it.)
    let shape = if (body.len() + 1).saturating_mul(VALUE_BYTES) <= max_tree_bytes {
        JsonShape {
            depth: SCANNED_DEPTH,
            values: body.len() + 1,
        }
    } else {
        let shape = crate::document::json_shape(body, MAX_DEPTH);
        if shape.depth > MAX_DEPTH || shape.values.saturating_mul(VALUE_BYTES) > max_tree_bytes {
            return None;
        }
        shape
    };
    let mut echo = Echo::default();
    let mut key = None;
    let mut unread = Unread {
        base: body.as_ptr().addr(),
        ranges: Vec::new(),
    };
    let review = ScanReview {
        echo: &mut echo,
        key: &mut key,
        unread: &mut unread,
    };
    // A body of valid UTF-8 is checked once, whole, and read as text: serde_json then does
    // not check each string again (about 100 instructions a string).
    match std::str::from_utf8(body) {
        Ok(text) => scan_from(serde_json::Deserializer::from_str(text), review),
        Err(_) => scan_from(serde_json::Deserializer::from_slice(body), review),
    }?;
    Some(Scanned {
        echo,
        key,
        shape: Some(shape),
        unread: unread.ranges,
    })
}

/// Blanks the text a scan found unread ([`Scanned::unread`]) in the body it scanned: a
/// string, an array or an object becomes a string of spaces of the same length (so that every
/// position in the body, and in an error about it, stays where it was, and skipping it is a
/// search for its closing quote); other values are left as they are. Decoding the blanked
/// body gives what decoding the body gives, without reading that text again.
pub fn blank_unread(body: &mut [u8], unread: &[Range<usize>]) {
    for range in unread {
        let Some(text) = body.get_mut(range.clone()) else {
            continue;
        };
        if !matches!(text.first(), Some(b'"' | b'[' | b'{')) {
            continue;
        }
        if let Some((first, rest)) = text.split_first_mut()
            && let Some((last, spaces)) = rest.split_last_mut()
        {
            *first = b'"';
            spaces.fill(b' ');
            *last = b'"';
        }
    }
}

/// Where the text decoding only skips lies, as a scan finds it.
struct Unread {
    /// The address of the body's first byte (raw values borrow from the body).
    base: usize,
    ranges: Vec<Range<usize>>,
}

impl Unread {
    fn note(&mut self, raw: &RawValue) {
        // A raw value borrows from the body it was read from.
        if let Some(start) = raw.get().as_ptr().addr().checked_sub(self.base) {
            self.ranges.push(start..start + raw.get().len());
        }
    }
}

/// The deepest a body the scan reads may nest: serde_json's limit (128) on what it reads,
/// plus as many for the values it skips below that (checked to nest no deeper).
pub const SCANNED_DEPTH: usize = 128 + SHALLOW;

const _: () = assert!(
    SCANNED_DEPTH <= MAX_DEPTH,
    "a scanned body is never too deep"
);

/// How deep a value the scan skips may nest (serde_json's limit for what it reads): a hit
/// is answered only for a body that decoding would not refuse as too deep.
const SHALLOW: usize = 128;

/// Whether a skipped value nests at most [`SHALLOW`] levels (skipping has no limit).
fn shallow(raw: &RawValue) -> bool {
    crate::document::json_shape(raw.get().as_bytes(), SHALLOW).depth <= SHALLOW
}

/// Skips a value the review does not read, checked to be UTF-8 (by the scan, with the whole
/// body, or by serde_json) and [`shallow`].
fn skip<'de, A: MapAccess<'de>>(map: &mut A) -> Result<&'de RawValue, A::Error> {
    let raw: &'de RawValue = map.next_value()?;
    if shallow(raw) {
        Ok(raw)
    } else {
        Err(unplain())
    }
}

/// The error that ends a scan (the body goes the long way).
fn unplain<E: de::Error>() -> E {
    E::custom("not a plain review")
}

/// A field's name, matched without a copy: its index among `names`, or `None`.
struct Name(&'static [&'static str]);

impl<'de> DeserializeSeed<'de> for Name {
    type Value = Option<usize>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Option<usize>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Name {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a field name")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Option<usize>, E> {
        Ok(self.0.iter().position(|n| *n == v))
    }
}

/// The index among `fields` of the next of them in `map`, the fields not among them
/// skipped, each field at most once.
fn next_field<'de, A: MapAccess<'de>>(
    map: &mut A,
    fields: &'static [&'static str],
    seen: &mut u32,
) -> Result<Option<usize>, A::Error> {
    while let Some(field) = map.next_key_seed(Name(fields))? {
        match field {
            None => {
                skip(map)?;
            }
            Some(field) => {
                once(seen, field)?;
                return Ok(Some(field));
            }
        }
    }
    Ok(None)
}

/// Marks a field seen; a second time is no plain review.
fn once<E: de::Error>(seen: &mut u32, field: usize) -> Result<(), E> {
    let bit = 1 << field;
    if *seen & bit != 0 {
        return Err(unplain());
    }
    *seen |= bit;
    Ok(())
}

/// The review, read into its echo, its key and the places of the text decoding skips.
struct ScanReview<'e> {
    echo: &'e mut Echo,
    key: &'e mut Option<verdicts::Key>,
    unread: &'e mut Unread,
}

impl<'de> Visitor<'de> for ScanReview<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an AdmissionReview")
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        const FIELDS: &[&str] = &["apiVersion", "kind", "request"];
        let mut seen = 0;
        while let Some(field) = next_field(&mut map, FIELDS, &mut seen)? {
            match field {
                0 => {
                    let v: Key<'de> = map.next_value()?;
                    self.echo.api_version = Some(answered_version(&v).ok_or_else(unplain)?);
                }
                1 => {
                    let v: Key<'de> = map.next_value()?;
                    if v != KIND {
                        return Err(unplain());
                    }
                }
                _ => {
                    if seen != 0b111 {
                        return Err(unplain());
                    }
                    map.next_value_seed(ScanRequest(&mut self))?;
                }
            }
        }
        if seen != 0b111 {
            return Err(unplain());
        }
        Ok(())
    }
}

/// The request, read into its review's echo, key and unread places.
struct ScanRequest<'a, 'e>(&'a mut ScanReview<'e>);

impl<'de> DeserializeSeed<'de> for ScanRequest<'_, '_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ScanRequest<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an AdmissionRequest")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        const FIELDS: &[&str] = &[
            "uid",
            "kind",
            "name",
            "operation",
            "userInfo",
            "object",
            "oldObject",
            "dryRun",
        ];
        const BEFORE_OBJECT: u32 = 0b1011;
        let mut seen = 0;
        let mut cacheable = false;
        while let Some(field) = next_field(&mut map, FIELDS, &mut seen)? {
            match field {
                0 => self.0.echo.uid = Some(map.next_value()?),
                1 => {
                    let kind: GroupVersionKind = map.next_value()?;
                    self.0.echo.composition = Some(is_composition(&kind.group, &kind.kind));
                }
                2 => {
                    map.next_value::<String>()?;
                }
                3 => {
                    let operation: Operation = map.next_value()?;
                    self.0.echo.operation =
                        Some(crate::server::admission::operation_name(&operation));
                    cacheable = matches!(operation, Operation::Create | Operation::Update);
                }
                4 => {
                    map.next_value::<UserInfo>()?;
                }
                5 => {
                    if seen & BEFORE_OBJECT != BEFORE_OBJECT {
                        return Err(unplain());
                    }
                    let composition = self.0.echo.composition == Some(true);
                    let (echo, key) = map.next_value_seed(ScanObject {
                        keyed: cacheable && composition,
                        // Decoding skips these only in a Composition (read slim).
                        unread: composition.then_some(&mut *self.0.unread),
                    })?;
                    self.0.echo.object = Some(echo);
                    *self.0.key = key;
                }
                6 => self.0.unread.note(skip(&mut map)?),
                _ => {
                    map.next_value::<bool>()?;
                }
            }
        }
        if seen & (BEFORE_OBJECT | 1 << 5) != (BEFORE_OBJECT | 1 << 5) {
            return Err(unplain());
        }
        Ok(())
    }
}

/// The object: its metadata read, everything hashed for the key when `keyed`, or checked.
struct ScanObject<'e> {
    keyed: bool,
    /// Where to note what decoding skips, when it reads the object slim.
    unread: Option<&'e mut Unread>,
}

impl<'de> DeserializeSeed<'de> for ScanObject<'_> {
    type Value = (ObjectEcho, Option<verdicts::Key>);

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ScanObject<'_> {
    type Value = (ObjectEcho, Option<verdicts::Key>);

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut hash = self.keyed.then(Streamed::start);
        let mut echo = None;
        while let Some(key) = map.next_key::<Key<'de>>()? {
            if let Some(h) = &mut hash {
                h.member(&key);
            }
            if key == "metadata" {
                if echo.is_some() {
                    return Err(unplain());
                }
                let metadata = map.next_value_seed(MetadataSeed(self.unread.as_deref_mut()))?;
                if let Some(h) = &mut hash {
                    h.metadata(metadata.fields());
                }
                echo = Some(metadata.echo());
            } else if let Some(h) = &mut hash {
                // The member's text: the same text is the same value (another text of the
                // same value only misses).
                let raw: &'de RawValue = map.next_value()?;
                if !plain(raw.get().as_bytes()) {
                    return Err(unplain());
                }
                h.text(raw.get());
            } else {
                map.next_value::<Checked>()?;
            }
        }
        let echo = echo.ok_or_else(unplain)?;
        Ok((echo, hash.map(Streamed::finish)))
    }
}

/// What the key and the echo read of `metadata`; the rest is checked, `managedFields`
/// skipped when [`plain`].
#[derive(Default)]
struct ScanMetadata {
    name: Option<String>,
    generate_name: Option<String>,
    /// The annotations, when there: the mode annotations.
    annotations: Option<[Option<String>; 2]>,
    labels: bool,
}

impl ScanMetadata {
    fn fields(&self) -> [Field<'_>; 4] {
        fn text(v: &Option<String>) -> Field<'_> {
            v.as_deref().map_or(Field::Absent, Field::Str)
        }
        [
            text(&self.name),
            text(&self.generate_name),
            match &self.annotations {
                None => Field::Absent,
                Some([mode, legacy]) => Field::Strings([mode.as_deref(), legacy.as_deref()]),
            },
            if self.labels {
                Field::Strings([None, None])
            } else {
                Field::Absent
            },
        ]
    }

    fn echo(self) -> ObjectEcho {
        let mut annotations = BTreeMap::new();
        if let Some([mode, legacy]) = self.annotations {
            for (k, v) in [(MODE_ANNOTATION, mode), (LEGACY_MODE_ANNOTATION, legacy)] {
                if let Some(v) = v {
                    annotations.insert(k.to_string(), v);
                }
            }
        }
        ObjectEcho {
            name: self.name,
            generate_name: self.generate_name,
            annotations,
        }
    }
}

/// Reads [`ScanMetadata`], noting in the [`Unread`] given where `managedFields` and
/// [`LAST_APPLIED`] lie.
struct MetadataSeed<'e>(Option<&'e mut Unread>);

impl<'de> DeserializeSeed<'de> for MetadataSeed<'_> {
    type Value = ScanMetadata;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<ScanMetadata, D::Error> {
        struct V<'e>(Option<&'e mut Unread>);
        impl<'de> Visitor<'de> for V<'_> {
            type Value = ScanMetadata;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("metadata")
            }

            fn visit_map<A: MapAccess<'de>>(
                mut self,
                mut map: A,
            ) -> Result<ScanMetadata, A::Error> {
                const FIELDS: &[&str] = &[
                    "name",
                    "generateName",
                    "annotations",
                    "labels",
                    "managedFields",
                ];
                let mut m = ScanMetadata::default();
                let mut seen = 0;
                while let Some(field) = map.next_key_seed(Name(FIELDS))? {
                    let Some(field) = field else {
                        map.next_value::<Checked>()?;
                        continue;
                    };
                    once(&mut seen, field)?;
                    match field {
                        0 => m.name = Some(map.next_value()?),
                        1 => m.generate_name = Some(map.next_value()?),
                        2 => {
                            let seed = ScanStrings::<true>(self.0.as_deref_mut());
                            m.annotations = Some(map.next_value_seed(seed)?);
                        }
                        3 => {
                            map.next_value_seed(ScanStrings::<false>(None))?;
                            m.labels = true;
                        }
                        _ => match self.0.as_deref_mut() {
                            // Skipped when decoding would parse it without error.
                            Some(unread) => {
                                let raw: &'de RawValue = map.next_value()?;
                                if !plain(raw.get().as_bytes()) {
                                    return Err(unplain());
                                }
                                unread.note(raw);
                            }
                            None => {
                                map.next_value::<Checked>()?;
                            }
                        },
                    }
                }
                Ok(m)
            }
        }
        d.deserialize_map(V(self.0))
    }
}

/// A map of strings (the annotations when `MODES`: their mode annotations kept, a
/// [`LAST_APPLIED`] skipped when [`no_surrogate`], and noted in the [`Unread`] given), read
/// as its mode annotations.
struct ScanStrings<'e, const MODES: bool>(Option<&'e mut Unread>);

impl<'de, const MODES: bool> DeserializeSeed<'de> for ScanStrings<'_, MODES> {
    type Value = [Option<String>; 2];

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, const MODES: bool> Visitor<'de> for ScanStrings<'_, MODES> {
    type Value = [Option<String>; 2];

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a map of strings")
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<Self::Value, A::Error> {
        const NAMES: &[&str] = &[MODE_ANNOTATION, LEGACY_MODE_ANNOTATION, LAST_APPLIED];
        let mut modes = [None, None];
        let mut seen = 0;
        let names: &'static [&'static str] = if MODES { NAMES } else { &[] };
        while let Some(name) = map.next_key_seed(Name(names))? {
            match name {
                Some(i @ (0 | 1)) => {
                    once(&mut seen, i)?;
                    modes[i] = Some(map.next_value()?);
                }
                Some(_) => {
                    let raw: &'de RawValue = map.next_value()?;
                    let text = raw.get().as_bytes();
                    if text.first() != Some(&b'"') || !no_surrogate(text) {
                        return Err(unplain());
                    }
                    if let Some(unread) = self.0.as_deref_mut() {
                        unread.note(raw);
                    }
                }
                None => {
                    map.next_value::<StrOnly>()?;
                }
            }
        }
        Ok(modes)
    }
}

/// A string, checked and not kept.
struct StrOnly;

impl<'de> Deserialize<'de> for StrOnly {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = StrOnly;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }

            fn visit_str<E: de::Error>(self, _: &str) -> Result<StrOnly, E> {
                Ok(StrOnly)
            }
        }
        d.deserialize_str(V)
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
            // In a string, what looks like an exponent or a surrogate is text.
            (
                r#"["1e5 and 1E5",{"2e":"\\uD800 \"\\\uD7FF"}]"#.into(),
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
            (format!("\"{}\"", "9".repeat(400)), true),
            (deep(SHALLOW), true),
            (deep(SHALLOW + 1), false),
            (format!("\"{}\"", deep(SHALLOW + 1)), true),
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
                        .map(|(i, x)| format!("\"k{i}\":{x}"))
                        .collect();
                    format!("{{{}}}", members.join(","))
                }),
            ]
        })
    }

    proptest::proptest! {
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
    }
}
