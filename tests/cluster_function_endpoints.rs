//! Where the cluster's functions answer (`src/cluster/function_endpoints.rs`), against the
//! in-process API server (`tests/kubeapi/`) with a real kube client: a Function's active
//! FunctionRevision and Secret `crossplane-tls-client` give its endpoint and mTLS settings;
//! inactive revisions are ignored; a new revision or a rotated Secret is followed and bumps
//! the generation; a missing Secret, revision or endpoint, and refused or unserved lists,
//! are unavailable with their exact messages; and the resolved settings call an in-process
//! function over mTLS with certificates shaped as Crossplane's, refusing a server whose
//! certificate names another Service.

#[path = "functions/certs.rs"]
mod certs;
mod kubeapi;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use composition_webhook::cluster::function_endpoints::{
    Endpoint, FunctionCallOptions, FunctionEndpoints, Unavailable,
};
use composition_webhook::cluster::{ClusterOptions, ClusterSchemas};
use composition_webhook::runner::proto::{RequestMeta, RunFunctionRequest};
use composition_webhook::runner::{ClientTls, Config, FunctionClient, RunError};
use kubeapi::{FakeApiServer, Resource, Verb};
use serde_json::{Value, json};
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Certificate, Identity, Server, ServerTlsConfig};

#[allow(clippy::all, clippy::pedantic)]
mod v1 {
    include!(concat!(
        env!("OUT_DIR"),
        "/test_server/apiextensions.r#fn.proto.v1.rs"
    ));
}

const NS: &str = "crossplane-system";
const SECRET: &str = "crossplane-tls-client";
const ENDPOINT: &str = "dns:///function-x.crossplane-system:9443";

/// The fake API server and the cluster source on it, with calls to functions on.
struct Cluster {
    api: FakeApiServer,
    // Kept: dropping it stops the watches.
    _schemas: ClusterSchemas,
    endpoints: FunctionEndpoints,
}

impl Cluster {
    /// Started after `prepare` set up the API server.
    async fn start(prepare: impl FnOnce(&FakeApiServer)) -> Cluster {
        let api = FakeApiServer::start().await;
        prepare(&api);
        let options = ClusterOptions {
            function_calls: Some(FunctionCallOptions::default()),
            ..ClusterOptions::default()
        };
        let schemas = ClusterSchemas::start(api.client().await, api.url(), options);
        let endpoints = schemas
            .function_endpoints()
            .expect("calls to functions are on")
            .clone();
        Cluster {
            api,
            _schemas: schemas,
            endpoints,
        }
    }

    /// Waits until `function` resolves as `wanted` says, and returns that answer.
    async fn until(
        &self,
        function: &str,
        what: &str,
        wanted: impl Fn(&Result<Endpoint, Unavailable>) -> bool,
    ) -> Result<Endpoint, Unavailable> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let answer = self.endpoints.resolve(function);
            if wanted(&answer) {
                return answer;
            }
            assert!(Instant::now() < deadline, "{what}: still {answer:?}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits until `function` is unavailable with `message`.
    async fn until_unavailable(&self, function: &str, message: &str) {
        self.until(function, message, |a| {
            a.as_ref().err().map(ToString::to_string).as_deref() == Some(message)
        })
        .await
        .expect_err("unavailable");
    }

    /// Waits until `function` resolves to `revision`.
    async fn until_resolved(&self, function: &str, revision: &str) -> Endpoint {
        self.until(function, revision, |a| {
            a.as_ref().is_ok_and(|e| e.revision == revision)
        })
        .await
        .expect("resolved")
    }
}

fn revision(name: &str, function: &str, state: &str, endpoint: Option<&str>) -> Value {
    let mut r = json!({
        "apiVersion": "pkg.crossplane.io/v1", "kind": "FunctionRevision",
        "metadata": {"name": name, "labels": {
            "pkg.crossplane.io/package": function,
            "pkg.crossplane.io/parent": function,
        }},
        "spec": {"desiredState": state, "image": "xpkg.crossplane.io/x/function:v1",
                 "revision": 1},
        "status": {"conditions": [{"type": "Healthy", "status": "True"}]},
    });
    if let Some(endpoint) = endpoint {
        r["status"]["endpoint"] = json!(endpoint);
    }
    r
}

/// The three names Crossplane gives a function's server certificate.
fn service_names(service: &str) -> Vec<String> {
    vec![
        service.to_string(),
        format!("{service}.{NS}"),
        format!("{service}.{NS}.svc"),
    ]
}

/// Secret `name` in `namespace` holding `certs`' client certificate, key and CA.
fn secret(namespace: &str, name: &str, certs: &certs::Certificates) -> Value {
    let b64 = |s: &str| STANDARD.encode(s.as_bytes());
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "type": "Opaque",
        "data": {"tls.crt": b64(&certs.client.0), "tls.key": b64(&certs.client.1),
                 "ca.crt": b64(&certs.ca)},
    })
}

