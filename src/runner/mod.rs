//! The RunFunction client: Crossplane's composition functions called over gRPC, the
//! fourth shell (a network client, as [`crate::cluster`] is).
//!
//! One [`FunctionClient`] per function (one address). Each call is bounded as everything in
//! the write path is:
//! - a deadline the caller passes, sent to the function as `grpc-timeout` and enforced here
//!   too, so a function that never answers is cut at the deadline ([`RunError::Deadline`]);
//! - message size limits, Crossplane's 4 MiB gRPC defaults in both directions
//!   ([`RunError::TooLarge`]), and what an answer decodes into bounded before it is decoded
//!   ([`wire`]: its values and nesting, [`Config::answer`]; [`RunError::BadAnswer`]);
//! - a limit on calls in flight to the function (a semaphore; a call waits for a place
//!   within its deadline);
//! - a circuit breaker ([`breaker`]): after 5 failures in a row the function is skipped
//!   for 30 s ([`RunError::CircuitOpen`]), both configurable. A call that never got a place
//!   never reached the function, so its deadline is no failure of the function's.
//!
//! The protocol is `apiextensions.fn.proto.v1.FunctionRunnerService/RunFunction`
//! (`proto/fn/v1/run_function.proto`, compiled by `build.rs`). As Crossplane's client does
//! (`internal/xfn/function_runner.go`, `BetaFallBackFunctionRunnerServiceClient`), a
//! function that answers v1 with `Unimplemented` is asked again on the v1beta1 service: its
//! messages are v1's field for field, so the same bytes (the request is encoded once) go on
//! v1beta1's path, and the client remembers that this function speaks v1beta1.
//!
//! An answer is hostile input: [`desired`] converts its desired state within bounds
//! ([`crate::render::structpb`]), its integral numbers integers again, as the API server
//! reads them from Crossplane.

pub mod breaker;
pub mod steps;
pub mod wire;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use prost::Message;
use serde_json::{Map, Value};
use tokio::sync::Semaphore;
use tonic::Code;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

use crate::render::structpb::{self, Allowance, StructError};
use breaker::{Breaker, BreakerConfig};

/// The messages of `apiextensions.fn.proto.v1`, generated from
/// `proto/fn/v1/run_function.proto` by prost.
#[allow(
    missing_docs,
    clippy::all,
    clippy::pedantic,
    rustdoc::broken_intra_doc_links,
    rustdoc::invalid_html_tags,
    rustdoc::bare_urls
)]
pub mod proto {
    // prost names the file after the package, whose `fn` is a Rust keyword.
    include!(concat!(env!("OUT_DIR"), "/apiextensions.r#fn.proto.v1.rs"));
}

use proto::{RunFunctionRequest, RunFunctionResponse};

/// The v1 method, which Crossplane calls first.
pub const V1_PATH: &str = "/apiextensions.fn.proto.v1.FunctionRunnerService/RunFunction";
/// The v1beta1 method, for functions built before Crossplane v1.17 promoted v1.
pub const V1BETA1_PATH: &str = "/apiextensions.fn.proto.v1beta1.FunctionRunnerService/RunFunction";

/// grpc-go's default limit on a message received, which Crossplane's client keeps and
/// function-sdk-go's servers use: 4 MiB.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// mTLS to a function, as Crossplane connects to functions in a cluster: the CA that signed
/// the function's server certificate, the client certificate and key it accepts (Secret
/// `crossplane-tls-client`), and the name the server certificate must hold
/// (`<service>.<namespace>`).
#[derive(Clone, PartialEq, Eq)]
pub struct ClientTls {
    /// PEM of the CA certificate(s) the server's chain must reach.
    pub ca_pem: Vec<u8>,
    /// PEM of the client certificate chain.
    pub cert_pem: Vec<u8>,
    /// PEM of the client's private key (PKCS#1, PKCS#8 or SEC1).
    pub key_pem: Vec<u8>,
    /// The DNS name to verify the server certificate against.
    pub server_name: String,
}

