//! TLS of the admission port, over real handshakes against the real binary: a chain from
//! files, rotation without a restart (files rewritten in place, and the `..data` symlink swap
//! of Kubernetes Secret volumes), a bad update that leaves the old certificate in service,
//! the self-signed CA bundle, TLS 1.2 and 1.3, plain HTTP on the TLS port, and a missing
//! certificate at start.

mod webhook;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use webhook::{ScratchDir, Server, composition_review, project_dir, serve_command, yaml_documents};

const RELOAD: &str = "200ms";
const REJECTED_LOG: &str = "serving certificate not reloaded; the previous one stays in service";

fn crds() -> Vec<PathBuf> {
    vec![
        project_dir().join("testdata/crds"),
        project_dir().join("testdata/example/definition.yaml"),
    ]
}

fn review(uid: &str) -> Value {
    let composition = yaml_documents(&project_dir().join("testdata/example/composition.yaml"))
        .into_iter()
        .find(|d| d["kind"] == "Composition")
        .expect("a Composition");
    composition_review("v1", uid, "CREATE", composition)
}

/// A root CA and an intermediate CA it signed, which signs serving certificates.
struct Pki {
    root: CertifiedIssuer<'static, KeyPair>,
    intermediate: CertifiedIssuer<'static, KeyPair>,
}

/// A serving certificate: the chain (leaf and intermediate) and key as PEM, and the leaf.
struct Leaf {
    chain_pem: String,
    key_pem: String,
    der: CertificateDer<'static>,
}

fn ca_params(name: &str, constraints: BasicConstraints) -> CertificateParams {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(constraints);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params
}

impl Pki {
    fn new() -> Self {
        let root = CertifiedIssuer::self_signed(
            ca_params("test root CA", BasicConstraints::Unconstrained),
            KeyPair::generate().expect("key"),
        )
        .expect("root CA");
        let intermediate = CertifiedIssuer::signed_by(
            ca_params("test intermediate CA", BasicConstraints::Constrained(0)),
            KeyPair::generate().expect("key"),
            &root,
        )
        .expect("intermediate CA");
        Pki { root, intermediate }
    }

    fn root_pem(&self) -> Vec<u8> {
        self.root.pem().into_bytes()
    }

    /// A new serving certificate for `localhost`, named `name`, with a new key.
    fn leaf(&self, name: &str) -> Leaf {
        let mut params = CertificateParams::new(vec!["localhost".to_string()]).expect("params");
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate().expect("key");
        let cert = params
            .signed_by(&key, &self.intermediate)
            .expect("leaf certificate");
        Leaf {
            chain_pem: format!("{}{}", cert.pem(), self.intermediate.pem()),
            key_pem: key.serialize_pem(),
            der: cert.der().clone(),
        }
    }
}

/// Writes `contents` to `path` by renaming a finished file over it.
fn write_atomic(path: &Path, contents: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, contents).expect("write");
    std::fs::rename(&tmp, path).expect("rename");
}

/// Starts the server on `cert` and `key` (in `dir`), reloading every 200 ms, with clients
/// trusting `pki`'s root CA only.
fn start_with_files(pki: &Pki, dir: ScratchDir, cert: &Path, key: &Path) -> Server {
    let crds = crds();
    let refs: Vec<&Path> = crds.iter().map(PathBuf::as_path).collect();
    let args: Vec<String> = vec![
        "--tls-cert-file".into(),
        cert.display().to_string(),
        "--tls-key-file".into(),
        key.display().to_string(),
        "--tls-reload-interval".into(),
        RELOAD.into(),
    ];
    let mut server = Server::start_with(&refs, &args, dir);
    server.ca_pem = pki.root_pem();
    server
}

/// A TLS client trusting `ca_pem`, speaking only `versions`.
fn connector(
    ca_pem: &[u8],
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> TlsConnector {
    webhook::connector(ca_pem, versions, &[])
}

async fn connect(
    connector: &TlsConnector,
    server: &Server,
    name: &str,
) -> std::io::Result<TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(server.admission).await?;
    connector
        .connect(ServerName::try_from(name.to_string()).expect("name"), tcp)
        .await
}

