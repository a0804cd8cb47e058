//! `x-kubernetes-embedded-resource` objects, as apiextensions' `objectmeta.Validate` checks
//! them: `apiVersion` and `kind` are required, `apiVersion` must parse as a group/version,
//! `kind` must look like a DNS-1035 label (any case), and `metadata`'s `name`,
//! `generateName` and `namespace` must be valid. Labels, annotations and the other
//! ObjectMeta fields are not checked here.

use serde_json::{Map, Value};

use super::{Subtrees, names};
use crate::findings::{BadValue, FieldError, Path};
use crate::schema::Schema;

/// Appends the embedded-resource errors of `value` to `out`.
pub(super) fn validate(
    value: &Value,
    schema: &Schema,
    relevant: &Subtrees,
    root: &Path,
    out: &mut Vec<FieldError>,
) {
    // The root is inline in the compiled schema (its address moves with it): always walked.
    relevant.walk(value, schema, root, &mut |value, schema, path| {
        if schema.embedded_resource
            && let Value::Object(map) = value
        {
            embedded_resource(map, path, out);
        }
    });
}

/// `validateEmbeddedResource`.
fn embedded_resource(map: &Map<String, Value>, path: &Path, out: &mut Vec<FieldError>) {
    for key in ["apiVersion", "kind"] {
        if !map.contains_key(key) {
            out.push(FieldError::required(path.child(key), ""));
        }
    }
    for (key, value) in map {
        match key.as_str() {
            "apiVersion" => {
                if let Some(v) = non_empty_string(value, &path.child(key), out)
                    && v != "/"
                    && v.matches('/').count() > 1
                {
                    out.push(FieldError::invalid(
                        path.child(key),
                        v,
                        format!("unexpected GroupVersion string: {v}"),
                    ));
                }
            }
            "kind" => {
                if let Some(kind) = non_empty_string(value, &path.child(key), out) {
                    let errs = names::dns1035_label(&kind.to_lowercase());
                    if !errs.is_empty() {
                        out.push(FieldError::invalid(
                            path.child(key),
                            kind,
                            format!(
                                "may have mixed case, but should otherwise match: {}",
                                errs.join(",")
                            ),
                        ));
                    }
                }
            }
            "metadata" => {
                if let Value::Object(meta) = value {
                    object_meta(meta, &path.child("metadata"), out);
                }
            }
            _ => {}
        }
    }
}

/// `value` as a string to check further; an error for a non-string or an empty one.
fn non_empty_string<'a>(
    value: &'a Value,
    field: &Path,
    out: &mut Vec<FieldError>,
) -> Option<&'a str> {
    match value.as_str() {
        None => out.push(FieldError::invalid(
            field.clone(),
            BadValue::from_json(value),
            "must be a string",
        )),
        Some("") => out.push(FieldError::invalid(field.clone(), "", "must not be empty")),
        Some(v) => return Some(v),
    }
    None
}

/// `ValidateObjectMeta` with `ValidatePathSegmentName`, limited to names and namespace. A
/// missing name is fine (the API server substitutes one before checking).
fn object_meta(meta: &Map<String, Value>, path: &Path, out: &mut Vec<FieldError>) {
    let text = |key: &str| meta.get(key).and_then(Value::as_str).unwrap_or_default();
    let generate_name = text("generateName");
    for msg in names::path_segment(generate_name, true) {
        out.push(FieldError::invalid(
            path.child("generateName"),
            generate_name,
            msg,
        ));
    }
    let name = text("name");
    for msg in names::path_segment(name, false) {
        out.push(FieldError::invalid(path.child("name"), name, msg));
    }
    let namespace = text("namespace");
    if !namespace.is_empty() {
        for msg in names::dns1123_label(namespace) {
            out.push(FieldError::invalid(path.child("namespace"), namespace, msg));
        }
    }
}
