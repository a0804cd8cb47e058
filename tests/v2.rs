//! Crossplane v2 as users meet it: scope rules, the v2 mock XR and rendering, and messages
//! that say where v1 fields went. Material from Crossplane v2.3.4 (e2e XRDs and
//! compositions, see testdata/README.md) and provider-upjet-aws v2.6.0 S3 Bucket CRDs.

use std::path::Path;

use composition_webhook::findings::Stage;
use composition_webhook::schema::Catalog;
use composition_webhook::validate::{Options, Validator};
use serde_json::{Value, json};

fn v2_file(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/v2")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn catalog(files: &[&str]) -> Catalog {
    let mut c = Catalog::new();
    for f in files {
        c.add_document(&v2_file(f), f).expect(f);
    }
    c
}

/// A function-patch-and-transform pipeline composing `resources` for `xr`.
fn pipeline(api_version: &str, kind: &str, resources: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
        "metadata": {"name": "v2-composition"},
        "spec": {"compositeTypeRef": {"apiVersion": api_version, "kind": kind},
                 "mode": "Pipeline",
                 "pipeline": [{"step": "patch-and-transform",
                               "functionRef": {"name": "function-patch-and-transform"},
                               "input": {"apiVersion": "pt.fn.crossplane.io/v1beta1",
                                         "kind": "Resources", "resources": resources}}]}
    })
}

/// `field: message` of every finding but the Crds stage's.
fn messages(catalog: &Catalog, c: &Value) -> Vec<String> {
    Validator::new(catalog, Options::default())
        .validate_value(c)
        .findings
        .iter()
        .filter(|f| f.stage != Stage::Crds)
        .map(|f| f.error.to_string())
        .collect()
}

const NAMESPACED_XRD: &str = "namespaced-xr-no-cluster-scoped-resource.definition.yaml";
const BUCKETS: &str = "crds/s3.aws.upbound.io_buckets.yaml";
const M_BUCKETS: &str = "crds/s3.aws.m.upbound.io_buckets.yaml";

#[test]
fn a_namespaced_xr_composing_a_cluster_scoped_kind_is_an_error() {
    // The ClusterRole of the v2.3.4 e2e case namespaced-xr-no-cluster-scoped-resource, as a
    // patch-and-transform base.
    let c = pipeline(
        "validation.example.org/v1alpha1",
        "NamespacedTest",
        json!([{"name": "cluster-role-test", "base": {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "cluster-role"},
            "rules": [{"apiGroups": ["example.org"], "resources": ["clustertests"], "verbs": ["*"]}]}}]),
    );
    assert_eq!(
        messages(&catalog(&[NAMESPACED_XRD]), &c),
        [
            r#"spec.pipeline[0].input.resources[0].base.apiVersion: Invalid value: "rbac.authorization.k8s.io/v1": ClusterRole is cluster scoped and a namespaced composite resource composes only namespaced resources: Crossplane fails with "cannot apply cluster scoped composed resource "cluster-role-test" (a ClusterRole named cluster-role) for a namespaced composite resource.""#
        ]
    );
}

#[test]
fn the_namespaced_upjet_kind_is_named() {
    let bucket = |api_version: &str| {
        json!([{"name": "bucket", "base": {
            "apiVersion": api_version, "kind": "Bucket",
            "spec": {"forProvider": {"region": "us-east-2"}}}}])
    };
    let cat = catalog(&[NAMESPACED_XRD, BUCKETS, M_BUCKETS]);
    let c = pipeline(
        "validation.example.org/v1alpha1",
        "NamespacedTest",
        bucket("s3.aws.upbound.io/v1beta1"),
    );
    assert_eq!(
        messages(&cat, &c),
        [
            r#"spec.pipeline[0].input.resources[0].base.apiVersion: Invalid value: "s3.aws.upbound.io/v1beta1": Bucket is cluster scoped and a namespaced composite resource composes only namespaced resources: Crossplane fails with "cannot apply cluster scoped composed resource "bucket" (a Bucket named ) for a namespaced composite resource."; Bucket of s3.aws.m.upbound.io/v1beta1 is namespaced: use apiVersion s3.aws.m.upbound.io/v1beta1"#
        ]
    );
    let ok = pipeline(
        "validation.example.org/v1alpha1",
        "NamespacedTest",
        bucket("s3.aws.m.upbound.io/v1beta1"),
    );
    assert_eq!(messages(&cat, &ok), Vec::<String>::new());
}

#[test]
fn cluster_xrs_compose_any_scope() {
    // v2.3.4 checks namespaced XRs only (RenderComposedResourceMetadata: "Cluster scoped XRs
    // can compose cluster scoped resources, or resources in any namespace").
    let cat = catalog(&["basic-cluster.definition.yaml", BUCKETS, M_BUCKETS]);
    for api_version in ["s3.aws.upbound.io/v1beta1", "s3.aws.m.upbound.io/v1beta1"] {
        let c = pipeline(
            "example.org/v1alpha1",
            "ClusterTest",
            json!([{"name": "bucket", "base": {
                "apiVersion": api_version, "kind": "Bucket",
                "metadata": {"namespace": "default"},
                "spec": {"forProvider": {"region": "us-east-2"}}}}]),
        );
        assert_eq!(messages(&cat, &c), Vec::<String>::new(), "{api_version}");
    }
}

