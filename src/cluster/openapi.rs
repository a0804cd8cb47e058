//! Built-in kinds' schemas (Deployment, Service, ...) from the API server's own OpenAPI v3
//! documents, for the kinds no CRD, MRD or XRD defines:
//!
//! - the index (`GET /openapi/v3`: each group version's `serverRelativeURL`, with the hash of
//!   its document) is fetched the first time a built-in kind is needed, then read again every
//!   [`ClusterOptions::openapi_refresh`](super::ClusterOptions) while a document is cached;
//! - a group version's document (`/openapi/v3/api/v1`, `/openapi/v3/apis/apps/v1`) is fetched
//!   the first time one of its kinds is needed, parsed ([`crate::schema::openapi::Document`])
//!   and cached by its URL, whose hash changes with its content; each kind's schema is
//!   converted once per document. When the index gives a document a new hash, it is fetched
//!   again while the old one keeps serving (a stale hash is answered with a redirect to the
//!   current one, which is followed);
//! - errors follow the cache entries' rules ([`super::entries`]): a cached document is kept
//!   through transient errors, and through data errors unless `--fail-on-data-errors`. Without
//!   a document, a review waits for the fetch until its deadline; when the API server refused
//!   or failed (403, 404, 5xx, unusable answer), the kind is validated against the embedded
//!   v1.28.4 schemas instead, leniently, and the source says why. A failed fetch is tried
//!   again when a review needs it after a backoff (1 s doubling to 60 s), or, for the index,
//!   at the next refresh.
//!
//! Group versions a CRD, MRD or XRD serves are not looked up here: the OpenAPI knows no more
//! of them than their definitions.
//!
//! A document received with a new hash (or after a validation gave up waiting for it),
//! dropped or back tells [`super::ClusterSchemas::changes`] the kinds it defines.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http_body_util::BodyExt as _;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use super::entries::{EntryError, ErrorClass, State, rfc3339};
use super::index::Key;
use super::{Inner, Shared, describe_api_error, error_class};
use crate::checks::schema_aware::lookup::{BuiltInOrigin, SchemaInfo};

use crate::schema::openapi::{Document, Gvk};
use crate::schema::{LookupError, Schema, Scope};

/// The index's path.
pub const INDEX_PATH: &str = "/openapi/v3";
/// The largest index accepted (a cluster with a thousand CRD group versions sends ~200 KB).
const MAX_INDEX_BYTES: usize = 16 << 20;
/// The largest document accepted (`api/v1` is 1.4 MB).
const MAX_DOCUMENT_BYTES: usize = 64 << 20;
/// Redirects followed for one document (a stale hash is answered with one).
const MAX_REDIRECTS: usize = 3;
/// Most document entries kept (reviews name any group version they like before the index
/// has come); those without a document, not being fetched, go first.
const MAX_DOCUMENT_ENTRIES: usize = 1024;

/// The path of a group version's document in the index: `api/v1`, `apis/apps/v1`.
pub fn document_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// What the fetch task is asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Job {
    /// Read the index.
    Index,
    /// Fetch a document (its path and URL).
    Document(String, String),
}

/// The OpenAPI source's state, behind the cluster source's lock.
#[derive(Debug, Default)]
pub(crate) struct OpenApi {
    index: IndexState,
    documents: BTreeMap<String, DocumentEntry>,
    /// Where jobs go (the fetch task's channel; none before it starts).
    pub(crate) jobs: Option<mpsc::UnboundedSender<Job>>,
}

#[derive(Debug, Default)]
struct IndexState {
    /// Each group version's `serverRelativeURL`, as last received.
    paths: Option<BTreeMap<String, String>>,
    fetched_at: Option<String>,
    fetching: bool,
    fetches: u64,
    failure: Option<Failure>,
}

/// A failed fetch: the error, its short cause for the fallback's words, when to try again.
#[derive(Debug, Clone)]
struct Failure {
    error: EntryError,
    /// `403 Forbidden`, `no answer within 10 s`.
    cause: String,
    failures: u32,
    retry_at: Instant,
}

impl Failure {
    fn after(previous: Option<&Failure>, error: EntryError, cause: String) -> Failure {
        let failures = previous.map_or(0, |f| f.failures).saturating_add(1);
        Failure {
            error,
            cause,
            failures,
            retry_at: Instant::now() + backoff(failures),
        }
    }
}

/// 1 s, 2 s, 4 s, ... 60 s.
fn backoff(failures: u32) -> Duration {
    Duration::from_secs(1u64 << failures.saturating_sub(1).min(6)).min(Duration::from_secs(60))
}

/// One group version's document: its state as a cache entry's.
#[derive(Debug)]
struct DocumentEntry {
    state: State,
    cached: Option<Arc<CachedDocument>>,
    /// The URL being fetched.
    fetching: Option<String>,
    /// The last error; with a document cached, the ambient one.
    failure: Option<Failure>,
}

impl DocumentEntry {
    fn requested() -> Self {
        DocumentEntry {
            state: State::Requested,
            cached: None,
            fetching: None,
            failure: None,
        }
    }

    /// What a validation sees of the entry: the document cached (by URL: its hash) and the
    /// state (a kept document is stale outside ACKED).
    fn observed(&self) -> (Option<String>, State) {
        (self.cached.as_ref().map(|c| c.url.clone()), self.state)
    }

