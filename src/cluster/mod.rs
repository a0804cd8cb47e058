//! The cluster schema source: schemas of CRDs and XRDs from the API server, for `serve`
//! without `--crds`. A shell around the core, like the server and the CLI.
//!
//! - [`connect`]: the kube client (kubeconfig or in-cluster) with [`calls`] observing every
//!   call;
//! - [`watch`]: kube-runtime watchers on CRDs and XRDs keep an [`index`] of
//!   [`definitions`] (names, kinds, versions and resourceVersions, never schemas);
//! - [`fetch`]: the first time a Composition needs a kind, its definition is fetched
//!   (`GET`) and parsed; it is refetched only when its resourceVersion changes;
//! - [`entries`]: each needed kind's cache entry, its state and error rules;
//! - [`openapi`]: built-in kinds' schemas (no definition defines them) from the API server's
//!   own OpenAPI v3 documents, fetched on first need and cached by their hash.
//! - [`functions`]: a watch on Functions, to recognise pipeline steps by their packages.
//! - [`function_endpoints`]: when calls to the cluster's functions are on, watches on
//!   FunctionRevisions (each Function's active endpoint) and Crossplane's client certificate
//!   Secret, to call functions as Crossplane does;
//! - [`policies`]: a watch on ManagedResourceActivationPolicies, which activate MRDs;
//! - [`compositions`]: a watch on Compositions, for the background audit of `serve --audit`;
//! - [`lease`]: leader election on a Lease, so one replica audits at a time.
//! - [`required`]: what functions' steps require, read from the cluster.
//!
//! [`ClusterSchemas::changes`] tells the audit which kinds' schemas changed (and when the
//! Functions did), so that it validates again only the Compositions that use them; the same
//! changes bump the [`generations`] the server's verdict cache checks.
//!
//! [`ca_bundle`] keeps a self-signed CA in the webhook's own ValidatingWebhookConfiguration.
//!
//! So memory grows with the kinds Compositions use, not with the CRDs in the cluster, and no
//! review calls the API server once its kinds are cached.

pub mod ca_bundle;
pub mod calls;
pub mod compositions;
pub mod connect;
pub mod definitions;
pub mod entries;
pub mod fetch;
pub mod function_endpoints;
pub mod functions;
pub mod generations;
pub mod index;
pub mod lease;
pub mod openapi;
pub mod policies;
pub mod required;
pub mod watch;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError, Weak};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::{broadcast, mpsc};
use tokio::task::JoinHandle;

use crate::checks::schema_aware::lookup::{SchemaInfo, SchemaSource};
use crate::model::function::FunctionSet;
use crate::schema::{LookupError, MrdState};
use definitions::{Source, Summary};
use entries::{Entry, EntryError, ErrorClass, State};
use index::{Index, Key};

/// How the cluster source behaves.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// Drop a cached schema on a data error (deleted, unusable, 401/403/404) instead of
    /// validating with the last good one.
    pub fail_on_data_errors: bool,
    /// Objects per list page (large provider CRDs: a page is held in memory at once).
    pub page_size: u32,
    /// How long a `GET` of a definition may take.
    pub request_timeout: Duration,
    /// Most entries kept; the least recently needed ones without a schema go first.
    pub max_entries: usize,
    /// How often the OpenAPI v3 index is read again while a document is cached.
    pub openapi_refresh: Duration,
    /// Calls to the cluster's functions: `Some` watches FunctionRevisions and the client
    /// certificate Secret ([`function_endpoints`]); `None` (the default) reads neither.
    pub function_calls: Option<function_endpoints::FunctionCallOptions>,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        ClusterOptions {
            fail_on_data_errors: false,
            page_size: 50,
            request_timeout: Duration::from_secs(10),
            max_entries: 10_000,
            openapi_refresh: Duration::from_secs(60),
            function_calls: None,
        }
    }
}

/// What changed under the cached schemas: what a validation made earlier may no longer hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SchemaChange {
    /// The schemas of these kinds (group, kind) changed: a new definition received, deleted
    /// or back, dropped on a data error, a definition for a kind that had none, a built-in
    /// kind's OpenAPI v3 document with a new hash.
    Kinds(BTreeSet<Key>),
    /// The installed Functions changed.
    Functions,
}

/// Changes kept for a slow receiver; one that falls further behind is told it lagged (and
/// must assume everything changed).
const CHANGES_CAPACITY: usize = 1024;

/// The state of one watched collection.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListStatus {
    /// A full list has been received at least once.
    pub synced: bool,
    /// The API server does not serve the collection (XRDs without Crossplane installed).
    pub absent: bool,
    /// Full lists received (the first, and relists after a watch expired or broke).
    pub lists: u64,
    /// When the last full list arrived (RFC 3339).
    pub listed_at: Option<String>,
    /// The watch's last error, until the next event or list.
    pub last_error: Option<EntryError>,
}

/// Everything behind the lock.
#[derive(Debug, Default)]
pub(crate) struct Inner {
    index: Index,
    lists: BTreeMap<Source, ListStatus>,
    entries: BTreeMap<Key, Entry>,
    openapi: openapi::OpenApi,
}

impl Inner {
    fn list(&mut self, source: Source) -> &mut ListStatus {
        self.lists.entry(source).or_default()
    }

    /// Every collection listed (MRDs and XRDs: or known to be absent).
    fn synced(&self) -> bool {
        Source::ALL.into_iter().all(|s| {
            self.lists
                .get(&s)
                .is_some_and(|l| l.synced || (s.optional() && l.absent))
        })
    }