impl std::fmt::Debug for ClientTls {
    // The key stays out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls")
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

/// How to reach one function and how far to trust it.
#[derive(Debug, Clone)]
pub struct Config {
    /// `http://host:port` (insecure, as functions run offline with `--insecure`), or
    /// `https://host:port` with [`Config::tls`].
    pub address: String,
    /// mTLS; required for `https://` addresses, refused for `http://`.
    pub tls: Option<ClientTls>,
    /// Largest request sent (protobuf bytes).
    pub max_request_bytes: usize,
    /// Largest answer accepted (protobuf bytes).
    pub max_response_bytes: usize,
    /// Calls in flight to this function at once; more wait for a place.
    pub max_concurrent_calls: usize,
    /// When the function is skipped after failures.
    pub breaker: BreakerConfig,
    /// Longest wait for a TCP (and TLS) connection, within each call's deadline.
    pub connect_timeout: Duration,
    /// What an answer may decode into: its values and nesting are counted on the wire
    /// against [`AnswerLimits::values`] before it is decoded ([`wire::check_answer`]).
    /// [`desired`] takes its limits apart; the same ones suit both.
    pub answer: AnswerLimits,
}

impl Config {
    /// An insecure function at `address` with the default limits: 4 MiB each way, 8 calls
    /// in flight, the default breaker, 5 s to connect, [`AnswerLimits::DEFAULT`].
    pub fn insecure(address: impl Into<String>) -> Self {
        Config {
            address: address.into(),
            tls: None,
            max_request_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            max_response_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            max_concurrent_calls: 8,
            breaker: BreakerConfig::DEFAULT,
            connect_timeout: Duration::from_secs(5),
            answer: AnswerLimits::DEFAULT,
        }
    }
}

/// Which message exceeded its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Ours, before it was sent.
    Request,
    /// The function's answer (or the function refused our request as too large).
    Response,
}

impl std::fmt::Display for Direction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Direction::Request => "request",
            Direction::Response => "answer",
        })
    }
}

/// Why a function gave no usable answer.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The configuration cannot make a client (a bad address, unreadable PEM).
    #[error("function {function}: {message}")]
    Config {
        /// The function.
        function: String,
        /// What is wrong.
        message: String,
    },
    /// No connection, or it closed before the answer (refused, reset, TLS handshake
    /// failed, no route, the stream cancelled by the server).
    #[error("function {function} is unreachable: {message}")]
    Unreachable {
        /// The function.
        function: String,
        /// The transport's reason.
        message: String,
    },
    /// No answer within the call's deadline.
    #[error("function {function} did not answer within {}", fmt_duration(*deadline))]
    Deadline {
        /// The function.
        function: String,
        /// The deadline the caller gave.
        deadline: Duration,
    },
    /// A message over the size limit.
    #[error("function {function}: the {direction} is over the limit: {message}")]
    TooLarge {
        /// The function.
        function: String,
        /// Which message.
        direction: Direction,
        /// The size and the limit, as measured.
        message: String,
    },
    /// The function serves neither v1 nor v1beta1 of RunFunction.
    #[error("function {function} does not implement RunFunction (v1 or v1beta1): {message}")]
    Unimplemented {
        /// The function.
        function: String,
        /// The v1beta1 call's status message.
        message: String,
    },
    /// An answer that cannot be read (bad protobuf, more values or deeper nesting than
    /// [`Config::answer`] allows, found before decoding: [`wire::WireError`]).
    #[error("function {function} answered what cannot be read: {message}")]
    BadAnswer {
        /// The function.
        function: String,
        /// Why.
        message: String,
    },
    /// The function answered a gRPC error status.
    #[error("function {function} failed: {code:?}: {message}")]
    Failed {
        /// The function.
        function: String,
        /// The status code.
        code: Code,
        /// The status message.
        message: String,
    },
    /// Skipped: the function failed too often lately ([`breaker`]).
    #[error(
        "function {function} is skipped after {failures} failures in a row; next try in {}",
        fmt_duration(*retry_in)
    )]
    CircuitOpen {
        /// The function.
        function: String,
        /// The failures that open the breaker.
        failures: u32,
        /// How long until a call is let through again.
        retry_in: Duration,
    },
}

