//! Field path resolution: what a Crossplane field path points at in a structural schema.
//!
//! Follows Crossplane's resolver (v1.17 `validateFieldPath`), with its false positives fixed:
//! `metadata.*` is checked against the whole ObjectMeta (finalizers, ownerReferences, ...),
//! an `x-kubernetes-int-or-string` leaf is "integer or string" and a type-less leaf is
//! unknown, `[*]` walks every array item or map value, and a numeric bracket under an
//! object is a key (`labels[123]`). Errors keep upstream's sentences and add where and
//! what instead ("did you mean ...?").

use std::borrow::Cow;
use std::fmt::{self, Write as _};
use std::sync::OnceLock;

use super::structural::{AdditionalProperties, Items, Schema};
use super::validation::closest;
use crate::fieldpath::{self, Segment, SegmentRef};

/// A JSON type a schema can declare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JsonType {
    /// `array`.
    Array,
    /// `boolean`.
    Boolean,
    /// `integer`.
    Integer,
    /// `null`.
    Null,
    /// `number`.
    Number,
    /// `object`.
    Object,
    /// `string`.
    String,
}

impl JsonType {
    /// Parses a schema `type`.
    pub fn parse(s: &str) -> Option<JsonType> {
        Some(match s {
            "array" => JsonType::Array,
            "boolean" => JsonType::Boolean,
            "integer" => JsonType::Integer,
            "null" => JsonType::Null,
            "number" => JsonType::Number,
            "object" => JsonType::Object,
            "string" => JsonType::String,
            _ => return None,
        })
    }

    /// The schema name of the type.
    pub fn name(self) -> &'static str {
        match self {
            JsonType::Array => "array",
            JsonType::Boolean => "boolean",
            JsonType::Integer => "integer",
            JsonType::Null => "null",
            JsonType::Number => "number",
            JsonType::Object => "object",
            JsonType::String => "string",
        }
    }

    /// Whether a value of type `self` may be written where `expected` is declared: the same
    /// type, or an integer where a number is expected (JSON numbers include integers).
    pub fn fits(self, expected: JsonType) -> bool {
        self == expected || (self == JsonType::Integer && expected == JsonType::Number)
    }
}

impl fmt::Display for JsonType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a field path points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldType {
    /// A field of a declared JSON type.
    Known(JsonType),
    /// An `x-kubernetes-int-or-string` field: an integer or a string.
    IntOrString,
    /// A field whose type the schema does not say (preserve-unknown-fields, no schema, a
    /// type-less leaf, a tuple item): accepted, but nothing can be checked about it.
    Unknown,
}

impl FieldType {
    /// The declared JSON type, if there is exactly one.
    pub fn known(self) -> Option<JsonType> {
        match self {
            FieldType::Known(t) => Some(t),
            _ => None,
        }
    }

    /// Whether a value of type `value` may be written to a field of this type.
    pub fn accepts(self, value: JsonType) -> bool {
        match self {
            FieldType::Known(t) => value.fits(t),
            FieldType::IntOrString => matches!(value, JsonType::Integer | JsonType::String),
            FieldType::Unknown => true,
        }
    }
}

impl fmt::Display for FieldType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FieldType::Known(t) => t.fmt(f),
            FieldType::IntOrString => f.write_str("integer or string"),
            FieldType::Unknown => f.write_str("unknown"),
        }
    }
}

