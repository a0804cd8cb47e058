//! The CRDs Crossplane generates from a CompositeResourceDefinition (XRD).
//!
//! Reproduces crossplane-runtime v2.3.3's `pkg/xcrd` (`crd.go`, `schemas.go`), the generator
//! Crossplane v2.3.4 runs. The layout follows the XRD's `spec.scope`, whatever API version the
//! XRD came through (`ForCompositeResource` derefs `Spec.Scope`, nothing else); the XRD CRD
//! defaults it to `LegacyCluster` in `apiextensions.crossplane.io/v1` and `Namespaced` in `v2`:
//!
//! - `Namespaced`/`Cluster`: the machinery lives under `spec.crossplane` (composition
//!   selection and `resourceRefs`, without a namespace for Namespaced XRs); `status` has only
//!   `conditions` (no claim, no connection secret in v2).
//! - `LegacyCluster`: the machinery directly under `spec`/`status` as in v1 (`claimRef`,
//!   `writeConnectionSecretToRef`, `status.connectionDetails`, `status.claimConditionTypes`),
//!   without v1's `environmentConfigRefs` and `publishConnectionDetailsTo`; the only scope
//!   that may offer a claim.
//!
//! The XRD CRD's CEL rules are checked too, as the API server would refuse such an XRD: a v2
//! XRD with `claimNames` or `connectionSecretKeys`, a v1 one with those and another scope
//! than `LegacyCluster`.
//!
//! How a version's schema is built (`genCrdVersion`): the root is Crossplane's base
//! (`type: object`, `required: [spec]`, `apiVersion`, `kind`, `metadata.name` with
//! `maxLength` 63 or the XRD's smaller one); from the XRD's `spec` only `properties`,
//! `required`, `x-kubernetes-validations`, `oneOf`, `x-kubernetes-preserve-unknown-fields`
//! and `description` are kept, from its `status` the same minus preserve-unknown-fields;
//! everything else at those levels is dropped. Machinery fields are written last, so they
//! replace same-named XRD fields.
//!
//! The XRD is taken as the API server stores it: `defaultCompositionUpdatePolicy` and
//! `defaultCompositeDeletePolicy` absent from a file get the XRD CRD's defaults
//! (`Automatic`, `Background`), and `scope` gets the default of the XRD's API version.

use serde_json::{Map, Value, json};

use super::crd::{Crd, obj, opt_array, opt_bool, opt_obj, opt_str, parse_names, req_str};
use super::structural::{Schema, SchemaError, index, join};

/// Longest name Crossplane allows for XRs and claims (it is used as a label value).
const MAX_NAME_LENGTH: u64 = 63;

/// True for `apiVersion`/`kind` pairs that denote a Crossplane CompositeResourceDefinition.
pub fn is_xrd(api_version: &str, kind: &str) -> bool {
    kind == "CompositeResourceDefinition"
        && matches!(
            api_version,
            "apiextensions.crossplane.io/v1"
                | "apiextensions.crossplane.io/v1beta1"
                | "apiextensions.crossplane.io/v2"
        )
}

/// Which generator layout applies: upstream `CompositeResourceScope`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// `scope: Namespaced`.
    Namespaced,
    /// `scope: Cluster`.
    Cluster,
    /// `scope: LegacyCluster`: the v1 layout, with claims.
    LegacyCluster,
}

/// A generated CRD: the CustomResourceDefinition document and its parsed form.
#[derive(Debug, Clone, PartialEq)]
pub struct GeneratedCrd {
    /// The generated `apiextensions.k8s.io/v1` CustomResourceDefinition.
    pub document: Value,
    /// The same CRD, parsed; versions whose XRD schema is missing or unparsable have no
    /// schema and carry the reason in `schema_error`.
    pub crd: Crd,
}

/// The CRDs generated from one XRD.
#[derive(Debug, Clone, PartialEq)]
pub struct GeneratedCrds {
    /// The composite resource (XR) CRD.
    pub composite: GeneratedCrd,
    /// The claim CRD, when the XRD offers a valid claim.
    pub claim: Option<GeneratedCrd>,
    /// Why no claim CRD was generated although `spec.claimNames` is set.
    pub claim_error: Option<SchemaError>,
}

/// One XRD version as the generator needs it.
struct XrdVersion<'a> {
    name: &'a str,
    served: bool,
    referenceable: bool,
    deprecated: bool,
    deprecation_warning: Option<&'a str>,
    schema: Result<Option<&'a Value>, SchemaError>,
    path: String,
}

