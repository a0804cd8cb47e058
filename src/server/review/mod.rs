//! The AdmissionReview envelope (`admission.k8s.io/v1` and `v1beta1`): reading a review from
//! the bytes the API server sent and writing the answer in the version it was sent in.
//!
//! The API server accepts nothing but HTTP 200 with an AdmissionReview that echoes
//! `request.uid`; anything else is a failed call, which its failure policy turns into a
//! rejection nobody can explain. So a review that cannot be read is still answered: the
//! uid is salvaged from whatever part of the body parses, and the answer is a denial that
//! says what was wrong.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::authentication::v1::UserInfo;
use kube_core::admission::{AdmissionResponse, Operation};
use kube_core::gvk::GroupVersionKind;
use kube_core::response::StatusSummary;
use kube_core::{Status, TypeMeta};
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::document::JsonShape;
use crate::mode::{self, Mode};
use crate::model::APIEXTENSIONS_GROUP;

mod salvage;
mod scan;
mod walk;

pub use salvage::salvage;
pub use scan::{SCANNED_DEPTH, Scanned, cut_unread, scan, scan_text};
pub use walk::plain;

/// `admission.k8s.io/v1`.
pub const V1: &str = "admission.k8s.io/v1";
/// `admission.k8s.io/v1beta1` (deprecated since Kubernetes 1.16, still sent when listed).
pub const V1BETA1: &str = "admission.k8s.io/v1beta1";
/// The kind of the envelope.
pub const KIND: &str = "AdmissionReview";

/// The envelope's `apiVersion`, when it is one this webhook answers ([`V1`], [`V1BETA1`]).
pub fn answered_version(api_version: &str) -> Option<&'static str> {
    [V1, V1BETA1].into_iter().find(|v| *v == api_version)
}

/// Whether a request's group and kind are a Composition's (the only kind validated; v1 and
/// v2 Compositions share them).
pub fn is_composition(group: &str, kind: &str) -> bool {
    group == APIEXTENSIONS_GROUP && kind == "Composition"
}

/// The part of an AdmissionReview's request the webhook reads.
///
/// kube-core's `AdmissionRequest` reads objects into `DynamicObject`s (a typed `ObjectMeta`
/// and a buffered copy of the rest) and reads `oldObject` in full; the validator wants plain
/// JSON and nothing of the old object. Reading `object` straight into JSON and only checking
/// the syntax of `oldObject` reads a 25 KiB review in 110 µs instead of 250 µs
/// (`benches/serve.rs`), and skips most of an UPDATE's second object. Field names and types
/// are those of `admission.k8s.io/v1` (v1beta1 has the same).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Request {
    /// Identifies this call; the answer must echo it.
    pub uid: String,
    /// The kind of the object (after conversion to the version the webhook registered).
    #[serde(deserialize_with = "kind")]
    pub kind: GroupVersionKind,
    /// The object's name (empty on a create that asks for a generated name).
    #[serde(default)]
    pub name: String,
    /// The operation.
    pub operation: Operation,
    /// Who asked.
    #[serde(default)]
    pub user_info: UserInfo,
    /// The object being created or updated (absent on DELETE). A Composition's is read
    /// without what validation never reads ([`slim`]).
    #[serde(default, deserialize_with = "object")]
    pub object: Option<Map<String, Value>>,
    /// The object before an UPDATE or DELETE: syntax-checked, not kept.
    #[serde(default)]
    pub old_object: Option<IgnoredAny>,
    /// Whether this is a dry run.
    #[serde(default)]
    pub dry_run: bool,
}

/// The envelope as sent: TypeMeta and the request.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Review {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    request: Option<Request>,
}

/// `kubectl apply`'s copy of the whole object, as a string annotation.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

std::thread_local! {
    /// Whether the review being decoded on this thread is of a Composition (its `kind` is
    /// read before its `object`, as the API server sends them): only then is the object
    /// read slim.
    static SLIM: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Whether [`decode`] reads objects slim on this thread now (it does, then reads again in
    /// full a body that it could not read slim, for the exact error).
    static ALLOW_SLIM: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Reads `request.kind`, noting whether it is a Composition's.
fn kind<'de, D: de::Deserializer<'de>>(d: D) -> Result<GroupVersionKind, D::Error> {
    let kind = GroupVersionKind::deserialize(d)?;
    let slim = ALLOW_SLIM.with(std::cell::Cell::get) && is_composition(&kind.group, &kind.kind);
    SLIM.with(|s| s.set(slim));
    Ok(kind)
}

/// Reads `request.object`: in full, or for a Composition without what validation never reads
/// ([`slim`]), each of its objects and arrays built at the size the scan noted ([`Sizes`]).
fn object<'de, D: de::Deserializer<'de>>(d: D) -> Result<Option<Map<String, Value>>, D::Error> {
    // Read once: a later review's object is read slim only after its own kind.
    if !SLIM.with(|s| s.replace(false)) {
        return Option::<Map<String, Value>>::deserialize(d);
    }
    let mut hints = Hints {
        sizes: SIZES.with(std::cell::Cell::take),
        next: 0,
    };
    let object = d.deserialize_option(SlimObject(&mut hints));
    #[cfg(test)]
    TAKEN_IN_STEP.with(|t| t.set(hints.next == hints.sizes.len()));
    object
}

#[cfg(test)]
std::thread_local! {
    /// Whether the last object read slim on this thread took every size, in step.
    static TAKEN_IN_STEP: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// What the webhook reads of a Composition: all of it but `metadata.managedFields` and the
/// text of a string [`LAST_APPLIED`] annotation (an empty string in its place): half of a
/// `kubectl apply`'s review. Nothing reads them: the model keeps the name, the generateName,
/// the annotations and the labels of `metadata`, validation reads only the mode annotations
/// of those, and the verdict cache's key neither (of the annotations, only whether they are
/// all strings). [`decode`] skips their text unparsed when it holds nothing a tree would
/// refuse ([`plain`]: no escaped surrogate, no number that may overflow; UTF-8 is checked),
/// and otherwise reads the body again in full, so a body is refused just as it would be.
/// This is the same on a tree.
pub fn slim(object: &mut Map<String, Value>) {
    if let Some(Value::Object(metadata)) = object.get_mut("metadata") {
        metadata.shift_remove("managedFields");
        if let Some(Value::Object(annotations)) = metadata.get_mut("annotations")
            && let Some(Value::String(text)) = annotations.get_mut(LAST_APPLIED)
        {
            *text = String::new();
        }
    }
}

/// The size of each object and array of a Composition's object, in the order they open, as
/// the scan notes them ([`Scanned::sizes`]), for decoding to build each at its size: a map
/// grown from empty allocates its table and its entries again at four, eight, sixteen
/// members (about 800 of a review's 3,700 allocations, each a copy of what it held).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sizes(Vec<u32>);

/// [`Sizes`] as decoding takes them, one per container it opens.
///
/// Sizes only hint: decoding reads what the text holds whatever they say. The first that is
/// not of the kind of container being opened (a map, an array) ends the hints. Each size
/// counts values of the same text, so even hints out of step reserve no more than the tree
/// budget allows for the values the body holds.
struct Hints {
    sizes: Vec<u32>,
    next: usize,
}

impl Hints {
    /// The size of the next container, an array or a map; 0 when not known.
    fn take(&mut self, array: bool) -> usize {
        let Some(&size) = self.sizes.get(self.next) else {
            return 0;
        };
        if (size & walk::ARRAY != 0) != array {
            // Out of step: none taken from here on.
            self.next = usize::MAX;
            return 0;
        }
        self.next += 1;
        (size & !walk::ARRAY) as usize
    }
}

/// The object (or null), read slim.
struct SlimObject<'h>(&'h mut Hints);

impl<'de> Visitor<'de> for SlimObject<'_> {
    type Value = Option<Map<String, Value>>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a map")
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        let tree = Tree {
            level: Some(Level::Object),
            hints: self.0,
        };
        d.deserialize_map(tree).map(|v| match v {
            Value::Object(map) => Some(map),
            _ => None,
        })
    }
}