    /// The kinds the cached document defines.
    fn kinds(&self) -> BTreeSet<Key> {
        self.cached
            .iter()
            .flat_map(|c| c.document.kinds())
            .map(|gvk| (gvk.group.clone(), gvk.kind.clone()))
            .collect()
    }

    /// Records `failure`, as [`super::entries::Entry`] records errors: a data error drops
    /// the document only with `fail_on_data_errors`; a transient one is ambient when a
    /// document is cached.
    fn failed(&mut self, state: State, failure: Failure, fail_on_data_errors: bool) {
        match failure.error.class {
            ErrorClass::Data => {
                if fail_on_data_errors {
                    self.cached = None;
                }
                self.state = state;
            }
            ErrorClass::Transient => {
                if self.cached.is_none() {
                    self.state = state;
                }
            }
        }
        self.failure = Some(failure);
    }
}

/// A kind's schema, converted, or why it cannot be.
type Converted = Result<Arc<Schema>, String>;

/// A document received, parsed, with its kinds' schemas converted on first need.
struct CachedDocument {
    url: String,
    document: Document,
    received: String,
    schemas: Mutex<HashMap<Gvk, Converted>>,
}

impl std::fmt::Debug for CachedDocument {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedDocument")
            .field("url", &self.url)
            .field("received", &self.received)
            .finish_non_exhaustive()
    }
}

impl CachedDocument {
    /// The schema of `gvk` (converted once; `Ok(None)`: the document does not define it).
    fn schema(&self, gvk: &Gvk) -> Result<Option<Arc<Schema>>, String> {
        // Only the document's kinds are kept: a review names any kind it likes.
        if !self.has(gvk) {
            return Ok(None);
        }
        let mut schemas = self.schemas.lock().unwrap_or_else(PoisonError::into_inner);
        schemas
            .entry(gvk.clone())
            .or_insert_with(|| match self.document.schema(gvk) {
                Ok(Some(s)) => Ok(Arc::new(s)),
                Ok(None) => Err(format!("the document has no schema for {}", gvk.kind)),
                Err(e) => Err(e.to_string()),
            })
            .clone()
            .map(Some)
    }

    fn has(&self, gvk: &Gvk) -> bool {
        self.document.kinds().any(|k| k == gvk)
    }

    fn converted(&self) -> usize {
        self.schemas
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .filter(|s| s.is_ok())
            .count()
    }
}

/// The hash in a `serverRelativeURL` (`...?hash=ABC`).
fn hash_of(url: &str) -> Option<&str> {
    url.split_once('?')?
        .1
        .split('&')
        .find_map(|kv| kv.strip_prefix("hash="))
}

impl OpenApi {
    fn send(&self, job: Job) {
        if let Some(jobs) = &self.jobs {
            // The receiver lives as long as the fetch task; gone means stopping.
            let _ = jobs.send(job);
        }
    }

    fn fetch_index(&mut self) {
        if !self.index.fetching {
            self.index.fetching = true;
            self.send(Job::Index);
        }
    }

    fn fetch_document(&mut self, path: &str, url: &str) {
        let Some(doc) = self.documents.get_mut(path) else {
            return;
        };
        if doc.fetching.as_deref() == Some(url) {
            return;
        }
        if doc.cached.is_none() && doc.failure.is_none() {
            doc.state = State::Requested;
        }
        doc.fetching = Some(url.to_string());
        self.send(Job::Document(path.to_string(), url.to_string()));
    }

    /// After an index arrived: fetch every needed document whose URL (hash) changed; a
    /// document the index no longer lists is a data error. Returns the kinds of the documents
    /// a validation now sees differently (dropped, or back).
    fn reconcile(&mut self, fail_on_data_errors: bool) -> BTreeSet<Key> {
        let mut changed = BTreeSet::new();
        let Some(paths) = self.index.paths.clone() else {
            return changed;
        };
        let mut fetch = Vec::new();
        // Asked for before the index came, and not served: nothing to keep.
        let mut gone = Vec::new();
        for (path, doc) in &mut self.documents {
            let before = doc.observed();
            match paths.get(path) {
                Some(url) => {
                    let current = doc.cached.as_ref().is_some_and(|c| c.url == *url);
                    if current {
                        if doc.state == State::DoesNotExist {
                            doc.state = State::Acked;
                            doc.failure = None;
                        }
                    } else if doc.fetching.as_deref() != Some(url.as_str()) {
                        fetch.push((path.clone(), url.clone()));
                    }
                }
                None if doc.cached.is_none() => gone.push(path.clone()),
                None => {
                    doc.fetching = None;
                    let error = EntryError::now(
                        ErrorClass::Data,
                        format!("the API server's OpenAPI v3 index no longer lists {path}"),
                    );
                    let cause = format!("its index does not list {path}");
                    let failure = Failure::after(None, error, cause);
                    let kinds = doc.kinds();
                    doc.failed(State::DoesNotExist, failure, fail_on_data_errors);
                    if doc.observed() != before {
                        changed.extend(kinds);
                    }
                    continue;
                }
            }
            if doc.observed() != before {
                changed.extend(doc.kinds());
            }
        }
        for path in gone {
            self.documents.remove(&path);
        }
        for (path, url) in fetch {
            self.fetch_document(&path, &url);
        }
        changed
    }

