//! The scan: a review read the way the API server sends it in one streaming pass that builds
//! no tree, for its echo and the verdict cache's key before it waits for a worker, and the
//! places of the text that decoding would only skip.

use std::ops::Range;

use k8s_openapi::api::authentication::v1::UserInfo;
use kube_core::admission::Operation;
use kube_core::gvk::GroupVersionKind;
use std::collections::BTreeMap;

use super::walk::{SHALLOW, Walk};
use super::{
    Echo, KIND, LAST_APPLIED, MAX_DEPTH, ObjectEcho, Sizes, VALUE_BYTES, answered_version,
    is_composition, is_json,
};
use crate::document::JsonShape;
use crate::model::{LEGACY_MODE_ANNOTATION, MODE_ANNOTATION};
use crate::server::verdicts::{self, Field, Streamed};

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
    /// the scan as decoding would, and cut from the text decoding reads ([`cut_unread`]).
    pub unread: Vec<Range<usize>>,
    /// The size of each object and array of a Composition's object, as decoding reads it
    /// (without `managedFields`), in the order they open (the walk's record of them): so that decoding
    /// builds each at its size instead of growing it; the first `walk::MAX_SIZES` at most. Empty
    /// for another object.
    pub sizes: Sizes,
}

/// Reads a review the way the API server sends it without building a tree, in one walk of
/// its text: its echo (as [`salvage`](super::salvage) reads it) and the verdict cache's key,
/// so that an answer cached before can be given before the review waits for a worker, and a
/// body read once where it used to be read three times (salvage, the shape, the key's walk of
/// the tree).
///
/// `None` unless [`decode`](super::decode) would read the body: JSON, within `max_tree_bytes` and the
/// nesting limit, an AdmissionReview of a version this webhook answers, with a request of the
/// right types; and unless the body is plain: the fields in the API server's order
/// (`apiVersion` and `kind` before `request`; `uid`, `kind` and `operation` before `object`),
/// no field repeated, the object a map with `metadata` whose name and generateName are
/// strings and whose annotations and labels are maps of strings, every key without an escape,
/// every value [`plain`](super::plain). Any other body goes the long way (salvage, decode).
pub fn scan(content_type: Option<&str>, body: &[u8], max_tree_bytes: usize) -> Option<Scanned> {
    // Only text is plain: a body of invalid UTF-8 goes the long way, which says where.
    scan_text(
        content_type,
        std::str::from_utf8(body).ok()?,
        max_tree_bytes,
    )
}

/// [`scan`] of a body whose UTF-8 is checked already: the handler checks it once, for the
/// scan and for decoding the text cut from it ([`cut_unread`], [`decode_with_shape`](super::decode_with_shape)).
pub fn scan_text(content_type: Option<&str>, text: &str, max_tree_bytes: usize) -> Option<Scanned> {
    if content_type.is_some_and(|ct| !is_json(ct)) {
        return None;
    }
    let body = text.as_bytes();
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
    let mut walk = Walk::new(text);
    review(&mut walk, &mut echo, &mut key, &mut unread)?;
    let sizes = Sizes(walk.take_sizes());
    walk.end()?;
    Some(Scanned {
        echo,
        key,
        shape: Some(shape),
        unread: unread.ranges,
        sizes,
    })
}

/// The text decoding reads of a body the scan read ([`Scanned::unread`]): `text` with each
/// string, array or object at `unread` (ranges of `text` in order, each a value's text) cut
/// to the empty string `""`; other values are left as they are, as is a range out of order.
/// Decoding the result gives what decoding `text` gives, without reading that text again: a
/// value decoding only skips may be any value, and these were checked by the scan as
/// decoding would check them. (Blanked with spaces instead, each would still be searched
/// for its closing quote.) Made for a review that misses the verdict cache, not by the scan.
pub fn cut_unread(text: &str, unread: &[Range<usize>]) -> String {
    // The text before each range cut.
    let mut at = 0;
    let befores: Vec<&str> = unread
        .iter()
        .filter_map(|range| {
            // Out of order, the text before is `None`.
            let before = text.get(at..range.start)?;
            let value = text.get(range.clone())?;
            matches!(value.as_bytes().first(), Some(b'"' | b'[' | b'{')).then(|| {
                at = range.end;
                before
            })
        })
        .collect();
    let rest = text.get(at..).unwrap_or_default();
    let size = befores.iter().map(|b| b.len() + 2).sum::<usize>() + rest.len();
    let mut out = String::with_capacity(size);
    for before in befores {
        out.push_str(before);
        out.push_str("\"\"");
    }
    out.push_str(rest);
    out
}

