//! JSON values as CEL sees them on the API server (`apiserver/pkg/cel/common/values.go`,
//! `UnstructuredToVal`, and `apiserver/pkg/cel/escaping.go`): the declared properties of an
//! object by their escaped names, a null property absent, map keys as they are, `number`s as
//! doubles, and `date`, `date-time`, `duration` and `byte` strings as timestamps, durations
//! and bytes.
//!
//! kube-cel 0.8 converts differently in three ways that deny what the API server accepts: it
//! escapes every `_` (so `self.x_y` finds no `x_y`), keeps null properties (`has(self.a)` is
//! true for `a: null`), and keeps a whole `number` an integer (`self.ratio * 0.5` has no
//! overload for `1`).

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use kube_cel::cel::Value as CelValue;
use kube_cel::cel::objects::{Key, Map as CelMap};
use serde_json::Value;

use super::{MAX_CEL_SUBTREE_DEPTH, Reads};
use crate::schema::{AdditionalProperties, Schema};

/// What converting a value needs of its schema node, built once when the rules are compiled.
pub(super) struct Shape {
    scalar: Scalar,
    /// The declared properties (the API server's object: names escaped, nulls absent), if any.
    properties: Option<BTreeMap<String, Shape>>,
    /// `additionalProperties` with a schema or `true`: a map whose keys are data, not names.
    additional: Option<Option<Box<Shape>>>,
    items: Option<Box<Shape>>,
    /// `x-kubernetes-embedded-resource`: `apiVersion`, `kind` and `metadata` always there
    /// (as kube-cel has them).
    embedded: bool,
}

/// How a scalar of a node converts.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Scalar {
    Plain,
    Number,
    Date,
    DateTime,
    Duration,
    Bytes,
}

impl Shape {
    /// The shape of `schema`, to [`MAX_CEL_SUBTREE_DEPTH`] levels (below, values convert
    /// without a schema, as the rules' compiled schema stops there too).
    pub(super) fn of(schema: &Schema) -> Shape {
        Shape::at(schema, 0)
    }

    fn at(schema: &Schema, depth: usize) -> Shape {
        let scalar = if schema.int_or_string {
            Scalar::Plain
        } else {
            match (schema.type_.as_deref(), schema.format.as_deref()) {
                (Some("number"), _) => Scalar::Number,
                (Some("string"), Some("date")) => Scalar::Date,
                (Some("string"), Some("date-time")) => Scalar::DateTime,
                (Some("string"), Some("duration")) => Scalar::Duration,
                (Some("string"), Some("byte")) => Scalar::Bytes,
                _ => Scalar::Plain,
            }
        };
        let deeper = depth < MAX_CEL_SUBTREE_DEPTH;
        let below = |s: &Schema| Box::new(Shape::at(s, depth + 1));
        let properties = (deeper && (!schema.properties.is_empty() || schema.embedded_resource))
            .then(|| {
                schema
                    .properties
                    .iter()
                    .map(|(name, p)| (name.clone(), Shape::at(p, depth + 1)))
                    .collect()
            });
        let additional = match &schema.additional_properties {
            Some(AdditionalProperties::Schema(s)) if deeper => Some(Some(below(s))),
            Some(AdditionalProperties::Bool(true)) => Some(None),
            _ => None,
        };
        Shape {
            scalar,
            properties,
            additional,
            items: schema.items_schema().filter(|_| deeper).map(below),
            embedded: schema.embedded_resource,
        }
    }
}