    /// The entry of `path`, made (room made for it) if there is none; `None` when every
    /// entry holds a document or a fetch.
    fn entry(&mut self, path: &str) -> Option<&mut DocumentEntry> {
        if !self.documents.contains_key(path) {
            if self.documents.len() >= MAX_DOCUMENT_ENTRIES {
                let idle = self
                    .documents
                    .iter()
                    .find(|(_, d)| d.cached.is_none() && d.fetching.is_none())
                    .map(|(p, _)| p.clone())?;
                self.documents.remove(&idle);
            }
            self.documents
                .insert(path.to_string(), DocumentEntry::requested());
        }
        self.documents.get_mut(path)
    }

    /// Whether a lookup of a kind of `group`, `version` may answer from a failed fetch (of
    /// the index, or of the group version's document).
    pub(crate) fn failing(&self, group: &str, version: &str) -> bool {
        self.index.failure.is_some()
            || self
                .documents
                .get(&document_path(group, version))
                .is_some_and(|d| d.failure.is_some())
    }

    /// The failed index's failure, also for the documents waiting for it (in `state`).
    fn index_failed(&mut self, state: State, failure: Failure, fail_on_data_errors: bool) {
        if self.index.paths.is_none() {
            for doc in self.documents.values_mut() {
                if doc.cached.is_none() {
                    doc.failed(state, failure.clone(), fail_on_data_errors);
                }
            }
        }
        self.index.failure = Some(failure);
    }
}

/// The schema of a kind no definition defines, from the API server's OpenAPI v3, waiting for
/// it until `until` at most; `NotFound` when the API server serves no such kind.
pub(crate) fn resolve(
    shared: &Shared,
    mut inner: MutexGuard<'_, Inner>,
    group: &str,
    kind: &str,
    version: &str,
    until: Instant,
) -> Result<SchemaInfo, LookupError> {
    let not_found = || LookupError::NotFound {
        group: group.to_string(),
        kind: kind.to_string(),
    };
    // A group a definition serves has nothing more in the OpenAPI; without a fetch task
    // (tests driving the state) there is no OpenAPI source.
    if inner.index.has_group(group) || inner.openapi.jobs.is_none() {
        return Err(not_found());
    }
    let path = document_path(group, version);
    let gvk = Gvk {
        group: group.to_string(),
        version: version.to_string(),
        kind: kind.to_string(),
    };
    let started = Instant::now();
    loop {
        let now = Instant::now();
        let openapi = &mut inner.openapi;
        if let Some(doc) = openapi.documents.get(&path)
            && let Some(cached) = doc.cached.clone()
        {
            // Kept through a data error: say so (a transient one is only ambient).
            let stale = (doc.state != State::Acked)
                .then(|| doc.failure.as_ref().map(|f| f.error.message.clone()))
                .flatten();
            let versions = served_versions(openapi, &gvk);
            drop(inner);
            return answer(&cached, &gvk, &path, versions, stale);
        }
        let waiting_for = match &openapi.index.paths {
            None => {
                if !openapi.index.fetching {
                    if let Some(f) = openapi.index.failure.as_ref().filter(|f| now < f.retry_at) {
                        let cause = f.cause.clone();
                        drop(inner);
                        return fallback(&gvk, &cause, not_found);
                    }
                    openapi.fetch_index();
                }
                // Shown in `/debug/schemas` as waiting (or failed) with the index.
                let _ = openapi.entry(&path);
                "its OpenAPI v3 index".to_string()
            }
            Some(paths) => {
                let Some(url) = paths.get(&path).cloned() else {
                    return Err(not_found());
                };
                let Some(doc) = openapi.entry(&path) else {
                    let reason = "the cache of OpenAPI v3 documents is full".to_string();
                    return Err(LookupError::Unavailable {
                        group: group.to_string(),
                        kind: kind.to_string(),
                        reason,
                    });
                };
                if doc.fetching.is_none() {
                    if let Some(f) = doc.failure.as_ref().filter(|f| now < f.retry_at) {
                        let cause = f.cause.clone();
                        drop(inner);
                        return fallback(&gvk, &cause, not_found);
                    }
                    openapi.fetch_document(&path, &url);
                }
                format!("its OpenAPI v3 document {path}")
            }
        };
        if now >= until {
            let reason = format!(
                "the API server did not send {waiting_for} within {} ms",
                started.elapsed().as_millis()
            );
            if let Some(doc) = inner.openapi.documents.get_mut(&path)
                && doc.cached.is_none()
            {
                doc.state = State::Timeout;
            }
            return Err(LookupError::Unavailable {
                group: group.to_string(),
                kind: kind.to_string(),
                reason,
            });
        }
        inner = shared
            .changed
            .wait_timeout(inner, until - now)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
    }
}