/// Why a field path does not resolve. The sentences are Crossplane's; the part after them
/// says where and suggests.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// The path is not valid syntax.
    #[error("{0}")]
    Syntax(#[from] fieldpath::ParseError),
    /// A field under something that is not an object.
    #[error(
        "trying to access a field '{field}' of object, but schema says parent is of type: '{parent_type}' ({parent} is not an object)"
    )]
    NotAnObject {
        /// The field.
        field: String,
        /// The parent's declared type.
        parent_type: String,
        /// The parent's path.
        parent: String,
    },
    /// A field the object's schema does not declare.
    #[error("field '{field}' is not valid according to the schema{}", suggest(.suggestions))]
    UnknownField {
        /// The field.
        field: String,
        /// The closest declared fields.
        suggestions: Vec<String>,
    },
    /// An index into something that is not an array.
    #[error("trying to access a '{parent_type}' by index ({parent} is not an array)")]
    NotAnArray {
        /// The parent's declared type (may be empty).
        parent_type: String,
        /// The parent's path.
        parent: String,
    },
    /// An array schema without `items`.
    #[error("no items found in array ({parent} has no items schema)")]
    NoItems {
        /// The array's path.
        parent: String,
    },
    /// An index at or beyond `maxItems`.
    #[error(
        "index is above the allowed size of the array: {index} > {} ({parent} has maxItems {max_items})",
        .max_items.saturating_sub(1)
    )]
    AboveMaxItems {
        /// The index.
        index: u32,
        /// `maxItems`.
        max_items: u64,
        /// The array's path.
        parent: String,
    },
    /// An index beyond a tuple `items` list.
    #[error("no schema for item requested at index {index} ({parent} lists {len} item schemas)")]
    NoTupleItem {
        /// The index.
        index: u32,
        /// Number of item schemas.
        len: usize,
        /// The array's path.
        parent: String,
    },
}

fn suggest(suggestions: &[String]) -> String {
    match suggestions {
        [] => String::new(),
        [one] => format!("; did you mean {one}?"),
        [first @ .., last] => format!("; did you mean {} or {last}?", first.join(", ")),
    }
}

/// The schema of Kubernetes' ObjectMeta as users may patch it (CRD schemas leave it out).
pub fn object_meta_schema() -> &'static Schema {
    static META: OnceLock<Schema> = OnceLock::new();
    META.get_or_init(|| {
        let string = serde_json::json!({"type": "string"});
        let string_map =
            serde_json::json!({"type": "object", "additionalProperties": {"type": "string"}});
        let value = serde_json::json!({
            "type": "object",
            "properties": {
                "name": string, "generateName": string, "namespace": string, "uid": string,
                "selfLink": string, "resourceVersion": string,
                "generation": {"type": "integer", "format": "int64"},
                "creationTimestamp": {"type": "string", "format": "date-time"},
                "deletionTimestamp": {"type": "string", "format": "date-time"},
                "deletionGracePeriodSeconds": {"type": "integer", "format": "int64"},
                "labels": string_map, "annotations": string_map,
                "finalizers": {"type": "array", "items": string},
                "ownerReferences": {"type": "array", "items": {
                    "type": "object",
                    "required": ["apiVersion", "kind", "name", "uid"],
                    "properties": {
                        "apiVersion": string, "kind": string, "name": string, "uid": string,
                        "controller": {"type": "boolean"},
                        "blockOwnerDeletion": {"type": "boolean"}
                    }
                }},
                "managedFields": {"type": "array", "items": {
                    "type": "object",
                    "properties": {
                        "apiVersion": string, "fieldsType": string, "manager": string,
                        "operation": string, "subresource": string,
                        "time": {"type": "string", "format": "date-time"},
                        "fieldsV1": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                    }
                }}
            }
        });
        // A fixed, valid literal: parsing it cannot fail.
        Schema::from_value(&value).unwrap_or_default()
    })
}

/// Resolves a field path against a schema. `None` (no schema) resolves anything to
/// [`FieldType::Unknown`]. The root is an object with ObjectMeta at `metadata`.
pub fn resolve(schema: Option<&Schema>, path: &str) -> Result<FieldType, PathError> {
    if path.is_empty() {
        return Ok(FieldType::Unknown);
    }
    let Some(root) = schema else {
        fieldpath::check(path)?;
        return Ok(FieldType::Unknown);
    };
    // Segments borrowed from `path`: a walk that resolves allocates nothing else.
    let segments = fieldpath::parse_borrowed(path)?;
    resolve_refs(Some(root), &segments)
}