/// `value` in CEL, of what `reads` names of it: of an object read by members, only those
/// members (what a select chain finds is the same; nothing else can see the rest).
pub(super) fn to_cel_compiled(value: &Value, shape: &Shape, reads: &Reads) -> CelValue {
    match value {
        Value::Array(items) => CelValue::List(Arc::new(
            items
                .iter()
                .map(|item| match &shape.items {
                    Some(s) => to_cel_compiled(item, s, &Reads::Whole),
                    None => to_cel(item),
                })
                .collect(),
        )),
        Value::Object(obj) => {
            let members = match reads {
                Reads::Whole => None,
                Reads::Members(members) => Some(members),
            };
            let mut map =
                HashMap::with_capacity(members.map_or(obj.len(), |m| m.len().min(obj.len())));
            for (k, v) in obj {
                let name = if shape.properties.is_some() {
                    // The API server finds a property by unescaping the name a rule selects:
                    // one that cannot be escaped cannot be selected, and null is absent.
                    match escape_field_name(k) {
                        Some(name) if !v.is_null() => name,
                        _ => continue,
                    }
                } else if shape.additional.is_some() {
                    Cow::Borrowed(k.as_str())
                } else {
                    escape_field_name(k).unwrap_or(Cow::Borrowed(k.as_str()))
                };
                let inner = match members {
                    None => &Reads::Whole,
                    Some(members) => match members.iter().find(|(n, _)| *n == name) {
                        Some((_, inner)) => inner,
                        None => continue,
                    },
                };
                let child = match (&shape.properties, &shape.additional) {
                    (Some(properties), _) => properties.get(k),
                    (None, Some(additional)) => additional.as_deref(),
                    (None, None) => None,
                };
                let child = match child {
                    Some(s) => to_cel_compiled(v, s, inner),
                    None => to_cel(v),
                };
                map.insert(Key::String(Arc::new(name.into_owned())), child);
            }
            if shape.embedded {
                for field in ["apiVersion", "kind"] {
                    map.entry(Key::String(Arc::new(field.into())))
                        .or_insert_with(|| CelValue::String(Arc::new(String::new())));
                }
                map.entry(Key::String(Arc::new("metadata".into())))
                    .or_insert_with(|| {
                        CelValue::Map(CelMap {
                            map: Arc::new(HashMap::new()),
                        })
                    });
            }
            CelValue::Map(CelMap { map: Arc::new(map) })
        }
        Value::Number(n) if shape.scalar == Scalar::Number => {
            CelValue::Float(n.as_f64().unwrap_or(f64::NAN))
        }
        Value::String(s) => string(s, shape.scalar),
        scalar => to_cel(scalar),
    }
}

/// A string of a node with a format that converts it; a string the format refuses stays a
/// string (as in kube-cel: the schema's format check has refused it already).
fn string(s: &str, scalar: Scalar) -> CelValue {
    use chrono::{DateTime, FixedOffset, NaiveDate, NaiveTime};
    let converted = match scalar {
        Scalar::DateTime => DateTime::parse_from_rfc3339(s)
            .ok()
            .map(CelValue::Timestamp),
        Scalar::Date if crate::go::time::is_date_only(s) => {
            NaiveDate::parse_from_str(s, "%Y-%m-%d").ok().map(|d| {
                let utc = FixedOffset::east_opt(0).expect("zero is a valid offset");
                CelValue::Timestamp(d.and_time(NaiveTime::MIN).and_utc().with_timezone(&utc))
            })
        }
        Scalar::Duration => super::super::formats::strfmt_duration(s)
            .map(|ns| CelValue::Duration(chrono::Duration::nanoseconds(ns))),
        Scalar::Bytes => crate::go::base64::decode_string(s)
            .ok()
            .map(|b| CelValue::Bytes(Arc::new(b))),
        Scalar::Date | Scalar::Plain | Scalar::Number => None,
    };
    converted.unwrap_or_else(|| CelValue::String(Arc::new(s.to_string())))
}

/// A value without a schema (below what the rules' schema describes): strings stay strings
/// and field names are escaped.
pub(super) fn to_cel(value: &Value) -> CelValue {
    match value {
        Value::Null => CelValue::Null,
        Value::Bool(b) => CelValue::Bool(*b),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                CelValue::Int(i)
            } else if let Some(u) = n.as_u64() {
                CelValue::UInt(u)
            } else {
                CelValue::Float(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Value::String(s) => CelValue::String(Arc::new(s.clone())),
        Value::Array(items) => CelValue::List(Arc::new(items.iter().map(to_cel).collect())),
        Value::Object(obj) => {
            let mut map = HashMap::with_capacity(obj.len());
            for (k, v) in obj {
                let name = escape_field_name(k).unwrap_or(Cow::Borrowed(k.as_str()));
                map.insert(Key::String(Arc::new(name.into_owned())), to_cel(v));
            }
            CelValue::Map(CelMap { map: Arc::new(map) })
        }
    }
}

/// The API server's `cel.Escape`: the CEL name of the property `name`, `name` itself when
/// nothing is escaped, or `None` when it cannot be named in CEL (empty, a leading digit, or a
/// character outside `[a-zA-Z0-9_./-]`). `__` becomes `__underscores__`, `.` `__dot__`, `-`
/// `__dash__`, `/` `__slash__`, and a reserved word `__word__`; a single `_` stays.
pub(super) fn escape_field_name(name: &str) -> Option<Cow<'_, str>> {
    let bytes = name.as_bytes();
    if bytes.first().is_none_or(u8::is_ascii_digit) {
        return None;
    }
    if is_reserved(name) {
        return Some(Cow::Owned(format!("__{name}__")));
    }
    // One pass: most names need nothing escaped.
    let mut plain = true;
    for (i, &c) in bytes.iter().enumerate() {
        match c {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' => {}
            b'_' => plain &= bytes.get(i + 1) != Some(&b'_'),
            b'.' | b'-' | b'/' => plain = false,
            _ => return None,
        }
    }
    if plain {
        return Some(Cow::Borrowed(name));
    }
    // Go's `(__|[-./])` replaced left to right: `___` is `__underscores___`.
    let mut escaped = String::with_capacity(name.len() * 2);
    let mut i = 0;
    while let Some(&c) = bytes.get(i) {
        match c {
            b'_' if bytes.get(i + 1) == Some(&b'_') => {
                escaped.push_str("__underscores__");
                i += 1;
            }
            b'.' => escaped.push_str("__dot__"),
            b'-' => escaped.push_str("__dash__"),
            b'/' => escaped.push_str("__slash__"),
            c => escaped.push(char::from(c)),
        }
        i += 1;
    }
    Some(Cow::Owned(escaped))
}