/// The versions of `gvk`'s group the index lists whose cached document has the kind, and
/// `gvk`'s own (versions whose documents are not fetched are not listed: fetching them only
/// for this list would cost more than it tells).
fn served_versions(openapi: &OpenApi, gvk: &Gvk) -> Vec<String> {
    let prefix = document_path(&gvk.group, "");
    let Some(paths) = &openapi.index.paths else {
        return vec![gvk.version.clone()];
    };
    paths
        .keys()
        .filter_map(|p| p.strip_prefix(&prefix).map(|v| (p, v)))
        .filter(|(_, v)| !v.is_empty() && !v.contains('/'))
        .filter(|(p, v)| {
            *v == gvk.version
                || openapi
                    .documents
                    .get(*p)
                    .and_then(|d| d.cached.as_ref())
                    .is_some_and(|c| {
                        c.has(&Gvk {
                            version: v.to_string(),
                            ..gvk.clone()
                        })
                    })
        })
        .map(|(_, v)| v.to_string())
        .collect()
}

/// How findings name a built-in kind: `Deployment.apps`, `Service`.
fn kind_name(gvk: &Gvk) -> String {
    if gvk.group.is_empty() {
        gvk.kind.clone()
    } else {
        format!("{}.{}", gvk.kind, gvk.group)
    }
}

fn answer(
    cached: &CachedDocument,
    gvk: &Gvk,
    path: &str,
    served_versions: Vec<String>,
    stale: Option<String>,
) -> Result<SchemaInfo, LookupError> {
    let (schema, schema_error) = match cached.schema(gvk) {
        Ok(Some(s)) => (Some(s), None),
        Ok(None) => {
            return Err(LookupError::NotFound {
                group: gvk.group.clone(),
                kind: gvk.kind.clone(),
            });
        }
        Err(e) => (None, Some(e)),
    };
    Ok(SchemaInfo {
        crd_name: kind_name(gvk),
        schema,
        schema_error,
        version_found: true,
        served_versions,
        from_xrd: false,
        scope: match cached.document.namespaced(gvk) {
            Some(false) => Scope::Cluster,
            _ => Scope::Namespaced,
        },
        built_in: Some(BuiltInOrigin {
            source: format!("the API server's OpenAPI v3 ({path})"),
            exact: true,
        }),
        mrd: None,
        stale,
        // Built-in kinds' own deprecations are the API server's to announce.
        deprecation: None,
    })
}

/// The embedded schema, when the API server's OpenAPI could not be read (`cause`); a kind
/// the embedded documents lack is not found, as without an OpenAPI source.
fn fallback(
    gvk: &Gvk,
    cause: &str,
    not_found: impl Fn() -> LookupError,
) -> Result<SchemaInfo, LookupError> {
    SchemaInfo::embedded_built_in(
        &gvk.group,
        &gvk.kind,
        &gvk.version,
        Some(&format!(
            "the API server's OpenAPI v3 could not be read: {cause}"
        )),
    )
    .ok_or_else(not_found)
}

// ---------------------------------------------------------------------------------------
// The fetch task

/// Runs the jobs sent to `jobs` (each in its own task) and reads the index again every
/// `refresh` while a document is cached.
pub(crate) async fn run(
    shared: Arc<Shared>,
    client: kube::Client,
    mut jobs: mpsc::UnboundedReceiver<Job>,
) {
    let refresh = shared
        .options
        .openapi_refresh
        .max(Duration::from_millis(100));
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + refresh, refresh);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            job = jobs.recv() => {
                let Some(job) = job else { return };
                tokio::spawn(fetch(shared.clone(), client.clone(), job));
            }
            _ = ticks.tick() => {
                let mut inner = shared.lock();
                let cached = inner.openapi.documents.values().any(|d| d.cached.is_some());
                if cached {
                    inner.openapi.fetch_index();
                }
            }
        }
    }
}

/// Why a fetch failed: the state it leaves a document without one in, the error, and its
/// short cause.
struct Failed {
    state: State,
    error: EntryError,
    cause: String,
}

async fn fetch(shared: Arc<Shared>, client: kube::Client, job: Job) {
    let timeout = shared.options.request_timeout;
    let fail = shared.options.fail_on_data_errors;
    match job {
        Job::Index => {
            let what = format!("its OpenAPI v3 index ({INDEX_PATH})");
            let outcome = get(&client, INDEX_PATH, MAX_INDEX_BYTES, timeout, &what)
                .await
                .and_then(|(_, body)| parse_index(&body));
            let mut inner = shared.lock();
            let openapi = &mut inner.openapi;
            openapi.index.fetching = false;
            match outcome {
                Ok(paths) => {
                    tracing::debug!(paths = paths.len(), "OpenAPI v3 index received");
                    openapi.index.paths = Some(paths);
                    openapi.index.fetched_at = Some(rfc3339(SystemTime::now()));
                    openapi.index.fetches += 1;
                    openapi.index.failure = None;
                    let changed = openapi.reconcile(fail);
                    shared.kinds_changed(changed);
                }
                Err(Failed {
                    state,
                    error,
                    cause,
                }) => {
                    tracing::warn!(error = %error.message, detail = error.detail.as_deref().unwrap_or_default(), "OpenAPI v3 index not received");
                    let failure = Failure::after(openapi.index.failure.as_ref(), error, cause);
                    openapi.index_failed(state, failure, fail);
                }
            }
            shared.changed.notify_all();
        }
        Job::Document(path, url) => {
            let what = format!("its OpenAPI v3 document {path}");
            let outcome = get(&client, &url, MAX_DOCUMENT_BYTES, timeout, &what)
                .await
                .and_then(|(url, body)| parse_document(&path, url, &body));
            document_fetched(&shared, &path, &url, outcome);
        }
    }
}

