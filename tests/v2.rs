//! Crossplane v2 as users meet it: scope rules, the v2 mock XR and rendering, and messages
//! that say where v1 fields went. Material from Crossplane v2.3.4 (e2e XRDs and
//! compositions, see testdata/README.md) and provider-upjet-aws v2.6.0 S3 Bucket CRDs.

mod common;
mod webhook;

use std::path::Path;

use composition_webhook::findings::Stage;
use composition_webhook::schema::{Catalog, CompositionApi, CrossplaneVersion};
use composition_webhook::validate::{Options, Validator};
use serde_json::{Value, json};

fn v2_file(name: &str) -> Value {
    common::read_yaml(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("testdata/v2")
            .join(name),
    )
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

/// A P&T template composing an S3 Bucket of `api_version` in us-east-2, with `patches`.
fn bucket(api_version: &str, patches: Value) -> Value {
    let mut t = json!({"name": "bucket", "base": {
        "apiVersion": api_version, "kind": "Bucket",
        "spec": {"forProvider": {"region": "us-east-2"}}}});
    if !patches.is_null() {
        t["patches"] = patches;
    }
    t
}

/// The namespaced S3 Bucket composed for the v2.3.4 e2e `basic-namespaced` XR (`Test`).
fn namespaced_bucket_for_test() -> Value {
    pipeline(
        "example.org/v1alpha1",
        "Test",
        json!([bucket("s3.aws.m.upbound.io/v1beta1", Value::Null)]),
    )
}

/// The ClusterRole of the v2.3.4 e2e case namespaced-xr-no-cluster-scoped-resource, as a
/// patch-and-transform base of its namespaced XR.
fn cluster_role_for_namespaced_xr() -> Value {
    pipeline(
        "validation.example.org/v1alpha1",
        "NamespacedTest",
        json!([{"name": "cluster-role-test", "base": {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "cluster-role"},
            "rules": [{"apiGroups": ["example.org"], "resources": ["clustertests"], "verbs": ["*"]}]}}]),
    )
}

/// `field: message` of every finding but the Crds stage's; the same when the Composition is
/// used up and read again only when needed (the webhook's way).
fn messages(catalog: &Catalog, c: &Value) -> Vec<String> {
    let validator = Validator::new(catalog, Options::default());
    let shown = |r: composition_webhook::validate::Report| -> Vec<String> {
        r.findings
            .iter()
            .filter(|f| f.stage != Stage::Crds)
            .map(|f| f.error.to_string())
            .collect()
    };
    let kept = shown(validator.validate_value(c));
    let used_up = shown(validator.validate_owned_rereading(c.clone(), || Some(c.clone())));
    assert_eq!(used_up, kept, "used up and read again");
    kept
}

const NAMESPACED_XRD: &str = "namespaced-xr-no-cluster-scoped-resource.definition.yaml";
const BUCKETS: &str = "crds/s3.aws.upbound.io_buckets.yaml";
const M_BUCKETS: &str = "crds/s3.aws.m.upbound.io_buckets.yaml";

#[test]
fn a_namespaced_xr_composing_a_cluster_scoped_kind_is_an_error() {
    let c = cluster_role_for_namespaced_xr();
    assert_eq!(
        messages(&catalog(&[NAMESPACED_XRD]), &c),
        [
            r#"spec.pipeline[0].input.resources[0].base.apiVersion: Invalid value: "rbac.authorization.k8s.io/v1": ClusterRole is cluster scoped and a namespaced composite resource composes only namespaced resources: Crossplane fails with "cannot apply cluster scoped composed resource "cluster-role-test" (a ClusterRole named cluster-role) for a namespaced composite resource.""#
        ]
    );
}

