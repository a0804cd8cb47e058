//! The catalog loaded from a multi-document fixture file.

use std::path::Path;

use composition_webhook::schema::{Catalog, LookupError, Origin, apply_defaults};
use serde_json::{Value, json};

fn load() -> Catalog {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/schema/catalog-fixtures.yaml");
    let text = std::fs::read_to_string(&path).expect("fixture");
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).expect("YAML");
    let source = "testdata/schema/catalog-fixtures.yaml";
    Catalog::from_documents(docs.iter().map(|d| (d, source))).expect("catalog")
}

#[test]
fn loads_crds_lists_and_xrds() {
    let catalog = load();
    // Bucket, Queue, XNetwork, Network.
    assert_eq!(catalog.len(), 4);
    let mut kinds: Vec<String> = catalog
        .entries()
        .map(|e| format!("{}.{}", e.kind(), e.group()))
        .collect();
    kinds.sort();
    assert_eq!(
        kinds,
        vec![
            "Bucket.storage.example.org",
            "Network.platform.example.org",
            "Queue.messaging.example.org",
            "XNetwork.platform.example.org",
        ]
    );
}

#[test]
fn different_version_schemas_select_by_name() {
    let catalog = load();
    let alpha = catalog
        .lookup("storage.example.org", "Bucket", "v1alpha1")
        .expect("found");
    let schema = alpha.schema.expect("schema");
    assert!(schema.descend(&["spec", "region"]).is_some());
    assert!(schema.descend(&["spec", "forProvider"]).is_none());
    let beta = catalog
        .lookup("storage.example.org", "Bucket", "v1beta1")
        .expect("found");
    assert!(
        beta.schema
            .and_then(|s| s.descend(&["spec", "forProvider", "region"]))
            .is_some()
    );
    let unknown = catalog
        .lookup("storage.example.org", "Bucket", "v1")
        .expect("CRD found");
    assert!(unknown.schema.is_none());
    assert!(!unknown.version_found);
    assert_eq!(unknown.served_versions, vec!["v1alpha1", "v1beta1"]);
}

#[test]
fn identical_version_schemas_serve_any_version() {
    let catalog = load();
    for version in ["v1", "v1beta1", "v7"] {
        let r = catalog
            .lookup("messaging.example.org", "Queue", version)
            .expect("found");
        let schema = r.schema.expect("shared schema");
        let mut obj = json!({"spec": {}});
        apply_defaults(&mut obj, schema);
        assert_eq!(obj, json!({"spec": {"size": 10}}));
    }
    let r = catalog
        .lookup("messaging.example.org", "Queue", "v1beta1")
        .expect("found");
    assert!(r.version_found);
    assert_eq!(r.served_versions, vec!["v1"]);
}

#[test]
fn xrd_machinery_and_claim_resolve() {
    let catalog = load();
    let xr = catalog
        .lookup("platform.example.org", "XNetwork", "v1alpha1")
        .expect("XR");
    assert_eq!(
        xr.origin(),
        &Origin::CompositeFromXrd {
            xrd: "xnetworks.platform.example.org".into()
        }
    );
    let s = xr.schema.expect("schema");
    assert!(s.descend(&["spec", "compositionRef", "name"]).is_some());
    assert!(s.descend(&["spec", "cidr"]).is_some());
    assert!(
        s.descend(&["status", "conditions", "[]", "status"])
            .is_some()
    );
    let claim = catalog
        .lookup("platform.example.org", "Network", "v1alpha1")
        .expect("claim");
    assert_eq!(claim.name(), "networks.platform.example.org");
    assert!(
        claim
            .schema
            .and_then(|s| s.descend(&["spec", "compositeDeletePolicy"]))
            .is_some()
    );
}

#[test]
fn not_found_and_ambiguous_messages() {
    let mut catalog = load();
    let err = catalog
        .lookup("storage.example.org", "Blob", "v1")
        .expect_err("absent");
    assert_eq!(
        err.to_string(),
        "CustomResourceDefinition.apiextensions.k8s.io \"Blob.storage.example.org\" not found"
    );
    // A second, different Bucket CRD from another file makes the lookup ambiguous.
    let other = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "buckets.storage.example.org"},
        "spec": {"group": "storage.example.org", "scope": "Cluster",
                 "names": {"kind": "Bucket", "plural": "buckets"},
                 "versions": [{"name": "v1", "served": true, "storage": true}]}
    });
    catalog.add_document(&other, "other.yaml").expect("added");
    let err = catalog
        .lookup("storage.example.org", "Bucket", "v1beta1")
        .expect_err("ambiguous");
    assert_eq!(
        err.to_string(),
        "more than one CRD found for Bucket.storage.example.org: [buckets.storage.example.org buckets.storage.example.org]"
    );
    let LookupError::Ambiguous { candidates, .. } = &err else {
        panic!("expected Ambiguous, got {err:?}");
    };
    let sources: Vec<&str> = candidates.iter().map(|c| c.source.as_str()).collect();
    assert_eq!(
        sources,
        vec!["other.yaml", "testdata/schema/catalog-fixtures.yaml"]
    );
}
