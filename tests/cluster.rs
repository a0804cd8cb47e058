//! The cluster schema source, end to end: the real `composition-webhook serve` binary, with
//! schemas from an in-process API server that speaks the Kubernetes API (list with pages,
//! watch, get) over HTTPS, driven by the real kube client. Each scenario asserts the verdicts
//! a user sees, the cache states in `/debug/schemas` and the metrics.

mod common;
mod kubeapi;
mod webhook;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use composition_webhook::cluster::entries::State;
use kubeapi::{FakeApiServer, ListSource, PageCost, Resource, Verb};
use serde_json::{Value, json};
use webhook::{
    ScratchDir, Server, debug, eventually, metric, project_dir, review_object as review, verdict,
    yaml_documents,
};

const XR_KIND: &str = "XNetwork";
const XR_GROUP: &str = "gcp.platformref.upbound.io";
const NETWORK_CRD: &str = "networks.compute.gcp.upbound.io";

fn one(path: &str) -> Value {
    yaml_documents(&project_dir().join(path))
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("a document in {path}"))
}

fn composition() -> Value {
    one("testdata/example/composition.yaml")
}

fn xrd() -> Value {
    one("testdata/example/definition.yaml")
}

fn network_crd() -> Value {
    one("testdata/crds/compute.gcp.upbound.io_networks.yaml")
}

fn subnetwork_crd() -> Value {
    one("testdata/crds/compute.gcp.upbound.io_subnetworks.yaml")
}

/// The Network CRD with `spec.forProvider.routingMode` limited to `GLOBAL`: the example's
/// `REGIONAL` becomes an error.
fn network_crd_global_only() -> Value {
    let mut crd = network_crd();
    for v in crd["spec"]["versions"].as_array_mut().expect("versions") {
        let routing = v
            .pointer_mut(
                "/schema/openAPIV3Schema/properties/spec/properties/forProvider/properties/routingMode",
            )
            .expect("routingMode");
        routing["enum"] = json!(["GLOBAL"]);
    }
    crd
}

/// The Network CRD with a schema the webhook cannot use.
fn network_crd_unusable() -> Value {
    let mut crd = network_crd();
    for v in crd["spec"]["versions"].as_array_mut().expect("versions") {
        v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"] = json!("oops");
    }
    crd
}

/// The CRD Crossplane generates from the example XRD (as the file catalog derives it).
fn xr_crd() -> Value {
    let mut catalog = composition_webhook::schema::Catalog::new();
    catalog.add_document(&xrd(), "xrd").expect("XRD");
    let entry = catalog
        .entries()
        .find(|e| e.kind() == XR_KIND)
        .expect("XR CRD");
    let versions: Vec<Value> = entry
        .versions()
        .iter()
        .map(|v| {
            json!({"name": v.name, "served": v.served, "storage": v.storage,
                   "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}})
        })
        .collect();
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": entry.name()},
        "spec": {"group": XR_GROUP, "scope": "Cluster",
                 "names": {"kind": XR_KIND, "plural": "xnetworks", "singular": "xnetwork", "listKind": "XNetworkList"},
                 "versions": versions},
    })
}

/// The fake API server with the example's XRD and provider CRDs, and a kubeconfig for it.
struct Cluster {
    api: FakeApiServer,
    dir: ScratchDir,
}

impl Cluster {
    async fn start() -> Cluster {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let api = FakeApiServer::start().await;
        let dir = ScratchDir::new("cluster");
        api.write_kubeconfig(&dir.path("kubeconfig"));
        Cluster { api, dir }
    }

    async fn with_example() -> Cluster {
        let c = Cluster::start().await;
        c.api.apply(Resource::Xrds, xrd());
        c.api.apply(Resource::Crds, network_crd());
        c.api.apply(Resource::Crds, subnetwork_crd());
        c
    }

    fn kubeconfig(&self) -> PathBuf {
        self.dir.path("kubeconfig")
    }

    /// [`Cluster::webhook`], once ready.
    async fn serving(&self, extra: &[&str]) -> Server {
        let server = self.webhook(extra);
        wait_ready(&server).await;
        server
    }

    /// `serve --kubeconfig ...` with `extra` arguments.
    fn webhook(&self, extra: &[&str]) -> Server {
        let kubeconfig = self.kubeconfig();
        let mut args = vec!["--kubeconfig", kubeconfig.to_str().expect("utf-8 path")];
        args.extend_from_slice(extra);
        tokio::task::block_in_place(|| Server::start(&[], &args))
    }
}

fn with_mode(mut object: Value, mode: &str) -> Value {
    object["metadata"]["annotations"] =
        json!({"crossplane.io/composition-schema-aware-validation-mode": mode});
    object
}

/// What the example Composition needs a schema for: the field, its apiVersion and kind, and
/// what the finding calls it.
const NEEDS: [(&str, &str, &str); 3] = [
    (
        "spec.compositeTypeRef",
        "gcp.platformref.upbound.io/v1alpha1, Kind=XNetwork",
        "the composite resource",
    ),
    (
        "spec.resources[0].base",
        "compute.gcp.upbound.io/v1beta1, Kind=Network",
        "this resource",
    ),
    (
        "spec.resources[1].base",
        "compute.gcp.upbound.io/v1beta1, Kind=Subnetwork",
        "this resource",
    ),
];

/// With the schemas of `missing` (indices into [`NEEDS`], each with its reason) unavailable,
/// the mode decides: loose admits the example with exactly one warning each, strict denies
/// it (403) naming each field, apiVersion and kind, and the reason.
async fn assert_the_mode_decides(server: &Server, timeout: &str, missing: &[(usize, &str)]) {
    let subject = "Composition \"xnetworks.gcp.platformref.upbound.io\"";
    let skipped = |what: &str| format!("checks that need the schema of {what} were skipped");
    let (allowed, _, _, warnings) = verdict(&review(server, &composition(), timeout).await);
    assert!(allowed);
    let expected: Vec<String> = missing
        .iter()
        .map(|&(i, why)| {
            let (field, _, what) = NEEDS[i];
            format!("{subject}: {field}: Not found: {why}; {}", skipped(what))
        })
        .collect();
    assert_eq!(warnings, expected);
    let strict = with_mode(composition(), "strict");
    let (allowed, code, message, _) = verdict(&review(server, &strict, timeout).await);
    assert_eq!((allowed, code), (false, 403), "{message}");
    for &(i, why) in missing {
        let (field, gvk, what) = NEEDS[i];
        let cause = format!("{field}: Not found: \"{gvk}\": {why}; {}", skipped(what));
        assert!(message.contains(&cause), "{cause}\nnot in\n{message}");
    }
}

async fn entry(server: &Server, kind: &str) -> Value {
    let d = debug(server).await;
    d["entries"]
        .as_array()
        .and_then(|es| es.iter().find(|e| e["kind"] == kind).cloned())
        .unwrap_or_else(|| panic!("no entry for {kind}: {d:#}"))
}

async fn states(server: &Server) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    for label in State::METRIC_LABELS {
        let mut n = 0.0;
        for source in ["crd", "mrd", "xrd", "none"] {
            n += metric(
                server,
                &format!(
                    "composition_webhook_schema_cache_entries{{source=\"{source}\",state=\"{label}\"}}"
                ),
            )
            .await.unwrap_or(0.0);
        }
        if n > 0.0 {
            out.push((label.to_string(), n));
        }
    }
    out
}

fn counts(pairs: &[(&str, f64)]) -> Vec<(String, f64)> {
    pairs.iter().map(|(s, n)| (s.to_string(), *n)).collect()
}

async fn calls(server: &Server, verb: &str, resource: &str) -> f64 {
    metric(
        server,
        &format!(
            "composition_webhook_apiserver_calls_total{{verb=\"{verb}\",resource=\"{resource}\"}}"
        ),
    )
    .await
    .unwrap_or(0.0)
}

/// Waits until the entry of `kind` has `field` equal to `value` in `/debug/schemas`.
async fn wait_entry(server: &Server, kind: &str, field: &str, value: impl Into<Value>) {
    let value = value.into();
    eventually(
        &format!("{kind}'s {field} is {value}"),
        Duration::from_secs(10),
        || async { entry(server, kind).await[field] == value },
    )
    .await;
}

async fn ready(server: &Server) -> (u16, String) {
    server.ops_get("/readyz").await
}

