//! CustomResourceDefinitions (`apiextensions.k8s.io/v1`, and `v1beta1`) and per-version
//! schema selection.
//!
//! Schema selection follows the API server's conversion of a v1 CRD to its internal form,
//! which Crossplane's validator relies on: when every version carries an identical schema
//! (including the single-version case) the schema is hoisted to the CRD and serves *any*
//! version asked for; otherwise the version whose name equals the requested one is used,
//! and an unknown version has no schema at all.

use std::cmp::Ordering;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::go::version::compare_kube_aware_version_strings;

use super::structural::{Schema, SchemaError, index, join};

/// `spec.names` of a CRD.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CrdNames {
    /// `kind`, e.g. `Bucket`.
    pub kind: String,
    /// `plural`, e.g. `buckets`.
    pub plural: String,
    /// `singular`.
    pub singular: Option<String>,
    /// `listKind`.
    pub list_kind: Option<String>,
    /// `shortNames`.
    pub short_names: Vec<String>,
    /// `categories`.
    pub categories: Vec<String>,
}

/// `spec.scope` of a CRD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Namespaced resources.
    Namespaced,
    /// Cluster-scoped resources.
    Cluster,
    /// Any other (invalid) value, kept verbatim.
    Other(String),
}

impl Scope {
    fn parse(s: &str) -> Self {
        match s {
            "Namespaced" => Self::Namespaced,
            "Cluster" => Self::Cluster,
            other => Self::Other(other.to_string()),
        }
    }
}

/// One entry of `spec.versions`.
#[derive(Debug, Clone, PartialEq)]
pub struct CrdVersion {
    /// Version name, e.g. `v1beta1`.
    pub name: String,
    /// Whether the version is served.
    pub served: bool,
    /// Whether this is the storage version.
    pub storage: bool,
    /// `deprecated`: the API server answers every request to this version with a warning.
    pub deprecated: bool,
    /// `deprecationWarning`: that warning's text, instead of the API server's default one.
    pub deprecation_warning: Option<String>,
    /// The version's structural schema; `None` when absent or unparsable.
    pub schema: Option<Arc<Schema>>,
    /// Why `schema` is `None` although the version declares one (or must have one).
    pub schema_error: Option<SchemaError>,
}

/// The schema chosen for a requested version (see the module docs for the rule).
#[derive(Debug, Clone, Copy)]
pub struct SchemaSelection<'a> {
    /// The selected schema, if any.
    pub schema: Option<&'a Arc<Schema>>,
    /// The version entry whose name equals the requested version, if any.
    pub version: Option<&'a CrdVersion>,
    /// True when the hoisted (shared) schema was used, whatever the version.
    pub shared: bool,
    /// The parse error of the schema that would have been selected.
    pub schema_error: Option<&'a SchemaError>,
}

/// A parsed CustomResourceDefinition.
#[derive(Debug, Clone, PartialEq)]
pub struct Crd {
    /// `metadata.name` (or `<plural>.<group>` when absent).
    pub name: String,
    /// `apiVersion` of the CRD object itself.
    pub api_version: String,
    /// `spec.group` (empty for the core group).
    pub group: String,
    /// `spec.names`.
    pub names: CrdNames,
    /// `spec.scope`.
    pub scope: Scope,
    /// `spec.versions`, in document order.
    pub versions: Vec<CrdVersion>,
    /// True when every version carries an identical schema (the API server then hoists
    /// it and uses it for any version).
    pub identical_schemas: bool,
    /// Problems that concern the CRD as a whole (not a single version's schema).
    pub problems: Vec<SchemaError>,
}

/// True for `apiVersion`/`kind` pairs that denote a CustomResourceDefinition.
pub fn is_crd(api_version: &str, kind: &str) -> bool {
    kind == "CustomResourceDefinition"
        && matches!(
            api_version,
            "apiextensions.k8s.io/v1" | "apiextensions.k8s.io/v1beta1"
        )
}

pub(crate) fn obj<'a>(value: &'a Value, path: &str) -> Result<&'a Map<String, Value>, SchemaError> {
    match value {
        Value::Object(m) => Ok(m),
        _ => Err(SchemaError::WrongType {
            path: path.to_string(),
            expected: "an object",
        }),
    }
}