/// Generates the XR CRD (and the claim CRD when `spec.claimNames` is set) for an XRD.
///
/// Errors are structural problems of the XRD itself (missing `spec.group`, names or
/// versions, wrong JSON types); a version with a missing or unparsable schema still
/// yields a CRD version, without schema (upstream refuses to generate such a CRD).
pub fn generate_crds(xrd: &Value) -> Result<GeneratedCrds, SchemaError> {
    let root = obj(xrd, "")?;
    let api_version = opt_str(root, "", "apiVersion")?.unwrap_or("apiextensions.crossplane.io/v1");
    let spec = opt_obj(root, "", "spec")?.ok_or_else(|| SchemaError::Missing {
        path: "spec".to_string(),
    })?;
    let group = req_str(spec, "spec", "group")?;
    let names = opt_obj(spec, "spec", "names")?.ok_or_else(|| SchemaError::Missing {
        path: "spec.names".to_string(),
    })?;
    let xr_names = parse_names(names, "spec.names")?;
    let claim_names = opt_obj(spec, "spec", "claimNames")?;
    let claim_parsed = claim_names
        .map(|c| parse_names(c, "spec.claimNames"))
        .transpose()?;

    let v2 = api_version == "apiextensions.crossplane.io/v2";
    // The XRD CRD's defaults: LegacyCluster in v1 (and the unserved v1beta1), Namespaced in v2.
    let default_scope = if v2 { "Namespaced" } else { "LegacyCluster" };
    let layout = match opt_str(spec, "spec", "scope")?.unwrap_or(default_scope) {
        "Namespaced" => Layout::Namespaced,
        "Cluster" => Layout::Cluster,
        "LegacyCluster" => Layout::LegacyCluster,
        other => {
            return Err(SchemaError::Invalid {
                path: "spec.scope".to_string(),
                message: format!(
                    "unsupported value \"{other}\": expected Namespaced, Cluster or LegacyCluster"
                ),
            });
        }
    };
    check_cel_rules(spec, v2, layout)?;
    let update_policy =
        opt_str(spec, "spec", "defaultCompositionUpdatePolicy")?.unwrap_or("Automatic");
    let delete_policy =
        opt_str(spec, "spec", "defaultCompositeDeletePolicy")?.unwrap_or("Background");

    let items = opt_array(spec, "spec", "versions")?.ok_or_else(|| SchemaError::Missing {
        path: "spec.versions".to_string(),
    })?;
    let mut versions = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = index("spec.versions", i);
        let v = obj(item, &at)?;
        let schema_path = join(&at, "schema");
        // A malformed `schema` member spoils only this version.
        let schema = opt_obj(v, &at, "schema").map(|holder| {
            holder
                .and_then(|s| s.get("openAPIV3Schema"))
                .filter(|s| !s.is_null())
        });
        versions.push(XrdVersion {
            name: req_str(v, &at, "name")?,
            served: opt_bool(v, &at, "served")?.unwrap_or(false),
            referenceable: opt_bool(v, &at, "referenceable")?.unwrap_or(false),
            deprecated: opt_bool(v, &at, "deprecated")?.unwrap_or(false),
            deprecation_warning: opt_str(v, &at, "deprecationWarning")?,
            schema,
            path: join(&schema_path, "openAPIV3Schema"),
        });
    }

    let xr_scope = if layout == Layout::Namespaced {
        "Namespaced"
    } else {
        "Cluster"
    };
    let composite = build_crd(
        group,
        names,
        "composite",
        xr_scope,
        &versions,
        &composite_spec_props(layout, update_policy),
        &composite_status_props(layout),
    )?;

    // The CEL rules above leave claims to LegacyCluster XRDs.
    let (claim, claim_error) = match (claim_names, claim_parsed) {
        (Some(raw), Some(parsed)) => {
            if let Some(conflict) = conflicting_claim_name(&xr_names, &parsed) {
                (
                    None,
                    Some(SchemaError::Invalid {
                        path: "spec.claimNames".to_string(),
                        message: format!(
                            "invalid resource claim names: \"{conflict}\" conflicts with composite resource name"
                        ),
                    }),
                )
            } else {
                let claim = build_crd(
                    group,
                    raw,
                    "claim",
                    "Namespaced",
                    &versions,
                    &claim_spec_props(delete_policy),
                    // Upstream `ForCompositeResourceClaim` uses the LegacyCluster status.
                    &composite_status_props(Layout::LegacyCluster),
                )?;
                (Some(claim), None)
            }
        }
        _ => (None, None),
    };

    Ok(GeneratedCrds {
        composite,
        claim,
        claim_error,
    })
}

