//! The fake kube-apiserver of `tests/kubeapi`, driven by the real kube client and
//! kube-runtime's watcher: paginated lists, gets, watches (changes, bookmarks, compaction and
//! relist), injected Status errors, the server going down and coming back, the kubeconfig it
//! writes, HTTP/2, namespaced Secrets, and `/openapi/v3` as kube-openapi's handler serves it.

mod common;
mod kubeapi;

use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, WatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::WatchEvent;
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use kubeapi::{FakeApiServer, ListSource, PageCost, Resource, Verb, crd};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// How long to wait for an event that must come.
const WAIT: Duration = Duration::from_secs(5);

/// kube initialises rustls, which needs a process-wide crypto provider.
fn init() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}
    })
}

fn thing(i: usize) -> Value {
    crd(
        "example.org",
        &format!("Thing{i}"),
        &format!("thing{i}s"),
        &[("v1", true, true, schema())],
    )
}

fn name(i: usize) -> String {
    format!("thing{i}s.example.org")
}

async fn server_with(n: usize) -> FakeApiServer {
    let server = FakeApiServer::start().await;
    server.apply_all(Resource::Crds, (0..n).map(thing).collect());
    server
}

fn crds(client: Client) -> Api<CustomResourceDefinition> {
    Api::all(client)
}

fn xrds(client: Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(
        "apiextensions.crossplane.io",
        "v1",
        "CompositeResourceDefinition",
    );
    Api::all_with(
        client,
        &ApiResource::from_gvk_with_plural(&gvk, "compositeresourcedefinitions"),
    )
}

type CrdEvent = Result<watcher::Event<CustomResourceDefinition>, watcher::Error>;

/// A watcher event in short: `Init`, `InitApply(NAME)`, `InitDone`, `Apply(NAME)`,
/// `Delete(NAME)`, `WatchError(CODE)` or `Error`.
fn describe(event: CrdEvent) -> String {
    match event {
        Ok(watcher::Event::Init) => "Init".into(),
        Ok(watcher::Event::InitApply(o)) => format!("InitApply({})", o.name_any()),
        Ok(watcher::Event::InitDone) => "InitDone".into(),
        Ok(watcher::Event::Apply(o)) => format!("Apply({})", o.name_any()),
        Ok(watcher::Event::Delete(o)) => format!("Delete({})", o.name_any()),
        Err(watcher::Error::WatchError(status)) => format!("WatchError({})", status.code),
        Err(_) => "Error".into(),
    }
}

/// Runs kube-runtime's watcher (page size 2) in a task of its own, since it makes its watch
/// request only while polled, and forwards its events in short.
fn spawn_watcher(api: Api<CustomResourceDefinition>) -> mpsc::UnboundedReceiver<String> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut stream = watcher(api, watcher::Config::default().page_size(2)).boxed();
        while let Some(event) = stream.next().await {
            let failed = event.is_err();
            if tx.send(describe(event)).is_err() {
                break;
            }
            if failed {
                // A backoff, so that a server that is down is not hammered.
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    });
    rx
}

async fn next(rx: &mut mpsc::UnboundedReceiver<String>) -> String {
    tokio::time::timeout(WAIT, rx.recv())
        .await
        .expect("a watcher event in time")
        .expect("the watcher is running")
}

async fn take(rx: &mut mpsc::UnboundedReceiver<String>, n: usize) -> Vec<String> {
    let mut events = Vec::new();
    for _ in 0..n {
        events.push(next(rx).await);
    }
    events
}

/// Asserts that no event comes within `quiet`.
async fn nothing_within(rx: &mut mpsc::UnboundedReceiver<String>, quiet: Duration) {
    if let Ok(event) = tokio::time::timeout(quiet, rx.recv()).await {
        panic!("unexpected watcher event: {event:?}");
    }
}

fn initial(names: &[usize]) -> Vec<String> {
    let mut events = vec!["Init".to_string()];
    events.extend(names.iter().map(|i| format!("InitApply({})", name(*i))));
    events.push("InitDone".into());
    events
}