fn fmt_duration(d: Duration) -> String {
    format!("{:.3}s", d.as_secs_f64())
}

/// A client of one function. Cheap to share (`Arc` it); calls may run concurrently.
#[derive(Debug)]
pub struct FunctionClient {
    name: String,
    channel: Channel,
    config: Config,
    permits: Arc<Semaphore>,
    breaker: Breaker,
    /// Set once the function answered v1 `Unimplemented` and v1beta1 otherwise.
    beta: AtomicBool,
}

impl FunctionClient {
    /// A client of function `name` (used in errors) at `config.address`. It connects on the
    /// first call, so a function not yet up is no error here. Must be called within a
    /// Tokio runtime (the channel spawns its connection task).
    pub fn new(name: impl Into<String>, config: Config) -> Result<Self, RunError> {
        let name = name.into();
        let bad = |message: String| RunError::Config {
            function: name.clone(),
            message,
        };
        let mut endpoint = Endpoint::from_shared(config.address.clone())
            .map_err(|e| bad(format!("address {:?}: {e}", config.address)))?
            .connect_timeout(config.connect_timeout);
        let https = config.address.starts_with("https://");
        match (&config.tls, https) {
            (Some(tls), true) => {
                let tls_config = ClientTlsConfig::new()
                    .ca_certificate(Certificate::from_pem(&tls.ca_pem))
                    .identity(Identity::from_pem(&tls.cert_pem, &tls.key_pem))
                    .domain_name(tls.server_name.clone());
                endpoint = endpoint
                    .tls_config(tls_config)
                    .map_err(|e| bad(format!("TLS: {e}")))?;
            }
            (None, false) => {}
            (Some(_), false) => {
                return Err(bad(format!(
                    "address {:?}: TLS needs an https:// address",
                    config.address
                )));
            }
            (None, true) => {
                return Err(bad(format!(
                    "address {:?}: https:// needs a TLS configuration",
                    config.address
                )));
            }
        }
        Ok(FunctionClient {
            channel: endpoint.connect_lazy(),
            permits: Arc::new(Semaphore::new(config.max_concurrent_calls.max(1))),
            breaker: Breaker::new(config.breaker),
            beta: AtomicBool::new(false),
            name,
            config,
        })
    }

    /// The function's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the breaker refuses calls now.
    pub fn is_skipped(&self) -> bool {
        self.breaker.is_open(Instant::now())
    }

    /// Runs the function once, within `deadline` from now: waiting for a place among the
    /// calls in flight, connecting and the call itself all count against it.
    pub async fn run(
        &self,
        request: RunFunctionRequest,
        deadline: Duration,
    ) -> Result<RunFunctionResponse, RunError> {
        let started = Instant::now();
        // Ours to fix, not the function's failure: measured before the breaker counts it,
        // and before a buffer of that size is taken.
        let size = request.encoded_len();
        if size > self.config.max_request_bytes {
            return Err(RunError::TooLarge {
                function: self.name.clone(),
                direction: Direction::Request,
                message: format!(
                    "{size} bytes, the limit is {} bytes",
                    self.config.max_request_bytes
                ),
            });
        }
        // Encoded once: the same bytes go on v1 and, should it be needed, on v1beta1.
        let body = Bytes::from(request.encode_to_vec());
        drop(request);
        // An open breaker refuses at once, without waiting for a place.
        if let Some(retry_in) = self.breaker.retry_in(Instant::now()) {
            return Err(self.circuit_open(retry_in));
        }
        let waiting = deadline.saturating_sub(started.elapsed());
        let _permit = match tokio::time::timeout(waiting, self.permits.acquire()).await {
            Ok(Ok(permit)) => permit,
            // Never closed, so acquiring fails only if it were: then the client is gone.
            Ok(Err(closed)) => return Err(self.unreachable(closed.to_string())),
            // The call never reached the function: no failure of its own, so the breaker
            // does not count it.
            Err(_) => return Err(self.deadline(deadline)),
        };
        // Admitted once it has a place, so a trial after the cool-down is a call that goes.
        self.breaker
            .admit(Instant::now())
            .map_err(|retry_in| self.circuit_open(retry_in))?;
        let remaining = deadline.saturating_sub(started.elapsed());
        let result = match tokio::time::timeout(remaining, self.call(body, deadline, started)).await
        {
            Ok(result) => result,
            // The backstop: whatever the function or the transport do, the call ends
            // here, dropping its stream.
            Err(_) => Err(self.deadline(deadline)),
        };
        self.breaker.record(result.is_ok(), Instant::now());
        result
    }

