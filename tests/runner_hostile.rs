//! The RunFunction client (`src/runner/`) against hostile functions written with the real
//! Python SDK (PyPI crossplane-function-sdk-python 0.15.1, installed once per target
//! directory by `scripts/function-sdk.sh`): `tests/functions/hostile.py`, started on
//! loopback as `crossplane render` starts functions. Each misbehaviour ends in its own
//! [`RunError`], and the same client then gets a normal answer from the same function
//! (the step's input asks for one), so nothing the function did outlives its call.

#[path = "functions/launch.rs"]
mod launch;

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use composition_webhook::render::structpb;
use composition_webhook::runner::proto::{self, RequestMeta};
use composition_webhook::runner::{
    self, AnswerLimits, ClientTls, Config, Direction, FunctionClient, RunError,
};
use serde_json::{Value, json};

/// A loaded 2-core machine: timing assertions allow this much past a deadline.
const MARGIN: Duration = Duration::from_secs(3);
/// For calls that should answer: far more than a Python function takes.
const DEADLINE: Duration = Duration::from_secs(20);

fn tmp() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
}

/// The virtual environment's python, installed once for every test of this binary.
fn python() -> &'static str {
    static PYTHON: OnceLock<String> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let started = Instant::now();
        let out = Command::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/scripts/function-sdk.sh"
        ))
        .arg(tmp().join("function-sdk"))
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("run scripts/function-sdk.sh");
        assert!(
            out.status.success(),
            "installing crossplane-function-sdk-python failed"
        );
        eprintln!("the SDK ready in {:?}", started.elapsed());
        String::from_utf8(out.stdout)
            .expect("UTF-8")
            .trim()
            .to_string()
    })
}

/// `tests/functions/hostile.py --behaviour <behaviour>` with `flags`, as `command` for
/// [`launch::start`].
fn hostile(behaviour: &str, flags: &[&str]) -> impl Fn(&str) -> Command {
    let python = python();
    let behaviour = behaviour.to_string();
    let flags: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
    move |address| {
        let mut command = Command::new(python);
        command
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/functions/hostile.py"
            ))
            .args(["--address", address, "--behaviour", &behaviour])
            .args(&flags);
        command
    }
}

/// Starts the hostile function on a port of its own.
fn start(behaviour: &str, flags: &[&str]) -> launch::Function {
    let function = launch::start(
        &format!("hostile-{behaviour}"),
        &tmp().join("function-logs"),
        hostile(behaviour, flags),
    );
    eprintln!("{behaviour}: listening after {:?}", function.started_in);
    function
}

fn object(value: Value) -> prost_types::Struct {
    structpb::to_struct(
        value.as_object().expect("an object"),
        structpb::Limits::DEFAULT,
    )
    .expect("a struct")
}

/// An XR of `spec.size` 3; `behaviour`, when given, is the step's input's.
fn request(tag: &str, behaviour: Option<&str>) -> proto::RunFunctionRequest {
    let xr = json!({
        "apiVersion": "example.org/v1", "kind": "XBucket",
        "metadata": {"name": "demo"},
        "spec": {"size": 3},
    });
    proto::RunFunctionRequest {
        meta: Some(RequestMeta {
            tag: tag.to_string(),
            capabilities: Vec::new(),
        }),
        observed: Some(proto::State {
            composite: Some(proto::Resource {
                resource: Some(object(xr)),
                ..proto::Resource::default()
            }),
            resources: Default::default(),
        }),
        input: behaviour.map(|b| object(json!({"behaviour": b}))),
        ..proto::RunFunctionRequest::default()
    }
}

fn insecure(function: &launch::Function) -> FunctionClient {
    FunctionClient::new(
        "function-hostile",
        Config::insecure(format!("http://{}", function.address)),
    )
    .expect("a client")
}

/// A normal answer: the Bucket composed from the XR, the tag echoed, the SDK's TTL.
async fn assert_composes(client: &FunctionClient, function: &launch::Function, tag: &str) {
    let response = client
        .run(request(tag, Some("ok")), DEADLINE)
        .await
        .unwrap_or_else(|e| panic!("no answer: {e}\n{}", function.output()));
    let meta = response.meta.as_ref().expect("meta");
    assert_eq!(meta.tag, tag);
    assert_eq!(
        meta.ttl,
        Some(prost_types::Duration {
            seconds: 60,
            nanos: 0
        })
    );
    assert!(response.results.is_empty(), "{:?}", response.results);
    let desired = runner::desired(&response, AnswerLimits::DEFAULT).expect("desired");
    assert_eq!(desired.composite, None);
    assert_eq!(desired.resources.keys().collect::<Vec<_>>(), ["bucket"]);
    assert_eq!(
        Value::Object(desired.resources["bucket"].clone()),
        json!({"apiVersion": "s3.example.org/v1", "kind": "Bucket",
            "spec": {"size": 3, "ratio": 0.5}})
    );
    assert!(desired.resources["bucket"]["spec"]["size"].is_i64());
}

