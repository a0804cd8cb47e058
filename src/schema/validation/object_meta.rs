//! `metadata`, as the API server validates it on create for every kind
//! (`ValidateObjectMetaAccessor`, Kubernetes v1.28): `generateName` and `name` by the kind's
//! name rule, the namespace, labels, annotations (keys and total size), finalizers. A CRD's
//! schema says nothing of `metadata`, so this runs whether or not the CRD is known.

use serde_json::{Map, Value};

use super::names::{self, NameRule};
use crate::findings::{BadValue, ErrorType, FieldError, Path};

/// `TotalAnnotationSizeLimitB`.
const ANNOTATIONS_MAX_BYTES: usize = 256 * 1024;

/// What the rules for an object's metadata depend on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObjectMetaRules {
    /// Whether the kind is namespaced (`None`: unknown, the namespace is not required).
    pub namespaced: Option<bool>,
    /// How names are checked.
    pub name: NameRule,
}

/// The errors of `object`'s `metadata`, at `root.metadata...`, in the API server's order.
///
/// Deliberate differences: a name the API server would generate from `generateName` is not
/// checked (Crossplane generates a valid one from a valid prefix); a namespace on a
/// cluster-scoped kind is not refused (the API server drops it on create); label and
/// annotation values that are not strings are reported at their key, in the words of a
/// schema type error, where the API server fails to decode `metadata` as a whole.
pub fn validate(object: &Value, rules: &ObjectMetaRules, root: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    // Paths are built only for an error: most objects have none.
    let at = || root.child("metadata");
    let empty = Map::new();
    let meta = crate::json::field(object, "metadata")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let text = |key: &str| {
        crate::json::member(meta, key)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let generate_name = text("generateName");
    if !generate_name.is_empty() {
        for msg in rules.name.check(generate_name, true) {
            errs.push(FieldError::invalid(
                at().child("generateName"),
                generate_name,
                msg,
            ));
        }
    }
    let name = text("name");
    if name.is_empty() {
        if generate_name.is_empty() {
            errs.push(FieldError::required(
                at().child("name"),
                "name or generateName is required",
            ));
        }
    } else {
        for msg in rules.name.check(name, false) {
            errs.push(FieldError::invalid(at().child("name"), name, msg));
        }
    }
    let namespace = text("namespace");
    if rules.namespaced == Some(true) {
        if namespace.is_empty() {
            errs.push(FieldError::required(at().child("namespace"), ""));
        } else {
            for msg in NameRule::DnsLabel.check(namespace, false) {
                errs.push(FieldError::invalid(at().child("namespace"), namespace, msg));
            }
        }
    }
    let labels = || at().child("labels");
    for (key, value) in strings(meta, "labels", &labels, &mut errs) {
        for msg in names::qualified_name(key) {
            errs.push(FieldError::invalid(labels(), key, msg));
        }
        for msg in names::label_value(value) {
            errs.push(FieldError::invalid(labels(), value, msg));
        }
    }
    let annotations = || at().child("annotations");
    let mut size = 0;
    for (key, value) in strings(meta, "annotations", &annotations, &mut errs) {
        // Case does not matter in annotation keys (lowered only when it has upper case).
        let lowered = if key.bytes().any(|b| b.is_ascii_uppercase()) || !key.is_ascii() {
            std::borrow::Cow::Owned(key.to_lowercase())
        } else {
            std::borrow::Cow::Borrowed(key)
        };
        for msg in names::qualified_name(&lowered) {
            errs.push(FieldError::invalid(annotations(), key, msg));
        }
        size += key.len() + value.len();
    }
    if size > ANNOTATIONS_MAX_BYTES {
        errs.push(FieldError::new(
            ErrorType::TooLong,
            annotations(),
            BadValue::Omit,
            format!("must have at most {ANNOTATIONS_MAX_BYTES} bytes"),
        ));
    }
    if let Some(refs) = crate::json::member(meta, "ownerReferences")
        .and_then(Value::as_array)
        .filter(|r| crate::budget::steps(r.len() as u64).is_ok())
    {
        owner_references(refs, &at().child("ownerReferences"), &mut errs);
    }
    if let Some(finalizers) = crate::json::member(meta, "finalizers")
        .and_then(Value::as_array)
        .filter(|f| crate::budget::steps(f.len() as u64).is_ok())
    {
        let at = at().child("finalizers");
        for f in finalizers.iter().filter_map(Value::as_str) {
            for msg in names::qualified_name(f) {
                errs.push(FieldError::invalid(at.clone(), f, msg));
            }
        }
        let has = |f: &str| finalizers.iter().any(|v| v.as_str() == Some(f));
        if has("orphan") && has("foregroundDeletion") {
            errs.push(FieldError::invalid(
                at,
                BadValue::Json(Value::Array(finalizers.clone())),
                "finalizer orphan and foregroundDeletion cannot be both set",
            ));
        }
    }
    errs
}

/// The string entries of the map `meta[key]`; an entry of another type is an error.
fn strings<'a>(
    meta: &'a Map<String, Value>,
    key: &str,
    at: &dyn Fn() -> Path,
    errs: &mut Vec<FieldError>,
) -> Vec<(&'a str, &'a str)> {
    let Some(map) = crate::json::member(meta, key).and_then(Value::as_object) else {
        return Vec::new();
    };
    // A patch set can put thousands of labels on each of thousands of resources.
    if crate::budget::steps(map.len() as u64).is_err() {
        return Vec::new();
    }
    let mut out = Vec::with_capacity(map.len());
    for (k, v) in map {
        match v.as_str() {
            Some(v) => out.push((k.as_str(), v)),
            None => {
                let field = at().key(k);
                let type_name = super::json_type_name(v);
                errs.push(FieldError::new(
                    ErrorType::TypeInvalid,
                    field.clone(),
                    BadValue::Str(type_name.to_string()),
                    format!(
                        "{} in body must be of type string: \"{type_name}\"",
                        field.as_str()
                    ),
                ));
            }
        }
    }
    out
}

