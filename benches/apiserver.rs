//! The API server's view: what the webhook adds to a user's request. When a kube-apiserver
//! and an etcd are at hand (`KUBE_APISERVER` and `ETCD` naming the binaries, or
//! `kube-apiserver` and `etcd` on `PATH`), it starts both on loopback ports (token
//! authentication, `AlwaysAllow`), installs the Composition CRD of `crds/`, starts the
//! webhook (the bench-profile binary, `--crds` the Composition's schema files, a
//! self-signed certificate for `localhost`), and measures dry-run creates
//! (`?dryRun=All`) of `configuration-aws-network@v0.2.0`'s Composition (the one
//! `benches/serve.rs` reviews; `testdata/example` without `../shared/corpus`) sent one after
//! the other over one keep-alive connection:
//!
//! - without the webhook, then with a ValidatingWebhookConfiguration that sends it every
//!   Composition CREATE and UPDATE (its `caBundle` the webhook's CA, `failurePolicy: Fail`);
//! - for each: the client-side time of a request (what `kubectl apply --dry-run=server`
//!   waits for), mean, p50 and p99;
//! - the webhook's share: the mean time the webhook itself took per review (its
//!   `admission_review_duration` histogram), and the difference of the means, over the mean
//!   with the webhook.
//!
//! Without the binaries it prints a note saying so and what it would measure, and exits 0.
//! Settings: `APISERVER_BENCH_REQUESTS` (measured requests per phase, default 500) and
//! `APISERVER_BENCH_WARMUP` (default 50).
//!
//! Run with `cargo bench --bench apiserver`.

#[path = "../tests/webhook/mod.rs"]
mod webhook;

#[path = "../tests/common/manifest.rs"]
mod manifest;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use webhook::{ScratchDir, project_dir};

/// The corpus Composition measured, as in `benches/serve.rs`.
const CORPUS_FILE: &str =
    "compositions/configuration-aws-network@v0.2.0/apis__basic__composition.yaml";

/// The bearer token the API server is started to accept (group `system:masters`).
const TOKEN: &str = "apiserver-bench-token";

/// The webhook configuration's name.
const CONFIGURATION: &str = "composition-webhook-bench";

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The binary `env` names, or `name` found on `PATH`.
fn binary(env: &str, name: &str) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(env) {
        return Some(PathBuf::from(path)).filter(|p| p.is_file());
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// A loopback port free now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// A child process killed on drop.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(program: &Path, args: &[String], log: &Path) -> Process {
    let log = std::fs::File::create(log).expect("a log file");
    let child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()));
    Process(child)
}

