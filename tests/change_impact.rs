//! Change impact end to end: the real `composition-webhook serve --audit --change-impact`
//! against the in-process fake API server. The audit learns which kinds the cluster's
//! Composition uses; an UPDATE of the CRD it patches into, sent as the API server sends it
//! (an `admission.k8s.io/v1` review of a CustomResourceDefinition), is answered with a
//! warning naming the Composition and the field when it removes that field, and with nothing
//! when it does not. With `--deny-breaking-changes` the breaking update is denied.
//! Material: testdata/audit/ (written for this project).

mod kubeapi;
mod webhook;

use std::time::Duration;

use kubeapi::{FakeApiServer, Resource};
use serde_json::{Value, json};
use webhook::{ScratchDir, Server, eventually, project_dir, verdict, yaml_documents};

fn one(file: &str) -> Value {
    yaml_documents(&project_dir().join("testdata/audit").join(file))
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("a document in testdata/audit/{file}"))
}

const BROKEN: &str = "CRD buckets.storage.example.org: breaks Composition \"buckets\": spec.pipeline[0].input.resources[0].patches[0].toFieldPath: Invalid value: \"spec.forProvider.region\": field 'region' is not valid according to the schema";

struct Cluster {
    api: FakeApiServer,
    dir: ScratchDir,
}

impl Cluster {
    async fn start() -> Cluster {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let api = FakeApiServer::start().await;
        let dir = ScratchDir::new("change-impact");
        api.write_kubeconfig(&dir.path("kubeconfig"));
        api.apply(Resource::Xrds, one("xrd.yaml"));
        api.apply(Resource::Crds, one("bucket-crd.yaml"));
        api.apply(Resource::Compositions, one("composition.yaml"));
        Cluster { api, dir }
    }

    /// The webhook with `extra` flags, once it has audited the Composition.
    async fn webhook(&self, extra: &[&str]) -> Server {
        let kubeconfig = self.dir.path("kubeconfig");
        let mut args = vec!["--kubeconfig", kubeconfig.to_str().expect("utf-8 path")];
        args.extend(extra);
        let server = tokio::task::block_in_place(|| Server::start(&[], &args));
        eventually(
            "the Composition is audited",
            Duration::from_secs(30),
            || async {
                let (status, body) = server.ops_get("/debug/audit").await;
                status == 200
                    && serde_json::from_str::<Value>(&body)
                        .is_ok_and(|v| v["audited"] == 1 && v["queued"] == 0)
            },
        )
        .await;
        server
    }
}

/// The review the API server sends for an UPDATE of `object`, a CustomResourceDefinition.
fn crd_update(object: Value) -> Value {
    let name = object["metadata"]["name"].clone();
    let gvk = json!({"group": "apiextensions.k8s.io", "version": "v1", "kind": "CustomResourceDefinition"});
    let gvr = json!({"group": "apiextensions.k8s.io", "version": "v1", "resource": "customresourcedefinitions"});
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "5e1f0a44-0000-4000-8000-00000000c0de",
            "kind": gvk, "resource": gvr, "requestKind": gvk, "requestResource": gvr,
            "name": name,
            "operation": "UPDATE",
            "userInfo": {"username": "system:serviceaccount:crossplane-system:crossplane"},
            "object": object,
            "oldObject": one("bucket-crd.yaml"),
            "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "UpdateOptions"},
        },
    })
}

async fn review(server: &Server, object: Value) -> (bool, u64, String, Vec<String>) {
    let response = server.client().review(&crd_update(object)).await;
    verdict(&response)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crd_update_that_removes_a_patched_field_warns_and_one_that_keeps_it_does_not() {
    let cluster = Cluster::start().await;
    let server = cluster.webhook(&["--audit", "--change-impact"]).await;

    let removed = review(&server, one("bucket-crd-without-region.yaml")).await;
    assert_eq!(removed, (true, 0, String::new(), vec![BROKEN.to_string()]));

    let kept = review(&server, one("bucket-crd.yaml")).await;
    assert_eq!(kept, (true, 0, String::new(), Vec::<String>::new()));

    // A kind no Composition uses: nothing to say.
    let mut other = one("bucket-crd-without-region.yaml");
    other["metadata"]["name"] = json!("queues.storage.example.org");
    other["spec"]["names"] = json!({"kind": "Queue", "plural": "queues"});
    let unrelated = review(&server, other).await;
    assert_eq!(unrelated, (true, 0, String::new(), Vec::<String>::new()));
    drop(cluster.api);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_deny_breaking_changes_the_breaking_update_is_forbidden() {
    let cluster = Cluster::start().await;
    let server = cluster
        .webhook(&["--audit", "--change-impact", "--deny-breaking-changes"])
        .await;
    let removed = review(&server, one("bucket-crd-without-region.yaml")).await;
    assert_eq!(
        removed,
        (
            false,
            403,
            "CRD buckets.storage.example.org: this update breaks 1 Composition: \"buckets\" (see the warnings; the webhook denies breaking changes)".to_string(),
            vec![BROKEN.to_string()]
        )
    );
    let kept = review(&server, one("bucket-crd.yaml")).await;
    assert_eq!(kept, (true, 0, String::new(), Vec::<String>::new()));
}