/// Where the text decoding only skips lies, as a scan finds it.
struct Unread {
    /// The address of the body's first byte (raw values borrow from the body).
    base: usize,
    ranges: Vec<Range<usize>>,
}

impl Unread {
    fn note(&mut self, raw: &str) {
        // A value's text borrows from the body it was read from.
        if let Some(start) = raw.as_ptr().addr().checked_sub(self.base) {
            self.ranges.push(start..start + raw.len());
        }
    }
}

/// The deepest a body the scan reads may nest: a few levels of envelope and metadata, and
/// 128 levels below any value (a bound, with room to spare).
pub const SCANNED_DEPTH: usize = 128 + SHALLOW;

const _: () = assert!(
    SCANNED_DEPTH <= MAX_DEPTH,
    "a scanned body is never too deep"
);

/// Marks a field seen; a second time is no plain review.
fn once(seen: &mut u32, field: usize) -> Option<()> {
    let bit = 1 << field;
    if *seen & bit != 0 {
        return None;
    }
    *seen |= bit;
    Some(())
}

/// Which of `fields` the member `name` is, marked seen (a second time is no plain review);
/// `None` inside when it is none of them, its value skipped.
fn field(
    walk: &mut Walk<'_>,
    name: &str,
    fields: &[&str],
    seen: &mut u32,
) -> Option<Option<usize>> {
    let Some(field) = fields.iter().position(|f| *f == name) else {
        walk.value()?;
        return Some(None);
    };
    once(seen, field)?;
    Some(Some(field))
}

/// The review: its apiVersion and kind, then its request.
fn review(
    walk: &mut Walk<'_>,
    echo: &mut Echo,
    key: &mut Option<verdicts::Key>,
    unread: &mut Unread,
) -> Option<()> {
    const FIELDS: &[&str] = &["apiVersion", "kind", "request"];
    let mut seen = 0;
    walk.object(|walk, name| {
        match field(walk, name, FIELDS, &mut seen)? {
            Some(0) => echo.api_version = Some(answered_version(&walk.string()?)?),
            Some(1) => (walk.string()? == KIND).then_some(())?,
            Some(_) => {
                if seen != 0b111 {
                    return None;
                }
                request(walk, echo, key, unread)?;
            }
            None => {}
        }
        Some(())
    })?;
    (seen == 0b111).then_some(())
}

/// The request, read into its review's echo, key and unread places.
fn request(
    walk: &mut Walk<'_>,
    echo: &mut Echo,
    key: &mut Option<verdicts::Key>,
    unread: &mut Unread,
) -> Option<()> {
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
    const OBJECT: usize = 5;
    let mut seen = 0;
    let mut cacheable = false;
    walk.object(|walk, name| {
        let Some(field) = field(walk, name, FIELDS, &mut seen)? else {
            return Some(());
        };
        match field {
            0 => echo.uid = Some(walk.string()?.into_owned()),
            1 => {
                let kind: GroupVersionKind = walk.read()?;
                echo.composition = Some(is_composition(&kind.group, &kind.kind));
            }
            2 => {
                walk.string()?;
            }
            3 => {
                let operation: Operation = walk.read()?;
                echo.operation = Some(crate::server::admission::operation_name(&operation));
                cacheable = matches!(operation, Operation::Create | Operation::Update);
            }
            4 => {
                walk.read::<UserInfo>()?;
            }
            OBJECT => {
                if seen & BEFORE_OBJECT != BEFORE_OBJECT {
                    return None;
                }
                let composition = echo.composition == Some(true);
                // Decoding skips these only in a Composition (read slim), and builds its
                // containers at the sizes noted.
                walk.record(composition);
                let (object, k) = object(
                    walk,
                    cacheable && composition,
                    composition.then_some(&mut *unread),
                )?;
                walk.record(false);
                echo.object = Some(object);
                *key = k;
            }
            6 => unread.note(walk.value()?),
            _ => {
                walk.read::<bool>()?;
            }
        }
        Some(())
    })?;
    let needed = BEFORE_OBJECT | 1 << OBJECT;
    (seen & needed == needed).then_some(())
}