/// Records what the fetch of `url` for `path` came back with, unless the entry no longer
/// waits for it; tells [`super::ClusterSchemas::changes`] the kinds of the documents, old and
/// new, when a validation now sees the entry differently.
fn document_fetched(
    shared: &Shared,
    path: &str,
    url: &str,
    outcome: Result<CachedDocument, Failed>,
) {
    let fail = shared.options.fail_on_data_errors;
    let mut inner = shared.lock();
    let Some(doc) = inner.openapi.documents.get_mut(path) else {
        return;
    };
    if doc.fetching.as_deref() != Some(url) {
        return; // A newer URL is being fetched, or the path is gone.
    }
    doc.fetching = None;
    let before = doc.observed();
    let mut kinds = doc.kinds();
    match outcome {
        Ok(cached) => {
            tracing::debug!(path = %path, url = %cached.url, "OpenAPI v3 document received");
            doc.cached = Some(Arc::new(cached));
            doc.state = State::Acked;
            doc.failure = None;
        }
        Err(Failed {
            state,
            error,
            cause,
        }) => {
            tracing::warn!(path = %path, error = %error.message, detail = error.detail.as_deref().unwrap_or_default(), "OpenAPI v3 document not received");
            let failure = Failure::after(doc.failure.as_ref(), error, cause);
            doc.failed(state, failure, fail);
        }
    }
    // Nobody saw it REQUESTED: a validation asking waits for this answer (or gives up,
    // leaving it TIMEOUT).
    let changed = doc.observed() != before && before.1 != State::Requested;
    kinds.extend(doc.kinds());
    shared.changed.notify_all();
    drop(inner);
    if changed {
        shared.kinds_changed(kinds);
    }
}

/// `GET url` (following redirects to another hash of the same document): the final URL and
/// the body, at most `limit` bytes.
async fn get(
    client: &kube::Client,
    url: &str,
    limit: usize,
    timeout: Duration,
    what: &str,
) -> Result<(String, Bytes), Failed> {
    let transient = |message: String, cause: &str, detail: Option<String>| Failed {
        state: State::Timeout,
        error: EntryError::now(ErrorClass::Transient, message).with_detail(detail),
        cause: cause.to_string(),
    };
    let request = async {
        let mut url = url.to_string();
        for _ in 0..=MAX_REDIRECTS {
            let request = http::Request::get(url.as_str())
                .header(http::header::ACCEPT, "application/json")
                .body(kube::client::Body::empty())
                .map_err(|e| {
                    transient(
                        format!("cannot build the request for {what}"),
                        "the request cannot be built",
                        Some(e.to_string()),
                    )
                })?;
            let response = client.send(request).await.map_err(|e| {
                transient(
                    format!("the API server could not be reached to get {what}"),
                    "the API server is unreachable",
                    Some(e.to_string()),
                )
            })?;
            let status = response.status();
            if status.is_redirection() {
                // Only to the same API server's OpenAPI (the client's credentials go along).
                let location = response
                    .headers()
                    .get(http::header::LOCATION)
                    .and_then(|l| l.to_str().ok())
                    .filter(|l| l.starts_with("/openapi/v3/"));
                match location {
                    Some(l) => {
                        url = l.to_string();
                        continue;
                    }
                    None => {
                        return Err(Failed {
                            state: State::ReceivedError,
                            error: EntryError::now(
                                ErrorClass::Data,
                                format!(
                                    "the API server answered {status} to getting {what}, redirecting elsewhere"
                                ),
                            ),
                            cause: status.to_string(),
                        });
                    }
                }
            }
            let body = http_body_util::Limited::new(response.into_body(), limit)
                .collect()
                .await
                .map_err(|e| {
                    transient(
                        format!("the API server's answer to getting {what} was cut or too large"),
                        "its answer was cut or too large",
                        Some(e.to_string()),
                    )
                })?
                .to_bytes();
            if status.is_success() {
                return Ok((url, body));
            }
            let api_status = serde_json::from_slice::<kube::core::Status>(&body)
                .ok()
                .filter(|s| s.code != 0)
                .unwrap_or_else(|| {
                    kube::core::Status::failure(
                        String::from_utf8_lossy(&body).trim(),
                        status.canonical_reason().unwrap_or_default(),
                    )
                    .with_code(status.as_u16())
                });
            let described = describe_api_error(&api_status);
            return Err(Failed {
                state: State::ReceivedError,
                error: EntryError::now(
                    error_class(status.as_u16()),
                    format!("the API server answered {described} to getting {what}"),
                )
                .with_detail(Some(api_status.message.clone())),
                cause: described,
            });
        }
        Err(Failed {
            state: State::ReceivedError,
            error: EntryError::now(
                ErrorClass::Transient,
                format!("the API server redirected more than {MAX_REDIRECTS} times getting {what}"),
            ),
            cause: "too many redirects".to_string(),
        })
    };
    match tokio::time::timeout(timeout, request).await {
        Ok(result) => result,
        Err(_) => {
            let secs = timeout.as_secs_f64();
            Err(transient(
                format!("the API server did not send {what} within {secs} s"),
                &format!("no answer within {secs} s"),
                None,
            ))
        }
    }
}