/// [`resolve`] for parsed segments.
pub fn resolve_segments(
    schema: Option<&Schema>,
    segments: &[Segment],
) -> Result<FieldType, PathError> {
    let refs: Vec<SegmentRef<'_>> = segments.iter().map(Segment::as_ref).collect();
    resolve_refs(schema, &refs)
}

/// [`resolve`] for segments borrowed from their path.
pub fn resolve_refs(
    schema: Option<&Schema>,
    segments: &[SegmentRef<'_>],
) -> Result<FieldType, PathError> {
    match schema {
        Some(root) if !segments.is_empty() => walk(root, segments, 0, true),
        _ => Ok(FieldType::Unknown),
    }
}

/// One step of the walk.
enum Step<'a> {
    /// Continue with this schema.
    Into(&'a Schema),
    /// The schema stops saying anything: accept the rest with an unknown type.
    Unknown,
}

/// Walks `all[from..]` from `start` (at the path `all[..from]`). `has_meta`: `start` is an
/// object whose `metadata` is ObjectMeta (the root, an embedded resource). The path of a
/// parent is spelled out only for an error.
fn walk(
    start: &Schema,
    all: &[SegmentRef<'_>],
    from: usize,
    mut has_meta: bool,
) -> Result<FieldType, PathError> {
    let mut current = start;
    for (n, segment) in all.iter().enumerate().skip(from) {
        let parent = || display_path(&all[..n]);
        let step = match *segment {
            SegmentRef::Field("metadata") if has_meta && is_object(current) => {
                return resolve_meta(current.property("metadata"), all, n + 1);
            }
            SegmentRef::Field("*") => match wildcard(current) {
                Some(step) => step,
                None => field(current, "*", &parent)?,
            },
            SegmentRef::Field(f) => field(current, f, &parent)?,
            // A number in brackets under an object is a key (`labels[123]`).
            SegmentRef::Index(i) if current.type_.as_deref() == Some("object") => {
                field(current, &i.to_string(), &parent)?
            }
            SegmentRef::Index(i) => index(current, i, &parent)?,
        };
        match step {
            Step::Into(next) => {
                has_meta = next.embedded_resource;
                current = next;
            }
            Step::Unknown => return Ok(FieldType::Unknown),
        }
    }
    Ok(leaf_type(current))
}

fn is_object(s: &Schema) -> bool {
    matches!(s.type_.as_deref(), None | Some("" | "object"))
}

/// The path of `segments` as messages print it.
fn display_path(segments: &[SegmentRef<'_>]) -> String {
    let mut at = String::new();
    for segment in segments {
        push_segment(&mut at, *segment);
    }
    at
}

fn push_segment(at: &mut String, segment: SegmentRef<'_>) {
    match segment {
        SegmentRef::Field(f) if !f.contains(['.', '[', ']']) && !f.is_empty() && f != "*" => {
            if !at.is_empty() {
                at.push('.');
            }
            at.push_str(f);
        }
        SegmentRef::Field(f) => {
            at.push('[');
            at.push_str(f);
            at.push(']');
        }
        SegmentRef::Index(i) => {
            let _ = write!(at, "[{i}]");
        }
    }
}

fn display_parent(parent: &str) -> String {
    if parent.is_empty() {
        "the root".to_string()
    } else {
        parent.to_string()
    }
}

/// A field segment, as Crossplane resolves it.
fn field<'a>(
    s: &'a Schema,
    name: &str,
    parent: &dyn Fn() -> String,
) -> Result<Step<'a>, PathError> {
    if !is_object(s) {
        return Err(PathError::NotAnObject {
            field: name.to_string(),
            parent_type: s.type_.clone().unwrap_or_default(),
            parent: display_parent(&parent()),
        });
    }
    if let Some(p) = s.property(name) {
        return Ok(Step::Into(p));
    }
    if s.preserve_unknown_fields {
        return Ok(Step::Unknown);
    }
    match &s.additional_properties {
        Some(AdditionalProperties::Bool(true)) => return Ok(Step::Unknown),
        Some(AdditionalProperties::Schema(values)) => return Ok(Step::Into(values)),
        _ => {}
    }
    Err(PathError::UnknownField {
        field: name.to_string(),
        suggestions: closest(name, s.properties.keys().map(String::as_str)),
    })
}

/// `[*]`: every item of an array, every value of a map. `None`: not a wildcard here (an
/// object that declares a field named `*`, or nothing to expand).
fn wildcard(s: &Schema) -> Option<Step<'_>> {
    if s.type_.as_deref() == Some("array") {
        return Some(match &s.items {
            Some(Items::Schema(items)) => Step::Into(items),
            _ => Step::Unknown,
        });
    }
    if !is_object(s) || s.property("*").is_some() {
        return None;
    }
    match &s.additional_properties {
        Some(AdditionalProperties::Schema(values)) => Some(Step::Into(values)),
        // Every declared field at once: their types may differ.
        Some(AdditionalProperties::Bool(true)) => Some(Step::Unknown),
        _ if !s.properties.is_empty() || s.preserve_unknown_fields => Some(Step::Unknown),
        _ => None,
    }
}

