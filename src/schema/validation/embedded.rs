//! `x-kubernetes-embedded-resource` objects, as apiextensions' `objectmeta.Validate` checks
//! them: `apiVersion` and `kind` are required, `apiVersion` must parse as a group/version,
//! `kind` must look like a DNS-1035 label (any case), and `metadata`'s `name`,
//! `generateName` and `namespace` must be valid. Labels, annotations and the other
//! ObjectMeta fields are not checked here.

use serde_json::{Map, Value};

use super::{Subtrees, names};
use crate::findings::{BadValue, FieldError, Path, PathAt};
use crate::json::member;
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
fn embedded_resource(map: &Map<String, Value>, path: &PathAt<'_>, out: &mut Vec<FieldError>) {
    for key in ["apiVersion", "kind"] {
        if member(map, key).is_none() {
            out.push(FieldError::required(path.path().child(key), ""));
        }
    }
    for (key, value) in map {
        match key.as_str() {
            "apiVersion" => {
                if let Some(v) = non_empty_string(value, &PathAt::Child(path, key), out)
                    && v != "/"
                    && v.matches('/').count() > 1
                {
                    out.push(FieldError::invalid(
                        path.path().child(key),
                        v,
                        format!("unexpected GroupVersion string: {v}"),
                    ));
                }
            }
            "kind" => {
                if let Some(kind) = non_empty_string(value, &PathAt::Child(path, key), out) {
                    let errs = names::dns1035_label_lowercased(kind);
                    if !errs.is_empty() {
                        out.push(FieldError::invalid(
                            path.path().child(key),
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
                    object_meta(meta, &PathAt::Child(path, "metadata"), out);
                }
            }
            _ => {}
        }
    }
}

/// `value` as a string to check further; an error for a non-string or an empty one.
fn non_empty_string<'a>(
    value: &'a Value,
    field: &PathAt<'_>,
    out: &mut Vec<FieldError>,
) -> Option<&'a str> {
    match value.as_str() {
        None => out.push(FieldError::invalid(
            field.path(),
            BadValue::from_json(value),
            "must be a string",
        )),
        Some("") => out.push(FieldError::invalid(field.path(), "", "must not be empty")),
        Some(v) => return Some(v),
    }
    None
}

/// `ValidateObjectMeta` with `ValidatePathSegmentName`, limited to names and namespace. A
/// missing name is fine (the API server substitutes one before checking).
fn object_meta(meta: &Map<String, Value>, path: &PathAt<'_>, out: &mut Vec<FieldError>) {
    let text = |key: &str| {
        member(meta, key)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let generate_name = text("generateName");
    for msg in names::path_segment(generate_name, true) {
        out.push(FieldError::invalid(
            path.path().child("generateName"),
            generate_name,
            msg,
        ));
    }
    let name = text("name");
    for msg in names::path_segment(name, false) {
        out.push(FieldError::invalid(path.path().child("name"), name, msg));
    }
    let namespace = text("namespace");
    if !namespace.is_empty() {
        for msg in names::dns1123_label(namespace) {
            out.push(FieldError::invalid(
                path.path().child("namespace"),
                namespace,
                msg,
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::validation::shown_errors;
    use serde_json::json;

    /// The errors of `resources` below a schema whose items' `base` is an embedded
    /// resource, as a function-patch-and-transform input's are.
    fn errors(resources: Value) -> Vec<String> {
        let schema = Schema::from_value(&json!({"type": "object", "properties": {
        "resources": {"type": "array", "items": {"type": "object", "properties": {
            "base": {
                "type": "object",
                "x-kubernetes-embedded-resource": true,
                "x-kubernetes-preserve-unknown-fields": true
            }
        }}}}}))
        .expect("schema");
        shown_errors(
            &schema,
            json!({"resources": resources}),
            "spec.pipeline[0].input",
        )
    }

    #[test]
    fn embedded_resources_are_checked_at_their_place() {
        let ok = json!({"apiVersion": "ec2.aws.upbound.io/v1beta1", "kind": "VPCEndpoint",
            "metadata": {"name": "a", "generateName": "b-", "namespace": "c"}});
        assert_eq!(errors(json!([{"base": ok}])), Vec::<String>::new());
        let bad = json!({"apiVersion": "a/b/c", "kind": "Bad_Kind",
            "metadata": {"name": "..", "namespace": "Up"}});
        let mixed = "may have mixed case, but should otherwise match: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
        assert_eq!(
            errors(json!([{"base": ok}, {"base": bad}, {"base": {"kind": ""}}])),
            [
                r#"spec.pipeline[0].input.resources[1].base.apiVersion: Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c"#.to_string(),
                format!(r#"spec.pipeline[0].input.resources[1].base.kind: Invalid value: "Bad_Kind": {mixed}"#),
                r#"spec.pipeline[0].input.resources[1].base.metadata.name: Invalid value: "..": may not be '..'"#.to_string(),
                r#"spec.pipeline[0].input.resources[1].base.metadata.namespace: Invalid value: "Up": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"#.to_string(),
                "spec.pipeline[0].input.resources[2].base.apiVersion: Required value".to_string(),
                r#"spec.pipeline[0].input.resources[2].base.kind: Invalid value: "": must not be empty"#.to_string(),
            ]
        );
    }
}