/// The `x-kubernetes-validations` of the XRD CRD (v2.3.4) on `spec` that the API server
/// checks before Crossplane sees the XRD: such an XRD never yields a CRD.
fn check_cel_rules(spec: &Map<String, Value>, v2: bool, layout: Layout) -> Result<(), SchemaError> {
    let has = |field: &str| spec.get(field).is_some_and(|v| !v.is_null());
    let broken = if v2 {
        [
            (
                has("claimNames"),
                "Claims aren't supported in apiextensions.crossplane.io/v2",
            ),
            (
                has("connectionSecretKeys"),
                "XR connection secrets aren't supported in apiextensions.crossplane.io/v2",
            ),
        ]
    } else {
        let legacy = layout == Layout::LegacyCluster;
        [
            (
                !legacy && has("claimNames"),
                "Only LegacyCluster composite resources can offer claims",
            ),
            (
                !legacy && has("connectionSecretKeys"),
                "Only LegacyCluster composite resources support connection secrets",
            ),
        ]
    };
    match broken.iter().find(|(b, _)| *b) {
        Some((_, message)) => Err(SchemaError::Invalid {
            path: "spec".to_string(),
            message: (*message).to_string(),
        }),
        None => Ok(()),
    }
}

/// Upstream `validateClaimNames`: claim names must differ from the XR names.
fn conflicting_claim_name(
    xr: &super::crd::CrdNames,
    claim: &super::crd::CrdNames,
) -> Option<String> {
    if claim.kind == xr.kind {
        return Some(claim.kind.clone());
    }
    if claim.plural == xr.plural {
        return Some(claim.plural.clone());
    }
    match (&claim.singular, &xr.singular) {
        (Some(c), Some(x)) if !c.is_empty() && c == x => return Some(c.clone()),
        _ => {}
    }
    match (&claim.list_kind, &xr.list_kind) {
        (Some(c), Some(x)) if !c.is_empty() && c == x => return Some(c.clone()),
        _ => {}
    }
    None
}

/// Builds one generated CRD document, parses it, and carries over per-version errors.
fn build_crd(
    group: &str,
    names: &Map<String, Value>,
    category: &str,
    scope: &str,
    versions: &[XrdVersion<'_>],
    spec_props: &Map<String, Value>,
    status_props: &Map<String, Value>,
) -> Result<GeneratedCrd, SchemaError> {
    let mut names = names.clone();
    let mut categories = match names.get("categories") {
        Some(Value::Array(c)) => c.clone(),
        _ => Vec::new(),
    };
    categories.push(Value::String(category.to_string()));
    names.insert("categories".to_string(), Value::Array(categories));
    let plural = names
        .get("plural")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();

    let mut errors = Vec::with_capacity(versions.len());
    let mut doc_versions = Vec::with_capacity(versions.len());
    for v in versions {
        let mut version = json!({
            "name": v.name,
            "served": v.served,
            "storage": v.referenceable,
            "subresources": {"status": {}},
        });
        // Upstream `genCrdVersion` copies both (`omitempty`: absent when unset).
        if let Value::Object(m) = &mut version {
            if v.deprecated {
                m.insert("deprecated".to_string(), Value::Bool(true));
            }
            if let Some(w) = v.deprecation_warning {
                m.insert(
                    "deprecationWarning".to_string(),
                    Value::String(w.to_string()),
                );
            }
        }
        match version_schema(v, spec_props, status_props) {
            Ok(schema) => {
                if let Value::Object(m) = &mut version {
                    m.insert("schema".to_string(), json!({ "openAPIV3Schema": schema }));
                }
                errors.push(None);
            }
            Err(e) => errors.push(Some(e)),
        }
        doc_versions.push(version);
    }

    let document = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {
            "group": group,
            "names": Value::Object(names),
            "scope": scope,
            "versions": doc_versions,
        }
    });
    let mut crd = Crd::from_value(&document)?;
    for (version, error) in crd.versions.iter_mut().zip(errors) {
        if error.is_some() {
            version.schema_error = error;
        }
    }
    Ok(GeneratedCrd { document, crd })
}

