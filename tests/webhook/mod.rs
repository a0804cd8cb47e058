//! Helpers for the tests that drive the real `composition-webhook serve` binary over HTTPS.
#![allow(dead_code)]

pub mod raw;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// The project's directory.
pub fn project_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A scratch directory, removed on drop.
pub struct ScratchDir(pub PathBuf);

impl ScratchDir {
    /// A new empty directory named after `tag`.
    pub fn new(tag: &str) -> Self {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("cw-test-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        ScratchDir(dir)
    }

    /// A path inside it.
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `composition-webhook serve --crds ...` on loopback ports the system picks, logging JSON to
/// a piped standard error; the caller adds the TLS arguments.
pub fn serve_command(crds: &[&Path]) -> Command {
    serve_command_of(
        Command::new(env!("CARGO_BIN_EXE_composition-webhook")),
        crds,
    )
}

/// As [`serve_command`], with `program` running the binary (another build, or the binary
/// under `taskset`).
pub fn serve_command_of(program: Command, crds: &[&Path]) -> Command {
    let mut cmd = program;
    cmd.arg("serve");
    for c in crds {
        cmd.arg("--crds").arg(c);
    }
    cmd.args([
        "--address",
        "127.0.0.1:0",
        "--operations-address",
        "127.0.0.1:0",
        "--log-format",
        "json",
    ]);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    cmd
}

/// A running `composition-webhook serve`, killed on drop.
pub struct Server {
    child: Child,
    /// The admission port (HTTPS).
    pub admission: SocketAddr,
    /// The operations port (HTTP).
    pub operations: SocketAddr,
    /// The CA that signed the serving certificate (PEM), to trust in clients.
    pub ca_pem: Vec<u8>,
    /// Every log line (JSON) so far.
    logs: Arc<Mutex<Vec<Value>>>,
    /// Scratch files (CA bundle, certificates).
    pub dir: ScratchDir,
}

impl Server {
    /// Starts the binary with a self-signed certificate for `localhost`, `--crds` for each
    /// of `crds`, and `extra` arguments, on loopback ports picked by the system.
    pub fn start(crds: &[&Path], extra: &[&str]) -> Server {
        Server::start_self_signed(serve_command(crds), extra)
    }

    /// Starts `cmd` (a [`serve_command`]) with a self-signed certificate for `localhost` and
    /// `extra` arguments.
    pub fn start_self_signed(cmd: Command, extra: &[&str]) -> Server {
        let dir = ScratchDir::new("serve");
        let ca = dir.path("ca.pem");
        let mut args: Vec<String> = vec![
            "--self-signed".into(),
            "--self-signed-dns-name".into(),
            "localhost".into(),
            "--ca-bundle-out".into(),
            ca.display().to_string(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let mut server = Server::spawn(cmd, &args, dir);
        server.ca_pem = std::fs::read(&ca).expect("CA bundle written");
        server
    }

    /// Starts the binary with exactly these arguments after `serve --crds ...` and the
    /// loopback addresses; `ca_pem` is left empty.
    pub fn start_with(crds: &[&Path], args: &[String], dir: ScratchDir) -> Server {
        Server::spawn(serve_command(crds), args, dir)
    }

    /// Spawns `cmd` with `args` and waits for it to serve.
    fn spawn(mut cmd: Command, args: &[String], dir: ScratchDir) -> Server {
        cmd.args(args);
        let mut child = cmd.spawn().expect("start composition-webhook serve");
        let stderr = child.stderr.take().expect("stderr");
        let logs: Arc<Mutex<Vec<Value>>> = Arc::default();
        let (tx, rx) = std::sync::mpsc::channel::<(String, String)>();
        {
            let logs = logs.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    let v: Value =
                        serde_json::from_str(&line).unwrap_or_else(|_| json!({"message": line}));
                    if v["message"] == "serving" {
                        let _ = tx.send((
                            v["admission"].as_str().unwrap_or_default().to_string(),
                            v["operations"].as_str().unwrap_or_default().to_string(),
                        ));
                    }
                    logs.lock().unwrap().push(v);
                }
            });
        }
        let (admission, operations) = match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(a) => a,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("server did not start: {:#?}", logs.lock().unwrap());
            }
        };
        Server {
            child,
            admission: admission.parse().expect("admission address"),
            operations: operations.parse().expect("operations address"),
            ca_pem: Vec::new(),
            logs,
            dir,
        }
    }

    /// The log lines so far.
    pub fn logs(&self) -> Vec<Value> {
        self.logs.lock().unwrap().clone()
    }

    /// Waits up to `timeout` for a log line with `message`.
    pub fn wait_for_log(&self, message: &str, timeout: Duration) -> Option<Value> {
        let end = Instant::now() + timeout;
        while Instant::now() < end {
            if let Some(v) = self.logs().into_iter().find(|v| v["message"] == message) {
                return Some(v);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Resident memory in KiB (from /proc).
    pub fn rss_kib(&self) -> u64 {
        self.status_kib("VmRSS:")
    }

    /// The most resident memory so far in KiB (from /proc).
    pub fn peak_rss_kib(&self) -> u64 {
        self.status_kib("VmHWM:")
    }

    fn status_kib(&self, field: &str) -> u64 {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.pid())).expect("/proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("{field} in /proc status"))
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Sends SIGTERM (by the system call: a build image may have no `kill` program).
    pub fn sigterm(&self) {
        let pid = libc::pid_t::try_from(self.pid()).expect("pid fits pid_t");
        // SAFETY: kill(2) reads only its two integer arguments.
        let ok = unsafe { libc::kill(pid, libc::SIGTERM) } == 0;
        assert!(
            ok,
            "kill(SIGTERM) failed: {}",
            std::io::Error::last_os_error()
        );
    }

    /// Waits up to `timeout` for the process to exit.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let end = Instant::now() + timeout;
        while Instant::now() < end {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// A client trusting this server's CA.
    pub fn client(&self) -> Client {
        Client::new(self.admission, &self.ca_pem)
    }

    /// GET on the operations port: status and body.
    pub async fn ops_get(&self, path: &str) -> (u16, String) {
        let mut s = TcpStream::connect(self.operations)
            .await
            .expect("connect ops");
        s.write_all(
            format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await
        .expect("write");
        let mut out = Vec::new();
        s.read_to_end(&mut out).await.expect("read");
        let text = String::from_utf8_lossy(&out).to_string();
        let status = text
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let body = text
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())
            .unwrap_or_default();
        (status, body)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTPS client of the admission port.
#[derive(Clone)]
pub struct Client {
    addr: SocketAddr,
    connector: TlsConnector,
}

/// A response: status, Content-Type and body.
#[derive(Debug)]
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// The Content-Type header.
    pub content_type: String,
    /// The body.
    pub body: Vec<u8>,
}

impl Reply {
    /// The body as JSON, after checking HTTP 200 and the JSON Content-Type every answer has.
    pub fn answer_json(&self) -> Value {
        assert_eq!(self.status, 200, "{}", String::from_utf8_lossy(&self.body));
        assert_eq!(self.content_type, "application/json");
        self.json()
    }

    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
}

/// A TLS connector trusting the CA certificates in `ca_pem`, speaking `versions` and offering
/// `alpn` (none: the server tells the protocol from the first bytes).
pub fn connector(
    ca_pem: &[u8],
    versions: &[&'static rustls::SupportedProtocolVersion],
    alpn: &[&[u8]],
) -> TlsConnector {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem) {
        roots.add(cert.expect("CA PEM")).expect("CA cert");
    }
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    TlsConnector::from(Arc::new(config))
}

impl Client {
    /// A client of `addr` trusting the CA certificates in `ca_pem`.
    pub fn new(addr: SocketAddr, ca_pem: &[u8]) -> Self {
        Client {
            addr,
            connector: connector(ca_pem, rustls::DEFAULT_VERSIONS, &[]),
        }
    }

    /// A TLS connection to the admission port (server name `localhost`).
    pub async fn connect(&self) -> std::io::Result<TlsStream<TcpStream>> {
        let tcp = TcpStream::connect(self.addr).await?;
        // Requests go out whole; no waiting for the ACK of the previous segment.
        tcp.set_nodelay(true)?;
        self.connector
            .connect(ServerName::try_from("localhost").expect("name"), tcp)
            .await
    }

    /// The serving certificate's DNS names, read from a fresh handshake.
    pub async fn peer_certificate(&self) -> CertificateDer<'static> {
        let tls = self.connect().await.expect("handshake");
        tls.get_ref().1.peer_certificates().expect("peer certs")[0]
            .clone()
            .into_owned()
    }

    /// One request on a new HTTP/1.1 connection.
    pub async fn request(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: Vec<u8>,
    ) -> Reply {
        let tls = self.connect().await.expect("connect");
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
                .await
                .expect("http handshake");
        tokio::spawn(conn);
        let mut req = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header("host", "localhost");
        if let Some(ct) = content_type {
            req = req.header("content-type", ct);
        }
        let req = req.body(Full::new(Bytes::from(body))).expect("request");
        let resp = sender.send_request(req).await.expect("response");
        let status = resp.status().as_u16();
        let content_type = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let body = resp
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes()
            .to_vec();
        Reply {
            status,
            content_type,
            body,
        }
    }

    /// POSTs a JSON body to `/validate?timeout=10s`.
    pub async fn post_json(&self, body: &Value) -> Reply {
        self.request(
            "POST",
            "/validate?timeout=10s",
            Some("application/json"),
            serde_json::to_vec(body).expect("json"),
        )
        .await
    }

    /// POSTs a review and returns its `response`, after checking HTTP 200, the envelope's
    /// apiVersion and kind, and the echoed uid.
    pub async fn review(&self, review: &Value) -> Value {
        let reply = self.post_json(review).await;
        assert_eq!(
            reply.status,
            200,
            "{}",
            String::from_utf8_lossy(&reply.body)
        );
        assert_eq!(reply.content_type, "application/json");
        let v = reply.json();
        assert_eq!(v["apiVersion"], review["apiVersion"]);
        assert_eq!(v["kind"], "AdmissionReview");
        assert_eq!(v["response"]["uid"], review["request"]["uid"]);
        assert!(v["response"].get("patch").is_none() && v["response"].get("patchType").is_none());
        v["response"].clone()
    }
}

/// An AdmissionReview (`admission.k8s.io/<version>`) for `operation` on a Composition.
pub fn composition_review(version: &str, uid: &str, operation: &str, object: Value) -> Value {
    let name = object["metadata"]["name"].clone();
    let mut request = json!({
        "uid": uid,
        "kind": {"group": "apiextensions.crossplane.io", "version": "v1", "kind": "Composition"},
        "resource": {"group": "apiextensions.crossplane.io", "version": "v1", "resource": "compositions"},
        "requestKind": {"group": "apiextensions.crossplane.io", "version": "v1", "kind": "Composition"},
        "requestResource": {"group": "apiextensions.crossplane.io", "version": "v1", "resource": "compositions"},
        "name": name,
        "operation": operation,
        "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]},
        "object": object,
        "oldObject": null,
        "dryRun": false,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions", "fieldManager": "kubectl-client-side-apply", "fieldValidation": "Strict"},
    });
    if operation == "UPDATE" {
        request["oldObject"] = request["object"].clone();
        request["options"]["kind"] = json!("UpdateOptions");
    }
    if operation == "DELETE" {
        request["oldObject"] = request["object"].take();
        request["object"] = Value::Null;
        request["options"] = json!({"apiVersion": "meta.k8s.io/v1", "kind": "DeleteOptions"});
    }
    json!({
        "apiVersion": format!("admission.k8s.io/{version}"),
        "kind": "AdmissionReview",
        "request": request,
    })
}

/// Reads a YAML file's documents as JSON values (through the crate's own YAML reader).
pub fn yaml_documents(path: &Path) -> Vec<Value> {
    composition_webhook::document::load_path(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .into_iter()
        .map(|d| d.value)
        .collect()
}

// ---------------------------------------------------------------------------------------
// The example: testdata/crds, the XRD and the Composition of testdata/example.

/// The example's CRDs and XRD.
pub fn crds() -> Vec<PathBuf> {
    vec![
        project_dir().join("testdata/crds"),
        project_dir().join("testdata/example/definition.yaml"),
    ]
}

/// Starts the server with the example's schemas and `extra` arguments.
pub fn start(extra: &[&str]) -> Server {
    let crds = crds();
    let refs: Vec<&Path> = crds.iter().map(PathBuf::as_path).collect();
    Server::start(&refs, extra)
}

/// The example Composition.
pub fn composition() -> Value {
    yaml_documents(&project_dir().join("testdata/example/composition.yaml"))
        .into_iter()
        .find(|d| d["kind"] == "Composition")
        .expect("a Composition")
}

/// A v1 CREATE review of the example Composition (which is allowed).
pub fn review(uid: &str) -> Value {
    composition_review("v1", uid, "CREATE", composition())
}

/// The server still runs and allows a normal review.
pub async fn assert_healthy(server: &mut Server) {
    assert!(
        server.is_running(),
        "the server exited: {:#?}",
        server.logs()
    );
    let response = server.client().review(&review("uid-after")).await;
    assert_eq!(response["allowed"], true, "{response}");
}

/// The `response` of an answer, after checking it is a v1 AdmissionReview.
pub fn response_of(body: &[u8]) -> Value {
    let v: Value = serde_json::from_slice(body)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(body)));
    assert_eq!(v["apiVersion"], "admission.k8s.io/v1", "{v}");
    assert_eq!(v["kind"], "AdmissionReview", "{v}");
    v["response"].clone()
}

/// The value of a metric sample (`name{labels}`), from the operations port.
pub async fn metric(server: &Server, sample: &str) -> Option<f64> {
    let (status, text) = server.ops_get("/metrics").await;
    assert_eq!(status, 200);
    text.lines()
        .find_map(|l| l.strip_prefix(sample)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

/// Waits up to `timeout` for a metric sample to have `value`.
pub async fn wait_metric(server: &Server, sample: &str, value: f64, timeout: Duration) {
    let end = Instant::now() + timeout;
    loop {
        let got = metric(server, sample).await;
        if got == Some(value) {
            return;
        }
        assert!(
            Instant::now() < end,
            "{sample} is {got:?}, not {value}, after {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Reviews `object` (a v1 CREATE) with `?timeout=`; returns the AdmissionReview's response.
pub async fn review_object(server: &Server, object: &Value, timeout: &str) -> Value {
    let body = composition_review(
        "v1",
        "3a0e5d0c-1111-4c2a-9d55-5c1f8b0e0001",
        "CREATE",
        object.clone(),
    );
    let reply = server
        .client()
        .request(
            "POST",
            &format!("/validate?timeout={timeout}"),
            Some("application/json"),
            serde_json::to_vec(&body).expect("json"),
        )
        .await;
    assert_eq!(
        reply.status,
        200,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    reply.json()["response"].clone()
}

/// What a user sees: allowed, the denial's code and message, the warnings.
pub fn verdict(response: &Value) -> (bool, u64, String, Vec<String>) {
    let warnings = response["warnings"]
        .as_array()
        .map(|w| {
            w.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    (
        response["allowed"].as_bool().expect("allowed"),
        response["status"]["code"].as_u64().unwrap_or(0),
        response["status"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        warnings,
    )
}

/// `/debug/schemas`, parsed.
pub async fn debug(server: &Server) -> Value {
    let (status, body) = server.ops_get("/debug/schemas").await;
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

/// `/debug/audit`, parsed.
pub async fn debug_audit(server: &Server) -> Value {
    let (status, body) = server.ops_get("/debug/audit").await;
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

/// Polls `check` every 50 ms until it holds or `timeout` passes.
pub async fn eventually<F, Fut>(what: &str, timeout: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let end = Instant::now() + timeout;
    while Instant::now() < end {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("not within {timeout:?}: {what}");
}