fn api_status(err: kube::Error) -> Box<kube::core::Status> {
    match err {
        kube::Error::Api(status) => status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn assert_token_on_every_request(server: &FakeApiServer) {
    let requests = server.requests();
    assert!(!requests.is_empty());
    for r in requests {
        assert_eq!(
            r.authorization.as_deref(),
            Some("Bearer fake-apiserver-token"),
            "{r:?}"
        );
    }
}

#[tokio::test]
async fn lists_in_pages_and_gets_by_name() {
    init();
    let server = server_with(5).await;
    let api = crds(server.client().await);

    let mut names = Vec::new();
    let mut versions = Vec::new();
    let mut remaining = Vec::new();
    let mut params = ListParams::default().limit(2);
    loop {
        let page = api.list(&params).await.expect("a page");
        names.extend(page.items.iter().map(ResourceExt::name_any));
        versions.push(page.metadata.resource_version.clone());
        remaining.push(page.metadata.remaining_item_count);
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => break,
        }
    }
    assert_eq!(names, (0..5).map(name).collect::<Vec<_>>());
    assert_eq!(versions, vec![Some("5".to_string()); 3]);
    assert_eq!(remaining, vec![Some(3), Some(1), None]);
    let lists: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.verb == Verb::List)
        .collect();
    assert_eq!(lists.len(), 3);
    // kube builds its query strings with a leading `&`; the fake records them raw.
    assert_eq!(lists[0].query, "&limit=2");
    for page in &lists[1..] {
        assert!(
            page.query.starts_with("&limit=2&continue="),
            "{}",
            page.query
        );
    }
    println!("a continued list query: {}", lists[1].query);
    assert_eq!(
        server.list_sources(Resource::Crds),
        vec![ListSource::Etcd; 3],
        "no resourceVersion: quorum reads"
    );

    let object = api.get(&name(3)).await.expect("get");
    assert_eq!(object.spec.names.kind, "Thing3");
    assert_eq!(object.metadata.resource_version.as_deref(), Some("4"));
    assert_eq!(object.metadata.generation, Some(1));
    assert!(object.metadata.uid.is_some());
    assert!(object.metadata.creation_timestamp.is_some());

    let status = api_status(api.get("nope.example.org").await.expect_err("a 404"));
    assert_eq!(status.code, 404);
    assert_eq!(status.reason, "NotFound");
    assert_eq!(
        status.message,
        r#"customresourcedefinitions.apiextensions.k8s.io "nope.example.org" not found"#
    );
    let gets: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.verb == Verb::Get)
        .map(|r| (r.name, r.status))
        .collect();
    assert_eq!(
        gets,
        vec![
            (Some(name(3)), 200),
            (Some("nope.example.org".to_string()), 404)
        ]
    );
    assert_token_on_every_request(&server);
}

/// Lists a collection to its end from `params`; the number of pages and the time taken.
async fn list_to_the_end(
    api: &Api<CustomResourceDefinition>,
    mut params: ListParams,
) -> (Vec<usize>, Duration) {
    let started = Instant::now();
    let mut pages = Vec::new();
    loop {
        let page = api.list(&params).await.expect("a page");
        pages.push(page.items.len());
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => break,
        }
    }
    (pages, started.elapsed())
}

