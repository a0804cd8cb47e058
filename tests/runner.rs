//! The RunFunction client (`src/runner/`) against in-process function servers: tonic
//! servers generated from the same `.proto` apart from the client (`build.rs`), so the
//! wire is all they share.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use composition_webhook::budget::{self, CountingAllocator};
use composition_webhook::render::structpb;
use composition_webhook::runner::breaker::BreakerConfig;
use composition_webhook::runner::proto::{self as client_proto, RequestMeta};
use composition_webhook::runner::wire::{self, WireError};
use composition_webhook::runner::{
    self, AnswerLimits, ClientTls, Config, Direction, FunctionClient, RunError,
};
use prost::Message;
use serde_json::{Value, json};
use tonic::transport::Server;
use tonic::transport::server::{Router, TcpIncoming};
use tonic::{Request, Response, Status};

#[allow(clippy::all, clippy::pedantic)]
mod v1 {
    include!(concat!(
        env!("OUT_DIR"),
        "/test_server/apiextensions.r#fn.proto.v1.rs"
    ));
}

#[allow(clippy::all, clippy::pedantic)]
mod v1beta1 {
    include!(concat!(
        env!("OUT_DIR"),
        "/test_server/apiextensions.r#fn.proto.v1beta1.rs"
    ));
}

// Per thread, so the decoding measured below is the test thread's alone.
#[global_allocator]
static GLOBAL: CountingAllocator<std::alloc::System> = CountingAllocator(std::alloc::System);

/// A loaded 2-core machine: timing assertions allow this much past a deadline.
const MARGIN: Duration = Duration::from_secs(3);

fn object(value: Value) -> prost_types::Struct {
    structpb::to_struct(
        value.as_object().expect("an object"),
        structpb::Limits::DEFAULT,
    )
    .expect("a struct")
}

/// What the servers below do with a call.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Behaviour {
    /// Composes a Bucket from the XR's `spec.size`.
    Compose,
    /// Sleeps past any deadline.
    Hang,
    /// Answers 5 MiB of text.
    Huge,
    /// Answers `Unimplemented`, as a server without the method does.
    Unimplemented,
    /// Composes after 500 ms.
    Slow,
    /// Answers an object nested 40 levels deep: past prost's recursion limit.
    Deep,
    /// Answers a list of 300,000 nulls: 600 KB on the wire, past the values allowed.
    Many,
}

#[derive(Clone)]
struct Function {
    behaviour: Behaviour,
    /// Answers `Internal` while set.
    failing: Arc<AtomicBool>,
    calls: Arc<AtomicUsize>,
    /// Calls under way now, and the most there were at once.
    in_flight: Arc<AtomicUsize>,
    most_in_flight: Arc<AtomicUsize>,
}

impl Function {
    fn new(behaviour: Behaviour) -> Self {
        Function {
            behaviour,
            failing: Arc::new(AtomicBool::new(false)),
            calls: Arc::new(AtomicUsize::new(0)),
            in_flight: Arc::new(AtomicUsize::new(0)),
            most_in_flight: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// The desired resources of an answer to an XR's `spec`, and the answer's tag.
    async fn answer(
        &self,
        xr: Option<&prost_types::Struct>,
        tag: &str,
    ) -> Result<(prost_types::Struct, String), Status> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.failing.load(Ordering::SeqCst) {
            return Err(Status::internal("the function failed"));
        }
        match self.behaviour {
            Behaviour::Deep => {
                let mut deep = prost_types::Struct::default();
                for _ in 0..40 {
                    let value = prost_types::Value {
                        kind: Some(prost_types::value::Kind::StructValue(deep)),
                    };
                    deep = prost_types::Struct {
                        fields: [("a".to_string(), value)].into(),
                    };
                }
                Ok((deep, tag.to_string()))
            }
            Behaviour::Slow => {
                let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                self.most_in_flight.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(500)).await;
                self.in_flight.fetch_sub(1, Ordering::SeqCst);
                Ok((object(json!({"kind": "Bucket"})), tag.to_string()))
            }
            Behaviour::Compose => {
                let xr = structpb::from_struct(
                    xr.ok_or_else(|| Status::invalid_argument("no XR"))?,
                    structpb::Limits::DEFAULT,
                )
                .map_err(|e| Status::invalid_argument(e.to_string()))?;
                let bucket = json!({
                    "apiVersion": "s3.example.org/v1",
                    "kind": "Bucket",
                    "spec": {"size": xr["spec"]["size"], "ratio": 0.5},
                });
                Ok((object(bucket), tag.to_string()))
            }
            Behaviour::Hang => {
                tokio::time::sleep(Duration::from_secs(60)).await;
                Err(Status::internal("woke up"))
            }
            Behaviour::Huge => {
                let text = prost_types::Value {
                    kind: Some(prost_types::value::Kind::StringValue(
                        "x".repeat(5 * 1024 * 1024),
                    )),
                };
                let huge = prost_types::Struct {
                    fields: [("data".to_string(), text)].into(),
                };
                Ok((huge, tag.to_string()))
            }
            Behaviour::Unimplemented => Err(Status::unimplemented("Method not found!")),
            Behaviour::Many => {
                let nulls = prost_types::Value {
                    kind: Some(prost_types::value::Kind::ListValue(
                        prost_types::ListValue {
                            values: vec![prost_types::Value::default(); 300_000],
                        },
                    )),
                };
                let many = prost_types::Struct {
                    fields: [("items".to_string(), nulls)].into(),
                };
                Ok((many, tag.to_string()))
            }
        }
    }
}