/// Where in the object a map being read slim is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    /// The object.
    Object,
    /// `metadata`.
    Metadata,
    /// `metadata.annotations`.
    Annotations,
}

/// A value of the object, as a `Value` would read it (the same values, the same errors), its
/// containers built at their hinted sizes; a map at a `level` read slim.
struct Tree<'h> {
    level: Option<Level>,
    hints: &'h mut Hints,
}

impl Tree<'_> {
    /// A member's value, at `level`.
    fn at(&mut self, level: Option<Level>) -> Tree<'_> {
        Tree {
            level,
            hints: self.hints,
        }
    }
}

impl<'de> DeserializeSeed<'de> for Tree<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Tree<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }

    fn visit_seq<A: de::SeqAccess<'de>>(mut self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::with_capacity(self.hints.take(true));
        while let Some(value) = seq.next_element_seed(self.at(None))? {
            out.push(value);
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::with_capacity(self.hints.take(false));
        while let Some(key) = map.next_key::<String>()? {
            let value = match (self.level, key.as_str()) {
                (Some(Level::Object), "metadata") => {
                    map.next_value_seed(self.at(Some(Level::Metadata)))?
                }
                (Some(Level::Metadata), "managedFields") => {
                    map.next_value::<Checked>()?;
                    continue;
                }
                (Some(Level::Metadata), "annotations") => {
                    map.next_value_seed(self.at(Some(Level::Annotations)))?
                }
                (Some(Level::Annotations), LAST_APPLIED) => {
                    let raw: &'de RawValue = map.next_value()?;
                    let raw = raw.get().as_bytes();
                    // A string (the JSON text of the object); anything else is read in full.
                    if raw.first() != Some(&b'"') || !no_surrogate(raw) {
                        return Err(not_plain());
                    }
                    Value::String(String::new())
                }
                _ => map.next_value_seed(self.at(None))?,
            };
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

/// Any JSON value, read as a `Value` would be (the same errors) without keeping it.
pub struct Checked;

impl<'de> Deserialize<'de> for Checked {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(CheckedVisitor)
    }
}

struct CheckedVisitor;

impl<'de> Visitor<'de> for CheckedVisitor {
    type Value = Checked;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_none<E: de::Error>(self) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Checked, D::Error> {
        Checked::deserialize(d)
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Checked, A::Error> {
        while seq.next_element::<Checked>()?.is_some() {}
        Ok(Checked)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Checked, A::Error> {
        while map.next_key::<Checked>()?.is_some() {
            map.next_value::<Checked>()?;
        }
        Ok(Checked)
    }
}

/// The error that sends [`decode`] back to read a body in full.
fn not_plain<E: de::Error>() -> E {
    NOT_PLAIN.with(|n| n.set(true));
    E::custom("not plain")
}

std::thread_local! {
    /// Set when a slim read met text it does not skip unparsed.
    static NOT_PLAIN: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// The sizes of the containers of the object the read on this thread reads slim.
    static SIZES: std::cell::Cell<Vec<u32>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Whether `raw` (JSON text that serde_json's skipping accepted, its UTF-8 checked) holds no
/// escape that may be a surrogate (`\uD800`-`\uDFFF`, which a parse refuses unpaired). The
/// text of a string may look like one: then it is parsed, to be sure.
pub fn no_surrogate(raw: &[u8]) -> bool {
    memchr::memmem::find_iter(raw, br"\u").all(|i| !may_be_surrogate(&raw[i..]))
}

/// Whether the escape at the start of `escape` (its backslash first) may be half of a
/// surrogate pair, `\uD800` to `\uDFFF`: a parse decides.
fn may_be_surrogate(escape: &[u8]) -> bool {
    escape.get(1) == Some(&b'u')
        && matches!(escape.get(2), Some(b'd' | b'D'))
        && !matches!(escape.get(3), Some(b'0'..=b'7'))
}

/// Keys are borrowed from the body unless they hold escapes.
type Key<'de> = std::borrow::Cow<'de, str>;

/// Why a review could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// No body at all.
    #[error("the request body is empty; expected an AdmissionReview")]
    Empty,
    /// More bytes than the limit.
    #[error(
        "the request body is larger than the limit of {limit} bytes (the API server sends at most 3 MiB per object)"
    )]
    TooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// The body did not arrive in full.
    #[error("the request body could not be read: {0}")]
    Body(String),
    /// A media type other than JSON.
    #[error(
        "Content-Type {0:?} is not supported: send an AdmissionReview as application/json, as the API server does"
    )]
    ContentType(String),
    /// Not JSON, or not an AdmissionReview.
    #[error("the request body is not a valid AdmissionReview: {0}")]
    Decode(#[from] serde_json::Error),
    /// An apiVersion other than v1 and v1beta1.
    #[error(
        "AdmissionReview apiVersion {0:?} is not supported: this webhook answers admission.k8s.io/v1 and admission.k8s.io/v1beta1"
    )]
    ApiVersion(String),
    /// A kind other than AdmissionReview.
    #[error("expected kind AdmissionReview, got {0:?}")]
    Kind(String),
    /// An envelope without `request`.
    #[error("the AdmissionReview has no request")]
    NoRequest,
    /// CREATE or UPDATE without the object.
    #[error("the AdmissionReview request ({0}) has no object")]
    NoObject(&'static str),
    /// No memory left for the body before the deadline.
    #[error(
        "the webhook is busy: no memory for a {bytes}-byte body before the deadline; try again"
    )]
    Busy {
        /// The body's size.
        bytes: usize,
    },
    /// Validation failed (a bug).
    #[error("internal error while validating: {0}")]
    Internal(String),
    /// The object's JSON tree would take more memory than a review may hold.
    #[error(
        "the object holds about {values} values, more than fit in the memory budget of one review"
    )]
    OverBudget {
        /// How many values the body holds (at most).
        values: usize,
    },
    /// Nested deeper than the API server allows.
    #[error(
        "the request body nests more than {MAX_DEPTH} levels deep: the API server accepts objects of at most 10000 levels, 10002 in an AdmissionReview"
    )]
    TooDeep,
}