#[tokio::test]
async fn pages_from_etcd_cost_time_and_the_watch_cache_answers_whole_at_once() {
    init();
    let server = server_with(5).await;
    server.set_etcd_page_cost(PageCost {
        per_page: Duration::from_millis(100),
        per_object: Duration::from_millis(20),
    });
    let api = crds(server.client().await);

    // A quorum read: three pages of at most 2, each 100 ms plus 20 ms per object.
    let (pages, took) = list_to_the_end(&api, ListParams::default().limit(2)).await;
    assert_eq!(pages, [2, 2, 1]);
    assert!(took >= Duration::from_millis(400), "{took:?}");
    assert_eq!(
        server.list_sources(Resource::Crds),
        vec![ListSource::Etcd; 3]
    );

    // resourceVersion=0: the watch cache, no cost. (kube's client drops resourceVersion=0
    // when a limit is set, so that pages are honoured: no limit here.)
    server.clear_requests();
    let (pages, _) = list_to_the_end(&api, ListParams::default().match_any()).await;
    assert_eq!(pages, [5]);
    let lists = server.requests();
    assert_eq!(lists.len(), 1);
    assert_eq!(
        lists[0].query,
        "&resourceVersion=0&resourceVersionMatch=NotOlderThan"
    );
    assert_eq!(lists[0].list_source, Some(ListSource::WatchCache));
    assert_eq!(
        list_to_the_end(&api, ListParams::default().limit(2).match_any())
            .await
            .0,
        [2, 2, 1],
        "kube's client sends only the limit"
    );
    // Sent as is, `limit` is ignored with resourceVersion=0: the whole list, no continue.
    server.clear_requests();
    let client = server.client().await;
    let path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let (status, _, body) = raw_get(&client, &format!("{path}?limit=2&resourceVersion=0")).await;
    assert_eq!(status, 200);
    let list: Value = serde_json::from_slice(&body).expect("a list");
    assert_eq!(list["items"].as_array().map(Vec::len), Some(5));
    assert_eq!(list["metadata"], json!({"resourceVersion": "5"}));
    assert_eq!(
        server.list_sources(Resource::Crds),
        [ListSource::WatchCache]
    );

    // Any other resourceVersion with a limit, or an exact match: etcd again.
    server.clear_requests();
    let exact = ListParams::default()
        .at("3")
        .matching(kube::api::VersionMatch::Exact);
    assert_eq!(list_to_the_end(&api, exact).await.0, [5]);
    let limited = ListParams::default().limit(4).at("3");
    assert_eq!(list_to_the_end(&api, limited).await.0, [4, 1]);
    assert_eq!(
        server.list_sources(Resource::Crds),
        vec![ListSource::Etcd; 3]
    );

    // Without a watch cache, resourceVersion=0 is read from etcd too, at its cost.
    server.clear_requests();
    server.set_watch_cache(false);
    let (pages, took) = list_to_the_end(&api, ListParams::default().match_any()).await;
    assert_eq!(pages, [5]);
    assert!(took >= Duration::from_millis(200), "{took:?}");
    assert_eq!(server.list_sources(Resource::Crds), [ListSource::Etcd]);
}

#[tokio::test]
async fn serves_xrds_as_custom_resources() {
    init();
    let server = FakeApiServer::start().await;
    let xrd = json!({
        "apiVersion": "apiextensions.crossplane.io/v1",
        "kind": "CompositeResourceDefinition",
        "metadata": {"name": "xthings.example.org", "labels": {"team": "a"}},
        "spec": {"group": "example.org", "names": {"kind": "XThing", "plural": "xthings"}}
    });
    server.apply(Resource::Xrds, xrd.clone());
    let mut other = xrd;
    other["metadata"] = json!({"name": "xothers.example.org"});
    server.apply(Resource::Xrds, other);
    let api = xrds(server.client().await);

    let list = api.list(&ListParams::default()).await.expect("list");
    let names: Vec<_> = list.items.iter().map(ResourceExt::name_any).collect();
    assert_eq!(names, ["xothers.example.org", "xthings.example.org"]);
    // Custom resources' list items carry their type, unlike built-in types'.
    let types = list.items[0].types.as_ref().expect("apiVersion and kind");
    assert_eq!(types.kind, "CompositeResourceDefinition");

    let selected = api
        .list(&ListParams::default().labels("team=a"))
        .await
        .expect("list by label");
    assert_eq!(selected.items.len(), 1);
    assert_eq!(selected.items[0].name_any(), "xthings.example.org");

    let got = api.get("xthings.example.org").await.expect("get");
    assert_eq!(got.data["spec"]["names"]["kind"], "XThing");
    assert_eq!(server.count(Verb::List, Resource::Xrds), 2);
    assert_eq!(server.count(Verb::Get, Resource::Xrds), 1);
    assert_eq!(server.count(Verb::List, Resource::Crds), 0);
}

