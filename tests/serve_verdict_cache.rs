//! The verdict cache end to end, with the real binary: a Composition reviewed again (as a
//! GitOps re-apply sends it, with a new resourceVersion and managedFields) gets the answer
//! its first review got, counted as a hit; a changed Composition, or a changed schema it uses
//! (a CRD updated in the fake API server), is validated again and gets the new verdict.

mod kubeapi;
mod webhook;

use std::time::Duration;

use kubeapi::{FakeApiServer, Resource};
use serde_json::{Value, json};
use webhook::{
    ScratchDir, Server, composition, eventually, metric, project_dir, review_object, start,
    verdict, yaml_documents,
};

/// Within this, a change in the fake cluster shows.
const SOON: Duration = Duration::from_secs(15);

fn lookups(result: &str) -> String {
    format!("composition_webhook_verdict_cache_lookups_total{{result=\"{result}\"}}")
}

/// Hits, misses and stale entries so far.
async fn counts(server: &Server) -> (f64, f64, f64) {
    let mut out = [0.0; 3];
    for (n, result) in out.iter_mut().zip(["hit", "miss", "stale"]) {
        *n = metric(server, &lookups(result)).await.unwrap_or(0.0);
    }
    (out[0], out[1], out[2])
}

/// The Composition as the API server sends it on a re-apply: what it adds changed.
fn reapplied(mut c: Value, generation: u64) -> Value {
    let meta = c["metadata"].as_object_mut().expect("metadata");
    meta.insert(
        "resourceVersion".into(),
        json!(format!("{}", 1000 + generation)),
    );
    meta.insert("generation".into(), json!(generation));
    meta.insert("uid".into(), json!("5b9e1c3a-0000-4000-8000-00000000000a"));
    meta.insert(
        "managedFields".into(),
        json!([{"manager": "argocd-controller", "operation": "Apply",
            "time": format!("2026-01-0{generation}T00:00:00Z")}]),
    );
    c
}

/// The example Composition with a patch to a field that is not in the Network's schema.
fn broken() -> Value {
    let mut c = composition();
    c["spec"]["resources"][0]["patches"]
        .as_array_mut()
        .expect("patches")
        .push(json!({"fromFieldPath": "spec.id", "toFieldPath": "spec.forProvider.nosuchfield"}));
    c
}

const BROKEN: &str = "spec.resources[0].patches[2].toFieldPath: Invalid value: \"spec.forProvider.nosuchfield\": field 'nosuchfield' is not valid according to the schema";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reapplied_composition_gets_its_first_answer_from_the_cache() {
    let server = tokio::task::block_in_place(|| start(&[]));
    let first = verdict(&review_object(&server, &reapplied(broken(), 1), "10s").await);
    assert_eq!((first.0, first.1), (false, 422));
    assert_eq!(
        first.2,
        format!(
            "Composition.apiextensions.crossplane.io \"xnetworks.gcp.platformref.upbound.io\" is invalid: {BROKEN}"
        )
    );
    assert_eq!(counts(&server).await, (0.0, 1.0, 0.0));
    let again = verdict(&review_object(&server, &reapplied(broken(), 2), "10s").await);
    assert_eq!(again, first);
    assert_eq!(counts(&server).await, (1.0, 1.0, 0.0));
    assert_eq!(
        metric(&server, "composition_webhook_verdict_cache_entries").await,
        Some(1.0)
    );
    let bytes = metric(&server, "composition_webhook_verdict_cache_bytes")
        .await
        .expect("the bytes gauge");
    assert!(bytes > 500.0 && bytes < 8192.0, "{bytes}");
    // The findings of a hit are counted as a validation's are.
    let findings =
        r#"composition_webhook_findings_total{stage="schema",type="Invalid",severity="error"}"#;
    assert_eq!(metric(&server, findings).await, Some(2.0));
    // Fixed: another key, validated, allowed.
    let fixed = verdict(&review_object(&server, &reapplied(composition(), 3), "10s").await);
    assert_eq!(fixed, (true, 0, String::new(), Vec::new()));
    assert_eq!(counts(&server).await, (1.0, 2.0, 0.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_no_bytes_nothing_is_cached() {
    let server = tokio::task::block_in_place(|| start(&["--verdict-cache-bytes", "0"]));
    for generation in 1..=2 {
        let v = verdict(&review_object(&server, &reapplied(broken(), generation), "10s").await);
        assert_eq!((v.0, v.1), (false, 422));
    }
    assert_eq!(counts(&server).await, (0.0, 0.0, 0.0));
    assert_eq!(
        metric(&server, "composition_webhook_verdict_cache_entries").await,
        Some(0.0)
    );
}

fn one(path: &str) -> Value {
    yaml_documents(&project_dir().join(path))
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("a document in {path}"))
}

/// The Network CRD with `spec.forProvider.nosuchfield`, which [`broken`] patches.
fn network_crd_with_the_field() -> Value {
    let mut crd = one("testdata/crds/compute.gcp.upbound.io_networks.yaml");
    for v in crd["spec"]["versions"].as_array_mut().expect("versions") {
        v.pointer_mut("/schema/openAPIV3Schema/properties/spec/properties/forProvider/properties")
            .and_then(Value::as_object_mut)
            .expect("forProvider's properties")
            .insert("nosuchfield".into(), json!({"type": "string"}));
    }
    crd
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_crd_change_in_the_cluster_is_validated_again() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let api = FakeApiServer::start().await;
    let dir = ScratchDir::new("verdict-cache");
    api.write_kubeconfig(&dir.path("kubeconfig"));
    api.apply(Resource::Xrds, one("testdata/example/definition.yaml"));
    api.apply(
        Resource::Crds,
        one("testdata/crds/compute.gcp.upbound.io_networks.yaml"),
    );
    api.apply(
        Resource::Crds,
        one("testdata/crds/compute.gcp.upbound.io_subnetworks.yaml"),
    );
    let kubeconfig = dir.path("kubeconfig");
    let args = ["--kubeconfig", kubeconfig.to_str().expect("utf-8 path")];
    let server = tokio::task::block_in_place(|| Server::start(&[], &args));
    eventually("/readyz is 200", SOON, || async {
        server.ops_get("/readyz").await.0 == 200
    })
    .await;

    let denied = verdict(&review_object(&server, &reapplied(broken(), 1), "10s").await);
    assert_eq!((denied.0, denied.1), (false, 422));
    assert!(denied.2.ends_with(BROKEN), "{}", denied.2);
    assert_eq!(
        verdict(&review_object(&server, &reapplied(broken(), 2), "10s").await),
        denied
    );
    assert_eq!(counts(&server).await, (1.0, 1.0, 0.0));

    // The Network CRD gains the field: the same Composition is now allowed, once the
    // webhook has the new schema (until then, the cached denial stands).
    api.apply(Resource::Crds, network_crd_with_the_field());
    eventually("the Composition allowed", SOON, || async {
        verdict(&review_object(&server, &reapplied(broken(), 3), "10s").await).0
    })
    .await;
    let (hits, misses, stale) = counts(&server).await;
    assert_eq!((misses, stale), (1.0, 1.0), "validated again once");
    let allowed = verdict(&review_object(&server, &reapplied(broken(), 4), "10s").await);
    assert_eq!(allowed, (true, 0, String::new(), Vec::new()));
    assert_eq!(counts(&server).await, (hits + 1.0, 1.0, 1.0), "a hit again");
}