    async fn call(
        &self,
        body: Bytes,
        deadline: Duration,
        started: Instant,
    ) -> Result<RunFunctionResponse, RunError> {
        let remaining = || deadline.saturating_sub(started.elapsed());
        if self.beta.load(Ordering::Relaxed) {
            return self
                .unary(V1BETA1_PATH, body, remaining())
                .await
                .map_err(|s| self.classify(s, deadline));
        }
        // `Bytes` clones share the buffer: the retry costs no copy of the request.
        match self.unary(V1_PATH, body.clone(), remaining()).await {
            Err(status) if status.code() == Code::Unimplemented => {
                match self.unary(V1BETA1_PATH, body, remaining()).await {
                    Ok(response) => {
                        self.beta.store(true, Ordering::Relaxed);
                        Ok(response)
                    }
                    Err(status) if status.code() == Code::Unimplemented => {
                        Err(RunError::Unimplemented {
                            function: self.name.clone(),
                            message: said(&status),
                        })
                    }
                    Err(status) => Err(self.classify(status, deadline)),
                }
            }
            other => other.map_err(|s| self.classify(s, deadline)),
        }
    }

    /// One unary call on `path`, the deadline sent as `grpc-timeout`.
    async fn unary(
        &self,
        path: &'static str,
        body: Bytes,
        timeout: Duration,
    ) -> Result<RunFunctionResponse, tonic::Status> {
        let mut grpc = tonic::client::Grpc::new(self.channel.clone())
            .max_decoding_message_size(self.config.max_response_bytes)
            .max_encoding_message_size(self.config.max_request_bytes);
        grpc.ready()
            .await
            .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
        let mut request = tonic::Request::new(body);
        request.set_timeout(timeout);
        let codec = wire::RunCodec {
            limits: self.config.answer.values,
        };
        grpc.unary(request, http::uri::PathAndQuery::from_static(path), codec)
            .await
            .map(tonic::Response::into_inner)
    }

    fn circuit_open(&self, retry_in: Duration) -> RunError {
        RunError::CircuitOpen {
            function: self.name.clone(),
            failures: self.config.breaker.failures,
            retry_in,
        }
    }

    fn deadline(&self, deadline: Duration) -> RunError {
        RunError::Deadline {
            function: self.name.clone(),
            deadline,
        }
    }

    fn unreachable(&self, message: String) -> RunError {
        RunError::Unreachable {
            function: self.name.clone(),
            message,
        }
    }