#[test]
fn the_namespaced_upjet_kind_is_named() {
    let buckets = |api_version: &str| json!([bucket(api_version, Value::Null)]);
    let cat = catalog(&[NAMESPACED_XRD, BUCKETS, M_BUCKETS]);
    let c = pipeline(
        "validation.example.org/v1alpha1",
        "NamespacedTest",
        buckets("s3.aws.upbound.io/v1beta1"),
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
        buckets("s3.aws.m.upbound.io/v1beta1"),
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
/// machinery under `spec.crossplane` (its required string holds its name as a DNS label), and
/// its composed resources in its namespace, owned through the mock's uid (a template's own
/// namespace is replaced: tests/agreement.rs `base-namespace-replaced`).
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
            "# The mock composite resource\napiVersion: example.org/v1alpha1\nkind: Test\nmetadata:\n  name: test-mock\n  namespace: default\n  uid: 00000000-0000-4000-8000-000000000000\n  labels:\n    crossplane.io/composite: test-mock\nspec:\n  coolField: cool-field\n  crossplane:\n    compositionRef:\n      name: basic-composition-namespaced\n    compositionUpdatePolicy: Automatic\n",
            "# spec.pipeline[0].input.resources[0] (bucket)\napiVersion: s3.aws.m.upbound.io/v1beta1\nkind: Bucket\nmetadata:\n  generateName: test-mock-\n  namespace: default\n  labels:\n    crossplane.io/composite: test-mock\n  annotations:\n    crossplane.io/composition-resource-name: bucket\n    cool: cool-field\n  ownerReferences:\n  - apiVersion: example.org/v1alpha1\n    kind: Test\n    name: test-mock\n    uid: 00000000-0000-4000-8000-000000000000\n    controller: true\n    blockOwnerDeletion: true\nspec:\n  forProvider:\n    region: us-east-2\n",
        ]
    );
}

