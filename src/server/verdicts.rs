//! The verdict cache: GitOps tools apply the same Compositions again and again, and every
//! apply calls the webhook. A review of a Composition whose content was answered before,
//! while every schema that answer used is unchanged, gets that answer again without being
//! validated.
//!
//! - Key: a 128-bit hash (xxh3) of what validation reads of the object: everything but
//!   `metadata`, and of `metadata` the name, the generateName and the mode annotations (the
//!   other annotations and the labels only by whether they are all strings, which the model
//!   needs). So `resourceVersion`, `managedFields`, `uid`, timestamps and the
//!   last-applied-configuration annotation do not change it; CREATE and UPDATE, dry run or
//!   not, are validated alike.
//! - Value: the answer, the report (its findings kept by stage, type and severity only, for
//!   the log and the metrics), and the generation of every schema the validation looked up
//!   (found or not) and of the Functions if it asked for them
//!   ([`super::schemas::ServedSchemas::generation`]). A hit needs each to be unchanged;
//!   otherwise the entry is stale and dropped, and the review validated.
//! - Never cached: an answer given because of the deadline or a cancellation, one that used a
//!   schema the API server did not send in time or only the last one it sent (transient), a
//!   built-in kind's answer while the API server's OpenAPI cannot be read (retried only by
//!   lookups), and an answer made while any schema changed.
//! - Keyed without a tree when the body is plain ([`super::review::scan`]): a hit is then
//!   answered before the review waits for a worker ([`Verdicts::hit`]).
//! - Bounded by an estimate of its memory (`--verdict-cache-bytes`), least recently used
//!   first out; 0 disables it.

use std::mem::size_of;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use kube_core::admission::Operation;
use lru::LruCache;
use serde_json::Value;
use xxhash_rust::xxh3::Xxh3;

use super::admission::Decision;
use super::metrics::{Metrics, Outcome};
use super::review::{Answer, Request};
use super::schemas::{Generation, ServedSchemas};
use crate::audit::Recording;
use crate::checks::schema_aware::lookup::{SchemaInfo, SchemaSource};
use crate::findings::{BadValue, FieldError, Finding};
use crate::model::function::FunctionSet;
use crate::model::{APIEXTENSIONS_GROUP, LEGACY_MODE_ANNOTATION, MODE_ANNOTATION};
use crate::schema::LookupError;
use crate::validate::Report;

/// The default `--verdict-cache-bytes`: 16 MiB.
pub const DEFAULT_BYTES: usize = 16 * 1024 * 1024;

/// A review's key: the hash of what validation reads.
pub type Key = u128;

/// A new layout of the key gets a new tag.
const TAG: &[u8] = b"composition-webhook verdict 2\0";

/// Whether a review's answer may be cached: a CREATE or UPDATE of a Composition.
pub fn cacheable_request(operation: &Operation, group: &str, kind: &str) -> bool {
    matches!(operation, Operation::Create | Operation::Update)
        && group == APIEXTENSIONS_GROUP
        && kind == "Composition"
}

/// The key of a review whose answer may be cached ([`cacheable_request`]), from the decoded
/// object: for a review that [`super::review::scan`] could not read (the others are keyed
/// by their text, [`Streamed`]: the two never share a key).
pub fn key(request: &Request) -> Option<Key> {
    if !cacheable_request(&request.operation, &request.kind.group, &request.kind.kind) {
        return None;
    }
    let object = request.object.as_ref()?;
    let mut h = Xxh3::new();
    h.update(TAG);
    for (k, v) in object {
        member(&mut h, k);
        match v {
            Value::Object(metadata) if k == "metadata" => {
                let field = |name: &str| match metadata.get(name) {
                    None => Field::Absent,
                    // Read into maps of strings; of them, only the mode annotations matter.
                    Some(Value::Object(map)) if map.values().all(Value::is_string) => {
                        let mode = |a: &str| map.get(a).and_then(Value::as_str);
                        Field::Strings([mode(MODE_ANNOTATION), mode(LEGACY_MODE_ANNOTATION)])
                    }
                    Some(v) => Field::Value(v),
                };
                hash_metadata(
                    &mut h,
                    [
                        field("name"),
                        field("generateName"),
                        field("annotations"),
                        field("labels"),
                    ],
                );
            }
            other => hash_value(&mut h, other),
        }
    }
    h.update(b"}");
    Some(h.digest128())
}

