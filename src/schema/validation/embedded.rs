//! `x-kubernetes-embedded-resource` objects, as apiextensions' `objectmeta.Validate` checks
//! them: `apiVersion` and `kind` are required, `apiVersion` must parse as a group/version,
//! `kind` must look like a DNS-1035 label (any case), and `metadata`'s `name`,
//! `generateName` and `namespace` must be valid. Labels, annotations and the other
//! ObjectMeta fields are not checked here.

use serde_json::{Map, Value};

use super::Subtrees;
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
                    let errs = dns1035_label(&kind.to_lowercase());
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
    for msg in path_segment_errors(generate_name, true) {
        out.push(FieldError::invalid(
            path.child("generateName"),
            generate_name,
            msg,
        ));
    }
    let name = text("name");
    for msg in path_segment_errors(name, false) {
        out.push(FieldError::invalid(path.child("name"), name, msg));
    }
    let namespace = text("namespace");
    if !namespace.is_empty() {
        for msg in dns1123_label(namespace) {
            out.push(FieldError::invalid(path.child("namespace"), namespace, msg));
        }
    }
}

/// `IsValidPathSegmentName` / `IsValidPathSegmentPrefix`.
fn path_segment_errors(name: &str, prefix: bool) -> Vec<String> {
    if !prefix {
        for illegal in [".", ".."] {
            if name == illegal {
                return vec![format!("may not be '{illegal}'")];
            }
        }
    }
    ["/", "%"]
        .into_iter()
        .filter(|illegal| name.contains(illegal))
        .map(|illegal| format!("may not contain '{illegal}'"))
        .collect()
}

/// `IsDNS1035Label`.
fn dns1035_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    let b = value.as_bytes();
    let ok = b.first().is_some_and(u8::is_ascii_lowercase)
        && b.last()
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-');
    if !ok {
        errs.push(regex_error(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character",
            "[a-z]([-a-z0-9]*[a-z0-9])?",
            &["my-name", "abc-123"],
        ));
    }
    errs
}

/// `IsDNS1123Label`.
fn dns1123_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    let b = value.as_bytes();
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    let ok = b.first().is_some_and(alnum)
        && b.last().is_some_and(alnum)
        && b.iter().all(|c| alnum(c) || *c == b'-');
    if !ok {
        errs.push(regex_error(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
            "[a-z0-9]([-a-z0-9]*[a-z0-9])?",
            &["my-name", "123-abc"],
        ));
    }
    errs
}

/// `validation.RegexError`, double space and all.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    let mut s = format!("{msg} (e.g. ");
    for (i, example) in examples.iter().enumerate() {
        if i > 0 {
            s.push_str(" or ");
        }
        s.push_str(&format!("'{example}', "));
    }
    s.push_str(&format!("regex used for validation is '{fmt}')"));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_messages_match_apimachinery() {
        assert_eq!(
            dns1035_label("1abc"),
            [
                "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
            ]
        );
        assert!(dns1035_label("bucket").is_empty());
        assert_eq!(path_segment_errors("..", false), ["may not be '..'"]);
        assert_eq!(
            path_segment_errors("a/b%", true),
            ["may not contain '/'", "may not contain '%'"]
        );
    }
}
