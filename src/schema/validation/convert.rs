//! A structural schema as a Draft 7 JSON Schema with kube-openapi's semantics.
//!
//! Draft 7 because it takes `1.0` for an integer (as kube-openapi does) and has numeric
//! `exclusiveMinimum`/`exclusiveMaximum` (the OpenAPI booleans are converted). `nullable` adds
//! `"null"` to `type` (not to `enum`, and `allOf`/`anyOf`/`oneOf`/`not` move under an
//! `if`/`then` that skips null, as kube-openapi skips them for null);
//! `x-kubernetes-int-or-string` is `type: [integer, string]` (kube-openapi's
//! conversion; the CRD's own `anyOf` is kept too). Only formats the API server honours are
//! kept. `x-kubernetes-*` extensions, defaults and `additionalProperties: false` are left out:
//! the other stages handle them, and pruning has removed unknown fields already.
//!
//! Keywords are written in the order kube-openapi checks them; the validator keeps it (except
//! for `required`, which `errors.rs` moves last, and properties, checked in the object's key
//! order). The declared type is kept under [`TYPE_NOTE`] for
//! error messages, since the JSON Schema `type` may be wider.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use super::formats;
use crate::schema::structural::{MAX_SCHEMA_DEPTH, index, join};
use crate::schema::{AdditionalProperties, Items, Schema};

/// Private keyword holding the declared type(s) as kube-openapi prints them (`integer,string`).
pub(super) const TYPE_NOTE: &str = "x-k8s-declared-type";

/// The converted schema, the format names it uses and what was left out.
pub(super) struct Converted {
    /// The Draft 7 JSON Schema.
    pub json: Value,
    /// Format names (as written in the CRD) that need a checker.
    pub formats: BTreeSet<String>,
    /// Parts left out, for the notes of every validation.
    pub notes: Vec<String>,
}

/// Converts `schema` (an `openAPIV3Schema`).
pub(super) fn to_json_schema(schema: &Schema) -> Converted {
    let mut converted = Converted {
        json: Value::Null,
        formats: BTreeSet::new(),
        notes: Vec::new(),
    };
    converted.json = node(schema, "", 0, &mut converted);
    converted
}

const KNOWN_TYPES: [&str; 6] = ["object", "array", "string", "integer", "number", "boolean"];