/// The deepest nesting of a review: the API server decodes objects up to 10,000 levels
/// (Go's `encoding/json` limit, which sigs.k8s.io/json keeps), and the review puts the
/// object two levels down (`request.object`).
pub const MAX_DEPTH: usize = crate::go::json::MAX_NESTING_DEPTH + 2;

/// What one JSON value costs once read (the value, and an object member's key and index
/// entry), for the memory a body's tree will take.
pub const VALUE_BYTES: usize = 2 * size_of::<Value>() + 16;

/// What an answer must echo, salvaged from any body, even a truncated or malformed one; and
/// what a deadline or busy answer goes by (the Composition's mode and name), read before the
/// review waits for a worker.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Echo {
    /// The review's apiVersion, when it is one this webhook speaks.
    pub api_version: Option<&'static str>,
    /// `request.uid`.
    pub uid: Option<String>,
    /// `request.operation`, when it is one of the four Kubernetes sends (the API server
    /// sends it before the object).
    pub operation: Option<&'static str>,
    /// Whether `request.kind` is an `apiextensions.crossplane.io` Composition, once read.
    pub composition: Option<bool>,
    /// `request.object`'s metadata, once read in full.
    pub object: Option<ObjectEcho>,
}

/// The part of an object's metadata a deadline answer needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectEcho {
    /// `metadata.name`.
    pub name: Option<String>,
    /// `metadata.generateName`.
    pub generate_name: Option<String>,
    /// The mode annotations (only those).
    pub annotations: BTreeMap<String, String>,
}

impl Echo {
    /// The apiVersion to answer in: the one sent, or v1.
    pub fn answer_version(&self) -> &'static str {
        self.api_version.unwrap_or(V1)
    }

    /// The mode and the name of the Composition under review, as [`super::admission::decide`]
    /// reads them (an invalid mode annotation means strict); `None` until the object's
    /// metadata has been read, or when the object is not a Composition.
    pub fn composition(&self, default_mode: Mode) -> Option<(Mode, String)> {
        if self.composition == Some(false) {
            return None;
        }
        let object = self.object.as_ref()?;
        let mode = mode::mode_from_annotations(&object.annotations, default_mode)
            .map_or(Mode::Strict, |c| c.mode);
        let name =
            super::admission::display_name(object.name.as_deref(), object.generate_name.as_deref());
        Some((mode, name))
    }

    /// Whether everything salvage looks for is known.
    fn complete(&self) -> bool {
        self.api_version.is_some()
            && self.uid.is_some()
            && self.composition.is_some()
            && self.object.is_some()
    }
}

/// A body to decode: text (its UTF-8 checked already), or bytes that may be text.
#[derive(Debug, Clone, Copy)]
pub enum Body<'b> {
    /// Text.
    Text(&'b str),
    /// Bytes, checked as UTF-8 when decoded.
    Bytes(&'b [u8]),
}

impl<'b> Body<'b> {
    fn bytes(self) -> &'b [u8] {
        match self {
            Body::Text(text) => text.as_bytes(),
            Body::Bytes(bytes) => bytes,
        }
    }
}

impl<'b> From<&'b str> for Body<'b> {
    fn from(text: &'b str) -> Self {
        Body::Text(text)
    }
}

impl<'b> From<&'b [u8]> for Body<'b> {
    fn from(bytes: &'b [u8]) -> Self {
        Body::Bytes(bytes)
    }
}

/// Reads a review. `content_type` is the request's `Content-Type` header, if any.
///
/// A body whose JSON tree would take more than `max_tree_bytes` is not decoded
/// ([`ReviewError::OverBudget`]): 3 MiB of JSON hold 1.5 million array elements, 100 MiB once
/// read.
pub fn decode(
    content_type: Option<&str>,
    body: &[u8],
    max_tree_bytes: usize,
) -> Result<Request, ReviewError> {
    decode_with_shape(content_type, body, max_tree_bytes, None, Sizes::default())
}

/// As [`decode`], with the body's shape when it is known already ([`Scanned::shape`]) and
/// the sizes of a Composition's containers ([`Scanned::sizes`]). A body given as text (the
/// handler's [`cut_unread`] of a body the scan read) is not checked as UTF-8 again.
pub fn decode_with_shape<'b>(
    content_type: Option<&str>,
    body: impl Into<Body<'b>>,
    max_tree_bytes: usize,
    shape: Option<JsonShape>,
    sizes: Sizes,
) -> Result<Request, ReviewError> {
    let input = body.into();
    let body = input.bytes();
    if let Some(ct) = content_type
        && !is_json(ct)
    {
        return Err(ReviewError::ContentType(ct.to_string()));
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ReviewError::Empty);
    }
    // serde_json stops at 128 levels by default; the API server allows 10,000. The scan
    // bounds the recursion below (on threads whose stacks have room for it), and the tree
    // it would build.
    let shape = shape.unwrap_or_else(|| crate::document::json_shape(body, MAX_DEPTH));
    if shape.depth > MAX_DEPTH {
        return Err(ReviewError::TooDeep);
    }
    let tree_bytes = shape.values.saturating_mul(VALUE_BYTES);
    if tree_bytes > max_tree_bytes {
        return Err(ReviewError::OverBudget {
            values: shape.values,
        });
    }
    // Slim first; a body whose skipped parts may hold what a tree refuses is read again in
    // full, for the same answer.
    let review = match read(input, true, sizes.0) {
        Err(_) if NOT_PLAIN.with(|n| n.replace(false)) => {
            read(input, false, Vec::new()).map(|mut review| {
                // Only a Composition's object (whose kind came first) is read slim.
                if let Some(request) = &mut review.request
                    && let Some(object) = &mut request.object
                {
                    slim(object);
                }
                review
            })
        }
        read => read,
    };
    let review: Review = match review {
        Ok(review) => review,
        Err(e) => {
            // Another version or kind need not have this request's shape: say so first.
            if let Ok(types) = serde_json::from_slice::<TypeMeta>(body) {
                check_types(&types.api_version, &types.kind)?;
            }
            return Err(e.into());
        }
    };
    check_types(&review.api_version, &review.kind)?;
    review.request.ok_or(ReviewError::NoRequest)
}

/// The request's object of a body [`decode_with_shape`] read once, read again: what
/// validation asks for when it needs the Composition as it was
/// (`Validator::validate_owned_rereading`).
pub fn object_again(
    content_type: Option<&str>,
    body: &[u8],
    max_tree_bytes: usize,
    shape: Option<JsonShape>,
) -> Option<Map<String, Value>> {
    decode_with_shape(content_type, body, max_tree_bytes, shape, Sizes::default())
        .ok()
        .and_then(|r| r.object)
}

