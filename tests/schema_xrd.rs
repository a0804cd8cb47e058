//! The XRD generator against the CRDs Crossplane generates for its own e2e XRDs: the CRDs
//! v1.17 generated, with the changes of crossplane-runtime v2.3.3 `pkg/xcrd/schemas.go` (the
//! generator of Crossplane v2.3.4) applied field by field, and the v2.3.4 e2e XRDs against
//! the schema literals of that file.

mod common;

use std::path::Path;

use composition_webhook::schema::{Crd, Schema, generate_crds};
use serde_json::{Value, json};

fn fixture(name: &str) -> Value {
    common::read_yaml(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("testdata/schema")
            .join(name),
    )
}

fn v1alpha1(crd: &Crd) -> &Schema {
    crd.schema_for("v1alpha1").schema.expect("v1alpha1 schema")
}

/// The reference files leave out the defaults that come from the XRD's own defaulted
/// fields (`defaultCompositionUpdatePolicy: Automatic`, `defaultCompositeDeletePolicy:
/// Background`); add them back before comparing.
fn with_default(mut crd_doc: Value, field: &str, default: &str) -> Value {
    let pointer =
        format!("/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/{field}");
    if let Some(Value::Object(prop)) = crd_doc.pointer_mut(&pointer) {
        prop.insert("default".to_string(), json!(default));
    }
    crd_doc
}

/// What v2.3.4 changed in a v1.17 LegacyCluster XR or claim CRD (schemas.go): no
/// `environmentConfigRefs` or `publishConnectionDetailsTo`, `observedGeneration` in
/// conditions, and (XR only) a `namespace` in `resourceRefs` items.
fn as_v2_3_4(mut crd_doc: Value, xr: bool) -> Value {
    let root = "/spec/versions/0/schema/openAPIV3Schema/properties";
    if let Some(Value::Object(spec)) = crd_doc.pointer_mut(&format!("{root}/spec/properties")) {
        spec.remove("environmentConfigRefs");
        spec.remove("publishConnectionDetailsTo");
    }
    if let Some(Value::Object(props)) = crd_doc.pointer_mut(&format!(
        "{root}/status/properties/conditions/items/properties"
    )) {
        props.insert(
            "observedGeneration".to_string(),
            json!({"type": "integer", "format": "int64"}),
        );
    }
    if xr
        && let Some(Value::Object(props)) = crd_doc.pointer_mut(&format!(
            "{root}/spec/properties/resourceRefs/items/properties"
        ))
    {
        props.insert("namespace".to_string(), json!({"type": "string"}));
    }
    crd_doc
}

#[test]
fn xr_crd_of_a_v1_xrd_is_legacy_cluster_as_crossplane_v2_3_4_generates() {
    let generated = generate_crds(&fixture("xrd-xnopresources.yaml")).expect("generates");
    let expected = Crd::from_value(&as_v2_3_4(
        with_default(
            fixture("expected-xr-crd-xnopresources.yaml"),
            "compositionUpdatePolicy",
            "Automatic",
        ),
        true,
    ))
    .expect("reference parses");
    let got = &generated.composite.crd;
    assert_eq!(got.name, expected.name);
    assert_eq!(got.group, expected.group);
    assert_eq!(got.scope, expected.scope);
    assert_eq!(got.names.kind, expected.names.kind);
    assert_eq!(got.names.categories, expected.names.categories);
    assert_eq!(v1alpha1(got), v1alpha1(&expected));
    let walk = |path: &[&str]| v1alpha1(got).descend(path).is_some();
    assert!(walk(&["spec", "compositionRef", "name"]));
    assert!(walk(&["status", "conditions", "[]", "type"]));
}

