//! An in-process fake Kubernetes API server for tests and benches: HTTPS (HTTP/1.1 and
//! HTTP/2) on a loopback port, serving `customresourcedefinitions` (apiextensions.k8s.io/v1),
//! Crossplane's MRDs, ManagedResourceActivationPolicies, Functions, FunctionRevisions and
//! Compositions, `compositeresourcedefinitions` (apiextensions.crossplane.io/v1) and, in
//! namespaces, core `secrets` (named `namespace/name` in this API) with list (pagination,
//! selectors), get and watch (history replay, bookmarks, timeouts, 410 Expired) close enough
//! to kube-apiserver that kube's client and kube-runtime's watcher cannot tell the difference.
//! Tests change objects with [`FakeApiServer::apply`] / [`FakeApiServer::delete`] and inject
//! faults: the server going down, Status errors by verb and resource, delays, and compaction.
//!
//! Lists cost what they cost kube-apiserver 1.28: one without a resourceVersion (or with a
//! `continue` token) is a quorum read from etcd, one page per request, each page paying
//! [`FakeApiServer::set_etcd_page_cost`]; one at `resourceVersion=0` comes from the watch
//! cache at no cost, whole (`limit` ignored, no `continue`). [`Recorded::list_source`] says
//! which each list was.
//!
//! What the webhook writes (Events in `events.k8s.io`, ClusterPolicyReports in
//! `wgpolicyk8s.io`, the audit's Lease in `coordination.k8s.io`) is kept in a store of its
//! own: create (POST), replace (PUT, 409 Conflict at a stale resourceVersion), JSON merge
//! patch, server-side apply and get, read back with [`FakeApiServer::written`],
//! [`FakeApiServer::write_calls`] and, with who wrote and when, [`FakeApiServer::write_log`].
//! Tokens added with [`FakeApiServer::add_token`] tell the clients of several processes apart.
//!
//! Include it with `mod kubeapi;` (tests) or `#[path = "../tests/kubeapi/mod.rs"] mod kubeapi;`
//! (benches).
#![allow(dead_code)]

mod openapi;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::convert::Infallible;
use std::future::Future;
use std::hash::BuildHasher;
use std::net::SocketAddr;
use std::ops::Bound;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use bytes::Bytes;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper::header::{AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use hyper_util::server::conn::auto;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use rustls_pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::{Map, Value, json};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::{AbortHandle, JoinSet};
use tokio::time::Sleep;
use tokio_rustls::TlsAcceptor;

/// The resources the fake serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Resource {
    /// `customresourcedefinitions.apiextensions.k8s.io`, a built-in type.
    Crds,
    /// `compositeresourcedefinitions.apiextensions.crossplane.io`, a custom resource.
    Xrds,
    /// `managedresourcedefinitions.apiextensions.crossplane.io` (v1alpha1), Crossplane v2's.
    Mrds,
    /// `functions.pkg.crossplane.io`, Crossplane's function packages.
    Functions,
    /// `managedresourceactivationpolicies.apiextensions.crossplane.io` (v1alpha1), which
    /// activate MRDs.
    Mraps,
    /// `compositions.apiextensions.crossplane.io`, what the audit reads.
    Compositions,
    /// `functionrevisions.pkg.crossplane.io`, where each Function's endpoint is.
    FunctionRevisions,
    /// Core `secrets`, namespaced: objects are named `namespace/name` here.
    Secrets,
}

impl Resource {
    /// Every resource served.
    pub const ALL: [Resource; 8] = [
        Resource::Crds,
        Resource::Xrds,
        Resource::Mrds,
        Resource::Functions,
        Resource::Compositions,
        Resource::Mraps,
        Resource::FunctionRevisions,
        Resource::Secrets,
    ];

    /// The API group (`""`, the core group, for Secrets).
    pub fn group(self) -> &'static str {
        match self {
            Resource::Crds => "apiextensions.k8s.io",
            Resource::Xrds | Resource::Mrds | Resource::Mraps | Resource::Compositions => {
                "apiextensions.crossplane.io"
            }
            Resource::Functions | Resource::FunctionRevisions => "pkg.crossplane.io",
            Resource::Secrets => "",
        }
    }

    /// Whether objects live in namespaces.
    pub fn namespaced(self) -> bool {
        matches!(self, Resource::Secrets)
    }

    /// The version served.
    pub fn version(self) -> &'static str {
        match self {
            Resource::Mrds | Resource::Mraps => "v1alpha1",
            _ => "v1",
        }
    }

    /// `group/version`.
    pub fn api_version(self) -> &'static str {
        match self {
            Resource::Crds => "apiextensions.k8s.io/v1",
            Resource::Xrds => "apiextensions.crossplane.io/v1",
            Resource::Mrds | Resource::Mraps => "apiextensions.crossplane.io/v1alpha1",
            Resource::Functions | Resource::FunctionRevisions => "pkg.crossplane.io/v1",
            Resource::Compositions => "apiextensions.crossplane.io/v1",
            Resource::Secrets => "v1",
        }
    }

    /// The plural resource name in URLs.
    pub fn plural(self) -> &'static str {
        match self {
            Resource::Crds => "customresourcedefinitions",
            Resource::Xrds => "compositeresourcedefinitions",
            Resource::Mrds => "managedresourcedefinitions",
            Resource::Mraps => "managedresourceactivationpolicies",
            Resource::Functions => "functions",
            Resource::Compositions => "compositions",
            Resource::FunctionRevisions => "functionrevisions",
            Resource::Secrets => "secrets",
        }
    }

    /// The object kind.
    pub fn kind(self) -> &'static str {
        match self {
            Resource::Crds => "CustomResourceDefinition",
            Resource::Xrds => "CompositeResourceDefinition",
            Resource::Mrds => "ManagedResourceDefinition",
            Resource::Mraps => "ManagedResourceActivationPolicy",
            Resource::Functions => "Function",
            Resource::Compositions => "Composition",
            Resource::FunctionRevisions => "FunctionRevision",
            Resource::Secrets => "Secret",
        }
    }

    /// The list kind.
    pub fn list_kind(self) -> &'static str {
        match self {
            Resource::Crds => "CustomResourceDefinitionList",
            Resource::Xrds => "CompositeResourceDefinitionList",
            Resource::Mrds => "ManagedResourceDefinitionList",
            Resource::Mraps => "ManagedResourceActivationPolicyList",
            Resource::Functions => "FunctionList",
            Resource::Compositions => "CompositionList",
            Resource::FunctionRevisions => "FunctionRevisionList",
            Resource::Secrets => "SecretList",
        }
    }

    /// The collection's path, `/apis/{group}/{version}/{plural}` (`/api/v1/{plural}` for the
    /// core group: across namespaces).
    pub fn path(self) -> String {
        if self.group().is_empty() {
            format!("/api/{}/{}", self.api_version(), self.plural())
        } else {
            format!("/apis/{}/{}", self.api_version(), self.plural())
        }
    }

    fn index(self) -> usize {
        match self {
            Resource::Crds => 0,
            Resource::Xrds => 1,
            Resource::Mrds => 2,
            Resource::Functions => 3,
            Resource::Compositions => 4,
            Resource::Mraps => 5,
            Resource::FunctionRevisions => 6,
            Resource::Secrets => 7,
        }
    }

    /// Whether list items carry `apiVersion` and `kind`. kube-apiserver encodes lists of
    /// built-in types (CRDs, Secrets) with bare items, and lists of custom resources (XRDs,
    /// served as unstructured objects) with both fields on every item.
    fn typed_list_items(self) -> bool {
        !matches!(self, Resource::Crds | Resource::Secrets)
    }

    /// `{"apiVersion":"…","kind":"…",` — put in front of a stored object (without its `{`).
    fn object_prefix(self) -> &'static [u8] {
        match self {
            Resource::Crds => {
                br#"{"kind":"CustomResourceDefinition","apiVersion":"apiextensions.k8s.io/v1","#
            }
            Resource::Xrds => {
                br#"{"apiVersion":"apiextensions.crossplane.io/v1","kind":"CompositeResourceDefinition","#
            }
            Resource::Mrds => {
                br#"{"apiVersion":"apiextensions.crossplane.io/v1alpha1","kind":"ManagedResourceDefinition","#
            }
            Resource::Mraps => {
                br#"{"apiVersion":"apiextensions.crossplane.io/v1alpha1","kind":"ManagedResourceActivationPolicy","#
            }
            Resource::Functions => br#"{"apiVersion":"pkg.crossplane.io/v1","kind":"Function","#,
            Resource::Compositions => {
                br#"{"apiVersion":"apiextensions.crossplane.io/v1","kind":"Composition","#
            }
            Resource::FunctionRevisions => {
                br#"{"apiVersion":"pkg.crossplane.io/v1","kind":"FunctionRevision","#
            }
            Resource::Secrets => br#"{"kind":"Secret","apiVersion":"v1","#,
        }
    }

    /// `plural.group` (`plural` in the core group), as Status messages name the resource.
    fn qualified(self) -> String {
        if self.group().is_empty() {
            self.plural().to_string()
        } else {
            format!("{}.{}", self.plural(), self.group())
        }
    }

    fn from_path(group: &str, version: &str, plural: &str) -> Option<Resource> {
        Resource::ALL
            .into_iter()
            .find(|r| r.group() == group && r.version() == version && r.plural() == plural)
    }
}

/// The read verbs the fake serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verb {
    /// `GET` on the collection.
    List,
    /// `GET` on the collection (or an object) with `watch=true`.
    Watch,
    /// `GET` on one object.
    Get,
}

impl Verb {
    /// The verb as RBAC names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Get => "get",
        }
    }
}

/// One request the fake answered.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// What was asked.
    pub verb: Verb,
    /// Of which resource.
    pub resource: Resource,
    /// The object's name, for a get (or a watch of one object by path).
    pub name: Option<String>,
    /// The namespace in the path, for a namespaced resource.
    pub namespace: Option<String>,
    /// The raw query string, as sent (still percent-encoded).
    pub query: String,
    /// The `Authorization` header, if any.
    pub authorization: Option<String>,
    /// The HTTP status answered (200 for a watch, whose errors come as events).
    pub status: u16,
    /// For a list answered 200: where kube-apiserver would have served it from.
    pub list_source: Option<ListSource>,
}

/// Where kube-apiserver 1.28 serves a list from (its cacher's `shouldDelegateList`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListSource {
    /// The watch cache: a resourceVersion given (`0`, or any with `NotOlderThan`), no
    /// `continue`, and `limit` only with `0`, where it is ignored: the whole list at once.
    WatchCache,
    /// etcd, a quorum read: no resourceVersion, a `continue` token, `limit` with a version
    /// other than `0`, or `resourceVersionMatch=Exact`. One page per request.
    Etcd,
}

