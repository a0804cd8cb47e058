//! The XRD generator against the CRDs Crossplane v1.17 generates for its own e2e XRD.

use std::path::Path;

use composition_webhook::schema::{Crd, Schema, generate_crds};
use serde_json::{Value, json};

fn fixture(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/schema")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
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

#[test]
fn xr_crd_matches_crossplane_v1_17() {
    let generated = generate_crds(&fixture("xrd-xnopresources.yaml")).expect("generates");
    let expected = Crd::from_value(&with_default(
        fixture("expected-xr-crd-xnopresources.yaml"),
        "compositionUpdatePolicy",
        "Automatic",
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
fn claim_crd_matches_crossplane_v1_17() {
    let generated = generate_crds(&fixture("xrd-xnopresources.yaml")).expect("generates");
    let claim = generated.claim.expect("the XRD offers a claim");
    let expected = Crd::from_value(&with_default(
        fixture("expected-claim-crd-nopresources.yaml"),
        "compositeDeletePolicy",
        "Background",
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