/// Reads the envelope, a Composition's object slim (its containers at `sizes`) or not.
fn read(input: Body<'_>, slim: bool, sizes: Vec<u32>) -> Result<Review, serde_json::Error> {
    SLIM.with(|s| s.set(false));
    NOT_PLAIN.with(|n| n.set(false));
    ALLOW_SLIM.with(|a| a.set(slim));
    SIZES.with(|s| s.set(sizes));
    let text = match input {
        Body::Text(text) => Ok(text),
        Body::Bytes(body) => std::str::from_utf8(body).map_err(|_| body),
    };
    let review = match text {
        Ok(text) => read_from(serde_json::Deserializer::from_str(text)),
        Err(body) => read_from(serde_json::Deserializer::from_slice(body)),
    };
    ALLOW_SLIM.with(|a| a.set(false));
    SLIM.with(|s| s.set(false));
    SIZES.with(std::cell::Cell::take);
    review
}

/// Reads the envelope from `de`: text checked as UTF-8 once, whole ([`read`] gives a body
/// that is valid UTF-8 as text, so that serde_json does not check every string's again: about
/// 100 instructions a string), else bytes.
fn read_from<'de, R: serde_json::de::Read<'de>>(
    mut de: serde_json::Deserializer<R>,
) -> Result<Review, serde_json::Error> {
    de.disable_recursion_limit();
    Review::deserialize(&mut de).and_then(|r| de.end().map(|()| r))
}

/// The envelope must be an AdmissionReview of a version this webhook answers.
fn check_types(api_version: &str, kind: &str) -> Result<(), ReviewError> {
    if answered_version(api_version).is_none() {
        return Err(ReviewError::ApiVersion(api_version.to_string()));
    }
    if kind != KIND {
        return Err(ReviewError::Kind(kind.to_string()));
    }
    Ok(())
}

/// Whether a media type is JSON (`application/json`, with or without parameters).
fn is_json(content_type: &str) -> bool {
    content_type
        .split(';')
        .next()
        .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
}

/// An answer to one review: allowed or not, the Status of a denial, warnings.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// Whether the object is admitted.
    pub allowed: bool,
    /// The Status of a denial (code, reason, message, causes).
    pub status: Option<Status>,
    /// Warnings for the client (kubectl prints them as `Warning: ...`).
    pub warnings: Vec<String>,
}

impl Answer {
    /// Admitted, with warnings.
    pub fn allow(warnings: Vec<String>) -> Self {
        Answer {
            allowed: true,
            status: None,
            warnings,
        }
    }

    /// Denied with a Status.
    pub fn deny(status: Status, warnings: Vec<String>) -> Self {
        Answer {
            allowed: false,
            status: Some(status),
            warnings,
        }
    }

    /// A denial for a review that could not be read or validated: 400 `BadRequest`, 503
    /// `ServiceUnavailable` when busy, 500 `InternalError` for a bug.
    pub fn bad_request(error: &ReviewError) -> Self {
        let (reason, code) = match error {
            ReviewError::Busy { .. } => ("ServiceUnavailable", 503),
            ReviewError::Internal(_) => ("InternalError", 500),
            _ => ("BadRequest", 400),
        };
        Answer::deny(
            Status::failure(&error.to_string(), reason).with_code(code),
            Vec::new(),
        )
    }
}

/// Serializes the answer as an AdmissionReview in `api_version` echoing `uid`. A validating
/// answer never carries a patch.
pub fn encode(api_version: &str, uid: &str, answer: Answer) -> Vec<u8> {
    let mut response = AdmissionResponse::invalid("");
    response.uid = uid.to_string();
    response.allowed = answer.allowed;
    response.result = match answer.status {
        Some(mut s) => {
            s.status = Some(StatusSummary::Failure);
            s
        }
        None => Status::default(),
    };
    response.warnings = (!answer.warnings.is_empty()).then_some(answer.warnings);
    let mut review = response.into_review();
    review.types = TypeMeta {
        api_version: api_version.to_string(),
        kind: KIND.to_string(),
    };
    // Serializing plain structs of strings, numbers and maps cannot fail.
    serde_json::to_vec(&review).unwrap_or_else(|_| {
        br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"","allowed":false}}"#
            .to_vec()
    })
}

#[cfg(test)]
mod tests {
    use std::ops::Range;

    use super::*;
    use crate::model::{LEGACY_MODE_ANNOTATION, MODE_ANNOTATION};
    use crate::server::verdicts;
    use serde_json::{Value, json};