#[tokio::test]
async fn a_watcher_sees_changes_and_survives_bookmarks() {
    init();
    let server = server_with(3).await;
    let mut events = spawn_watcher(crds(server.client().await));
    assert_eq!(take(&mut events, 5).await, initial(&[0, 1, 2]));
    server.wait_for_watch(Resource::Crds, WAIT).await;

    server.apply(Resource::Crds, thing(3));
    assert_eq!(next(&mut events).await, format!("Apply({})", name(3)));
    let mut changed = thing(0);
    changed["spec"]["versions"][0]["served"] = json!(false);
    server.apply(Resource::Crds, changed);
    assert_eq!(next(&mut events).await, format!("Apply({})", name(0)));
    let stored = server.object(Resource::Crds, &name(0)).expect("stored");
    assert_eq!(stored["metadata"]["generation"], 2);
    assert!(server.delete(Resource::Crds, &name(1)));
    assert!(!server.delete(Resource::Crds, &name(1)));
    assert_eq!(next(&mut events).await, format!("Delete({})", name(1)));

    server.bookmark();
    nothing_within(&mut events, Duration::from_millis(200)).await;
    server.apply(Resource::Crds, thing(4));
    assert_eq!(next(&mut events).await, format!("Apply({})", name(4)));
    assert_eq!(server.count(Verb::Watch, Resource::Crds), 1);
    assert_eq!(server.count(Verb::List, Resource::Crds), 2);
    assert_eq!(server.open_watches(Resource::Crds), 1);

    let requests = server.requests();
    let list = requests
        .iter()
        .find(|r| r.verb == Verb::List)
        .expect("a list");
    let watch = requests
        .iter()
        .find(|r| r.verb == Verb::Watch)
        .expect("a watch");
    println!("the watcher's list query: {}", list.query);
    println!("the watcher's watch query: {}", watch.query);
    assert_eq!(list.query, "&limit=2");
    assert_eq!(
        watch.query,
        "&watch=true&timeoutSeconds=290&allowWatchBookmarks=true&resourceVersion=3"
    );
    assert_token_on_every_request(&server);
}

#[tokio::test]
async fn a_streaming_list_watcher_gets_initial_events_then_changes() {
    init();
    let server = server_with(2).await;
    let config = watcher::Config::default().streaming_lists();
    let mut stream = watcher(crds(server.client().await), config).boxed();
    let mut next_event = async || {
        let event = tokio::time::timeout(WAIT, stream.next())
            .await
            .expect("a watcher event in time")
            .expect("the watcher is running");
        describe(event)
    };
    let mut events = Vec::new();
    for _ in 0..4 {
        events.push(next_event().await);
    }
    assert_eq!(events, initial(&[0, 1]));
    server.apply(Resource::Crds, thing(2));
    assert_eq!(next_event().await, format!("Apply({})", name(2)));
    assert_eq!(server.count(Verb::List, Resource::Crds), 0);
    let watch = server.requests().pop().expect("the watch");
    println!("a streaming-list watch query: {}", watch.query);
    assert!(
        watch.query.contains("sendInitialEvents=true"),
        "{}",
        watch.query
    );
}

#[tokio::test]
async fn compaction_makes_the_watcher_relist() {
    init();
    let server = server_with(3).await;
    let api = crds(server.client().await);
    let first_page = api
        .list(&ListParams::default().limit(2))
        .await
        .expect("a first page");
    let token = first_page.metadata.continue_.expect("a continue token");
    let mut events = spawn_watcher(api.clone());
    assert_eq!(take(&mut events, 5).await, initial(&[0, 1, 2]));
    server.wait_for_watch(Resource::Crds, WAIT).await;
    let fresh_lists = |server: &FakeApiServer| {
        server
            .requests()
            .iter()
            .filter(|r| r.verb == Verb::List && !r.query.contains("continue="))
            .count()
    };
    assert_eq!(fresh_lists(&server), 2);

    server.apply(Resource::Crds, thing(3));
    assert_eq!(next(&mut events).await, format!("Apply({})", name(3)));
    server.expire_watches();
    let mut expected = vec!["WatchError(410)".to_string()];
    expected.extend(initial(&[0, 1, 2, 3]));
    assert_eq!(take(&mut events, 7).await, expected);
    assert_eq!(fresh_lists(&server), 3);
    server.wait_for_watch(Resource::Crds, WAIT).await;
    assert!(server.delete(Resource::Crds, &name(2)));
    assert_eq!(next(&mut events).await, format!("Delete({})", name(2)));

    // A watch from before the compaction: HTTP 200, then the ERROR event.
    let mut stream = api
        .watch(&WatchParams::default(), "1")
        .await
        .expect("a watch")
        .boxed();
    match stream.next().await {
        Some(Ok(WatchEvent::Error(status))) => {
            assert_eq!(status.code, 410);
            assert_eq!(status.reason, "Expired");
            assert_eq!(status.message, "too old resource version: 1 (5)");
        }
        other => panic!("expected the 410 ERROR event, got {other:?}"),
    }
    assert!(stream.next().await.is_none(), "the stream ends");

    // A continue token from before the compaction: HTTP 410.
    let status = api_status(
        api.list(&ListParams::default().limit(2).continue_token(&token))
            .await
            .expect_err("an expired continue token"),
    );
    assert_eq!(status.code, 410);
    assert_eq!(status.reason, "Expired");
}