/// Upstream `genCrdVersion` plus the machinery fields.
fn version_schema(
    v: &XrdVersion<'_>,
    spec_props: &Map<String, Value>,
    status_props: &Map<String, Value>,
) -> Result<Value, SchemaError> {
    let Some(raw) = v.schema.clone()? else {
        return Err(SchemaError::Invalid {
            path: v.path.clone(),
            message: "custom resource validation cannot be nil".to_string(),
        });
    };
    // Upstream unmarshals the whole schema first, so a malformed XRD schema fails here
    // even in parts the generator later drops.
    Schema::from_value_at(raw, &v.path)?;
    let empty = Map::new();
    let user = raw.as_object().unwrap_or(&empty);
    let user_props = user
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let x_spec = user_props
        .get("spec")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let x_status = user_props
        .get("status")
        .and_then(Value::as_object)
        .unwrap_or(&empty);

    let max_length = user_props
        .get("metadata")
        .and_then(|m| m.get("properties"))
        .and_then(|p| p.get("name"))
        .and_then(|n| n.get("maxLength"))
        .and_then(Value::as_u64)
        .map_or(MAX_NAME_LENGTH, |old| old.min(MAX_NAME_LENGTH));

    let mut spec = carried(x_spec, true);
    merge_props(&mut spec, spec_props);
    let mut status = carried(x_status, false);
    merge_props(&mut status, status_props);

    let mut root = Map::new();
    root.insert("type".to_string(), json!("object"));
    root.insert("required".to_string(), json!(["spec"]));
    if let Some(d) = user.get("description").filter(|d| d.is_string()) {
        root.insert("description".to_string(), d.clone());
    }
    root.insert(
        "properties".to_string(),
        json!({
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {
                "type": "object",
                "properties": {"name": {"type": "string", "maxLength": max_length}}
            },
            "spec": Value::Object(spec),
            "status": Value::Object(status),
        }),
    );
    Ok(Value::Object(root))
}

/// The parts of the XRD's `spec` (or `status`) schema that upstream carries over.
fn carried(x: &Map<String, Value>, is_spec: bool) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("type".to_string(), json!("object"));
    let mut keys = vec![
        "description",
        "required",
        "x-kubernetes-validations",
        "oneOf",
    ];
    if is_spec {
        keys.push("x-kubernetes-preserve-unknown-fields");
    }
    for key in keys {
        if let Some(v) = x.get(key).filter(|v| !v.is_null()) {
            out.insert(key.to_string(), v.clone());
        }
    }
    let props = x
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    out.insert("properties".to_string(), Value::Object(props));
    out
}

/// Writes machinery properties over same-named XRD properties.
fn merge_props(target: &mut Map<String, Value>, props: &Map<String, Value>) {
    if let Some(Value::Object(existing)) = target.get_mut("properties") {
        for (k, v) in props {
            existing.insert(k.clone(), v.clone());
        }
    }
}

fn string() -> Value {
    json!({"type": "string"})
}

fn name_ref() -> Value {
    json!({"type": "object", "required": ["name"], "properties": {"name": string()}})
}

fn label_selector() -> Value {
    json!({
        "type": "object",
        "required": ["matchLabels"],
        "properties": {
            "matchLabels": {"type": "object", "additionalProperties": string()}
        }
    })
}

fn object_refs(with_namespace: bool, list_type: Option<&str>) -> Value {
    let mut props = json!({"apiVersion": string(), "name": string(), "kind": string()});
    if with_namespace && let Value::Object(m) = &mut props {
        m.insert("namespace".to_string(), string());
    }
    let mut refs = json!({
        "type": "array",
        "items": {"type": "object", "properties": props, "required": ["apiVersion", "kind"]}
    });
    if let (Some(lt), Value::Object(m)) = (list_type, &mut refs) {
        m.insert("x-kubernetes-list-type".to_string(), json!(lt));
    }
    refs
}

fn enum_prop(values: &[&str], default: Option<&str>) -> Value {
    let mut v = json!({"type": "string", "enum": values});
    if let (Some(d), Value::Object(m)) = (default, &mut v) {
        m.insert("default".to_string(), json!(d));
    }
    v
}