#[derive(Deserialize)]
struct IndexBody {
    paths: BTreeMap<String, IndexPath>,
}

#[derive(Deserialize)]
struct IndexPath {
    #[serde(rename = "serverRelativeURL")]
    url: String,
}

fn parse_index(body: &[u8]) -> Result<BTreeMap<String, String>, Failed> {
    let index: IndexBody = serde_json::from_slice(body).map_err(|e| Failed {
        state: State::Nacked,
        error: EntryError::now(
            ErrorClass::Data,
            format!("the API server's OpenAPI v3 index cannot be used: {e}"),
        ),
        cause: "its index cannot be used".to_string(),
    })?;
    Ok(index
        .paths
        .into_iter()
        // Only the API server's own paths are fetched.
        .filter(|(_, p)| p.url.starts_with("/openapi/v3/"))
        .map(|(path, p)| (path, p.url))
        .collect())
}

fn parse_document(path: &str, url: String, body: &[u8]) -> Result<CachedDocument, Failed> {
    let unusable = |e: String| Failed {
        state: State::Nacked,
        error: EntryError::now(
            ErrorClass::Data,
            format!("the API server's OpenAPI v3 document {path} cannot be used: {e}"),
        ),
        cause: format!("its document {path} cannot be used"),
    };
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| unusable(e.to_string()))?;
    let document = Document::from_value(value).map_err(|e| unusable(e.to_string()))?;
    Ok(CachedDocument {
        url,
        document,
        received: rfc3339(SystemTime::now()),
        schemas: Mutex::default(),
    })
}

// ---------------------------------------------------------------------------------------
// `/debug/schemas`

/// The OpenAPI source as `/debug/schemas` shows it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OpenApiView {
    /// The index.
    pub index: IndexView,
    /// The documents reviews needed.
    pub documents: Vec<DocumentView>,
}

/// The index.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IndexView {
    /// When it was last received (RFC 3339).
    pub fetched_at: Option<String>,
    /// Times it was received.
    pub fetches: u64,
    /// Whether a fetch is in flight.
    pub fetching: bool,
    /// The group versions it lists (`api/v1`, `apis/apps/v1`, ...).
    pub paths: Vec<String>,
    /// The last error, until the next index arrives.
    pub last_error: Option<EntryError>,
}

/// One document.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DocumentView {
    /// `apis/apps/v1`.
    pub path: String,
    /// The hash of the cached document.
    pub hash: Option<String>,
    /// The state.
    pub state: State,
    /// The state as metrics label it.
    pub metric_state: &'static str,
    /// Whether a document is cached (and used).
    pub cached: bool,
    /// When the cached document was received (RFC 3339).
    pub received: Option<String>,
    /// Kinds whose schema has been converted.
    pub kinds_converted: usize,
    /// Whether a fetch is in flight.
    pub fetching: bool,
    /// The last error; with a document cached, the ambient error.
    pub last_error: Option<EntryError>,
}

impl OpenApi {
    /// The view of `/debug/schemas`.
    pub(crate) fn view(&self) -> OpenApiView {
        OpenApiView {
            index: IndexView {
                fetched_at: self.index.fetched_at.clone(),
                fetches: self.index.fetches,
                fetching: self.index.fetching,
                paths: self
                    .index
                    .paths
                    .as_ref()
                    .map(|p| p.keys().cloned().collect())
                    .unwrap_or_default(),
                last_error: self.index.failure.as_ref().map(|f| f.error.clone()),
            },
            documents: self
                .documents
                .iter()
                .map(|(path, d)| DocumentView {
                    path: path.clone(),
                    hash: d
                        .cached
                        .as_ref()
                        .and_then(|c| hash_of(&c.url))
                        .map(str::to_string),
                    state: d.state,
                    metric_state: d.state.metric_label(d.cached.is_some()),
                    cached: d.cached.is_some(),
                    received: d.cached.as_ref().map(|c| c.received.clone()),
                    kinds_converted: d.cached.as_ref().map_or(0, |c| c.converted()),
                    fetching: d.fetching.is_some(),
                    last_error: d.failure.as_ref().map(|f| f.error.clone()),
                })
                .collect(),
        }
    }

    /// How many documents are in each metric state ([`State::METRIC_LABELS`], all present).
    /// The source's state for the metrics (`listed` once the index was read, `failing`
    /// when its last read failed, `waiting` before any need) and the documents cached.
    pub(crate) fn source_state(&self) -> (&'static str, i64) {
        let state = match (&self.index.paths, &self.index.failure) {
            (_, Some(_)) => "failing",
            (Some(_), None) => "listed",
            (None, None) => "waiting",
        };
        let cached = self
            .documents
            .values()
            .filter(|d| d.cached.is_some())
            .count();
        (state, i64::try_from(cached).unwrap_or(i64::MAX))
    }

