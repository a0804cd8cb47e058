//! Prometheus metrics (prometheus-client), served on the operations port at `/metrics`.
//!
//! Names parallel the API server's own webhook metrics, and the review duration histogram uses
//! the buckets of `apiserver_admission_webhook_admission_duration_seconds`, so the two can be
//! read side by side. Calls to the API server are recorded through a channel and counted by a
//! task of their own, off the path of the call that made them.

use std::sync::atomic::{AtomicI64, AtomicU64};
use std::time::Duration;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use tokio::sync::mpsc;

use crate::findings::Finding;

/// The buckets of the API server's webhook duration histogram.
pub const APISERVER_WEBHOOK_BUCKETS: [f64; 8] = [0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 10.0, 25.0];

/// How a review ended.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq)]
pub enum Outcome {
    /// Admitted without warnings.
    Allowed,
    /// Admitted with warnings.
    Warned,
    /// Denied for what the Composition holds.
    Denied,
    /// The review itself could not be read.
    Malformed,
    /// Validation could not finish before the API server's deadline.
    DeadlineExceeded,
}

impl Outcome {
    /// The name in metrics and logs.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Allowed => "allowed",
            Outcome::Warned => "warned",
            Outcome::Denied => "denied",
            Outcome::Malformed => "malformed",
            Outcome::DeadlineExceeded => "deadline_exceeded",
        }
    }
}

impl EncodeLabelValue for Outcome {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        EncodeLabelValue::encode(&self.name(), encoder)
    }
}

