//! The lightweight walker: validating a value against a structural schema as kube-apiserver
//! does for custom resources (kube-openapi's validation after pruning and defaulting), with
//! `kubectl apply`'s strict field validation, limited to types, enums, required properties and
//! unknown fields, with the API server's messages (`spec.size: Invalid value: "string": spec.size in body must be of type
//! integer: "string"`, `spec.mode: Unsupported value: "x": supported values: ...`).
//!
//! A `null` in a field that is not `nullable` counts as absent: the API server prunes it.
//! `metadata` at the root and in embedded resources is ObjectMeta, which the API server
//! validates itself; it is not walked here.

use serde_json::Value;

use crate::findings::{BadValue, ErrorType, FieldError, Path};
use crate::schema::{AdditionalProperties, Items, Schema};

/// How many nested levels are walked; deeper values are not checked (the YAML reader already
/// refuses inputs deeper than this).
const MAX_DEPTH: usize = 256;

/// Every violation of `schema` by `value`, reported under `root` (e.g. the empty path).
pub fn validate(value: &Value, schema: &Schema, root: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    walk(value, schema, root, 0, &mut errs);
    errs
}

fn walk(value: &Value, schema: &Schema, path: &Path, depth: usize, errs: &mut Vec<FieldError>) {
    if depth > MAX_DEPTH {
        return;
    }
    if value.is_null() {
        // Null in a non-nullable field is pruned; `required` is checked by the parent.
        return;
    }
    if let Some(expected) = type_mismatch(value, schema) {
        let field = path.as_str();
        errs.push(FieldError::new(
            ErrorType::TypeInvalid,
            field,
            BadValue::from(json_type_name(value)),
            format!(
                "{field} in body must be of type {expected}: \"{}\"",
                json_type_name(value)
            ),
        ));
        return;
    }
    if !schema.enum_values.is_empty() && !schema.enum_values.contains(value) {
        let supported: Vec<String> = schema.enum_values.iter().map(render).collect();
        errs.push(FieldError::new(
            ErrorType::NotSupported,
            path.as_str(),
            BadValue::from_json(value),
            format!("supported values: {}", supported.join(", ")),
        ));
    }
    match value {
        Value::Object(map) => {
            for name in &schema.required {
                if map
                    .get(name)
                    .is_none_or(|v| v.is_null() && !is_nullable(schema, name))
                {
                    errs.push(FieldError::new(
                        ErrorType::Required,
                        path.child(name).as_str(),
                        BadValue::Omit,
                        "",
                    ));
                }
            }
            for (key, child) in map {
                // ObjectMeta (at the root and in embedded resources) is validated by the API
                // server itself, not by the schema.
                if key == "metadata" && (depth == 0 || schema.embedded_resource) {
                    continue;
                }
                if let Some(prop) = schema.properties.get(key) {
                    walk(child, prop, &path.child(key), depth + 1, errs);
                    continue;
                }
                match &schema.additional_properties {
                    Some(AdditionalProperties::Schema(s)) => {
                        walk(child, s, &path.key(key), depth + 1, errs)
                    }
                    Some(AdditionalProperties::Bool(true)) => {}
                    _ if schema.preserve_unknown_fields || schema.type_.is_none() => {}
                    _ if schema.embedded_resource
                        && matches!(key.as_str(), "apiVersion" | "kind") => {}
                    _ => errs.push(unknown_field(path, key, schema)),
                }
            }
        }
        Value::Array(items) => {
            if let Some(Items::Schema(item)) = &schema.items {
                for (i, child) in items.iter().enumerate() {
                    walk(child, item, &path.index(i), depth + 1, errs);
                }
            }
        }
        _ => {}
    }
}

fn is_nullable(schema: &Schema, name: &str) -> bool {
    schema.properties.get(name).is_some_and(|p| p.nullable)
}

/// The expected type when `value` does not have the schema's type.
fn type_mismatch(value: &Value, schema: &Schema) -> Option<String> {
    if schema.int_or_string {
        return match value {
            Value::String(_) => None,
            Value::Number(_) if is_integral(value) => None,
            _ => Some("integer,string".into()),
        };
    }
    let expected = schema.type_.as_deref().filter(|t| !t.is_empty())?;
    let ok = match expected {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "number" => value.is_number(),
        // kube-openapi takes 1.0 for an integer.
        "integer" => is_integral(value),
        _ => true,
    };
    (!ok).then(|| expected.to_string())
}