    /// Brings the entry of `key` in line with the index; returns a definition to fetch.
    fn reconcile(&mut self, key: &Key, fail_on_data_errors: bool) -> Option<Summary> {
        let entry = self.entries.get_mut(key)?;
        let Some(definition) = self.index.definition(key) else {
            entry.fetching = None;
            let (group, kind) = key;
            let message = match &entry.cached {
                Some(c) => format!(
                    "{} was deleted: no CRD, MRD or XRD defines {kind}.{group}",
                    c.definition.label()
                ),
                None => format!("no CRD, MRD or XRD defines {kind}.{group}"),
            };
            if entry.state != State::DoesNotExist
                || entry.error.as_ref().is_none_or(|e| e.message != message)
            {
                entry.does_not_exist(message, fail_on_data_errors);
            }
            return None;
        };
        if entry
            .cached
            .as_ref()
            .is_some_and(|c| c.definition == *definition)
        {
            if entry.state == State::DoesNotExist {
                // Back, unchanged (a relist after a missed event).
                entry.state = State::Acked;
                entry.error = None;
            }
            return None;
        }
        if entry.fetching.as_ref() == Some(definition) {
            return None;
        }
        if entry.cached.is_none() && entry.state == State::DoesNotExist {
            entry.state = State::Requested;
            entry.error = None;
        }
        entry.fetching = Some(definition.clone());
        Some(definition.clone())
    }

    /// Makes room for one more entry.
    fn evict(&mut self, max_entries: usize) {
        while self.entries.len() >= max_entries.max(1) {
            let oldest = self
                .entries
                .iter()
                .filter(|(_, e)| e.cached.is_none() && e.fetching.is_none())
                .min_by_key(|(_, e)| e.last_needed)
                .map(|(k, _)| k.clone());
            match oldest {
                Some(k) => {
                    self.entries.remove(&k);
                }
                None => break,
            }
        }
    }

    /// Why the first list has not come, if it failed: the API server refused it (401, 403)
    /// or could not be reached. Requests then do not wait for it.
    fn list_failure(&self) -> Option<&EntryError> {
        if self.synced() {
            return None;
        }
        Source::ALL
            .iter()
            .find_map(|s| self.lists.get(s)?.last_error.as_ref())
    }

    /// Before the first list, after it failed: the entries without a schema take the failure
    /// (RECEIVED_ERROR for a refusal, TIMEOUT when unreachable).
    fn fail_waiting(&mut self, fail_on_data_errors: bool) {
        let Some(error) = self.list_failure().cloned() else {
            return;
        };
        // A refusal says all (and which permission); unreachable needs the context.
        let reason = match error.class {
            ErrorClass::Data => error,
            ErrorClass::Transient => EntryError {
                message: self.not_listed_reason(),
                ..error
            },
        };
        for entry in self.entries.values_mut() {
            if entry.cached.is_none() {
                match reason.class {
                    ErrorClass::Data => entry.answered_error(reason.clone(), fail_on_data_errors),
                    ErrorClass::Transient => entry.no_answer(reason.clone()),
                }
            }
        }
    }

    /// Why the kinds without a schema cannot be resolved before the first list.
    fn not_listed_reason(&self) -> String {
        let error = Source::ALL
            .iter()
            .filter_map(|s| self.lists.get(s)?.last_error.as_ref())
            .next()
            .map(|e| format!(": {}", e.message))
            .unwrap_or_default();
        format!("the webhook has not listed CRDs, MRDs and XRDs from the API server yet{error}")
    }
}

/// What the tasks and the request path share.
pub(crate) struct Shared {
    inner: Mutex<Inner>,
    changed: Condvar,
    options: ClusterOptions,
    fetches: mpsc::UnboundedSender<(Key, Summary)>,
    functions: functions::Functions,
    policies: policies::Policies,
    /// When calls to the cluster's functions are on.
    function_endpoints: Option<function_endpoints::FunctionEndpoints>,
    changes: broadcast::Sender<SchemaChange>,
    generations: generations::Generations,
}