async fn wait_ready(server: &Server) {
    eventually("/readyz is 200", Duration::from_secs(20), || async {
        ready(server).await.0 == 200
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn initial_sync_then_every_review_is_answered_from_the_cache() {
    let cluster = Cluster::with_example().await;
    let server = cluster.serving(&["--list-page-size", "1"]).await;
    // The first list is the API server's watch cache's, whole whatever the page size.
    let queries: Vec<String> = cluster
        .api
        .requests()
        .into_iter()
        .filter(|r| (r.verb, r.resource) == (Verb::List, Resource::Crds))
        .map(|r| r.query)
        .collect();
    assert_eq!(
        queries,
        ["&resourceVersion=0&resourceVersionMatch=NotOlderThan"]
    );
    let (_, detail) = ready(&server).await;
    assert_eq!(
        detail,
        format!(
            "ready: 2 CRDs, 0 MRDs, 0 MRAPs, 1 XRD and 0 Functions listed from {}\n",
            cluster.api.url() + "/"
        )
    );

    let (allowed, _, _, warnings) = verdict(&review(&server, &composition(), "10s").await);
    assert!(allowed);
    assert_eq!(warnings, Vec::<String>::new());
    assert_eq!(states(&server).await, counts(&[("acked", 3.0)]));
    let xr = entry(&server, XR_KIND).await;
    assert_eq!(xr["state"], "ACKED");
    assert_eq!(xr["fromXrd"], true);
    assert_eq!(xr["definition"], format!("XRD xnetworks.{XR_GROUP}"));
    let network = entry(&server, "Network").await;
    assert_eq!(network["state"], "ACKED");
    assert_eq!(network["cached"], true);
    assert_eq!(network["definition"], format!("CRD {NETWORK_CRD}"));
    assert_eq!(network["versions"], json!(["v1beta1"]));
    assert_eq!(
        calls(&server, "get", "customresourcedefinitions").await,
        2.0
    );
    assert_eq!(
        calls(&server, "get", "compositeresourcedefinitions").await,
        1.0
    );
    // Nothing but get, list and watch on CRDs and XRDs: the RBAC docs/cluster.md documents.
    let (_, text) = server.ops_get("/metrics").await;
    let other: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("composition_webhook_apiserver_calls_total{"))
        .filter(|l| {
            !["get", "list", "watch"]
                .iter()
                .any(|v| l.contains(&format!("verb=\"{v}\"")))
                || l.contains("resource=\"other\"")
        })
        .collect();
    assert_eq!(other, Vec::<&str>::new());

    // Cached: more reviews make no call to the API server.
    let gets = cluster.api.count(Verb::Get, Resource::Crds);
    for _ in 0..5 {
        let (allowed, ..) = verdict(&review(&server, &composition(), "10s").await);
        assert!(allowed);
    }
    let mut broken = composition();
    broken["spec"]["resources"][0]["patches"][0]["toFieldPath"] =
        json!("spec.forProvider.routingMod");
    let (allowed, code, message, _) = verdict(&review(&server, &broken, "10s").await);
    assert_eq!((allowed, code), (false, 422));
    assert!(
        message.contains(
            "spec.resources[0].patches[0].toFieldPath: Invalid value: \"spec.forProvider.routingMod\": field 'routingMod' is not valid according to the schema; did you mean \"routingMode\"?"
        ),
        "{message}"
    );
    assert_eq!(cluster.api.count(Verb::Get, Resource::Crds), gets);
    assert_eq!(
        calls(&server, "get", "customresourcedefinitions").await,
        2.0
    );
}

/// With 1,000 CRDs, pages of 50 read from etcd took 1.4 s on a real API server, the same list
/// from its watch cache 0.45 s: every first list is the watch cache's, so a second per etcd
/// page costs nothing at start.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_first_lists_come_from_the_watch_cache_without_page_costs() {
    let cluster = Cluster::with_example().await;
    cluster.api.apply(
        Resource::Functions,
        json!({
            "apiVersion": "pkg.crossplane.io/v1",
            "kind": "Function",
            "metadata": {"name": "function-auto-ready"},
            "spec": {"package": "xpkg.crossplane.io/crossplane-contrib/function-auto-ready:v0.5.0"}
        }),
    );
    // A minute a page: one page read from etcd would keep the server from ready.
    cluster.api.set_etcd_page_cost(PageCost {
        per_page: Duration::from_secs(60),
        per_object: Duration::ZERO,
    });
    let started = Instant::now();
    let server = cluster.serving(&["--list-page-size", "1"]).await;
    let took = started.elapsed();
    eprintln!("ready after {took:?}");
    assert!(took < Duration::from_secs(60), "{took:?}");
    for resource in [
        Resource::Crds,
        Resource::Mrds,
        Resource::Mraps,
        Resource::Xrds,
        Resource::Functions,
    ] {
        assert_eq!(
            cluster.api.list_sources(resource),
            [ListSource::WatchCache],
            "{resource:?}"
        );
    }
    let (_, detail) = ready(&server).await;
    assert_eq!(
        detail,
        format!(
            "ready: 2 CRDs, 0 MRDs, 0 MRAPs, 1 XRD and 1 Function listed from {}\n",
            cluster.api.url() + "/"
        )
    );
    let (allowed, ..) = verdict(&review(&server, &composition(), "10s").await);
    assert!(allowed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_changed_crd_changes_the_verdict_and_a_deleted_one_keeps_its_last_schema() {
    let cluster = Cluster::with_example().await;
    let server = cluster.serving(&[]).await;
    assert!(verdict(&review(&server, &composition(), "10s").await).0);
    let before = entry(&server, "Network").await["resourceVersion"].clone();

    let rv = cluster.api.apply(Resource::Crds, network_crd_global_only());
    wait_entry(&server, "Network", "resourceVersion", rv.as_str()).await;
    assert_ne!(before, json!(rv));
    let (allowed, code, message, _) = verdict(&review(&server, &composition(), "10s").await);
    assert_eq!((allowed, code), (false, 422));
    assert!(
        message.contains(
            "spec.resources[0].base.spec.forProvider.routingMode: Unsupported value: \"REGIONAL\": supported values: \"GLOBAL\""
        ),
        "{message}"
    );

    // Deleted: a data error; the last good schema is still used.
    assert!(cluster.api.delete(Resource::Crds, NETWORK_CRD));
    wait_entry(&server, "Network", "state", "DOES_NOT_EXIST").await;
    let network = entry(&server, "Network").await;
    assert_eq!(network["cached"], true);
    assert_eq!(
        network["lastError"]["message"],
        format!(
            "CRD {NETWORK_CRD} was deleted: no CRD, MRD or XRD defines Network.compute.gcp.upbound.io"
        )
    );
    assert_eq!(network["lastError"]["class"], "data");
    let (allowed, code, message, warnings) = verdict(&review(&server, &composition(), "10s").await);
    assert_eq!((allowed, code), (false, 422));
    assert!(
        message.contains("routingMode: Unsupported value"),
        "{message}"
    );
    assert_eq!(
        warnings,
        vec![format!(
            "Composition \"xnetworks.gcp.platformref.upbound.io\": spec.resources[0].base: Not found: CRD {NETWORK_CRD} was deleted: no CRD, MRD or XRD defines Network.compute.gcp.upbound.io; validated with the last schema received"
        )]
    );
    assert_eq!(
        states(&server).await,
        counts(&[("acked", 2.0), ("does_not_exist_but_cached", 1.0)])
    );

    // Back: fetched again.
    cluster.api.apply(Resource::Crds, network_crd());
    wait_entry(&server, "Network", "state", "ACKED").await;
    assert!(verdict(&review(&server, &composition(), "10s").await).0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_fail_on_data_errors_a_deleted_crd_is_dropped_and_the_mode_decides() {
    let cluster = Cluster::with_example().await;
    let server = cluster.serving(&["--fail-on-data-errors"]).await;
    assert!(verdict(&review(&server, &composition(), "10s").await).0);

    assert!(cluster.api.delete(Resource::Crds, NETWORK_CRD));
    wait_entry(&server, "Network", "state", "DOES_NOT_EXIST").await;
    assert_eq!(entry(&server, "Network").await["cached"], false);
    assert_eq!(
        states(&server).await,
        counts(&[("acked", 2.0), ("does_not_exist", 1.0)])
    );
    let why = "no CRD, MRD or XRD defines Network.compute.gcp.upbound.io";
    assert_the_mode_decides(&server, "10s", &[(1, why)]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_xrd_stands_in_for_its_xr_crd_until_crossplane_generates_it() {
    let cluster = Cluster::with_example().await;
    let server = cluster.serving(&[]).await;
    let mut wrong = composition();
    wrong["spec"]["resources"][0]["patches"][0]["fromFieldPath"] = json!("spec.idd");
    let (allowed, code, message, _) = verdict(&review(&server, &wrong, "10s").await);
    assert_eq!((allowed, code), (false, 422), "{message}");
    assert!(
        message.contains("spec.resources[0].patches[0].fromFieldPath: Invalid value: \"spec.idd\""),
        "{message}"
    );
    assert_eq!(entry(&server, XR_KIND).await["fromXrd"], true);

    // Crossplane generates the XR's CRD (here with an open schema): the CRD wins.
    let rv = cluster.api.apply(Resource::Crds, xr_crd());
    wait_entry(&server, XR_KIND, "resourceVersion", rv.as_str()).await;
    let xr = entry(&server, XR_KIND).await;
    assert_eq!(
        (xr["fromXrd"].clone(), xr["definition"].clone()),
        (json!(false), json!(format!("CRD xnetworks.{XR_GROUP}")))
    );
    let (allowed, ..) = verdict(&review(&server, &wrong, "10s").await);
    assert!(allowed, "an open XR schema accepts spec.idd");
    assert_eq!(states(&server).await, counts(&[("acked", 3.0)]));
    assert_eq!(
        calls(&server, "get", "compositeresourcedefinitions").await,
        1.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn api_server_down_at_start_then_up() {
    let cluster = Cluster::with_example().await;
    cluster.api.set_down(true);
    let server = cluster.webhook(&[]);
    let (code, detail) = ready(&server).await;
    assert_eq!(code, 503);
    assert!(
        detail.starts_with(
            "not ready: the webhook has not listed CRDs, MRDs and XRDs from the API server yet"
        ),
        "{detail}"
    );
    eventually(
        "the connection failure is recorded",
        Duration::from_secs(10),
        || async {
            ready(&server)
                .await
                .1
                .ends_with("yet: the API server is unreachable\n")
        },
    )
    .await;

    // Loose: admitted with a warning naming each kind and why; strict: denied.
    let why = "the webhook has not listed CRDs, MRDs and XRDs from the API server yet: the API server is unreachable";
    // Not waited for: with a 30 s timeout, waiting would take most of 27 s a review.
    let started = Instant::now();
    assert_the_mode_decides(&server, "30s", &[(0, why), (1, why), (2, why)]).await;
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "an unreachable API server is not waited for: {:?}",
        started.elapsed()
    );
    assert_eq!(entry(&server, "Network").await["state"], "TIMEOUT");
    assert_eq!(states(&server).await, counts(&[("timeout", 3.0)]));
    assert!(metric(&server, "composition_webhook_apiserver_call_errors_total{verb=\"list\",resource=\"customresourcedefinitions\",error=\"transport\"}").await.unwrap_or(0.0) >= 1.0);

    cluster.api.set_down(false);
    wait_ready(&server).await;
    eventually(
        "every entry is fetched",
        Duration::from_secs(10),
        || async { states(&server).await == counts(&[("acked", 3.0)]) },
    )
    .await;
    assert!(verdict(&review(&server, &composition(), "2s").await).0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn api_server_down_after_sync_keeps_validating_with_cached_schemas() {
    let cluster = Cluster::with_example().await;
    let server = cluster.serving(&[]).await;
    assert!(verdict(&review(&server, &composition(), "10s").await).0);

    cluster.api.set_down(true);
    eventually(
        "the broken watch is recorded",
        Duration::from_secs(10),
        || async { debug(&server).await["lists"][0]["lastError"]["class"] == "transient" },
    )
    .await;
    // Still ready, still validating: a mistake is still found.
    assert_eq!(ready(&server).await.0, 200);
    let mut broken = composition();
    broken["spec"]["resources"][1]["base"]["spec"]["forProvider"]["regoin"] = json!("us-west2");
    let (allowed, code, message, _) = verdict(&review(&server, &broken, "2s").await);
    assert_eq!((allowed, code), (false, 422));
    assert!(message.contains("spec.resources[1].base.spec.forProvider.regoin: Invalid value: \"regoin\": unknown field: \"regoin\", did you mean \"region\"?"), "{message}");
    assert_eq!(states(&server).await, counts(&[("acked", 3.0)]));
    let network = entry(&server, "Network").await;
    assert_eq!(
        (network["state"].clone(), network["cached"].clone()),
        (json!("ACKED"), json!(true))
    );
    assert_eq!(
        (
            network["lastError"]["message"].clone(),
            network["lastError"]["class"].clone()
        ),
        (json!("the API server is unreachable"), json!("transient")),
        "the outage is the cached entry's ambient error"
    );

    cluster.api.set_down(false);
    eventually("the watch resumes", Duration::from_secs(40), || async {
        debug(&server).await["lists"][0]["lastError"].is_null()
    })
    .await;
    assert_eq!(entry(&server, "Network").await["lastError"], Value::Null);
    assert_eq!(states(&server).await, counts(&[("acked", 3.0)]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn forbidden_list_is_received_error_and_the_mode_decides() {
    let cluster = Cluster::with_example().await;
    cluster.api.fail(Resource::Crds, Verb::List, Some(403));
    let server = cluster.webhook(&[]);
    eventually("the 403 is recorded", Duration::from_secs(10), || async {
        debug(&server).await["lists"][0]["lastError"]["class"] == "data"
    })
    .await;
    let (code, detail) = ready(&server).await;
    assert_eq!(code, 503);
    assert!(detail.contains("403 Forbidden"), "{detail}");

    let why =
        "the API server refused to list CRDs: 403 Forbidden (RBAC must allow get, list, watch)";
    let started = Instant::now();
    assert_the_mode_decides(&server, "30s", &[(0, why), (1, why), (2, why)]).await;
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "a refused list is not waited for: {:?}",
        started.elapsed()
    );
    let network = entry(&server, "Network").await;
    assert_eq!(network["state"], "RECEIVED_ERROR");
    assert_eq!(network["lastError"]["class"], "data");
    assert_eq!(
        network["lastError"]["detail"],
        "customresourcedefinitions.apiextensions.k8s.io is forbidden: User \"system:serviceaccount:crossplane-system:composition-webhook\" cannot list resource \"customresourcedefinitions\" in API group \"apiextensions.k8s.io\" at the cluster scope"
    );
    assert_eq!(states(&server).await, counts(&[("received_error", 3.0)]));
    assert!(metric(&server, "composition_webhook_apiserver_call_errors_total{verb=\"list\",resource=\"customresourcedefinitions\",error=\"http_403\"}").await.unwrap_or(0.0) >= 1.0);

    // RBAC fixed: the watcher's retry lists, and the entries are fetched.
    cluster.api.fail(Resource::Crds, Verb::List, None);
    wait_ready(&server).await;
    eventually(
        "every entry is fetched",
        Duration::from_secs(10),
        || async { states(&server).await == counts(&[("acked", 3.0)]) },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_slow_answer_past_the_timer_is_timeout_then_acked() {
    let cluster = Cluster::with_example().await;
    // Calls may take a minute: the 12 s answers below land.
    let server = cluster.serving(&["--api-timeout", "60s"]).await;
    cluster.api.delay(Verb::Get, Some(Duration::from_secs(12)));
    let started = Instant::now();
    let (allowed, _, _, warnings) = verdict(&review(&server, &composition(), "10s").await);
    let took = started.elapsed();
    // Without waiting for the answer (12 s): the wait ends at three quarters of the budget
    // (6.75 s), and the answer comes before the API server's timeout.
    assert!(
        took < Duration::from_secs(10),
        "answered before the API server's timeout: {took:?}"
    );
    assert!(allowed);
    assert!(
        warnings.iter().any(|w| w.contains(&format!(
            "the API server did not send CRD {NETWORK_CRD} within"
        ))),
        "{warnings:#?}"
    );
    assert_eq!(entry(&server, "Network").await["state"], "TIMEOUT");
    assert_eq!(states(&server).await, counts(&[("timeout", 3.0)]));

    // The answers land after the request gave up: the kinds are cached for the next one.
    eventually(
        "the slow answers are cached",
        Duration::from_secs(30),
        || async { states(&server).await == counts(&[("acked", 3.0)]) },
    )
    .await;
    // From the cache: a fetch (still 12 s slow) would end in a warning.
    let (allowed, _, _, warnings) = verdict(&review(&server, &composition(), "2s").await);
    assert!(allowed && warnings.is_empty(), "{warnings:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn watch_expiry_relists_and_catches_up() {
    let cluster = Cluster::with_example().await;
    let server = cluster.serving(&["--list-page-size", "1"]).await;
    assert!(verdict(&review(&server, &composition(), "10s").await).0);
    cluster
        .api
        .wait_for_watch(Resource::Crds, Duration::from_secs(10))
        .await;
    let lists = cluster.api.count(Verb::List, Resource::Crds);
    assert_eq!(lists, 1);
    cluster.api.bookmark();

    // The watch expires (410 Gone) and, while the watcher relists, the Network CRD changes.
    cluster.api.expire_watches();
    cluster.api.apply(Resource::Crds, network_crd_global_only());
    eventually("a relist", Duration::from_secs(10), || async {
        debug(&server).await["lists"][0]["lists"] == 2
    })
    .await;
    // The relist is a quorum read in pages (a watch cache may be behind what was seen).
    let sources = cluster.api.list_sources(Resource::Crds);
    assert_eq!(
        sources,
        [ListSource::WatchCache, ListSource::Etcd, ListSource::Etcd]
    );
    let relist: Vec<String> = cluster
        .api
        .requests()
        .into_iter()
        .filter(|r| (r.verb, r.resource) == (Verb::List, Resource::Crds))
        .map(|r| r.query)
        .skip(1)
        .collect();
    assert_eq!(relist[0], "&limit=1", "{relist:?}");
    assert!(relist[1].starts_with("&limit=1&continue="), "{relist:?}");
    assert!(calls(&server, "list", "customresourcedefinitions").await >= 2.0);
    assert!(calls(&server, "watch", "customresourcedefinitions").await >= 2.0);
    eventually(
        "the changed CRD is fetched",
        Duration::from_secs(10),
        || async {
            let (allowed, ..) = verdict(&review(&server, &composition(), "10s").await);
            !allowed
        },
    )
    .await;
    assert_eq!(states(&server).await, counts(&[("acked", 3.0)]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_unusable_schema_is_nacked_and_the_last_good_one_stays_in_use() {
    let cluster = Cluster::with_example().await;
    let server = cluster.serving(&[]).await;
    assert!(verdict(&review(&server, &composition(), "10s").await).0);
    let good = entry(&server, "Network").await["resourceVersion"].clone();

    cluster.api.apply(Resource::Crds, network_crd_unusable());
    wait_entry(&server, "Network", "state", "NACKED").await;
    let network = entry(&server, "Network").await;
    assert_eq!(network["metricState"], "nacked_but_cached");
    assert_eq!(network["resourceVersion"], good);
    assert_eq!(
        network["lastError"]["message"],
        format!(
            "CRD {NETWORK_CRD} cannot be used: the schema of version v1beta1: spec.versions[0].schema.openAPIV3Schema.properties.spec.properties: expected an object"
        )
    );
    // Still validated with the last good schema: the mistake is still found.
    let mut broken = composition();
    broken["spec"]["resources"][0]["base"]["spec"]["forProvider"]["routingMod"] = json!("GLOBAL");
    let (allowed, code, message, warnings) = verdict(&review(&server, &broken, "10s").await);
    assert_eq!((allowed, code), (false, 422), "{message}");
    assert!(
        message.contains("spec.resources[0].base.spec.forProvider.routingMod: Invalid value: \"routingMod\": unknown field: \"routingMod\", did you mean \"routingMode\"?"),
        "{message}"
    );
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert!(
        warnings[0].ends_with("expected an object; validated with the last schema received"),
        "{warnings:#?}"
    );
    // In strict mode too, the last good schema serves: a warning, not a denial for it.
    let (allowed, _, _, warnings) =
        verdict(&review(&server, &with_mode(composition(), "strict"), "10s").await);
    assert!(allowed, "{warnings:#?}");
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert_eq!(
        states(&server).await,
        counts(&[("acked", 2.0), ("nacked_but_cached", 1.0)])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_forbidden_get_is_received_error_for_that_kind_only() {
    let cluster = Cluster::with_example().await;
    cluster.api.fail(Resource::Crds, Verb::Get, Some(403));
    let server = cluster.serving(&[]).await;
    let (allowed, _, _, warnings) = verdict(&review(&server, &composition(), "10s").await);
    assert!(allowed);
    let subject = "Composition \"xnetworks.gcp.platformref.upbound.io\"";
    assert_eq!(
        warnings,
        vec![
            format!(
                "{subject}: spec.resources[0].base: Not found: the API server answered 403 Forbidden to getting CRD {NETWORK_CRD}; checks that need the schema of this resource were skipped"
            ),
            format!(
                "{subject}: spec.resources[1].base: Not found: the API server answered 403 Forbidden to getting CRD subnetworks.compute.gcp.upbound.io; checks that need the schema of this resource were skipped"
            ),
        ]
    );
    assert_eq!(
        states(&server).await,
        counts(&[("acked", 1.0), ("received_error", 2.0)])
    );
    let network = entry(&server, "Network").await;
    assert_eq!(
        (network["state"].clone(), network["cached"].clone()),
        (json!("RECEIVED_ERROR"), json!(false))
    );
    assert_eq!(network["lastError"]["class"], "data");
    assert_eq!(
        network["lastError"]["detail"],
        format!(
            "customresourcedefinitions.apiextensions.k8s.io \"{NETWORK_CRD}\" is forbidden: User \"system:serviceaccount:crossplane-system:composition-webhook\" cannot get resource \"customresourcedefinitions\" in API group \"apiextensions.k8s.io\" at the cluster scope"
        )
    );
    assert_eq!(
        calls_failed(&server, "get", "customresourcedefinitions", "http_403").await,
        2.0
    );
    // Allowed again: the retry (after 1 s) fetches them.
    cluster.api.fail(Resource::Crds, Verb::Get, None);
    eventually(
        "the retry fetches them",
        Duration::from_secs(10),
        || async { states(&server).await == counts(&[("acked", 3.0)]) },
    )
    .await;
}

async fn calls_failed(server: &Server, verb: &str, resource: &str, error: &str) -> f64 {
    metric(
        server,
        &format!(
            "composition_webhook_apiserver_call_errors_total{{verb=\"{verb}\",resource=\"{resource}\",error=\"{error}\"}}"
        ),
    )
    .await.unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_crd_added_after_a_review_needed_it_is_fetched_at_once() {
    let cluster = Cluster::start().await;
    cluster.api.apply(Resource::Xrds, xrd());
    cluster.api.apply(Resource::Crds, subnetwork_crd());
    let server = cluster.serving(&[]).await;
    let (allowed, _, _, warnings) = verdict(&review(&server, &composition(), "10s").await);
    assert!(allowed);
    assert_eq!(
        warnings,
        vec!["Composition \"xnetworks.gcp.platformref.upbound.io\": spec.resources[0].base: Not found: no CRD, MRD or XRD defines Network.compute.gcp.upbound.io; checks that need the schema of this resource were skipped".to_string()]
    );
    assert_eq!(
        states(&server).await,
        counts(&[("acked", 2.0), ("does_not_exist", 1.0)])
    );

    // The provider is installed: the kind a Composition needed is fetched as it appears.
    cluster.api.apply(Resource::Crds, network_crd_global_only());
    wait_entry(&server, "Network", "state", "ACKED").await;
    let gets = calls(&server, "get", "customresourcedefinitions").await;
    let (allowed, code, message, _) = verdict(&review(&server, &composition(), "10s").await);
    assert_eq!((allowed, code), (false, 422));
    assert!(
        message.contains(
            "spec.resources[0].base.spec.forProvider.routingMode: Unsupported value: \"REGIONAL\""
        ),
        "{message}"
    );
    assert_eq!(
        calls(&server, "get", "customresourcedefinitions").await,
        gets
    );
    assert_eq!(states(&server).await, counts(&[("acked", 3.0)]));
}

// ---------------------------------------------------------------------------------------
// Built-in kinds from the API server's OpenAPI v3

const APP_SUBJECT: &str = "Composition \"app-yaml\"";
const DEPLOYMENT: &str = "spec.pipeline[0].input.resources[0].base";

/// The v2 getting-started App's XRD, as the API server lists it (`apiextensions.crossplane.io/v1`).
fn app_xrd() -> Value {
    let mut xrd = one("testdata/v2/app/definition.yaml");
    xrd["apiVersion"] = json!("apiextensions.crossplane.io/v1");
    xrd
}

/// The App Composition (strict): a Deployment and a Service through function-patch-and-transform.
fn app() -> Value {
    one("testdata/v2/app/composition.yaml")
}

/// The App with `edit` applied to its Deployment's base.
fn app_with(edit: impl FnOnce(&mut Value)) -> Value {
    let mut c = app();
    edit(&mut c["spec"]["pipeline"][0]["input"]["resources"][0]["base"]);
    c
}

/// The fake API server with the App's XRD, its Function and v1.28.4's OpenAPI v3 documents;
/// `None` when ../shared is absent outside CI.
async fn app_cluster() -> Option<Cluster> {
    let dir = common::shared_subdir("kube-openapi/v1.28.4")?;
    let c = Cluster::start().await;
    c.api.serve_openapi(&dir);
    c.api.apply(Resource::Xrds, app_xrd());
    // The Function its pipeline step names (a missing one would be reported).
    c.api.apply(
        Resource::Functions,
        json!({"apiVersion": "pkg.crossplane.io/v1", "kind": "Function",
               "metadata": {"name": "function-patch-and-transform"},
               "spec": {"package": "xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform:v0.10.8"}}),
    );
    Some(c)
}

async fn openapi_document(server: &Server, path: &str) -> Value {
    let d = debug(server).await;
    d["openapi"]["documents"]
        .as_array()
        .and_then(|ds| ds.iter().find(|x| x["path"] == path).cloned())
        .unwrap_or_else(|| panic!("no OpenAPI document {path}: {d:#}"))
}

/// The errors (denial causes) and warnings of a review, for exact comparison.
async fn findings(server: &Server, c: &Value) -> (bool, String, Vec<String>) {
    let (allowed, _, message, warnings) = verdict(&review(server, c, "10s").await);
    (allowed, message, warnings)
}

/// In the cluster, the App's Deployment and Service are validated against the API server's
/// own OpenAPI v3: allowed in strict mode; a typo is denied with its "did you mean"; a field
/// far from every known one is an error too (the serving API server's schema is exact),
/// where offline, against the embedded v1.28.4 schemas, it is a warning; a quantity the API
/// server cannot decode is denied with apimachinery's words. Only the two documents needed are
/// fetched, once each; a document changed after the index was read is fetched through the
/// API server's redirect to its new hash.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn built_in_kinds_are_validated_from_the_api_servers_openapi() {
    let Some(cluster) = app_cluster().await else {
        return;
    };
    let server = cluster.serving(&[]).await;
    let (allowed, message, warnings) = findings(&server, &app()).await;
    assert!(allowed, "{message}");
    assert_eq!(warnings, Vec::<String>::new());
    let requested: Vec<String> = cluster
        .api
        .openapi_requests()
        .into_iter()
        .map(|(p, _)| p.split('?').next().unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        requested,
        [
            "/openapi/v3",
            "/openapi/v3/apis/apps/v1",
            "/openapi/v3/api/v1"
        ]
    );
    for path in ["apis/apps/v1", "api/v1"] {
        let doc = openapi_document(&server, path).await;
        assert_eq!(doc["state"], "ACKED", "{doc:#}");
        assert_eq!(doc["hash"], json!(cluster.api.openapi_hash(path)));
        assert_eq!(doc["kindsConverted"], 1, "{doc:#}");
    }
    assert_eq!(calls(&server, "get", "openapi").await, 3.0);
    assert_eq!(
        metric(
            &server,
            "composition_webhook_schema_cache_entries{source=\"openapi\",state=\"acked\"}"
        )
        .await
        .unwrap_or(0.0),
        2.0
    );
    assert_eq!(
        metric(
            &server,
            "composition_webhook_schema_source_objects{source=\"openapi\",state=\"listed\"}"
        )
        .await
        .unwrap_or(0.0),
        2.0
    );
    // The kinds no CRD defines: looked up in the definitions first.
    assert_eq!(
        entry(&server, "Deployment").await["state"],
        "DOES_NOT_EXIST"
    );

    let typo = app_with(|base| {
        let spec = base["spec"].as_object_mut().expect("spec");
        let replicas = spec.shift_remove("replicas").expect("replicas");
        spec.insert("replica".into(), replicas);
    });
    let (allowed, message, _) = findings(&server, &typo).await;
    assert!(!allowed);
    let cause = format!(
        "{DEPLOYMENT}.spec.replica: Invalid value: \"replica\": unknown field: \"replica\", did you mean \"replicas\"?"
    );
    assert!(message.contains(&cause), "{cause}\nnot in\n{message}");

    let far = app_with(|base| base["spec"]["fooBarBaz"] = json!(1));
    let (allowed, message, warnings) = findings(&server, &far).await;
    assert!(!allowed);
    let cause = format!(
        "{DEPLOYMENT}.spec.fooBarBaz: Invalid value: \"fooBarBaz\": unknown field: \"fooBarBaz\""
    );
    assert!(message.contains(&cause), "{cause}\nnot in\n{message}");
    assert!(!message.contains("later Kubernetes"), "{message}");
    assert_eq!(warnings, Vec::<String>::new());
    // Offline, against the embedded v1.28.4 schemas: a warning (a later version may know it).
    let mut catalog = composition_webhook::schema::Catalog::new();
    catalog.add_document(&app_xrd(), "xrd").expect("XRD");
    let offline = composition_webhook::validate::Validator::new(
        &catalog,
        composition_webhook::validate::Options::default(),
    )
    .validate_value(&far);
    let offline: Vec<String> = offline
        .findings
        .iter()
        .map(|f| format!("{}: {}", f.severity.name(), f.message()))
        .collect();
    assert_eq!(
        offline,
        [format!(
            "warning: {cause} (unknown to Kubernetes v1.28.4's OpenAPI, embedded; an API server of a later Kubernetes version may know it)"
        )]
    );

    // Quantities as the API server decodes them.
    let cpu = |value: Value| {
        app_with(|base| {
            base["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] =
                json!({"cpu": value, "memory": "1Gi"});
        })
    };
    for good in [json!("500m"), json!("2"), json!(2), json!(0.5)] {
        let (allowed, message, warnings) = findings(&server, &cpu(good.clone())).await;
        assert!(
            allowed && warnings.is_empty(),
            "{good}: {message} {warnings:?}"
        );
    }
    let (allowed, message, _) = findings(&server, &cpu(json!("lots"))).await;
    assert!(!allowed);
    let cause = format!(
        "{DEPLOYMENT}.spec.template.spec.containers[0].resources.limits[cpu]: Invalid value: \"lots\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    );
    assert!(message.contains(&cause), "{cause}\nnot in\n{message}");
    // Every review since the first was answered from the cache.
    assert_eq!(cluster.api.openapi_requests().len(), 3);

    // batch/v1 changes after the index was read: its old URL is redirected to the new hash.
    let old_hash = cluster.api.openapi_hash("apis/batch/v1").expect("batch/v1");
    let mut batch = cluster
        .api
        .openapi_document("apis/batch/v1")
        .expect("batch/v1");
    batch["info"]["title"] = json!("Kubernetes, changed");
    cluster.api.put_openapi_document("apis/batch/v1", &batch);
    let new_hash = cluster.api.openapi_hash("apis/batch/v1").expect("batch/v1");
    let job = app_with(|base| {
        *base = json!({"apiVersion": "batch/v1", "kind": "Job", "spec": {
            "backoffLimit": 2, "completion": 1,
            "template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "job", "image": "busybox"}]}}}});
    });
    let (allowed, message, _) = findings(&server, &job).await;
    assert!(!allowed);
    let cause = format!(
        "{DEPLOYMENT}.spec.completion: Invalid value: \"completion\": unknown field: \"completion\", did you mean \"completions\"?"
    );
    assert!(message.contains(&cause), "{cause}\nnot in\n{message}");
    let batch_requests: Vec<(String, u16)> = cluster
        .api
        .openapi_requests()
        .into_iter()
        .filter(|(p, _)| p.starts_with("/openapi/v3/apis/batch/v1"))
        .collect();
    assert_eq!(
        batch_requests,
        [
            (format!("/openapi/v3/apis/batch/v1?hash={old_hash}"), 301),
            (format!("/openapi/v3/apis/batch/v1?hash={new_hash}"), 200),
        ]
    );
    assert_eq!(
        openapi_document(&server, "apis/batch/v1").await["hash"],
        json!(new_hash)
    );
}

/// The API server's OpenAPI changes (an upgrade that adds a field to DeploymentSpec): the
/// webhook reads the index again every `--openapi-refresh`, and the verdict follows the new
/// document. While the index cannot be read (500), the document it has keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_changed_openapi_document_changes_the_verdict_after_the_refresh() {
    let Some(cluster) = app_cluster().await else {
        return;
    };
    let server = cluster.serving(&["--openapi-refresh", "1s"]).await;
    let far = app_with(|base| base["spec"]["fooBarBaz"] = json!("x"));
    let (allowed, message, _) = findings(&server, &far).await;
    assert!(!allowed, "{message}");
    assert!(
        message.contains("unknown field: \"fooBarBaz\""),
        "{message}"
    );
    let old_hash = cluster.api.openapi_hash("apis/apps/v1").expect("apps/v1");

    // The refresh fails: the document received keeps serving.
    cluster.api.fail_openapi(Some(500));
    let mut apps = cluster
        .api
        .openapi_document("apis/apps/v1")
        .expect("apps/v1");
    apps["components"]["schemas"]["io.k8s.api.apps.v1.DeploymentSpec"]["properties"]["fooBarBaz"] =
        json!({"type": "string"});
    cluster.api.put_openapi_document("apis/apps/v1", &apps);
    eventually("a refresh fails", Duration::from_secs(10), || async {
        !debug(&server).await["openapi"]["index"]["lastError"].is_null()
    })
    .await;
    let index = debug(&server).await["openapi"]["index"].clone();
    assert_eq!(
        index["lastError"]["message"],
        "the API server answered 500 InternalError to getting its OpenAPI v3 index (/openapi/v3)"
    );
    assert_eq!(index["lastError"]["class"], "transient");
    let (allowed, _, warnings) = findings(&server, &far).await;
    assert!(!allowed);
    assert_eq!(warnings, Vec::<String>::new());
    let doc = openapi_document(&server, "apis/apps/v1").await;
    assert_eq!(
        (doc["state"].clone(), doc["hash"].clone()),
        (json!("ACKED"), json!(old_hash))
    );

    // Back: the next refresh sees the new hash; the new document decides.
    cluster.api.fail_openapi(None);
    let new_hash = cluster.api.openapi_hash("apis/apps/v1").expect("apps/v1");
    eventually(
        "the new document is fetched",
        Duration::from_secs(10),
        || async { openapi_document(&server, "apis/apps/v1").await["hash"] == json!(new_hash) },
    )
    .await;
    let (allowed, message, warnings) = findings(&server, &far).await;
    assert!(allowed, "{message}");
    assert_eq!(warnings, Vec::<String>::new());
    assert!(debug(&server).await["openapi"]["index"]["lastError"].is_null());
    let fetched = cluster
        .api
        .openapi_requests()
        .iter()
        .filter(|(p, s)| p.starts_with("/openapi/v3/apis/apps/v1") && *s == 200)
        .count();
    assert_eq!(fetched, 2, "{:#?}", cluster.api.openapi_requests());
}

/// RBAC refuses `/openapi/v3` (403): built-in kinds are validated against the embedded
/// v1.28.4 schemas instead, leniently, and the warning says why; a typo is still denied.
/// Allowed again, the next review after the backoff reads the API server's own.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refused_openapi_falls_back_to_the_embedded_schemas() {
    let Some(cluster) = app_cluster().await else {
        return;
    };
    cluster.api.fail_openapi(Some(403));
    let server = cluster.serving(&[]).await;
    let far = app_with(|base| base["spec"]["fooBarBaz"] = json!(1));
    let (allowed, message, warnings) = findings(&server, &far).await;
    assert!(allowed, "{message}");
    // Cut to the 256 characters of a warning (its start and end kept).
    assert_eq!(
        warnings,
        [format!(
            "{APP_SUBJECT}: {DEPLOYMENT}.spec.fooBarBaz: Invalid value: unknown field: \"fooBarBaz\" (unknown to Kubernetes v1.28.4's OpenAPI, embed…not be read: 403 Forbidden); an API server of a later Kubernetes version may know it)"
        )]
    );
    let typo = app_with(|base| base["spec"]["replica"] = json!(1));
    let (allowed, message, _) = findings(&server, &typo).await;
    assert!(!allowed);
    assert!(message.contains("did you mean \"replicas\""), "{message}");
    let index = debug(&server).await["openapi"]["index"].clone();
    assert_eq!(
        index["lastError"]["message"],
        "the API server answered 403 Forbidden to getting its OpenAPI v3 index (/openapi/v3)"
    );
    assert_eq!(index["lastError"]["class"], "data");
    assert_eq!(
        index["lastError"]["detail"],
        "forbidden: User \"system:serviceaccount:crossplane-system:composition-webhook\" cannot get path \"/openapi/v3\""
    );
    let doc = openapi_document(&server, "apis/apps/v1").await;
    assert_eq!(doc["state"], "RECEIVED_ERROR");
    assert_eq!(doc["cached"], false);
    assert_eq!(
        cluster.api.openapi_requests().first(),
        Some(&("/openapi/v3".to_string(), 403))
    );
    eventually("the refusal is counted", Duration::from_secs(5), || async {
        calls_failed(&server, "get", "openapi", "http_403").await >= 1.0
    })
    .await;

    cluster.api.fail_openapi(None);
    eventually(
        "the API server's OpenAPI is read",
        Duration::from_secs(10),
        || async { !findings(&server, &far).await.0 },
    )
    .await;
    assert_eq!(
        openapi_document(&server, "apis/apps/v1").await["state"],
        "ACKED"
    );
}

/// `serve` without `--crds` where no cluster can be found, or with a kubeconfig that cannot
/// be used: exit 2 with the reason, before listening.
#[test]
fn serve_without_a_usable_cluster_says_why_and_exits_2() {
    let home = ScratchDir::new("no-cluster-home");
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_composition-webhook"))
            .args([
                "serve",
                "--self-signed",
                "--address",
                "127.0.0.1:0",
                "--operations-address",
                "127.0.0.1:0",
            ])
            .args(args)
            .env_remove("KUBECONFIG")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env_remove("KUBERNETES_SERVICE_PORT")
            .env("HOME", &home.0)
            .output()
            .expect("run serve");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (code, stderr) = run(&[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("cannot connect to the cluster") && stderr.contains("cannot find a cluster: no --kubeconfig, no KUBECONFIG or ~/.kube/config, and not in a pod"),
        "{stderr}"
    );
    let missing = home.path("missing-kubeconfig");
    let (code, stderr) = run(&["--kubeconfig", missing.to_str().expect("path")]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("cannot use kubeconfig {}", missing.display())),
        "{stderr}"
    );
    let (code, stderr) = run(&["--kubeconfig", "x", "--crds", "testdata/crds"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("cannot be used with"), "{stderr}");
}

const WEBHOOK_CONFIGURATION: &str = "composition-webhook";

/// The webhook configuration as deploy/ installs it: no caBundle yet, and a field this
/// webhook does not know, which patches must keep.
fn webhook_configuration() -> Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": WEBHOOK_CONFIGURATION},
        "webhooks": [{
            "name": "compositions.composition-webhook.crossplane.io",
            "admissionReviewVersions": ["v1", "v1beta1"],
            "sideEffects": "None",
            "clientConfig": {"service": {"name": "composition-webhook", "namespace": "composition-webhook", "path": "/validate", "port": 443}},
            "rules": [{"apiGroups": ["apiextensions.crossplane.io"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["compositions"], "scope": "Cluster"}],
            "aFieldFromANewerKubernetes": {"kept": true},
        }],
    })
}

/// The CAs (PEM) in the bundle of every webhook of the configuration; the bundles must agree.
fn published_cas(cluster: &Cluster) -> Vec<String> {
    use base64::Engine as _;
    let config = cluster
        .api
        .webhook_configuration(WEBHOOK_CONFIGURATION)
        .expect("the webhook configuration");
    let webhooks = config["webhooks"].as_array().expect("webhooks");
    let bundles: Vec<Vec<String>> = webhooks
        .iter()
        .map(|w| {
            let b64 = w["clientConfig"]["caBundle"].as_str().unwrap_or_default();
            let pem = base64::engine::general_purpose::STANDARD
                .decode(b64)
                .expect("base64 caBundle");
            String::from_utf8(pem)
                .expect("PEM")
                .split_inclusive("-----END CERTIFICATE-----\n")
                .map(str::to_owned)
                .collect()
        })
        .collect();
    assert!(bundles.windows(2).all(|w| w[0] == w[1]), "{bundles:?}");
    bundles.into_iter().next().unwrap_or_default()
}

/// Waits until `/readyz` is 503 with `why`.
async fn wait_not_ready(server: &Server, why: &str) {
    eventually(
        &format!("/readyz says {why}"),
        Duration::from_secs(10),
        || async { server.ops_get("/readyz").await == (503, why.to_owned()) },
    )
    .await;
}

impl Cluster {
    /// A replica in pod `pod`: `--self-signed --webhook-configuration`, HOSTNAME set as in a pod.
    fn replica(&self, pod: &str) -> Server {
        let mut cmd = webhook::serve_command(&[]);
        cmd.env("HOSTNAME", pod);
        let kubeconfig = self.kubeconfig();
        tokio::task::block_in_place(|| {
            Server::start_self_signed(
                cmd,
                &[
                    "--kubeconfig",
                    kubeconfig.to_str().expect("utf-8 path"),
                    "--webhook-configuration",
                    WEBHOOK_CONFIGURATION,
                ],
            )
        })
    }
}

/// `--self-signed --webhook-configuration`: each replica puts its own CA in the caBundle of
/// every webhook of the configuration, keeps the others' (and fields it does not know), and
/// replaces its own earlier run's; `/readyz` waits for it and says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn self_signed_replicas_publish_their_cas_in_the_webhook_configuration() {
    let cluster = Cluster::with_example().await;
    let a = cluster.replica("pod-a");
    let why = "not ready: this server's CA is not in the caBundle yet: ValidatingWebhookConfiguration composition-webhook does not exist\n";
    wait_not_ready(&a, why).await;

    let mut config = webhook_configuration();
    let mut second = config["webhooks"][0].clone();
    second["name"] = json!("second.composition-webhook.crossplane.io");
    config["webhooks"]
        .as_array_mut()
        .expect("webhooks")
        .push(second);
    cluster.api.put_webhook_configuration(config);
    wait_ready(&a).await;
    let a_ca = String::from_utf8(a.ca_pem.clone()).expect("PEM");
    assert_eq!(published_cas(&cluster), std::slice::from_ref(&a_ca));
    let stored = cluster
        .api
        .webhook_configuration(WEBHOOK_CONFIGURATION)
        .expect("stored");
    assert_eq!(
        stored["webhooks"][0]["aFieldFromANewerKubernetes"],
        json!({"kept": true})
    );
    assert_eq!(
        stored["webhooks"][1]["name"],
        "second.composition-webhook.crossplane.io"
    );
    let (_, detail) = ready(&a).await;
    assert!(detail.starts_with("ready: "), "{detail}");

    // A second replica, whose first two patches lose a race: its CA joins the first's.
    cluster.api.conflict_webhook_configuration_patches(2);
    let b = cluster.replica("pod-b");
    wait_ready(&b).await;
    let b_ca = String::from_utf8(b.ca_pem.clone()).expect("PEM");
    assert_eq!(published_cas(&cluster), [a_ca.clone(), b_ca.clone()]);
    let patches = |status: u16| {
        cluster
            .api
            .webhook_configuration_calls()
            .iter()
            .filter(|(m, _, s)| *m == hyper::Method::PATCH && *s == status)
            .count()
    };
    assert_eq!((patches(200), patches(409)), (2, 2));
    assert_eq!(
        calls(&b, "patch", "validatingwebhookconfigurations").await,
        3.0
    );

    // pod-a's container restarts: its new CA replaces its old one.
    drop(a);
    let a2 = cluster.replica("pod-a");
    wait_ready(&a2).await;
    let a2_ca = String::from_utf8(a2.ca_pem.clone()).expect("PEM");
    assert_ne!(a2_ca, a_ca);
    assert_eq!(published_cas(&cluster), [b_ca, a2_ca]);
}

/// Without RBAC on its webhook configuration, `/readyz` says what to grant; once granted,
/// the replica becomes ready by itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_rbac_on_the_webhook_configuration_readyz_says_what_to_grant() {
    let cluster = Cluster::with_example().await;
    cluster
        .api
        .put_webhook_configuration(webhook_configuration());
    cluster
        .api
        .fail_webhook_configurations(hyper::Method::PATCH, Some(403));
    let a = cluster.replica("pod-a");
    let why = "not ready: this server's CA is not in the caBundle yet: the API server refused to patch ValidatingWebhookConfiguration composition-webhook: 403 Forbidden (RBAC must allow get and patch on validatingwebhookconfigurations named composition-webhook)\n";
    wait_not_ready(&a, why).await;
    assert!(published_cas(&cluster).is_empty());
    cluster
        .api
        .fail_webhook_configurations(hyper::Method::PATCH, None);
    wait_ready(&a).await;
    assert_eq!(published_cas(&cluster).len(), 1);
    assert!(calls_failed(&a, "patch", "validatingwebhookconfigurations", "http_403").await >= 1.0);
}

/// Crossplane v2 through the cluster: XRDs are listed as `apiextensions.crossplane.io/v1`,
/// where a v2 XRD keeps its `scope`; `serve` denies a namespaced XR composing the cluster
/// scoped S3 Bucket with the words `validate` gives, and warns of its deprecated version as
/// the CRD the API server serves words it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_namespaced_xr_composing_a_cluster_scoped_kind_is_denied_as_validate_reports() {
    let cluster = Cluster::start().await;
    let mut xrd = one("testdata/v2/namespaced-xr-no-cluster-scoped-resource.definition.yaml");
    xrd["apiVersion"] = json!("apiextensions.crossplane.io/v1");
    let buckets = one("testdata/v2/crds/s3.aws.upbound.io_buckets.yaml");
    let m_buckets = one("testdata/v2/crds/s3.aws.m.upbound.io_buckets.yaml");
    cluster.api.apply(Resource::Xrds, xrd.clone());
    cluster.api.apply(Resource::Crds, buckets.clone());
    cluster.api.apply(Resource::Crds, m_buckets.clone());
    let server = cluster.serving(&[]).await;
    let mut c = one("testdata/v2/bucket-composition.yaml");
    c["spec"]["compositeTypeRef"] =
        json!({"apiVersion": "validation.example.org/v1alpha1", "kind": "NamespacedTest"});
    let base = &mut c["spec"]["pipeline"][0]["input"]["resources"][0]["base"];
    base["apiVersion"] = json!("s3.aws.upbound.io/v1beta1");
    if let Some(m) = base.as_object_mut() {
        m.remove("metadata");
    }
    if let Some(r) = c["spec"]["pipeline"][0]["input"]["resources"][0].as_object_mut() {
        r.remove("patches");
    }
    let expected = r#"spec.pipeline[0].input.resources[0].base.apiVersion: Invalid value: "s3.aws.upbound.io/v1beta1": Bucket is cluster scoped and a namespaced composite resource composes only namespaced resources: Crossplane fails with "cannot apply cluster scoped composed resource "bucket" (a Bucket named ) for a namespaced composite resource."; Bucket of s3.aws.m.upbound.io/v1beta1 is namespaced: use apiVersion s3.aws.m.upbound.io/v1beta1"#;

    let mut catalog = composition_webhook::schema::Catalog::new();
    for (doc, name) in [(&xrd, "xrd"), (&buckets, "buckets"), (&m_buckets, "m")] {
        catalog.add_document(doc, name).expect(name);
    }
    let report = composition_webhook::validate::Validator::new(
        &catalog,
        composition_webhook::validate::Options::default(),
    )
    .validate_value(&c);
    let offline: Vec<String> = report
        .findings
        .iter()
        .map(|f| f.error.to_string())
        .collect();
    // provider-upjet-aws v2.6.0 deprecates the cluster scoped Bucket's v1beta1 with a text of
    // its own, which does not name the version: the warning keeps the value.
    let deprecated = r#"spec.pipeline[0].input.resources[0].base.apiVersion: Invalid value: "s3.aws.upbound.io/v1beta1": This API version is deprecated. Deprecated since v2.6.0."#;
    assert_eq!(offline, [deprecated, expected]);

    let (allowed, code, message, warnings) = verdict(&review(&server, &c, "10s").await);
    assert_eq!((allowed, code), (false, 422), "{message}");
    assert!(message.contains(expected), "{message}");
    // Beside it, the Function the fake API server does not have.
    let deprecation = format!(r#"Composition "basic-composition-namespaced": {deprecated}"#);
    assert!(warnings.contains(&deprecation), "{warnings:?}");
}

/// The ManagedResourceDefinition Crossplane v2 makes of the Network CRD when it installs the
/// provider (the CRD's spec with `spec.state`).
fn network_mrd(state: &str) -> Value {
    let crd = network_crd();
    json!({
        "apiVersion": "apiextensions.crossplane.io/v1alpha1",
        "kind": "ManagedResourceDefinition",
        "metadata": {"name": NETWORK_CRD},
        "spec": {
            "group": crd["spec"]["group"], "names": crd["spec"]["names"],
            "scope": crd["spec"]["scope"], "versions": crd["spec"]["versions"],
            "state": state,
        },
    })
}

/// Crossplane v2 with a provider whose Network kind is only an Inactive MRD: the API server
/// refuses Networks, so strict denies (403) and loose warns, naming the MRD and what activates
/// it; the base is validated against the MRD's schema all the same. Activated while the webhook
/// runs: a warning until Crossplane's CRD is there, then nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_inactive_mrd_is_named_and_its_activation_is_followed() {
    let cluster = Cluster::start().await;
    cluster.api.apply(Resource::Xrds, xrd());
    cluster.api.apply(Resource::Crds, subnetwork_crd());
    cluster.api.apply(Resource::Mrds, network_mrd("Inactive"));
    let server = cluster.serving(&[]).await;
    let (_, detail) = ready(&server).await;
    assert_eq!(
        detail,
        format!(
            "ready: 1 CRD, 1 MRD, 0 MRAPs, 1 XRD and 0 Functions listed from {}\n",
            cluster.api.url() + "/"
        )
    );

    let why = "MRD networks.compute.gcp.upbound.io is Inactive: Network has no CRD until a ManagedResourceActivationPolicy activates it (spec.activate: its name or \"*.gcp.upbound.io\")";
    let (allowed, _, _, warnings) = verdict(&review(&server, &composition(), "10s").await);
    assert!(allowed);
    assert_eq!(
        warnings,
        [format!(
            "Composition \"xnetworks.gcp.platformref.upbound.io\": spec.resources[0].base: Not found: {why}"
        )]
    );
    let (allowed, code, message, _) =
        verdict(&review(&server, &with_mode(composition(), "strict"), "10s").await);
    assert_eq!((allowed, code), (false, 403), "{message}");
    assert_eq!(
        message,
        format!(
            "cannot get the needed CRDs: [spec.resources[0].base: Not found: \"compute.gcp.upbound.io/v1beta1, Kind=Network\": {why}]"
        )
    );
    // Validated against the MRD's schema.
    let mut wrong = composition();
    wrong["spec"]["resources"][0]["base"]["spec"]["forProvider"]["routingMode"] = json!(7);
    let (allowed, code, message, _) = verdict(&review(&server, &wrong, "10s").await);
    assert_eq!((allowed, code), (false, 422), "{message}");
    assert!(
        message.contains(
            "spec.resources[0].base.spec.forProvider.routingMode: Invalid value: \"integer\": spec.forProvider.routingMode in body must be of type string: \"integer\""
        ),
        "{message}"
    );
    assert_eq!(
        metric(
            &server,
            "composition_webhook_schema_cache_entries{source=\"mrd\",state=\"acked\"}"
        )
        .await
        .unwrap_or(0.0),
        1.0
    );
    assert_eq!(
        metric(
            &server,
            "composition_webhook_schema_source_objects{source=\"mrd\",state=\"listed\"}"
        )
        .await
        .unwrap_or(0.0),
        1.0
    );
    let network = entry(&server, "Network").await;
    assert_eq!(network["definition"], format!("MRD {NETWORK_CRD}"));
    assert_eq!(network["mrdState"], "Inactive");
    assert_eq!(network["state"], "ACKED");

    // Activated (by a policy or by hand): Crossplane has yet to create the CRD.
    let rv = cluster.api.apply(Resource::Mrds, network_mrd("Active"));
    wait_entry(&server, "Network", "resourceVersion", rv.as_str()).await;
    let (allowed, _, message, warnings) =
        verdict(&review(&server, &with_mode(composition(), "strict"), "10s").await);
    assert!(allowed, "{message}");
    assert_eq!(
        warnings,
        [format!(
            "Composition \"xnetworks.gcp.platformref.upbound.io\": spec.resources[0].base: Not found: MRD {NETWORK_CRD} is Active but Crossplane has not established the CRD of Network yet"
        )]
    );

    // Crossplane creates the CRD: it defines the kind.
    let rv = cluster.api.apply(Resource::Crds, network_crd());
    wait_entry(&server, "Network", "resourceVersion", rv.as_str()).await;
    assert_eq!(
        entry(&server, "Network").await["definition"],
        format!("CRD {NETWORK_CRD}")
    );
    let (allowed, _, message, warnings) =
        verdict(&review(&server, &with_mode(composition(), "strict"), "10s").await);
    assert!(allowed, "{message}");
    assert_eq!(warnings, Vec::<String>::new());
}

/// A ManagedResourceActivationPolicy named `name` with `spec.activate: activate`.
fn mrap(name: &str, activate: &[&str]) -> Value {
    json!({
        "apiVersion": "apiextensions.crossplane.io/v1alpha1",
        "kind": "ManagedResourceActivationPolicy",
        "metadata": {"name": name},
        "spec": {"activate": activate},
    })
}

/// Waits until a strict review of the example has `allowed` and `warnings` (the verdict
/// cache answers again only while the schemas it used hold: a policy change is one), and
/// returns its message.
async fn wait_strict(server: &Server, allowed: bool, warnings: &[String]) -> String {
    let strict = with_mode(composition(), "strict");
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let (a, _, message, w) = verdict(&review(server, &strict, "10s").await);
        if a == allowed && w == warnings {
            return message;
        }
        assert!(
            Instant::now() < end,
            "not within 10 s: a strict review allowed: {allowed}, warned {warnings:?}; last: {a}, {message}, {w:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The Inactive Network MRD of a Crossplane v2 cluster: a ManagedResourceActivationPolicy
/// created in the API server that matches it (`*.gcp.upbound.io`) activates its kind at once
/// (a warning until Crossplane's CRD is there, in every mode: strict allows), and
/// `/debug/schemas` shows the policy and the entry it activates; changed to match other
/// MRDs, the kind is Inactive again with a message naming the policy; deleted, the message
/// is the one without policies.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_policy_in_the_cluster_activates_an_mrd_until_it_is_deleted() {
    let cluster = Cluster::start().await;
    cluster.api.apply(Resource::Xrds, xrd());
    cluster.api.apply(Resource::Crds, subnetwork_crd());
    cluster.api.apply(Resource::Mrds, network_mrd("Inactive"));
    let server = cluster.serving(&[]).await;
    let listed = |policies: &str| {
        format!(
            "ready: 1 CRD, 1 MRD, {policies}, 1 XRD and 0 Functions listed from {}\n",
            cluster.api.url() + "/"
        )
    };
    assert_eq!(ready(&server).await.1, listed("0 MRAPs"));
    let cause = |why: &str| {
        format!(
            "cannot get the needed CRDs: [spec.resources[0].base: Not found: \"compute.gcp.upbound.io/v1beta1, Kind=Network\": {why}]"
        )
    };
    let until = format!(
        "MRD {NETWORK_CRD} is Inactive: Network has no CRD until a ManagedResourceActivationPolicy activates it"
    );
    let without = format!("{until} (spec.activate: its name or \"*.gcp.upbound.io\")");
    assert_eq!(wait_strict(&server, false, &[]).await, cause(&without));

    cluster
        .api
        .apply(Resource::Mraps, mrap("gcp", &["*.gcp.upbound.io"]));
    let activated = format!(
        "Composition \"xnetworks.gcp.platformref.upbound.io\": spec.resources[0].base: Not found: MRD {NETWORK_CRD} is activated by ManagedResourceActivationPolicy gcp but Crossplane has not established the CRD of Network yet"
    );
    wait_strict(&server, true, std::slice::from_ref(&activated)).await;
    let (allowed, _, _, warnings) = verdict(&review(&server, &composition(), "10s").await);
    assert!(allowed);
    assert_eq!(warnings, [activated]);
    assert_eq!(ready(&server).await.1, listed("1 MRAP"));
    let d = debug(&server).await;
    let policies = &d["activationPolicies"];
    assert_eq!(policies["resource"], "managedresourceactivationpolicies");
    assert_eq!(policies["synced"], true);
    assert_eq!(
        policies["policies"].as_array().map(|ps| ps
            .iter()
            .map(|p| (p["name"].clone(), p["activate"].clone()))
            .collect::<Vec<_>>()),
        Some(vec![(json!("gcp"), json!(["*.gcp.upbound.io"]))])
    );
    let network = entry(&server, "Network").await;
    assert_eq!(network["mrdState"], "Inactive");
    assert_eq!(network["activatedBy"], "gcp");
    assert_eq!(
        metric(
            &server,
            "composition_webhook_schema_source_objects{source=\"mrap\",state=\"listed\"}"
        )
        .await
        .unwrap_or(0.0),
        1.0
    );

    // Changed to activate other MRDs: Inactive again, the policy named.
    cluster
        .api
        .apply(Resource::Mraps, mrap("gcp", &["*.aws.upbound.io"]));
    let message = wait_strict(&server, false, &[]).await;
    assert_eq!(
        message,
        cause(&format!(
            "{until}, and none does (gcp: spec.activate \"*.aws.upbound.io\"); add its name or \"*.gcp.upbound.io\" to one's spec.activate"
        ))
    );
    assert!(entry(&server, "Network").await.get("activatedBy").is_none());

    // By its exact name, then deleted: the message without policies.
    cluster
        .api
        .apply(Resource::Mraps, mrap("gcp", &[NETWORK_CRD]));
    wait_strict(&server, true, &[format!(
        "Composition \"xnetworks.gcp.platformref.upbound.io\": spec.resources[0].base: Not found: MRD {NETWORK_CRD} is activated by ManagedResourceActivationPolicy gcp but Crossplane has not established the CRD of Network yet"
    )])
    .await;
    cluster.api.delete(Resource::Mraps, "gcp");
    assert_eq!(wait_strict(&server, false, &[]).await, cause(&without));
    assert_eq!(ready(&server).await.1, listed("0 MRAPs"));
}

// ---------------------------------------------------------------------------------------
// Faults a restarting or failing API server brings, with the cache warm

/// A review of `object` answered within `within` (the review's own deadline, as the API
/// server sends it), with its verdict: allowed, code, message, warnings.
async fn reviewed_within(
    server: &Server,
    object: &Value,
    within: Duration,
) -> (bool, u64, String, Vec<String>) {
    let timeout = format!("{}s", within.as_secs());
    // Past the deadline the webhook answers by the mode; this bound tells that from a hang.
    let answered = tokio::time::timeout(
        within + Duration::from_secs(20),
        review(server, object, &timeout),
    )
    .await
    .unwrap_or_else(|_| panic!("no answer within {within:?} and 20 s more"));
    verdict(&answered)
}

/// The list status of a source in `/debug/schemas`.
async fn list_of(server: &Server, resource: &str) -> Value {
    let d = debug(server).await;
    d["lists"]
        .as_array()
        .and_then(|ls| ls.iter().find(|l| l["resource"] == resource).cloned())
        .unwrap_or_else(|| panic!("no list of {resource}: {d:#}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_restart_that_serves_no_xrds_for_a_while_keeps_their_schemas() {
    // kube-apiserver restarting: connections cut, history compacted, and custom resources
    // (XRDs are Crossplane's) answered 404 until its CRD informer has caught up.
    let cluster = Cluster::with_example().await;
    let server = cluster.serving(&[]).await;
    let strict = with_mode(composition(), "strict");
    assert!(
        reviewed_within(&server, &strict, Duration::from_secs(10))
            .await
            .0
    );
    wait_entry(&server, XR_KIND, "state", "ACKED").await;

    cluster.api.set_down(true);
    for verb in [Verb::List, Verb::Watch, Verb::Get] {
        cluster.api.fail(Resource::Xrds, verb, Some(404));
    }
    cluster.api.expire_watches();
    cluster.api.set_down(false);
    eventually("the XRDs' 404 is seen", Duration::from_secs(30), || async {
        list_of(&server, "compositeresourcedefinitions").await["lastError"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("404"))
    })
    .await;
    // Nothing cached wrongly: the XR's schema stays, strict still admits, a mistake in the
    // XR's fields is still found.
    let (allowed, code, message, warnings) =
        reviewed_within(&server, &strict, Duration::from_secs(10)).await;
    assert!(allowed, "{code} {message} {warnings:#?}");
    let xr = entry(&server, XR_KIND).await;
    assert_eq!(
        (&xr["state"], &xr["cached"]),
        (&json!("ACKED"), &json!(true)),
        "{xr:#}"
    );

    for verb in [Verb::List, Verb::Watch, Verb::Get] {
        cluster.api.fail(Resource::Xrds, verb, None);
    }
    eventually("the XRDs listed again", Duration::from_secs(60), || async {
        list_of(&server, "compositeresourcedefinitions").await["lastError"].is_null()
    })
    .await;
    assert!(
        reviewed_within(&server, &strict, Duration::from_secs(10))
            .await
            .0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_crd_changed_while_the_api_server_restarts_is_caught_up_not_missed() {
    let cluster = Cluster::with_example().await;
    let server = cluster.serving(&[]).await;
    assert!(
        reviewed_within(&server, &composition(), Duration::from_secs(10))
            .await
            .0
    );

    // Down; meanwhile the Network CRD changes and history is compacted: the watch cannot
    // resume from where it was.
    cluster.api.set_down(true);
    let rv = cluster.api.apply(Resource::Crds, network_crd_global_only());
    cluster.api.expire_watches();
    // While down, reviews are answered from the cache within their deadline.
    let (allowed, _, _, _) = reviewed_within(&server, &composition(), Duration::from_secs(5)).await;
    assert!(allowed, "the last schema known, the old one");
    cluster.api.set_down(false);
    eventually("the change is seen", Duration::from_secs(60), || async {
        entry(&server, "Network").await["resourceVersion"] == rv.as_str()
    })
    .await;
    let (allowed, code, message, _) =
        reviewed_within(&server, &composition(), Duration::from_secs(10)).await;
    assert_eq!((allowed, code), (false, 422), "{message}");
    assert!(
        message.contains("routingMode: Unsupported value"),
        "{message}"
    );
    assert_eq!(states(&server).await, counts(&[("acked", 3.0)]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn errors_refetching_a_changed_crd_keep_the_last_good_schema_and_say_why() {
    let cluster = Cluster::with_example().await;
    let server = cluster.serving(&[]).await;
    assert!(
        reviewed_within(&server, &composition(), Duration::from_secs(10))
            .await
            .0
    );

    // An overloaded API server: every GET a 503, then slow.
    let before = entry(&server, "Network").await["resourceVersion"].clone();
    cluster.api.fail(Resource::Crds, Verb::Get, Some(503));
    cluster.api.apply(Resource::Crds, network_crd_global_only());
    // The last good schema stays in use, the error beside it.
    eventually("the 503 is recorded", Duration::from_secs(10), || async {
        !entry(&server, "Network").await["lastError"].is_null()
    })
    .await;
    let network = entry(&server, "Network").await;
    assert_eq!(
        (
            &network["state"],
            &network["cached"],
            &network["resourceVersion"]
        ),
        (&json!("ACKED"), &json!(true), &json!(before)),
        "{network:#}"
    );
    assert_eq!(network["lastError"]["class"], "transient", "{network:#}");
    assert_eq!(
        network["lastError"]["message"],
        format!("the API server answered 503 ServiceUnavailable to getting CRD {NETWORK_CRD}"),
        "{network:#}"
    );
    let (allowed, _, _, warnings) =
        reviewed_within(&server, &composition(), Duration::from_secs(5)).await;
    assert!(
        allowed,
        "validated with the last good schema: {warnings:#?}"
    );
    assert_eq!(states(&server).await, counts(&[("acked", 3.0)]));

    cluster.api.fail(Resource::Crds, Verb::Get, None);
    cluster.api.delay(Verb::Get, Some(Duration::from_secs(30)));
    let (_, code, _, _) = reviewed_within(&server, &composition(), Duration::from_secs(3)).await;
    assert_ne!(
        code, 504,
        "a slow API server does not take the review past its deadline"
    );
    cluster.api.delay(Verb::Get, None);

    // Mended: fetched again (its backoff is at most a minute), the new schema decides.
    eventually("refetched", Duration::from_secs(90), || async {
        let network = entry(&server, "Network").await;
        network["resourceVersion"] != before && network["lastError"].is_null()
    })
    .await;
    let (allowed, code, message, _) =
        reviewed_within(&server, &composition(), Duration::from_secs(10)).await;
    assert_eq!((allowed, code), (false, 422), "{message}");
}