    /// A status as the error it means: tonic's own (transport, timeout, size, decoding)
    /// told from the function's by their codes and tonic's messages.
    fn classify(&self, status: tonic::Status, deadline: Duration) -> RunError {
        let function = self.name.clone();
        // Our decoder's own refusal, carried as the status's source.
        if let Some(error) = std::error::Error::source(&status)
            .and_then(|source| source.downcast_ref::<wire::WireError>())
        {
            return RunError::BadAnswer {
                function,
                message: error.to_string(),
            };
        }
        let message = said(&status);
        match status.code() {
            Code::DeadlineExceeded => self.deadline(deadline),
            // tonic's client-side `grpc-timeout` answers "Timeout expired".
            Code::Cancelled if message.contains("Timeout expired") => self.deadline(deadline),
            // hyper's "operation was canceled" (the connection closed before the answer)
            // and h2's CANCEL (the server reset the stream, as a crashing handler does).
            Code::Unavailable | Code::Cancelled => self.unreachable(with_causes(message, &status)),
            // tonic's decoder ("decoded message length too large") and grpc servers
            // refusing ours ("received message larger than max").
            Code::OutOfRange | Code::ResourceExhausted
                if message.contains("too large") || message.contains("larger than max") =>
            {
                RunError::TooLarge {
                    function,
                    direction: Direction::Response,
                    message,
                }
            }
            // prost's decoding errors, should one come without its source.
            Code::Internal if message.starts_with("failed to decode") => {
                RunError::BadAnswer { function, message }
            }
            Code::Unknown if message.contains("transport error") => {
                self.unreachable(with_causes(message, &status))
            }
            code => RunError::Failed {
                function,
                code,
                message,
            },
        }
    }
}

/// The desired state of an answer as JSON.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Desired {
    /// The desired composite resource (only its status counts to Crossplane).
    pub composite: Option<Map<String, Value>>,
    /// The desired composed resources by name.
    pub resources: BTreeMap<String, Map<String, Value>>,
}

/// Bounds on reading one answer's desired state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnswerLimits {
    /// Depth, values and text of all the answer's objects together.
    pub values: structpb::Limits,
    /// Desired composed resources.
    pub max_resources: usize,
}

impl AnswerLimits {
    /// [`structpb::Limits::DEFAULT`] and 1,000 resources (the API server's largest
    /// Composition holds about 6,800 templates; a function of a single XR composing more than
    /// a thousand is not one a review should wait for).
    pub const DEFAULT: AnswerLimits = AnswerLimits {
        values: structpb::Limits::DEFAULT,
        max_resources: 1000,
    };
}

impl Default for AnswerLimits {
    fn default() -> Self {
        AnswerLimits::DEFAULT
    }
}

/// Why an answer's desired state was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    /// More desired resources than [`AnswerLimits::max_resources`].
    #[error("the answer desires {count} resources, more than {max}")]
    TooManyResources {
        /// How many the answer holds.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// A desired object out of bounds or unreadable; `what` names it.
    #[error("{what}: {error}")]
    Value {
        /// `the composite resource` or `resource "<name>"`.
        what: String,
        /// Why.
        error: StructError,
    },
}

/// The answer's desired composite and composed resources as JSON, within `limits`, their
/// integral numbers restored as integers ([`structpb::restore_integers`]). A resource
/// without an object is left out, as Crossplane finds nothing to compose from it.
pub fn desired(
    response: &RunFunctionResponse,
    limits: AnswerLimits,
) -> Result<Desired, AnswerError> {
    let Some(state) = &response.desired else {
        return Ok(Desired::default());
    };
    if state.resources.len() > limits.max_resources {
        return Err(AnswerError::TooManyResources {
            count: state.resources.len(),
            max: limits.max_resources,
        });
    }
    let mut allowance = Allowance::new(limits.values);
    let mut read = |object: &prost_types::Struct, what: &dyn Fn() -> String| {
        let mut object = allowance
            .decode_struct(object)
            .map_err(|error| AnswerError::Value {
                what: what(),
                error,
            })?;
        object.values_mut().for_each(structpb::restore_integers);
        Ok(object)
    };
    let composite = match state.composite.as_ref().and_then(|c| c.resource.as_ref()) {
        Some(object) => Some(read(object, &|| "the composite resource".to_string())?),
        None => None,
    };
    let mut resources = BTreeMap::new();
    for (name, resource) in &state.resources {
        if let Some(object) = &resource.resource {
            resources.insert(
                name.clone(),
                read(object, &|| format!("resource {name:?}"))?,
            );
        }
    }
    Ok(Desired {
        composite,
        resources,
    })
}