fn node(s: &Schema, at: &str, depth: usize, out: &mut Converted) -> Value {
    let mut m = Map::new();
    if depth > MAX_SCHEMA_DEPTH {
        return Value::Object(m);
    }
    let format = s.format.as_deref().filter(|f| formats::is_supported(f));
    let declared: Vec<&str> = if s.int_or_string {
        vec!["integer", "string"]
    } else {
        match s.type_.as_deref() {
            Some(t) if KNOWN_TYPES.contains(&t) => vec![t],
            Some("") | None => Vec::new(),
            Some(other) => {
                out.notes.push(format!(
                    "schema {}: unknown type {other:?} is not checked",
                    display(at)
                ));
                Vec::new()
            }
        }
    };
    if !declared.is_empty() {
        let mut types: Vec<&str> = declared.clone();
        // kube-openapi skips the type check of a string or an array when a (supported) format
        // is set on a non-numeric type.
        if format.is_some() && !declared.iter().any(|t| matches!(*t, "integer" | "number")) {
            for extra in ["string", "array"] {
                if !types.contains(&extra) {
                    types.push(extra);
                }
            }
        }
        if s.nullable {
            types.push("null");
        }
        m.insert(
            "type".into(),
            match types.as_slice() {
                [one] => json!(one),
                many => json!(many),
            },
        );
        m.insert(TYPE_NOTE.into(), json!(declared.join(",")));
    }
    let mut composition = Map::new();
    for (key, list) in [
        ("allOf", &s.all_of),
        ("anyOf", &s.any_of),
        ("oneOf", &s.one_of),
    ] {
        if !list.is_empty() {
            let base = join(at, key);
            let items: Vec<Value> = list
                .iter()
                .enumerate()
                .map(|(i, b)| node(b, &index(&base, i), depth + 1, out))
                .collect();
            composition.insert(key.into(), Value::Array(items));
        }
    }
    if let Some(not) = &s.not {
        composition.insert("not".into(), node(not, &join(at, "not"), depth + 1, out));
    }
    if s.nullable && !composition.is_empty() {
        // kube-openapi does not apply allOf/anyOf/oneOf/not to null.
        m.insert("if".into(), json!({"not": {"type": "null"}}));
        m.insert("then".into(), Value::Object(composition));
    } else {
        m.extend(composition);
    }
    if let Some(n) = s.max_length {
        m.insert("maxLength".into(), json!(n));
    }
    if let Some(n) = s.min_length {
        m.insert("minLength".into(), json!(n));
    }
    if let Some(p) = &s.pattern {
        // The API server only admits patterns Go's RE2 accepts; the rare one Rust's engine
        // refuses is left out rather than failing the whole schema.
        match regex::Regex::new(p) {
            Ok(_) => {
                m.insert("pattern".into(), json!(p));
            }
            Err(e) => out.notes.push(format!(
                "schema {}: pattern {p:?} is not checked: {}",
                display(at),
                first_line(&e.to_string())
            )),
        }
    }
    if let Some(f) = format {
        m.insert("format".into(), json!(f));
        out.formats.insert(f.to_string());
    }
    if let Some(n) = s.multiple_of {
        if n > 0.0 {
            m.insert("multipleOf".into(), json!(n));
        } else {
            out.notes.push(format!(
                "schema {}: multipleOf {n} is not positive and is not checked",
                display(at)
            ));
        }
    }
    if let Some(n) = s.minimum {
        let key = if s.exclusive_minimum {
            "exclusiveMinimum"
        } else {
            "minimum"
        };
        m.insert(key.into(), json!(n));
    }
    if let Some(n) = s.maximum {
        let key = if s.exclusive_maximum {
            "exclusiveMaximum"
        } else {
            "maximum"
        };
        m.insert(key.into(), json!(n));
    }
    match &s.items {
        Some(Items::Schema(item)) => {
            m.insert(
                "items".into(),
                node(item, &join(at, "items"), depth + 1, out),
            );
        }
        Some(Items::Tuple(list)) => {
            let base = join(at, "items");
            let items: Vec<Value> = list
                .iter()
                .enumerate()
                .map(|(i, b)| node(b, &index(&base, i), depth + 1, out))
                .collect();
            m.insert("items".into(), Value::Array(items));
        }
        None => {}
    }
    if let Some(n) = s.min_items {
        m.insert("minItems".into(), json!(n));
    }
    if let Some(n) = s.max_items {
        m.insert("maxItems".into(), json!(n));
    }
    if s.unique_items {
        m.insert("uniqueItems".into(), json!(true));
    }
    if !s.enum_values.is_empty() {
        // Not widened with null for `nullable`: kube-openapi's enum check never accepts null.
        m.insert("enum".into(), Value::Array(s.enum_values.clone()));
    }
    if let Some(n) = s.min_properties {
        m.insert("minProperties".into(), json!(n));
    }
    if let Some(n) = s.max_properties {
        m.insert("maxProperties".into(), json!(n));
    }
    if let Some(AdditionalProperties::Schema(add)) = &s.additional_properties {
        m.insert(
            "additionalProperties".into(),
            node(add, &join(at, "additionalProperties"), depth + 1, out),
        );
    }
    if !s.properties.is_empty() {
        let base = join(at, "properties");
        let props: Map<String, Value> = s
            .properties
            .iter()
            .map(|(name, p)| (name.clone(), node(p, &join(&base, name), depth + 1, out)))
            .collect();
        m.insert("properties".into(), Value::Object(props));
    }
    if !s.required.is_empty() {
        m.insert("required".into(), json!(s.required));
    }
    Value::Object(m)
}

fn display(at: &str) -> &str {
    if at.is_empty() { "(root)" } else { at }
}

fn first_line(s: &str) -> &str {
    s.lines().find(|l| !l.trim().is_empty()).unwrap_or(s).trim()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn convert(v: Value) -> Converted {
        to_json_schema(&Schema::from_value(&v).expect("schema"))
    }

    #[test]
    fn openapi_keywords_become_draft7() {
        let c = convert(json!({"type": "object", "required": ["a"], "properties": {
            "a": {"type": "integer", "nullable": true, "minimum": 1, "exclusiveMinimum": true,
                  "maximum": 9, "format": "int32"},
            "p": {"x-kubernetes-int-or-string": true},
            "t": {"type": "string", "format": "date-time", "enum": ["x"]},
            "u": {"type": "string", "format": "made-up", "pattern": "(?<!a)b"}
        }}));
        assert_eq!(
            c.json["properties"]["a"],
            json!({"type": ["integer", "null"], TYPE_NOTE: "integer",
                   "exclusiveMinimum": 1.0, "maximum": 9.0})
        );
        assert_eq!(
            c.json["properties"]["p"],
            json!({"type": ["integer", "string"], TYPE_NOTE: "integer,string"})
        );
        assert_eq!(
            c.json["properties"]["t"],
            json!({"type": ["string", "array"], TYPE_NOTE: "string", "format": "date-time",
                   "enum": ["x"]})
        );
        assert_eq!(
            c.json["properties"]["u"],
            json!({"type": "string", TYPE_NOTE: "string"})
        );
        assert_eq!(c.formats.iter().collect::<Vec<_>>(), ["date-time"]);
        assert_eq!(c.notes.len(), 1, "{:?}", c.notes);
        assert!(c.notes[0].starts_with("schema properties.u: pattern \"(?<!a)b\" is not checked"));
    }
}