/// One of the fields of `metadata` the key holds.
#[derive(Debug, Clone, Copy)]
pub enum Field<'a> {
    /// Not there.
    Absent,
    /// A string.
    Str(&'a str),
    /// A map of strings, and its mode annotations (if it is the annotations).
    Strings([Option<&'a str>; 2]),
    /// Anything else.
    Value(&'a Value),
}

/// What validation reads of `metadata`: the name, the generateName, the annotations and the
/// labels, in this order.
fn hash_metadata(h: &mut Xxh3, fields: [Field<'_>; 4]) {
    h.update(b"M");
    for (i, field) in fields.into_iter().enumerate() {
        match field {
            Field::Absent => h.update(b"-"),
            Field::Str(s) => string(h, s),
            Field::Strings(modes) => {
                h.update(b"S");
                if i == 2 {
                    for mode in modes {
                        match mode {
                            None => h.update(b"-"),
                            Some(s) => string(h, s),
                        }
                    }
                }
            }
            Field::Value(v) => hash_value(h, v),
        }
    }
}

fn text(h: &mut Xxh3, s: &str) {
    h.update(&(s.len() as u64).to_le_bytes());
    h.update(s.as_bytes());
}

fn member(h: &mut Xxh3, key: &str) {
    h.update(b"k");
    text(h, key);
}

fn string(h: &mut Xxh3, s: &str) {
    h.update(b"s");
    text(h, s);
}

fn unsigned(h: &mut Xxh3, u: u64) {
    h.update(b"u");
    h.update(&u.to_le_bytes());
}

fn signed(h: &mut Xxh3, i: i64) {
    h.update(b"i");
    h.update(&i.to_le_bytes());
}

fn float(h: &mut Xxh3, f: f64) {
    h.update(b"d");
    h.update(&f.to_bits().to_le_bytes());
}

/// Every value with a tag, every string with its length, every collection with an end (no
/// value's bytes are a prefix of another's); maps in their order (which findings follow).
fn hash_value(h: &mut Xxh3, v: &Value) {
    match v {
        Value::Null => h.update(b"n"),
        Value::Bool(true) => h.update(b"t"),
        Value::Bool(false) => h.update(b"f"),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                unsigned(h, u);
            } else if let Some(i) = n.as_i64() {
                signed(h, i);
            } else {
                float(h, n.as_f64().unwrap_or(f64::NAN));
            }
        }
        Value::String(s) => string(h, s),
        Value::Array(items) => {
            h.update(b"[");
            for item in items {
                hash_value(h, item);
            }
            h.update(b"]");
        }
        Value::Object(map) => {
            h.update(b"{");
            for (k, v) in map {
                member(h, k);
                hash_value(h, v);
            }
            h.update(b"}");
        }
    }
}

/// The key of an object read from JSON without a tree: [`Streamed::start`], then each member
/// ([`Streamed::member`] and [`Streamed::text`], or [`Streamed::metadata`] for `metadata`'s
/// fields), then [`Streamed::finish`]. Values are keyed by their text (tagged apart from
/// [`key`]'s values): the same text is the same value.
pub struct Streamed(Xxh3);

impl Streamed {
    /// Before the object's first member.
    pub fn start() -> Self {
        let mut h = Xxh3::new();
        h.update(TAG);
        Streamed(h)
    }

    /// A member's key.
    pub fn member(&mut self, key: &str) {
        member(&mut self.0, key);
    }

    /// A member's value, as JSON text.
    pub fn text(&mut self, json: &str) {
        self.0.update(b"r");
        text(&mut self.0, json);
    }

    /// `metadata`'s fields, once it is read.
    pub fn metadata(&mut self, fields: [Field<'_>; 4]) {
        hash_metadata(&mut self.0, fields);
    }

    /// After the last member.
    pub fn finish(mut self) -> Key {
        self.0.update(b"}");
        self.0.digest128()
    }
}

/// One cached answer.
#[derive(Debug)]
struct Cached {
    /// Each kind looked up, with its schema's generation then.
    kinds: Vec<(String, String, u64)>,
    /// The Functions' generation, if the validation asked for them.
    functions: Option<u64>,
    answer: Answer,
    outcome: Outcome,
    /// The report, its findings without fields and words.
    report: Report,
    /// The estimate of its memory.
    bytes: usize,
}

impl Cached {
    /// Whether every schema it used is as it was.
    fn current(&self, served: &dyn ServedSchemas) -> bool {
        self.kinds
            .iter()
            .all(|(g, k, n)| served.generation(Generation::Kind(g, k)) == *n)
            && self
                .functions
                .is_none_or(|n| served.generation(Generation::Functions) == n)
    }

    fn decision(&self) -> Decision {
        Decision {
            answer: self.answer.clone(),
            outcome: self.outcome,
            mode: Some(self.report.mode),
            report: Some(self.report.clone()),
        }
    }

    /// Memory held: the entry, its strings, the answer's Status (its JSON's size) and
    /// warnings, and the LRU's node.
    fn estimate(&self) -> usize {
        const NODE: usize = 64;
        let kinds: usize = self
            .kinds
            .iter()
            .map(|(g, k, _)| g.len() + k.len() + 2 * size_of::<String>() + 8)
            .sum();
        let warnings: usize = self
            .answer
            .warnings
            .iter()
            .map(|w| w.len() + size_of::<String>())
            .sum();
        let status = self.answer.status.as_ref().map_or(0, |s| {
            size_of::<kube_core::Status>() + serde_json::to_vec(s).map_or(0, |v| v.len())
        });
        size_of::<Self>()
            + size_of::<Key>()
            + NODE
            + kinds
            + warnings
            + status
            + self.report.name.len()
            + self.report.findings.len() * size_of::<Finding>()
    }
}

/// The findings as the metrics count them: stage, type, severity.
fn counted(findings: &[Finding]) -> Vec<Finding> {
    findings
        .iter()
        .map(|f| Finding {
            stage: f.stage,
            severity: f.severity,
            error: FieldError::new(f.error.error_type, String::new(), BadValue::Omit, ""),
            advisory: f.advisory,
        })
        .collect()
}

/// What a lookup found.
enum Lookup {
    Hit(Arc<Cached>),
    Miss,
    Stale,
}

struct Entries {
    lru: LruCache<Key, Arc<Cached>>,
    bytes: usize,
}

/// The verdict cache of a server.
pub struct Verdicts {
    budget: usize,
    entries: Mutex<Entries>,
    metrics: Arc<Metrics>,
}

impl Verdicts {
    /// A cache of at most `budget` bytes (0: none), counted in `metrics`.
    pub fn new(budget: usize, metrics: Arc<Metrics>) -> Self {
        Verdicts {
            budget,
            entries: Mutex::new(Entries {
                lru: LruCache::unbounded(),
                bytes: 0,
            }),
            metrics,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Entries> {
        // Every update is a put or a pop and a sum: a poisoned lock still holds consistent data.
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Answers held, and their estimated bytes.
    pub fn size(&self) -> (usize, usize) {
        let e = self.lock();
        (e.lru.len(), e.bytes)
    }

    /// The decision on `request`: the cached one when it holds, else `decide`'s (with the
    /// schemas of `schemas`, the request's view of `served`), cached when it may be.
    pub fn decide(
        &self,
        request: Request,
        served: &dyn ServedSchemas,
        schemas: &dyn SchemaSource,
        decide: impl FnOnce(Request, &dyn SchemaSource) -> Decision,
    ) -> Decision {
        self.decide_keyed(None, request, served, schemas, decide)
    }

    /// The cached decision for `key`, if one holds (counted as a hit); otherwise nothing is
    /// counted or dropped, for [`Verdicts::decide_keyed`] to do. For answering a hit before
    /// the review waits for a worker.
    pub fn hit(&self, key: Key, served: &dyn ServedSchemas) -> Option<Decision> {
        if self.budget == 0 {
            return None;
        }
        let cached = self.lock().lru.get(&key).cloned()?;
        if !cached.current(served) {
            return None;
        }
        self.metrics.verdict_cache_lookup("hit");
        Some(cached.decision())
    }

    /// As [`Verdicts::decide`], with the request's key when it is known already (read from
    /// the body by [`super::review::scan`]; else taken from the request).
    pub fn decide_keyed(
        &self,
        key: Option<Key>,
        request: Request,
        served: &dyn ServedSchemas,
        schemas: &dyn SchemaSource,
        decide: impl FnOnce(Request, &dyn SchemaSource) -> Decision,
    ) -> Decision {
        let key = if self.budget == 0 {
            None
        } else {
            key.or_else(|| self::key(&request))
        };
        let Some(key) = key else {
            return decide(request, schemas);
        };
        let result = match self.lookup(key, served) {
            Lookup::Hit(cached) => {
                self.metrics.verdict_cache_lookup("hit");
                return cached.decision();
            }
            Lookup::Miss => "miss",
            Lookup::Stale => "stale",
        };
        self.metrics.verdict_cache_lookup(result);
        let before = served.generation(Generation::Any);
        let watched = Watched::new(schemas);
        let recording = Recording::new(&watched);
        let decision = decide(request, &recording);
        if let Some(cached) = cacheable(&decision, &watched, served) {
            let dependencies = recording.dependencies();
            let kinds = dependencies
                .kinds
                .into_iter()
                .map(|(g, k)| {
                    let n = served.generation(Generation::Kind(&g, &k));
                    (g, k, n)
                })
                .collect();
            let functions = dependencies
                .functions
                .then(|| served.generation(Generation::Functions));
            // A change while validating: which schemas the answer saw is not known.
            if served.generation(Generation::Any) == before {
                self.insert(key, cached.with(kinds, functions));
            }
        }
        decision
    }

    fn lookup(&self, key: Key, served: &dyn ServedSchemas) -> Lookup {
        let Some(cached) = self.lock().lru.get(&key).cloned() else {
            return Lookup::Miss;
        };
        if cached.current(served) {
            return Lookup::Hit(cached);
        }
        let mut e = self.lock();
        if e.lru.peek(&key).is_some_and(|c| Arc::ptr_eq(c, &cached)) {
            e.lru.pop(&key);
            e.bytes -= cached.bytes;
        }
        self.metrics.set_verdict_cache(e.lru.len(), e.bytes);
        Lookup::Stale
    }

    fn insert(&self, key: Key, mut cached: Cached) {
        cached.bytes = cached.estimate();
        if cached.bytes > self.budget {
            return;
        }
        let bytes = cached.bytes;
        let mut e = self.lock();
        if let Some(old) = e.lru.put(key, Arc::new(cached)) {
            e.bytes -= old.bytes;
        }
        e.bytes += bytes;
        while e.bytes > self.budget {
            match e.lru.pop_lru() {
                Some((_, old)) => e.bytes -= old.bytes,
                None => break,
            }
        }
        self.metrics.set_verdict_cache(e.lru.len(), e.bytes);
    }
}

/// The parts of a decision worth caching, if it may be: a validated Composition's answer,
/// not cut short by time, from schemas that were all there to be read.
fn cacheable(
    decision: &Decision,
    watched: &Watched<'_>,
    served: &dyn ServedSchemas,
) -> Option<Partial> {
    if !matches!(
        decision.outcome,
        Outcome::Allowed | Outcome::Warned | Outcome::Denied
    ) {
        return None;
    }
    let report = decision.report.as_ref()?;
    // Stopped early, or answered by functions (which may answer otherwise at another
    // address, another revision, or once reachable): not for later.
    if report.stopped.as_ref().is_some_and(|e| !e.is_input()) || report.function_calls > 0 {
        return None;
    }
    let seen = watched.seen.lock().unwrap_or_else(PoisonError::into_inner);
    if seen.transient
        || seen
            .built_ins
            .iter()
            .any(|(group, version)| served.retried_on_lookup(group, version))
    {
        return None;
    }
    Some(Partial {
        answer: decision.answer.clone(),
        outcome: decision.outcome,
        report: Report {
            name: report.name.clone(),
            mode: report.mode,
            mode_source: report.mode_source,
            findings: counted(&report.findings),
            verdict: report.verdict,
            stopped: report.stopped.clone(),
            function_calls: 0,
        },
    })
}

/// A cacheable decision before the generations are read.
struct Partial {
    answer: Answer,
    outcome: Outcome,
    report: Report,
}

impl Partial {
    fn with(self, kinds: Vec<(String, String, u64)>, functions: Option<u64>) -> Cached {
        Cached {
            kinds,
            functions,
            answer: self.answer,
            outcome: self.outcome,
            report: self.report,
            bytes: 0,
        }
    }
}

/// What lookups answered that makes an answer unfit to keep.
#[derive(Default)]
struct Seen {
    /// A schema unavailable (not sent in time), or only the last one received.
    transient: bool,
    /// Group and version of each lookup answered by a built-in kind's schema or not found:
    /// from the API server's OpenAPI, which may be failing.
    built_ins: Vec<(String, String)>,
}

/// A schema source that notes [`Seen`].
struct Watched<'a> {
    inner: &'a dyn SchemaSource,
    seen: Mutex<Seen>,
}

impl<'a> Watched<'a> {
    fn new(inner: &'a dyn SchemaSource) -> Self {
        Watched {
            inner,
            seen: Mutex::default(),
        }
    }
}

impl SchemaSource for Watched<'_> {
    fn resolve(&self, group: &str, kind: &str, version: &str) -> Result<SchemaInfo, LookupError> {
        let result = self.inner.resolve(group, kind, version);
        let transient = matches!(&result, Err(LookupError::Unavailable { .. }))
            || result.as_ref().is_ok_and(|i| i.stale.is_some());
        let built_in = matches!(&result, Err(LookupError::NotFound { .. }))
            || result.as_ref().is_ok_and(|i| i.built_in.is_some());
        if transient || built_in {
            let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
            seen.transient |= transient;
            if built_in {
                seen.built_ins
                    .push((group.to_string(), version.to_string()));
            }
        }
        result
    }

    fn functions(&self) -> Option<Arc<FunctionSet>> {
        self.inner.functions()
    }

    fn activation_policies(&self) -> Option<Arc<crate::schema::ActivationPolicies>> {
        self.inner.activation_policies()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::{Duration, Instant};

    use serde_json::json;

    use super::*;
    use crate::mode::Mode;
    use crate::schema::Catalog;
    use crate::server::admission;
    use crate::server::operations::Readiness;

    const XRD: &str = r#"
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata: {name: xbuckets.example.org}
spec:
  group: example.org
  names: {kind: XBucket, plural: xbuckets}
  versions:
  - name: v1
    served: true
    referenceable: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
"#;

    /// Schemas from files whose generations tests bump.
    struct Served {
        catalog: Catalog,
        any: AtomicU64,
        kinds: Mutex<HashMap<(String, String), u64>>,
        functions: AtomicU64,
        /// A kind the source cannot answer for now.
        unavailable: Option<&'static str>,
    }

    impl Served {
        fn new() -> Self {
            let mut catalog = Catalog::new();
            for doc in crate::document::parse_documents("xrd.yaml", XRD).expect("parses") {
                catalog.add_document(&doc.value, "xrd.yaml").expect("XRD");
            }
            Served {
                catalog,
                any: AtomicU64::new(0),
                kinds: Mutex::default(),
                functions: AtomicU64::new(0),
                unavailable: None,
            }
        }

        fn bump(&self, group: &str, kind: &str) {
            *self
                .kinds
                .lock()
                .unwrap()
                .entry((group.into(), kind.into()))
                .or_default() += 1;
            self.any.fetch_add(1, Ordering::SeqCst);
        }
    }

    impl SchemaSource for Served {
        fn resolve(
            &self,
            group: &str,
            kind: &str,
            version: &str,
        ) -> Result<SchemaInfo, LookupError> {
            if self.unavailable == Some(kind) {
                return Err(LookupError::Unavailable {
                    group: group.into(),
                    kind: kind.into(),
                    reason: "the API server did not send it within 7 ms".into(),
                });
            }
            self.catalog.resolve(group, kind, version)
        }
    }

    impl ServedSchemas for Served {
        fn for_request(&self, _until: Instant) -> Box<dyn SchemaSource + '_> {
            Box::new(self)
        }
        fn readiness(&self) -> Readiness {
            Readiness::ready("test")
        }
        fn kinds(&self) -> usize {
            1
        }
        fn generation(&self, of: Generation<'_>) -> u64 {
            match of {
                Generation::Any => self.any.load(Ordering::SeqCst),
                Generation::Kind(g, k) => self
                    .kinds
                    .lock()
                    .unwrap()
                    .get(&(g.to_string(), k.to_string()))
                    .copied()
                    .unwrap_or(0),
                Generation::Functions => self.functions.load(Ordering::SeqCst),
            }
        }
    }

    fn composition(name: &str, size: Value) -> Value {
        json!({
            "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
            "metadata": {"name": name, "resourceVersion": "1", "uid": "u-1",
                "creationTimestamp": "2026-01-01T00:00:00Z",
                "managedFields": [{"manager": "kubectl", "operation": "Update"}],
                "labels": {"team": "a"},
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
            "spec": {
                "compositeTypeRef": {"apiVersion": "example.org/v1", "kind": "XBucket"},
                "mode": "Resources",
                "resources": [{"name": "bucket",
                    "base": {"apiVersion": "example.org/v1", "kind": "XBucket", "spec": {"size": size}}}],
            },
        })
    }

    fn request(op: &str, object: &Value) -> Request {
        let review = json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u", "operation": op, "userInfo": {}, "name": "c",
                "kind": {"group": "apiextensions.crossplane.io", "version": "v1", "kind": "Composition"},
                "object": object, "dryRun": op == "UPDATE"},
        });
        super::super::review::decode(None, review.to_string().as_bytes(), usize::MAX)
            .expect("decodes")
    }

    fn key_of(object: &Value) -> Key {
        key(&request("CREATE", object)).expect("a key")
    }

    #[test]
    fn keyed_by_what_validation_reads() {
        let base = composition("c", json!(1));
        let k = key_of(&base);
        // What the API server changes, or validation does not read: the same key.
        let mut same = base.clone();
        same["metadata"]["resourceVersion"] = json!("2");
        same["metadata"]["uid"] = json!("u-2");
        same["metadata"]["creationTimestamp"] = json!("2026-02-02T00:00:00Z");
        same["metadata"]["generation"] = json!(7);
        same["metadata"]["managedFields"][0]["time"] = json!("2026-02-02T00:00:00Z");
        same["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] =
            json!("{\"spec\":{}}");
        same["metadata"]["labels"]["team"] = json!("b");
        assert_eq!(key_of(&same), k);
        assert_eq!(
            key(&request("UPDATE", &base)),
            Some(k),
            "UPDATE and dry run alike"
        );
        // What it reads: another key.
        let mut changed = Vec::new();
        changed.push(composition("c", json!(2)));
        changed.push(composition("d", json!(1)));
        let mut v = base.clone();
        v["metadata"]["generateName"] = json!("c-");
        changed.push(v);
        let mut v = base.clone();
        v["metadata"]["annotations"][MODE_ANNOTATION] = json!("strict");
        changed.push(v);
        let mut v = base.clone();
        v["metadata"]["annotations"][LEGACY_MODE_ANNOTATION] = json!("loose");
        changed.push(v);
        // The model reads annotations and labels as strings: another type is an error.
        let mut v = base.clone();
        v["metadata"]["labels"]["team"] = json!(1);
        changed.push(v);
        let mut v = base.clone();
        v["metadata"]["annotations"]["x"] = json!(null);
        changed.push(v);
        let mut v = base.clone();
        v["spec"]["resources"][0]["base"]["spec"]["size"] = json!("1");
        changed.push(v);
        let keys: std::collections::BTreeSet<Key> = changed.iter().map(key_of).collect();
        assert_eq!(keys.len(), changed.len(), "each change has its own key");
        assert!(!keys.contains(&k));
        // Nothing to cache for DELETE, or for another kind.
        assert_eq!(key(&request("DELETE", &base)), None);
        let mut other = request("CREATE", &base);
        other.kind.kind = "CompositeResourceDefinition".into();
        assert_eq!(key(&other), None);
    }

    fn review(cache: &Verdicts, served: &Served, object: &Value) -> Decision {
        let schemas = served.for_request(Instant::now());
        cache.decide(
            request("CREATE", object),
            served,
            schemas.as_ref(),
            |request, schemas| {
                admission::decide(
                    request,
                    schemas,
                    Mode::Loose,
                    true,
                    Duration::from_secs(9),
                    |_, _| None,
                )
            },
        )
    }

    /// The lookup counters' lines, sorted.
    fn lookups(metrics: &Metrics) -> Vec<String> {
        let mut lines: Vec<String> = metrics
            .encode()
            .lines()
            .filter(|l| l.starts_with("composition_webhook_verdict_cache_lookups_total"))
            .map(str::to_string)
            .collect();
        lines.sort();
        lines
    }

    #[test]
    fn a_hit_answers_as_validation_did_until_a_schema_it_used_changes() {
        let metrics = Arc::new(Metrics::new());
        let cache = Verdicts::new(DEFAULT_BYTES, metrics.clone());
        let served = Served::new();
        // Denied: a string where the schema wants an integer.
        let object = composition("c", json!("large"));
        let first = review(&cache, &served, &object);
        assert_eq!(first.outcome, Outcome::Denied);
        let message = first.answer.status.as_ref().map(|s| s.message.clone());
        assert_eq!(
            message.as_deref(),
            Some(
                r#"Composition.apiextensions.crossplane.io "c" is invalid: spec.resources[0].base.spec.size: Invalid value: "string": spec.size in body must be of type integer: "string""#
            )
        );
        assert_eq!(cache.size().0, 1);
        let mut again = object.clone();
        again["metadata"]["resourceVersion"] = json!("9");
        let hit = review(&cache, &served, &again);
        assert_eq!(
            (&hit.answer, hit.outcome, hit.mode),
            (&first.answer, first.outcome, first.mode)
        );
        let report = hit.report.expect("a report");
        assert_eq!((report.name.as_str(), report.findings.len()), ("c", 1));
        assert_eq!(
            lookups(&metrics),
            [
                r#"composition_webhook_verdict_cache_lookups_total{result="hit"} 1"#,
                r#"composition_webhook_verdict_cache_lookups_total{result="miss"} 1"#,
            ]
        );
        // Another kind's schema changed: still a hit.
        served.bump("example.org", "XQueue");
        review(&cache, &served, &object);
        // The XR's schema changed: stale, validated again, cached again.
        served.bump("example.org", "XBucket");
        let fresh = review(&cache, &served, &object);
        assert_eq!(fresh.answer, first.answer);
        review(&cache, &served, &object);
        assert_eq!(
            lookups(&metrics),
            [
                r#"composition_webhook_verdict_cache_lookups_total{result="hit"} 3"#,
                r#"composition_webhook_verdict_cache_lookups_total{result="miss"} 1"#,
                r#"composition_webhook_verdict_cache_lookups_total{result="stale"} 1"#,
            ]
        );
        // A kind looked up and not found counts too.
        let mut missing = composition("m", json!(1));
        missing["spec"]["resources"][0]["base"]["kind"] = json!("XMissing");
        let d = review(&cache, &served, &missing);
        assert_eq!(d.outcome, Outcome::Warned);
        review(&cache, &served, &missing);
        served.bump("example.org", "XMissing");
        review(&cache, &served, &missing);
        assert_eq!(
            lookups(&metrics),
            [
                r#"composition_webhook_verdict_cache_lookups_total{result="hit"} 4"#,
                r#"composition_webhook_verdict_cache_lookups_total{result="miss"} 2"#,
                r#"composition_webhook_verdict_cache_lookups_total{result="stale"} 2"#,
            ]
        );
    }

    #[test]
    fn transient_answers_are_not_cached() {
        let metrics = Arc::new(Metrics::new());
        let cache = Verdicts::new(DEFAULT_BYTES, metrics.clone());
        let mut served = Served::new();
        served.unavailable = Some("XBucket");
        let object = composition("c", json!(1));
        let d = review(&cache, &served, &object);
        assert_eq!(d.outcome, Outcome::Warned);
        assert_eq!(cache.size(), (0, 0));
        // Stopped by a cancellation: answered by the mode, not cached.
        served.unavailable = None;
        let cancel = crate::budget::Cancel::new();
        cancel.cancel();
        let (d, _) = crate::budget::Budget::default()
            .with_cancel(cancel)
            .run(|| review(&cache, &served, &object));
        assert_eq!(d.outcome, Outcome::DeadlineExceeded);
        assert_eq!(cache.size(), (0, 0));
        // A schema changing while validating: not cached either.
        let schemas = served.for_request(Instant::now());
        cache.decide(
            request("CREATE", &object),
            &served,
            schemas.as_ref(),
            |r, s| {
                let d =
                    admission::decide(r, s, Mode::Loose, true, Duration::from_secs(9), |_, _| None);
                served.bump("", "ConfigMap");
                d
            },
        );
        assert_eq!(cache.size(), (0, 0));
        review(&cache, &served, &object);
        assert_eq!(cache.size().0, 1);
    }

    #[test]
    fn bounded_by_bytes_least_recently_used_first() {
        let metrics = Arc::new(Metrics::new());
        let served = Served::new();
        let probe = Verdicts::new(DEFAULT_BYTES, metrics.clone());
        review(&probe, &served, &composition("a", json!(1)));
        let one = probe.size().1;
        assert!(one > 500 && one < 4096, "{one}");
        // Room for two.
        let cache = Verdicts::new(one * 2 + one / 2, metrics.clone());
        for name in ["a", "b"] {
            review(&cache, &served, &composition(name, json!(1)));
        }
        review(&cache, &served, &composition("a", json!(1))); // a is used again
        review(&cache, &served, &composition("c", json!(1))); // b goes
        assert_eq!(cache.size(), (2, 2 * one));
        let hits = |m: &Metrics| {
            lookups(m)
                .iter()
                .find(|l| l.contains("hit"))
                .cloned()
                .unwrap_or_default()
        };
        let before = hits(&metrics);
        review(&cache, &served, &composition("a", json!(1)));
        assert_ne!(hits(&metrics), before, "a is still there");
        let before = hits(&metrics);
        review(&cache, &served, &composition("b", json!(1)));
        assert_eq!(hits(&metrics), before, "b was evicted");
        // An answer larger than the whole budget is not kept; 0 keeps nothing.
        let small = Verdicts::new(one - 1, metrics.clone());
        review(&small, &served, &composition("a", json!(1)));
        assert_eq!(small.size(), (0, 0));
        let off = Verdicts::new(0, metrics.clone());
        review(&off, &served, &composition("a", json!(1)));
        assert_eq!(off.size(), (0, 0));
        assert!(
            metrics
                .encode()
                .contains("composition_webhook_verdict_cache_bytes "),
            "the gauge is there"
        );
    }
}