/// An optional object member; `null` counts as absent.
pub(crate) fn opt_obj<'a>(
    parent: &'a Map<String, Value>,
    path: &str,
    key: &str,
) -> Result<Option<&'a Map<String, Value>>, SchemaError> {
    match parent.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => obj(v, &join(path, key)).map(Some),
    }
}

pub(crate) fn opt_str<'a>(
    parent: &'a Map<String, Value>,
    path: &str,
    key: &str,
) -> Result<Option<&'a str>, SchemaError> {
    match parent.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(SchemaError::WrongType {
            path: join(path, key),
            expected: "a string",
        }),
    }
}

pub(crate) fn req_str<'a>(
    parent: &'a Map<String, Value>,
    path: &str,
    key: &str,
) -> Result<&'a str, SchemaError> {
    opt_str(parent, path, key)?.ok_or_else(|| SchemaError::Missing {
        path: join(path, key),
    })
}

pub(crate) fn opt_bool(
    parent: &Map<String, Value>,
    path: &str,
    key: &str,
) -> Result<Option<bool>, SchemaError> {
    match parent.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(SchemaError::WrongType {
            path: join(path, key),
            expected: "a boolean",
        }),
    }
}

pub(crate) fn opt_array<'a>(
    parent: &'a Map<String, Value>,
    path: &str,
    key: &str,
) -> Result<Option<&'a Vec<Value>>, SchemaError> {
    match parent.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(a)) => Ok(Some(a)),
        Some(_) => Err(SchemaError::WrongType {
            path: join(path, key),
            expected: "an array",
        }),
    }
}

fn strings(parent: &Map<String, Value>, path: &str, key: &str) -> Result<Vec<String>, SchemaError> {
    let Some(items) = opt_array(parent, path, key)? else {
        return Ok(Vec::new());
    };
    items
        .iter()
        .enumerate()
        .map(|(i, v)| match v {
            Value::String(s) => Ok(s.clone()),
            _ => Err(SchemaError::WrongType {
                path: index(&join(path, key), i),
                expected: "a string",
            }),
        })
        .collect()
}

/// Parses `spec.names` (or an XRD's `spec.names` / `spec.claimNames`) at `path`.
pub(crate) fn parse_names(names: &Map<String, Value>, path: &str) -> Result<CrdNames, SchemaError> {
    Ok(CrdNames {
        kind: req_str(names, path, "kind")?.to_string(),
        plural: opt_str(names, path, "plural")?
            .unwrap_or_default()
            .to_string(),
        singular: opt_str(names, path, "singular")?.map(str::to_string),
        list_kind: opt_str(names, path, "listKind")?.map(str::to_string),
        short_names: strings(names, path, "shortNames")?,
        categories: strings(names, path, "categories")?,
    })
}

/// A version before its schema is parsed: the effective raw schema and its location.
struct RawVersion<'a> {
    name: String,
    served: bool,
    storage: bool,
    deprecated: bool,
    deprecation_warning: Option<String>,
    schema: Option<(&'a Value, String)>,
    /// A `schema` member that is not an object: reported on the version, not fatal.
    error: Option<SchemaError>,
}

/// `openAPIV3Schema` inside a `schema`/`validation` object, if present.
fn open_api_schema<'a>(
    holder: Option<&'a Map<String, Value>>,
    path: &str,
) -> Result<Option<(&'a Value, String)>, SchemaError> {
    let Some(holder) = holder else {
        return Ok(None);
    };
    Ok(match holder.get("openAPIV3Schema") {
        None | Some(Value::Null) => None,
        Some(v) => Some((v, join(path, "openAPIV3Schema"))),
    })
}