    pub(crate) fn documents_by_state(&self) -> Vec<(&'static str, i64)> {
        State::METRIC_LABELS
            .iter()
            .map(|&label| {
                let n = self
                    .documents
                    .values()
                    .filter(|d| d.state.metric_label(d.cached.is_some()) == label)
                    .count();
                (label, i64::try_from(n).unwrap_or(i64::MAX))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::super::definitions::Source;
    use super::super::{ClusterOptions, ClusterSchemas};
    use super::*;

    /// A detached source (no tasks), listed (no definitions), with its OpenAPI jobs received
    /// here.
    fn source() -> (ClusterSchemas, mpsc::UnboundedReceiver<Job>) {
        let (schemas, _fetches) = ClusterSchemas::detached(ClusterOptions::default());
        let (tx, rx) = mpsc::unbounded_channel();
        {
            let mut inner = schemas.shared.lock();
            for s in Source::ALL {
                inner.list(s).synced = true;
            }
            inner.openapi.jobs = Some(tx);
        }
        (schemas, rx)
    }

    fn widgets(title: &str) -> CachedDocument {
        let doc = serde_json::json!({
            "info": {"title": title},
            "paths": {"/apis/example.io/v1/namespaces/{namespace}/widgets": {"post": {
                "x-kubernetes-group-version-kind": {"group": "example.io", "version": "v1", "kind": "Widget"}}}},
            "components": {"schemas": {"Widget": {"type": "object",
                "x-kubernetes-group-version-kind": [{"group": "example.io", "version": "v1", "kind": "Widget"}],
                "properties": {"size": {"type": "integer"}}}}}
        });
        parse_document(
            "apis/example.io/v1",
            format!("/openapi/v3/apis/example.io/v1?hash={title}"),
            &serde_json::to_vec(&doc).expect("JSON"),
        )
        .unwrap_or_else(|f| panic!("{}", f.error.message))
    }

    fn index(inner: &mut Inner, hash: &str) {
        let paths = [(
            "apis/example.io/v1".to_string(),
            format!("/openapi/v3/apis/example.io/v1?hash={hash}"),
        )];
        inner.openapi.index.fetching = false;
        inner.openapi.index.paths = Some(paths.into_iter().collect());
        let _ = inner.openapi.reconcile(false);
    }

    fn resolve_by(schemas: &ClusterSchemas, until: Instant) -> Result<SchemaInfo, LookupError> {
        schemas.resolve_until("example.io", "Widget", "v1", until)
    }

    #[test]
    fn a_review_waits_for_the_index_until_its_deadline() {
        let (schemas, mut jobs) = source();
        let until = Instant::now() + Duration::from_millis(50);
        let reason = match resolve_by(&schemas, until) {
            Err(LookupError::Unavailable { reason, .. }) => reason,
            other => panic!("not Unavailable: {other:?}"),
        };
        assert!(
            reason.starts_with("the API server did not send its OpenAPI v3 index within "),
            "{reason}"
        );
        assert_eq!(jobs.try_recv().ok(), Some(Job::Index));
        let view = schemas.snapshot().openapi;
        assert_eq!(view.documents[0].state, State::Timeout);
        assert!(view.index.fetching);
        // The fetch in flight is not asked for again.
        let _ = resolve_by(&schemas, Instant::now());
        assert!(jobs.try_recv().is_err());
    }

    #[test]
    fn a_kind_is_resolved_from_its_document_and_a_new_hash_is_fetched_while_the_old_serves() {
        let (schemas, mut jobs) = source();
        index(&mut schemas.shared.lock(), "A");
        // The document is fetched; a review gives up at its deadline meanwhile.
        assert!(resolve_by(&schemas, Instant::now()).is_err());
        let url = "/openapi/v3/apis/example.io/v1?hash=A".to_string();
        assert_eq!(
            jobs.try_recv().ok(),
            Some(Job::Document("apis/example.io/v1".into(), url))
        );
        {
            let mut inner = schemas.shared.lock();
            let doc = inner
                .openapi
                .documents
                .get_mut("apis/example.io/v1")
                .expect("entry");
            doc.fetching = None;
            doc.cached = Some(Arc::new(widgets("A")));
            doc.state = State::Acked;
        }
        let info = resolve_by(&schemas, Instant::now()).expect("resolved");
        assert_eq!(info.crd_name, "Widget.example.io");
        assert_eq!(info.scope, Scope::Namespaced);
        assert_eq!(info.served_versions, ["v1"]);
        assert_eq!(
            info.built_in,
            Some(BuiltInOrigin {
                source: "the API server's OpenAPI v3 (apis/example.io/v1)".into(),
                exact: true
            })
        );
        assert!(info.schema.is_some_and(|s| s.property("size").is_some()));
        assert!(matches!(
            schemas.resolve_until("example.io", "Gadget", "v1", Instant::now()),
            Err(LookupError::NotFound { .. })
        ));
        assert!(matches!(
            schemas.resolve_until("example.io", "Widget", "v2", Instant::now()),
            Err(LookupError::NotFound { .. })
        ));

        // A new hash: fetched again, the old document answers meanwhile.
        index(&mut schemas.shared.lock(), "B");
        assert_eq!(
            jobs.try_recv().ok(),
            Some(Job::Document(
                "apis/example.io/v1".into(),
                "/openapi/v3/apis/example.io/v1?hash=B".into()
            ))
        );
        assert!(resolve_by(&schemas, Instant::now()).is_ok());
        let view = schemas.snapshot().openapi;
        assert_eq!(view.documents[0].hash.as_deref(), Some("A"));
        assert_eq!(view.documents[0].kinds_converted, 1);
        assert!(view.documents[0].fetching);
        assert_eq!(schemas.openapi_documents_by_state()[0], ("acked", 1));
    }

    #[test]
    fn a_document_with_a_new_hash_tells_the_changes_of_its_kinds() {
        use super::super::SchemaChange;
        let (schemas, mut jobs) = source();
        let mut changes = schemas.changes();
        let widget = || {
            Some(SchemaChange::Kinds(BTreeSet::from([(
                "example.io".to_string(),
                "Widget".to_string(),
            )])))
        };
        let path = "apis/example.io/v1";
        let url = |hash: &str| format!("/openapi/v3/apis/example.io/v1?hash={hash}");
        index(&mut schemas.shared.lock(), "A");
        // A review gave up waiting: the document arriving is a change.
        assert!(resolve_by(&schemas, Instant::now()).is_err());
        assert_eq!(
            jobs.try_recv().ok(),
            Some(Job::Document(path.into(), url("A")))
        );
        document_fetched(&schemas.shared, path, &url("A"), Ok(widgets("A")));
        assert_eq!(changes.try_recv().ok(), widget());
        // The same hash in the next index: nothing.
        index(&mut schemas.shared.lock(), "A");
        assert_eq!(changes.try_recv().ok(), None);
        // A new hash: a change once received, not while it is fetched.
        index(&mut schemas.shared.lock(), "B");
        assert_eq!(changes.try_recv().ok(), None);
        assert_eq!(
            jobs.try_recv().ok(),
            Some(Job::Document(path.into(), url("B")))
        );
        document_fetched(&schemas.shared, path, &url("B"), Ok(widgets("B")));
        assert_eq!(changes.try_recv().ok(), widget());
        // A refetch that fails keeps the document: no change.
        index(&mut schemas.shared.lock(), "C");
        let failed = Failed {
            state: State::Timeout,
            error: EntryError::now(ErrorClass::Transient, "no answer"),
            cause: "no answer".into(),
        };
        document_fetched(&schemas.shared, path, &url("C"), Err(failed));
        assert_eq!(changes.try_recv().ok(), None);
        // No longer listed: the kept document is stale, a change.
        {
            let mut inner = schemas.shared.lock();
            inner.openapi.index.paths = Some(BTreeMap::new());
            let changed = inner.openapi.reconcile(false);
            assert_eq!(changed.len(), 1);
        }
    }

    #[test]
    fn a_refused_index_falls_back_to_the_embedded_schemas_until_the_backoff_ends() {
        let (schemas, mut jobs) = source();
        assert!(!schemas.openapi_failing("apps", "v1"));
        {
            let mut inner = schemas.shared.lock();
            let error = EntryError::now(ErrorClass::Data, "refused");
            let failure = Failure::after(None, error, "403 Forbidden".into());
            inner
                .openapi
                .index_failed(State::ReceivedError, failure, false);
        }
        let info = schemas
            .resolve_until("apps", "Deployment", "v1", Instant::now())
            .expect("embedded");
        assert_eq!(
            info.built_in,
            Some(BuiltInOrigin {
                source: "Kubernetes v1.28.4's OpenAPI, embedded (the API server's OpenAPI v3 could not be read: 403 Forbidden)".into(),
                exact: false
            })
        );
        assert_eq!(info.crd_name, "Deployment.apps");
        // Such answers are not for the verdict cache: only a lookup retries the index.
        assert!(schemas.openapi_failing("apps", "v1"));
        // A kind the embedded documents lack is not found.
        assert!(matches!(
            resolve_by(&schemas, Instant::now()),
            Err(LookupError::NotFound { .. })
        ));
        assert!(jobs.try_recv().is_err(), "not retried before the backoff");
        schemas
            .shared
            .lock()
            .openapi
            .index
            .failure
            .as_mut()
            .expect("failure")
            .retry_at = Instant::now();
        let _ = resolve_by(&schemas, Instant::now());
        assert_eq!(jobs.try_recv().ok(), Some(Job::Index));
    }

    #[test]
    fn document_paths_and_hashes() {
        assert_eq!(document_path("", "v1"), "api/v1");
        assert_eq!(document_path("apps", "v1"), "apis/apps/v1");
        assert_eq!(hash_of("/openapi/v3/api/v1?hash=AB12"), Some("AB12"));
        assert_eq!(hash_of("/openapi/v3/api/v1"), None);
        let paths = parse_index(
            br#"{"paths": {"api/v1": {"serverRelativeURL": "/openapi/v3/api/v1?hash=X"},
            "evil": {"serverRelativeURL": "https://elsewhere/openapi/v3/x"}}}"#,
        )
        .unwrap_or_else(|f| panic!("{}", f.error.message));
        assert_eq!(paths.keys().collect::<Vec<_>>(), ["api/v1"]);
        assert!(parse_index(b"{}").is_err());
    }
}