#[test]
fn patches_of_v1_machinery_on_a_v2_xr_say_where_it_went() {
    let cat = catalog(&["basic-namespaced.definition.yaml", M_BUCKETS]);
    let c = pipeline(
        "example.org/v1alpha1",
        "Test",
        json!([bucket(
            "s3.aws.m.upbound.io/v1beta1",
            json!([
                {"fromFieldPath": "spec.compositionRef.name", "toFieldPath": "metadata.annotations[composition]"},
                {"fromFieldPath": "spec.claimRef.name", "toFieldPath": "metadata.annotations[claim]"},
                {"type": "ToCompositeFieldPath", "fromFieldPath": "metadata.name",
                 "toFieldPath": "spec.writeConnectionSecretToRef.name"},
                {"fromFieldPath": "spec.crossplane.compositionRef.name", "toFieldPath": "metadata.annotations[ok]"}
            ])
        )]),
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
                r#"{p}[2].toFieldPath: Invalid value: "spec.writeConnectionSecretToRef.name": field 'writeConnectionSecretToRef' is not valid according to the schema; a Crossplane v2 composite resource (scope Namespaced or Cluster) writes no connection secret: spec.writeConnectionSecretToRef exists only with scope LegacyCluster (function-patch-and-transform composes the Secret its input.writeConnectionSecretToRef names)"#
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
    // The unknown spec.resources comes first: the API server refuses unknown fields (strict
    // field validation, while decoding) before it validates the schema.
    let unknown_resources = "spec.resources: Invalid value: \"resources\": unknown field: \"resources\": Crossplane v2 Compositions have no spec.resources: compose resources in a pipeline step of function-patch-and-transform (`crossplane beta convert pipeline-composition` converts a v1 Composition) (checked against Crossplane v2.3.4's Composition API; for Crossplane v1, validate with --crossplane-version v1)";
    let found = messages(&catalog, &resources_mode("example.org/v1alpha1", "Test"));
    assert_eq!(
        found.get(..2),
        Some(
            &[
                unknown_resources.to_string(),
                "spec.mode: Unsupported value: \"Resources\": supported values: \"Pipeline\": example.org/v1alpha1, Test is a Crossplane v2 composite resource (its XRD's scope is Namespaced or Cluster), and Crossplane v2 composes only through a function pipeline: move spec.resources, spec.patchSets and spec.environment into the input of a function-patch-and-transform step (`crossplane beta convert pipeline-composition` does it)".to_string()
            ][..]
        ),
        "{found:?}"
    );
    // Crossplane v2 has no Resources mode for a LegacyCluster XR either: its API refuses it.
    let legacy = resources_mode("nop.example.org/v1alpha1", "XNopResource");
    let found = messages(&catalog, &legacy);
    assert_eq!(
        found.get(..2),
        Some(
            &[
                unknown_resources.to_string(),
                "spec.mode: Unsupported value: \"Resources\": supported values: \"Pipeline\": Crossplane v2 runs only Pipeline mode: move spec.resources into a function-patch-and-transform step (`crossplane beta convert pipeline-composition` converts a v1 Composition) (checked against Crossplane v2.3.4's Composition API; for Crossplane v1, validate with --crossplane-version v1)".to_string()
            ][..]
        ),
        "{found:?}"
    );
    // With Crossplane v1's API a LegacyCluster XR's Resources mode is fine, while a v2 XRD
    // still gets the migration.
    let v1 = Options {
        composition_api: CompositionApi::embedded(CrossplaneVersion::V1),
        ..Options::default()
    };
    let with_v1 = |c: &Value| -> Vec<String> {
        Validator::new(&catalog, v1.clone())
            .validate_value(c)
            .findings
            .iter()
            .map(|f| f.error.to_string())
            .collect()
    };
    assert!(
        with_v1(&legacy).iter().all(|m| !m.starts_with("spec.mode")),
        "{:?}",
        with_v1(&legacy)
    );
    assert!(
        with_v1(&resources_mode("example.org/v1alpha1", "Test"))[0]
            .contains("is a Crossplane v2 composite resource")
    );
}

/// What `validate` says of a Composition file: whether it is allowed, its errors and its
/// warnings (`field: message`), with every v2 schema of testdata.
fn validate_file(file: &Path, flags: &[&str]) -> (bool, Vec<String>, Vec<String>) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_composition-webhook"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .arg("validate")
        .args(["--output", "json"])
        .args(V2_SCHEMAS.iter().flat_map(|s| ["--crds", s]))
        .args(flags)
        .arg(file)
        .env_remove("COMPOSITION_WEBHOOK_MODE")
        .env_remove("COMPOSITION_WEBHOOK_CROSSPLANE_VERSION")
        .output()
        .expect("run validate");
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let c = &v["compositions"][0];
    let of = |severity: &str| -> Vec<String> {
        c["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .filter(|f| f["severity"] == severity)
            .map(|f| f["message"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    (c["allowed"] == true, of("error"), of("warning"))
}

/// The schemas of the v2 material: the e2e XRDs, P&T's example XR and the S3 Buckets.
const V2_SCHEMAS: [&str; 5] = [
    "testdata/v2/basic-namespaced.definition.yaml",
    "testdata/v2/legacy.definition.yaml",
    "testdata/v2/namespaced-xr-no-cluster-scoped-resource.definition.yaml",
    "testdata/v2/crds",
    "testdata/patch-and-transform/definition.yaml",
];

/// Every v2 case of this file, with its source, through `validate` (offline, Crossplane
/// v2.3.4's Composition API) and through `serve` (the Composition as a v2.3.4 API server
/// defaults and sends it): the same verdict, the same errors, the same warnings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_and_serve_agree_on_v2_material() {
    let file = |path: &str| -> Value {
        webhook::yaml_documents(&webhook::project_dir().join(path))
            .into_iter()
            .find(|d| d["kind"] == "Composition")
            .expect("a Composition")
    };
    let cases: Vec<(&str, Value)> = vec![
        // P&T v0.10.8 example/ and the v2.3.4 e2e basic-namespaced XR type.
        ("bucket", file("testdata/v2/bucket-composition.yaml")),
        (
            "pt-example",
            file("testdata/patch-and-transform/composition.yaml"),
        ),
        (
            "pt-multistep",
            file("testdata/patch-and-transform/multistep-composition.yaml"),
        ),
        // v2.3.4 e2e namespaced-xr-no-cluster-scoped-resource.
        ("cluster-role", cluster_role_for_namespaced_xr()),
        (
            "cluster-bucket",
            pipeline(
                "validation.example.org/v1alpha1",
                "NamespacedTest",
                json!([bucket("s3.aws.upbound.io/v1beta1", Value::Null)]),
            ),
        ),
        ("requirements", with_requirements()),
        (
            "v1-machinery",
            pipeline(
                "example.org/v1alpha1",
                "Test",
                json!([bucket(
                    "s3.aws.m.upbound.io/v1beta1",
                    json!([{"fromFieldPath": "spec.compositionRef.name",
                            "toFieldPath": "metadata.annotations[composition]"}])
                )]),
            ),
        ),
    ];
    let crds: Vec<std::path::PathBuf> = V2_SCHEMAS
        .iter()
        .map(|s| webhook::project_dir().join(s))
        .collect();
    let refs: Vec<&Path> = crds.iter().map(|p| p.as_path()).collect();
    let server = webhook::Server::start(&refs, &[]);
    let dir = webhook::ScratchDir::new("v2-agree");
    let api = CompositionApi::default();
    for (name, c) in cases {
        let path = dir.path(&format!("{name}.json"));
        std::fs::write(&path, serde_json::to_vec(&c).expect("json")).expect("write");
        let offline = validate_file(&path, &[]);
        let sent = composition_webhook::model::with_api_defaults(&c, &api);
        let review = webhook::composition_review("v1", name, "CREATE", sent);
        let r = server.client().review(&review).await;
        let causes: Vec<String> = r["status"]["details"]["causes"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|c| {
                        format!(
                            "{}: {}",
                            c["field"].as_str().unwrap_or(""),
                            c["message"].as_str().unwrap_or("")
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let (allowed, errors, warnings) = offline;
        assert_eq!(allowed, expected_allowed(name), "{name}: {errors:?}");
        assert_eq!(r["allowed"], allowed, "{name}: {r}");
        assert_eq!(causes, errors, "{name}");
        // The API server shows warnings shortened (no bad value, the middle elided): the
        // fields they name are the same.
        let field = |w: &str| w.split(": ").next().unwrap_or_default().to_string();
        let served: Vec<String> = r["warnings"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(|w| field(w.split_once("\": ").map_or(w, |(_, rest)| rest)))
                    .collect()
            })
            .unwrap_or_default();
        let offline: Vec<String> = warnings.iter().map(|w| field(w)).collect();
        assert_eq!(served, offline, "{name}: {r}");
    }
}

/// The verdict each case of [`validate_and_serve_agree_on_v2_material`] must get.
fn expected_allowed(name: &str) -> bool {
    !matches!(name, "cluster-role" | "cluster-bucket" | "v1-machinery")
}

/// A pipeline whose first step declares `requirements` (v2's Composition API only): the
/// shape of v2.3.4's CRD `spec.pipeline[].requirements.requiredResources`, as the v2.3 docs
/// use it with function-extra-resources.
fn with_requirements() -> Value {
    let mut c = namespaced_bucket_for_test();
    c["spec"]["pipeline"][0]["requirements"] = json!({"requiredResources": [{
        "requirementName": "environment", "apiVersion": "v1", "kind": "ConfigMap",
        "name": "environment"}]});
    c
}

/// `writeConnectionSecretToRef.patches` of a P&T step: their paths and types are checked
/// like other patches, against the XR on one side and, on the other, the object P&T patches
/// them onto (v0.10.8 `connection.go`: `apiVersion`, `kind`, `name`, `namespace`, of which
/// only `name` and `namespace` are read back). The valid case is P&T's
/// `connection_test.go` "PatchFromCompositeFieldPath" (metadata.uid formatted into the
/// name, a spec field into the namespace).
#[test]
fn connection_secret_patches_are_checked_like_other_patches() {
    let cat = catalog(&["basic-namespaced.definition.yaml", M_BUCKETS]);
    let with_patches = |patches: Value| {
        let mut c = namespaced_bucket_for_test();
        c["spec"]["pipeline"][0]["input"]["writeConnectionSecretToRef"] =
            json!({"patches": patches});
        c
    };
    let valid = with_patches(json!([
        {"type": "FromCompositeFieldPath", "fromFieldPath": "metadata.uid", "toFieldPath": "name",
         "transforms": [{"type": "string", "string": {"type": "Format", "fmt": "%s-cool-creds"}}]},
        {"type": "FromCompositeFieldPath", "fromFieldPath": "spec.coolField", "toFieldPath": "namespace"}
    ]));
    assert_eq!(messages(&cat, &valid), Vec::<String>::new());
    let invalid = with_patches(json!([
        {"fromFieldPath": "spec.coolFeld", "toFieldPath": "name"},
        {"fromFieldPath": "spec.coolField", "toFieldPath": "metadata.name"},
        {"type": "CombineFromComposite", "combine": {"strategy": "string",
            "variables": [{"fromFieldPath": "metadata.name"}], "string": {"fmt": "%s-creds"}}},
        {"type": "ToCompositeFieldPath", "fromFieldPath": "name", "toFieldPath": "spec.coolField"}
    ]));
    let p = "spec.pipeline[0].input.writeConnectionSecretToRef.patches";
    assert_eq!(
        messages(&cat, &invalid),
        [
            format!(
                r#"{p}[3].type: Unsupported value: "ToCompositeFieldPath": supported values: "FromCompositeFieldPath", "CombineFromComposite""#
            ),
            format!(
                "{p}[2].toFieldPath: Required value: toFieldPath must be set for patch type CombineFromComposite"
            ),
            format!(
                r#"{p}[1].toFieldPath: Invalid value: "metadata.name": function-patch-and-transform reads only name and namespace back from the connection secret reference: this patch would change nothing"#
            ),
            format!(
                r#"{p}[0].fromFieldPath: Invalid value: "spec.coolFeld": field 'coolFeld' is not valid according to the schema; did you mean "coolField"?"#
            ),
        ]
    );
}

/// Crossplane v2 composes built-in kinds directly: the getting-started App (a Deployment and
/// a Service through function-patch-and-transform) is allowed in strict mode with its bases
/// validated against Kubernetes' own schemas (offline: v1.28.4's OpenAPI, embedded), and a
/// typo in its Deployment is denied. A field those schemas do not know and that is near no
/// known one may be a later Kubernetes version's: a warning.
#[test]
fn built_in_kinds_are_validated_against_kubernetes_schemas() {
    let cat = catalog(&["app/definition.yaml"]);
    let c = v2_file("app/composition.yaml");
    let report = Validator::new(&cat, Options::default()).validate_value(&c);
    assert_eq!(
        report
            .findings
            .iter()
            .map(|f| f.message())
            .collect::<Vec<_>>(),
        Vec::<String>::new()
    );
    assert!(report.verdict.allowed);

    let mut typo = c.clone();
    let deployment = &mut typo["spec"]["pipeline"][0]["input"]["resources"][0]["base"]["spec"];
    let replicas = deployment
        .as_object_mut()
        .and_then(|d| d.shift_remove("replicas"))
        .expect("replicas");
    deployment["replica"] = replicas;
    typo["spec"]["pipeline"][0]["input"]["resources"][1]["base"]["spec"]["trafficDistribution"] =
        serde_json::json!("PreferClose");
    let report = Validator::new(&cat, Options::default()).validate_value(&typo);
    assert_eq!(
        report
            .findings
            .iter()
            .map(|f| format!("{}: {}", f.severity.name(), f.message()))
            .collect::<Vec<_>>(),
        [
            "error: spec.pipeline[0].input.resources[0].base.spec.replica: Invalid value: \"replica\": unknown field: \"replica\", did you mean \"replicas\"?",
            "warning: spec.pipeline[0].input.resources[1].base.spec.trafficDistribution: Invalid value: \"trafficDistribution\": unknown field: \"trafficDistribution\" (unknown to Kubernetes v1.28.4's OpenAPI, embedded; an API server of a later Kubernetes version may know it)",
        ]
    );
    assert_eq!(report.verdict.code, Some(422));
}

/// The ManagedResourceDefinition Crossplane v2 makes of a provider's CRD when it installs a
/// provider (the CRD's spec, `spec.state` added; the v2.3.4 MRD CRD's schema): here of
/// provider-upjet-aws v2.6.0's namespaced S3 Bucket.
fn bucket_mrd(state: Option<&str>) -> Value {
    let crd = v2_file(M_BUCKETS);
    let mut mrd = json!({
        "apiVersion": "apiextensions.crossplane.io/v1alpha1",
        "kind": "ManagedResourceDefinition",
        "metadata": {"name": crd["metadata"]["name"]},
        "spec": crd["spec"],
    });
    if let Some(state) = state {
        mrd["spec"]["state"] = json!(state);
    }
    mrd
}

fn findings(catalog: &Catalog, c: &Value, mode: composition_webhook::mode::Mode) -> Vec<String> {
    let options = Options {
        default_mode: mode,
        ..Options::default()
    };
    let validator = Validator::new(catalog, options);
    let shown = |r: composition_webhook::validate::Report| -> Vec<String> {
        r.findings
            .iter()
            .map(|f| format!("{}: {}", f.severity.name(), f.message()))
            .collect()
    };
    let kept = shown(validator.validate_value(c));
    let used_up = shown(validator.validate_owned_rereading(c.clone(), || Some(c.clone())));
    assert_eq!(used_up, kept, "used up and read again");
    kept
}

/// A kind only an Inactive MRD defines is refused by the API server: the finding names the
/// MRD and what activates it (strict: an error, loose: a warning), and the bases are still
/// validated against the MRD's schema. Active, or once its CRD is there: no finding.
#[test]
fn a_kind_of_an_inactive_mrd_says_what_activates_it() {
    use composition_webhook::mode::Mode;
    let inactive = {
        let mut c = catalog(&["basic-namespaced.definition.yaml"]);
        c.add_document(&bucket_mrd(None), "mrd.yaml").expect("MRD");
        c
    };
    let mut typo = namespaced_bucket_for_test();
    typo["spec"]["pipeline"][0]["input"]["resources"][0]["base"]["spec"]["forProvider"]["regin"] =
        json!("us-east-1");
    let why = "spec.pipeline[0].input.resources[0].base: Not found: \"s3.aws.m.upbound.io/v1beta1, Kind=Bucket\": MRD buckets.s3.aws.m.upbound.io is Inactive: Bucket has no CRD until a ManagedResourceActivationPolicy activates it (spec.activate: its name or \"*.aws.m.upbound.io\")";
    assert_eq!(
        findings(&inactive, &typo, Mode::Strict),
        [
            format!("error: {why}"),
            "error: spec.pipeline[0].input.resources[0].base.spec.forProvider.regin: Invalid value: \"regin\": unknown field: \"regin\", did you mean \"region\"?".to_string(),
        ]
    );
    assert_eq!(
        findings(&inactive, &namespaced_bucket_for_test(), Mode::Loose),
        [format!("warning: {why}")]
    );

    let active = {
        let mut c = catalog(&["basic-namespaced.definition.yaml"]);
        c.add_document(&bucket_mrd(Some("Active")), "mrd.yaml")
            .expect("MRD");
        c
    };
    assert_eq!(
        findings(&active, &namespaced_bucket_for_test(), Mode::Strict),
        Vec::<String>::new()
    );
    // An MRD beside its CRD: the CRD defines the kind.
    let both = {
        let mut c = catalog(&["basic-namespaced.definition.yaml", M_BUCKETS]);
        c.add_document(&bucket_mrd(None), "mrd.yaml").expect("MRD");
        c
    };
    assert_eq!(
        findings(&both, &namespaced_bucket_for_test(), Mode::Strict),
        Vec::<String>::new()
    );
}

/// A ManagedResourceActivationPolicy named `name` with `spec.activate: activate`.
fn mrap(name: &str, activate: &[&str]) -> Value {
    json!({
        "apiVersion": "apiextensions.crossplane.io/v1alpha1",
        "kind": "ManagedResourceActivationPolicy",
        "metadata": {"name": name},
        "spec": {"activate": activate},
    })
}

/// An Inactive MRD a policy activates (by name or wildcard, as Go's `filepath.Match`
/// matches) is served: no finding, and a typo under it is reported alone. A policy that
/// matches it but is paused does not activate it (Crossplane's controller skips it), nor do
/// policies of other MRDs, and the message says so; one whose CRD the file says is not
/// established yet is a warning naming the policy.
#[test]
fn a_policy_that_activates_an_mrd_serves_its_kind() {
    use composition_webhook::mode::Mode;
    let with = |docs: &[Value]| {
        let mut c = catalog(&["basic-namespaced.definition.yaml"]);
        c.add_document(&bucket_mrd(None), "mrd.yaml").expect("MRD");
        for d in docs {
            c.add_document(d, "mrap.yaml").expect("MRAP");
        }
        c
    };
    let mut typo = namespaced_bucket_for_test();
    typo["spec"]["pipeline"][0]["input"]["resources"][0]["base"]["spec"]["forProvider"]["regin"] =
        json!("us-east-1");
    let regin = "error: spec.pipeline[0].input.resources[0].base.spec.forProvider.regin: Invalid value: \"regin\": unknown field: \"regin\", did you mean \"region\"?";
    for activate in [
        "buckets.s3.aws.m.upbound.io",
        "*.aws.m.upbound.io",
        "*",
        "buckets.s3.*",
        "bucket?.s3.aws.m.upbound.io",
        "[a-c]uckets.s3.aws.m.upbound.io",
    ] {
        let c = with(&[mrap("other", &["*.gcp.upbound.io"]), mrap("p", &[activate])]);
        assert_eq!(
            findings(&c, &namespaced_bucket_for_test(), Mode::Strict),
            Vec::<String>::new(),
            "{activate}"
        );
        assert_eq!(findings(&c, &typo, Mode::Strict), [regin], "{activate}");
    }

    let until = "spec.pipeline[0].input.resources[0].base: Not found: \"s3.aws.m.upbound.io/v1beta1, Kind=Bucket\": MRD buckets.s3.aws.m.upbound.io is Inactive: Bucket has no CRD until a ManagedResourceActivationPolicy activates it";
    // A bad pattern matches nothing, as Crossplane drops filepath.Match's error.
    let others = with(&[
        mrap(
            "gcp",
            &["*.gcp.upbound.io", "[", "buckets.s3.aws.upbound.io"],
        ),
        mrap("azure", &["*.azure.upbound.io"]),
    ]);
    assert_eq!(
        findings(&others, &namespaced_bucket_for_test(), Mode::Strict),
        [format!(
            "error: {until}, and none does (azure: spec.activate \"*.azure.upbound.io\"; gcp: spec.activate \"*.gcp.upbound.io\", \"[\" (syntax error in pattern), \"buckets.s3.aws.upbound.io\"); add its name or \"*.aws.m.upbound.io\" to one's spec.activate"
        )]
    );
    let mut paused = mrap("default", &["*"]);
    paused["metadata"]["annotations"] = json!({"crossplane.io/paused": "true"});
    assert_eq!(
        findings(&with(&[paused]), &namespaced_bucket_for_test(), Mode::Loose),
        [format!(
            "warning: {until}, and ManagedResourceActivationPolicy default, whose spec.activate \"*\" matches it, is paused (crossplane.io/paused: \"true\")"
        )]
    );

    // Activated, its CRD not established yet: a warning in every mode, naming the policy.
    let mut not_established = bucket_mrd(None);
    not_established["status"] = json!({"conditions": [{"type": "Established", "status": "False"}]});
    let mut c = catalog(&["basic-namespaced.definition.yaml"]);
    c.add_document(&not_established, "mrd.yaml").expect("MRD");
    c.add_document(&mrap("default", &["*"]), "mrap.yaml")
        .expect("MRAP");
    assert_eq!(
        findings(&c, &namespaced_bucket_for_test(), Mode::Strict),
        [
            "warning: spec.pipeline[0].input.resources[0].base: Not found: \"s3.aws.m.upbound.io/v1beta1, Kind=Bucket\": MRD buckets.s3.aws.m.upbound.io is activated by ManagedResourceActivationPolicy default but Crossplane has not established the CRD of Bucket yet"
        ]
    );

    // A policy Crossplane's CRD refuses is an input error naming the file and field.
    let err = Catalog::new()
        .add_document(&mrap("empty", &[]), "mrap.yaml")
        .expect_err("minItems 1");
    assert_eq!(
        err.to_string(),
        "mrap.yaml: ManagedResourceActivationPolicy \"empty\": spec.activate: should have at least 1 items"
    );
}

/// A built-in kind's `resource.Quantity` is decoded as the API server decodes it: `500m`,
/// `1Gi`, `2` and `0.5` are taken, `lots` is denied with apimachinery's words.
#[test]
fn built_in_kinds_quantities_are_decoded_as_the_api_server_decodes_them() {
    let cat = catalog(&["app/definition.yaml"]);
    let with_cpu = |cpu: serde_json::Value| {
        let mut c = v2_file("app/composition.yaml");
        c["spec"]["pipeline"][0]["input"]["resources"][0]["base"]["spec"]["template"]["spec"]["containers"]
            [0]["resources"]["limits"] = serde_json::json!({"cpu": cpu, "memory": "1Gi"});
        c
    };
    let findings = |c: &serde_json::Value| {
        let report = Validator::new(&cat, Options::default()).validate_value(c);
        let findings: Vec<String> = report
            .findings
            .iter()
            .map(|f| format!("{}: {}", f.severity.name(), f.message()))
            .collect();
        (findings, report.verdict.code)
    };
    for good in [
        serde_json::json!("500m"),
        serde_json::json!("1Gi"),
        serde_json::json!("2"),
        serde_json::json!(2),
        serde_json::json!(0.5),
    ] {
        assert_eq!(findings(&with_cpu(good)), (Vec::<String>::new(), None));
    }
    assert_eq!(
        findings(&with_cpu(serde_json::json!("lots"))),
        (
            vec![
                "error: spec.pipeline[0].input.resources[0].base.spec.template.spec.containers[0].resources.limits[cpu]: Invalid value: \"lots\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'".to_string()
            ],
            Some(422)
        )
    );
}

/// A `step:` indented into a patch-and-transform input, through the whole validator: the
/// input is read (defaulted, pruned) in place, so the logical checks that look for it must
/// run first. The finding is the one `tests/logical_extras.rs` expects of the model.
#[test]
fn a_step_name_indented_into_the_input_is_found_by_the_validator() {
    let mut c = pipeline(
        "validation.example.org/v1alpha1",
        "NamespacedTest",
        json!([bucket("s3.aws.m.upbound.io/v1beta1", Value::Null)]),
    );
    let step = &mut c["spec"]["pipeline"][0];
    step.as_object_mut().expect("step").remove("step");
    step["input"]["step"] = json!("patch-and-transform");
    let found = messages(&catalog(&[NAMESPACED_XRD, M_BUCKETS]), &c);
    assert!(
        found.contains(&"spec.pipeline[0].step: Required value: every pipeline step needs a name; `step` is set inside `input` instead: is it indented one level too deep?".to_string()),
        "{found:?}"
    );
    // Said once, not again as an unknown field of the input.
    assert!(
        !found
            .iter()
            .any(|m| m.starts_with("spec.pipeline[0].input.step")),
        "{found:?}"
    );
}