#[test]
fn claim_crd_matches_crossplane_v2_3_4() {
    let generated = generate_crds(&fixture("xrd-xnopresources.yaml")).expect("generates");
    let claim = generated.claim.expect("the XRD offers a claim");
    let expected = Crd::from_value(&as_v2_3_4(
        with_default(
            fixture("expected-claim-crd-nopresources.yaml"),
            "compositeDeletePolicy",
            "Background",
        ),
        false,
    ))
    .expect("reference parses");
    assert_eq!(claim.crd.name, "nopresources.nop.example.org");
    assert_eq!(claim.crd.scope, expected.scope);
    assert_eq!(claim.crd.names.kind, "NopResource");
    assert_eq!(claim.crd.names.categories, vec!["claim"]);
    assert_eq!(v1alpha1(&claim.crd), v1alpha1(&expected));
}

#[test]
fn generated_document_round_trips() {
    // The generated CRD document is an ordinary CRD: parsing it again gives the same CRD.
    let generated = generate_crds(&fixture("xrd-xnopresources.yaml")).expect("generates");
    let reparsed = Crd::from_value(&generated.composite.document).expect("parses");
    assert_eq!(reparsed, generated.composite.crd);
    assert_eq!(
        generated.composite.document["apiVersion"],
        json!("apiextensions.k8s.io/v1")
    );
}

fn v2_fixture(name: &str) -> Value {
    common::read_yaml(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("testdata/v2")
            .join(name),
    )
}

/// The schema literals of crossplane-runtime v2.3.3 `pkg/xcrd/schemas.go`
/// (`CompositeResourceSpecProps`, `CompositeResourceStatusProps`) for a v2 XR.
fn v2_machinery(namespaced: bool) -> (Value, Value) {
    let name_ref = json!({"type": "object", "required": ["name"],
                          "properties": {"name": {"type": "string"}}});
    let selector = json!({"type": "object", "required": ["matchLabels"], "properties": {
        "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}}}});
    let mut ref_props = json!({"apiVersion": {"type": "string"}, "name": {"type": "string"},
                               "kind": {"type": "string"}});
    if !namespaced {
        ref_props["namespace"] = json!({"type": "string"});
    }
    let spec = json!({"crossplane": {
        "type": "object",
        "description": "Configures how Crossplane will reconcile this composite resource",
        "properties": {
            "compositionRef": name_ref,
            "compositionSelector": selector,
            "compositionRevisionRef": name_ref,
            "compositionRevisionSelector": selector,
            "compositionUpdatePolicy": {"type": "string", "enum": ["Automatic", "Manual"],
                                        "default": "Automatic"},
            "resourceRefs": {"type": "array", "x-kubernetes-list-type": "atomic", "items": {
                "type": "object", "required": ["apiVersion", "kind"], "properties": ref_props}}
        }
    }});
    let status = json!({"conditions": {
        "description": "Conditions of the resource.",
        "type": "array",
        "x-kubernetes-list-map-keys": ["type"],
        "x-kubernetes-list-type": "map",
        "items": {"type": "object",
                  "required": ["lastTransitionTime", "reason", "status", "type"],
                  "properties": {
                      "lastTransitionTime": {"type": "string", "format": "date-time"},
                      "message": {"type": "string"}, "reason": {"type": "string"},
                      "status": {"type": "string"}, "type": {"type": "string"},
                      "observedGeneration": {"type": "integer", "format": "int64"}}}
    }});
    (spec, status)
}

/// The e2e XRD's own schema with the machinery written over `spec` and `status`, as
/// `ForCompositeResource` does with `maps.Copy`.
fn expected_v2(xrd: &Value, scope: &str, namespaced: bool) -> Crd {
    let user = &xrd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    let (machinery_spec, machinery_status) = v2_machinery(namespaced);
    let mut spec = json!({"type": "object",
                  "properties": user["properties"]["spec"]["properties"].clone()});
    if let Some(r) = user["properties"]["spec"].get("required") {
        spec["required"] = r.clone();
    }
    if let (Some(p), Value::Object(m)) = (spec["properties"].as_object_mut(), machinery_spec) {
        p.extend(m);
    }
    let mut status = json!({"type": "object", "properties":
        user["properties"]["status"]["properties"].clone()});
    if status["properties"].is_null() {
        status["properties"] = json!({});
    }
    if let (Some(p), Value::Object(m)) = (status["properties"].as_object_mut(), machinery_status) {
        p.extend(m);
    }
    let schema = json!({"type": "object", "required": ["spec"], "properties": {
        "apiVersion": {"type": "string"}, "kind": {"type": "string"},
        "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 63}}},
        "spec": spec, "status": status}});
    Crd::from_value(&json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": xrd["metadata"]["name"]},
        "spec": {"group": xrd["spec"]["group"], "scope": scope,
                 "names": {"kind": xrd["spec"]["names"]["kind"],
                           "plural": xrd["spec"]["names"]["plural"],
                           "categories": ["composite"]},
                 "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": schema}}]}
    }))
    .expect("expected CRD parses")
}

