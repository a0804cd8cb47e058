//! Functions called where Crossplane calls them, end to end: the real `composition-webhook
//! serve` on the in-process API server (`tests/kubeapi/`), which holds a FunctionRevision
//! whose `status.endpoint` is a real function-pythonic 0.6.3 serving mTLS with certificates
//! made like Crossplane's (rcgen: a CA named `crossplane-root-ca`, the function's server
//! certificate, the client certificate of Secret `crossplane-system/crossplane-tls-client`).
//! The webhook validates what the function composes; a new active revision is called at its
//! new address; a function down leaves the step unrendered (a warning in loose mode).

#[path = "functions/certs.rs"]
mod certs;
mod kubeapi;
#[path = "functions/launch.rs"]
mod launch;
mod webhook;

use std::path::Path;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use kubeapi::{FakeApiServer, Resource};
use serde_json::{Value, json};
use webhook::{ScratchDir, Server, eventually, project_dir, verdict, yaml_documents};

const NS: &str = "crossplane-system";
const FUNCTION: &str = "function-pythonic";

fn one(path: &str) -> Value {
    yaml_documents(&project_dir().join(path))
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("a document in {path}"))
}

/// Crossplane's certificates, the function's server certificate holding its Service names
/// and `localhost`, where the test's endpoint points.
fn certificates() -> certs::Certificates {
    certs::crossplane(&[
        FUNCTION.to_string(),
        format!("{FUNCTION}.{NS}"),
        format!("{FUNCTION}.{NS}.svc"),
        "localhost".to_string(),
    ])
}

/// function-pythonic serving mTLS from `certs` (the layout of `TLS_SERVER_CERTS_DIR`).
fn pythonic(certs: &certs::Certificates, dir: &Path) -> launch::Function {
    std::fs::create_dir_all(dir).expect("the certificates' directory");
    std::fs::write(dir.join("tls.crt"), &certs.server.0).expect("tls.crt");
    std::fs::write(dir.join("tls.key"), &certs.server.1).expect("tls.key");
    std::fs::write(dir.join("ca.crt"), &certs.ca).expect("ca.crt");
    let certs_dir = dir.display().to_string();
    launch::start_pythonic("function-pythonic-mtls", &["--tls-certs-dir", &certs_dir])
}

fn revision(name: &str, state: &str, port: u16) -> Value {
    json!({
        "apiVersion": "pkg.crossplane.io/v1", "kind": "FunctionRevision",
        "metadata": {"name": name, "labels": {
            "pkg.crossplane.io/package": FUNCTION,
            "pkg.crossplane.io/parent": FUNCTION,
        }},
        "spec": {"desiredState": state, "image": "xpkg.upbound.io/crossplane-contrib/function-pythonic:v0.6.3", "revision": 1},
        "status": {"endpoint": format!("dns:///localhost:{port}")},
    })
}

fn review(uid: &str, file: &str) -> Value {
    webhook::composition_review(
        "v1",
        uid,
        "CREATE",
        one(&format!("testdata/functions/pythonic/{file}")),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_calls_the_active_revision_over_crossplanes_mtls() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let certs = certificates();
    let dir = ScratchDir::new("cluster-functions-mtls");
    let first = tokio::task::block_in_place(|| pythonic(&certs, &dir.path("certs-1")));
    let api = FakeApiServer::start().await;
    // Built-in kinds' schemas as a real API server serves them.
    api.serve_openapi(&project_dir().join("crds/upstream/kube-openapi/v1.28.4"));
    api.write_kubeconfig(&dir.path("kubeconfig"));
    let mut xrd = one("testdata/functions/pythonic/xrd.yaml");
    xrd["apiVersion"] = json!("apiextensions.crossplane.io/v1");
    api.apply(Resource::Xrds, xrd);
    api.apply(
        Resource::Functions,
        json!({"apiVersion": "pkg.crossplane.io/v1", "kind": "Function",
               "metadata": {"name": FUNCTION},
               "spec": {"package": "xpkg.upbound.io/crossplane-contrib/function-pythonic:v0.6.3"}}),
    );
    api.apply(
        Resource::FunctionRevisions,
        revision("function-pythonic-1", "Active", first.address.port()),
    );
    let b64 = |s: &str| STANDARD.encode(s.as_bytes());
    api.apply(
        Resource::Secrets,
        json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "crossplane-tls-client", "namespace": NS},
            "type": "Opaque",
            "data": {"tls.crt": b64(&certs.client.0), "tls.key": b64(&certs.client.1),
                     "ca.crt": b64(&certs.ca)},
        }),
    );
    let kubeconfig = dir.path("kubeconfig");
    let args = ["--kubeconfig", kubeconfig.to_str().expect("utf-8 path")];
    let server = tokio::task::block_in_place(|| Server::start(&[], &args));
    let client = server.client();
    let typo = "spec.pipeline[0].resources[deployment].spec.replica: Invalid value: \"replica\": unknown field: \"replica\", did you mean \"replicas\"?";
    // Once the revision and the Secret are listed, the function composes over mTLS.
    eventually("the typo is denied", Duration::from_secs(30), || async {
        let response = client
            .review(&review("uid-typo", "invalid/app-typo.yaml"))
            .await;
        let (allowed, _, message, _) = verdict(&response);
        let denied = !allowed && message.contains(typo);
        if !denied {
            eprintln!("not yet: {response}");
        }
        denied
    })
    .await;
    let (allowed, _, _, warnings) = verdict(&client.review(&review("uid-app", "app.yaml")).await);
    assert!(allowed && warnings.is_empty(), "{warnings:?}");

    // A new active revision at another address: called there, the old one gone.
    let second = tokio::task::block_in_place(|| pythonic(&certs, &dir.path("certs-2")));
    api.apply(
        Resource::FunctionRevisions,
        revision("function-pythonic-1", "Inactive", first.address.port()),
    );
    api.apply(
        Resource::FunctionRevisions,
        revision("function-pythonic-2", "Active", second.address.port()),
    );
    drop(first);
    eventually(
        "the new revision answers",
        Duration::from_secs(30),
        || async {
            let (allowed, _, message, _) = verdict(
                &client
                    .review(&review("uid-typo-2", "invalid/app-typo.yaml"))
                    .await,
            );
            !allowed && message.contains(typo)
        },
    )
    .await;

    // The function down: its step is unrendered, a warning in loose mode.
    drop(second);
    let (allowed, _, _, warnings) = verdict(
        &client
            .review(&review("uid-down", "invalid/app-typo.yaml"))
            .await,
    );
    assert!(allowed, "{warnings:?}");
    assert!(
        warnings.iter().any(|w| w
            .contains("spec.pipeline[0]: Not found: function \"function-pythonic\"")
            && w.contains("what it composes is not validated")),
        "{warnings:?}"
    );
}