/// Labels of a review.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReviewLabels {
    /// CREATE, UPDATE, DELETE, CONNECT, or `unknown` when the review could not be read.
    pub operation: &'static str,
    /// The validation mode, or `none` when no Composition was validated.
    pub mode: &'static str,
    /// How it ended.
    pub verdict: Outcome,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FindingLabels {
    stage: &'static str,
    r#type: &'static str,
    severity: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AuditFindingLabels {
    composition: String,
    severity: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AuditReasonLabels {
    reason: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CacheResultLabels {
    result: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RefusedLabels {
    reason: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReloadLabels {
    result: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    source: &'static str,
    state: &'static str,
}

/// Labels of a call to the API server.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ApiCallLabels {
    /// `list`, `watch`, `get`, ...
    pub verb: &'static str,
    /// The resource, as `customresourcedefinitions`.
    pub resource: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ApiErrorLabels {
    verb: &'static str,
    resource: &'static str,
    error: String,
}

/// One finished call to the API server.
#[derive(Debug, Clone)]
pub struct ApiCall {
    /// Verb and resource.
    pub labels: ApiCallLabels,
    /// How long it took.
    pub duration: Duration,
    /// The error class when it failed (`timeout`, `connect`, `http_403`, ...).
    pub error: Option<String>,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn webhook_histogram() -> Histogram {
    Histogram::new(APISERVER_WEBHOOK_BUCKETS)
}

/// Every metric of the server.
pub struct Metrics {
    registry: Registry,
    reviews: Family<ReviewLabels, Counter>,
    review_duration: HistogramFamily<ReviewLabels>,
    findings: Family<FindingLabels, Counter>,
    in_flight: Gauge,
    refused: Family<RefusedLabels, Counter>,
    schema_kinds: Gauge,
    schema_entries: Family<StateLabels, Gauge>,
    source_objects: Family<StateLabels, Gauge>,
    cert_reloads: Family<ReloadLabels, Counter>,
    cert_expiry: Gauge<f64, AtomicU64>,
    api_calls: Family<ApiCallLabels, Counter>,
    api_call_duration: HistogramFamily<ApiCallLabels>,
    api_call_errors: Family<ApiErrorLabels, Counter>,
    api_calls_dropped: Counter,
    audit_findings: Family<AuditFindingLabels, Gauge>,
    audit_queue: Gauge,
    audit_leader: Gauge,
    audit_validations: Family<AuditReasonLabels, Counter>,
    verdict_cache: Family<CacheResultLabels, Counter>,
    verdict_cache_entries: Gauge,
    verdict_cache_bytes: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// All metrics, registered under the `composition_webhook` prefix.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("composition_webhook");
        let m = Metrics {
            reviews: Family::default(),
            review_duration: Family::new_with_constructor(webhook_histogram),
            findings: Family::default(),
            in_flight: Gauge::<i64, AtomicI64>::default(),
            refused: Family::default(),
            schema_kinds: Gauge::<i64, AtomicI64>::default(),
            source_objects: Family::default(),
            schema_entries: Family::default(),
            cert_reloads: Family::default(),
            cert_expiry: Gauge::default(),
            api_calls: Family::default(),
            api_call_duration: Family::new_with_constructor(webhook_histogram),
            api_call_errors: Family::default(),
            api_calls_dropped: Counter::default(),
            audit_findings: Family::default(),
            audit_queue: Gauge::<i64, AtomicI64>::default(),
            audit_leader: Gauge::<i64, AtomicI64>::default(),
            audit_validations: Family::default(),
            verdict_cache: Family::default(),
            verdict_cache_entries: Gauge::<i64, AtomicI64>::default(),
            verdict_cache_bytes: Gauge::<i64, AtomicI64>::default(),
            registry: Registry::default(),
        };
        registry.register(
            "admission_reviews",
            "AdmissionReviews answered, by operation, validation mode and verdict",
            m.reviews.clone(),
        );
        registry.register_with_unit(
            "admission_review_duration",
            "Time from receiving an AdmissionReview to answering it (buckets of the API server's webhook histogram)",
            prometheus_client::registry::Unit::Seconds,
            m.review_duration.clone(),
        );
        registry.register(
            "findings",
            "Findings reported in answered reviews, by stage, error type and severity",
            m.findings.clone(),
        );
        registry.register(
            "reviews_in_flight",
            "AdmissionReviews being read or validated",
            m.in_flight.clone(),
        );
        registry.register(
            "reviews_refused",
            "Requests to /validate refused before they were read (429), by reason: in_flight (every place taken), client_in_flight (the client address has its share)",
            m.refused.clone(),
        );
        registry.register(
            "schema_catalog_kinds",
            "Kinds whose schemas the webhook knows (--crds files), or CRDs and XRDs listed from the API server",
            m.schema_kinds.clone(),
        );
        registry.register(
            "schema_cache_entries",
            "Schema cache entries of the kinds Compositions needed (cluster source), by the source of their definition (crd, mrd, xrd; none without one; openapi: built-in kinds' OpenAPI v3 documents) and state: acked, does_not_exist(_but_cached), nacked(_but_cached), received_error(_but_cached), timeout, requested",
            m.schema_entries.clone(),
        );
        registry.register(
            "schema_source_objects",
            "Objects listed from each watched source (cluster source: crd, mrd, xrd, mrap, function; openapi: documents cached), labelled with the source's state: listed, absent (not served), waiting (not listed yet), failing",
            m.source_objects.clone(),
        );
        registry.register(
            "tls_certificate_reloads",
            "Serving certificate reloads from files, by result (loaded or rejected)",
            m.cert_reloads.clone(),
        );
        registry.register_with_unit(
            "tls_certificate_expiry_timestamp",
            "Expiry (notAfter) of the serving certificate, as Unix time",
            prometheus_client::registry::Unit::Seconds,
            m.cert_expiry.clone(),
        );
        registry.register(
            "apiserver_calls",
            "Calls made to the Kubernetes API server, by verb and resource",
            m.api_calls.clone(),
        );
        registry.register_with_unit(
            "apiserver_call_duration",
            "Duration of calls made to the Kubernetes API server",
            prometheus_client::registry::Unit::Seconds,
            m.api_call_duration.clone(),
        );
        registry.register(
            "apiserver_call_errors",
            "Failed calls to the Kubernetes API server, by verb, resource and error",
            m.api_call_errors.clone(),
        );
        registry.register(
            "apiserver_call_records_dropped",
            "API server call records dropped because the metrics task was behind",
            m.api_calls_dropped.clone(),
        );
        registry.register(
            "audit_findings",
            "Findings of each Composition's last audit (serve --audit), by severity (error, warning)",
            m.audit_findings.clone(),
        );
        registry.register(
            "audit_queue_length",
            "Compositions waiting to be audited (again)",
            m.audit_queue.clone(),
        );
        registry.register(
            "audit_leader",
            "1 while this replica holds the audit's Lease and audits (serve --audit), else 0",
            m.audit_leader.clone(),
        );
        registry.register(
            "audit_validations",
            "Audit validations, by why they ran: new, changed, schemas, functions, retry",
            m.audit_validations.clone(),
        );
        registry.register(
            "verdict_cache_lookups",
            "Reviews of Compositions looked up in the verdict cache, by result: hit (answered from it), miss (no entry), stale (an entry whose schemas changed since)",
            m.verdict_cache.clone(),
        );
        registry.register(
            "verdict_cache_entries",
            "Answers held in the verdict cache",
            m.verdict_cache_entries.clone(),
        );
        registry.register_with_unit(
            "verdict_cache",
            "Memory the verdict cache's entries take, as estimated against --verdict-cache-bytes",
            prometheus_client::registry::Unit::Bytes,
            m.verdict_cache_bytes.clone(),
        );
        Metrics { registry, ..m }
    }

    /// Records an answered review.
    pub fn review(&self, labels: ReviewLabels, elapsed: Duration, findings: &[Finding]) {
        self.reviews.get_or_create(&labels).inc();
        self.review_duration
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
        for f in findings {
            self.findings
                .get_or_create(&FindingLabels {
                    stage: f.stage.name(),
                    r#type: f.error.error_type.name(),
                    severity: f.severity.name(),
                })
                .inc();
        }
    }

    /// A request to /validate refused before it was read, for `reason`.
    pub fn review_refused(&self, reason: &'static str) {
        self.refused.get_or_create(&RefusedLabels { reason }).inc();
    }

    /// The gauge of reviews in flight.
    pub fn in_flight(&self) -> &Gauge {
        &self.in_flight
    }

    /// Sets the number of kinds with schemas.
    pub fn set_schema_kinds(&self, n: usize) {
        self.schema_kinds.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// Sets the count of cache entries of each source in each state.
    pub fn set_schema_entries(&self, counts: &[(&'static str, &'static str, i64)]) {
        for &(source, state, n) in counts {
            self.schema_entries
                .get_or_create(&StateLabels { source, state })
                .set(n);
        }
    }

    /// Sets each watched source's objects under its current state (its other states'
    /// series are cleared).
    pub fn set_schema_sources(&self, sources: &[(&'static str, &'static str, i64)]) {
        const STATES: [&str; 4] = ["listed", "absent", "waiting", "failing"];
        for &(source, current, n) in sources {
            for state in STATES {
                let value = if state == current { n } else { 0 };
                let labels = StateLabels { source, state };
                if value != 0 || state == current {
                    self.source_objects.get_or_create(&labels).set(value);
                } else {
                    self.source_objects.remove(&labels);
                }
            }
        }
    }

    /// Sets the findings of a Composition's last audit.
    pub fn set_audit_findings(&self, composition: &str, errors: usize, warnings: usize) {
        for (severity, n) in [("error", errors), ("warning", warnings)] {
            self.audit_findings
                .get_or_create(&AuditFindingLabels {
                    composition: composition.to_string(),
                    severity,
                })
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }

    /// Removes the series of a Composition that is gone.
    pub fn remove_audit_findings(&self, composition: &str) {
        for severity in ["error", "warning"] {
            self.audit_findings.remove(&AuditFindingLabels {
                composition: composition.to_string(),
                severity,
            });
        }
    }

    /// Counts a verdict cache lookup: `hit`, `miss` or `stale`.
    pub fn verdict_cache_lookup(&self, result: &'static str) {
        self.verdict_cache
            .get_or_create(&CacheResultLabels { result })
            .inc();
    }

    /// Sets the verdict cache's entries and bytes.
    pub fn set_verdict_cache(&self, entries: usize, bytes: usize) {
        self.verdict_cache_entries
            .set(i64::try_from(entries).unwrap_or(i64::MAX));
        self.verdict_cache_bytes
            .set(i64::try_from(bytes).unwrap_or(i64::MAX));
    }

    /// Sets how many Compositions wait to be audited.
    pub fn set_audit_queue(&self, n: usize) {
        self.audit_queue.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// Sets whether this replica audits (holds the audit's Lease).
    pub fn set_audit_leader(&self, leading: bool) {
        self.audit_leader.set(i64::from(leading));
    }

    /// Counts an audit validation run for `reason` (`new`, `changed`, `schemas`,
    /// `functions`, `retry`).
    pub fn audit_validated(&self, reason: &'static str) {
        self.audit_validations
            .get_or_create(&AuditReasonLabels { reason })
            .inc();
    }

    /// Records a certificate load: its expiry when loaded, a rejection otherwise.
    pub fn certificate(&self, loaded: Option<i64>) {
        let result = if loaded.is_some() {
            "loaded"
        } else {
            "rejected"
        };
        self.cert_reloads
            .get_or_create(&ReloadLabels { result })
            .inc();
        if let Some(expiry) = loaded {
            self.cert_expiry.set(expiry as f64);
        }
    }

    fn api_call(&self, call: ApiCall) {
        self.api_calls.get_or_create(&call.labels).inc();
        self.api_call_duration
            .get_or_create(&call.labels)
            .observe(call.duration.as_secs_f64());
        if let Some(error) = call.error {
            self.api_call_errors
                .get_or_create(&ApiErrorLabels {
                    verb: call.labels.verb,
                    resource: call.labels.resource,
                    error,
                })
                .inc();
        }
    }

    /// The metrics in the text exposition format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// Records calls to the API server without waiting: a record goes into a bounded channel and
/// a task counts it; when the task is behind, the record is dropped and the drop counted.
#[derive(Clone)]
pub struct ApiCallRecorder {
    tx: mpsc::Sender<ApiCall>,
    metrics: std::sync::Arc<Metrics>,
}

impl ApiCallRecorder {
    /// A recorder and the task that counts its records (spawn it on the runtime).
    pub fn new(
        metrics: std::sync::Arc<Metrics>,
    ) -> (Self, impl std::future::Future<Output = ()> + Send + 'static) {
        let (tx, mut rx) = mpsc::channel::<ApiCall>(4096);
        let counting = metrics.clone();
        let task = async move {
            while let Some(call) = rx.recv().await {
                counting.api_call(call);
            }
        };
        (ApiCallRecorder { tx, metrics }, task)
    }

    /// Records one call.
    pub fn record(&self, call: ApiCall) {
        if self.tx.try_send(call).is_err() {
            self.metrics.api_calls_dropped.inc();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::{FieldError, Stage};

    #[tokio::test]
    async fn exposition() {
        let m = std::sync::Arc::new(Metrics::new());
        m.review(
            ReviewLabels {
                operation: "CREATE",
                mode: "loose",
                verdict: Outcome::Denied,
            },
            Duration::from_millis(3),
            &[Finding::new(
                Stage::Schema,
                FieldError::required("spec.x", ""),
            )],
        );
        let (recorder, task) = ApiCallRecorder::new(m.clone());
        let counting = tokio::spawn(task);
        recorder.record(ApiCall {
            labels: ApiCallLabels {
                verb: "list",
                resource: "customresourcedefinitions",
            },
            duration: Duration::from_millis(40),
            error: Some("http_403".into()),
        });
        drop(recorder);
        counting.await.unwrap();
        let text = m.encode();
        for line in [
            r#"composition_webhook_admission_reviews_total{operation="CREATE",mode="loose",verdict="denied"} 1"#,
            r#"composition_webhook_admission_review_duration_seconds_bucket{le="0.005",operation="CREATE",mode="loose",verdict="denied"} 1"#,
            r#"composition_webhook_findings_total{stage="schema",type="Required",severity="error"} 1"#,
            r#"composition_webhook_apiserver_calls_total{verb="list",resource="customresourcedefinitions"} 1"#,
            r#"composition_webhook_apiserver_call_errors_total{verb="list",resource="customresourcedefinitions",error="http_403"} 1"#,
            r#"composition_webhook_apiserver_call_duration_seconds_bucket{le="0.1",verb="list",resource="customresourcedefinitions"} 1"#,
        ] {
            assert!(text.contains(line), "missing {line} in\n{text}");
        }
    }
}