/// `render` speaks v2: the mock XR of a Namespaced XRD lives in `default` with its
/// machinery under `spec.crossplane`, and its composed resources in its namespace (the
/// template's own namespace is replaced, as `RenderComposedResourceMetadata` does), owned
/// through the mock's uid.
#[test]
fn render_puts_a_namespaced_xr_and_its_resources_in_a_namespace() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_composition-webhook"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "render",
            "testdata/v2/bucket-composition.yaml",
            "--crds",
            "testdata/v2/basic-namespaced.definition.yaml",
            "--crds",
            "testdata/v2/crds/s3.aws.m.upbound.io_buckets.yaml",
        ])
        .env_remove("COMPOSITION_WEBHOOK_MODE")
        .output()
        .expect("run the binary");
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    let docs: Vec<&str> = text.split("---\n").filter(|d| !d.is_empty()).collect();
    assert_eq!(
        docs,
        [
            "# The mock composite resource\napiVersion: example.org/v1alpha1\nkind: Test\nmetadata:\n  name: test-mock\n  namespace: default\n  uid: 00000000-0000-4000-8000-000000000000\n  labels:\n    crossplane.io/composite: test-mock\nspec:\n  coolField: \"\"\n  crossplane:\n    compositionRef:\n      name: basic-composition-namespaced\n    compositionUpdatePolicy: Automatic\n",
            "# spec.pipeline[0].input.resources[0] (bucket)\napiVersion: s3.aws.m.upbound.io/v1beta1\nkind: Bucket\nmetadata:\n  namespace: default\n  generateName: test-mock-\n  labels:\n    crossplane.io/composite: test-mock\n  annotations:\n    crossplane.io/composition-resource-name: bucket\n    cool: \"\"\n  ownerReferences:\n  - apiVersion: example.org/v1alpha1\n    kind: Test\n    name: test-mock\n    uid: 00000000-0000-4000-8000-000000000000\n    controller: true\n    blockOwnerDeletion: true\nspec:\n  forProvider:\n    region: us-east-2\n",
        ]
    );
}

#[test]
fn patches_of_v1_machinery_on_a_v2_xr_say_where_it_went() {
    let cat = catalog(&["basic-namespaced.definition.yaml", M_BUCKETS]);
    let c = pipeline(
        "example.org/v1alpha1",
        "Test",
        json!([{"name": "bucket", "base": {
        "apiVersion": "s3.aws.m.upbound.io/v1beta1", "kind": "Bucket",
        "spec": {"forProvider": {"region": "us-east-2"}}},
        "patches": [
            {"fromFieldPath": "spec.compositionRef.name", "toFieldPath": "metadata.annotations[composition]"},
            {"fromFieldPath": "spec.claimRef.name", "toFieldPath": "metadata.annotations[claim]"},
            {"type": "ToCompositeFieldPath", "fromFieldPath": "metadata.name",
             "toFieldPath": "spec.writeConnectionSecretToRef.name"},
            {"fromFieldPath": "spec.crossplane.compositionRef.name", "toFieldPath": "metadata.annotations[ok]"}
        ]}]),
    );
    let p = "spec.pipeline[0].input.resources[0].patches";
    assert_eq!(
        messages(&cat, &c),
        [
            format!(
                r#"{p}[0].fromFieldPath: Invalid value: "spec.compositionRef.name": field 'compositionRef' is not valid according to the schema; in a Crossplane v2 composite resource (scope Namespaced or Cluster) spec.compositionRef moved to spec.crossplane.compositionRef"#
            ),
            format!(
                r#"{p}[1].fromFieldPath: Invalid value: "spec.claimRef.name": field 'claimRef' is not valid according to the schema; a Crossplane v2 composite resource (scope Namespaced or Cluster) has no claim: spec.claimRef exists only with scope LegacyCluster"#
            ),
            format!(
                r#"{p}[2].toFieldPath: Invalid value: "spec.writeConnectionSecretToRef.name": field 'writeConnectionSecretToRef' is not valid according to the schema; a Crossplane v2 composite resource (scope Namespaced or Cluster) writes no connection secret: spec.writeConnectionSecretToRef exists only with scope LegacyCluster (compose a Secret instead)"#
            ),
        ]
    );
}

/// A Resources-mode Composition (the v1 shape) for a Namespaced v2 XR (the e2e XRD
/// `basic-namespaced`): Crossplane v2 composes only through pipelines, so it is an error
/// that says how to migrate; the same Composition for a LegacyCluster XR is no such error.
#[test]
fn resources_mode_for_a_v2_xr_says_how_to_migrate() {
    let catalog = catalog(&["basic-namespaced.definition.yaml", "legacy.definition.yaml"]);
    let resources_mode = |api_version: &str, kind: &str| {
        json!({
            "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
            "metadata": {"name": "v1-shape"},
            "spec": {
                "compositeTypeRef": {"apiVersion": api_version, "kind": kind},
                "mode": "Resources",
                "resources": [{"name": "cm", "base": {"apiVersion": "v1", "kind": "ConfigMap"}}]
            }
        })
    };
    let found = messages(&catalog, &resources_mode("example.org/v1alpha1", "Test"));
    assert_eq!(
        found.first().map(String::as_str),
        Some(
            "spec.mode: Unsupported value: \"Resources\": supported values: \"Pipeline\": example.org/v1alpha1, Test is a Crossplane v2 composite resource (its XRD's scope is Namespaced or Cluster), and Crossplane v2 composes only through a function pipeline: move spec.resources, spec.patchSets and spec.environment into the input of a function-patch-and-transform step (`crossplane beta convert pipeline-composition` does it), or give the XRD scope LegacyCluster"
        ),
        "{found:?}"
    );
    let found = messages(
        &catalog,
        &resources_mode("nop.example.org/v1alpha1", "XNopResource"),
    );
    assert!(
        found.iter().all(|m| !m.starts_with("spec.mode")),
        "{found:?}"
    );
}