/// The object: its metadata read, everything hashed for the key when `keyed`, noting in the
/// [`Unread`] given where what decoding skips lies.
fn object(
    walk: &mut Walk<'_>,
    keyed: bool,
    mut unread: Option<&mut Unread>,
) -> Option<(ObjectEcho, Option<verdicts::Key>)> {
    let mut hash = keyed.then(Streamed::start);
    let mut echo = None;
    walk.object(|walk, name| {
        if let Some(h) = &mut hash {
            h.member(name);
        }
        if name == "metadata" {
            if echo.is_some() {
                return None;
            }
            let metadata = metadata(walk, unread.as_deref_mut())?;
            if let Some(h) = &mut hash {
                h.metadata(metadata.fields());
            }
            echo = Some(metadata.echo());
        } else {
            // The member's text: the same text is the same value (another text of the same
            // value only misses).
            let text = walk.value()?;
            if let Some(h) = &mut hash {
                h.text(text);
            }
        }
        Some(())
    })?;
    Some((echo?, hash.map(Streamed::finish)))
}

/// What the key and the echo read of `metadata`; the rest is checked, `managedFields`
/// skipped.
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
fn metadata(walk: &mut Walk<'_>, mut unread: Option<&mut Unread>) -> Option<ScanMetadata> {
    const FIELDS: &[&str] = &[
        "name",
        "generateName",
        "annotations",
        "labels",
        "managedFields",
    ];
    let mut m = ScanMetadata::default();
    let mut seen = 0;
    walk.object(|walk, name| {
        let Some(field) = field(walk, name, FIELDS, &mut seen)? else {
            return Some(());
        };
        match field {
            0 => m.name = Some(walk.string()?.into_owned()),
            1 => m.generate_name = Some(walk.string()?.into_owned()),
            2 => m.annotations = Some(strings(walk, true, unread.as_deref_mut())?),
            3 => {
                strings(walk, false, None)?;
                m.labels = true;
            }
            _ => {
                // Not read by decoding: no sizes.
                let recording = walk.record(false);
                let text = walk.value()?;
                walk.record(recording);
                if let Some(unread) = unread.as_deref_mut() {
                    unread.note(text);
                }
            }
        }
        Some(())
    })?;
    Some(m)
}

/// A map of strings (the annotations when `modes`: their mode annotations kept, and a
/// [`LAST_APPLIED`] noted in the [`Unread`] given), read as its mode annotations.
fn strings(
    walk: &mut Walk<'_>,
    modes: bool,
    mut unread: Option<&mut Unread>,
) -> Option<[Option<String>; 2]> {
    let mut found = [None, None];
    let mut seen = 0;
    walk.object(|walk, name| {
        let mode = [MODE_ANNOTATION, LEGACY_MODE_ANNOTATION]
            .iter()
            .position(|m| modes && *m == name);
        if let Some(i) = mode {
            once(&mut seen, i)?;
            found[i] = Some(walk.string()?.into_owned());
            return Some(());
        }
        let text = walk.value()?;
        if !text.starts_with('"') {
            return None;
        }
        if modes
            && name == LAST_APPLIED
            && let Some(unread) = unread.as_deref_mut()
        {
            unread.note(text);
        }
        Some(())
    })?;
    Some(found)
}