impl Shared {
    /// Empty, and the receiving end of its fetch requests.
    fn new(options: ClusterOptions) -> (Arc<Self>, mpsc::UnboundedReceiver<(Key, Summary)>) {
        let (fetches, rx) = mpsc::unbounded_channel();
        let function_endpoints = options
            .function_calls
            .as_ref()
            .map(function_endpoints::FunctionEndpoints::new);
        let shared = Arc::new(Shared {
            inner: Mutex::new(Inner::default()),
            changed: Condvar::new(),
            options,
            fetches,
            functions: functions::Functions::default(),
            policies: policies::Policies::default(),
            function_endpoints,
            changes: broadcast::channel(CHANGES_CAPACITY).0,
            generations: generations::Generations::default(),
        });
        (shared, rx)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves consistent data (every update is a few
        // assignments), so a poisoned lock is still used.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A list or watch of `resource` succeeded: its transient watch error is over.
    fn contact_restored(&self, resource: &str) {
        if resource == functions::PLURAL {
            return self.functions.contact_restored();
        }
        if resource == policies::PLURAL {
            return self.policies.contact_restored();
        }
        if matches!(
            resource,
            function_endpoints::REVISIONS_PLURAL | function_endpoints::SECRETS_PLURAL
        ) {
            if let Some(endpoints) = &self.function_endpoints {
                endpoints.contact_restored(resource);
            }
            return;
        }
        let mut inner = self.lock();
        let Some((_, status)) = inner
            .lists
            .iter_mut()
            .find(|(source, _)| source.plural() == resource)
        else {
            return;
        };
        let Some(over) = status
            .last_error
            .take_if(|e| e.class == ErrorClass::Transient)
        else {
            return;
        };
        tracing::info!(resource, "API server reachable again");
        // The cached entries carried it as their ambient error.
        for entry in inner.entries.values_mut() {
            entry
                .error
                .take_if(|e| e.class == ErrorClass::Transient && e.message == over.message);
        }
    }

    /// Reconciles `keys` and starts the fetches they need; wakes waiting requests. Tells
    /// [`ClusterSchemas::changes`] the kinds whose entry a validation would now see
    /// differently (a missing kind whose definition appeared at once: a validation then waits
    /// for its fetch), and those without an entry (a kind not needed, or evicted while it had
    /// no definition: one that gets one matters).
    fn reconcile(&self, inner: &mut Inner, keys: impl IntoIterator<Item = Key>) {
        let mut changed = BTreeSet::new();
        for key in keys {
            let before = inner.entries.get(&key).map(Entry::observed);
            self.start_fetch(inner, &key);
            if before.is_none() || before != inner.entries.get(&key).map(Entry::observed) {
                changed.insert(key);
            }
        }
        self.changed.notify_all();
        self.kinds_changed(changed);
    }

    /// Reconciles the entry of `key` and starts the fetch it needs.
    fn start_fetch(&self, inner: &mut Inner, key: &Key) {
        if let Some(definition) = inner.reconcile(key, self.options.fail_on_data_errors) {
            // The receiver lives as long as the fetch task; if it is gone the server is
            // stopping.
            let _ = self.fetches.send((key.clone(), definition));
        }
    }

    /// Tells the receivers of [`ClusterSchemas::changes`] that `kinds` changed.
    fn kinds_changed(&self, kinds: BTreeSet<Key>) {
        if !kinds.is_empty() {
            self.generations.kinds_changed(&kinds);
            // No receiver (no audit) is not an error.
            let _ = self.changes.send(SchemaChange::Kinds(kinds));
        }
    }

    /// The ManagedResourceActivationPolicies published changed: every kind an MRD defines
    /// that its own `spec.state` does not make Active may now be judged differently (its
    /// message names the policies even when none activates it).
    fn policies_changed(&self) {
        let inner = self.lock();
        let kinds: BTreeSet<Key> = inner
            .index
            .of(Source::Mrd)
            .filter(|d| d.state != Some(MrdState::Active))
            .map(|d| (d.group.clone(), d.kind.clone()))
            .collect();
        drop(inner);
        self.kinds_changed(kinds);
    }

    /// Tells the receivers of [`ClusterSchemas::changes`] that the Functions changed.
    fn functions_changed(&self) {
        self.generations.functions_changed();
        let _ = self.changes.send(SchemaChange::Functions);
    }
}

/// Schemas from the API server: the handle the server resolves kinds through.
pub struct ClusterSchemas {
    shared: Arc<Shared>,
    server: String,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for ClusterSchemas {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl ClusterSchemas {
    /// Connects to the cluster (`kubeconfig`, else as [`connect::client`] finds it) and
    /// starts watching CRDs and XRDs on the current tokio runtime. Every call to the API
    /// server is reported to `observer`; a successful list or watch also clears the watch
    /// error of its collection (a watch resumed after an outage sends no event to say so).
    /// The client comes back too, for the server's other calls (the caBundle).
    pub async fn connect(
        kubeconfig: Option<&Path>,
        options: ClusterOptions,
        observer: calls::CallObserver,
    ) -> Result<(Self, kube::Client), connect::ConnectError> {
        let cell: Arc<OnceLock<Weak<Shared>>> = Arc::default();
        let health = cell.clone();
        let observed: calls::CallObserver = Arc::new(move |call: calls::ApiCall| {
            if call.error.is_none()
                && matches!(call.verb, "list" | "watch")
                && let Some(shared) = health.get().and_then(Weak::upgrade)
            {
                shared.contact_restored(call.resource);
            }
            observer(call);
        });
        let (client, server) = connect::client(kubeconfig, observed).await?;
        let schemas = Self::start(client.clone(), server, options);
        let _ = cell.set(Arc::downgrade(&schemas.shared));
        Ok((schemas, client))
    }

    /// Starts watching CRDs, XRDs and Functions through `client` (on the current tokio runtime),
    /// and FunctionRevisions and the client certificate Secret when
    /// [`ClusterOptions::function_calls`] asks; `server` is the API server's URL, for messages.
    pub fn start(client: kube::Client, server: String, options: ClusterOptions) -> Self {
        let (shared, rx) = Shared::new(options);
        let (openapi_jobs, openapi_rx) = mpsc::unbounded_channel();
        shared.lock().openapi.jobs = Some(openapi_jobs);
        let mut tasks = Vec::new();
        if let Some(endpoints) = &shared.function_endpoints {
            tasks.push(tokio::spawn(function_endpoints::run_revisions(
                endpoints.clone(),
                client.clone(),
                shared.options.page_size,
            )));
            tasks.push(tokio::spawn(function_endpoints::run_secret(
                endpoints.clone(),
                client.clone(),
            )));
        }
        tasks.extend([
            tokio::spawn(openapi::run(shared.clone(), client.clone(), openapi_rx)),
            tokio::spawn(watch::run::<definitions::CrdSummary>(
                shared.clone(),
                client.clone(),
                Source::Crd,
            )),
            tokio::spawn(watch::run::<definitions::MrdSummary>(
                shared.clone(),
                client.clone(),
                Source::Mrd,
            )),
            tokio::spawn(watch::run::<definitions::XrdSummary>(
                shared.clone(),
                client.clone(),
                Source::Xrd,
            )),
            tokio::spawn(functions::run(shared.clone(), client.clone())),
            tokio::spawn(policies::run(shared.clone(), client.clone())),
            tokio::spawn(fetch::run(shared.clone(), client, rx)),
        ]);
        ClusterSchemas {
            shared,
            server,
            tasks,
        }
    }

    /// The API server's URL.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// Changes to the schemas from now on, as [`SchemaChange`]s. A receiver that falls more
    /// than a thousand changes behind gets `Lagged`: it must assume everything changed.
    pub fn changes(&self) -> broadcast::Receiver<SchemaChange> {
        self.shared.changes.subscribe()
    }

    /// The generation counters of the schemas, bumped with every [`SchemaChange`].
    pub fn generations(&self) -> &generations::Generations {
        &self.shared.generations
    }

    /// Where the cluster's functions answer and the client certificate to call them with,
    /// when [`ClusterOptions::function_calls`] turned calls on.
    pub fn function_endpoints(&self) -> Option<&function_endpoints::FunctionEndpoints> {
        self.shared.function_endpoints.as_ref()
    }

    /// Whether a lookup of a built-in kind of `group`, `version` may answer from a failure to
    /// read the API server's OpenAPI v3 (the embedded schema, or not found), which is retried
    /// only when a lookup asks again.
    pub fn openapi_failing(&self, group: &str, version: &str) -> bool {
        self.shared.lock().openapi.failing(group, version)
    }

    /// The served versions of the CRD `name`, if the cluster has it (as last listed).
    pub fn crd_versions(&self, name: &str) -> Option<Vec<String>> {
        let inner = self.shared.lock();
        inner.index.get(Source::Crd, name).map(|d| d.served.clone())
    }

    /// Whether both collections have been listed (and Functions listed, or not served), and
    /// what the source holds or waits for.
    pub fn readiness(&self) -> (bool, String) {
        let functions = self.shared.functions.waiting();
        let policies = self.shared.policies.waiting();
        let (function_words, _, _) = self.shared.functions.summary();
        let (policy_words, _, _) = self.shared.policies.summary();
        let inner = self.shared.lock();
        if let (true, Some(why)) = (inner.synced(), policies.or(functions)) {
            return (false, why);
        }
        if inner.synced() {
            let count =
                |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
            let absent = |s: Source| inner.lists.get(&s).is_some_and(|l| l.absent);
            let xrds = if absent(Source::Xrd) {
                "no XRDs (the API server does not serve compositeresourcedefinitions: Crossplane is not installed)".to_string()
            } else {
                count(inner.index.count(Source::Xrd), "XRD")
            };
            let mrds = if absent(Source::Mrd) {
                "no MRDs (the API server does not serve managedresourcedefinitions: no Crossplane v2)".to_string()
            } else {
                count(inner.index.count(Source::Mrd), "MRD")
            };
            let crds = count(inner.index.count(Source::Crd), "CRD");
            (
                true,
                format!(
                    "{crds}, {mrds}, {policy_words}, {xrds} and {function_words} listed from {}",
                    self.server
                ),
            )
        } else {
            (false, inner.not_listed_reason())
        }
    }

    /// How many definitions the index holds.
    pub fn definitions(&self) -> usize {
        let inner = self.shared.lock();
        Source::ALL.iter().map(|&s| inner.index.count(s)).sum()
    }

    /// How many entries are in each metric state ([`State::METRIC_LABELS`]), by the source
    /// of their definition (`crd`, `mrd`, `xrd`; `none` without one; `openapi` for the
    /// OpenAPI v3 documents of built-in kinds): every pair present.
    pub fn entries_by_state(&self) -> Vec<(&'static str, &'static str, i64)> {
        let inner = self.shared.lock();
        let mut counts: BTreeMap<(&'static str, &'static str), i64> = BTreeMap::new();
        for source in Source::ALL.iter().map(|s| s.metric_name()).chain(["none"]) {
            for label in State::METRIC_LABELS {
                counts.insert((source, label), 0);
            }
        }
        for (key, e) in &inner.entries {
            let source = e
                .cached
                .as_ref()
                .map(|c| &c.definition)
                .or(e.fetching.as_ref())
                .or_else(|| inner.index.definition(key))
                .map_or("none", |d| d.source.metric_name());
            *counts.entry((source, e.metric_label())).or_default() += 1;
        }
        // Built-in kinds' OpenAPI documents are entries of their own.
        for (state, n) in inner.openapi.documents_by_state() {
            counts.insert(("openapi", state), n);
        }
        counts
            .into_iter()
            .map(|((source, state), n)| (source, state, n))
            .collect()
    }

    /// Each watched collection: its metric name, its state (`listed`, `absent`: not served,
    /// `waiting`: not listed yet, `failing`: not listed and its last attempt failed) and the
    /// objects listed; and the OpenAPI v3 source with its cached documents.
    pub fn sources(&self) -> Vec<(&'static str, &'static str, i64)> {
        let (_, function_state, functions) = self.shared.functions.summary();
        let (_, policy_state, policies) = self.shared.policies.summary();
        let inner = self.shared.lock();
        Source::ALL
            .iter()
            .map(|&s| {
                let status = inner.lists.get(&s);
                let state = match status {
                    Some(l) if l.absent => "absent",
                    Some(l) if l.synced => "listed",
                    Some(l) if l.last_error.is_some() => "failing",
                    _ => "waiting",
                };
                let n = i64::try_from(inner.index.count(s)).unwrap_or(i64::MAX);
                (s.metric_name(), state, n)
            })
            .chain({
                let (state, n) = inner.openapi.source_state();
                [("openapi", state, n)]
            })
            .chain([
                ("mrap", policy_state, policies),
                ("function", function_state, functions),
            ])
            .collect()
    }

    /// Everything about the cache, for `/debug/schemas`.
    pub fn snapshot(&self) -> Snapshot {
        let (ready, detail) = self.readiness();
        let functions = self.shared.functions.view();
        let activation_policies = self.shared.policies.view();
        let function_endpoints = self
            .shared
            .function_endpoints
            .as_ref()
            .map(function_endpoints::FunctionEndpoints::view);
        let published = self.shared.policies.current();
        let inner = self.shared.lock();
        let lists = Source::ALL
            .into_iter()
            .map(|s| {
                let status = inner.lists.get(&s).cloned().unwrap_or_default();
                ListView {
                    resource: s.plural(),
                    objects: inner.index.count(s),
                    status,
                }
            })
            .collect();
        let entries = inner
            .entries
            .iter()
            .map(|((group, kind), e)| {
                let shown = e
                    .cached
                    .as_ref()
                    .map(|c| &c.definition)
                    .or(e.fetching.as_ref())
                    .or_else(|| inner.index.definition(&(group.clone(), kind.clone())));
                EntryView {
                    group: group.clone(),
                    kind: kind.clone(),
                    state: e.state,
                    metric_state: e.metric_label(),
                    cached: e.cached.is_some(),
                    definition: shown.map(Summary::label),
                    from_xrd: shown.is_some_and(|d| d.source == Source::Xrd),
                    mrd_state: shown.and_then(|d| d.state),
                    activated_by: shown
                        .filter(|d| d.source == Source::Mrd)
                        .zip(published.as_deref())
                        .and_then(|(d, p)| match p.activation(&d.name) {
                            crate::schema::Activation::By { policy, .. } => {
                                Some(policy.name.clone())
                            }
                            crate::schema::Activation::None { .. } => None,
                        }),
                    resource_version: e
                        .cached
                        .as_ref()
                        .map(|c| c.definition.resource_version.clone()),
                    versions: shown.map(|d| d.served.clone()).unwrap_or_default(),
                    received: e.cached.as_ref().map(|c| c.received.clone()),
                    fetching: e.fetching.is_some(),
                    last_error: e.error.clone(),
                }
            })
            .collect();
        Snapshot {
            server: self.server.clone(),
            ready,
            detail,
            fail_on_data_errors: self.shared.options.fail_on_data_errors,
            lists,
            entries,
            openapi: inner.openapi.view(),
            functions,
            activation_policies,
            function_endpoints,
        }
    }

    /// How many OpenAPI v3 documents are in each metric state ([`State::METRIC_LABELS`],
    /// all present).
    pub fn openapi_documents_by_state(&self) -> Vec<(&'static str, i64)> {
        self.shared.lock().openapi.documents_by_state()
    }

    /// The schema of `group`, `kind` at `version`, waiting for the API server until `until`
    /// at most when the kind is not cached yet.
    pub fn resolve_until(
        &self,
        group: &str,
        kind: &str,
        version: &str,
        until: Instant,
    ) -> Result<SchemaInfo, LookupError> {
        let key: Key = (group.to_string(), kind.to_string());
        let unavailable = |reason: String| LookupError::Unavailable {
            group: group.to_string(),
            kind: kind.to_string(),
            reason,
        };
        let started = Instant::now();
        let mut inner = self.shared.lock();
        if !inner.entries.contains_key(&key) {
            inner.evict(self.shared.options.max_entries);
            inner.entries.insert(key.clone(), Entry::requested());
            if inner.synced() {
                // Not a change: the validation asking sees the entry as it is now.
                self.shared.start_fetch(&mut inner, &key);
                self.shared.changed.notify_all();
            } else {
                inner.fail_waiting(self.shared.options.fail_on_data_errors);
            }
        }
        let catalog = loop {
            let synced = inner.synced();
            let not_listed = (!synced).then(|| inner.not_listed_reason());
            // Before the first list, a failed list is not waited for.
            let list_failed = inner.list_failure().is_some();
            let Some(entry) = inner.entries.get_mut(&key) else {
                return Err(unavailable("its cache entry was evicted".to_string()));
            };
            entry.last_needed = Instant::now();
            if let Some(cached) = &entry.cached {
                // Kept through a data error: say so (a transient error is only ambient).
                let stale = (entry.state != State::Acked)
                    .then(|| entry.error.as_ref().map(|e| e.message.clone()))
                    .flatten();
                break (cached.catalog.clone(), stale);
            }
            if (synced && entry.fetching.is_none()) || list_failed {
                if entry.state == State::DoesNotExist {
                    // No definition (nothing cached): a built-in kind, if the API server
                    // serves it; else not found.
                    return openapi::resolve(&self.shared, inner, group, kind, version, until);
                }
                let reason = entry.error.as_ref().map(|e| e.message.clone());
                return Err(unavailable(
                    reason.unwrap_or_else(|| "its definition was not fetched".to_string()),
                ));
            }
            let now = Instant::now();
            if now >= until {
                let reason = match (not_listed, &entry.fetching) {
                    (Some(reason), _) => reason,
                    (None, Some(d)) => format!(
                        "the API server did not send {} within {} ms",
                        d.label(),
                        started.elapsed().as_millis()
                    ),
                    (None, None) => "no answer in time".to_string(),
                };
                entry.no_answer(EntryError::now(ErrorClass::Transient, reason.clone()));
                return Err(unavailable(reason));
            }
            inner = self
                .shared
                .changed
                .wait_timeout(inner, until - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        };
        drop(inner);
        let (catalog, stale) = catalog;
        let mut info = catalog.resolve(group, kind, version)?;
        info.stale = stale;
        // An MRD wins only while no CRD defines its kind: an active one's CRD (Active by its
        // state, or by a policy) is not there yet.
        if let Some(mrd) = info.mrd.as_mut() {
            mrd.established = Some(false);
        }
        Ok(info)
    }
}

#[cfg(test)]
impl ClusterSchemas {
    /// A source with no tasks: tests drive its state and receive its fetch requests.
    fn detached(options: ClusterOptions) -> (Self, mpsc::UnboundedReceiver<(Key, Summary)>) {
        let (shared, rx) = Shared::new(options);
        let schemas = ClusterSchemas {
            shared,
            server: "https://test".to_string(),
            tasks: Vec::new(),
        };
        (schemas, rx)
    }
}

/// A request's view of the cluster source: waits no later than its deadline.
pub struct UntilDeadline<'a> {
    /// The source.
    pub schemas: &'a ClusterSchemas,
    /// When waiting for the API server must stop.
    pub until: Instant,
}

impl SchemaSource for UntilDeadline<'_> {
    fn resolve(&self, group: &str, kind: &str, version: &str) -> Result<SchemaInfo, LookupError> {
        self.schemas.resolve_until(group, kind, version, self.until)
    }

    /// The Functions as last listed, never waited for.
    fn functions(&self) -> Option<Arc<FunctionSet>> {
        self.schemas.shared.functions.current()
    }

    /// The ManagedResourceActivationPolicies as last listed, never waited for.
    fn activation_policies(&self) -> Option<Arc<crate::schema::ActivationPolicies>> {
        self.schemas.shared.policies.current()
    }
}

/// `/debug/schemas`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    /// The API server.
    pub server: String,
    /// Whether both collections have been listed.
    pub ready: bool,
    /// What the source holds or waits for.
    pub detail: String,
    /// `--fail-on-data-errors`.
    pub fail_on_data_errors: bool,
    /// The watched collections.
    pub lists: Vec<ListView>,
    /// The cache entries of the kinds Compositions needed.
    pub entries: Vec<EntryView>,
    /// The API server's OpenAPI v3 documents, for built-in kinds.
    pub openapi: openapi::OpenApiView,
    /// The Functions' watch and each Function listed.
    pub functions: functions::FunctionsView,
    /// The ManagedResourceActivationPolicies' watch and each policy listed.
    pub activation_policies: policies::PoliciesView,
    /// With calls to the cluster's functions on: the FunctionRevisions' and the client
    /// certificate Secret's watches, and each Function's endpoint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub function_endpoints: Option<function_endpoints::FunctionEndpointsView>,
}

/// One watched collection.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListView {
    /// The collection: `customresourcedefinitions`, `compositions`, ...
    pub resource: &'static str,
    /// Objects in the index.
    pub objects: usize,
    /// Its watch.
    #[serde(flatten)]
    pub status: ListStatus,
}

/// One cache entry.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EntryView {
    /// The API group.
    pub group: String,
    /// The kind.
    pub kind: String,
    /// The state.
    pub state: State,
    /// The state as the metrics label it (`nacked_but_cached`, ...).
    pub metric_state: &'static str,
    /// Whether a schema is cached (and used).
    pub cached: bool,
    /// The definition (`CRD <name>`, `MRD <name>` or `XRD <name>`): cached, being fetched,
    /// or indexed.
    pub definition: Option<String>,
    /// Whether the XR schema is derived from an XRD (no CRD generated yet).
    pub from_xrd: bool,
    /// When the definition is an MRD: its state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mrd_state: Option<MrdState>,
    /// When the definition is an MRD a ManagedResourceActivationPolicy activates: the policy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub activated_by: Option<String>,
    /// The resourceVersion of the cached definition.
    pub resource_version: Option<String>,
    /// The definition's served versions.
    pub versions: Vec<String>,
    /// When the cached definition was received.
    pub received: Option<String>,
    /// Whether a fetch is in flight.
    pub fetching: bool,
    /// The last error; with a cached schema, the ambient error.
    pub last_error: Option<EntryError>,
}