impl Crd {
    /// Parses a CustomResourceDefinition object (`apiextensions.k8s.io/v1` or `v1beta1`).
    ///
    /// Structural problems of the CRD (missing group or kind, wrong JSON types outside the
    /// schemas) are errors; a version whose schema is missing or unparsable is kept with
    /// `schema: None` and the reason in [`CrdVersion::schema_error`].
    pub fn from_value(value: &Value) -> Result<Crd, SchemaError> {
        let root = obj(value, "")?;
        let api_version = opt_str(root, "", "apiVersion")?
            .unwrap_or("apiextensions.k8s.io/v1")
            .to_string();
        let spec = opt_obj(root, "", "spec")?.ok_or_else(|| SchemaError::Missing {
            path: "spec".to_string(),
        })?;
        let group = opt_str(spec, "spec", "group")?
            .unwrap_or_default()
            .to_string();
        let names_obj = opt_obj(spec, "spec", "names")?.ok_or_else(|| SchemaError::Missing {
            path: "spec.names".to_string(),
        })?;
        let names = parse_names(names_obj, "spec.names")?;
        let scope = Scope::parse(opt_str(spec, "spec", "scope")?.unwrap_or_default());
        let name = match opt_obj(root, "", "metadata")? {
            Some(meta) => opt_str(meta, "metadata", "name")?.map(str::to_string),
            None => None,
        }
        .unwrap_or_else(|| format!("{}.{}", names.plural, group));

        let mut problems = Vec::new();
        // v1beta1 only: a top-level schema that applies to every version.
        let top = open_api_schema(opt_obj(spec, "spec", "validation")?, "spec.validation")?;

        let mut raw_versions: Vec<RawVersion<'_>> = Vec::new();
        match opt_array(spec, "spec", "versions")? {
            Some(items) if !items.is_empty() => {
                for (i, item) in items.iter().enumerate() {
                    let at = index("spec.versions", i);
                    let v = obj(item, &at)?;
                    let (own, error) = match opt_obj(v, &at, "schema") {
                        Ok(holder) => (open_api_schema(holder, &join(&at, "schema"))?, None),
                        Err(e) => (None, Some(e)),
                    };
                    if own.is_some() && top.is_some() {
                        problems.push(SchemaError::Invalid {
                            path: join(&at, "schema"),
                            message: "top-level and per-version schemas must be mutual exclusive"
                                .to_string(),
                        });
                    }
                    raw_versions.push(RawVersion {
                        name: req_str(v, &at, "name")?.to_string(),
                        served: opt_bool(v, &at, "served")?.unwrap_or(false),
                        storage: opt_bool(v, &at, "storage")?.unwrap_or(false),
                        deprecated: opt_bool(v, &at, "deprecated")?.unwrap_or(false),
                        deprecation_warning: opt_str(v, &at, "deprecationWarning")?
                            .map(str::to_string),
                        schema: if error.is_some() {
                            None
                        } else {
                            own.or_else(|| top.clone())
                        },
                        error,
                    });
                }
            }
            _ => {
                // v1beta1 allowed a single `spec.version` instead of a list.
                let Some(version) = opt_str(spec, "spec", "version")? else {
                    return Err(SchemaError::Missing {
                        path: "spec.versions".to_string(),
                    });
                };
                raw_versions.push(RawVersion {
                    name: version.to_string(),
                    served: true,
                    storage: true,
                    deprecated: false,
                    deprecation_warning: None,
                    schema: top.clone(),
                    error: None,
                });
            }
        }

        // The API server hoists the schema when all versions carry an identical one;
        // compare the raw values (key order does not matter) and parse it only once.
        let identical_schemas = match raw_versions.first().and_then(|v| v.schema.as_ref()) {
            Some((first, _)) => raw_versions
                .iter()
                .all(|v| v.schema.as_ref().is_some_and(|(s, _)| *s == *first)),
            None => false,
        };
        let mut shared: Option<Result<Arc<Schema>, SchemaError>> = None;
        let versions = raw_versions
            .into_iter()
            .map(|raw_version| {
                let RawVersion {
                    name,
                    served,
                    storage,
                    deprecated,
                    deprecation_warning,
                    schema: raw,
                    error,
                } = raw_version;
                let parsed = match raw {
                    None => error.map(Err),
                    Some((v, at)) if identical_schemas => Some(
                        shared
                            .get_or_insert_with(|| Schema::from_value_at(v, &at).map(Arc::new))
                            .clone(),
                    ),
                    Some((v, at)) => Some(Schema::from_value_at(v, &at).map(Arc::new)),
                };
                let (schema, schema_error) = match parsed {
                    None => (None, None),
                    Some(Ok(s)) => (Some(s), None),
                    Some(Err(e)) => (None, Some(e)),
                };
                CrdVersion {
                    name,
                    served,
                    storage,
                    deprecated,
                    deprecation_warning,
                    schema,
                    schema_error,
                }
            })
            .collect();

        Ok(Crd {
            name,
            api_version,
            group,
            names,
            scope,
            versions,
            identical_schemas,
            problems,
        })
    }

