//! Functions called where Crossplane calls them, end to end: the real `composition-webhook
//! serve` on the in-process API server (`tests/kubeapi/`), which holds a FunctionRevision
//! whose `status.endpoint` is a real function-pythonic 0.6.3 serving mTLS with certificates
//! made like Crossplane's (rcgen: a CA named `crossplane-root-ca`, the function's server
//! certificate, the client certificate of Secret `crossplane-system/crossplane-tls-client`).
//! The webhook validates what the function composes; a new active revision is called at its
//! new address; a function down leaves the step unrendered (a warning in loose mode).

mod kubeapi;
#[path = "functions/launch.rs"]
mod launch;
mod webhook;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
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

/// Crossplane's CA, a server certificate for the function (its Service names, and
/// `localhost`, where the test's endpoint points) and the client certificate, all PEM.
struct Certificates {
    ca: String,
    server: (String, String),
    client: (String, String),
}

fn certificates() -> Certificates {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
        KeyPair, KeyUsagePurpose,
    };
    let mut ca = CertificateParams::new(vec!["crossplane-root-ca".to_string()]).expect("CA");
    ca.distinguished_name.push(DnType::CommonName, "Crossplane");
    ca.distinguished_name
        .push(DnType::OrganizationName, "Crossplane");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_key = KeyPair::generate().expect("a key");
    let ca_cert = ca.self_signed(&ca_key).expect("self-signed");
    let issuer = Issuer::new(ca, ca_key);
    let leaf = |names: Vec<String>, usage| {
        let mut params = CertificateParams::new(names).expect("params");
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![usage];
        let key = KeyPair::generate().expect("a key");
        let cert = params.signed_by(&key, &issuer).expect("signed");
        (cert.pem(), key.serialize_pem())
    };
    Certificates {
        ca: ca_cert.pem(),
        server: leaf(
            vec![
                FUNCTION.to_string(),
                format!("{FUNCTION}.{NS}"),
                format!("{FUNCTION}.{NS}.svc"),
                "localhost".to_string(),
            ],
            ExtendedKeyUsagePurpose::ServerAuth,
        ),
        client: leaf(
            vec![format!("crossplane.{NS}")],
            ExtendedKeyUsagePurpose::ClientAuth,
        ),
    }
}

/// function-pythonic serving mTLS from `certs` (the layout of `TLS_SERVER_CERTS_DIR`).
fn pythonic(certs: &Certificates, dir: &Path) -> launch::Function {
    std::fs::create_dir_all(dir).expect("the certificates' directory");
    std::fs::write(dir.join("tls.crt"), &certs.server.0).expect("tls.crt");
    std::fs::write(dir.join("tls.key"), &certs.server.1).expect("tls.key");
    std::fs::write(dir.join("ca.crt"), &certs.ca).expect("ca.crt");
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let out = Command::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/scripts/function-pythonic.sh"
    ))
    .arg(tmp.join("function-pythonic"))
    .stderr(Stdio::inherit())
    .output()
    .expect("run scripts/function-pythonic.sh");
    assert!(out.status.success(), "installing function-pythonic failed");
    let bin = String::from_utf8(out.stdout)
        .expect("UTF-8")
        .trim()
        .to_string();
    let certs_dir = dir.display().to_string();
    launch::start(
        "function-pythonic-mtls",
        &tmp.join("function-logs"),
        |address| {
            let mut command = Command::new(&bin);
            command.args(["grpc", "--tls-certs-dir", &certs_dir, "--address", address]);
            // SAFETY: prctl in the child before exec; nothing allocated or locked.
            unsafe {
                command.pre_exec(|| {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    Ok(())
                });
            }
            command
        },
    )
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