#[tonic::async_trait]
impl v1::function_runner_service_server::FunctionRunnerService for Function {
    async fn run_function(
        &self,
        request: Request<v1::RunFunctionRequest>,
    ) -> Result<Response<v1::RunFunctionResponse>, Status> {
        let request = request.into_inner();
        let xr = request
            .observed
            .as_ref()
            .and_then(|o| o.composite.as_ref())
            .and_then(|c| c.resource.as_ref());
        let tag = request.meta.map(|m| m.tag).unwrap_or_default();
        let (bucket, tag) = self.answer(xr, &tag).await?;
        Ok(Response::new(v1::RunFunctionResponse {
            meta: Some(v1::ResponseMeta {
                tag: format!("v1 {tag}"),
                ttl: None,
            }),
            desired: Some(v1::State {
                composite: None,
                resources: [(
                    "bucket".to_string(),
                    v1::Resource {
                        resource: Some(bucket),
                        ..v1::Resource::default()
                    },
                )]
                .into(),
            }),
            ..v1::RunFunctionResponse::default()
        }))
    }
}

#[tonic::async_trait]
impl v1beta1::function_runner_service_server::FunctionRunnerService for Function {
    async fn run_function(
        &self,
        request: Request<v1beta1::RunFunctionRequest>,
    ) -> Result<Response<v1beta1::RunFunctionResponse>, Status> {
        let request = request.into_inner();
        let xr = request
            .observed
            .as_ref()
            .and_then(|o| o.composite.as_ref())
            .and_then(|c| c.resource.as_ref());
        let tag = request.meta.map(|m| m.tag).unwrap_or_default();
        let (bucket, tag) = self.answer(xr, &tag).await?;
        Ok(Response::new(v1beta1::RunFunctionResponse {
            meta: Some(v1beta1::ResponseMeta {
                tag: format!("v1beta1 {tag}"),
                ttl: None,
            }),
            desired: Some(v1beta1::State {
                composite: None,
                resources: [(
                    "bucket".to_string(),
                    v1beta1::Resource {
                        resource: Some(bucket),
                        ..v1beta1::Resource::default()
                    },
                )]
                .into(),
            }),
            ..v1beta1::RunFunctionResponse::default()
        }))
    }
}

fn v1_service(
    function: &Function,
) -> v1::function_runner_service_server::FunctionRunnerServiceServer<Function> {
    v1::function_runner_service_server::FunctionRunnerServiceServer::new(function.clone())
}

fn v1beta1_service(
    function: &Function,
) -> v1beta1::function_runner_service_server::FunctionRunnerServiceServer<Function> {
    v1beta1::function_runner_service_server::FunctionRunnerServiceServer::new(function.clone())
}

/// Serves `router` on a loopback port of its own.
async fn serve(router: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let address = listener.local_addr().expect("its address");
    tokio::spawn(router.serve_with_incoming(TcpIncoming::from(listener)));
    address
}