    const BODY: &str = r#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1beta1",
      "request":{"uid":"705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind":{"group":"apiextensions.crossplane.io","version":"v1","kind":"Composition"},
        "resource":{"group":"apiextensions.crossplane.io","version":"v1","resource":"compositions"},
        "name":"c","operation":"CREATE","userInfo":{"username":"admin"},
        "object":{"apiVersion":"apiextensions.crossplane.io/v1","kind":"Composition","metadata":{"name":"c"},"spec":{}},
        "oldObject":null,"dryRun":false}}"#;

    #[test]
    fn decodes_v1beta1_and_keeps_its_version() {
        let r = decode(
            Some("application/json; charset=utf-8"),
            BODY.as_bytes(),
            usize::MAX,
        )
        .unwrap();
        assert_eq!(r.uid, "705ab4f5-6393-11e8-b7cc-42010a800002");
        assert_eq!(r.object.unwrap()["metadata"]["name"], "c");
    }

    /// A Composition's review as the API server sends it for `kubectl apply`.
    fn applied(metadata: Value) -> Value {
        json!({"apiVersion": V1, "kind": "AdmissionReview", "request": {
            "uid": "u", "kind": {"group": APIEXTENSIONS_GROUP, "version": "v1", "kind": "Composition"},
            "operation": "CREATE",
            "object": {"apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
                       "metadata": metadata, "spec": {"resources": [{"name": "a", "base": {"x": 1.5}}]}},
            "oldObject": null}})
    }

    /// The object a full read keeps, slimmed on the tree.
    fn full_then_slim(body: &[u8]) -> Option<Map<String, Value>> {
        let review: Value = serde_json::from_slice(body).unwrap();
        let mut object = review["request"]["object"].as_object().cloned()?;
        slim(&mut object);
        Some(object)
    }

    #[test]
    fn reads_a_composition_without_managed_fields_and_last_applied() {
        let metadata = json!({"name": "c", "uid": "x",
            "annotations": {"a": "b", LAST_APPLIED: "{\"big\":\"\\u00e9\\\"\"}\n", MODE_ANNOTATION: "warn"},
            "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {".": {}}}, "n": -1e300}],
            "labels": {"l": "v"}});
        let body = applied(metadata).to_string();
        let object = decode(None, body.as_bytes(), usize::MAX)
            .unwrap()
            .object
            .unwrap();
        assert_eq!(Some(object.clone()), full_then_slim(body.as_bytes()));
        let metadata = &object["metadata"];
        assert_eq!(metadata.get("managedFields"), None);
        assert_eq!(metadata["annotations"][LAST_APPLIED], "");
        assert_eq!(metadata["annotations"][MODE_ANNOTATION], "warn");
        assert_eq!(metadata["uid"], "x");
        // Odd shapes are kept as they are: a last-applied that is no string, metadata that
        // is no map, duplicate keys (the last value at the first place, as a tree has them).
        for metadata in [
            json!({"annotations": {LAST_APPLIED: {"a": [1, null, true]}, "b": 2}}),
            json!({"annotations": [LAST_APPLIED]}),
            json!("metadata"),
            json!(null),
        ] {
            let body = applied(metadata).to_string();
            let object = decode(None, body.as_bytes(), usize::MAX).unwrap().object;
            assert_eq!(object, full_then_slim(body.as_bytes()));
        }
        let dup = applied(json!({})).to_string().replace(
            r#""metadata":{}"#,
            &format!(
                r#""metadata":{{"annotations":{{"{LAST_APPLIED}":"x","b":"c","{LAST_APPLIED}":7}},"managedFields":[],"managedFields":1}},"spec":1,"metadata":{{"name":"d","annotations":{{"{LAST_APPLIED}":[1],"{LAST_APPLIED}":"y"}}}}"#
            ),
        );
        let object = decode(None, dup.as_bytes(), usize::MAX).unwrap().object;
        let mut expected: Map<String, Value> = serde_json::from_value(json!({
            "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
            "metadata": {"name": "d", "annotations": {LAST_APPLIED: ""}},
            "spec": {"resources": [{"name": "a", "base": {"x": 1.5}}]}}))
        .unwrap();
        assert_eq!(object.as_ref(), Some(&expected));
        slim(&mut expected);
        assert_eq!(object, Some(expected));
        // Another kind's object is read in full.
        let body = applied(json!({"managedFields": [], "annotations": {LAST_APPLIED: "{}"}}))
            .to_string()
            .replace(
                r#""kind":"Composition"}"#,
                r#""kind":"CompositeResourceDefinition"}"#,
            );
        let object = decode(None, body.as_bytes(), usize::MAX)
            .unwrap()
            .object
            .unwrap();
        assert_eq!(object["metadata"]["managedFields"], json!([]));
        assert_eq!(object["metadata"]["annotations"][LAST_APPLIED], "{}");
    }

    #[test]
    fn text_like_a_number_in_a_composition_is_keyed() {
        let review = |spec: Value| {
            let mut review = applied(json!({"name": "c"}));
            review["request"]["object"]["spec"] = spec;
            review.to_string()
        };
        // A zone or a digest is text: the review is keyed for the verdict cache.
        let body = review(json!({"zone": "us-east-1e", "digest": "9e107d9d372bb682"}));
        let scanned = scan(None, body.as_bytes(), usize::MAX).expect("a plain review");
        assert!(scanned.key.is_some());
        // A number with an exponent may overflow: it is read the long way.
        let body = review(json!({"x": "X"})).replace(r#""X""#, "2.5E3");
        assert!(body.contains(r#""x":2.5E3"#), "{body}");
        assert!(scan(None, body.as_bytes(), usize::MAX).is_none());
        assert!(decode(None, body.as_bytes(), usize::MAX).is_ok());
    }

    #[test]
    fn decoding_the_cut_text_reads_what_the_body_reads() {
        let last_applied = "{\"big\":\"\\u00e9\\\"\"}\n";
        let metadata = json!({"name": "c", "uid": "x",
            "annotations": {"a": "b", LAST_APPLIED: last_applied, MODE_ANNOTATION: "warn"},
            "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {".": {}}}, "n": -1}],
            "labels": {"l": "v"}});
        let create = applied(metadata.clone());
        let mut update = create.clone();
        update["request"]["operation"] = json!("UPDATE");
        update["request"]["oldObject"] = create["request"]["object"].clone();
        let mut other = update.clone();
        other["request"]["kind"]["kind"] = json!("CompositeResourceDefinition");
        let mut v1beta1 = update.clone();
        v1beta1["apiVersion"] = json!(V1BETA1);
        let text = |v: &Value| v.to_string();
        let old = text(&create["request"]["object"]);
        let (applied_text, managed) =
            (text(&json!(last_applied)), text(&metadata["managedFields"]));
        let cases = [
            (
                create,
                vec![applied_text.clone(), managed.clone(), "null".into()],
            ),
            (
                update,
                vec![applied_text.clone(), managed.clone(), old.clone()],
            ),
            // Another kind's object is read in full: only its oldObject is skipped.
            (other, vec![old.clone()]),
            (v1beta1, vec![applied_text, managed.clone(), old]),
        ];
        for (review, expected) in cases {
            let body = review.to_string();
            let scanned = scan(None, body.as_bytes(), usize::MAX).expect("a plain review");
            let texts: Vec<&str> = scanned.unread.iter().map(|r| &body[r.clone()]).collect();
            assert_eq!(texts, expected);
            // Each string, array or object cut to `""` (a `null` oldObject is kept).
            let text = cut_unread(&body, &scanned.unread);
            let cut: usize = texts
                .iter()
                .filter(|t| **t != "null")
                .map(|t| t.len() - 2)
                .sum();
            assert_eq!(text.len(), body.len() - cut);
            assert_eq!(
                text.contains(r#""managedFields":[{"#),
                !texts.contains(&managed.as_str()),
                "{text}"
            );
            let sizes = scanned.sizes.clone();
            let read = decode_with_shape(
                None,
                text.as_str(),
                usize::MAX,
                scanned.shape,
                scanned.sizes,
            )
            .unwrap();
            // A Composition's containers at their sizes (`managedFields` a member of
            // `metadata`, none of its containers read), every size taken; none for another.
            if read.kind.kind == "Composition" {
                let mut object = review["request"]["object"].clone();
                object["metadata"]["managedFields"] = Value::Null;
                assert_eq!(sizes, Sizes(walk::sizes_of(&object)));
                assert!(TAKEN_IN_STEP.with(std::cell::Cell::get));
            } else {
                assert_eq!(sizes, Sizes::default());
            }
            let full = decode(None, body.as_bytes(), usize::MAX).unwrap();
            assert_eq!(format!("{read:?}"), format!("{full:?}"));
        }
        // What cutting writes.
        let original = r#"["x\"",{"a":1},[2],7,null,"",[],"é"]"#;
        let value: Vec<&RawValue> = serde_json::from_str(original).unwrap();
        let base = original.as_ptr().addr();
        let ranges: Vec<Range<usize>> = value
            .iter()
            .map(|raw| {
                let start = raw.get().as_ptr().addr() - base;
                start..start + raw.get().len()
            })
            .collect();
        assert_eq!(
            cut_unread(original, &ranges),
            r#"["","","",7,null,"","",""]"#
        );
        // None; a range out of order (before the end of the one cut before it) is left.
        assert_eq!(cut_unread(original, &[]), original);
        let mut backwards = ranges.clone();
        backwards.swap(0, 1);
        assert_eq!(
            cut_unread(original, &backwards),
            r#"["x\"","","",7,null,"","",""]"#
        );
        // A range that is not at a character's boundary, or past the end: left.
        assert_eq!(cut_unread(original, &[34..36, 30..99]), original);
    }

    #[test]
    fn sizes_hint_until_one_is_out_of_step() {
        let mut hints = Hints {
            sizes: vec![3, walk::ARRAY | 2, 0],
            next: 0,
        };
        assert_eq!(hints.take(false), 3);
        assert_eq!(hints.take(true), 2);
        // An array where the scan saw a map: no size from here on.
        assert_eq!(hints.take(true), 0);
        assert_eq!(hints.take(false), 0);
        assert_ne!(hints.next, hints.sizes.len());
    }

    proptest::proptest! {
        /// Whatever a change makes of a review, a body the scan reads is one decoding reads,
        /// as sent or with what it only skips cut ([`cut_unread`]), to the same request, and
        /// its echo is what salvage reads.
        #[test]
        fn a_changed_review_is_scanned_only_if_decoding_reads_it_the_same(
            changes in proptest::collection::vec((0usize..4000, 0usize..16), 1..4),
            update in proptest::bool::ANY,
        ) {
            const BYTES: &[u8] = b"\"\\{}[],: 0-.eu\x01";
            let metadata = json!({"name": "c", "uid": "x",
                "annotations": {"a": "b", LAST_APPLIED: "{\"big\":\"\\u00e9\\\"\"}\n", MODE_ANNOTATION: "warn"},
                "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {".": {}}}, "n": -1}],
                "labels": {"l": "v"}});
            let mut review = applied(metadata);
            if update {
                review["request"]["operation"] = json!("UPDATE");
                review["request"]["oldObject"] = review["request"]["object"].clone();
            }
            let mut body = review.to_string().into_bytes();
            for (at, byte) in changes {
                let at = at % body.len();
                match byte % 3 {
                    0 => body[at] = BYTES[byte % BYTES.len()],
                    1 => {
                        body.remove(at);
                    }
                    _ => body.insert(at, BYTES[byte % BYTES.len()]),
                }
            }
            let Some(scanned) = scan(None, &body, usize::MAX) else {
                return Ok(());
            };
            let text = String::from_utf8_lossy(&body).into_owned();
            let full = decode(None, &body, usize::MAX);
            proptest::prop_assert!(full.is_ok(), "{}: {:?}", text, full.err());
            let composition = scanned.echo.composition == Some(true);
            if !composition {
                proptest::prop_assert_eq!(&scanned.sizes, &Sizes::default(), "{}", text);
            }
            TAKEN_IN_STEP.with(|t| t.set(false));
            let cut = cut_unread(std::str::from_utf8(&body).unwrap(), &scanned.unread);
            let read = decode_with_shape(None, cut.as_str(), usize::MAX, scanned.shape, scanned.sizes);
            proptest::prop_assert_eq!(format!("{read:?}"), format!("{full:?}"), "{}", text);
            // A Composition's object (read slim) took the scan's sizes in step with its
            // containers.
            if composition {
                proptest::prop_assert!(TAKEN_IN_STEP.with(std::cell::Cell::get), "{}", text);
            }
            proptest::prop_assert_eq!(&scanned.echo, &salvage(&body), "{}", text);
        }
    }

    #[test]
    fn a_scanned_body_nests_no_deeper_than_its_bound() {
        // Arrays nested `n` deep wherever the scan reads, checks or skips a value.
        let places = [
            r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","x":N,"request":{"uid":"u","kind":{"group":"apiextensions.crossplane.io","version":"v1","kind":"Composition"},"operation":"CREATE","object":{"kind":"Composition","metadata":{"name":"c"},"spec":{}}}}"#,
            r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"apiextensions.crossplane.io","version":"v1","kind":"Composition"},"operation":"CREATE","options":N,"object":{"kind":"Composition","metadata":{"name":"c"},"spec":{}}}}"#,
            r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"apiextensions.crossplane.io","version":"v1","kind":"Composition"},"operation":"CREATE","object":{"kind":"Composition","metadata":{"name":"c","x":N,"managedFields":N},"spec":{}}}}"#,
            r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"apiextensions.crossplane.io","version":"v1","kind":"Composition"},"operation":"CREATE","object":{"kind":"Composition","metadata":{"name":"c"},"spec":{"a":N}}}}"#,
            r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"apiextensions.crossplane.io","version":"v1","kind":"Other"},"operation":"CREATE","object":{"kind":"Other","metadata":{"name":"c"},"spec":{"a":N}}}}"#,
        ];
        let mut scanned = 0;
        for place in places {
            for n in [1, 100, 120, 124, 125, 126, 127, 128, 129, 200, 300] {
                let body = place.replace('N', &format!("{}{}", "[".repeat(n), "]".repeat(n)));
                let Some(s) = scan(None, body.as_bytes(), usize::MAX) else {
                    continue;
                };
                scanned += 1;
                let depth = crate::document::json_shape(body.as_bytes(), MAX_DEPTH).depth;
                assert!(depth <= SCANNED_DEPTH, "{n} in {place}: {depth}");
                assert_eq!(s.shape.map(|s| s.depth), Some(SCANNED_DEPTH));
                assert!(
                    decode_with_shape(None, body.as_bytes(), usize::MAX, s.shape, s.sizes).is_ok()
                );
            }
        }
        assert!(scanned >= 25, "{scanned}");
    }

    #[test]
    fn scans_plain_reviews_as_salvage_and_the_key_read_them() {
        let scanned = |body: &str| scan(Some("application/json"), body.as_bytes(), usize::MAX);
        let same = |body: &str| {
            let s = scanned(body).unwrap_or_else(|| panic!("scanned: {body}"));
            assert_eq!(s.echo, salvage(body.as_bytes()), "{body}");
            let request = decode(None, body.as_bytes(), usize::MAX).unwrap();
            // Keyed when the decoded request is (by its text rather than its tree).
            assert_eq!(s.key.is_some(), verdicts::key(&request).is_some(), "{body}");
            if s.key.is_some() {
                assert_ne!(s.key, verdicts::key(&request));
            }
            assert_eq!(
                s.shape,
                Some(JsonShape {
                    depth: SCANNED_DEPTH,
                    values: body.len() + 1
                }),
                "small: bounded"
            );
            s
        };
        assert!(same(BODY).key.is_some(), "v1beta1 CREATE");
        let plain = [
            json!({"name": "c", "uid": "x", "managedFields": [{"manager": "k", "time": "2025-01-01T00:00:00Z"}],
                   "annotations": {"a": "b", LAST_APPLIED: "{\"big\":\"\\u00f1\\\"\"}\n", MODE_ANNOTATION: "warn"},
                   "labels": {"l": "v"}}),
            json!({"generateName": "g-", "annotations": {LEGACY_MODE_ANNOTATION: "strict"}}),
            json!({}),
        ];
        for metadata in plain {
            let body = applied(metadata).to_string();
            let s = same(&body);
            assert!(s.key.is_some());
            // UPDATE too; DELETE and other kinds are not keyed.
            let update = body.replace("\"CREATE\"", "\"UPDATE\"");
            assert_eq!(same(&update).key, s.key);
            assert_eq!(same(&body.replace("\"CREATE\"", "\"DELETE\"")).key, None);
            let other = body.replace(r#""kind":"Composition"}"#, r#""kind":"Other"}"#);
            assert_eq!(same(&other).key, None);
        }
        // What the key leaves out does not change it; what validation reads does.
        let key = |metadata: Value| same(&applied(metadata).to_string()).key;
        let base = key(json!({"name": "c", "annotations": {LAST_APPLIED: "1"}}));
        assert_eq!(
            base,
            key(
                json!({"name": "c", "uid": "u", "annotations": {LAST_APPLIED: "2"}, "managedFields": []})
            )
        );
        assert_ne!(
            base,
            key(json!({"name": "d", "annotations": {LAST_APPLIED: "1"}}))
        );
        assert_ne!(
            base,
            key(
                json!({"name": "c", "annotations": {LAST_APPLIED: "1", MODE_ANNOTATION: "strict"}})
            )
        );
        // Not plain: the long way.
        let odd = [
            applied(json!({"name": 5})).to_string(),
            applied(json!({"annotations": {"a": 1}})).to_string(),
            applied(json!({"labels": null})).to_string(),
            applied(json!({"annotations": {LAST_APPLIED: "SURROGATE"}}))
                .to_string()
                .replace("SURROGATE", r"\ud800"),
            applied(json!({"annotations": {LAST_APPLIED: 1}})).to_string(),
            applied(json!({"name": "c"}))
                .to_string()
                .replace(r#""x":1.5"#, r#""x":1e999"#),
            applied(json!(null)).to_string(),

            BODY.replace(r#""uid":"705ab4f5-6393-11e8-b7cc-42010a800002","#, "")
                .replace(r#""dryRun":false"#, r#""dryRun":false,"uid":"u""#),
            BODY.replace(r#""kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1beta1","#, "")
                .replace("\"oldObject\":null,\"dryRun\":false}", "\"oldObject\":null,\"dryRun\":false},\"kind\":\"AdmissionReview\",\"apiVersion\":\"admission.k8s.io/v1\""),
            BODY.replace("\"name\":\"c\"}", "\"name\":\"c\",\"name\":\"d\"}"),
            format!("{}x", BODY),
            BODY.replace("admission.k8s.io/v1beta1", "admission.k8s.io/v2"),
        ];
        for body in odd {
            assert!(scanned(&body).is_none(), "{body}");
        }
        // Skipped values nest without a limit (no recursion): deeper than serde_json's, the
        // long way (where decoding measures the depth).
        let nest = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        let body = applied(json!({"name": "c"})).to_string();
        for deep in [
            body.replace(r#""x":1.5"#, &format!(r#""x":{}"#, nest(200))),
            body.replace(
                r#""oldObject":null"#,
                &format!(r#""oldObject":{}"#, nest(20_000)),
            ),
            body.replace(r#""oldObject":null"#, &format!(r#""other":{}"#, nest(200))),
        ] {
            assert!(scanned(&deep).is_none());
        }
        assert!(scanned(&body.replace(r#""x":1.5"#, &format!(r#""x":{}"#, nest(100)))).is_some());
        assert!(scan(Some("text/plain"), BODY.as_bytes(), usize::MAX).is_none());
        assert!(scan(None, BODY.as_bytes(), 10).is_none());
        assert!(scan(None, BODY.as_bytes(), usize::MAX).is_some());
    }

    #[test]
    fn refuses_bad_json_in_what_it_does_not_keep_as_a_tree_would() {
        let tree_error = |body: &[u8]| {
            let mut de = serde_json::Deserializer::from_slice(body);
            de.disable_recursion_limit();
            let e = Value::deserialize(&mut de).unwrap_err();
            ReviewError::from(e).to_string()
        };
        let body = applied(json!({"name": "c",
            "annotations": {LAST_APPLIED: "LAST"},
            "managedFields": [{"a": "MANAGED", "n": 0}]}))
        .to_string();
        let bad: [(&str, &[u8]); 9] = [
            // Not UTF-8 in a string that is read (not only skipped): the body is read as
            // bytes, not as text.
            ("\"name\":\"c\"", b"\"name\":\"\xe2\x82\""),
            ("LAST", b"\\ud800"),
            ("LAST", b"\xff\xfe"),
            ("LAST", b"\\x"),
            ("MANAGED", b"\xc3"),
            ("MANAGED", b"\\udc00\\u0041"),
            ("\"n\":0", b"\"n\":1e999"),
            ("\"n\":0", b"\"n\":1e9"),
            ("LAST", b"10e5 \\ud7ff \\\\udead"),
        ];
        for (at, with) in bad {
            let mut bytes = body.as_bytes().to_vec();
            let i = body.find(at).unwrap();
            bytes.splice(i..i + at.len(), with.iter().copied());
            let decoded = decode(None, &bytes, usize::MAX);
            match serde_json::from_slice::<Value>(&bytes) {
                // Read in full after all: as a tree has it, slimmed.
                Ok(_) => assert_eq!(decoded.unwrap().object, full_then_slim(&bytes)),
                Err(_) => assert_eq!(decoded.unwrap_err().to_string(), tree_error(&bytes)),
            }
        }
    }

    #[test]
    fn salvages_uid_from_truncated_bodies() {
        for cut in [140, 200, BODY.len() - 3] {
            let echo = salvage(&BODY.as_bytes()[..cut]);
            assert_eq!(echo.api_version, Some(V1BETA1), "cut at {cut}");
            assert_eq!(
                echo.uid.as_deref(),
                Some("705ab4f5-6393-11e8-b7cc-42010a800002")
            );
        }
        assert_eq!(salvage(b"").uid, None);
        assert_eq!(salvage(b"[1,2]").uid, None);
        assert_eq!(salvage(br#"{"request":{"kind":{}}"#).uid, None);
        // The request before the apiVersion, or no apiVersion at all.
        let echo = salvage(br#"{"request":{"uid":"u1","x":"#);
        assert_eq!((echo.api_version, echo.uid.as_deref()), (None, Some("u1")));
        assert_eq!(echo.answer_version(), V1);
    }

    #[test]
    fn salvages_the_mode_and_name_without_decoding() {
        let review = |metadata: Value| {
            json!({"apiVersion": V1BETA1, "kind": "AdmissionReview", "request": {
                "uid": "u", "operation": "CREATE",
                "kind": {"group": "apiextensions.crossplane.io", "version": "v1", "kind": "Composition"},
                "object": {"apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
                           "metadata": metadata, "spec": {"resources": [1, 2, 3]}},
                "oldObject": null}})
            .to_string()
        };
        let salvaged = |body: &str| salvage(body.as_bytes()).composition(Mode::Loose);
        let strict = review(json!({"name": "c", "annotations": {
            "kubectl.kubernetes.io/last-applied-configuration": "{...}",
            MODE_ANNOTATION: "strict"}}));
        assert_eq!(salvaged(&strict), Some((Mode::Strict, "c".to_string())));
        let echo = salvage(strict.as_bytes());
        assert_eq!(
            (echo.api_version, echo.uid.as_deref(), echo.operation),
            (Some(V1BETA1), Some("u"), Some("CREATE"))
        );
        // The metrics label of a late answer: only the four operations Kubernetes sends.
        let odd = strict.replace("\"CREATE\"", "\"PATCH\"");
        assert_eq!(salvage(odd.as_bytes()).operation, None);
        // No annotation: the default; an invalid one: strict; the legacy one is read.
        assert_eq!(
            salvaged(&review(json!({"generateName": "g-"}))),
            Some((Mode::Loose, "g-*".to_string()))
        );
        assert_eq!(
            salvaged(&review(
                json!({"name": "c", "annotations": {MODE_ANNOTATION: "Strict"}})
            )),
            Some((Mode::Strict, "c".to_string()))
        );
        assert_eq!(
            salvaged(&review(
                json!({"name": "c", "annotations": {LEGACY_MODE_ANNOTATION: "strict"}})
            )),
            Some((Mode::Strict, "c".to_string()))
        );
        assert_eq!(
            salvaged(&review(
                json!({"name": "c", "annotations": {MODE_ANNOTATION: "warn", LEGACY_MODE_ANNOTATION: "strict"}})
            )),
            Some((Mode::Warn, "c".to_string()))
        );
        // Metadata cut short is not trusted; past it, the rest of the object need not arrive.
        let cut = strict.find("strict").unwrap();
        assert_eq!(salvaged(&strict[..cut]), None);
        assert_eq!(salvage(&strict.as_bytes()[..cut]).uid.as_deref(), Some("u"));
        let spec = strict.find("\"spec\"").unwrap();
        assert_eq!(
            salvaged(&strict[..spec + 3]),
            Some((Mode::Strict, "c".to_string()))
        );
        // Not a Composition, or no object (DELETE).
        let other = strict.replace(r#""kind":"Composition"}"#, r#""kind":"ConfigMap"}"#);
        assert_eq!(salvage(other.as_bytes()).composition, Some(false));
        assert_eq!(salvaged(&other), None);
        let delete = json!({"apiVersion": V1, "request": {"uid": "d", "object": null}}).to_string();
        let echo = salvage(delete.as_bytes());
        assert_eq!((echo.uid.as_deref(), echo.object), (Some("d"), None));
    }

    #[test]
    fn refuses_what_is_not_a_review() {
        let err = |ct: Option<&str>, b: &str| {
            decode(ct, b.as_bytes(), usize::MAX)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            err(Some("text/plain"), BODY),
            r#"Content-Type "text/plain" is not supported: send an AdmissionReview as application/json, as the API server does"#
        );
        assert_eq!(
            err(None, "  \n"),
            "the request body is empty; expected an AdmissionReview"
        );
        assert_eq!(
            err(None, "{\"kind\": "),
            "the request body is not a valid AdmissionReview: EOF while parsing a value at line 1 column 9"
        );
        assert_eq!(
            err(
                None,
                r#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1"}"#
            ),
            "the AdmissionReview has no request"
        );
        assert_eq!(
            err(
                None,
                &BODY.replace("admission.k8s.io/v1beta1", "admission.k8s.io/v2")
            ),
            r#"AdmissionReview apiVersion "admission.k8s.io/v2" is not supported: this webhook answers admission.k8s.io/v1 and admission.k8s.io/v1beta1"#
        );
        // The envelope is judged before the request, whose shape another version may change.
        assert_eq!(
            err(
                None,
                r#"{"apiVersion":"admission.k8s.io/v2","kind":"AdmissionReview","request":{"uid":"u"}}"#
            ),
            r#"AdmissionReview apiVersion "admission.k8s.io/v2" is not supported: this webhook answers admission.k8s.io/v1 and admission.k8s.io/v1beta1"#
        );
        assert_eq!(
            err(
                None,
                r#"{"apiVersion":"admission.k8s.io/v1","kind":"Pod","request":{"uid":"u"}}"#
            ),
            r#"expected kind AdmissionReview, got "Pod""#
        );
        let deep = format!(
            r#"{{"kind":"AdmissionReview","request":{{"uid":"u","object":{{"spec":{}"#,
            "[".repeat(100_000)
        );
        assert_eq!(
            err(None, &deep),
            "the request body nests more than 10002 levels deep: the API server accepts objects of at most 10000 levels, 10002 in an AdmissionReview"
        );
        // As deep as the API server allows: read.
        let deep = format!(
            r#"{{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{{"uid":"u","kind":{{"group":"","version":"v1","kind":"C"}},"operation":"CREATE","object":{{"spec":{}{}}}}}}}"#,
            "[".repeat(9_999),
            "]".repeat(9_999)
        );
        let request = std::thread::Builder::new()
            .stack_size(256 << 20)
            .spawn(move || decode(None, deep.as_bytes(), usize::MAX).map(|r| r.uid))
            .expect("thread")
            .join()
            .expect("no overflow");
        assert_eq!(request.ok().as_deref(), Some("u"));
    }

    #[test]
    fn denials_of_unread_reviews_say_whose_fault() {
        let code = |e: ReviewError| {
            let s = Answer::bad_request(&e).status.unwrap();
            (s.code, s.reason, s.message)
        };
        assert_eq!(
            code(ReviewError::Busy { bytes: 10 }),
            (
                503,
                "ServiceUnavailable".to_string(),
                "the webhook is busy: no memory for a 10-byte body before the deadline; try again"
                    .to_string()
            )
        );
        assert_eq!(code(ReviewError::Internal("boom".into())).0, 500);
        assert_eq!(code(ReviewError::Empty).1, "BadRequest");
    }

    #[test]
    fn encodes_in_the_version_sent_without_patch() {
        let status = Status::failure("no", "Invalid").with_code(422);
        let out = encode(V1BETA1, "u", Answer::deny(status, vec!["w".into()]));
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": V1BETA1, "kind": "AdmissionReview",
                   "response": {"uid": "u", "allowed": false, "warnings": ["w"],
                                "status": {"status": "Failure", "code": 422, "reason": "Invalid", "message": "no"}}})
        );
        let v: Value = serde_json::from_slice(&encode(V1, "u", Answer::allow(vec![]))).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": V1, "kind": "AdmissionReview",
                   "response": {"uid": "u", "allowed": true, "status": {}}})
        );
    }
}