/// What a page read from etcd costs: `per_page`, plus `per_object` for each object on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageCost {
    /// Fixed cost of a page (a round trip to etcd).
    pub per_page: Duration,
    /// Cost of each object on the page (reading and decoding it).
    pub per_object: Duration,
}

impl Default for PageCost {
    fn default() -> Self {
        PageCost::DEFAULT
    }
}

impl PageCost {
    /// The default: modest, so that tests stay fast yet a paged list is visibly slower
    /// than one from the watch cache.
    pub const DEFAULT: PageCost = PageCost {
        per_page: Duration::from_millis(2),
        per_object: Duration::ZERO,
    };

    /// The cost of a page of `objects`.
    pub fn of(self, objects: usize) -> Duration {
        self.per_page + self.per_object * u32::try_from(objects).unwrap_or(u32::MAX)
    }
}

/// The user kube-apiserver names in a 403's message: the webhook's service account.
pub const FORBIDDEN_USER: &str = "system:serviceaccount:crossplane-system:composition-webhook";

/// A fake kube-apiserver on `127.0.0.1`. Dropping it stops it: its accept loop and every
/// connection task are aborted.
pub struct FakeApiServer {
    addr: SocketAddr,
    ca_pem: String,
    shared: Arc<Shared>,
    accept: AbortHandle,
}

impl FakeApiServer {
    /// The bearer token every request must carry.
    pub const TOKEN: &'static str = "fake-apiserver-token";