fn request(size: i64, tag: &str) -> client_proto::RunFunctionRequest {
    let xr = json!({
        "apiVersion": "example.org/v1",
        "kind": "XBucket",
        "metadata": {"name": "demo"},
        "spec": {"size": size},
    });
    client_proto::RunFunctionRequest {
        meta: Some(RequestMeta {
            tag: tag.to_string(),
            capabilities: Vec::new(),
        }),
        observed: Some(client_proto::State {
            composite: Some(client_proto::Resource {
                resource: Some(object(xr)),
                ..client_proto::Resource::default()
            }),
            resources: Default::default(),
        }),
        ..client_proto::RunFunctionRequest::default()
    }
}

fn client(address: SocketAddr) -> FunctionClient {
    FunctionClient::new(
        "function-test",
        Config::insecure(format!("http://{address}")),
    )
    .expect("a client")
}

const DEADLINE: Duration = Duration::from_secs(10);

#[tokio::test]
async fn an_answer_is_read_with_its_desired_resources() {
    let function = Function::new(Behaviour::Compose);
    let address = serve(Server::builder().add_service(v1_service(&function))).await;
    let client = client(address);
    let response = client
        .run(request(3, "t1"), DEADLINE)
        .await
        .expect("an answer");
    assert_eq!(
        response.meta.as_ref().map(|m| m.tag.as_str()),
        Some("v1 t1")
    );
    let desired = runner::desired(&response, AnswerLimits::DEFAULT).expect("desired");
    assert_eq!(
        Value::Object(desired.resources["bucket"].clone()),
        json!({
            "apiVersion": "s3.example.org/v1",
            "kind": "Bucket",
            "spec": {"size": 3, "ratio": 0.5},
        })
    );
    // 3 went out as a double and came back an integer; 0.5 stayed a double.
    assert!(desired.resources["bucket"]["spec"]["size"].is_i64());
    assert_eq!(function.calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_function_without_v1_is_called_on_v1beta1() {
    let function = Function::new(Behaviour::Compose);
    // Only v1beta1: the router answers `Unimplemented` for v1.
    let address = serve(Server::builder().add_service(v1beta1_service(&function))).await;
    let client = client(address);
    for tag in ["first", "second"] {
        let response = client
            .run(request(2, tag), DEADLINE)
            .await
            .expect("an answer");
        assert_eq!(
            response.meta.as_ref().map(|m| m.tag.clone()),
            Some(format!("v1beta1 {tag}"))
        );
        let desired = runner::desired(&response, AnswerLimits::DEFAULT).expect("desired");
        assert_eq!(desired.resources["bucket"]["spec"]["size"], json!(2));
    }
    assert_eq!(function.calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_function_without_either_version_is_unimplemented() {
    let function = Function::new(Behaviour::Unimplemented);
    let address = serve(Server::builder().add_service(v1_service(&function))).await;
    let error = client(address)
        .run(request(1, "t"), DEADLINE)
        .await
        .expect_err("unimplemented");
    assert!(
        matches!(&error, RunError::Unimplemented { function, .. } if function == "function-test"),
        "{error:?}"
    );
    // v1 answered by the function, v1beta1 by the router.
    assert_eq!(function.calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_function_that_hangs_is_cut_at_the_deadline() {
    let function = Function::new(Behaviour::Hang);
    let address = serve(Server::builder().add_service(v1_service(&function))).await;
    let deadline = Duration::from_millis(500);
    let started = Instant::now();
    let error = client(address)
        .run(request(1, "t"), deadline)
        .await
        .expect_err("a deadline");
    let took = started.elapsed();
    assert!(
        matches!(error, RunError::Deadline { deadline: d, .. } if d == deadline),
        "{error:?}"
    );
    assert!(took >= deadline && took < deadline + MARGIN, "{took:?}");
}

#[tokio::test]
async fn a_server_that_never_speaks_is_cut_at_the_deadline() {
    // Accepts TCP connections and says nothing: no HTTP/2 settings, no answer.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let address = listener.local_addr().expect("its address");
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let deadline = Duration::from_millis(500);
    let started = Instant::now();
    let error = client(address)
        .run(request(1, "t"), deadline)
        .await
        .expect_err("a deadline");
    let took = started.elapsed();
    assert!(matches!(error, RunError::Deadline { .. }), "{error:?}");
    assert!(took < deadline + MARGIN, "{took:?}");
}

#[tokio::test]
async fn an_answer_over_the_limit_is_refused() {
    let function = Function::new(Behaviour::Huge);
    let address = serve(Server::builder().add_service(v1_service(&function))).await;
    let error = client(address)
        .run(request(1, "t"), DEADLINE)
        .await
        .expect_err("too large");
    match error {
        RunError::TooLarge {
            direction: Direction::Response,
            message,
            ..
        } => assert!(message.contains("the limit is: 4194304 bytes"), "{message}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_request_over_the_limit_is_not_sent() {
    let function = Function::new(Behaviour::Compose);
    let address = serve(Server::builder().add_service(v1_service(&function))).await;
    let mut config = Config::insecure(format!("http://{address}"));
    config.max_request_bytes = 64;
    let client = FunctionClient::new("function-test", config).expect("a client");
    let size = request(1, "t").encoded_len();
    assert!(size > 64, "{size}");
    let error = client
        .run(request(1, "t"), DEADLINE)
        .await
        .expect_err("too large");
    match &error {
        RunError::TooLarge {
            direction: Direction::Request,
            message,
            ..
        } => assert_eq!(message, &format!("{size} bytes, the limit is 64 bytes")),
        other => panic!("{other:?}"),
    }
    assert_eq!(function.calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_function_that_is_down_is_unreachable() {
    // A port just freed: nothing listens there.
    let address = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
        listener.local_addr().expect("its address")
    };
    let error = client(address)
        .run(request(1, "t"), DEADLINE)
        .await
        .expect_err("unreachable");
    assert!(matches!(error, RunError::Unreachable { .. }), "{error:?}");
}

#[tokio::test]
async fn the_breaker_opens_after_failures_and_closes_after_the_cool_down() {
    let function = Function::new(Behaviour::Compose);
    function.failing.store(true, Ordering::SeqCst);
    let address = serve(Server::builder().add_service(v1_service(&function))).await;
    let mut config = Config::insecure(format!("http://{address}"));
    let cool_down = Duration::from_millis(800);
    config.breaker = BreakerConfig {
        failures: 3,
        cool_down,
    };
    let client = FunctionClient::new("function-test", config).expect("a client");
    for _ in 0..3 {
        let error = client
            .run(request(1, "t"), DEADLINE)
            .await
            .expect_err("failing");
        assert!(
            matches!(&error, RunError::Failed { code: tonic::Code::Internal, message, .. }
                if message == "the function failed"),
            "{error:?}"
        );
    }
    // Open: skipped without a call.
    assert!(client.is_skipped());
    let error = client
        .run(request(1, "t"), DEADLINE)
        .await
        .expect_err("open");
    match &error {
        RunError::CircuitOpen {
            failures: 3,
            retry_in,
            ..
        } => assert!(*retry_in <= cool_down),
        other => panic!("{other:?}"),
    }
    assert!(
        error.to_string().starts_with(
            "function function-test is skipped after 3 failures in a row; next try in 0."
        ),
        "{error}"
    );
    assert_eq!(function.calls.load(Ordering::SeqCst), 3);

    // The function recovers; after the cool-down one trial goes, and closes the breaker.
    function.failing.store(false, Ordering::SeqCst);
    tokio::time::sleep(cool_down + Duration::from_millis(100)).await;
    assert!(!client.is_skipped());
    client
        .run(request(1, "t"), DEADLINE)
        .await
        .expect("the trial");
    client.run(request(1, "t"), DEADLINE).await.expect("closed");
    assert_eq!(function.calls.load(Ordering::SeqCst), 5);
}

#[tokio::test]
async fn timeouts_open_the_breaker_too() {
    let function = Function::new(Behaviour::Hang);
    let address = serve(Server::builder().add_service(v1_service(&function))).await;
    let mut config = Config::insecure(format!("http://{address}"));
    config.breaker = BreakerConfig {
        failures: 2,
        cool_down: Duration::from_secs(60),
    };
    let client = FunctionClient::new("function-test", config).expect("a client");
    for _ in 0..2 {
        let error = client
            .run(request(1, "t"), Duration::from_millis(200))
            .await
            .expect_err("deadline");
        assert!(matches!(error, RunError::Deadline { .. }), "{error:?}");
    }
    let started = Instant::now();
    let error = client
        .run(request(1, "t"), Duration::from_secs(5))
        .await
        .expect_err("open");
    assert!(matches!(error, RunError::CircuitOpen { .. }), "{error:?}");
    // Skipped at once, not after the deadline.
    assert!(started.elapsed() < MARGIN);
}

/// A CA, a function's server certificate for `names` and a client certificate, shaped as
/// Crossplane's (functions.md §2.2): EKU serverAuth and clientAuth, both signed by the CA.
struct Certificates {
    ca: String,
    server: (String, String),
    client: (String, String),
}

fn certificates(names: &[&str]) -> Certificates {
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
    Certificates {
        ca: ca_cert.pem(),
        server: leaf(
            names.iter().map(|n| n.to_string()).collect(),
            ExtendedKeyUsagePurpose::ServerAuth,
        ),
        client: leaf(
            vec!["crossplane.crossplane-system".to_string()],
            ExtendedKeyUsagePurpose::ClientAuth,
        ),
    }
}

/// A function serving v1 over mTLS, requiring a client certificate chained to the CA.
async fn serve_tls(function: &Function, certs: &Certificates) -> SocketAddr {
    use tonic::transport::{Certificate, Identity, ServerTlsConfig};
    let tls = ServerTlsConfig::new()
        .identity(Identity::from_pem(&certs.server.0, &certs.server.1))
        .client_ca_root(Certificate::from_pem(&certs.ca));
    let router = Server::builder()
        .tls_config(tls)
        .expect("server TLS")
        .add_service(v1_service(function));
    serve(router).await
}

fn tls_client(address: SocketAddr, certs: &Certificates, server_name: &str) -> FunctionClient {
    let mut config = Config::insecure(format!("https://{address}"));
    config.tls = Some(ClientTls {
        ca_pem: certs.ca.clone().into_bytes(),
        cert_pem: certs.client.0.clone().into_bytes(),
        key_pem: certs.client.1.clone().into_bytes(),
        server_name: server_name.to_string(),
    });
    FunctionClient::new("function-test", config).expect("a client")
}

#[tokio::test]
async fn mtls_with_crossplane_shaped_certificates() {
    let names = [
        "function-test",
        "function-test.crossplane-system",
        "function-test.crossplane-system.svc",
    ];
    let certs = certificates(&names);
    let function = Function::new(Behaviour::Compose);
    let address = serve_tls(&function, &certs).await;

    let client = tls_client(address, &certs, "function-test.crossplane-system");
    let response = client
        .run(request(4, "tls"), DEADLINE)
        .await
        .expect("an answer");
    assert_eq!(response.meta.map(|m| m.tag), Some("v1 tls".to_string()));

    // A name the server certificate does not hold: refused before any call.
    let error = tls_client(address, &certs, "wrong.example")
        .run(request(4, "tls"), DEADLINE)
        .await
        .expect_err("a wrong name");
    assert!(matches!(error, RunError::Unreachable { .. }), "{error:?}");

    // Another CA's client certificate: the server refuses the handshake.
    let other = certificates(&names);
    let mut config = Config::insecure(format!("https://{address}"));
    config.tls = Some(ClientTls {
        ca_pem: certs.ca.clone().into_bytes(),
        cert_pem: other.client.0.into_bytes(),
        key_pem: other.client.1.into_bytes(),
        server_name: "function-test.crossplane-system".to_string(),
    });
    let error = FunctionClient::new("function-test", config)
        .expect("a client")
        .run(request(4, "tls"), DEADLINE)
        .await
        .expect_err("an unknown client");
    assert!(matches!(error, RunError::Unreachable { .. }), "{error:?}");
    assert_eq!(function.calls.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_in_flight_are_limited_per_function() {
    let function = Function::new(Behaviour::Slow);
    let address = serve(Server::builder().add_service(v1_service(&function))).await;
    let mut config = Config::insecure(format!("http://{address}"));
    config.max_concurrent_calls = 2;
    let client = Arc::new(FunctionClient::new("function-test", config).expect("a client"));
    let calls: Vec<_> = (0..6)
        .map(|i| {
            let client = Arc::clone(&client);
            tokio::spawn(async move { client.run(request(i, "t"), DEADLINE).await })
        })
        .collect();
    for call in calls {
        call.await.expect("joined").expect("an answer");
    }
    assert_eq!(function.calls.load(Ordering::SeqCst), 6);
    assert_eq!(function.most_in_flight.load(Ordering::SeqCst), 2);

    // A call waiting for a place past its deadline ends at the deadline.
    let _busy: Vec<_> = (0..2)
        .map(|i| {
            let client = Arc::clone(&client);
            tokio::spawn(async move { client.run(request(i, "t"), DEADLINE).await })
        })
        .collect();
    // Both places taken (not a guess at how long that takes).
    let started = Instant::now();
    while function.in_flight.load(Ordering::SeqCst) < 2 {
        assert!(started.elapsed() < DEADLINE, "the busy calls did not start");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let before = function.calls.load(Ordering::SeqCst);
    let error = client
        .run(request(9, "t"), Duration::from_millis(100))
        .await
        .expect_err("no place in time");
    assert!(matches!(error, RunError::Deadline { .. }), "{error:?}");
    // It never reached the function.
    assert_eq!(function.calls.load(Ordering::SeqCst), before);
}

#[tokio::test]
async fn an_answer_too_deep_to_decode_is_a_bad_answer() {
    let function = Function::new(Behaviour::Deep);
    let address = serve(Server::builder().add_service(v1_service(&function))).await;
    let error = client(address)
        .run(request(1, "t"), DEADLINE)
        .await
        .expect_err("too deep");
    // Refused on the wire, before prost reached its own limit.
    match &error {
        RunError::BadAnswer { message, .. } => assert_eq!(
            message,
            "the answer nests messages deeper than 100 levels, prost's recursion limit"
        ),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn an_answer_of_too_many_values_is_refused_before_it_is_decoded() {
    let function = Function::new(Behaviour::Many);
    let address = serve(Server::builder().add_service(v1_service(&function))).await;
    let client = client(address);
    let error = client
        .run(request(1, "t"), DEADLINE)
        .await
        .expect_err("too many values");
    match &error {
        RunError::BadAnswer { function, message } => {
            assert_eq!(function, "function-test");
            assert_eq!(message, "the answer holds more than 262144 values");
        }
        other => panic!("{other:?}"),
    }
    // Within a client's own limits it is an answer: the resources entry, the object, the
    // list and its items.
    let mut config = Config::insecure(format!("http://{address}"));
    config.answer.values.max_values = 300_003;
    let response = FunctionClient::new("function-test", config)
        .expect("a client")
        .run(request(1, "t"), DEADLINE)
        .await
        .expect("an answer");
    let bucket = &response.desired.expect("desired").resources["bucket"];
    let items = &bucket.resource.as_ref().expect("an object").fields["items"];
    assert!(matches!(
        &items.kind,
        Some(prost_types::value::Kind::ListValue(list)) if list.values.len() == 300_000
    ));
}

/// An answer of elements as small as the wire allows (`what`: nulls in a list, or empty
/// conditions), under 4 MiB, and how many it holds.
fn tiny_elements(what: &str) -> (Vec<u8>, usize) {
    const FOUR_MIB: usize = 4 * 1024 * 1024;
    let answer = match what {
        // Empty `Value`s (null) in a list in the output: 2 bytes each.
        "values" => client_proto::RunFunctionResponse {
            output: Some(prost_types::Struct {
                fields: [(
                    "items".to_string(),
                    prost_types::Value {
                        kind: Some(prost_types::value::Kind::ListValue(
                            prost_types::ListValue {
                                values: vec![prost_types::Value::default(); FOUR_MIB / 2 - 16],
                            },
                        )),
                    },
                )]
                .into(),
            }),
            ..client_proto::RunFunctionResponse::default()
        },
        // Empty conditions: 2 bytes each, 88 in memory.
        "conditions" => client_proto::RunFunctionResponse {
            conditions: vec![client_proto::Condition::default(); FOUR_MIB / 2],
            ..client_proto::RunFunctionResponse::default()
        },
        other => panic!("{other}"),
    };
    let count = answer.conditions.len()
        + answer
            .output
            .as_ref()
            .map_or(0, |o| match &o.fields["items"].kind {
                Some(prost_types::value::Kind::ListValue(list)) => list.values.len(),
                _ => 0,
            });
    let bytes = answer.encode_to_vec();
    assert!(bytes.len() <= FOUR_MIB, "{}", bytes.len());
    (bytes, count)
}

#[test]
fn decoding_an_answer_of_tiny_values_is_bounded_before_prost_allocates() {
    let limits = structpb::Limits::DEFAULT;
    for what in ["values", "conditions"] {
        let (bytes, count) = tiny_elements(what);
        // What prost alone takes for it: tens of MiB from 4 MiB.
        let (decoded, unbounded) =
            budget::peak_during(|| client_proto::RunFunctionResponse::decode(&bytes[..]));
        assert!(decoded.is_ok());
        drop(decoded);
        let (refused, bounded) = budget::peak_during(|| wire::decode_answer(&bytes, limits));
        assert_eq!(
            refused,
            Err(WireError::TooManyValues { max: 262_144 }),
            "{what}"
        );
        eprintln!(
            "{what}: {count} elements in {} bytes: prost's decoding peaks at {} bytes, \
             refused on the wire at {} bytes",
            bytes.len(),
            unbounded,
            bounded
        );
        assert!(unbounded > 60 << 20, "{what}: {unbounded}");
        // The walk's stack of a few frames, nothing per element.
        assert!(bounded < 4096, "{what}: {bounded}");
    }
    // The most an answer within the limits decodes into: as many of the largest element.
    let most = client_proto::RunFunctionResponse {
        conditions: vec![client_proto::Condition::default(); limits.max_values],
        ..client_proto::RunFunctionResponse::default()
    }
    .encode_to_vec();
    let (decoded, peak) = budget::peak_during(|| wire::decode_answer(&most, limits));
    assert_eq!(
        decoded.expect("within the limits").conditions.len(),
        262_144
    );
    eprintln!(
        "{} empty conditions in {} bytes, within the limits: decoding peaks at {peak} bytes",
        limits.max_values,
        most.len()
    );
    assert!(peak < 32 << 20, "{peak}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_never_got_a_place_is_no_failure_of_the_function() {
    let function = Function::new(Behaviour::Slow);
    let address = serve(Server::builder().add_service(v1_service(&function))).await;
    let mut config = Config::insecure(format!("http://{address}"));
    config.max_concurrent_calls = 1;
    // One failure would open it.
    config.breaker = BreakerConfig {
        failures: 1,
        cool_down: Duration::from_secs(60),
    };
    let client = Arc::new(FunctionClient::new("function-test", config).expect("a client"));
    let busy = {
        let client = Arc::clone(&client);
        tokio::spawn(async move { client.run(request(1, "busy"), DEADLINE).await })
    };
    let started = Instant::now();
    while function.in_flight.load(Ordering::SeqCst) < 1 {
        assert!(started.elapsed() < DEADLINE, "the busy call did not start");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for _ in 0..3 {
        let error = client
            .run(request(2, "waiting"), Duration::from_millis(50))
            .await
            .expect_err("no place in time");
        assert!(
            matches!(error, RunError::Deadline { deadline, .. }
                if deadline == Duration::from_millis(50)),
            "{error:?}"
        );
    }
    // Three deadlines, none the function's: the breaker is still closed.
    assert!(!client.is_skipped());
    busy.await.expect("joined").expect("the busy call answered");
    client
        .run(request(3, "after"), DEADLINE)
        .await
        .expect("an answer after the waits");
    assert_eq!(function.calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_server_that_closes_the_connection_is_unreachable() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let address = listener.local_addr().expect("its address");
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            drop(socket);
        }
    });
    let started = Instant::now();
    let error = client(address)
        .run(request(1, "t"), DEADLINE)
        .await
        .expect_err("closed");
    assert!(matches!(error, RunError::Unreachable { .. }), "{error:?}");
    assert!(started.elapsed() < MARGIN);
}