#[tokio::test]
async fn injected_errors_read_as_kube_apiserver_words_them() {
    init();
    let server = server_with(2).await;
    let api = crds(server.client().await);

    server.fail(Resource::Crds, Verb::List, Some(403));
    let status = api_status(
        api.list(&ListParams::default())
            .await
            .expect_err("forbidden"),
    );
    assert_eq!(status.code, 403);
    assert_eq!(status.reason, "Forbidden");
    assert_eq!(
        status.message,
        r#"customresourcedefinitions.apiextensions.k8s.io is forbidden: User "system:serviceaccount:crossplane-system:composition-webhook" cannot list resource "customresourcedefinitions" in API group "apiextensions.k8s.io" at the cluster scope"#
    );
    // Only that verb on that resource fails.
    api.get(&name(0)).await.expect("get still works");
    xrds(server.client().await)
        .list(&ListParams::default())
        .await
        .expect("XRDs still list");

    // kube's client retries 429, 503 and 504 by itself, after the Retry-After the fake
    // sends with a 429 (1 s, as kube-apiserver's priority and fairness does).
    server.fail(Resource::Crds, Verb::List, Some(429));
    let started = Instant::now();
    let retried = tokio::spawn({
        let api = api.clone();
        async move { api.list(&ListParams::default()).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.fail(Resource::Crds, Verb::List, None);
    let list = retried.await.expect("the list task").expect("retried");
    assert_eq!(list.items.len(), 2);
    assert!(started.elapsed() >= Duration::from_secs(1));
    server.fail(Resource::Crds, Verb::List, Some(500));
    let status = api_status(api.list(&ListParams::default()).await.expect_err("500"));
    assert_eq!(
        (status.code, status.reason.as_str()),
        (500, "InternalError")
    );
    server.fail(Resource::Crds, Verb::Get, Some(403));
    let status = api_status(api.get(&name(0)).await.expect_err("403 on get"));
    assert_eq!(
        status.message,
        r#"customresourcedefinitions.apiextensions.k8s.io "thing0s.example.org" is forbidden: User "system:serviceaccount:crossplane-system:composition-webhook" cannot get resource "customresourcedefinitions" in API group "apiextensions.k8s.io" at the cluster scope"#
    );

    server.fail(Resource::Crds, Verb::List, None);
    server.fail(Resource::Crds, Verb::Get, None);
    let list = api.list(&ListParams::default()).await.expect("cleared");
    assert_eq!(list.items.len(), 2);
    let statuses: Vec<u16> = server
        .requests()
        .iter()
        .filter(|r| r.resource == Resource::Crds && r.verb == Verb::List)
        .map(|r| r.status)
        .collect();
    assert_eq!(statuses, [403, 429, 200, 500, 200]);

    // A delay holds the answer back.
    server.delay(Verb::List, Some(Duration::from_millis(300)));
    let started = Instant::now();
    api.list(&ListParams::default()).await.expect("slow list");
    assert!(started.elapsed() >= Duration::from_millis(300));
    server.delay(Verb::List, None);
}

#[tokio::test]
async fn going_down_cuts_connections_and_coming_back_resumes_watches() {
    init();
    let server = server_with(2).await;
    let api = crds(server.client().await);
    api.list(&ListParams::default()).await.expect("up");
    let mut events = spawn_watcher(api.clone());
    assert_eq!(take(&mut events, 4).await, initial(&[0, 1]));
    server.wait_for_watch(Resource::Crds, WAIT).await;

    server.set_down(true);
    assert_eq!(server.open_watches(Resource::Crds), 0);
    let err = api.list(&ListParams::default()).await.expect_err("down");
    assert!(
        !matches!(err, kube::Error::Api(_)),
        "a transport error, not an answer: {err:?}"
    );
    // The cut watch is retried and fails while down.
    assert_eq!(next(&mut events).await, "Error");
    server.apply(Resource::Crds, thing(2));

    server.set_down(false);
    api.list(&ListParams::default()).await.expect("up again");
    // The watcher resumes from its last resourceVersion: the change made while down is
    // replayed from history, without a relist.
    let deadline = Instant::now() + WAIT;
    loop {
        let event = next(&mut events).await;
        if event == "Error" && Instant::now() < deadline {
            continue;
        }
        assert_eq!(event, format!("Apply({})", name(2)));
        break;
    }
    assert_eq!(server.count(Verb::List, Resource::Crds), 3);
}

#[tokio::test]
async fn the_kubeconfig_carries_the_ca_and_the_token() {
    init();
    let server = server_with(1).await;
    let dir = std::env::temp_dir().join(format!("fake-apiserver-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let path = dir.join("kubeconfig");
    server.write_kubeconfig(&path);

    let kubeconfig = Kubeconfig::read_from(&path).expect("read the kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("a config");
    assert_eq!(config.cluster_url.to_string(), format!("{}/", server.url()));
    let client = Client::try_from(config).expect("a client");
    let list = crds(client)
        .list(&ListParams::default())
        .await
        .expect("list");
    assert_eq!(list.items.len(), 1);
    assert_token_on_every_request(&server);

    let wrong =
        Kubeconfig::from_yaml(&server.kubeconfig_yaml_with_token("wrong")).expect("a kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(wrong, &KubeConfigOptions::default())
        .await
        .expect("a config");
    let client = Client::try_from(config).expect("a client");
    let status = api_status(
        crds(client)
            .list(&ListParams::default())
            .await
            .expect_err("401"),
    );
    assert_eq!((status.code, status.reason.as_str()), (401, "Unauthorized"));
    let last = server.requests().pop().expect("recorded");
    assert_eq!(last.authorization.as_deref(), Some("Bearer wrong"));
    assert_eq!(last.status, 401);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_watch_ends_after_its_timeout() {
    init();
    let server = server_with(1).await;
    let api = crds(server.client().await);
    let rv = server.resource_version();
    let started = Instant::now();
    let mut stream = api
        .watch(&WatchParams::default().timeout(1), &rv)
        .await
        .expect("a watch")
        .boxed();
    server.apply(Resource::Crds, thing(1));
    match stream.next().await {
        Some(Ok(WatchEvent::Added(o))) => assert_eq!(o.name_any(), name(1)),
        other => panic!("expected ADDED, got {other:?}"),
    }
    assert!(stream.next().await.is_none(), "the stream ends cleanly");
    assert!(started.elapsed() >= Duration::from_secs(1));
}

#[tokio::test]
async fn serves_http2() {
    init();
    let server = server_with(2).await;
    let mut roots = rustls::RootCertStore::empty();
    let ca = CertificateDer::from_pem_slice(server.ca_pem().as_bytes()).expect("the CA");
    roots.add(ca).expect("add the CA");
    let mut config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = tokio::net::TcpStream::connect(server.addr())
        .await
        .expect("connect");
    let tls = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
        .connect(ServerName::try_from("localhost").expect("a name"), tcp)
        .await
        .expect("a TLS handshake");
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
            .await
            .expect("an HTTP/2 handshake");
    tokio::spawn(connection);
    let request = hyper::Request::get(format!("{}{}", server.url(), Resource::Crds.path()))
        .header("authorization", format!("Bearer {}", FakeApiServer::TOKEN))
        .body(Empty::<Bytes>::new())
        .expect("a request");
    let response = sender.send_request(request).await.expect("a response");
    assert_eq!(response.status(), 200);
    let body = response
        .into_body()
        .collect()
        .await
        .expect("the body")
        .to_bytes();
    let list: Value = serde_json::from_slice(&body).expect("JSON");
    assert_eq!(list["kind"], "CustomResourceDefinitionList");
    assert_eq!(list["items"].as_array().map(Vec::len), Some(2));
    // Built-in types' list items come without apiVersion and kind.
    assert!(list["items"][0].get("kind").is_none());
}

/// `GET` of `uri` through kube's client: status, headers, body.
async fn raw_get(client: &Client, uri: &str) -> (u16, http::HeaderMap, Bytes) {
    let request = http::Request::get(uri)
        .body(kube::client::Body::empty())
        .expect("a request");
    let response = client.send(request).await.expect("an answer");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("a body")
        .to_bytes();
    (status, headers, body)
}

/// `/openapi/v3` serves the captures of a v1.28.4 kube-apiserver as kube-openapi's handler3
/// does: the index lists each group version with the SHA-512 of its document, a stale hash is
/// redirected (301) to the current URL, the current one is cacheable for good; an unknown
/// group version is a plain 404, and an injected 403 is worded as RBAC refuses a path.
#[tokio::test]
async fn serves_openapi_v3_as_kube_openapi_does() {
    init();
    let Some(dir) = common::shared_subdir("kube-openapi/v1.28.4") else {
        return;
    };
    let server = FakeApiServer::start().await;
    server.serve_openapi(&dir);
    let client = server.client().await;

    let (status, headers, body) = raw_get(&client, "/openapi/v3").await;
    assert_eq!(status, 200);
    assert!(headers.contains_key("etag"));
    let index: Value = serde_json::from_slice(&body).expect("JSON");
    let paths: Vec<&String> = index["paths"].as_object().expect("paths").keys().collect();
    assert_eq!(paths.len(), 14, "{paths:?}");
    let hash = server.openapi_hash("apis/apps/v1").expect("apps/v1");
    assert_eq!(hash.len(), 128);
    assert!(
        hash.chars()
            .all(|c| c.is_ascii_digit() || c.is_ascii_uppercase())
    );
    let url = format!("/openapi/v3/apis/apps/v1?hash={hash}");
    assert_eq!(index["paths"]["apis/apps/v1"]["serverRelativeURL"], url);

    let (status, headers, body) = raw_get(&client, &url).await;
    assert_eq!(status, 200);
    assert_eq!(headers["cache-control"], "public, immutable");
    assert_eq!(headers["etag"], format!("\"{hash}\""));
    assert!(headers.contains_key("expires"));
    let served: Value = serde_json::from_slice(&body).expect("JSON");
    assert_eq!(
        served,
        common::read_json(&dir.join("apis__apps__v1.json")),
        "the capture, unchanged"
    );

    // A new document: a new hash; the old URL is redirected to the new one.
    let mut changed = served.clone();
    changed["info"]["title"] = json!("changed");
    server.put_openapi_document("apis/apps/v1", &changed);
    let new_hash = server.openapi_hash("apis/apps/v1").expect("apps/v1");
    assert_ne!(new_hash, hash);
    let (status, headers, body) = raw_get(&client, &url).await;
    assert_eq!(status, 301);
    assert_eq!(
        headers["location"],
        format!("/openapi/v3/apis/apps/v1?hash={new_hash}")
    );
    assert!(body.is_empty());
    assert!(!headers.contains_key("cache-control"));

    let (status, _, body) = raw_get(&client, "/openapi/v3/apis/nope.example.org/v1").await;
    assert_eq!(
        (status, body.as_ref()),
        (404, b"404 page not found\n".as_ref())
    );

    server.fail_openapi(Some(403));
    let (status, _, body) = raw_get(&client, "/openapi/v3").await;
    assert_eq!(status, 403);
    let refusal: kube::core::Status = serde_json::from_slice(&body).expect("a Status");
    assert_eq!(
        refusal.message,
        r#"forbidden: User "system:serviceaccount:crossplane-system:composition-webhook" cannot get path "/openapi/v3""#
    );
    assert_eq!(server.count_openapi("/openapi/v3"), 2);
    assert_eq!(server.count_openapi("/openapi/v3/apis/apps/v1"), 2);
    let statuses: Vec<u16> = server.openapi_requests().iter().map(|(_, s)| *s).collect();
    assert_eq!(statuses, [200, 200, 301, 404, 403]);
}

/// Secrets are namespaced: listed in a namespace or across all, got by namespace and name,
/// selected by `metadata.name` and `metadata.namespace`, watched in one namespace; lists
/// carry bare items (a built-in type), and a refusal names the namespace.
#[tokio::test]
async fn serves_secrets_in_namespaces() {
    use k8s_openapi::api::core::v1::Secret;
    init();
    let server = FakeApiServer::start().await;
    let secret = |namespace: &str, name: &str| {
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": name, "namespace": namespace},
               "data": {"tls.crt": "Y2VydA=="}})
    };
    server.apply(
        Resource::Secrets,
        secret("crossplane-system", "crossplane-tls-client"),
    );
    server.apply(
        Resource::Secrets,
        secret("crossplane-system", "crossplane-root-ca"),
    );
    server.apply(
        Resource::Secrets,
        secret("default", "crossplane-tls-client"),
    );
    let client = server.client().await;
    let ns: Api<Secret> = Api::namespaced(client.clone(), "crossplane-system");
    let names = |list: kube::core::ObjectList<Secret>| -> Vec<String> {
        list.items
            .iter()
            .map(|s| format!("{}/{}", s.namespace().unwrap_or_default(), s.name_any()))
            .collect()
    };
    assert_eq!(
        names(ns.list(&ListParams::default()).await.expect("a list")),
        [
            "crossplane-system/crossplane-root-ca",
            "crossplane-system/crossplane-tls-client"
        ]
    );
    let by_name = ListParams::default().fields("metadata.name=crossplane-tls-client");
    assert_eq!(
        names(ns.list(&by_name).await.expect("a list")),
        ["crossplane-system/crossplane-tls-client"]
    );
    let all: Api<Secret> = Api::all(client.clone());
    assert_eq!(
        names(all.list(&by_name).await.expect("a list")),
        [
            "crossplane-system/crossplane-tls-client",
            "default/crossplane-tls-client"
        ]
    );
    let in_default = ListParams::default().fields("metadata.namespace=default");
    assert_eq!(
        names(all.list(&in_default).await.expect("a list")),
        ["default/crossplane-tls-client"]
    );
    let got = ns.get("crossplane-tls-client").await.expect("a get");
    assert_eq!(
        got.data
            .and_then(|d| d.get("tls.crt").cloned())
            .map(|b| b.0),
        Some(b"cert".to_vec())
    );
    let missing = api_status(ns.get("nothing").await.expect_err("not found"));
    assert_eq!(
        (missing.code, missing.message.as_str()),
        (404, "secrets \"nothing\" not found")
    );
    let (status, _, body) = raw_get(&client, "/api/v1/namespaces/default/secrets").await;
    assert_eq!(status, 200);
    let list: Value = serde_json::from_slice(&body).expect("JSON");
    assert_eq!(
        (list["kind"].as_str(), list["apiVersion"].as_str()),
        (Some("SecretList"), Some("v1"))
    );
    assert!(list["items"][0].get("kind").is_none());

    // A watch in one namespace by name sees that Secret's changes only.
    let mut events = ns
        .watch(
            &WatchParams::default().fields("metadata.name=crossplane-tls-client"),
            "0",
        )
        .await
        .expect("a watch")
        .boxed();
    let seen = |e: WatchEvent<Secret>| match e {
        WatchEvent::Added(s) => format!("ADDED {}", s.name_any()),
        WatchEvent::Modified(s) => format!("MODIFIED {}", s.name_any()),
        WatchEvent::Deleted(s) => format!("DELETED {}", s.name_any()),
        other => format!("{other:?}"),
    };
    let mut next = async || {
        let e = tokio::time::timeout(WAIT, events.next())
            .await
            .expect("an event in time");
        seen(e.expect("an event").expect("a good event"))
    };
    assert_eq!(next().await, "ADDED crossplane-tls-client");
    server.apply(
        Resource::Secrets,
        secret("default", "crossplane-tls-client"),
    );
    server.apply(
        Resource::Secrets,
        secret("crossplane-system", "crossplane-root-ca"),
    );
    assert!(server.delete(Resource::Secrets, "crossplane-system/crossplane-tls-client"));
    assert_eq!(next().await, "DELETED crossplane-tls-client");

    server.fail(Resource::Secrets, Verb::List, Some(403));
    let refused = api_status(ns.list(&by_name).await.expect_err("refused"));
    assert_eq!(
        refused.message,
        format!(
            "secrets is forbidden: User \"{}\" cannot list resource \"secrets\" in API group \"\" in the namespace \"crossplane-system\"",
            kubeapi::FORBIDDEN_USER
        )
    );
}