/// `ValidateOwnerReferences` (apimachinery `objectmeta.go`): each reference's version, kind,
/// name and uid, and at most one controller. The API server reports them at
/// `metadata.ownerReferences` itself, without the entry's index.
fn owner_references(refs: &[Value], at: &Path, errs: &mut Vec<FieldError>) {
    let mut first_controller: Option<String> = None;
    for r in refs {
        let text = |key: &str| {
            crate::json::field(r, key)
                .and_then(Value::as_str)
                .unwrap_or_default()
        };
        let api_version = text("apiVersion");
        // `schema.FromAPIVersionAndKind`: `v1` or `group/v1`; anything else has no version.
        let version = match api_version.split_once('/') {
            None => api_version,
            Some((_, v)) if !v.contains('/') => v,
            Some(_) => "",
        };
        if version.is_empty() {
            errs.push(FieldError::invalid(
                at.child("apiVersion"),
                api_version,
                "version must not be empty",
            ));
        }
        for (key, what) in [("kind", "kind"), ("name", "name"), ("uid", "uid")] {
            if text(key).is_empty() {
                errs.push(FieldError::invalid(
                    at.child(key),
                    text(key),
                    format!("{what} must not be empty"),
                ));
            }
        }
        if crate::json::field(r, "controller").and_then(Value::as_bool) == Some(true) {
            let current = format!("{}/{}", text("kind"), text("name"));
            match &first_controller {
                Some(first) => errs.push(FieldError::new(
                    ErrorType::Invalid,
                    at.clone(),
                    BadValue::Omit,
                    format!(
                        "Only one reference can have Controller set to true. Found \"true\" in references for {first} and {current}"
                    ),
                )),
                None => first_controller = Some(current),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reports_what_the_api_server_reports() {
        let rules = ObjectMetaRules {
            namespaced: Some(true),
            name: NameRule::DnsSubdomain,
        };
        let object = json!({"metadata": {"name": "-controlplane", "labels": {"app/": "x"},
            "annotations": {"ok": "y"}}});
        let errs: Vec<String> = validate(&object, &rules, &Path::new("base"))
            .iter()
            .map(|e| format!("{}: {}", e.field, e.body()))
            .collect();
        assert_eq!(errs.len(), 4, "{errs:#?}");
        assert!(errs[0].starts_with(
            "base.metadata.name: Invalid value: \"-controlplane\": a lowercase RFC 1123 subdomain"
        ));
        assert_eq!(errs[1], "base.metadata.namespace: Required value");
        assert_eq!(
            errs[2],
            "base.metadata.labels: Invalid value: \"app/\": name part must be non-empty"
        );
    }

    /// apimachinery's `TestValidateObjectMetaOwnerReferences` cases, as the API server
    /// reports them: at `metadata.ownerReferences.<field>`, without the entry's index.
    #[test]
    fn owner_references_are_checked_as_apimachinery_checks_them() {
        let refs = [
            json!({"apiVersion": "customresourceVersion", "kind": "customresourceKind", "name": "name"}),
            json!({"apiVersion": "a/b/c", "kind": "K", "name": "n", "uid": "1"}),
            json!({"apiVersion": "v1", "kind": "K", "name": "first", "uid": "2", "controller": true}),
            json!({"apiVersion": "v1", "kind": "K", "name": "second", "uid": "3", "controller": true}),
        ];
        let mut errs = Vec::new();
        owner_references(&refs, &Path::new("metadata.ownerReferences"), &mut errs);
        let errs: Vec<String> = errs
            .iter()
            .map(|e| format!("{}: {}", e.field, e.body()))
            .collect();
        assert_eq!(
            errs,
            [
                "metadata.ownerReferences.uid: Invalid value: \"\": uid must not be empty",
                "metadata.ownerReferences.apiVersion: Invalid value: \"a/b/c\": version must not be empty",
                "metadata.ownerReferences: Invalid value: Only one reference can have Controller set to true. Found \"true\" in references for K/first and K/second",
            ]
        );
    }
}