/// The Composition measured and the schema files the webhook needs for it.
fn case() -> (String, Value, Vec<PathBuf>) {
    let corpus = project_dir().join("../shared/corpus");
    let manifest_path = corpus.join("manifest.json");
    if let Ok(text) = std::fs::read_to_string(&manifest_path) {
        let manifest: Value = serde_json::from_str(&text).expect("manifest.json is JSON");
        let entry = manifest["compositions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|e| e["file"] == CORPUS_FILE)
            .unwrap_or_else(|| panic!("{CORPUS_FILE} is not in {}", manifest_path.display()));
        let name = entry["composition_name"].as_str().unwrap_or_default();
        let composition = webhook::yaml_documents(&corpus.join(CORPUS_FILE))
            .into_iter()
            .find(|v| v.pointer("/metadata/name").and_then(Value::as_str) == Some(name))
            .unwrap_or_else(|| panic!("{CORPUS_FILE}: no Composition named {name}"));
        let files = manifest::schema_files(entry)
            .into_iter()
            .map(|f| corpus.join(f))
            .collect();
        return (CORPUS_FILE.to_string(), composition, files);
    }
    let testdata = project_dir().join("testdata");
    let composition = webhook::yaml_documents(&testdata.join("example/composition.yaml")).remove(0);
    let files = vec![
        testdata.join("crds/compute.gcp.upbound.io_networks.yaml"),
        testdata.join("crds/compute.gcp.upbound.io_subnetworks.yaml"),
        testdata.join("example/definition.yaml"),
    ];
    (
        "testdata/example/composition.yaml".to_string(),
        composition,
        files,
    )
}

/// A client of the API server at `url` (its self-generated serving certificate not
/// checked), authenticated with [`TOKEN`].
fn client(url: &str) -> kube::Client {
    let mut config = kube::Config::new(url.parse().expect("a URL"));
    config.accept_invalid_certs = true;
    config.auth_info.token = Some(TOKEN.to_string().into());
    kube::Client::try_from(config).expect("a client")
}

/// Sends `method path` with a JSON `body`; the status and the body answered.
async fn call(client: &kube::Client, method: &str, path: &str, body: &Value) -> (u16, Value) {
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(serde_json::to_vec(body).expect("json"))
        .expect("a request");
    let response = match client.send(request.map(kube::client::Body::from)).await {
        Ok(r) => r,
        Err(e) => return (0, json!(e.to_string())),
    };
    let status = response.status().as_u16();
    let bytes = response
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_else(|_| Bytes::new());
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// Waits for `check` to hold, at most `limit`.
async fn until<F: std::future::Future<Output = bool>>(
    what: &str,
    limit: Duration,
    mut check: impl FnMut() -> F,
) {
    let started = Instant::now();
    while !check().await {
        assert!(started.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The webhook's reviews so far and the time they took in total (seconds).
async fn reviewed(server: &webhook::Server) -> (f64, f64) {
    let (_, text) = server.ops_get("/metrics").await;
    let sum = |suffix: &str| -> f64 {
        text.lines()
            .filter(|l| {
                l.starts_with(&format!(
                    "composition_webhook_admission_review_duration_seconds_{suffix}"
                ))
            })
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
            .sum()
    };
    (sum("count"), sum("sum"))
}

/// Mean, p50 and p99 of `times`, in milliseconds.
fn summary(times: &mut [Duration]) -> (f64, f64, f64) {
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let at = |p: f64| ms(times[((times.len() - 1) as f64 * p).round() as usize]);
    let mean = times.iter().map(|d| ms(*d)).sum::<f64>() / times.len() as f64;
    (mean, at(0.5), at(0.99))
}

/// Dry-run creates of `composition`, one after the other; each one's time.
async fn dry_run_creates(client: &kube::Client, composition: &Value, n: usize) -> Vec<Duration> {
    let path = "/apis/apiextensions.crossplane.io/v1/compositions?dryRun=All";
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let started = Instant::now();
        let (status, body) = call(client, "POST", path, composition).await;
        times.push(started.elapsed());
        assert_eq!(status, 201, "a dry-run create: {body}");
    }
    times
}

fn main() {
    let (Some(apiserver), Some(etcd)) = (
        binary("KUBE_APISERVER", "kube-apiserver"),
        binary("ETCD", "etcd"),
    ) else {
        println!(
            "note: no kube-apiserver and etcd at hand (KUBE_APISERVER and ETCD naming the \
             binaries, or on PATH): nothing measured. With them, this bench starts both, \
             registers the webhook, and measures dry-run creates of configuration-aws-network's \
             Composition over one connection without and with the webhook: the API server's \
             request time (mean, p50, p99) and the webhook's share of it."
        );
        return;
    };
    let _ = rustls::crypto::ring::default_provider().install_default();
    let requests = setting("APISERVER_BENCH_REQUESTS", 500).max(1);
    let warmup = setting("APISERVER_BENCH_WARMUP", 50);
    let dir = ScratchDir::new("apiserver-bench");

    // etcd, then kube-apiserver on it.
    let (etcd_port, peer_port, port) = (free_port(), free_port(), free_port());
    let etcd_url = format!("http://127.0.0.1:{etcd_port}");
    let _etcd = spawn(
        &etcd,
        &[
            format!("--data-dir={}", dir.path("etcd").display()),
            format!("--listen-client-urls={etcd_url}"),
            format!("--advertise-client-urls={etcd_url}"),
            format!("--listen-peer-urls=http://127.0.0.1:{peer_port}"),
            format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}"),
            format!("--initial-cluster=default=http://127.0.0.1:{peer_port}"),
        ],
        &dir.path("etcd.log"),
    );
    let key = rcgen::KeyPair::generate().expect("a service account key");
    std::fs::write(dir.path("sa.key"), key.serialize_pem()).expect("write sa.key");
    std::fs::write(
        dir.path("tokens.csv"),
        format!("{TOKEN},bench,bench,system:masters\n"),
    )
    .expect("write tokens.csv");
    let sa_key = dir.path("sa.key").display().to_string();
    let _apiserver = spawn(
        &apiserver,
        &[
            format!("--etcd-servers={etcd_url}"),
            "--bind-address=127.0.0.1".into(),
            "--advertise-address=127.0.0.1".into(),
            format!("--secure-port={port}"),
            format!("--cert-dir={}", dir.path("certs").display()),
            format!("--token-auth-file={}", dir.path("tokens.csv").display()),
            "--authorization-mode=AlwaysAllow".into(),
            "--service-cluster-ip-range=10.0.0.0/24".into(),
            "--service-account-issuer=https://kubernetes.default.svc".into(),
            format!("--service-account-key-file={sa_key}"),
            format!("--service-account-signing-key-file={sa_key}"),
        ],
        &dir.path("kube-apiserver.log"),
    );
    let url = format!("https://127.0.0.1:{port}");

    let (label, mut composition, files) = case();
    // A fresh object, as a user's manifest is.
    if let Some(meta) = composition["metadata"].as_object_mut() {
        meta.retain(|k, _| matches!(k.as_str(), "name" | "labels" | "annotations"));
    }
    let crds: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let bin = env!("CARGO_BIN_EXE_composition-webhook");
    let server = webhook::Server::start_self_signed(
        webhook::serve_command_of(Command::new(bin), &crds),
        &[],
    );

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let client = client(&url);
        until(
            "the API server is ready",
            Duration::from_secs(60),
            || async { call(&client, "GET", "/readyz", &Value::Null).await.0 == 200 },
        )
        .await;
        let crd = webhook::yaml_documents(
            &project_dir().join("crds/apiextensions.crossplane.io_compositions.yaml"),
        )
        .remove(0);
        let (status, body) = call(
            &client,
            "POST",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            &crd,
        )
        .await;
        assert_eq!(status, 201, "the Composition CRD: {body}");
        until(
            "Compositions are served",
            Duration::from_secs(60),
            || async {
                let path = "/apis/apiextensions.crossplane.io/v1/compositions?dryRun=All";
                call(&client, "POST", path, &composition).await.0 == 201
            },
        )
        .await;

        // Without the webhook.
        dry_run_creates(&client, &composition, warmup).await;
        let mut without = dry_run_creates(&client, &composition, requests).await;

        // With it.
        let ca_bundle = base64::engine::general_purpose::STANDARD.encode(&server.ca_pem);
        let configuration = json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": CONFIGURATION},
            "webhooks": [{
                "name": "compositions.composition-webhook.example.org",
                "clientConfig": {
                    "url": format!("https://localhost:{}/validate", server.admission.port()),
                    "caBundle": ca_bundle,
                },
                "rules": [{
                    "apiGroups": ["apiextensions.crossplane.io"],
                    "apiVersions": ["v1"],
                    "operations": ["CREATE", "UPDATE"],
                    "resources": ["compositions"],
                }],
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 10,
            }],
        });
        let (status, body) = call(
            &client,
            "POST",
            "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
            &configuration,
        )
        .await;
        assert_eq!(status, 201, "the webhook configuration: {body}");
        until("the webhook is called", Duration::from_secs(60), || async {
            dry_run_creates(&client, &composition, 1).await;
            reviewed(&server).await.0 > 0.0
        })
        .await;
        dry_run_creates(&client, &composition, warmup).await;
        let (count, total) = reviewed(&server).await;
        let mut with = dry_run_creates(&client, &composition, requests).await;
        let (count_after, total_after) = reviewed(&server).await;
        assert_eq!(count_after - count, requests as f64, "a review per request");
        let webhook_mean = (total_after - total) / requests as f64 * 1000.0;

        let (w_mean, w_p50, w_p99) = summary(&mut without);
        let (h_mean, h_p50, h_p99) = summary(&mut with);
        println!("{label}: {requests} dry-run creates per phase, one connection");
        println!("without the webhook: mean {w_mean:.2} ms, p50 {w_p50:.2} ms, p99 {w_p99:.2} ms");
        println!("with the webhook:    mean {h_mean:.2} ms, p50 {h_p50:.2} ms, p99 {h_p99:.2} ms");
        println!(
            "the webhook's own time per review: {webhook_mean:.2} ms ({:.0}% of the mean \
             request); added to the mean request: {:.2} ms ({:.0}%)",
            webhook_mean / h_mean * 100.0,
            h_mean - w_mean,
            (h_mean - w_mean) / h_mean * 100.0
        );
    });
}