/// CEL's reserved words (`celReservedSymbols`), escaped as `__word__` in field names.
fn is_reserved(name: &str) -> bool {
    matches!(
        name,
        "true"
            | "false"
            | "null"
            | "in"
            | "as"
            | "break"
            | "const"
            | "continue"
            | "else"
            | "for"
            | "function"
            | "if"
            | "import"
            | "let"
            | "loop"
            | "package"
            | "namespace"
            | "return"
            | "var"
            | "void"
            | "while"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kubernetes' `TestEscaping` (`apiserver/pkg/cel/escaping_test.go`), case for case.
    #[test]
    fn field_names_escape_as_the_api_server_escapes_them() {
        let cases: &[(&str, Option<&str>)] = &[
            ("a.a", Some("a__dot__a")),
            ("a-a", Some("a__dash__a")),
            ("a__a", Some("a__underscores__a")),
            ("a.-/__a", Some("a__dot____dash____slash____underscores__a")),
            ("a._a", Some("a__dot___a")),
            ("a__.__a", Some("a__underscores____dot____underscores__a")),
            ("a___a", Some("a__underscores___a")),
            ("a____a", Some("a__underscores____underscores__a")),
            ("a__dot__a", Some("a__underscores__dot__underscores__a")),
            (
                "a__underscores__a",
                Some("a__underscores__underscores__underscores__a"),
            ),
            ("true", Some("__true__")),
            ("false", Some("__false__")),
            ("null", Some("__null__")),
            ("in", Some("__in__")),
            ("as", Some("__as__")),
            ("break", Some("__break__")),
            ("const", Some("__const__")),
            ("continue", Some("__continue__")),
            ("else", Some("__else__")),
            ("for", Some("__for__")),
            ("function", Some("__function__")),
            ("if", Some("__if__")),
            ("import", Some("__import__")),
            ("let", Some("__let__")),
            ("loop", Some("__loop__")),
            ("package", Some("__package__")),
            ("namespace", Some("__namespace__")),
            ("return", Some("__return__")),
            ("var", Some("__var__")),
            ("void", Some("__void__")),
            ("while", Some("__while__")),
            ("@", None),
            ("1up", None),
            ("👑", None),
            ("/👑", None),
            ("", None),
            ("has", Some("has")),
            ("all", Some("all")),
            ("exists", Some("exists")),
            ("exists_one", Some("exists_one")),
            ("filter", Some("filter")),
            ("size", Some("size")),
            ("contains", Some("contains")),
            ("startsWith", Some("startsWith")),
            ("endsWith", Some("endsWith")),
            ("matches", Some("matches")),
            ("duration", Some("duration")),
            ("timestamp", Some("timestamp")),
            ("getDate", Some("getDate")),
            ("getDayOfMonth", Some("getDayOfMonth")),
            ("getDayOfWeek", Some("getDayOfWeek")),
            ("getFullYear", Some("getFullYear")),
            ("getHours", Some("getHours")),
            ("getMilliseconds", Some("getMilliseconds")),
            ("getMinutes", Some("getMinutes")),
            ("getMonth", Some("getMonth")),
            ("getSeconds", Some("getSeconds")),
            ("_if", Some("_if")),
            ("_has", Some("_has")),
            ("_int", Some("_int")),
            ("_anything", Some("_anything")),
            // TestCanSkipRegex's single underscores.
            ("a_a", Some("a_a")),
            ("a_a_a", Some("a_a_a")),
        ];
        for (name, escaped) in cases {
            assert_eq!(
                escape_field_name(name).as_deref(),
                *escaped,
                "{name:?} escapes"
            );
        }
    }
}