/// One review over an established TLS connection (HTTP/1.1); its `response`.
async fn review_over(tls: TlsStream<TcpStream>, uid: &str) -> Value {
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .expect("http handshake");
    tokio::spawn(conn);
    let request = hyper::Request::builder()
        .method("POST")
        .uri("/validate?timeout=10s")
        .header("host", "localhost")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(
            serde_json::to_vec(&review(uid)).expect("json"),
        )))
        .expect("request");
    let resp = sender.send_request(request).await.expect("response");
    assert_eq!(resp.status(), 200);
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    let v: Value = serde_json::from_slice(&body).expect("JSON");
    assert_eq!(v["response"]["uid"], uid, "{v}");
    v["response"].clone()
}

/// Polls the served leaf until it is no longer `old`; the new leaf and how long it took.
async fn wait_for_new_leaf(
    server: &Server,
    old: &CertificateDer<'static>,
) -> (CertificateDer<'static>, Duration) {
    let client = server.client();
    let started = Instant::now();
    loop {
        let served = client.peer_certificate().await;
        if served != *old {
            return (served, started.elapsed());
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the new certificate was not served within 20 s: {:#?}",
            server.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn messages(server: &Server) -> Vec<String> {
    server
        .logs()
        .iter()
        .filter_map(|v| v["message"].as_str().map(str::to_string))
        .collect()
}

// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chain_from_files_verifies_against_the_root_alone() {
    let pki = Pki::new();
    let leaf = pki.leaf("leaf-1");
    let dir = ScratchDir::new("tls-chain");
    let (cert, key) = (dir.path("tls.crt"), dir.path("tls.key"));
    std::fs::write(&cert, &leaf.chain_pem).expect("cert");
    std::fs::write(&key, &leaf.key_pem).expect("key");
    let mut server = start_with_files(&pki, dir, &cert, &key);

    let tls = server.client().connect().await.expect("handshake");
    let chain: Vec<CertificateDer<'static>> = tls
        .get_ref()
        .1
        .peer_certificates()
        .expect("peer certificates")
        .iter()
        .map(|c| c.clone().into_owned())
        .collect();
    assert_eq!(
        chain,
        vec![leaf.der.clone(), pki.intermediate.der().clone()]
    );
    let response = review_over(tls, "uid-chain").await;
    assert_eq!(response["allowed"], true, "{response}");

    // Without the root, the chain does not verify.
    let other = Pki::new();
    let refused = connect(
        &connector(&other.root_pem(), &[&rustls::version::TLS13]),
        &server,
        "localhost",
    )
    .await;
    assert!(refused.is_err(), "a client trusting another CA connected");
    assert!(server.is_running());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_in_place_without_restart() {
    let pki = Pki::new();
    let first = pki.leaf("leaf-1");
    let dir = ScratchDir::new("tls-in-place");
    let (cert, key) = (dir.path("tls.crt"), dir.path("tls.key"));
    std::fs::write(&cert, &first.chain_pem).expect("cert");
    std::fs::write(&key, &first.key_pem).expect("key");
    let mut server = start_with_files(&pki, dir, &cert, &key);
    let pid = server.pid();
    assert_eq!(server.client().peer_certificate().await, first.der);

    // Both files rewritten where they are.
    let second = pki.leaf("leaf-2");
    std::fs::write(&cert, &second.chain_pem).expect("cert");
    std::fs::write(&key, &second.key_pem).expect("key");
    let (served, took) = wait_for_new_leaf(&server, &first.der).await;
    eprintln!("in-place rotation served after {took:?} (reload interval {RELOAD})");
    assert_eq!(served, second.der);
    assert_eq!(server.pid(), pid);
    assert!(server.is_running());
    assert!(messages(&server).contains(&"serving certificate reloaded".to_string()));
    let tls = server.client().connect().await.expect("handshake");
    assert_eq!(review_over(tls, "uid-rotated").await["allowed"], true);
}

/// Makes `dir/<stamp>/` with the certificate and key, as the kubelet does.
fn secret_payload(dir: &Path, stamp: &str, leaf: &Leaf) {
    let data = dir.join(stamp);
    std::fs::create_dir(&data).expect("timestamped dir");
    std::fs::write(data.join("tls.crt"), &leaf.chain_pem).expect("cert");
    std::fs::write(data.join("tls.key"), &leaf.key_pem).expect("key");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_by_secret_volume_symlink_swap() {
    use std::os::unix::fs::symlink;
    let pki = Pki::new();
    let first = pki.leaf("leaf-1");
    let dir = ScratchDir::new("tls-secret");
    let root = dir.0.clone();
    let old = "..2026_01_01_00_00_00.000";
    secret_payload(&root, old, &first);
    symlink(old, root.join("..data")).expect("..data");
    for file in ["tls.crt", "tls.key"] {
        symlink(format!("..data/{file}"), root.join(file)).expect("file link");
    }
    let (cert, key) = (root.join("tls.crt"), root.join("tls.key"));
    let mut server = start_with_files(&pki, dir, &cert, &key);
    let pid = server.pid();
    assert_eq!(server.client().peer_certificate().await, first.der);

    // The kubelet's update: a new timestamped dir, `..data_tmp` pointing at it, renamed over
    // `..data` in one step, then the old dir removed. No file the server was given changes.
    let second = pki.leaf("leaf-2");
    let new = "..2026_01_01_00_05_00.000";
    secret_payload(&root, new, &second);
    symlink(new, root.join("..data_tmp")).expect("..data_tmp");
    std::fs::rename(root.join("..data_tmp"), root.join("..data")).expect("swap ..data");
    std::fs::remove_dir_all(root.join(old)).expect("remove the old dir");

    let (served, took) = wait_for_new_leaf(&server, &first.der).await;
    eprintln!("Secret-volume rotation served after {took:?} (reload interval {RELOAD})");
    assert_eq!(served, second.der);
    assert_eq!(server.pid(), pid);
    assert!(server.is_running());
    let tls = server.client().connect().await.expect("handshake");
    assert_eq!(review_over(tls, "uid-swapped").await["allowed"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mismatched_update_is_rejected_and_the_old_certificate_stays() {
    let pki = Pki::new();
    let first = pki.leaf("leaf-1");
    let dir = ScratchDir::new("tls-bad");
    let (cert, key) = (dir.path("tls.crt"), dir.path("tls.key"));
    std::fs::write(&cert, &first.chain_pem).expect("cert");
    std::fs::write(&key, &first.key_pem).expect("key");
    let mut server = start_with_files(&pki, dir, &cert, &key);

    // A new certificate beside the old key.
    let second = pki.leaf("leaf-2");
    write_atomic(&cert, &second.chain_pem);
    let warning = server
        .wait_for_log(REJECTED_LOG, Duration::from_secs(5))
        .unwrap_or_else(|| panic!("no rejection logged: {:#?}", server.logs()));
    assert_eq!(warning["level"], "WARN", "{warning}");
    let error = warning["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("does not go with the certificate") && error.contains("tls.key"),
        "{warning}"
    );
    // Several reload intervals later, the old certificate is still served.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(server.client().peer_certificate().await, first.der);
    assert!(server.is_running());
    let (status, metrics) = server.ops_get("/metrics").await;
    assert_eq!(status, 200);
    for line in [
        r#"composition_webhook_tls_certificate_reloads_total{result="rejected"} 1"#,
        r#"composition_webhook_tls_certificate_reloads_total{result="loaded"} 1"#,
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "no {line} in\n{metrics}"
        );
    }
    let tls = server.client().connect().await.expect("handshake");
    assert_eq!(review_over(tls, "uid-kept").await["allowed"], true);

    // The matching key arrives: the new certificate is served.
    write_atomic(&key, &second.key_pem);
    let (served, _) = wait_for_new_leaf(&server, &first.der).await;
    assert_eq!(served, second.der);
    let (_, metrics) = server.ops_get("/metrics").await;
    assert!(
        metrics
            .lines()
            .any(|l| l == r#"composition_webhook_tls_certificate_reloads_total{result="loaded"} 2"#),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn self_signed_bundle_verifies_the_served_certificate() {
    let dir = ScratchDir::new("tls-self-signed");
    let bundle = dir.path("ca.pem");
    let names = [
        "composition-webhook.crossplane-system.svc",
        "webhook.example.test",
    ];
    let mut args: Vec<String> = vec![
        "--self-signed".into(),
        "--ca-bundle-out".into(),
        bundle.display().to_string(),
    ];
    for n in names {
        args.extend(["--self-signed-dns-name".into(), n.to_string()]);
    }
    let crds = crds();
    let refs: Vec<&Path> = crds.iter().map(PathBuf::as_path).collect();
    let mut server = Server::start_with(&refs, &args, dir);
    let ca_pem = std::fs::read(&bundle).expect("bundle written");
    let ca: Vec<_> = CertificateDer::pem_slice_iter(&ca_pem)
        .collect::<Result<_, _>>()
        .expect("PEM");
    assert_eq!(ca.len(), 1, "one CA certificate in the bundle");

    let tls = connector(&ca_pem, &[&rustls::version::TLS13]);
    for name in names {
        let stream = connect(&tls, &server, name)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let chain = stream.get_ref().1.peer_certificates().expect("chain");
        assert_eq!(
            chain.last(),
            ca.first(),
            "the chain ends with the bundle's CA"
        );
        let response = review_over(stream, "uid-self-signed").await;
        assert_eq!(response["allowed"], true, "{response}");
    }
    let err = connect(&tls, &server, "other.example.test")
        .await
        .expect_err("a name the certificate does not hold");
    assert!(err.to_string().contains("certificate"), "{err}");
    assert!(server.is_running());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls12_and_tls13_clients_both_succeed() {
    let pki = Pki::new();
    let leaf = pki.leaf("leaf-1");
    let dir = ScratchDir::new("tls-versions");
    let (cert, key) = (dir.path("tls.crt"), dir.path("tls.key"));
    std::fs::write(&cert, &leaf.chain_pem).expect("cert");
    std::fs::write(&key, &leaf.key_pem).expect("key");
    let mut server = start_with_files(&pki, dir, &cert, &key);
    for (version, expected) in [
        (&rustls::version::TLS12, rustls::ProtocolVersion::TLSv1_2),
        (&rustls::version::TLS13, rustls::ProtocolVersion::TLSv1_3),
    ] {
        let stream = connect(
            &connector(&pki.root_pem(), &[version]),
            &server,
            "localhost",
        )
        .await
        .unwrap_or_else(|e| panic!("{expected:?}: {e}"));
        assert_eq!(stream.get_ref().1.protocol_version(), Some(expected));
        let response = review_over(stream, &format!("uid-{expected:?}")).await;
        assert_eq!(response["allowed"], true, "{response}");
    }
    assert!(server.is_running());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_on_the_tls_port_is_closed() {
    let pki = Pki::new();
    let leaf = pki.leaf("leaf-1");
    let dir = ScratchDir::new("tls-plain");
    let (cert, key) = (dir.path("tls.crt"), dir.path("tls.key"));
    std::fs::write(&cert, &leaf.chain_pem).expect("cert");
    std::fs::write(&key, &leaf.key_pem).expect("key");
    let mut server = start_with_files(&pki, dir, &cert, &key);

    let started = Instant::now();
    let mut tcp = TcpStream::connect(server.admission).await.expect("tcp");
    tcp.write_all(
        b"POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
    )
    .await
    .expect("write");
    let mut received = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), tcp.read_to_end(&mut received))
        .await
        .expect("closed within 5 s");
    let elapsed = started.elapsed();
    eprintln!(
        "plain HTTP on the TLS port: closed after {elapsed:?} ({read:?}, {} bytes back)",
        received.len()
    );
    assert!(
        !received.starts_with(b"HTTP/"),
        "an HTTP answer in plain text"
    );
    assert!(server.is_running());
    let tls = server.client().connect().await.expect("handshake");
    assert_eq!(review_over(tls, "uid-after-plain").await["allowed"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unusable_certificate_files_at_start_exit_with_status_2() {
    let pki = Pki::new();
    let leaf = pki.leaf("leaf-1");
    let other = pki.leaf("leaf-2");
    let dir = ScratchDir::new("tls-missing");
    std::fs::write(dir.path("tls.crt"), &leaf.chain_pem).expect("cert");
    std::fs::write(dir.path("tls.key"), &leaf.key_pem).expect("key");
    std::fs::write(dir.path("other.key"), &other.key_pem).expect("key");
    let crds = crds();
    // (certificate, key, what the error must name)
    let cases = [
        ("missing.crt", "tls.key", "missing.crt"),
        ("tls.crt", "missing.key", "missing.key"),
        ("tls.crt", "other.key", "does not go with the certificate"),
    ];
    for (cert, key, named) in cases {
        let (cert, key) = (dir.path(cert), dir.path(key));
        let refs: Vec<&Path> = crds.iter().map(|c| c.as_path()).collect();
        let mut child = serve_command(&refs)
            .arg("--tls-cert-file")
            .arg(&cert)
            .arg("--tls-key-file")
            .arg(&key)
            .spawn()
            .expect("spawn");
        let end = Instant::now() + Duration::from_secs(10);
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait") {
                break status;
            }
            if Instant::now() > end {
                let _ = child.kill();
                let _ = child.wait();
                panic!("still running 10 s after start with {}", cert.display());
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut stderr)
            .expect("stderr");
        assert_eq!(status.code(), Some(2), "{stderr}");
        let logs: Vec<Value> = stderr
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect();
        let error = logs
            .iter()
            .find(|v| v["level"] == "ERROR")
            .unwrap_or_else(|| panic!("no error logged: {stderr}"));
        let text = error["error"].as_str().unwrap_or_default();
        assert!(text.contains(named), "{error}");
        if named.starts_with("missing") {
            assert!(
                text.contains(&dir.path(named).display().to_string()),
                "{error}"
            );
            assert!(text.starts_with("cannot read "), "{error}");
        }
        assert!(
            !logs.iter().any(|v| v["message"] == "serving"),
            "served without a usable certificate: {stderr}"
        );
    }
}

/// A deleted certificate file is said once (a warning and a rejected reload), the certificate
/// in service stays, and the file put back is said too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_certificate_file_is_logged_and_counted_once() {
    let pki = Pki::new();
    let leaf = pki.leaf("leaf-1");
    let dir = ScratchDir::new("tls-deleted");
    let (cert, key) = (dir.path("tls.crt"), dir.path("tls.key"));
    std::fs::write(&cert, &leaf.chain_pem).expect("cert");
    std::fs::write(&key, &leaf.key_pem).expect("key");
    let server = start_with_files(&pki, dir, &cert, &key);

    std::fs::remove_file(&cert).expect("delete the certificate");
    let warned = server
        .wait_for_log(
            "serving certificate files unreadable; the certificate in service stays",
            Duration::from_secs(20),
        )
        .unwrap_or_else(|| panic!("no warning: {:#?}", server.logs()));
    assert_eq!(
        warned["error"],
        format!(
            "cannot read {}: No such file or directory (os error 2)",
            cert.display()
        )
    );
    // Ten reload intervals later, still said once.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let said = messages(&server)
        .iter()
        .filter(|m| m.starts_with("serving certificate files unreadable"))
        .count();
    assert_eq!(said, 1);
    let (_, metrics) = server.ops_get("/metrics").await;
    assert!(
        metrics
            .lines()
            .any(|l| l
                == r#"composition_webhook_tls_certificate_reloads_total{result="rejected"} 1"#),
        "{metrics}"
    );
    assert_eq!(server.client().peer_certificate().await, leaf.der);

    write_atomic(&cert, &leaf.chain_pem);
    assert!(
        server
            .wait_for_log(
                "serving certificate files readable again",
                Duration::from_secs(20)
            )
            .is_some(),
        "{:#?}",
        server.logs()
    );
    assert_eq!(server.client().peer_certificate().await, leaf.der);
}