    /// `<Kind>.<group>`, as Crossplane's CRD index keys it.
    pub fn group_kind(&self) -> String {
        format!("{}.{}", self.names.kind, self.group)
    }

    /// The version entry named `version`, if any.
    pub fn version(&self, version: &str) -> Option<&CrdVersion> {
        self.versions.iter().find(|v| v.name == version)
    }

    /// Names of the served versions, in document order.
    pub fn served_versions(&self) -> Vec<&str> {
        self.versions
            .iter()
            .filter(|v| v.served)
            .map(|v| v.name.as_str())
            .collect()
    }

    /// Selects the schema for `version` (see the module docs for the rule).
    pub fn schema_for(&self, version: &str) -> SchemaSelection<'_> {
        let named = self.version(version);
        let source = if self.identical_schemas {
            self.versions.first()
        } else {
            named
        };
        SchemaSelection {
            schema: source.and_then(|v| v.schema.as_ref()),
            version: named,
            shared: self.identical_schemas,
            schema_error: source.and_then(|v| v.schema_error.as_ref()),
        }
    }

    /// The warning the API server sends with every answer to a request for `version` (its
    /// `customresource_handler.go`), when the CRD serves that version and marks it
    /// `deprecated`: the version's `deprecationWarning`, else `defaultDeprecationWarning`'s
    /// `<group>/<version> <Kind> is deprecated`, followed by `; use <group>/<other> <Kind>`
    /// for the highest-priority served, non-deprecated version above it, if any.
    pub fn deprecation_warning(&self, version: &str) -> Option<String> {
        let v = self.version(version).filter(|v| v.served && v.deprecated)?;
        if let Some(text) = &v.deprecation_warning {
            return Some(text.clone());
        }
        let (group, kind) = (&self.group, &self.names.kind);
        let mut message = format!("{group}/{version} {kind} is deprecated");
        // Go sorts the candidates by priority and takes the first; on a tie (`v01`, `v1`)
        // its unstable sort picks either, here the first in document order.
        let newer = self
            .versions
            .iter()
            .filter(|o| {
                o.served
                    && !o.deprecated
                    && compare_kube_aware_version_strings(version, &o.name) == Ordering::Less
            })
            .reduce(|best, o| {
                if compare_kube_aware_version_strings(&o.name, &best.name) == Ordering::Greater {
                    o
                } else {
                    best
                }
            });
        if let Some(newer) = newer {
            message.push_str(&format!("; use {group}/{} {kind}", newer.name));
        }
        Some(message)
    }

    /// Every problem found: CRD-level ones, then each version's schema error.
    pub fn all_problems(&self) -> impl Iterator<Item = &SchemaError> {
        self.problems
            .iter()
            .chain(self.versions.iter().filter_map(|v| v.schema_error.as_ref()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd(versions: Value) -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.org"},
            "spec": {
                "group": "example.org",
                "scope": "Namespaced",
                "names": {"kind": "Widget", "plural": "widgets", "listKind": "WidgetList",
                          "singular": "widget", "categories": ["all"]},
                "versions": versions
            }
        })
    }

    fn schema_with(field: &str) -> Value {
        json!({"openAPIV3Schema": {"type": "object", "properties": {
            "spec": {"type": "object", "properties": {field: {"type": "string"}}}}}})
    }

    #[test]
    fn parses_names_scope_and_versions() {
        let c = Crd::from_value(&crd(json!([
            {"name": "v1", "served": true, "storage": true, "schema": schema_with("a")}
        ])))
        .expect("valid");
        assert_eq!(c.name, "widgets.example.org");
        assert_eq!(c.group_kind(), "Widget.example.org");
        assert_eq!(c.names.list_kind.as_deref(), Some("WidgetList"));
        assert_eq!(c.names.categories, vec!["all"]);
        assert_eq!(c.scope, Scope::Namespaced);
        assert_eq!(c.served_versions(), vec!["v1"]);
        assert!(c.identical_schemas);
    }

    #[test]
    fn identical_schemas_serve_any_version() {
        let c = Crd::from_value(&crd(json!([
            {"name": "v1alpha1", "served": true, "storage": false, "schema": schema_with("a")},
            {"name": "v1", "served": true, "storage": true, "schema": schema_with("a")}
        ])))
        .expect("valid");
        assert!(c.identical_schemas);
        for version in ["v1alpha1", "v1", "v9"] {
            let sel = c.schema_for(version);
            let s = sel.schema.expect("shared schema");
            assert!(s.descend(&["spec", "a"]).is_some());
            assert!(sel.shared);
        }
        assert!(c.schema_for("v9").version.is_none());
        // The shared schema is parsed once.
        assert!(Arc::ptr_eq(
            c.versions[0].schema.as_ref().expect("s"),
            c.versions[1].schema.as_ref().expect("s")
        ));
    }

    #[test]
    fn different_schemas_select_by_name() {
        let c = Crd::from_value(&crd(json!([
            {"name": "v1alpha1", "served": true, "storage": false, "schema": schema_with("a")},
            {"name": "v1", "served": true, "storage": true, "schema": schema_with("b")}
        ])))
        .expect("valid");
        assert!(!c.identical_schemas);
        let a = c.schema_for("v1alpha1").schema.expect("v1alpha1");
        assert!(a.descend(&["spec", "a"]).is_some() && a.descend(&["spec", "b"]).is_none());
        let b = c.schema_for("v1").schema.expect("v1");
        assert!(b.descend(&["spec", "b"]).is_some());
        let none = c.schema_for("v2");
        assert!(none.schema.is_none() && none.version.is_none());
    }

    #[test]
    fn a_version_without_schema_is_not_identical() {
        let c = Crd::from_value(&crd(json!([
            {"name": "v1alpha1", "served": true, "storage": false},
            {"name": "v1", "served": true, "storage": true, "schema": schema_with("a")}
        ])))
        .expect("valid");
        assert!(!c.identical_schemas);
        assert!(c.schema_for("v1alpha1").schema.is_none());
        assert!(c.schema_for("v1alpha1").version.is_some());
        assert!(c.schema_for("v1").schema.is_some());
    }

    #[test]
    fn unparsable_schema_is_reported_not_fatal() {
        let c = Crd::from_value(&crd(json!([
            {"name": "v1", "served": true, "storage": true,
             "schema": {"openAPIV3Schema": {"properties": {"spec": {"maxItems": "x"}}}}}
        ])))
        .expect("CRD still parses");
        let sel = c.schema_for("v1");
        assert!(sel.schema.is_none());
        assert_eq!(
            sel.schema_error.map(ToString::to_string).as_deref(),
            Some(
                "spec.versions[0].schema.openAPIV3Schema.properties.spec.maxItems: expected an integer"
            )
        );
        assert_eq!(c.all_problems().count(), 1);
    }

    #[test]
    fn a_schema_that_is_not_an_object_is_reported_on_the_version() {
        let c = Crd::from_value(&crd(json!([
            {"name": "v1", "served": true, "storage": true, "schema": "oops"},
            {"name": "v2", "served": true, "storage": false, "schema": schema_with("a")}
        ])))
        .expect("CRD still parses");
        assert_eq!(
            c.schema_for("v1")
                .schema_error
                .map(ToString::to_string)
                .as_deref(),
            Some("spec.versions[0].schema: expected an object")
        );
        assert!(c.schema_for("v2").schema.is_some());
    }

    #[test]
    fn v1beta1_top_level_validation_applies_to_all_versions() {
        let c = Crd::from_value(&json!({
            "apiVersion": "apiextensions.k8s.io/v1beta1",
            "kind": "CustomResourceDefinition",
            "spec": {
                "group": "example.org",
                "names": {"kind": "Widget", "plural": "widgets"},
                "scope": "Cluster",
                "validation": schema_with("a"),
                "versions": [{"name": "v1alpha1", "served": true, "storage": true},
                             {"name": "v1beta1", "served": true, "storage": false}]
            }
        }))
        .expect("valid");
        assert_eq!(c.name, "widgets.example.org");
        assert_eq!(c.scope, Scope::Cluster);
        assert!(c.identical_schemas);
        assert!(c.schema_for("anything").schema.is_some());

        let single = Crd::from_value(&json!({
            "apiVersion": "apiextensions.k8s.io/v1beta1",
            "kind": "CustomResourceDefinition",
            "spec": {"group": "example.org", "version": "v1",
                     "names": {"kind": "Widget", "plural": "widgets"},
                     "validation": schema_with("a")}
        }))
        .expect("valid");
        assert_eq!(single.served_versions(), vec!["v1"]);
        assert!(single.schema_for("v1").schema.is_some());
    }

    #[test]
    fn deprecation_warnings_are_the_api_servers() {
        let v = |name: &str, served: bool, deprecated: bool| {
            json!({"name": name, "served": served, "storage": false, "deprecated": deprecated,
                   "schema": schema_with("a")})
        };
        // The highest-priority served, non-deprecated version above the deprecated one.
        let c = Crd::from_value(&crd(json!([
            v("v1alpha1", true, true),
            v("v1beta1", true, false),
            v("v2alpha1", true, false),
            v("v1", false, false),
            v("v1beta2", true, false),
        ])))
        .expect("valid");
        assert_eq!(
            c.deprecation_warning("v1alpha1").as_deref(),
            Some("example.org/v1alpha1 Widget is deprecated; use example.org/v1beta2 Widget")
        );
        assert_eq!(c.deprecation_warning("v1beta1"), None);
        assert_eq!(c.deprecation_warning("v9"), None);
        // Nothing above it (a deprecated or unserved version is no suggestion).
        let c = Crd::from_value(&crd(json!([
            v("v1", true, true),
            v("v1beta1", true, false),
            v("v2", true, true),
            v("v3", false, false),
        ])))
        .expect("valid");
        assert_eq!(
            c.deprecation_warning("v1").as_deref(),
            Some("example.org/v1 Widget is deprecated")
        );
        // An unserved deprecated version gets no answer at all.
        let c = Crd::from_value(&crd(json!([v("v1", false, true), v("v2", true, false)])))
            .expect("valid");
        assert_eq!(c.deprecation_warning("v1"), None);
        // `deprecationWarning` replaces the default text whole.
        let mut custom = v("v1", true, true);
        custom["deprecationWarning"] = json!("v1 goes away in 2027");
        let c = Crd::from_value(&crd(json!([custom, v("v2", true, false)]))).expect("valid");
        assert_eq!(
            c.versions[0].deprecation_warning.as_deref(),
            Some("v1 goes away in 2027")
        );
        assert_eq!(
            c.deprecation_warning("v1").as_deref(),
            Some("v1 goes away in 2027")
        );
        // Without `deprecated`, `deprecationWarning` says nothing (the API server refuses it).
        let mut ignored = v("v1", true, false);
        ignored["deprecationWarning"] = json!("unused");
        let c = Crd::from_value(&crd(json!([ignored]))).expect("valid");
        assert_eq!(c.deprecation_warning("v1"), None);
        let err = Crd::from_value(&crd(json!([{"name": "v1", "deprecated": "yes"}])))
            .expect_err("not a boolean");
        assert_eq!(
            err.to_string(),
            "spec.versions[0].deprecated: expected a boolean"
        );
    }

    #[test]
    fn structural_errors_are_typed() {
        let err =
            Crd::from_value(&json!({"spec": {"group": "g", "names": {}}})).expect_err("no kind");
        assert_eq!(
            err.to_string(),
            "spec.names.kind: required value is missing"
        );
        let err = Crd::from_value(&json!({"spec": {"group": "g", "names": {"kind": "K"},
                                                     "versions": {"a": 1}}}))
        .expect_err("versions not a list");
        assert_eq!(err.to_string(), "spec.versions: expected an array");
        let err = Crd::from_value(&json!({"metadata": {"name": "x"}})).expect_err("no spec");
        assert_eq!(err.to_string(), "spec: required value is missing");
    }
}