fn secret_ref(with_namespace: bool) -> Value {
    if with_namespace {
        json!({
            "type": "object",
            "required": ["name", "namespace"],
            "properties": {"name": string(), "namespace": string()}
        })
    } else {
        json!({"type": "object", "required": ["name"], "properties": {"name": string()}})
    }
}

fn insert(m: &mut Map<String, Value>, key: &str, value: Value) {
    m.insert(key.to_string(), value);
}

/// How an XR or claim selects its Composition: the fields both spec schemas start with (the
/// update policy has the XRD's default on the XR only, as upstream).
fn composition_selection_props(update_policy_default: Option<&str>) -> Map<String, Value> {
    let mut p = Map::new();
    insert(&mut p, "compositionRef", name_ref());
    insert(&mut p, "compositionSelector", label_selector());
    insert(&mut p, "compositionRevisionRef", name_ref());
    insert(&mut p, "compositionRevisionSelector", label_selector());
    insert(
        &mut p,
        "compositionUpdatePolicy",
        enum_prop(&["Automatic", "Manual"], update_policy_default),
    );
    p
}

/// Upstream `CompositeResourceSpecProps`.
fn composite_spec_props(layout: Layout, update_policy: &str) -> Map<String, Value> {
    let mut p = composition_selection_props(Some(update_policy));
    // Namespaced XRs can't reference composed resources in other namespaces.
    let with_ns = layout != Layout::Namespaced;
    insert(&mut p, "resourceRefs", object_refs(with_ns, Some("atomic")));
    if layout == Layout::LegacyCluster {
        insert(&mut p, "claimRef", claim_ref());
        insert(&mut p, "writeConnectionSecretToRef", secret_ref(true));
        return p;
    }
    let mut out = Map::new();
    insert(
        &mut out,
        "crossplane",
        json!({
            "type": "object",
            "description": "Configures how Crossplane will reconcile this composite resource",
            "properties": Value::Object(p),
        }),
    );
    out
}

fn claim_ref() -> Value {
    json!({
        "type": "object",
        "required": ["apiVersion", "kind", "namespace", "name"],
        "properties": {
            "apiVersion": string(), "kind": string(), "namespace": string(), "name": string()
        }
    })
}

/// Upstream `CompositeResourceClaimSpecProps`.
fn claim_spec_props(delete_policy: &str) -> Map<String, Value> {
    let mut p = composition_selection_props(None);
    insert(
        &mut p,
        "compositeDeletePolicy",
        enum_prop(&["Background", "Foreground"], Some(delete_policy)),
    );
    insert(
        &mut p,
        "resourceRef",
        json!({
            "type": "object",
            "required": ["apiVersion", "kind", "name"],
            "properties": {"apiVersion": string(), "kind": string(), "name": string()}
        }),
    );
    insert(&mut p, "writeConnectionSecretToRef", secret_ref(false));
    p
}