/// What the resolved configuration must be for `certs`.
fn assert_tls(endpoint: &Endpoint, certs: &certs::Certificates, address: &str, server_name: &str) {
    let defaults = Config::insecure("");
    let config = &endpoint.config;
    assert_eq!(config.address, address);
    assert_eq!(
        config.tls,
        Some(ClientTls {
            ca_pem: certs.ca.clone().into_bytes(),
            cert_pem: certs.client.0.clone().into_bytes(),
            key_pem: certs.client.1.clone().into_bytes(),
            server_name: server_name.to_string(),
        })
    );
    assert_eq!(
        (
            config.max_request_bytes,
            config.max_response_bytes,
            config.max_concurrent_calls,
            config.connect_timeout,
        ),
        (
            defaults.max_request_bytes,
            defaults.max_response_bytes,
            defaults.max_concurrent_calls,
            defaults.connect_timeout,
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_active_revision_and_the_client_secret_give_the_endpoint_and_its_mtls() {
    let certs = certs::crossplane(&[]);
    let decoy = certs::crossplane(&[]);
    let cluster = Cluster::start(|api| {
        api.apply(
            Resource::FunctionRevisions,
            revision("function-x-0a1b2c", "function-x", "Active", Some(ENDPOINT)),
        );
        // An inactive revision of the same Function, and another Function's.
        api.apply(
            Resource::FunctionRevisions,
            revision(
                "function-x-000old",
                "function-x",
                "Inactive",
                Some("dns:///function-x-old.crossplane-system:9443"),
            ),
        );
        api.apply(
            Resource::FunctionRevisions,
            revision(
                "function-y-3d4e5f",
                "function-y",
                "Active",
                Some("function-y.crossplane-system:9443"),
            ),
        );
        api.apply(Resource::Secrets, secret(NS, SECRET, &certs));
        // The same name elsewhere, and another Secret beside it: neither is read.
        api.apply(Resource::Secrets, secret("default", SECRET, &decoy));
        api.apply(Resource::Secrets, secret(NS, "crossplane-root-ca", &decoy));
    })
    .await;

    let x = cluster
        .until_resolved("function-x", &format!("function-x-0a1b2c@{ENDPOINT}"))
        .await;
    assert_tls(
        &x,
        &certs,
        "https://function-x.crossplane-system:9443",
        "function-x.crossplane-system",
    );
    // An endpoint without the scheme.
    let y = cluster
        .until_resolved(
            "function-y",
            "function-y-3d4e5f@function-y.crossplane-system:9443",
        )
        .await;
    assert_tls(
        &y,
        &certs,
        "https://function-y.crossplane-system:9443",
        "function-y.crossplane-system",
    );

    // The Secret is read by name in Crossplane's namespace only, listed and watched.
    let secret_calls: Vec<_> = cluster
        .api
        .requests()
        .into_iter()
        .filter(|r| r.resource == Resource::Secrets)
        .collect();
    assert!(!secret_calls.is_empty());
    for call in &secret_calls {
        assert_eq!(call.namespace.as_deref(), Some(NS), "{call:?}");
        assert!(
            call.query
                .contains("fieldSelector=metadata.name%3Dcrossplane-tls-client"),
            "{call:?}"
        );
    }
    assert!(secret_calls.iter().any(|c| c.verb == Verb::List));
    cluster
        .api
        .wait_for_watch(Resource::Secrets, Duration::from_secs(10))
        .await;
    cluster
        .api
        .wait_for_watch(Resource::FunctionRevisions, Duration::from_secs(10))
        .await;
    assert_eq!(
        cluster.api.count(Verb::List, Resource::FunctionRevisions),
        1
    );

    // /debug/schemas' view: no PEM in it.
    let view = serde_json::to_value(cluster.endpoints.view()).expect("JSON");
    assert_eq!(
        view["revisions"]["functions"],
        json!([
            {"function": "function-x", "revision": "function-x-0a1b2c", "endpoint": ENDPOINT,
             "error": null},
            {"function": "function-y", "revision": "function-y-3d4e5f",
             "endpoint": "function-y.crossplane-system:9443", "error": null},
        ])
    );
    assert_eq!(view["revisions"]["objects"], 3);
    assert_eq!(view["clientSecret"]["usable"], true);
    assert_eq!(view["clientSecret"]["namespace"], NS);
    assert!(!view.to_string().contains("PRIVATE KEY"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inactive_revisions_and_revisions_without_an_endpoint_are_not_called() {
    let certs = certs::crossplane(&[]);
    let cluster = Cluster::start(|api| {
        api.apply(
            Resource::FunctionRevisions,
            revision(
                "function-x-000old",
                "function-x",
                "Inactive",
                Some(ENDPOINT),
            ),
        );
        api.apply(Resource::Secrets, secret(NS, SECRET, &certs));
    })
    .await;
    let none = "no active FunctionRevision of Function \"function-x\" (label pkg.crossplane.io/package=function-x, spec.desiredState: Active)";
    cluster.until_unavailable("function-x", none).await;
    cluster.until_unavailable(
        "function-z",
        "no active FunctionRevision of Function \"function-z\" (label pkg.crossplane.io/package=function-z, spec.desiredState: Active)",
    )
    .await;

    // Active, but the package runtime has not set the endpoint yet.
    cluster.api.apply(
        Resource::FunctionRevisions,
        revision("function-x-0a1b2c", "function-x", "Active", None),
    );
    cluster
        .until_unavailable(
            "function-x",
            &format!("{none} has a status.endpoint yet: function-x-0a1b2c"),
        )
        .await;
    // Then it is.
    cluster.api.apply(
        Resource::FunctionRevisions,
        revision("function-x-0a1b2c", "function-x", "Active", Some(ENDPOINT)),
    );
    cluster
        .until_resolved("function-x", &format!("function-x-0a1b2c@{ENDPOINT}"))
        .await;
    // An endpoint that cannot be dialled.
    cluster.api.apply(
        Resource::FunctionRevisions,
        revision(
            "function-x-0a1b2c",
            "function-x",
            "Active",
            Some("function-x"),
        ),
    );
    cluster
        .until_unavailable(
            "function-x",
            "FunctionRevision \"function-x-0a1b2c\" has status.endpoint \"function-x\", which is not dns:///host:port or host:port",
        )
        .await;
    // Deleted: no active revision again.
    assert!(
        cluster
            .api
            .delete(Resource::FunctionRevisions, "function-x-0a1b2c")
    );
    cluster.until_unavailable("function-x", none).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_active_revision_moves_the_address_and_bumps_the_generation() {
    let certs = certs::crossplane(&[]);
    let cluster = Cluster::start(|api| {
        api.apply(
            Resource::FunctionRevisions,
            revision("function-x-0a1b2c", "function-x", "Active", Some(ENDPOINT)),
        );
        api.apply(Resource::Secrets, secret(NS, SECRET, &certs));
    })
    .await;
    cluster
        .until_resolved("function-x", &format!("function-x-0a1b2c@{ENDPOINT}"))
        .await;
    let before = cluster.endpoints.generation();

    // A status change that moves nothing (a condition, a new resourceVersion): same
    // generation.
    let mut touched = revision("function-x-0a1b2c", "function-x", "Active", Some(ENDPOINT));
    touched["status"]["conditions"] = json!([{"type": "Healthy", "status": "False"}]);
    let rv = cluster.api.apply(Resource::FunctionRevisions, touched);
    // The watch has seen it once a later change shows: a revision of another Function.
    cluster.api.apply(
        Resource::FunctionRevisions,
        revision("function-q-1", "function-q", "Inactive", None),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while cluster.endpoints.view().revisions.objects != 2 {
        assert!(Instant::now() < deadline, "rv {rv} and the next not seen");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(cluster.endpoints.generation(), before);

    // An upgrade: the old revision inactive, a new one active at another Service.
    let moved = "dns:///function-x-v2.crossplane-system:9443";
    cluster.api.apply(
        Resource::FunctionRevisions,
        revision(
            "function-x-0a1b2c",
            "function-x",
            "Inactive",
            Some(ENDPOINT),
        ),
    );
    cluster.api.apply(
        Resource::FunctionRevisions,
        revision("function-x-9f8e7d", "function-x", "Active", Some(moved)),
    );
    let endpoint = cluster
        .until_resolved("function-x", &format!("function-x-9f8e7d@{moved}"))
        .await;
    assert_tls(
        &endpoint,
        &certs,
        "https://function-x-v2.crossplane-system:9443",
        "function-x-v2.crossplane-system",
    );
    assert!(cluster.endpoints.generation() > before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_secret_gives_new_pems_and_bumps_the_generation() {
    let first = certs::crossplane(&[]);
    let cluster = Cluster::start(|api| {
        api.apply(
            Resource::FunctionRevisions,
            revision("function-x-0a1b2c", "function-x", "Active", Some(ENDPOINT)),
        );
        api.apply(Resource::Secrets, secret(NS, SECRET, &first));
    })
    .await;
    let revision_called = format!("function-x-0a1b2c@{ENDPOINT}");
    cluster.until_resolved("function-x", &revision_called).await;
    let before = cluster.endpoints.generation();

    let second = certs::crossplane(&[]);
    cluster
        .api
        .apply(Resource::Secrets, secret(NS, SECRET, &second));
    let endpoint = cluster
        .until("function-x", "the new client certificate", |a| {
            a.as_ref().is_ok_and(|e| {
                e.config
                    .tls
                    .as_ref()
                    .is_some_and(|t| t.cert_pem == second.client.0.as_bytes())
            })
        })
        .await
        .expect("resolved");
    assert_tls(
        &endpoint,
        &second,
        "https://function-x.crossplane-system:9443",
        "function-x.crossplane-system",
    );
    assert_eq!(endpoint.revision, revision_called);
    let rotated = cluster.endpoints.generation();
    assert!(rotated > before);

    // Emptied (as Crossplane's chart creates it, before its init container fills it), then
    // deleted.
    cluster.api.apply(
        Resource::Secrets,
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": SECRET, "namespace": NS}, "type": "Opaque"}),
    );
    cluster
        .until_unavailable(
            "function-x",
            "the client certificate Secret crossplane-system/crossplane-tls-client lacks tls.crt, tls.key, ca.crt (it needs tls.crt, tls.key and ca.crt): functions in the cluster require mTLS",
        )
        .await;
    assert!(cluster.endpoints.generation() > rotated);
    assert!(
        cluster
            .api
            .delete(Resource::Secrets, &format!("{NS}/{SECRET}"))
    );
    cluster
        .until_unavailable(
            "function-x",
            "the client certificate Secret crossplane-system/crossplane-tls-client is missing: functions in the cluster require mTLS",
        )
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_secret_functions_are_unavailable_until_it_is_created() {
    let cluster = Cluster::start(|api| {
        api.apply(
            Resource::FunctionRevisions,
            revision("function-x-0a1b2c", "function-x", "Active", Some(ENDPOINT)),
        );
    })
    .await;
    let missing = "the client certificate Secret crossplane-system/crossplane-tls-client is missing: functions in the cluster require mTLS";
    cluster.until_unavailable("function-x", missing).await;
    assert_eq!(
        cluster
            .endpoints
            .resolve("function-x")
            .expect_err("missing"),
        Unavailable::SecretMissing {
            namespace: NS.to_string()
        }
    );
    let before = cluster.endpoints.generation();
    let certs = certs::crossplane(&[]);
    cluster
        .api
        .apply(Resource::Secrets, secret(NS, SECRET, &certs));
    cluster
        .until_resolved("function-x", &format!("function-x-0a1b2c@{ENDPOINT}"))
        .await;
    assert!(cluster.endpoints.generation() > before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_and_unserved_lists_say_why() {
    // RBAC refuses both lists.
    let cluster = Cluster::start(|api| {
        api.fail(Resource::FunctionRevisions, Verb::List, Some(403));
        api.fail(Resource::Secrets, Verb::List, Some(403));
    })
    .await;
    let user = kubeapi::FORBIDDEN_USER;
    cluster
        .until_unavailable(
            "function-x",
            &format!("FunctionRevisions are not readable: 403 Forbidden: functionrevisions.pkg.crossplane.io is forbidden: User \"{user}\" cannot list resource \"functionrevisions\" in API group \"pkg.crossplane.io\" at the cluster scope"),
        )
        .await;
    // Allowed: the revisions are listed; the Secret still is not.
    cluster.api.apply(
        Resource::FunctionRevisions,
        revision("function-x-0a1b2c", "function-x", "Active", Some(ENDPOINT)),
    );
    cluster
        .api
        .fail(Resource::FunctionRevisions, Verb::List, None);
    let refused = format!(
        "the client certificate Secret crossplane-system/crossplane-tls-client is not readable: 403 Forbidden: secrets is forbidden: User \"{user}\" cannot list resource \"secrets\" in API group \"\" in the namespace \"crossplane-system\""
    );
    // kube-runtime's watcher backs off 0.8 s doubling: within 10 s it lists again.
    cluster.until_unavailable("function-x", &refused).await;
    drop(cluster);

    // No Crossplane: FunctionRevisions are not served.
    let cluster = Cluster::start(|api| {
        api.fail(Resource::FunctionRevisions, Verb::List, Some(404));
    })
    .await;
    cluster
        .until_unavailable(
            "function-x",
            "the API server does not serve functionrevisions.pkg.crossplane.io v1: Crossplane is not installed",
        )
        .await;
}

#[test]
fn before_any_list_functions_are_not_listed_yet() {
    let endpoints = FunctionEndpoints::new(&FunctionCallOptions::default());
    assert_eq!(
        endpoints
            .resolve("function-x")
            .expect_err("nothing listed")
            .to_string(),
        "FunctionRevisions are not listed yet"
    );
    assert_eq!(endpoints.generation(), 0);
}

// ---------------------------------------------------------------------------------------
// mTLS end to end

/// A function that answers every call with its tag.
#[derive(Clone)]
struct Function;

#[tonic::async_trait]
impl v1::function_runner_service_server::FunctionRunnerService for Function {
    async fn run_function(
        &self,
        request: tonic::Request<v1::RunFunctionRequest>,
    ) -> Result<tonic::Response<v1::RunFunctionResponse>, tonic::Status> {
        let tag = request.into_inner().meta.map(|m| m.tag).unwrap_or_default();
        Ok(tonic::Response::new(v1::RunFunctionResponse {
            meta: Some(v1::ResponseMeta {
                tag: format!("called {tag}"),
                ttl: None,
            }),
            ..v1::RunFunctionResponse::default()
        }))
    }
}

/// A function serving v1 on loopback with the certificate and key `server`, requiring a
/// client certificate that `ca` signed, as function-sdk-go's servers do.
async fn serve_function(server: &(String, String), ca: &str) -> SocketAddr {
    let tls = ServerTlsConfig::new()
        .identity(Identity::from_pem(&server.0, &server.1))
        .client_ca_root(Certificate::from_pem(ca));
    let router = Server::builder()
        .tls_config(tls)
        .expect("server TLS")
        .add_service(
            v1::function_runner_service_server::FunctionRunnerServiceServer::new(Function),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let address = listener.local_addr().expect("its address");
    tokio::spawn(router.serve_with_incoming(TcpIncoming::from(listener)));
    address
}

fn request(tag: &str) -> RunFunctionRequest {
    RunFunctionRequest {
        meta: Some(RequestMeta {
            tag: tag.to_string(),
            capabilities: Vec::new(),
        }),
        ..RunFunctionRequest::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_resolved_endpoint_calls_the_function_over_mtls() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let names = service_names("function-x");
    let certs = certs::crossplane(&names);
    let cluster = Cluster::start(|api| {
        api.apply(
            Resource::FunctionRevisions,
            revision("function-x-0a1b2c", "function-x", "Active", Some(ENDPOINT)),
        );
        api.apply(Resource::Secrets, secret(NS, SECRET, &certs));
    })
    .await;
    let endpoint = cluster
        .until_resolved("function-x", &format!("function-x-0a1b2c@{ENDPOINT}"))
        .await;
    assert_eq!(
        names,
        [
            "function-x",
            "function-x.crossplane-system",
            "function-x.crossplane-system.svc"
        ]
    );

    // The Service's name does not resolve here: the same endpoint at the server's address,
    // the certificate still checked against function-x.crossplane-system.
    let address = serve_function(&certs.server, &certs.ca).await;
    let here = endpoint.at(address);
    assert_eq!(here.config.address, format!("https://{address}"));
    assert_eq!(here.revision, endpoint.revision);
    let client = FunctionClient::new("function-x", here.config).expect("a client");
    let response = client
        .run(request("over mTLS"), Duration::from_secs(10))
        .await
        .expect("an answer");
    assert_eq!(
        response.meta.map(|m| m.tag).as_deref(),
        Some("called over mTLS")
    );

    // A server whose certificate names another Service (same CA): refused before any call.
    let other = certs::leaf(
        &certs.issuer,
        &service_names("function-y"),
        rcgen::ExtendedKeyUsagePurpose::ServerAuth,
    );
    let wrong = serve_function(&other, &certs.ca).await;
    let client = FunctionClient::new("function-x", endpoint.at(wrong).config).expect("a client");
    let error = client
        .run(request("refused"), Duration::from_secs(10))
        .await
        .expect_err("a certificate for another name");
    match &error {
        RunError::Unreachable { message, .. } => assert_eq!(
            message,
            "invalid peer certificate: certificate not valid for name \"function-x.crossplane-system\"; certificate is only valid for DnsName(\"function-y\"), DnsName(\"function-y.crossplane-system\") or DnsName(\"function-y.crossplane-system.svc\"): transport error"
        ),
        other => panic!("not unreachable: {other:?}"),
    }
}