#[test]
fn v2_namespaced_and_cluster_xr_crds_match_crossplane_v2_3_4() {
    for (file, scope, namespaced) in [
        ("basic-namespaced.definition.yaml", "Namespaced", true),
        (
            "namespaced-xr-no-cluster-scoped-resource.definition.yaml",
            "Namespaced",
            true,
        ),
        ("basic-cluster.definition.yaml", "Cluster", false),
    ] {
        let xrd = v2_fixture(file);
        let generated = generate_crds(&xrd).expect("generates");
        let expected = expected_v2(&xrd, scope, namespaced);
        let got = &generated.composite.crd;
        assert_eq!(got.scope, expected.scope, "{file}");
        assert_eq!(got.name, expected.name, "{file}");
        assert_eq!(v1alpha1(got), v1alpha1(&expected), "{file}");
        assert!(generated.claim.is_none(), "{file}");
    }
}

#[test]
fn a_v1_xrd_with_a_v2_scope_gets_the_v2_layout() {
    // The cluster lists XRDs through apiextensions.crossplane.io/v1: a v2 XRD read that way
    // keeps its scope.
    let mut xrd = v2_fixture("basic-namespaced.definition.yaml");
    xrd["apiVersion"] = json!("apiextensions.crossplane.io/v1");
    let generated = generate_crds(&xrd).expect("generates");
    let expected = expected_v2(&xrd, "Namespaced", true);
    assert_eq!(generated.composite.crd.scope, expected.scope);
    assert_eq!(v1alpha1(&generated.composite.crd), v1alpha1(&expected));
}

#[test]
fn xrds_the_xrd_crd_cel_rules_refuse_are_errors() {
    // The legacy e2e XRD (claims and connection secret keys) under other scopes; messages
    // from the XRD CRD of v2.3.4 (`x-kubernetes-validations` on `spec`).
    let legacy = v2_fixture("legacy.definition.yaml");
    assert!(
        generate_crds(&legacy)
            .expect("LegacyCluster by default")
            .claim
            .is_some()
    );
    let mut namespaced = legacy.clone();
    namespaced["spec"]["scope"] = json!("Namespaced");
    assert_eq!(
        generate_crds(&namespaced).expect_err("refused").to_string(),
        "spec: Only LegacyCluster composite resources can offer claims"
    );
    let mut v2 = legacy.clone();
    v2["apiVersion"] = json!("apiextensions.crossplane.io/v2");
    v2["spec"]["scope"] = json!("LegacyCluster");
    assert_eq!(
        generate_crds(&v2).expect_err("refused").to_string(),
        "spec: Claims aren't supported in apiextensions.crossplane.io/v2"
    );
    if let Some(spec) = v2["spec"].as_object_mut() {
        spec.remove("claimNames");
    }
    assert_eq!(
        generate_crds(&v2).expect_err("refused").to_string(),
        "spec: XR connection secrets aren't supported in apiextensions.crossplane.io/v2"
    );
}