/// Upstream `CompositeResourceStatusProps` (also used for claims, as LegacyCluster): v2 XRs
/// have only `conditions`.
fn composite_status_props(layout: Layout) -> Map<String, Value> {
    let mut p = Map::new();
    insert(
        &mut p,
        "conditions",
        json!({
            "description": "Conditions of the resource.",
            "type": "array",
            "x-kubernetes-list-map-keys": ["type"],
            "x-kubernetes-list-type": "map",
            "items": {
                "type": "object",
                "required": ["lastTransitionTime", "reason", "status", "type"],
                "properties": {
                    "lastTransitionTime": {"type": "string", "format": "date-time"},
                    "message": string(),
                    "reason": string(),
                    "status": string(),
                    "type": string(),
                    "observedGeneration": {"type": "integer", "format": "int64"},
                },
            }
        }),
    );
    if layout == Layout::LegacyCluster {
        insert(
            &mut p,
            "connectionDetails",
            json!({
                "type": "object",
                "properties": {"lastPublishedTime": {"type": "string", "format": "date-time"}}
            }),
        );
        insert(
            &mut p,
            "claimConditionTypes",
            json!({"type": "array", "x-kubernetes-list-type": "set", "items": string()}),
        );
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::crd::Scope;

    fn xrd(api_version: &str, extra_spec: Value) -> Value {
        let mut x = json!({
            "apiVersion": api_version,
            "kind": "CompositeResourceDefinition",
            "metadata": {"name": "xnopresources.nop.example.org"},
            "spec": {
                "group": "nop.example.org",
                "names": {"kind": "XNopResource", "plural": "xnopresources"},
                "versions": [{
                    "name": "v1alpha1", "served": true, "referenceable": true,
                    "schema": {"openAPIV3Schema": {
                        "type": "object",
                        "required": ["dropped"],
                        "properties": {
                            "metadata": {"type": "object", "properties": {
                                "name": {"type": "string", "maxLength": 40}}},
                            "spec": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": true,
                                "required": ["coolField"],
                                "properties": {
                                    "coolField": {"type": "string"},
                                    "compositionRef": {"type": "integer"}
                                }
                            },
                            "status": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": true,
                                "properties": {"coolerField": {"type": "string"}}
                            }
                        }
                    }}
                }]
            }
        });
        if let (Some(spec), Value::Object(extra)) =
            (x.get_mut("spec").and_then(Value::as_object_mut), extra_spec)
        {
            spec.extend(extra);
        }
        x
    }

    #[test]
    fn v1_composite_crd_is_legacy_cluster() {
        let g = generate_crds(&xrd("apiextensions.crossplane.io/v1", json!({}))).expect("ok");
        let crd = &g.composite.crd;
        assert_eq!(crd.name, "xnopresources.nop.example.org");
        assert_eq!(crd.scope, Scope::Cluster);
        assert_eq!(crd.names.categories, vec!["composite"]);
        assert!(g.claim.is_none() && g.claim_error.is_none());
        let s = crd.schema_for("v1alpha1").schema.expect("schema");
        assert_eq!(s.required, vec!["spec"]);
        assert_eq!(
            s.descend(&["metadata", "name"]).and_then(|n| n.max_length),
            Some(40)
        );
        let spec = s.property("spec").expect("spec");
        assert_eq!(spec.required, vec!["coolField"]);
        assert!(spec.preserve_unknown_fields);
        // Machinery replaces the XRD's own compositionRef.
        assert_eq!(
            s.descend(&["spec", "compositionRef", "name"])
                .and_then(|n| n.type_.as_deref()),
            Some("string")
        );
        for field in [
            "compositionSelector",
            "compositionRevisionRef",
            "compositionRevisionSelector",
            "compositionUpdatePolicy",
            "claimRef",
            "resourceRefs",
            "writeConnectionSecretToRef",
        ] {
            assert!(spec.property(field).is_some(), "spec.{field}");
        }
        // Removed in v2.
        for field in ["environmentConfigRefs", "publishConnectionDetailsTo"] {
            assert!(spec.property(field).is_none(), "spec.{field}");
        }
        assert_eq!(
            spec.property("compositionUpdatePolicy")
                .and_then(|p| p.default.clone()),
            Some(json!("Automatic"))
        );
        assert_eq!(
            s.descend(&["spec", "resourceRefs"])
                .and_then(|r| r.list_type.as_deref()),
            Some("atomic")
        );
        let status = s.property("status").expect("status");
        assert!(
            !status.preserve_unknown_fields,
            "status keeps no preserve-unknown-fields"
        );
        assert!(status.property("coolerField").is_some());
        assert_eq!(
            s.descend(&["status", "conditions", "[]", "lastTransitionTime"])
                .and_then(|t| t.format.as_deref()),
            Some("date-time")
        );
        assert!(status.property("connectionDetails").is_some());
        assert!(status.property("claimConditionTypes").is_some());
        assert!(
            s.descend(&["status", "conditions", "[]", "observedGeneration"])
                .is_some()
        );
    }

    #[test]
    fn v1_claim_crd_is_generated_with_claim_machinery() {
        let g = generate_crds(&xrd(
            "apiextensions.crossplane.io/v1",
            json!({"claimNames": {"kind": "NopResource", "plural": "nopresources"},
                   "defaultCompositeDeletePolicy": "Foreground",
                   "defaultCompositionUpdatePolicy": "Manual"}),
        ))
        .expect("ok");
        assert_eq!(
            g.composite
                .crd
                .schema_for("v1alpha1")
                .schema
                .and_then(|s| s.descend(&["spec", "compositionUpdatePolicy"]))
                .and_then(|p| p.default.clone()),
            Some(json!("Manual"))
        );
        let claim = g.claim.expect("claim CRD");
        let crd = &claim.crd;
        assert_eq!(crd.name, "nopresources.nop.example.org");
        assert_eq!(crd.names.kind, "NopResource");
        assert_eq!(crd.scope, Scope::Namespaced);
        assert_eq!(crd.names.categories, vec!["claim"]);
        let s = crd.schema_for("v1alpha1").schema.expect("schema");
        let spec = s.property("spec").expect("spec");
        for field in [
            "compositionRef",
            "compositionSelector",
            "compositionRevisionRef",
            "compositionRevisionSelector",
            "compositionUpdatePolicy",
            "compositeDeletePolicy",
            "resourceRef",
            "writeConnectionSecretToRef",
            "coolField",
        ] {
            assert!(spec.property(field).is_some(), "spec.{field}");
        }
        assert!(spec.property("claimRef").is_none() && spec.property("resourceRefs").is_none());
        assert_eq!(
            spec.property("compositeDeletePolicy")
                .and_then(|p| p.default.clone()),
            Some(json!("Foreground"))
        );
        assert_eq!(
            spec.property("compositionUpdatePolicy")
                .and_then(|p| p.default.clone()),
            None
        );
        assert_eq!(
            s.descend(&["spec", "writeConnectionSecretToRef"])
                .map(|w| w.required.clone()),
            Some(vec!["name".to_string()])
        );
        assert!(s.descend(&["status", "conditions"]).is_some());
        assert!(s.descend(&["status", "connectionDetails"]).is_some());
    }

    #[test]
    fn conflicting_claim_names_are_reported() {
        let g = generate_crds(&xrd(
            "apiextensions.crossplane.io/v1",
            json!({"claimNames": {"kind": "XNopResource", "plural": "nops"}}),
        ))
        .expect("XR CRD still generated");
        assert!(g.claim.is_none());
        assert_eq!(
            g.claim_error.map(|e| e.to_string()).as_deref(),
            Some(
                "spec.claimNames: invalid resource claim names: \"XNopResource\" conflicts with composite resource name"
            )
        );
    }

    #[test]
    fn missing_or_bad_version_schema_is_representable() {
        let mut x = xrd("apiextensions.crossplane.io/v1", json!({}));
        if let Some(v) = x.pointer_mut("/spec/versions/0") {
            v.as_object_mut().map(|m| m.remove("schema"));
        }
        let g = generate_crds(&x).expect("ok");
        let sel = g.composite.crd.schema_for("v1alpha1");
        assert!(sel.schema.is_none());
        assert_eq!(
            sel.schema_error.map(ToString::to_string).as_deref(),
            Some(
                "spec.versions[0].schema.openAPIV3Schema: custom resource validation cannot be nil"
            )
        );

        let mut x = xrd("apiextensions.crossplane.io/v1", json!({}));
        if let Some(t) =
            x.pointer_mut("/spec/versions/0/schema/openAPIV3Schema/properties/spec/type")
        {
            *t = json!(7);
        }
        let g = generate_crds(&x).expect("ok");
        assert_eq!(
            g.composite
                .crd
                .schema_for("v1alpha1")
                .schema_error
                .map(ToString::to_string)
                .as_deref(),
            Some("spec.versions[0].schema.openAPIV3Schema.properties.spec.type: expected a string")
        );
    }

    #[test]
    fn a_schema_member_that_is_not_an_object_spoils_only_its_version() {
        let mut x = xrd("apiextensions.crossplane.io/v1", json!({}));
        if let Some(s) = x.pointer_mut("/spec/versions/0/schema") {
            *s = json!("oops");
        }
        let g = generate_crds(&x).expect("ok");
        assert_eq!(
            g.composite
                .crd
                .schema_for("v1alpha1")
                .schema_error
                .map(ToString::to_string)
                .as_deref(),
            Some("spec.versions[0].schema: expected an object")
        );
    }

    #[test]
    fn v2_namespaced_nests_machinery_under_crossplane() {
        let g = generate_crds(&xrd("apiextensions.crossplane.io/v2", json!({}))).expect("ok");
        let crd = &g.composite.crd;
        assert_eq!(crd.scope, Scope::Namespaced);
        let s = crd.schema_for("v1alpha1").schema.expect("schema");
        assert!(
            s.descend(&["spec", "crossplane", "compositionRef", "name"])
                .is_some()
        );
        assert!(
            s.descend(&["spec", "compositionRef"])
                .is_some_and(|c| c.type_.as_deref() == Some("integer"))
        );
        assert!(
            s.descend(&["spec", "crossplane", "resourceRefs", "[]", "namespace"])
                .is_none()
        );
        // v2 XRs have no connection secrets: nothing but conditions in status.
        assert!(s.descend(&["status", "crossplane"]).is_none());
        assert!(s.descend(&["status", "connectionDetails"]).is_none());
        assert!(
            s.descend(&["status", "conditions", "[]", "observedGeneration"])
                .is_some()
        );
        assert!(s.descend(&["status", "claimConditionTypes"]).is_none());

        let g = generate_crds(&xrd(
            "apiextensions.crossplane.io/v2",
            json!({"scope": "Cluster"}),
        ))
        .expect("ok");
        assert_eq!(g.composite.crd.scope, Scope::Cluster);
        let s = g
            .composite
            .crd
            .schema_for("v1alpha1")
            .schema
            .expect("schema");
        assert!(
            s.descend(&["spec", "crossplane", "resourceRefs", "[]", "namespace"])
                .is_some()
        );
    }

    #[test]
    fn legacy_cluster_keeps_v1_layout_and_claims() {
        let g = generate_crds(&xrd(
            "apiextensions.crossplane.io/v1",
            json!({"scope": "LegacyCluster", "claimNames": {"kind": "Nop", "plural": "nops"}}),
        ))
        .expect("ok");
        let s = g
            .composite
            .crd
            .schema_for("v1alpha1")
            .schema
            .expect("schema");
        assert!(s.descend(&["spec", "compositionRef", "name"]).is_some());
        assert!(s.descend(&["spec", "claimRef"]).is_some());
        assert!(s.descend(&["spec", "environmentConfigRefs"]).is_none());
        assert!(s.descend(&["status", "claimConditionTypes"]).is_some());
        let claim = g.claim.expect("claim");
        let cs = claim.crd.schema_for("v1alpha1").schema.expect("schema");
        assert!(
            cs.descend(&["spec", "publishConnectionDetailsTo"])
                .is_none()
        );
        assert!(cs.descend(&["spec", "compositeDeletePolicy"]).is_some());
    }

    #[test]
    fn deprecated_versions_carry_over_to_xr_and_claim_crds() {
        let mut x = xrd(
            "apiextensions.crossplane.io/v1",
            json!({"claimNames": {"kind": "NopResource", "plural": "nopresources"}}),
        );
        let mut v1 = x["spec"]["versions"][0].clone();
        v1["name"] = json!("v1");
        v1["referenceable"] = json!(false);
        x["spec"]["versions"][0]["deprecated"] = json!(true);
        if let Some(versions) = x["spec"]["versions"].as_array_mut() {
            versions.push(v1);
        }
        let g = generate_crds(&x).expect("ok");
        let claim = g.claim.expect("claim");
        assert_eq!(
            g.composite.crd.deprecation_warning("v1alpha1").as_deref(),
            Some(
                "nop.example.org/v1alpha1 XNopResource is deprecated; use nop.example.org/v1 XNopResource"
            )
        );
        assert_eq!(
            claim.crd.deprecation_warning("v1alpha1").as_deref(),
            Some(
                "nop.example.org/v1alpha1 NopResource is deprecated; use nop.example.org/v1 NopResource"
            )
        );
        assert_eq!(
            g.composite.document["spec"]["versions"][0]["deprecated"],
            json!(true)
        );
        // Unset, nothing is written (upstream's `omitempty`).
        assert!(
            g.composite.document["spec"]["versions"][1]
                .get("deprecated")
                .is_none()
        );
        x["spec"]["versions"][0]["deprecationWarning"] = json!("use v1");
        let g = generate_crds(&x).expect("ok");
        assert_eq!(
            g.composite.crd.deprecation_warning("v1alpha1").as_deref(),
            Some("use v1")
        );
    }

    #[test]
    fn structural_xrd_errors() {
        let err = generate_crds(&json!({"spec": {"names": {"kind": "X"}}})).expect_err("no group");
        assert_eq!(err.to_string(), "spec.group: required value is missing");
        let err = generate_crds(&json!({"apiVersion": "apiextensions.crossplane.io/v2",
            "spec": {"group": "g", "names": {"kind": "X"}, "scope": "Weird", "versions": []}}))
        .expect_err("bad scope");
        assert!(
            err.to_string()
                .starts_with("spec.scope: unsupported value \"Weird\"")
        );
    }
}