/// A status's message, as much as an error should carry: the function chooses it (up to
/// the 16 KiB of headers hyper takes).
fn said(status: &tonic::Status) -> String {
    crate::server::warnings::truncate(status.message(), MAX_STATUS_MESSAGE)
}

/// `message` followed by the status's chain of causes: tonic's transport errors say only
/// "transport error", their sources what happened (a reset, a closed connection).
fn with_causes(mut message: String, status: &tonic::Status) -> String {
    let mut cause = std::error::Error::source(status);
    // A chain is a few errors long; bounded all the same.
    for _ in 0..8 {
        let Some(error) = cause else { break };
        let text = error.to_string();
        // tonic's messages often repeat their source's.
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        cause = error.source();
    }
    crate::server::warnings::truncate(&message, MAX_STATUS_MESSAGE)
}

/// The characters of a function's status message kept in an error.
const MAX_STATUS_MESSAGE: usize = 1024;

#[cfg(test)]
mod tests {
    use super::*;
    use proto::{Resource, State};
    use serde_json::json;

    fn response(resources: &[(&str, Value)]) -> RunFunctionResponse {
        RunFunctionResponse {
            desired: Some(State {
                composite: None,
                resources: resources
                    .iter()
                    .map(|(name, value)| {
                        let object = value.as_object().expect("an object");
                        let resource = Resource {
                            resource: Some(
                                structpb::to_struct(object, structpb::Limits::DEFAULT)
                                    .expect("a struct"),
                            ),
                            ..Resource::default()
                        };
                        (name.to_string(), resource)
                    })
                    .collect(),
            }),
            ..RunFunctionResponse::default()
        }
    }

    #[test]
    fn desired_resources_come_back_with_integers() {
        let bucket = json!({"apiVersion": "s3/v1", "kind": "Bucket", "spec": {"size": 3}});
        let got = desired(
            &response(&[("bucket", bucket.clone())]),
            AnswerLimits::DEFAULT,
        )
        .expect("desired");
        assert_eq!(got.composite, None);
        assert_eq!(Value::Object(got.resources["bucket"].clone()), bucket);
        assert!(got.resources["bucket"]["spec"]["size"].is_i64());
    }

    #[test]
    fn desired_is_bounded_as_a_whole() {
        let one = json!({"a": "xxxx"});
        let answer = response(&[("a", one.clone()), ("b", one.clone()), ("c", one)]);
        let limits = AnswerLimits {
            max_resources: 2,
            ..AnswerLimits::DEFAULT
        };
        assert_eq!(
            desired(&answer, limits),
            Err(AnswerError::TooManyResources { count: 3, max: 2 })
        );
        // Each resource holds 5 bytes of text; together 15, over 12.
        let limits = AnswerLimits {
            values: structpb::Limits {
                max_bytes: 12,
                ..structpb::Limits::DEFAULT
            },
            ..AnswerLimits::DEFAULT
        };
        let error = desired(&answer, limits).expect_err("over the bytes");
        assert_eq!(
            error.to_string(),
            "resource \"c\": a: more than 12 bytes of keys and strings"
        );
    }

    #[test]
    fn addresses_and_tls_must_agree() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let _guard = rt.enter();
        assert!(FunctionClient::new("f", Config::insecure("http://127.0.0.1:9443")).is_ok());
        let error = FunctionClient::new("f", Config::insecure("https://127.0.0.1:9443"))
            .expect_err("https without TLS");
        assert_eq!(
            error.to_string(),
            "function f: address \"https://127.0.0.1:9443\": https:// needs a TLS configuration"
        );
        let mut config = Config::insecure("http://127.0.0.1:9443");
        config.tls = Some(ClientTls {
            ca_pem: Vec::new(),
            cert_pem: Vec::new(),
            key_pem: Vec::new(),
            server_name: "f.crossplane-system".into(),
        });
        assert!(matches!(
            FunctionClient::new("f", config),
            Err(RunError::Config { .. })
        ));
        assert!(matches!(
            FunctionClient::new("f", Config::insecure("not a uri")),
            Err(RunError::Config { .. })
        ));
    }
}