/// The class of an API error by its HTTP code: who is refused (401, 403) or what is gone
/// (404, 410 on a get) is about the data; the rest (5xx, 429) is transient.
pub fn error_class(code: u16) -> ErrorClass {
    match code {
        401 | 403 | 404 => ErrorClass::Data,
        _ => ErrorClass::Transient,
    }
}

/// A kube error in short words: an API Status as [`describe_api_error`] and its message,
/// anything else as the client says it.
pub fn describe_kube_error(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{}: {}", describe_api_error(s), s.message),
        other => other.to_string(),
    }
}

/// An API server's error answer in short words: `403 Forbidden` (its message is kept as
/// the error's detail).
pub fn describe_api_error(status: &kube::core::Status) -> String {
    if status.reason.is_empty() {
        status.code.to_string()
    } else {
        format!("{} {}", status.code, status.reason)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Catalog;

    fn network() -> Summary {
        Summary {
            source: Source::Crd,
            name: "networks.compute.gcp.upbound.io".into(),
            resource_version: "7".into(),
            group: "compute.gcp.upbound.io".into(),
            kind: "Network".into(),
            served: vec!["v1beta1".into()],
            state: None,
        }
    }

    fn listed(schemas: &ClusterSchemas, crds: Vec<Summary>) {
        let mut inner = schemas.shared.lock();
        inner.index.replace(Source::Crd, crds);
        for s in Source::ALL {
            inner.list(s).synced = true;
        }
    }

    fn unavailable(r: Result<SchemaInfo, LookupError>) -> String {
        match r {
            Err(LookupError::Unavailable { reason, .. }) => reason,
            other => panic!("not Unavailable: {other:?}"),
        }
    }

    fn state(schemas: &ClusterSchemas, kind: &str) -> State {
        let inner = schemas.shared.lock();
        inner
            .entries
            .iter()
            .find(|((_, k), _)| k == kind)
            .map(|(_, e)| e.state)
            .expect("entry")
    }

    #[test]
    fn before_the_first_list_a_review_waits_until_its_deadline_then_times_out() {
        let (schemas, _jobs) = ClusterSchemas::detached(ClusterOptions::default());
        let started = Instant::now();
        let until = started + Duration::from_millis(60);
        let reason = unavailable(schemas.resolve_until("example.org", "Thing", "v1", until));
        assert!(started.elapsed() >= Duration::from_millis(60));
        assert_eq!(
            reason,
            "the webhook has not listed CRDs, MRDs and XRDs from the API server yet"
        );
        assert_eq!(state(&schemas, "Thing"), State::Timeout);
        assert!(!schemas.readiness().0);
    }

    #[test]
    fn a_failed_first_list_is_not_waited_for() {
        let (schemas, _jobs) = ClusterSchemas::detached(ClusterOptions::default());
        schemas.shared.lock().list(Source::Crd).last_error = Some(EntryError::now(
            ErrorClass::Transient,
            "the API server is unreachable",
        ));
        // Not waited for: the deadline is a minute away.
        let started = Instant::now();
        let until = started + Duration::from_secs(60);
        let reason = unavailable(schemas.resolve_until("example.org", "Thing", "v1", until));
        assert!(started.elapsed() < Duration::from_secs(30));
        assert_eq!(
            reason,
            "the webhook has not listed CRDs, MRDs and XRDs from the API server yet: the API server is unreachable"
        );
        assert_eq!(state(&schemas, "Thing"), State::Timeout);
    }

    #[test]
    fn a_missing_kind_is_not_found_without_a_call() {
        let (schemas, mut jobs) = ClusterSchemas::detached(ClusterOptions::default());
        listed(&schemas, vec![network()]);
        let until = Instant::now() + Duration::from_secs(5);
        assert!(matches!(
            schemas.resolve_until("example.org", "Thing", "v1", until),
            Err(LookupError::NotFound { .. })
        ));
        assert_eq!(state(&schemas, "Thing"), State::DoesNotExist);
        assert!(jobs.try_recv().is_err(), "no fetch");
    }

    #[test]
    fn a_review_waits_for_the_fetch_it_started_and_the_next_finds_it_cached() {
        let (schemas, mut jobs) = ClusterSchemas::detached(ClusterOptions::default());
        let schemas = Arc::new(schemas);
        listed(&schemas, vec![network()]);
        let waiting = {
            let schemas = schemas.clone();
            std::thread::spawn(move || {
                let until = Instant::now() + Duration::from_secs(10);
                schemas.resolve_until("compute.gcp.upbound.io", "Network", "v1beta1", until)
            })
        };
        let (key, definition) = jobs.blocking_recv().expect("a fetch job");
        assert_eq!(definition, network());
        // What the fetch task does with an answer.
        let crd: serde_json::Value = serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "networks.compute.gcp.upbound.io"},
            "spec": {"group": "compute.gcp.upbound.io", "scope": "Cluster",
                     "names": {"kind": "Network", "plural": "networks"},
                     "versions": [{"name": "v1beta1", "served": true, "storage": true,
                                   "schema": {"openAPIV3Schema": {"type": "object"}}}]}});
        let mut catalog = Catalog::new();
        catalog.add_document(&crd, "test").expect("CRD");
        {
            let mut inner = schemas.shared.lock();
            let entry = inner.entries.get_mut(&key).expect("entry");
            assert_eq!(entry.state, State::Requested);
            entry.fetching = None;
            entry.received(definition, Arc::new(catalog));
            schemas.shared.changed.notify_all();
        }
        let info = waiting.join().expect("thread").expect("resolved");
        assert_eq!(info.crd_name, "networks.compute.gcp.upbound.io");
        assert!(info.schema.is_some());
        // Cached: answered at once, nothing fetched.
        let again = schemas.resolve_until(
            "compute.gcp.upbound.io",
            "Network",
            "v1beta1",
            Instant::now(),
        );
        assert!(again.is_ok());
        assert!(jobs.try_recv().is_err());
        assert!(schemas.entries_by_state().contains(&("crd", "acked", 1)));
    }

    fn thing() -> Summary {
        Summary {
            name: "things.example.org".into(),
            resource_version: "3".into(),
            group: "example.org".into(),
            kind: "Thing".into(),
            served: vec!["v1".into()],
            ..network()
        }
    }

    fn key_of(d: &Summary) -> Key {
        (d.group.clone(), d.kind.clone())
    }

    fn kinds(of: &[&Summary]) -> Option<SchemaChange> {
        Some(SchemaChange::Kinds(of.iter().map(|d| key_of(d)).collect()))
    }

    /// A definition changed in the index, as the watches record it.
    fn indexed(schemas: &ClusterSchemas, change: impl FnOnce(&mut Index) -> Vec<Key>) {
        let mut inner = schemas.shared.lock();
        let touched = change(&mut inner.index);
        schemas.shared.reconcile(&mut inner, touched);
    }

    /// What the fetch task records once `definition` came back parsed.
    fn fetched(schemas: &ClusterSchemas, definition: &Summary) {
        let retry = fetch::record(
            &schemas.shared,
            &key_of(definition),
            definition.clone(),
            fetch::Outcome::Parsed(
                Box::new(Catalog::new()),
                definition.resource_version.clone(),
            ),
        );
        assert_eq!(retry, None);
    }

    #[test]
    fn changes_name_the_kinds_a_validation_would_now_see_differently() {
        let (schemas, mut jobs) = ClusterSchemas::detached(ClusterOptions::default());
        let mut changes = schemas.changes();
        listed(&schemas, vec![network()]);
        let mut next = || changes.try_recv().ok();
        // A kind needed for the first time is no change: its validation sees it as it is;
        // nor is its schema arriving while the validation waits for it.
        let waiting = Summary {
            name: "waits.example.org".into(),
            kind: "Wait".into(),
            ..thing()
        };
        indexed(&schemas, |index| index.apply(waiting.clone()));
        assert_eq!(next(), kinds(&[&waiting]), "no entry: told at once");
        {
            let mut inner = schemas.shared.lock();
            inner.entries.insert(key_of(&waiting), Entry::requested());
            schemas.shared.start_fetch(&mut inner, &key_of(&waiting));
        }
        assert_eq!(jobs.try_recv().ok().map(|(_, d)| d), Some(waiting.clone()));
        fetched(&schemas, &waiting);
        assert_eq!(next(), None);
        let until = Instant::now();
        let _ = schemas.resolve_until("compute.gcp.upbound.io", "Network", "v1beta1", until);
        assert!(matches!(
            schemas.resolve_until("example.org", "Thing", "v1", until),
            Err(LookupError::NotFound { .. })
        ));
        assert_eq!(next(), None);
        // Its schema received.
        assert_eq!(jobs.try_recv().ok().map(|(_, d)| d), Some(network()));
        fetched(&schemas, &network());
        assert_eq!(next(), kinds(&[&network()]));
        // A new resourceVersion: a change once received, not while it is fetched.
        let eight = Summary {
            resource_version: "8".into(),
            ..network()
        };
        indexed(&schemas, |index| index.apply(eight.clone()));
        assert_eq!(next(), None);
        assert_eq!(jobs.try_recv().ok().map(|(_, d)| d), Some(eight.clone()));
        fetched(&schemas, &eight);
        assert_eq!(next(), kinds(&[&network()]));
        // Deleted (the schema kept, stale), and back.
        indexed(&schemas, |index| {
            index.delete(Source::Crd, &eight.name).into_iter().collect()
        });
        assert_eq!(next(), kinds(&[&network()]));
        indexed(&schemas, |index| index.apply(eight.clone()));
        assert_eq!(next(), kinds(&[&network()]));
        // A kind that was missing gets a definition: a change at once (a validation waits
        // for the fetch), not again when it arrives (nobody saw it REQUESTED but waited).
        indexed(&schemas, |index| index.apply(thing()));
        assert_eq!(next(), kinds(&[&thing()]));
        assert_eq!(
            jobs.try_recv().ok().map(|(_, d)| d.kind),
            Some("Thing".into())
        );
        fetched(&schemas, &thing());
        assert_eq!(next(), None);
        // A kind no validation needed (or evicted) is told at once: one that uses it may
        // have found it missing.
        let other = Summary {
            name: "others.example.org".into(),
            kind: "Other".into(),
            ..thing()
        };
        indexed(&schemas, |index| index.apply(other.clone()));
        assert_eq!(next(), kinds(&[&other]));
        assert_eq!(next(), None);
    }

    #[test]
    fn a_schema_dropped_on_a_data_error_is_a_change_and_a_kept_one_too() {
        for fail_on_data_errors in [false, true] {
            let options = ClusterOptions {
                fail_on_data_errors,
                ..ClusterOptions::default()
            };
            let (schemas, mut jobs) = ClusterSchemas::detached(options);
            let mut changes = schemas.changes();
            listed(&schemas, vec![network()]);
            let _ = schemas.resolve_until(
                "compute.gcp.upbound.io",
                "Network",
                "v1beta1",
                Instant::now(),
            );
            let _ = jobs.try_recv();
            fetched(&schemas, &network());
            let _ = changes.try_recv();
            let nine = Summary {
                resource_version: "9".into(),
                ..network()
            };
            indexed(&schemas, |index| index.apply(nine.clone()));
            let retry = fetch::record(
                &schemas.shared,
                &key_of(&nine),
                nine,
                fetch::Outcome::Unusable(
                    "CRD networks.compute.gcp.upbound.io cannot be used".into(),
                ),
            );
            assert_eq!(retry, Some(Duration::from_secs(1)));
            assert_eq!(changes.try_recv().ok(), kinds(&[&network()]));
            let cached = schemas.snapshot().entries[0].cached;
            assert_eq!(cached, !fail_on_data_errors);
        }
    }

    #[test]
    fn a_new_resource_version_is_fetched_while_the_old_schema_serves() {
        let (schemas, mut jobs) = ClusterSchemas::detached(ClusterOptions::default());
        listed(&schemas, vec![network()]);
        let key: Key = ("compute.gcp.upbound.io".into(), "Network".into());
        {
            let mut inner = schemas.shared.lock();
            let mut entry = Entry::requested();
            entry.received(network(), Arc::new(Catalog::new()));
            inner.entries.insert(key.clone(), entry);
            let changed = Summary {
                resource_version: "8".into(),
                ..network()
            };
            let touched = inner.index.apply(changed);
            schemas.shared.reconcile(&mut inner, touched);
        }
        let (_, job) = jobs.try_recv().expect("a refetch");
        assert_eq!(job.resource_version, "8");
        let inner = schemas.shared.lock();
        let entry = &inner.entries[&key];
        assert_eq!(entry.state, State::Acked);
        assert_eq!(
            entry
                .cached
                .as_ref()
                .map(|c| c.definition.resource_version.as_str()),
            Some("7")
        );
    }
}