#[tokio::test]
async fn a_normal_function_composes_from_its_input() {
    let function = start("ok", &["--insecure"]);
    let client = insecure(&function);
    // The flag's behaviour, then the input's: the same answer.
    let response = client
        .run(request("flag", None), DEADLINE)
        .await
        .unwrap_or_else(|e| panic!("no answer: {e}\n{}", function.output()));
    let desired = runner::desired(&response, AnswerLimits::DEFAULT).expect("desired");
    assert_eq!(desired.resources["bucket"]["spec"]["size"], json!(3));
    assert_composes(&client, &function, "input").await;
}

#[tokio::test]
async fn a_function_that_sleeps_is_cut_at_the_deadline() {
    let function = start("sleep", &["--insecure"]);
    let client = insecure(&function);
    let deadline = Duration::from_secs(1);
    let started = Instant::now();
    let error = client
        .run(request("sleep", None), deadline)
        .await
        .expect_err("a deadline");
    let took = started.elapsed();
    match &error {
        RunError::Deadline {
            function,
            deadline: d,
        } => {
            assert_eq!(function, "function-hostile");
            assert_eq!(*d, deadline);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        error.to_string(),
        "function function-hostile did not answer within 1.000s"
    );
    assert!(took >= deadline && took < deadline + MARGIN, "{took:?}");
    // The sleeping call still holds a task in the function, not the client.
    assert_composes(&client, &function, "after-sleep").await;
}

#[tokio::test]
async fn a_function_answering_more_than_4_mib_is_too_large() {
    // Five resources of 1 MiB each; the function may send 16 MiB, the client takes 4.
    let function = start("huge", &["--insecure", "--max-send-message-size", "16"]);
    let client = insecure(&function);
    let error = client
        .run(request("huge", None), DEADLINE)
        .await
        .expect_err("too large");
    match &error {
        RunError::TooLarge {
            direction: Direction::Response,
            message,
            ..
        } => {
            assert!(
                message.starts_with("Error, decoded message length too large: found ")
                    && message.ends_with(" bytes, the limit is: 4194304 bytes"),
                "{message}"
            );
            let found: usize = message
                .trim_start_matches("Error, decoded message length too large: found ")
                .split(' ')
                .next()
                .and_then(|n| n.parse().ok())
                .expect("the size found");
            assert!(found > 5 * 1024 * 1024, "{found}");
        }
        other => panic!("{other:?}\n{}", function.output()),
    }
    assert_composes(&client, &function, "after-huge").await;

    // With the SDK's own limit (4 MiB) the function refuses to send it: the same error,
    // in gRPC's words.
    let function = start("huge", &["--insecure"]);
    let client = insecure(&function);
    let error = client
        .run(request("huge", None), DEADLINE)
        .await
        .expect_err("too large");
    match &error {
        RunError::TooLarge {
            direction: Direction::Response,
            message,
            ..
        } => assert!(
            message.starts_with("SERVER: Sent message larger than max (")
                && message.ends_with(" vs. 4194304)"),
            "{message}"
        ),
        other => panic!("{other:?}\n{}", function.output()),
    }
    assert_composes(&client, &function, "after-huge-refused").await;
}

#[tokio::test]
async fn a_function_answering_too_many_values_is_refused_before_decoding() {
    // 300,000 numbers in 3.3 MB: within the message limit, past the values allowed.
    let function = start("many", &["--insecure"]);
    let client = insecure(&function);
    let error = client
        .run(request("many", None), DEADLINE)
        .await
        .expect_err("too many values");
    match &error {
        RunError::BadAnswer { function, message } => {
            assert_eq!(function, "function-hostile");
            assert_eq!(message, "the answer holds more than 262144 values");
        }
        other => panic!("{other:?}\n{}", function.output()),
    }
    assert_composes(&client, &function, "after-many").await;
}

#[tokio::test]
async fn a_fatal_result_is_in_the_answer() {
    let function = start("fatal", &["--insecure"]);
    let client = insecure(&function);
    // Not a transport error: the function answered, and its answer says it failed.
    let response = client
        .run(request("fatal", None), DEADLINE)
        .await
        .unwrap_or_else(|e| panic!("no answer: {e}\n{}", function.output()));
    assert_eq!(
        response.results,
        [proto::Result {
            severity: proto::Severity::Fatal as i32,
            message: "the input is wrong: behaviour fatal".to_string(),
            reason: None,
            target: None,
        }]
    );
    assert_eq!(
        response.meta.as_ref().map(|m| m.tag.as_str()),
        Some("fatal")
    );
    let desired = runner::desired(&response, AnswerLimits::DEFAULT).expect("desired");
    assert!(desired.resources.is_empty() && desired.composite.is_none());
    assert_composes(&client, &function, "after-fatal").await;
}

#[tokio::test]
async fn a_function_that_crashes_mid_call_is_unreachable() {
    let mut function = start("crash", &["--insecure"]);
    let client = insecure(&function);
    let started = Instant::now();
    let error = client
        .run(request("crash", None), DEADLINE)
        .await
        .expect_err("unreachable");
    // The transport's cause said after tonic's "transport error" (h2's words, such as "stream
    // closed because of a broken pipe", vary with the moment of the crash).
    assert!(
        matches!(&error, RunError::Unreachable { function, message }
            if function == "function-hostile" && message.starts_with("transport error: ")),
        "{error:?}\n{}",
        function.output()
    );
    eprintln!("crash: {error}");
    // At once, not at the deadline.
    assert!(started.elapsed() < MARGIN, "{:?}", started.elapsed());
    let status = function.wait_exit(Duration::from_secs(10)).expect("exited");
    assert_eq!(status.code(), Some(1));

    // Started again on its port, the same client reconnects and gets an answer.
    let port = function.address.port();
    drop(function);
    let logs = tmp().join("function-logs");
    match launch::start_on("hostile-ok", &logs, port, &hostile("ok", &["--insecure"])) {
        Ok(again) => {
            eprintln!("crash: started again on port {port}");
            assert_composes(&client, &again, "after-crash").await
        }
        // Another process took the port meanwhile: a new port needs a new client.
        Err(launch::Failed::Bind(_)) => {
            let again = start("ok", &["--insecure"]);
            assert_composes(&insecure(&again), &again, "after-crash").await;
        }
    }
}

/// A CA, a server certificate for `names` and a client certificate, shaped as Crossplane's
/// (functions.md §2.2), written as the SDK reads them (`runtime.load_credentials`):
/// `tls.crt`, `tls.key` and `ca.crt` in one directory. Returns the directory and the
/// client's TLS for `server_name`.
fn certificates(names: &[&str]) -> (PathBuf, ClientTls) {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
        KeyPair, KeyUsagePurpose,
    };
    let mut ca = CertificateParams::new(vec!["crossplane-root-ca".to_string()]).expect("CA");
    ca.distinguished_name.push(DnType::CommonName, "Crossplane");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_key = KeyPair::generate().expect("a key");
    let ca_cert = ca.self_signed(&ca_key).expect("self-signed");
    let issuer = Issuer::new(ca, ca_key);
    let leaf = |names: Vec<String>, usage: ExtendedKeyUsagePurpose| {
        let mut params = CertificateParams::new(names).expect("params");
        params.extended_key_usages = vec![usage];
        let key = KeyPair::generate().expect("a key");
        let cert = params.signed_by(&key, &issuer).expect("signed");
        (cert.pem(), key.serialize_pem())
    };
    let server = leaf(
        names.iter().map(|n| n.to_string()).collect(),
        ExtendedKeyUsagePurpose::ServerAuth,
    );
    let client = leaf(
        vec!["crossplane.crossplane-system".to_string()],
        ExtendedKeyUsagePurpose::ClientAuth,
    );
    let dir = tmp().join(format!("function-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("the certificates' directory");
    for (file, pem) in [
        ("tls.crt", &server.0),
        ("tls.key", &server.1),
        ("ca.crt", &ca_cert.pem()),
    ] {
        std::fs::write(dir.join(file), pem).expect("a certificate file");
    }
    let tls = ClientTls {
        ca_pem: ca_cert.pem().into_bytes(),
        cert_pem: client.0.into_bytes(),
        key_pem: client.1.into_bytes(),
        server_name: String::new(),
    };
    (dir, tls)
}

fn tls_client(function: &launch::Function, tls: &ClientTls, server_name: &str) -> FunctionClient {
    let mut config = Config::insecure(format!("https://{}", function.address));
    config.tls = Some(ClientTls {
        server_name: server_name.to_string(),
        ..tls.clone()
    });
    FunctionClient::new("function-hostile", config).expect("a client")
}

#[tokio::test]
async fn a_server_certificate_for_another_name_is_refused() {
    let (dir, tls) = certificates(&[
        "function-hostile",
        "function-hostile.crossplane-system",
        "function-hostile.crossplane-system.svc",
    ]);
    let dir = dir.to_str().expect("a UTF-8 path").to_string();
    // mTLS only, as in a cluster: no --insecure.
    let function = start("ok", &["--tls-certs-dir", &dir]);
    let error = tls_client(&function, &tls, "wrong.example")
        .run(request("tls", None), DEADLINE)
        .await
        .expect_err("a wrong name");
    eprintln!("wrong name: {error}");
    match &error {
        RunError::Unreachable { message, .. } => assert!(
            message.contains("certificate not valid for name \"wrong.example\""),
            "{message}"
        ),
        other => panic!("{other:?}\n{}", function.output()),
    }
    // The name the certificate holds: the function answers over mTLS.
    let client = tls_client(&function, &tls, "function-hostile.crossplane-system");
    assert_composes(&client, &function, "tls").await;
}

#[test]
fn a_port_taken_before_the_function_binds_it_is_a_failure_to_bind() {
    // What launch::start retries on: gRPC without SO_REUSEPORT cannot share the port.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let port = taken.local_addr().expect("its address").port();
    let logs = tmp().join("function-logs");
    match launch::start_on(
        "hostile-taken",
        &logs,
        port,
        &hostile("ok", &["--insecure"]),
    ) {
        Err(launch::Failed::Bind(output)) => assert!(
            output.contains(&format!("Failed to bind to address 127.0.0.1:{port}")),
            "{output}"
        ),
        Ok(function) => panic!("listening on a taken port:\n{}", function.output()),
    }
}