fn is_integral(value: &Value) -> bool {
    match value {
        Value::Number(n) => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => false,
    }
}

/// The JSON type name kube-openapi reports for a value (`1.0` is an integer).
pub fn json_type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) if is_integral(value) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn render(v: &Value) -> String {
    match v {
        Value::String(s) => crate::findings::go_quote(s),
        other => other.to_string(),
    }
}

/// An unknown field, as `kubectl apply` (strict field validation) refuses it, worded as
/// `crossplane beta validate` reports it, with the closest known field names of that object.
pub(super) fn unknown_field(path: &Path, key: &str, schema: &Schema) -> FieldError {
    let mut detail = format!("unknown field: \"{key}\"");
    let suggestions = closest(key, schema.properties.keys().map(String::as_str));
    if !suggestions.is_empty() {
        detail.push_str(&format!(", did you mean {}?", suggestions.join(" or ")));
    }
    FieldError::invalid(path.child(key), key, detail)
}

/// Up to two known names closest to `name` (case-insensitive edit distance), quoted.
pub fn closest<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Vec<String> {
    let lower = name.to_ascii_lowercase();
    let mut scored: Vec<(usize, &str)> = candidates
        .map(|c| (strsim::levenshtein(&lower, &c.to_ascii_lowercase()), c))
        .filter(|(d, c)| *d <= (c.len().max(name.len()) / 3).max(1))
        .collect();
    scored.sort();
    // Only the best matches: a far second guess is noise.
    let best = scored.first().map(|(d, _)| *d);
    scored
        .iter()
        .filter(|(d, _)| Some(*d) == best)
        .take(2)
        .map(|(_, c)| format!("\"{c}\""))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(v: Value) -> Schema {
        Schema::from_value(&v).expect("schema")
    }

    fn messages(value: Value, s: &Schema) -> Vec<String> {
        validate(&value, s, &Path::default())
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn api_server_messages() {
        let s = schema(json!({
            "type": "object",
            "required": ["spec"],
            "properties": {
                "spec": {
                    "type": "object",
                    "required": ["size"],
                    "properties": {
                        "size": {"type": "integer"},
                        "acl": {"type": "string", "enum": ["private", "public-read"]},
                        "tags": {"type": "object", "additionalProperties": {"type": "string"}},
                        "port": {"x-kubernetes-int-or-string": true},
                        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                        "maybe": {"type": "string", "nullable": true}
                    }
                }
            }
        }));
        assert_eq!(
            messages(json!({"spec": {"size": 1.0}}), &s),
            Vec::<String>::new()
        );
        assert_eq!(
            messages(
                json!({"spec": {"size": "x", "acl": "foo", "tags": {"a.b/c": 1}, "port": true,
                      "free": {"any": [1]}, "aclx": 1, "maybe": null}}),
                &s
            ),
            [
                r#"spec.size: Invalid value: "string": spec.size in body must be of type integer: "string""#,
                r#"spec.acl: Unsupported value: "foo": supported values: "private", "public-read""#,
                r#"spec.tags[a.b/c]: Invalid value: "integer": spec.tags[a.b/c] in body must be of type string: "integer""#,
                r#"spec.port: Invalid value: "boolean": spec.port in body must be of type integer,string: "boolean""#,
                r#"spec.aclx: Invalid value: "aclx": unknown field: "aclx", did you mean "acl"?"#,
            ]
        );
        assert_eq!(
            messages(json!({"spec": {"size": null}}), &s),
            ["spec.size: Required value"]
        );
        assert_eq!(messages(json!({}), &s), ["spec: Required value"]);
        assert_eq!(
            messages(json!({"spec": []}), &s),
            [r#"spec: Invalid value: "array": spec in body must be of type object: "array""#]
        );
    }

    #[test]
    fn suggestions() {
        let names = ["toFieldPath", "fromFieldPath", "transforms", "type"];
        assert_eq!(
            closest("toFieldpath", names.into_iter()),
            [r#""toFieldPath""#]
        );
        assert_eq!(closest("tranforms", names.into_iter()), [r#""transforms""#]);
        assert!(closest("zzzzzz", names.into_iter()).is_empty());
    }
}