    /// Starts on `127.0.0.1` on a port the system picks, serving HTTPS with a serving
    /// certificate (SAN IP 127.0.0.1 and DNS localhost) issued by a CA made for this server,
    /// offering HTTP/2 and HTTP/1.1 by ALPN. Installs rustls' ring provider as the process
    /// default if none is, since kube's client needs one.
    pub async fn start() -> FakeApiServer {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let (ca_pem, tls) = tls_config();
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port");
        let addr = listener.local_addr().expect("the listener's address");
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            tasks: Mutex::new(Tasks {
                down: false,
                set: JoinSet::new(),
            }),
        });
        let accept = tokio::spawn(accept_loop(
            listener,
            TlsAcceptor::from(tls),
            shared.clone(),
        ));
        FakeApiServer {
            addr,
            ca_pem,
            shared,
            accept: accept.abort_handle(),
        }
    }

    /// `https://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The CA certificate (PEM) that issued the serving certificate.
    pub fn ca_pem(&self) -> String {
        self.ca_pem.clone()
    }

    /// A kubeconfig for this server: the CA as `certificate-authority-data`, the bearer
    /// token, one context, set as current.
    pub fn kubeconfig_yaml(&self) -> String {
        self.kubeconfig_yaml_with_token(Self::TOKEN)
    }

    /// [`FakeApiServer::kubeconfig_yaml`] with another token (to provoke a 401).
    pub fn kubeconfig_yaml_with_token(&self, token: &str) -> String {
        format!(
            "apiVersion: v1\n\
             kind: Config\n\
             clusters:\n\
             - name: fake\n  cluster:\n    server: {url}\n    certificate-authority-data: {ca}\n\
             users:\n\
             - name: fake\n  user:\n    token: {token}\n\
             contexts:\n\
             - name: fake\n  context:\n    cluster: fake\n    user: fake\n\
             current-context: fake\n",
            url = self.url(),
            ca = STANDARD.encode(self.ca_pem.as_bytes()),
        )
    }

    /// Writes [`FakeApiServer::kubeconfig_yaml`] to `path`.
    pub fn write_kubeconfig(&self, path: &Path) {
        std::fs::write(path, self.kubeconfig_yaml()).expect("write the kubeconfig");
    }

    /// The kube config [`FakeApiServer::kubeconfig_yaml`] makes, to adjust before building a
    /// client: kube's client retries 429, 503 and 504 answers by itself (up to 15 times,
    /// backing off from 5 ms and honouring Retry-After) unless `default_retry` is false.
    pub async fn config(&self) -> kube::Config {
        let kubeconfig =
            kube::config::Kubeconfig::from_yaml(&self.kubeconfig_yaml()).expect("a kubeconfig");
        kube::Config::from_custom_kubeconfig(
            kubeconfig,
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .expect("a kube config from the kubeconfig")
    }

    /// A kube client for this server, configured as from the kubeconfig.
    pub async fn client(&self) -> kube::Client {
        kube::Client::try_from(self.config().await).expect("a kube client")
    }

    /// Creates or replaces a ValidatingWebhookConfiguration (named by `metadata.name`), with
    /// a new resourceVersion.
    pub fn put_webhook_configuration(&self, mut object: Value) {
        let mut state = lock(&self.shared.state);
        state.rv += 1;
        object["metadata"]["resourceVersion"] = json!(state.rv.to_string());
        let name = object["metadata"]["name"]
            .as_str()
            .expect("metadata.name")
            .to_owned();
        state.webhook_configurations.insert(name, object);
    }

    /// The ValidatingWebhookConfiguration `name`, as stored.
    pub fn webhook_configuration(&self, name: &str) -> Option<Value> {
        lock(&self.shared.state)
            .webhook_configurations
            .get(name)
            .cloned()
    }

    /// Answers every webhook configuration call of `method` (GET or PATCH) with a Status of
    /// `code`, or serves them again with `None`.
    pub fn fail_webhook_configurations(&self, method: Method, code: Option<u16>) {
        let mut state = lock(&self.shared.state);
        match code {
            Some(code) => state.webhook_configuration_faults.insert(method, code),
            None => state.webhook_configuration_faults.remove(&method),
        };
    }

    /// Answers the next `n` patches of a webhook configuration with 409 Conflict.
    pub fn conflict_webhook_configuration_patches(&self, n: usize) {
        lock(&self.shared.state).webhook_configuration_conflicts = n;
    }

    /// The webhook configuration calls answered: method, name and status.
    pub fn webhook_configuration_calls(&self) -> Vec<(Method, String, u16)> {
        lock(&self.shared.state).webhook_configuration_calls.clone()
    }

    /// Creates or replaces the object named by `metadata.name` (and `metadata.namespace`, which
    /// a namespaced resource's objects need): a new resourceVersion; on
    /// create a uid, creationTimestamp and generation 1; on replace the uid and
    /// creationTimestamp stay and the generation goes up when `spec` changed. Open watches
    /// get ADDED or MODIFIED. Returns the new resourceVersion.
    pub fn apply(&self, resource: Resource, object: Value) -> String {
        let mut state = lock(&self.shared.state);
        state.put(resource, object).to_string()
    }

    /// [`FakeApiServer::apply`] for many objects under one lock (for benches of 1,000 CRDs).
    pub fn apply_all(&self, resource: Resource, objects: Vec<Value>) {
        let mut state = lock(&self.shared.state);
        for object in objects {
            state.put(resource, object);
        }
    }

    /// Deletes `name` (`namespace/name` for a namespaced resource); open watches get DELETED
    /// with its last state at a new resourceVersion. Returns whether it existed.
    pub fn delete(&self, resource: Resource, name: &str) -> bool {
        lock(&self.shared.state).delete(resource, name)
    }

    /// The stored object `name` (`namespace/name` for a namespaced resource), as a get would
    /// answer it.
    pub fn object(&self, resource: Resource, name: &str) -> Option<Value> {
        let state = lock(&self.shared.state);
        let stored = state.stores[resource.index()].objects.get(name)?;
        serde_json::from_slice(&concat(&full_object(resource, &stored.bare))).ok()
    }

    /// The current resourceVersion (the global counter).
    pub fn resource_version(&self) -> String {
        lock(&self.shared.state).rv.to_string()
    }

    /// Down: connections accepted from now on are closed at once without an answer, and
    /// every open connection (watch streams too) is cut. `false` serves again, on the same
    /// port.
    pub fn set_down(&self, down: bool) {
        {
            let mut tasks = lock(&self.shared.tasks);
            tasks.down = down;
            if down {
                tasks.set.abort_all();
            }
        }
        if down {
            // Their connections are gone; forget them so they count as closed at once.
            lock(&self.shared.state).watchers.clear();
        }
    }

    /// Answers every request of `verb` on `resource` with a kube-apiserver Status error of
    /// HTTP `code` (403, 404, 429, 500, 503, …); `None` clears it.
    pub fn fail(&self, resource: Resource, verb: Verb, code: Option<u16>) {
        let mut state = lock(&self.shared.state);
        match code {
            Some(code) => state.faults.insert((resource, verb), code),
            None => state.faults.remove(&(resource, verb)),
        };
    }

    /// Waits `delay` before answering requests of `verb` (any resource; for a watch, before
    /// the response headers); `None` clears it.
    pub fn delay(&self, verb: Verb, delay: Option<Duration>) {
        let mut state = lock(&self.shared.state);
        match delay {
            Some(d) => state.delays.insert(verb, d),
            None => state.delays.remove(&verb),
        };
    }

    /// Sets what each page read from etcd costs (default [`PageCost::DEFAULT`]).
    pub fn set_etcd_page_cost(&self, cost: PageCost) {
        lock(&self.shared.state).page_cost = cost;
    }

    /// Turns the watch cache off (`--watch-cache=false`) or on: without it, every list is
    /// read from etcd, `resourceVersion=0` included, in pages of `limit`.
    pub fn set_watch_cache(&self, on: bool) {
        lock(&self.shared.state).no_watch_cache = !on;
    }

    /// The lists answered 200 for `resource` so far: where each was served from, in order.
    pub fn list_sources(&self, resource: Resource) -> Vec<ListSource> {
        lock(&self.shared.state)
            .requests
            .iter()
            .filter(|r| r.verb == Verb::List && r.resource == resource)
            .filter_map(|r| r.list_source)
            .collect()
    }

    /// Sends a BOOKMARK at the current resourceVersion to every open watch that asked for
    /// bookmarks.
    pub fn bookmark(&self) {
        lock(&self.shared.state).bookmark();
    }

    /// Compacts history as kube-apiserver's compactor does (which itself bumps the
    /// resourceVersion): every open watch gets an ERROR event with a 410 Expired Status and
    /// ends; watches from an older resourceVersion get the same ERROR event, and list
    /// `continue` tokens from before now an HTTP 410 Expired.
    pub fn expire_watches(&self) {
        lock(&self.shared.state).compact();
    }

    /// Every request answered so far (after authentication, delays and injected faults), in
    /// order. Requests for paths that name neither resource (answered 404) and methods
    /// other than GET (answered 405) are not recorded.
    pub fn requests(&self) -> Vec<Recorded> {
        lock(&self.shared.state).requests.clone()
    }

    /// How many requests of `verb` on `resource` were answered.
    pub fn count(&self, verb: Verb, resource: Resource) -> usize {
        lock(&self.shared.state)
            .requests
            .iter()
            .filter(|r| r.verb == verb && r.resource == resource)
            .count()
    }

    /// Forgets the recorded requests.
    pub fn clear_requests(&self) {
        lock(&self.shared.state).requests.clear();
    }

    /// Serves `/openapi/v3` from the `kubectl get --raw` captures in `dir` (`index.json` aside;
    /// `apis__apps__v1.json` is `apis/apps/v1`), each with the hash of its content.
    pub fn serve_openapi(&self, dir: &Path) {
        lock(&self.shared.state).openapi.load(dir);
    }

    /// The OpenAPI v3 document of `path` (`apis/apps/v1`), as served.
    pub fn openapi_document(&self, path: &str) -> Option<Value> {
        lock(&self.shared.state).openapi.document(path)
    }

    /// Replaces (or adds) the OpenAPI v3 document of `path`: the index lists its new hash.
    pub fn put_openapi_document(&self, path: &str, document: &Value) {
        lock(&self.shared.state).openapi.put(path, document);
    }

    /// The hash the index lists for `path`.
    pub fn openapi_hash(&self, path: &str) -> Option<String> {
        lock(&self.shared.state).openapi.hash(path)
    }

    /// Answers every `/openapi/v3` request with a kube-apiserver Status error of HTTP `code`
    /// (403: the RBAC refusal of a non-resource URL); `None` serves them again.
    pub fn fail_openapi(&self, code: Option<u16>) {
        lock(&self.shared.state).openapi.set_fault(code);
    }

    /// The objects written in `group` (`events.k8s.io`, `wgpolicyk8s.io`), in the order of
    /// their paths.
    pub fn written(&self, group: &str) -> Vec<Value> {
        let prefix = format!("/apis/{group}/");
        lock(&self.shared.state)
            .written
            .iter()
            .filter(|(path, _)| path.starts_with(&prefix))
            .map(|(_, object)| object.clone())
            .collect()
    }

    /// The object written at `path` (`/apis/{group}/{version}/[namespaces/{ns}/]{plural}/{name}`).
    pub fn written_object(&self, path: &str) -> Option<Value> {
        lock(&self.shared.state).written.get(path).cloned()
    }

    /// The Events written (`events.k8s.io`).
    pub fn events(&self) -> Vec<Value> {
        self.written(WRITABLE_GROUPS[0])
    }

    /// The calls to the written objects' groups answered: method, path (without the query),
    /// Content-Type and status.
    pub fn write_calls(&self) -> Vec<(Method, String, String, u16)> {
        lock(&self.shared.state).write_calls.clone()
    }

    /// The same calls with their token and time, in order.
    pub fn write_log(&self) -> Vec<WriteCall> {
        lock(&self.shared.state).write_log.clone()
    }

    /// Accepts `token` too, so that a client's calls can be told from another's.
    pub fn add_token(&self, token: &str) {
        lock(&self.shared.state).tokens.push(token.to_string());
    }

    /// Answers every call to `group` (`events.k8s.io`, `wgpolicyk8s.io`) with a Status error
    /// of HTTP `code`; `None` serves them again.
    pub fn fail_writes(&self, group: &str, code: Option<u16>) {
        let mut state = lock(&self.shared.state);
        match code {
            Some(code) => state.write_faults.insert(group.to_string(), code),
            None => state.write_faults.remove(group),
        };
    }

    /// The `/openapi/v3` requests answered: path with query, and status.
    pub fn openapi_requests(&self) -> Vec<(String, u16)> {
        lock(&self.shared.state).openapi.requests()
    }

    /// How many `/openapi/v3` requests for `path` (`/openapi/v3`, `/openapi/v3/apis/apps/v1`,
    /// whatever the query) were answered.
    pub fn count_openapi(&self, path: &str) -> usize {
        lock(&self.shared.state)
            .openapi
            .requests()
            .iter()
            .filter(|(p, _)| p.split('?').next() == Some(path))
            .count()
    }

    /// Waits until a watch on `resource` is open; panics after `timeout`.
    pub async fn wait_for_watch(&self, resource: Resource, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while self.open_watches(resource) == 0 {
            assert!(
                Instant::now() < deadline,
                "no watch on {} opened within {timeout:?}",
                resource.plural()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// How many watches on `resource` are open (their client has not gone away).
    pub fn open_watches(&self, resource: Resource) -> usize {
        lock(&self.shared.state)
            .watchers
            .iter()
            .filter(|w| w.resource == resource && !w.tx.is_closed())
            .count()
    }
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        self.accept.abort();
        let mut tasks = lock(&self.shared.tasks);
        tasks.down = true;
        tasks.set.abort_all();
    }
}

/// The CRD of Policy Reporter's ClusterPolicyReport, v1alpha2, as the audit needs it.
pub fn policy_report_crd() -> Value {
    crd(
        "wgpolicyk8s.io",
        "ClusterPolicyReport",
        "clusterpolicyreports",
        &[(
            "v1alpha2",
            true,
            true,
            json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
        )],
    )
}

/// A CRD (apiextensions.k8s.io/v1, cluster-scoped, named `plural.group`) for `group`/`kind`
/// with `versions`, each (name, served, storage, openAPIV3Schema), and the status of an
/// established CRD.
pub fn crd(group: &str, kind: &str, plural: &str, versions: &[(&str, bool, bool, Value)]) -> Value {
    let names = json!({
        "plural": plural,
        "singular": kind.to_lowercase(),
        "kind": kind,
        "listKind": format!("{kind}List"),
    });
    let stored: Vec<&str> = versions
        .iter()
        .filter(|(_, _, storage, _)| *storage)
        .map(|(name, ..)| *name)
        .collect();
    let versions: Vec<Value> = versions
        .iter()
        .map(|(name, served, storage, schema)| {
            json!({
                "name": name,
                "served": served,
                "storage": storage,
                "schema": {"openAPIV3Schema": schema},
            })
        })
        .collect();
    let condition = |kind: &str, reason: &str, message: &str| {
        json!({
            "type": kind,
            "status": "True",
            "lastTransitionTime": rfc3339(SystemTime::now()),
            "reason": reason,
            "message": message,
        })
    };
    json!({
        "apiVersion": Resource::Crds.api_version(),
        "kind": Resource::Crds.kind(),
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {
            "group": group,
            "names": names,
            "scope": "Cluster",
            "versions": versions,
            "conversion": {"strategy": "None"},
        },
        "status": {
            "conditions": [
                condition("NamesAccepted", "NoConflicts", "no conflicts found"),
                condition("Established", "InitialNamesAccepted", "the initial names have been accepted"),
            ],
            "acceptedNames": names,
            "storedVersions": stored,
        },
    })
}

// ---------------------------------------------------------------------------------------
// State

struct Shared {
    state: Mutex<State>,
    tasks: Mutex<Tasks>,
}

/// Connection tasks (and HTTP/2 stream tasks), kept so that going down can abort them all.
struct Tasks {
    down: bool,
    set: JoinSet<()>,
}

/// Locks `m`, carrying on after a panic elsewhere: a test that panicked already failed.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[derive(Default)]
struct State {
    /// ValidatingWebhookConfigurations by name (get and merge patch only).
    webhook_configurations: BTreeMap<String, Value>,
    /// A Status code every webhook configuration call gets instead, by method.
    webhook_configuration_faults: HashMap<Method, u16>,
    /// Patches still to answer with 409 Conflict (as if another writer came first).
    webhook_configuration_conflicts: usize,
    /// Webhook configuration calls answered: method, name and status.
    webhook_configuration_calls: Vec<(Method, String, u16)>,
    /// The global resourceVersion, as etcd's revision: bumped by every change.
    rv: u64,
    /// Events at or before this resourceVersion are gone.
    compacted: u64,
    stores: [Store; 8],
    watchers: Vec<Watcher>,
    faults: HashMap<(Resource, Verb), u16>,
    delays: HashMap<Verb, Duration>,
    /// What a page read from etcd costs.
    page_cost: PageCost,
    /// Whether the watch cache is off: every list from etcd.
    no_watch_cache: bool,
    requests: Vec<Recorded>,
    openapi: openapi::OpenApi,
    /// Objects written by the client, by path.
    written: BTreeMap<String, Value>,
    /// Calls to them: method, path, Content-Type, status.
    write_calls: Vec<(Method, String, String, u16)>,
    /// A Status code every call to a group gets instead.
    write_faults: HashMap<String, u16>,
    /// Calls to them with their time and token.
    write_log: Vec<WriteCall>,
    /// Bearer tokens accepted besides [`FakeApiServer::TOKEN`].
    tokens: Vec<String>,
}

/// One call to a written object's group, with who made it and when.
#[derive(Debug, Clone)]
pub struct WriteCall {
    /// When the fake answered it.
    pub at: Instant,
    /// The bearer token sent.
    pub token: Option<String>,
    /// The method.
    pub method: Method,
    /// The path, without the query.
    pub path: String,
    /// The status answered.
    pub status: u16,
}

#[derive(Default)]
struct Store {
    objects: BTreeMap<String, Stored>,
    history: Vec<Arc<Event>>,
}

/// An object as stored: serialized once, without `apiVersion` and `kind` (added when served).
struct Stored {
    /// `metadata.name` and `metadata.namespace` (`""` cluster scoped): the store's key is
    /// `namespace/name` for a namespaced resource.
    name: String,
    namespace: String,
    bare: Bytes,
    uid: String,
    created: String,
    generation: u64,
    labels: BTreeMap<String, String>,
}

impl Stored {
    /// The stored spec, parsed again: only a replace needs it, so creating many objects
    /// costs one serialization each.
    fn spec(&self) -> Option<Value> {
        let mut object: Value = serde_json::from_slice(&self.bare).ok()?;
        object.get_mut("spec").map(Value::take)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EventKind {
    Added,
    Modified,
    Deleted,
}

/// One change, kept for watches that start from an older resourceVersion.
struct Event {
    rv: u64,
    kind: EventKind,
    name: String,
    namespace: String,
    labels: BTreeMap<String, String>,
    /// The labels before a modification, to tell a selector's watch that the object entered
    /// or left it (as ADDED or DELETED), as kube-apiserver's watch cache does.
    labels_before: Option<BTreeMap<String, String>>,
    /// The object as sent, with `apiVersion` and `kind`: chunks sharing the stored bytes.
    object: [Bytes; 2],
}

struct Watcher {
    resource: Resource,
    filter: Filter,
    bookmarks: bool,
    last_rv: u64,
    tx: mpsc::UnboundedSender<Bytes>,
}

impl Watcher {
    /// Sends `event` if it concerns this watch; false once the client has gone.
    fn send(&mut self, event: &Event) -> bool {
        self.last_rv = event.rv;
        match self.filter.event_type(event) {
            Some(kind) => send_event(&self.tx, kind, &event.object),
            None => !self.tx.is_closed(),
        }
    }
}

/// Sends `{"type":KIND,"object":OBJECT}\n` as frames, so that the object's bytes (in
/// `object`'s chunks) are shared, not copied.
fn send_event(tx: &mpsc::UnboundedSender<Bytes>, kind: &str, object: &[Bytes]) -> bool {
    let start = match kind {
        "ADDED" => Bytes::from_static(br#"{"type":"ADDED","object":"#),
        "MODIFIED" => Bytes::from_static(br#"{"type":"MODIFIED","object":"#),
        "DELETED" => Bytes::from_static(br#"{"type":"DELETED","object":"#),
        "BOOKMARK" => Bytes::from_static(br#"{"type":"BOOKMARK","object":"#),
        "ERROR" => Bytes::from_static(br#"{"type":"ERROR","object":"#),
        other => Bytes::from(format!(r#"{{"type":"{other}","object":"#)),
    };
    tx.send(start).is_ok()
        && object
            .iter()
            .filter(|chunk| !chunk.is_empty())
            .all(|chunk| tx.send(chunk.clone()).is_ok())
        && tx.send(Bytes::from_static(b"}\n")).is_ok()
}

/// `bare` (a stored object) with `apiVersion` and `kind`, as chunks.
fn full_object(resource: Resource, bare: &Bytes) -> [Bytes; 2] {
    if bare.len() <= 2 {
        // `{}`: nothing follows the prefix's comma. Never stored (objects have metadata).
        let prefix = resource.object_prefix();
        let mut v = prefix[..prefix.len() - 1].to_vec();
        v.push(b'}');
        return [Bytes::from(v), Bytes::new()];
    }
    [
        Bytes::from_static(resource.object_prefix()),
        bare.slice(1..),
    ]
}

fn concat(chunks: &[Bytes]) -> Bytes {
    let mut v = Vec::with_capacity(chunks.iter().map(Bytes::len).sum());
    for c in chunks {
        v.extend_from_slice(c);
    }
    Bytes::from(v)
}

impl State {
    fn put(&mut self, resource: Resource, object: Value) -> u64 {
        let Value::Object(mut object) = object else {
            panic!("apply: the object must be a JSON object");
        };
        let mut metadata = match object.remove("metadata") {
            Some(Value::Object(m)) => m,
            _ => panic!("apply: the object needs metadata"),
        };
        let Some(name) = metadata
            .get("name")
            .and_then(Value::as_str)
            .map(str::to_owned)
        else {
            panic!("apply: the object needs metadata.name");
        };
        let namespace = match metadata.get("namespace").and_then(Value::as_str) {
            Some(ns) if resource.namespaced() && !ns.is_empty() => ns.to_owned(),
            _ if resource.namespaced() => {
                panic!("apply: a namespaced object needs metadata.namespace")
            }
            _ => String::new(),
        };
        let key = store_key(resource, &namespace, &name);
        object.remove("apiVersion");
        object.remove("kind");
        self.rv += 1;
        let rv = self.rv;
        let labels = labels_of(&metadata);
        let store = &mut self.stores[resource.index()];
        let (uid, created, generation, kind, labels_before) = match store.objects.get(&key) {
            Some(old) => (
                old.uid.clone(),
                old.created.clone(),
                old.generation + u64::from(old.spec().as_ref() != object.get("spec")),
                EventKind::Modified,
                Some(old.labels.clone()),
            ),
            None => (
                new_uid(&name, rv),
                rfc3339(SystemTime::now()),
                1,
                EventKind::Added,
                None,
            ),
        };
        // kube-apiserver's order: the server-set fields after the name, then the rest.
        let mut meta = Map::new();
        meta.insert("name".into(), Value::String(name.clone()));
        if resource.namespaced() {
            meta.insert("namespace".into(), Value::String(namespace.clone()));
        }
        meta.insert("uid".into(), Value::String(uid.clone()));
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
        meta.insert("generation".into(), Value::from(generation));
        meta.insert("creationTimestamp".into(), Value::String(created.clone()));
        for field in [
            "name",
            "namespace",
            "uid",
            "resourceVersion",
            "generation",
            "creationTimestamp",
        ] {
            metadata.remove(field);
        }
        meta.extend(metadata);
        let mut bare = Map::new();
        bare.insert("metadata".into(), Value::Object(meta));
        bare.extend(object);
        let bare = Bytes::from(
            serde_json::to_vec(&Value::Object(bare)).expect("a JSON value always serializes"),
        );
        let event = Event {
            rv,
            kind,
            name: name.clone(),
            namespace: namespace.clone(),
            labels: labels.clone(),
            labels_before,
            object: full_object(resource, &bare),
        };
        store.objects.insert(
            key,
            Stored {
                name,
                namespace,
                bare,
                uid,
                created,
                generation,
                labels,
            },
        );
        self.publish(resource, event);
        rv
    }

    fn delete(&mut self, resource: Resource, name: &str) -> bool {
        let Some(old) = self.stores[resource.index()].objects.remove(name) else {
            return false;
        };
        self.rv += 1;
        let rv = self.rv;
        // The last state, at the deletion's resourceVersion (as kube-apiserver sends it).
        let mut value: Value = match serde_json::from_slice(&old.bare) {
            Ok(v) => v,
            Err(e) => panic!("a stored object is JSON: {e}"),
        };
        value["metadata"]["resourceVersion"] = Value::String(rv.to_string());
        let bare = Bytes::from(serde_json::to_vec(&value).expect("a JSON value always serializes"));
        let event = Event {
            rv,
            kind: EventKind::Deleted,
            name: old.name,
            namespace: old.namespace,
            labels: old.labels,
            labels_before: None,
            object: full_object(resource, &bare),
        };
        self.publish(resource, event);
        true
    }

    /// Keeps `event` in history and sends it to the open watches of `resource`.
    fn publish(&mut self, resource: Resource, event: Event) {
        let event = Arc::new(event);
        self.watchers
            .retain_mut(|w| w.resource != resource || w.send(&event));
        self.stores[resource.index()].history.push(event);
    }

    fn bookmark(&mut self) {
        let rv = self.rv;
        self.watchers.retain_mut(|w| {
            if !w.bookmarks {
                return !w.tx.is_closed();
            }
            w.last_rv = rv;
            send_event(&w.tx, "BOOKMARK", &[bookmark_object(w.resource, rv, false)])
        });
    }

    fn compact(&mut self) {
        // kube-apiserver's compactor writes its own key before compacting etcd, so
        // compaction itself moves the resourceVersion on.
        self.rv += 1;
        self.compacted = self.rv;
        for store in &mut self.stores {
            store.history.clear();
        }
        let compacted = self.compacted;
        for w in self.watchers.drain(..) {
            let _ = send_event(&w.tx, "ERROR", &[too_old(w.last_rv, compacted)]);
            // Dropping the sender ends the stream once the ERROR event is out.
        }
    }
}

fn bookmark_object(resource: Resource, rv: u64, initial_events_end: bool) -> Bytes {
    let mut metadata = json!({"resourceVersion": rv.to_string()});
    if initial_events_end {
        metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let object = json!({
        "kind": resource.kind(),
        "apiVersion": resource.api_version(),
        "metadata": metadata,
    });
    Bytes::from(object.to_string())
}

/// The Status in the ERROR event of a watch from before the last compaction.
fn too_old(rv: u64, compacted: u64) -> Bytes {
    let status = status_json(
        410,
        "Expired",
        &format!("too old resource version: {rv} ({compacted})"),
        None,
    );
    Bytes::from(status.to_string())
}

/// Where an object is stored: by name, or `namespace/name` in a namespaced resource (the order
/// of etcd's keys, which lists follow).
fn store_key(resource: Resource, namespace: &str, name: &str) -> String {
    if resource.namespaced() {
        format!("{namespace}/{name}")
    } else {
        name.to_owned()
    }
}

fn labels_of(metadata: &Map<String, Value>) -> BTreeMap<String, String> {
    metadata
        .get("labels")
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// A version-4-shaped uid, random per process (RandomState's keys are).
fn new_uid(name: &str, rv: u64) -> String {
    let state = std::collections::hash_map::RandomState::new();
    let a = state.hash_one((name, rv, SystemTime::now()));
    let b = state.hash_one((rv, a));
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        0x8000 | ((b >> 48) & 0x3fff),
        b & 0xffff_ffff_ffff
    )
}

/// `2006-01-02T15:04:05Z` in UTC, as metav1.Time serializes.
fn rfc3339(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

// ---------------------------------------------------------------------------------------
// Selectors

/// A field and label selector, and the namespace of the path.
#[derive(Debug, Default, Clone)]
struct Filter {
    /// The name a watch by path (`…/plural/NAME?watch=true`) is limited to.
    name: Option<String>,
    /// The namespace of the path (`…/namespaces/NS/plural`).
    namespace: Option<String>,
    /// `metadata.name` terms: equal or not, the value.
    fields: Vec<(bool, String)>,
    /// `metadata.namespace` terms (every cluster-scoped object's namespace is "").
    namespaces: Vec<(bool, String)>,
    labels: Vec<LabelRequirement>,
}

#[derive(Debug, Clone)]
enum LabelRequirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

impl Filter {
    fn parse(
        params: &Params,
        name: Option<&str>,
        namespace: Option<&str>,
    ) -> Result<Filter, ApiError> {
        let mut filter = Filter {
            name: name.map(str::to_owned),
            namespace: namespace.map(str::to_owned),
            ..Filter::default()
        };
        if let Some(fields) = params.get("fieldSelector") {
            for term in fields.split(',').map(str::trim).filter(|t| !t.is_empty()) {
                let (field, equal, value) = if let Some((f, v)) = term.split_once("!=") {
                    (f, false, v)
                } else if let Some((f, v)) = term.split_once("==") {
                    (f, true, v)
                } else if let Some((f, v)) = term.split_once('=') {
                    (f, true, v)
                } else {
                    return Err(ApiError::bad_request(format!(
                        "invalid selector: '{fields}'; can't understand '{term}'"
                    )));
                };
                match field.trim() {
                    "metadata.name" => filter.fields.push((equal, value.trim().to_owned())),
                    "metadata.namespace" => {
                        filter.namespaces.push((equal, value.trim().to_owned()));
                    }
                    other => {
                        return Err(ApiError::bad_request(format!(
                            "field label not supported: {other}"
                        )));
                    }
                }
            }
        }
        if let Some(labels) = params.get("labelSelector") {
            filter.labels = parse_label_selector(labels)?;
        }
        Ok(filter)
    }

    fn is_empty(&self) -> bool {
        self.name.is_none()
            && self.fields.is_empty()
            && self.namespaces.is_empty()
            && self.labels.is_empty()
    }

    fn matches(&self, namespace: &str, name: &str, labels: &BTreeMap<String, String>) -> bool {
        self.name.as_deref().is_none_or(|n| n == name)
            && self.namespace.as_deref().is_none_or(|n| n == namespace)
            && self.fields.iter().all(|(eq, v)| (v == name) == *eq)
            && self
                .namespaces
                .iter()
                .all(|(eq, v)| (v == namespace) == *eq)
            && self.labels.iter().all(|r| r.matches(labels))
    }

    /// What a watch with this filter sees of `event`, as kube-apiserver's watch cache
    /// decides: a modification that moves the object into the selection is ADDED, out of it
    /// DELETED.
    fn event_type(&self, event: &Event) -> Option<&'static str> {
        let now = self.matches(&event.namespace, &event.name, &event.labels);
        match event.kind {
            EventKind::Added => now.then_some("ADDED"),
            EventKind::Deleted => now.then_some("DELETED"),
            EventKind::Modified => {
                let before = event
                    .labels_before
                    .as_ref()
                    .is_none_or(|l| self.matches(&event.namespace, &event.name, l));
                match (before, now) {
                    (true, true) => Some("MODIFIED"),
                    (false, true) => Some("ADDED"),
                    (true, false) => Some("DELETED"),
                    (false, false) => None,
                }
            }
        }
    }
}

impl LabelRequirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            LabelRequirement::Equals(k, v) => labels.get(k) == Some(v),
            LabelRequirement::NotEquals(k, v) => labels.get(k) != Some(v),
            LabelRequirement::In(k, vs) => labels.get(k).is_some_and(|l| vs.contains(l)),
            LabelRequirement::NotIn(k, vs) => labels.get(k).is_none_or(|l| !vs.contains(l)),
            LabelRequirement::Exists(k) => labels.contains_key(k),
            LabelRequirement::NotExists(k) => !labels.contains_key(k),
        }
    }
}

/// Parses the label selector forms kube-apiserver accepts: `k=v`, `k==v`, `k!=v`,
/// `k in (a,b)`, `k notin (a,b)`, `k`, `!k`, joined by commas.
fn parse_label_selector(selector: &str) -> Result<Vec<LabelRequirement>, ApiError> {
    let mut terms = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in selector.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                terms.push(&selector[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&selector[start..]);
    let bad = |term: &str| {
        ApiError::bad_request(format!(
            "unable to parse requirement: found '{term}', expected: a label selector requirement"
        ))
    };
    let set = |values: &str, term: &str| -> Result<Vec<String>, ApiError> {
        let values = values.trim();
        let inner = values
            .strip_prefix('(')
            .and_then(|v| v.strip_suffix(')'))
            .ok_or_else(|| bad(term))?;
        Ok(inner.split(',').map(|v| v.trim().to_owned()).collect())
    };
    let mut requirements = Vec::new();
    for term in terms.into_iter().map(str::trim).filter(|t| !t.is_empty()) {
        let requirement = if let Some(key) = term.strip_prefix('!') {
            LabelRequirement::NotExists(key.trim().to_owned())
        } else if let Some((k, v)) = term.split_once("!=") {
            LabelRequirement::NotEquals(k.trim().to_owned(), v.trim().to_owned())
        } else if let Some((k, v)) = term.split_once("==") {
            LabelRequirement::Equals(k.trim().to_owned(), v.trim().to_owned())
        } else if let Some((k, v)) = term.split_once('=') {
            LabelRequirement::Equals(k.trim().to_owned(), v.trim().to_owned())
        } else if let Some((k, v)) = term.split_once(" notin ") {
            LabelRequirement::NotIn(k.trim().to_owned(), set(v, term)?)
        } else if let Some((k, v)) = term.split_once(" in ") {
            LabelRequirement::In(k.trim().to_owned(), set(v, term)?)
        } else if term.contains(char::is_whitespace) || term.contains(['(', ')']) {
            return Err(bad(term));
        } else {
            LabelRequirement::Exists(term.to_owned())
        };
        requirements.push(requirement);
    }
    Ok(requirements)
}

// ---------------------------------------------------------------------------------------
// Errors as kube-apiserver's Status

/// An error answer: HTTP code and Status body.
struct ApiError {
    code: u16,
    status: Value,
}

impl ApiError {
    fn new(code: u16, reason: &str, message: &str, details: Option<Value>) -> ApiError {
        ApiError {
            code,
            status: status_json(code, reason, message, details),
        }
    }

    fn bad_request(message: String) -> ApiError {
        ApiError::new(400, "BadRequest", &message, None)
    }

    /// A path that names no resource served here.
    fn no_such_resource() -> ApiError {
        ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
            Some(json!({})),
        )
    }

    fn not_found(resource: Resource, name: &str) -> ApiError {
        ApiError::new(
            404,
            "NotFound",
            &format!("{} \"{name}\" not found", resource.qualified()),
            Some(details(resource, Some(name))),
        )
    }

    fn unauthorized() -> ApiError {
        ApiError::new(401, "Unauthorized", "Unauthorized", None)
    }

    /// An injected fault of HTTP `code`, worded as kube-apiserver words it.
    fn injected(
        resource: Resource,
        verb: Verb,
        namespace: Option<&str>,
        name: Option<&str>,
        code: u16,
    ) -> ApiError {
        let what = match name {
            Some(name) => format!("{} \"{name}\"", resource.qualified()),
            None => resource.qualified(),
        };
        match code {
            400 => ApiError::new(
                400,
                "BadRequest",
                "the server rejected our request for an unknown reason",
                None,
            ),
            401 => ApiError::unauthorized(),
            403 => ApiError::new(
                403,
                "Forbidden",
                &format!(
                    "{what} is forbidden: User \"{FORBIDDEN_USER}\" cannot {} resource \"{}\" in API group \"{}\" {}",
                    verb.as_str(),
                    resource.plural(),
                    resource.group(),
                    namespace.map_or("at the cluster scope".to_string(), |ns| format!(
                        "in the namespace \"{ns}\""
                    ))
                ),
                Some(details(resource, name)),
            ),
            404 => match name {
                Some(name) => ApiError::not_found(resource, name),
                None => ApiError::no_such_resource(),
            },
            405 => ApiError::method_not_allowed(),
            409 => ApiError::new(
                409,
                "Conflict",
                &format!(
                    "Operation cannot be fulfilled on {what}: the object has been modified; please apply your changes to the latest version and try again"
                ),
                Some(details(resource, name)),
            ),
            410 => ApiError::new(
                410,
                "Expired",
                "The resourceVersion for the provided list is too old.",
                None,
            ),
            422 => ApiError::new(
                422,
                "Invalid",
                &format!("{what} is invalid"),
                Some(details(resource, name)),
            ),
            429 => ApiError::new(
                429,
                "TooManyRequests",
                "Too many requests, please try again later.",
                Some(json!({"retryAfterSeconds": 1})),
            ),
            500 => ApiError::new(
                500,
                "InternalError",
                "Internal error occurred: etcdserver: request timed out",
                Some(json!({"causes": [{"message": "etcdserver: request timed out"}]})),
            ),
            503 => ApiError::new(
                503,
                "ServiceUnavailable",
                "the server is currently unable to handle the request",
                Some(details(resource, name)),
            ),
            504 => ApiError::new(
                504,
                "Timeout",
                "Timeout: request did not complete within requested timeout - context deadline exceeded",
                Some(json!({})),
            ),
            other => ApiError::new(
                other,
                "",
                &format!(
                    "an error on the server (\"unknown\") has prevented the request from succeeding ({} {})",
                    verb.as_str(),
                    resource.qualified()
                ),
                Some(
                    json!({"causes": [{"reason": "UnexpectedServerResponse", "message": "unknown"}]}),
                ),
            ),
        }
    }

    fn method_not_allowed() -> ApiError {
        ApiError::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
            Some(json!({})),
        )
    }

    fn response(&self) -> Response<Body> {
        let mut response = json_response(self.code, Bytes::from(self.status.to_string()));
        if self.code == 429 {
            response
                .headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response
    }
}

fn details(resource: Resource, name: Option<&str>) -> Value {
    let mut details = Map::new();
    if let Some(name) = name {
        details.insert("name".into(), Value::String(name.to_owned()));
    }
    details.insert("group".into(), Value::String(resource.group().to_owned()));
    details.insert("kind".into(), Value::String(resource.plural().to_owned()));
    Value::Object(details)
}

fn status_json(code: u16, reason: &str, message: &str, details: Option<Value>) -> Value {
    let mut status = Map::new();
    status.insert("kind".into(), json!("Status"));
    status.insert("apiVersion".into(), json!("v1"));
    status.insert("metadata".into(), json!({}));
    status.insert("status".into(), json!("Failure"));
    status.insert("message".into(), json!(message));
    if !reason.is_empty() {
        status.insert("reason".into(), json!(reason));
    }
    if let Some(details) = details {
        status.insert("details".into(), details);
    }
    status.insert("code".into(), json!(code));
    Value::Object(status)
}

// ---------------------------------------------------------------------------------------
// HTTP

/// The response body: whole chunks (lists, objects, errors) or a watch's event stream.
struct Body {
    kind: BodyKind,
}

enum BodyKind {
    Chunks {
        chunks: VecDeque<Bytes>,
        len: u64,
    },
    Watch {
        rx: mpsc::UnboundedReceiver<Bytes>,
        /// `timeoutSeconds`: the stream ends cleanly then.
        deadline: Option<Pin<Box<Sleep>>>,
        done: bool,
    },
}

impl Body {
    fn chunks(chunks: Vec<Bytes>) -> Body {
        let len = chunks.iter().map(|c| c.len() as u64).sum();
        Body {
            kind: BodyKind::Chunks {
                chunks: chunks.into_iter().filter(|c| !c.is_empty()).collect(),
                len,
            },
        }
    }
}

impl hyper::body::Body for Body {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match &mut self.get_mut().kind {
            BodyKind::Chunks { chunks, len } => {
                let chunk = chunks.pop_front();
                if let Some(c) = &chunk {
                    *len -= c.len() as u64;
                }
                Poll::Ready(chunk.map(|c| Ok(Frame::data(c))))
            }
            BodyKind::Watch { rx, deadline, done } => {
                if *done {
                    return Poll::Ready(None);
                }
                match rx.poll_recv(cx) {
                    Poll::Ready(Some(chunk)) => return Poll::Ready(Some(Ok(Frame::data(chunk)))),
                    Poll::Ready(None) => {
                        *done = true;
                        return Poll::Ready(None);
                    }
                    Poll::Pending => {}
                }
                if let Some(d) = deadline
                    && d.as_mut().poll(cx).is_ready()
                {
                    *done = true;
                    // Closing marks the watch as gone for the server's bookkeeping.
                    rx.close();
                    return Poll::Ready(None);
                }
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            BodyKind::Chunks { chunks, .. } => chunks.is_empty(),
            BodyKind::Watch { done, .. } => *done,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            BodyKind::Chunks { len, .. } => SizeHint::with_exact(*len),
            BodyKind::Watch { .. } => SizeHint::default(),
        }
    }
}

fn json_response(code: u16, body: Bytes) -> Response<Body> {
    chunks_response(code, vec![body])
}

fn chunks_response(code: u16, chunks: Vec<Bytes>) -> Response<Body> {
    let body = Body::chunks(chunks);
    let len = hyper::body::Body::size_hint(&body).exact().unwrap_or(0);
    let mut response = Response::new(body);
    *response.status_mut() =
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(CONTENT_LENGTH, HeaderValue::from(len));
    response
}

/// Spawns into the server's task set, so that HTTP/2 streams (which hyper runs as tasks of
/// their own) are cut with their connection when the server goes down.
#[derive(Clone)]
struct TrackedExecutor(Arc<Shared>);

impl<F> hyper::rt::Executor<F> for TrackedExecutor
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, fut: F) {
        let mut tasks = lock(&self.0.tasks);
        if !tasks.down {
            tasks.set.spawn(async move {
                let _ = fut.await;
            });
        }
    }
}

async fn accept_loop(listener: TcpListener, acceptor: TlsAcceptor, shared: Arc<Shared>) {
    let builder = Arc::new(auto::Builder::new(TrackedExecutor(shared.clone())));
    loop {
        let (tcp, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(_) => {
                // Out of file descriptors and the like: pause instead of spinning.
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let mut tasks = lock(&shared.tasks);
        // Reap finished connections so the set does not grow without bound.
        while tasks.set.try_join_next().is_some() {}
        if tasks.down {
            // Closed at once, without a TLS handshake or an answer.
            drop(tcp);
            continue;
        }
        let acceptor = acceptor.clone();
        let builder = builder.clone();
        let shared = shared.clone();
        tasks.set.spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            let service = hyper::service::service_fn(move |req| handle(shared.clone(), req));
            let _ = builder.serve_connection(TokioIo::new(tls), service).await;
        });
    }
}

/// Query parameters, percent-decoded; the first of a repeated name wins.
struct Params(Vec<(String, String)>);

impl Params {
    fn parse(query: &str) -> Params {
        Params(
            query
                .split('&')
                .filter(|p| !p.is_empty())
                .map(|pair| {
                    let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                    (percent_decode(k), percent_decode(v))
                })
                .collect(),
        )
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// A boolean as Go's strconv.ParseBool reads it; absent or unreadable is false.
    fn flag(&self, name: &str) -> bool {
        matches!(
            self.get(name),
            Some("1" | "t" | "T" | "true" | "TRUE" | "True")
        )
    }
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                match std::str::from_utf8(&bytes[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// What a path names: a resource's collection (in a namespace, or all), or one object.
struct Target {
    resource: Resource,
    namespace: Option<String>,
    name: Option<String>,
}

impl Target {
    /// The store's key of the object named.
    fn key(&self) -> Option<String> {
        let name = self.name.as_deref()?;
        Some(store_key(
            self.resource,
            self.namespace.as_deref().unwrap_or(""),
            name,
        ))
    }
}

/// `/apis/{group}/{version}` or the core group's `/api/{version}`, then
/// `[namespaces/{namespace}/]{plural}[/{name}]`: a namespace only for a namespaced resource,
/// and one object of it only in a namespace.
fn route(path: &str) -> Option<Target> {
    let (group, rest) = match path.strip_prefix("/apis/") {
        Some(rest) => rest.split_once('/')?,
        None => ("", path.strip_prefix("/api/")?),
    };
    let parts: Vec<&str> = rest.trim_end_matches('/').split('/').collect();
    let (version, namespace, tail) = match parts.as_slice() {
        [version, "namespaces", namespace, tail @ ..] if !tail.is_empty() => {
            (*version, Some(percent_decode(namespace)), tail)
        }
        [version, tail @ ..] => (*version, None, tail),
        [] => return None,
    };
    let (plural, name) = match tail {
        [plural] => (*plural, None),
        [plural, name] if !name.is_empty() => (*plural, Some(percent_decode(name))),
        _ => return None,
    };
    let resource = Resource::from_path(group, version, plural)?;
    if namespace.is_some() != resource.namespaced() && (namespace.is_some() || name.is_some()) {
        return None;
    }
    Some(Target {
        resource,
        namespace,
        name,
    })
}

async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    let authorization = req
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let token = authorization
        .as_deref()
        .and_then(|a| a.strip_prefix("Bearer "));
    // kube-apiserver authenticates before it routes: a bad token is a 401 on any path.
    let authenticated = token.is_some_and(|t| {
        t == FakeApiServer::TOKEN || lock(&shared.state).tokens.iter().any(|k| k == t)
    });
    if let Some(name) = req.uri().path().strip_prefix(WEBHOOK_CONFIGURATIONS_PATH) {
        let name = percent_decode(name);
        return Ok(webhook_configuration(&shared, req, name, authenticated).await);
    }
    if let Some(target) = WriteTarget::parse(req.uri().path()) {
        return Ok(write(&shared, req, target, authenticated).await);
    }
    let path = req.uri().path();
    if path == openapi::INDEX || path.starts_with("/openapi/") {
        if !authenticated {
            return Ok(ApiError::unauthorized().response());
        }
        if req.method() != Method::GET {
            return Ok(ApiError::method_not_allowed().response());
        }
        let query = req.uri().query().unwrap_or("");
        return Ok(lock(&shared.state).openapi.answer(path, query));
    }
    let Some(target) = route(req.uri().path()) else {
        let error = if authenticated {
            ApiError::no_such_resource()
        } else {
            ApiError::unauthorized()
        };
        return Ok(error.response());
    };
    let query = req.uri().query().unwrap_or("").to_owned();
    let params = Params::parse(&query);
    let verb = if params.flag("watch") {
        Verb::Watch
    } else if target.name.is_some() {
        Verb::Get
    } else {
        Verb::List
    };
    let record = Recorded {
        verb,
        resource: target.resource,
        name: target.name.clone(),
        namespace: target.namespace.clone(),
        query,
        authorization,
        status: 0,
        list_source: None,
    };
    if !authenticated {
        let mut state = lock(&shared.state);
        return Ok(answer(&mut state, record, Err(ApiError::unauthorized())));
    }
    if req.method() != Method::GET {
        return Ok(ApiError::method_not_allowed().response());
    }
    let delay = lock(&shared.state).delays.get(&verb).copied();
    if let Some(delay) = delay {
        tokio::time::sleep(delay).await;
    }
    let (response, cost) = {
        let mut state = lock(&shared.state);
        let fault = state.faults.get(&(target.resource, verb)).copied();
        let mut record = record;
        let mut cost = Duration::ZERO;
        let result = match fault {
            Some(code) => Err(ApiError::injected(
                target.resource,
                verb,
                target.namespace.as_deref(),
                target.name.as_deref(),
                code,
            )),
            None => match verb {
                Verb::List => list(&state, &target, &params).map(|(response, listed)| {
                    record.list_source = Some(listed.source);
                    if listed.source == ListSource::Etcd {
                        cost = state.page_cost.of(listed.objects);
                    }
                    response
                }),
                Verb::Get => get(&state, &target),
                Verb::Watch => watch(&mut state, &target, &params),
            },
        };
        (answer(&mut state, record, result), cost)
    };
    // The page was read at its resourceVersion; reading it from etcd takes this long.
    if !cost.is_zero() {
        tokio::time::sleep(cost).await;
    }
    Ok(response)
}

/// The response for `result`, with the request recorded under the status answered.
fn answer(
    state: &mut State,
    record: Recorded,
    result: Result<Response<Body>, ApiError>,
) -> Response<Body> {
    let response = match result {
        Ok(response) => response,
        Err(e) => e.response(),
    };
    state.requests.push(Recorded {
        status: response.status().as_u16(),
        ..record
    });
    response
}

fn get(state: &State, target: &Target) -> Result<Response<Body>, ApiError> {
    let resource = target.resource;
    let name = target.name.as_deref().unwrap_or("");
    let stored = target
        .key()
        .and_then(|key| state.stores[resource.index()].objects.get(&key))
        .ok_or_else(|| ApiError::not_found(resource, name))?;
    Ok(chunks_response(
        200,
        full_object(resource, &stored.bare).to_vec(),
    ))
}

/// The list `continue` token kube-apiserver sends: base64url of
/// `{"v":"meta.k8s.io/v1","rv":RV,"start":"LASTNAME\u0000"}`.
fn continue_token(rv: u64, last: &str) -> String {
    let token = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": format!("{last}\0")});
    URL_SAFE_NO_PAD.encode(token.to_string())
}

fn parse_continue(token: &str) -> Result<(u64, String), ApiError> {
    let invalid = |why: &str| ApiError::bad_request(format!("continue key is not valid: {why}"));
    let raw = URL_SAFE_NO_PAD
        .decode(token.trim_end_matches('='))
        .map_err(|_| invalid("illegal base64 data"))?;
    let value: Value = serde_json::from_slice(&raw).map_err(|_| invalid("not JSON"))?;
    if value["v"] != "meta.k8s.io/v1" {
        return Err(invalid("server does not recognize this encoded key"));
    }
    let rv = value["rv"].as_u64().filter(|rv| *rv > 0).ok_or_else(|| {
        invalid("incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
    })?;
    let start = value["start"]
        .as_str()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| invalid("encoded start key empty"))?;
    Ok((rv, start.to_owned()))
}

/// What a list answered: where from, and how many objects.
struct Listed {
    source: ListSource,
    objects: usize,
}

/// Where kube-apiserver 1.28 serves a list with these parameters from: its cacher's
/// `shouldDelegateList` (the ConsistentListFromCache feature off, as in 1.28).
fn list_source(params: &Params, limit: Option<usize>, watch_cache: bool) -> ListSource {
    let rv = params.get("resourceVersion").unwrap_or("");
    let continued = params.get("continue").is_some_and(|c| !c.is_empty());
    let exact = params
        .get("resourceVersionMatch")
        .is_some_and(|m| !m.is_empty() && m != "NotOlderThan");
    if !watch_cache || rv.is_empty() || continued || (limit.is_some() && rv != "0") || exact {
        ListSource::Etcd
    } else {
        ListSource::WatchCache
    }
}

fn list(
    state: &State,
    target: &Target,
    params: &Params,
) -> Result<(Response<Body>, Listed), ApiError> {
    let resource = target.resource;
    let filter = Filter::parse(params, None, target.namespace.as_deref())?;
    let limit = match params.get("limit") {
        None | Some("") => None,
        Some(l) => l
            .parse::<i64>()
            .map_err(|_| ApiError::bad_request(format!("limit: Invalid value: \"{l}\"")))
            .map(|l| usize::try_from(l).ok().filter(|l| *l > 0))?,
    };
    let source = list_source(params, limit, !state.no_watch_cache);
    // The watch cache ignores `limit`: the whole list in one response.
    let limit = limit.filter(|_| source == ListSource::Etcd);
    let (list_rv, start) = match params.get("continue").filter(|c| !c.is_empty()) {
        Some(token) => {
            let (rv, start) = parse_continue(token)?;
            if rv < state.compacted {
                return Err(ApiError::new(
                    410,
                    "Expired",
                    "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
                    None,
                ));
            }
            (rv, Bound::Included(start))
        }
        None => (state.rv, Bound::Unbounded),
    };
    let store = &state.stores[resource.index()];
    let mut matching = store
        .objects
        .range::<String, _>((start, Bound::Unbounded))
        .filter(|(_, s)| filter.matches(&s.namespace, &s.name, &s.labels));
    let mut items = Vec::new();
    let mut last = None;
    for (name, stored) in matching.by_ref() {
        items.push(stored);
        last = Some(name);
        if limit.is_some_and(|l| items.len() >= l) {
            break;
        }
    }
    let remaining = matching.count();
    let mut metadata = Map::new();
    metadata.insert("resourceVersion".into(), Value::String(list_rv.to_string()));
    if remaining > 0
        && let Some(last) = last
    {
        metadata.insert(
            "continue".into(),
            Value::String(continue_token(list_rv, last)),
        );
        // kube-apiserver can count what is left only without a selector.
        if filter.is_empty() {
            metadata.insert("remainingItemCount".into(), Value::from(remaining));
        }
    }
    let head = format!(
        r#"{{"kind":"{}","apiVersion":"{}","metadata":{},"items":["#,
        resource.list_kind(),
        resource.api_version(),
        Value::Object(metadata)
    );
    let mut chunks = Vec::with_capacity(items.len() * 3 + 2);
    chunks.push(Bytes::from(head));
    for (i, stored) in items.iter().enumerate() {
        if i > 0 {
            chunks.push(Bytes::from_static(b","));
        }
        if resource.typed_list_items() {
            chunks.extend(full_object(resource, &stored.bare));
        } else {
            chunks.push(stored.bare.clone());
        }
    }
    chunks.push(Bytes::from_static(b"]}"));
    let listed = Listed {
        source,
        objects: items.len(),
    };
    Ok((chunks_response(200, chunks), listed))
}

fn watch(state: &mut State, target: &Target, params: &Params) -> Result<Response<Body>, ApiError> {
    let resource = target.resource;
    let filter = Filter::parse(params, target.name.as_deref(), target.namespace.as_deref())?;
    let from = match params.get("resourceVersion") {
        None | Some("" | "0") => None,
        Some(rv) => Some(rv.parse::<u64>().map_err(|_| {
            ApiError::new(
                400,
                "BadRequest",
                &format!(
                    "resourceVersion: Invalid value: \"{rv}\": must be a valid resourceVersion"
                ),
                None,
            )
        })?),
    };
    let timeout = match params.get("timeoutSeconds") {
        None | Some("") => None,
        Some(t) => Some(t.parse::<u64>().map_err(|_| {
            ApiError::bad_request(format!("timeoutSeconds: Invalid value: \"{t}\""))
        })?),
    };
    let bookmarks = params.flag("allowWatchBookmarks");
    let (tx, rx) = mpsc::unbounded_channel();
    let body = Body {
        kind: BodyKind::Watch {
            rx,
            deadline: timeout
                .filter(|t| *t > 0)
                .map(|t| Box::pin(tokio::time::sleep(Duration::from_secs(t)))),
            done: false,
        },
    };
    let mut response = Response::new(body);
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let streaming_list = params.flag("sendInitialEvents");
    match from.filter(|_| !streaming_list) {
        // No resourceVersion (or "0"), or a streaming list: the current state as ADDED
        // events (a streaming list's end marked by a bookmark), then changes.
        None => {
            for stored in state.stores[resource.index()].objects.values() {
                if filter.matches(&stored.namespace, &stored.name, &stored.labels) {
                    send_event(&tx, "ADDED", &full_object(resource, &stored.bare));
                }
            }
            if streaming_list && bookmarks {
                let end = bookmark_object(resource, state.rv, true);
                send_event(&tx, "BOOKMARK", &[end]);
            }
        }
        // kube-apiserver answers 200 and then the ERROR event.
        Some(rv) if rv < state.compacted => {
            send_event(&tx, "ERROR", &[too_old(rv, state.compacted)]);
            return Ok(response);
        }
        // Every change after `rv`, then the changes to come.
        Some(rv) => {
            for event in state.stores[resource.index()]
                .history
                .iter()
                .filter(|e| e.rv > rv)
            {
                if let Some(kind) = filter.event_type(event) {
                    send_event(&tx, kind, &event.object);
                }
            }
        }
    }
    state.watchers.push(Watcher {
        resource,
        filter,
        bookmarks,
        last_rv: from.filter(|_| !streaming_list).unwrap_or(state.rv),
        tx,
    });
    Ok(response)
}

// ---------------------------------------------------------------------------------------
// TLS

/// A CA and a serving certificate it issued (SAN IP 127.0.0.1, DNS localhost), and the
/// rustls config serving it with ALPN h2 and http/1.1.
fn tls_config() -> (String, Arc<rustls::ServerConfig>) {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "fake-apiserver-ca");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().expect("a CA key"))
        .expect("a CA certificate");
    let mut params = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
        .expect("serving certificate params");
    params
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let key = KeyPair::generate().expect("a serving key");
    let cert = params.signed_by(&key, &ca).expect("a serving certificate");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .expect("a serving certificate and key");
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    (ca.pem(), Arc::new(config))
}

// ---------------------------------------------------------------------------------------
// ValidatingWebhookConfigurations: get and JSON merge patch of one object

const WEBHOOK_CONFIGURATIONS_PATH: &str =
    "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/";

async fn webhook_configuration(
    shared: &Arc<Shared>,
    req: Request<Incoming>,
    name: String,
    authenticated: bool,
) -> Response<Body> {
    use http_body_util::BodyExt as _;
    let method = req.method().clone();
    let content_type = req
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let mut state = lock(&shared.state);
    let result = if !authenticated {
        Err(ApiError::unauthorized())
    } else if let Some(code) = state.webhook_configuration_faults.get(&method).copied() {
        let verb = if method == Method::PATCH {
            "patch"
        } else {
            "get"
        };
        Err(webhook_configuration_error(code, verb, &name))
    } else if method == Method::GET {
        state
            .webhook_configurations
            .get(&name)
            .map(|o| json_response(200, Bytes::from(o.to_string())))
            .ok_or_else(|| webhook_configuration_error(404, "get", &name))
    } else if method == Method::PATCH {
        patch_webhook_configuration(&mut state, &name, &content_type, &body)
    } else {
        Err(ApiError::method_not_allowed())
    };
    let response = result.unwrap_or_else(|e| e.response());
    let status = response.status().as_u16();
    state
        .webhook_configuration_calls
        .push((method, name, status));
    response
}

fn webhook_configuration_error(code: u16, verb: &str, name: &str) -> ApiError {
    let what = format!("validatingwebhookconfigurations.admissionregistration.k8s.io \"{name}\"");
    let details = json!({"name": name, "group": "admissionregistration.k8s.io", "kind": "validatingwebhookconfigurations"});
    match code {
        404 => ApiError::new(404, "NotFound", &format!("{what} not found"), Some(details)),
        403 => ApiError::new(
            403,
            "Forbidden",
            &format!(
                "{what} is forbidden: User \"{FORBIDDEN_USER}\" cannot {verb} resource \"validatingwebhookconfigurations\" in API group \"admissionregistration.k8s.io\" at the cluster scope"
            ),
            Some(details),
        ),
        409 => ApiError::new(
            409,
            "Conflict",
            &format!(
                "Operation cannot be fulfilled on validatingwebhookconfigurations.admissionregistration.k8s.io \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
            ),
            Some(details),
        ),
        other => ApiError::new(
            other,
            "InternalError",
            "Internal error occurred: etcdserver: request timed out",
            Some(details),
        ),
    }
}

/// A JSON merge patch (RFC 7386), as kube-apiserver applies `application/merge-patch+json`:
/// a `metadata.resourceVersion` in the patch is a precondition (409 when stale), and
/// `caBundle` must be base64, as the API's `[]byte` fields are.
fn patch_webhook_configuration(
    state: &mut State,
    name: &str,
    content_type: &str,
    body: &[u8],
) -> Result<Response<Body>, ApiError> {
    if content_type != "application/merge-patch+json" {
        return Err(ApiError::new(
            415,
            "UnsupportedMediaType",
            &format!(
                "the body of the request was in an unknown format - accepted media types include: application/merge-patch+json; got {content_type}"
            ),
            None,
        ));
    }
    let patch: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
    let Some(current) = state.webhook_configurations.get(name).cloned() else {
        return Err(webhook_configuration_error(404, "patch", name));
    };
    if state.webhook_configuration_conflicts > 0 {
        state.webhook_configuration_conflicts -= 1;
        return Err(webhook_configuration_error(409, "patch", name));
    }
    if let Some(rv) = patch.pointer("/metadata/resourceVersion")
        && Some(rv) != current.pointer("/metadata/resourceVersion")
    {
        return Err(webhook_configuration_error(409, "patch", name));
    }
    let mut patched = current;
    merge_patch(&mut patched, &patch);
    for webhook in patched["webhooks"].as_array().into_iter().flatten() {
        if let Some(bundle) = webhook.pointer("/clientConfig/caBundle") {
            let valid = bundle.as_str().is_some_and(|b| STANDARD.decode(b).is_ok());
            if !valid {
                return Err(ApiError::bad_request(
                    "ValidatingWebhookConfiguration in version \"v1\" cannot be handled as a ValidatingWebhookConfiguration: illegal base64 data".into(),
                ));
            }
        }
    }
    state.rv += 1;
    patched["metadata"]["resourceVersion"] = json!(state.rv.to_string());
    state
        .webhook_configurations
        .insert(name.to_owned(), patched.clone());
    Ok(json_response(200, Bytes::from(patched.to_string())))
}

fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(fields) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    let Value::Object(object) = target else {
        return;
    };
    for (key, value) in fields {
        if value.is_null() {
            object.remove(key);
        } else {
            merge_patch(object.entry(key.clone()).or_insert(Value::Null), value);
        }
    }
}

// ---------------------------------------------------------------------------------------
// What the client writes: Events and policy reports, created, patched (merge or server-side
// apply) and read back

/// The groups whose objects the client may write.
const WRITABLE_GROUPS: [&str; 3] = ["events.k8s.io", "wgpolicyk8s.io", "coordination.k8s.io"];

/// A path in a writable group: `/apis/{group}/{version}/[namespaces/{ns}/]{plural}[/{name}]`.
struct WriteTarget {
    group: String,
    namespace: Option<String>,
    plural: String,
    /// The collection's path.
    collection: String,
    name: Option<String>,
}

impl WriteTarget {
    fn parse(path: &str) -> Option<WriteTarget> {
        let rest = path.strip_prefix("/apis/")?;
        let parts: Vec<&str> = rest.trim_end_matches('/').split('/').collect();
        let group = *parts.first()?;
        if !WRITABLE_GROUPS.contains(&group) {
            return None;
        }
        let (namespace, tail) = match parts.get(2..)? {
            ["namespaces", ns, tail @ ..] => (Some(ns.to_string()), tail),
            tail => (None, tail),
        };
        let (plural, name) = match tail {
            [plural] => (*plural, None),
            [plural, name] => (*plural, Some(percent_decode(name))),
            _ => return None,
        };
        let base = parts[..2].join("/");
        let collection = match &namespace {
            Some(ns) => format!("/apis/{base}/namespaces/{ns}/{plural}"),
            None => format!("/apis/{base}/{plural}"),
        };
        Some(WriteTarget {
            group: group.to_string(),
            namespace,
            plural: plural.to_string(),
            collection,
            name,
        })
    }

    fn object_path(&self, name: &str) -> String {
        format!("{}/{name}", self.collection)
    }

    fn error(&self, code: u16, reason: &str, message: String) -> ApiError {
        let details = json!({"name": self.name, "group": self.group, "kind": self.plural});
        ApiError::new(code, reason, &message, Some(details))
    }

    fn qualified(&self) -> String {
        format!("{}.{}", self.plural, self.group)
    }
}

async fn write(
    shared: &Arc<Shared>,
    req: Request<Incoming>,
    target: WriteTarget,
    authenticated: bool,
) -> Response<Body> {
    use http_body_util::BodyExt as _;
    let method = req.method().clone();
    let content_type = req
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let params = Params::parse(req.uri().query().unwrap_or(""));
    let path = req.uri().path().to_owned();
    let token = req
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|a| a.strip_prefix("Bearer "))
        .map(str::to_owned);
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let mut state = lock(&shared.state);
    let result = if !authenticated {
        Err(ApiError::unauthorized())
    } else if let Some(code) = state.write_faults.get(&target.group).copied() {
        let what = target.qualified();
        Err(match code {
            403 => target.error(
                403,
                "Forbidden",
                format!(
                    "{what} is forbidden: User \"{FORBIDDEN_USER}\" cannot {} resource \"{}\" in API group \"{}\"{}",
                    write_verb(&method, target.name.is_some()),
                    target.plural,
                    target.group,
                    target
                        .namespace
                        .as_deref()
                        .map_or(" at the cluster scope".to_string(), |ns| format!(" in the namespace \"{ns}\"")),
                ),
            ),
            code => target.error(
                code,
                "InternalError",
                "Internal error occurred: etcdserver: request timed out".to_string(),
            ),
        })
    } else {
        match (&method, &target.name) {
            (&Method::GET, Some(name)) => state
                .written
                .get(&target.object_path(name))
                .map(|o| json_response(200, Bytes::from(o.to_string())))
                .ok_or_else(|| {
                    target.error(
                        404,
                        "NotFound",
                        format!("{} \"{name}\" not found", target.qualified()),
                    )
                }),
            (&Method::POST, None) => create_written(&mut state, &target, &body),
            (&Method::PATCH, Some(name)) => {
                patch_written(&mut state, &target, name, &content_type, &params, &body)
            }
            (&Method::PUT, Some(name)) => replace_written(&mut state, &target, name, &body),
            _ => Err(ApiError::method_not_allowed()),
        }
    };
    let response = result.unwrap_or_else(|e| e.response());
    let status = response.status().as_u16();
    state.write_log.push(WriteCall {
        at: Instant::now(),
        token,
        method: method.clone(),
        path: path.clone(),
        status,
    });
    state.write_calls.push((method, path, content_type, status));
    response
}

fn write_verb(method: &Method, object: bool) -> &'static str {
    match (method.as_str(), object) {
        ("POST", _) => "create",
        ("PATCH", _) => "patch",
        ("GET", true) => "get",
        ("GET", false) => "list",
        _ => "update",
    }
}

/// The server-set metadata of a new object (or of a replaced one, `old`).
fn stamp(state: &mut State, target: &WriteTarget, object: &mut Value, old: Option<&Value>) {
    state.rv += 1;
    let name = object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let uid = old
        .and_then(|o| o["metadata"]["uid"].as_str())
        .map_or_else(|| new_uid(&name, state.rv), str::to_owned);
    let created = old
        .and_then(|o| o["metadata"]["creationTimestamp"].as_str())
        .map_or_else(|| rfc3339(SystemTime::now()), str::to_owned);
    let metadata = &mut object["metadata"];
    metadata["uid"] = json!(uid);
    metadata["resourceVersion"] = json!(state.rv.to_string());
    metadata["creationTimestamp"] = json!(created);
    if let Some(ns) = &target.namespace {
        metadata["namespace"] = json!(ns);
    }
}

fn create_written(
    state: &mut State,
    target: &WriteTarget,
    body: &[u8],
) -> Result<Response<Body>, ApiError> {
    let mut object: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding the object: {e}")))?;
    let Some(name) = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
    else {
        return Err(target.error(
            422,
            "Invalid",
            format!(
                "{} is invalid: metadata.name: Required value: name or generateName is required",
                target.qualified()
            ),
        ));
    };
    if let Some(ns) = object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        && Some(ns) != target.namespace.as_deref()
    {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
                .into(),
        ));
    }
    let path = target.object_path(&name);
    if state.written.contains_key(&path) {
        return Err(target.error(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", target.qualified()),
        ));
    }
    stamp(state, target, &mut object, None);
    state.written.insert(path, object.clone());
    Ok(json_response(201, Bytes::from(object.to_string())))
}

/// A replace (PUT) of an existing object: 404 when missing (kube-apiserver creates on update
/// only for a few kinds, a Lease not among them), 409 Conflict when the object's
/// `metadata.resourceVersion` is not the stored one.
fn replace_written(
    state: &mut State,
    target: &WriteTarget,
    name: &str,
    body: &[u8],
) -> Result<Response<Body>, ApiError> {
    let path = target.object_path(name);
    let mut object: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding the object: {e}")))?;
    if object.pointer("/metadata/name").and_then(Value::as_str) != Some(name) {
        return Err(ApiError::bad_request(
            "the name of the object does not match the name on the URL".into(),
        ));
    }
    let Some(current) = state.written.get(&path).cloned() else {
        return Err(target.error(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", target.qualified()),
        ));
    };
    let sent = object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let stored = current["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default();
    if !sent.is_empty() && sent != stored {
        return Err(target.error(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
                target.qualified()
            ),
        ));
    }
    stamp(state, target, &mut object, Some(&current));
    state.written.insert(path, object.clone());
    Ok(json_response(200, Bytes::from(object.to_string())))
}

/// A JSON merge patch of an existing object, or a server-side apply (which creates it when
/// missing; the applier owns every field it sends, so the object becomes what it sent).
fn patch_written(
    state: &mut State,
    target: &WriteTarget,
    name: &str,
    content_type: &str,
    params: &Params,
    body: &[u8],
) -> Result<Response<Body>, ApiError> {
    let path = target.object_path(name);
    let current = state.written.get(&path).cloned();
    let patch: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
    let (mut object, code) = match content_type {
        "application/merge-patch+json" => {
            let Some(mut object) = current.clone() else {
                return Err(target.error(
                    404,
                    "NotFound",
                    format!("{} \"{name}\" not found", target.qualified()),
                ));
            };
            merge_patch(&mut object, &patch);
            (object, 200)
        }
        "application/apply-patch+yaml" => {
            if params.get("fieldManager").is_none_or(str::is_empty) {
                return Err(ApiError::new(
                    422,
                    "Invalid",
                    "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
                    None,
                ));
            }
            if patch.pointer("/metadata/name").and_then(Value::as_str) != Some(name) {
                return Err(ApiError::bad_request(
                    "the name of the object does not match the name on the URL".into(),
                ));
            }
            (patch, if current.is_some() { 200 } else { 201 })
        }
        other => {
            return Err(ApiError::new(
                415,
                "UnsupportedMediaType",
                &format!(
                    "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml; got {other}"
                ),
                None,
            ));
        }
    };
    stamp(state, target, &mut object, current.as_ref());
    state.written.insert(path, object.clone());
    Ok(json_response(code, Bytes::from(object.to_string())))
}