/// An index segment, as Crossplane resolves it.
fn index<'a>(s: &'a Schema, i: u32, parent: &dyn Fn() -> String) -> Result<Step<'a>, PathError> {
    if s.type_.as_deref() != Some("array") {
        if s.type_.is_none() && s.preserve_unknown_fields {
            return Ok(Step::Unknown);
        }
        return Err(PathError::NotAnArray {
            parent_type: s.type_.clone().unwrap_or_default(),
            parent: display_parent(&parent()),
        });
    }
    let Some(items) = &s.items else {
        return Err(PathError::NoItems {
            parent: display_parent(&parent()),
        });
    };
    if let Some(max) = s.max_items
        && u64::from(i) >= max
    {
        return Err(PathError::AboveMaxItems {
            index: i,
            max_items: max,
            parent: display_parent(&parent()),
        });
    }
    match items {
        Items::Schema(items) => Ok(Step::Into(items)),
        Items::Tuple(list) if (i as usize) < list.len() => Ok(Step::Unknown),
        Items::Tuple(list) => Err(PathError::NoTupleItem {
            index: i,
            len: list.len(),
            parent: display_parent(&parent()),
        }),
    }
}

/// `metadata` and below (`all[from..]`): the CRD's own `metadata` properties where it
/// declares them (with a type), ObjectMeta for the rest.
fn resolve_meta(
    declared: Option<&Schema>,
    all: &[SegmentRef<'_>],
    from: usize,
) -> Result<FieldType, PathError> {
    let meta = object_meta_schema();
    let Some(first) = all.get(from) else {
        return Ok(FieldType::Known(JsonType::Object));
    };
    let name: Cow<'_, str> = match *first {
        SegmentRef::Field(f) => Cow::Borrowed(f),
        SegmentRef::Index(i) => Cow::Owned(i.to_string()),
    };
    let own = declared
        .and_then(|d| d.property(&name))
        .filter(|s| s.type_.is_some());
    let next = match (own, meta.property(&name)) {
        (Some(s), _) | (None, Some(s)) => s,
        (None, None) => {
            return Err(PathError::UnknownField {
                field: name.to_string(),
                suggestions: closest(&name, meta.properties.keys().map(String::as_str)),
            });
        }
    };
    walk(next, all, from + 1, false)
}

/// The type of the schema a path ends on.
fn leaf_type(s: &Schema) -> FieldType {
    if s.int_or_string {
        return FieldType::IntOrString;
    }
    match s.type_.as_deref().and_then(JsonType::parse) {
        Some(t) => FieldType::Known(t),
        None => FieldType::Unknown,
    }
}
