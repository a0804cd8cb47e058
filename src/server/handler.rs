//! `POST /validate`: HTTP, memory and time around [`super::admission::decide`].
//!
//! Every request gets HTTP 200 and an AdmissionReview echoing the uid (salvaged from the body
//! when the review cannot be read). The body is read as bytes up to a limit, within a memory
//! budget shared by all requests; decoding and validation run on `workers` review threads
//! (CPU work never stalls the reactor, and at most `workers` run at once); and the
//! answer comes before the API server's deadline, by the mode, when validation would not.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Extension, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, timeout_at};

use super::admission::{self, Decision};
use super::deadline;
use super::in_flight::{InFlightLimit, Peer, Place};
use super::metrics::{Metrics, Outcome, ReviewLabels};
use super::review::{self, Answer, Echo, ReviewError};
use super::review_threads::ReviewThreads;
use super::schemas::ServedSchemas;
use crate::budget::{Budget, Cancel, Limits};
use crate::checks::schema_aware::lookup::SchemaSource;
use crate::mode::Mode;

/// What the review handler needs.
pub struct ReviewState {
    /// Where schemas come from.
    pub schemas: Arc<dyn ServedSchemas>,
    /// The mode of Compositions without the annotation.
    pub default_mode: Mode,
    /// Whether rendered-resource validation runs.
    pub rendered: bool,
    /// The largest body read, in bytes.
    pub max_body_bytes: usize,
    /// Bytes of request bodies that may be held at once, across requests.
    pub body_memory: Arc<Semaphore>,
    /// The threads that decode and validate reviews, as many as may run at once.
    pub review_threads: Arc<ReviewThreads>,
    /// The memory and work one review may take.
    pub limits: Limits,
    /// Answers of Compositions reviewed before.
    pub verdicts: super::verdicts::Verdicts,
    /// Returns the memory a worker's thread has freed to the system (the allocator's), called
    /// after a review that held much of its budget: a thread that then idles would keep it.
    pub release_memory: Option<fn()>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Change impact on UPDATEs of CRDs, MRDs and XRDs, if on.
    pub change_impact: Option<super::impact::ChangeImpact>,
    /// The background audit (`--audit`): every Composition's last report, and what it
    /// depended on.
    pub audit: Option<Arc<super::audit::Audit>>,
    /// Places for reviews in flight, in all and per client.
    pub in_flight: Arc<InFlightLimit>,
    /// Pipeline steps of other functions than patch-and-transform run for real, if on.
    pub function_calls: Option<Arc<crate::runner::steps::FunctionCalls>>,
}

/// Decrements the in-flight gauge when a review ends, however it ends.
struct InFlight(Arc<Metrics>);

impl InFlight {
    fn start(metrics: &Arc<Metrics>) -> Self {
        metrics.in_flight().inc();
        InFlight(metrics.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight().dec();
    }
}

/// The outcome of one call, for the answer, the log and the metrics.
struct Handled {
    echo: Echo,
    answer: Answer,
    outcome: Outcome,
    operation: &'static str,
    mode: Option<Mode>,
    decision: Option<Decision>,
    problem: Option<String>,
}

impl Handled {
    fn unreadable(echo: Echo, error: &ReviewError) -> Self {
        Handled {
            echo,
            answer: Answer::bad_request(error),
            outcome: Outcome::Malformed,
            operation: "unknown",
            mode: None,
            decision: None,
            problem: Some(error.to_string()),
        }
    }
}

/// The handler of `POST /validate`.
pub async fn validate(
    State(state): State<Arc<ReviewState>>,
    peer: Option<Extension<Peer>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let started = Instant::now();
    // Refused before anything is read: the cost of a review in flight is what is bounded.
    let place = match peer.map(|Extension(Peer(ip))| state.in_flight.enter(ip)) {
        Some(Err(refused)) => {
            state.metrics.review_refused(refused.label());
            tracing::debug!(error = %refused, "review refused");
            return (
                StatusCode::TOO_MANY_REQUESTS,
                [(header::RETRY_AFTER, HeaderValue::from_static("1"))],
                format!("{refused}\n"),
            )
                .into_response();
        }
        Some(Ok(place)) => Some(place),
        None => None,
    };
    let client_memory = place.as_ref().map(Place::body_share);
    let _in_flight = InFlight::start(&state.metrics);
    let timeout =
        deadline::timeout_from_query(query.as_deref()).unwrap_or(deadline::DEFAULT_TIMEOUT);
    let budget = deadline::budget(timeout);
    let deadline = started + budget;
    // How long a review still waiting for a worker at the deadline may wait for one (its
    // mode is not known before): half the margin, the other half for the way back.
    let late = deadline + deadline::margin(timeout) / 2;
    // Waiting for the API server (a kind's schema not cached yet) ends at three quarters of
    // the budget: the rest is for validating and answering.
    let schemas_until = (started + budget * 3 / 4).into_std();
    let times = Times {
        deadline,
        late,
        budget,
        schemas_until,
    };
    let handled = handle(&state, &headers, body, client_memory, times).await;
    let elapsed = started.elapsed();
    log(&handled, elapsed);
    let findings = handled
        .decision
        .as_ref()
        .and_then(|d| d.report.as_ref())
        .map(|r| r.findings.as_slice())
        .unwrap_or_default();
    state.metrics.review(
        ReviewLabels {
            operation: handled.operation,
            mode: handled.mode.map_or("none", Mode::name),
            verdict: handled.outcome,
        },
        elapsed,
        findings,
    );
    let uid = handled.echo.uid.as_deref().unwrap_or_default();
    let out = review::encode(handled.echo.answer_version(), uid, handled.answer);
    tracing::trace!(uid, response = %String::from_utf8_lossy(&out), "response body");
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        out,
    )
        .into_response()
}

/// The times a review goes by.
#[derive(Clone, Copy)]
struct Times {
    /// When validation must be done.
    deadline: Instant,
    /// When a review still waiting for a worker at the deadline stops waiting.
    late: Instant,
    /// The review's budget.
    budget: Duration,
    /// When waiting for the API server must stop.
    schemas_until: std::time::Instant,
}

async fn handle(
    state: &Arc<ReviewState>,
    headers: &HeaderMap,
    body: Body,
    client_memory: Option<Arc<Semaphore>>,
    times: Times,
) -> Handled {
    let Times {
        deadline,
        late,
        budget,
        schemas_until,
    } = times;
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap_or("(not text)").to_string());
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    let limits = BodyLimits {
        max: state.max_body_bytes,
        memory: &state.body_memory,
        client_memory,
        deadline,
    };
    let (bytes, memory) = match read_body(body, declared, &limits).await {
        Ok(read) => read,
        Err((error, echo)) => return Handled::unreadable(echo, &error),
    };
    // The uid, the apiVersion and the Composition's mode and name, read before waiting for a
    // worker: a deadline answer goes by them. A plain review is read in one pass that also
    // keys it for the verdict cache; another is salvaged. Its UTF-8 is checked once, here,
    // for the scan and for decoding, which read it as text.
    let body = if bytes.len() <= SCAN_BYTES {
        String::from_utf8(bytes).map_err(std::string::FromUtf8Error::into_bytes)
    } else {
        Err(bytes)
    };
    let raw = match &body {
        Ok(text) => text.as_bytes(),
        Err(bytes) => bytes,
    };
    let scanned = body.as_ref().ok().and_then(|text| {
        review::scan_text(content_type.as_deref(), text, state.limits.memory_bytes)
    });
    let echo = match &scanned {
        Some(scanned) => scanned.echo.clone(),
        None => review::salvage(raw),
    };
    tracing::trace!(uid = echo.uid.as_deref().unwrap_or_default(), body = %String::from_utf8_lossy(raw), "request body");
    let (key, shape, unread, sizes) = scanned.map_or_else(
        || (None, None, None, review::Sizes::default()),
        |s| (s.key, s.shape, Some(s.unread), s.sizes),
    );
    // A Composition answered before, with the same schemas: answered now, without waiting
    // for a worker behind validations (before the deadline; after it, by the mode).
    if let Some(key) = key
        && Instant::now() < deadline
        && let Some(decision) = state.verdicts.hit(key, state.schemas.as_ref())
    {
        return Handled {
            answer: decision.answer.clone(),
            outcome: decision.outcome,
            operation: echo.operation.unwrap_or("unknown"),
            mode: decision.mode,
            problem: None,
            decision: Some(decision),
            echo,
        };
    }

    // Stops the review's work once its answer is given, or its caller has gone (the
    // connection closed, the server stopping): a worker is never held past that.
    let cancel = Cancel::new();
    let _cancel_on_drop = CancelOnDrop(cancel.clone());
    // Known once the object is decoded: the mode and name a late answer goes by.
    let known: Arc<OnceLock<(Mode, String)>> = Arc::new(OnceLock::new());
    // Set once a review thread has the review: from then on it is decoded without waiting.
    let working = Arc::new(AtomicBool::new(false));
    let salvaged = echo.composition(state.default_mode);
    let salvaged_operation = echo.operation.unwrap_or("unknown");
    let job = {
        let state = state.clone();
        let known = known.clone();
        let working = working.clone();
        let threads = state.review_threads.clone();
        threads.run(move || {
            // Answered already (by the deadline) or its caller gone before a thread was
            // free: nothing to do, and nobody reads this.
            if cancel.is_cancelled() {
                return Err(ReviewError::Internal("cancelled before it started".into()));
            }
            working.store(true, Ordering::Release);
            // The body's memory stays reserved until the review is done, however late.
            let _memory = memory;
            // Decoding counts against the review's memory too.
            let review_budget = Budget::new(state.limits)
                .with_deadline(deadline.into_std())
                .with_cancel(cancel);
            let release = state.release_memory;
            let limits = state.limits;
            let ((decided, _), peak) = crate::budget::peak_during(|| review_budget.run(move || {
            let max_tree = state.limits.memory_bytes;
            let size = body.as_ref().map_or_else(Vec::len, String::len);
            // What the scan found decoding would only skip is cut from the text decoded (made
            // only now, for a review that missed the verdict cache). Should that text not
            // decode, the body as sent is, for the error it gives.
            let ct = content_type.as_deref();
            let (bytes, decoded) = match (body, unread) {
                (Ok(text), Some(unread)) => {
                    let cut = review::cut_unread(&text, &unread);
                    match review::decode_with_shape(ct, cut.as_str(), max_tree, shape, sizes) {
                        Err(e) if !matches!(e, ReviewError::OverBudget { .. }) => {
                            let decoded = review::decode_with_shape(ct, text.as_str(), max_tree, shape, review::Sizes::default());
                            (text.into_bytes(), decoded)
                        }
                        decoded => {
                            drop(text);
                            (cut.into_bytes(), decoded)
                        }
                    }
                }
                (Ok(text), None) => {
                    let decoded = review::decode_with_shape(ct, text.as_str(), max_tree, shape, sizes);
                    (text.into_bytes(), decoded)
                }
                (Err(bytes), _) => {
                    let decoded = review::decode_with_shape(ct, bytes.as_slice(), max_tree, shape, sizes);
                    (bytes, decoded)
                }
            };
            let request = match decoded {
                Ok(request) => request,
                // Too large to read within the budget: judged by the mode salvaged.
                Err(ReviewError::OverBudget { values }) => {
                    let (mode, name) =
                        salvaged.unwrap_or_else(|| (state.default_mode, String::new()));
                    let decision = admission::over_budget(mode, &name, values, state.limits);
                    return Ok((salvaged_operation, decision));
                }
                Err(e) => return Err(e),
            };
            // Kept (its memory is reserved until the review is done) to be read again only
            // should validation need the Composition as it was: for a model error, or a
            // finding rendered again from its bases (`Validator::validate_owned_rereading`).
            let reread = || review::object_again(content_type.as_deref(), &bytes, max_tree, shape);
            let operation = admission::operation_name(&request.operation);
            tracing::debug!(
                uid = %request.uid,
                operation,
                kind = %format!("{}/{}, Kind={}", request.kind.group, request.kind.version, request.kind.kind),
                name = %request.name,
                user = request.user_info.username.as_deref().unwrap_or_default(),
                dry_run = request.dry_run,
                bytes = size,
                "reviewing"
            );
            let schemas = state.schemas.for_request(schemas_until);
            if let Some(impact) = &state.change_impact
                && request.operation == kube_core::admission::Operation::Update
                && let Some(label) = super::impact::definition_label(&request.kind.group, &request.kind.kind)
                && let Some(object) = request.object
            {
                let decision = super::impact::decide(
                    label,
                    object,
                    schemas.as_ref(),
                    impact,
                    state.default_mode,
                    state.rendered,
                );
                return Ok((operation, decision));
            }
            let decide = |request: review::Request, schemas: &dyn SchemaSource| admission::decide_rereading(
                request,
                schemas,
                state.default_mode,
                state.rendered,
                budget,
                state.function_calls.as_ref().map(|f| f.calls()),
                |mode, name| {
                    let _ = known.set((mode, name.to_string()));
                    // Past the deadline (a zero budget, or a long wait for a worker) the
                    // answer goes by the mode: validating would only make it late.
                    (Instant::now() >= deadline)
                        .then(|| admission::deadline_answer(mode, name, budget))
                },
                Some(reread),
            );
            // Past the deadline the answer goes by the mode, even for a Composition
            // answered before.
            let decision = if Instant::now() >= deadline {
                decide(request, schemas.as_ref())
            } else {
                state.verdicts.decide_keyed(key, request, state.schemas.as_ref(), schemas.as_ref(), decide)
            };
            Ok::<_, ReviewError>((operation, decision))
            }));
            if peak > limits.memory_bytes / 4
                && let Some(release) = release
            {
                release();
            }
            decided
        })
    };
    tokio::pin!(job);
    let finished = match timeout_at(deadline, &mut job).await {
        Ok(done) => Some(done),
        Err(_elapsed) if known.get().is_some() || echo.object.is_some() => None,
        // Not decoded yet, and the mode could not be salvaged: once decoded (work bounded by
        // the body size), the job answers by the mode without validating.
        Err(_elapsed) if working.load(Ordering::Acquire) => Some(job.await),
        // Still waiting for a worker: for at most half the margin.
        Err(_elapsed) => timeout_at(late, &mut job).await.ok(),
    };
    match finished {
        Some(Ok(Ok((operation, decision)))) => Handled {
            echo,
            answer: decision.answer.clone(),
            outcome: decision.outcome,
            operation,
            mode: decision.mode,
            problem: (decision.outcome == Outcome::DeadlineExceeded).then(|| {
                format!(
                    "validation could not start within {budget:?} ({} mode answer)",
                    decision.mode.map_or("none", Mode::name)
                )
            }),
            decision: Some(decision),
        },
        Some(Ok(Err(error))) => Handled::unreadable(echo, &error),
        Some(Err(failed)) => {
            // A panic in validation is a bug; the caller still gets an answer.
            tracing::error!(error = %failed, "validation task failed");
            let error = ReviewError::Internal(failed.to_string());
            Handled::unreadable(echo, &error)
        }
        None => {
            let (mode, name) = known
                .get()
                .cloned()
                .or_else(|| echo.composition(state.default_mode))
                .unwrap_or_else(|| (state.default_mode, String::new()));
            Handled {
                echo,
                answer: admission::deadline_answer(mode, &name, budget),
                outcome: Outcome::DeadlineExceeded,
                operation: salvaged_operation,
                mode: Some(mode),
                decision: None,
                // A review still queued for a worker never started.
                problem: Some(if working.load(Ordering::Acquire) {
                    format!(
                        "validation did not finish within {budget:?} ({} mode answer)",
                        mode.name()
                    )
                } else {
                    format!(
                        "validation could not start within {budget:?}: every worker was busy ({} mode answer)",
                        mode.name()
                    )
                }),
            }
        }
    }
}

/// Cancels a review's work when dropped.
struct CancelOnDrop(Cancel);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// What a body may take.
struct BodyLimits<'a> {
    /// The largest body read.
    max: usize,
    /// Memory shared by all requests' bodies.
    memory: &'a Arc<Semaphore>,
    /// The share of it the client's address may hold (none for a request without a peer).
    client_memory: Option<Arc<Semaphore>>,
    /// When reading (and waiting for memory) ends.
    deadline: Instant,
}

/// The largest body scanned in full on the reactor ([`review::scan`], about 4 ms a MiB):
/// a larger one is salvaged (which stops after the object's metadata) and keyed on a worker.
const SCAN_BYTES: usize = 256 * 1024;

/// How much of a refused body is read, for its uid.
const PREFIX: usize = 64 * 1024;

/// Reads the body up to `limits.max` bytes before the deadline, reserving memory as it grows
/// (a request holds only what it has sent, never what it announces). On failure, returns the
/// echo salvaged from what arrived.
async fn read_body(
    mut body: Body,
    declared: Option<usize>,
    limits: &BodyLimits<'_>,
) -> Result<(Vec<u8>, Reserved), (ReviewError, Echo)> {
    // Announced too large: read only a prefix, with memory to spare, to salvage the uid.
    let too_large = declared.is_some_and(|n| n > limits.max);
    let max = if too_large {
        limits.max.min(PREFIX)
    } else {
        limits.max
    };
    let mut read = Reading {
        buf: Vec::new(),
        reserved: Reserved::default(),
    };
    let error = loop {
        let frame = match timeout_at(limits.deadline, body.frame()).await {
            Err(_) => {
                break ReviewError::Body("the body did not arrive before the deadline".to_string());
            }
            Ok(None) if too_large => break ReviewError::TooLarge { limit: limits.max },
            Ok(None) => return Ok((read.buf, read.reserved)),
            Ok(Some(Err(e))) => break ReviewError::Body(e.to_string()),
            Ok(Some(Ok(frame))) => frame,
        };
        let Ok(data) = frame.into_data() else {
            continue; // Trailers.
        };
        let needed = read.buf.len() + data.len();
        if needed > max {
            let error = ReviewError::TooLarge { limit: limits.max };
            return Err((error, read.salvage(&data)));
        }
        // A refused body's prefix takes only memory that is free; a body to validate waits
        // for it until the deadline.
        let wait = (!too_large).then_some(limits.deadline);
        if !read.grow(needed, max, limits, wait).await {
            if too_large {
                break ReviewError::TooLarge { limit: limits.max };
            }
            let bytes = declared.unwrap_or(needed);
            return Err((ReviewError::Busy { bytes }, read.salvage(&data)));
        }
        read.buf.extend_from_slice(&data);
    };
    Err((error, review::salvage(&read.buf)))
}

/// Memory reserved for a body, of all bodies' and of its client's share; released when
/// dropped.
#[derive(Default)]
struct Reserved {
    all: Option<OwnedSemaphorePermit>,
    client: Option<OwnedSemaphorePermit>,
}

/// `more` bytes of `memory`, waiting until `wait` or not at all.
async fn take(
    memory: &Arc<Semaphore>,
    more: u32,
    wait: Option<Instant>,
) -> Option<OwnedSemaphorePermit> {
    match wait {
        Some(deadline) => timeout_at(deadline, memory.clone().acquire_many_owned(more))
            .await
            .ok()
            .and_then(Result::ok),
        None => memory.clone().try_acquire_many_owned(more).ok(),
    }
}

/// Adds `permit` to what `held` reserves.
fn merge(held: &mut Option<OwnedSemaphorePermit>, permit: OwnedSemaphorePermit) {
    match held {
        Some(held) => held.merge(permit),
        None => *held = Some(permit),
    }
}

/// A body being read, and the memory reserved for its buffer (as much as its capacity).
struct Reading {
    buf: Vec<u8>,
    reserved: Reserved,
}

impl Reading {
    /// Makes room for `needed` bytes in all, reserving the memory before the buffer grows
    /// (doubling, up to `max`). Waits for memory until `wait`, or not at all; false when
    /// there was none.
    async fn grow(
        &mut self,
        needed: usize,
        max: usize,
        limits: &BodyLimits<'_>,
        wait: Option<Instant>,
    ) -> bool {
        let capacity = self.buf.capacity();
        if needed <= capacity {
            return true;
        }
        let target = needed.max(capacity.saturating_mul(2)).min(max);
        let Ok(more) = u32::try_from(target - capacity) else {
            return false;
        };
        // The client's share first: a client that holds its share waits on it, not on the
        // memory other clients' bodies need.
        let client = match &limits.client_memory {
            Some(share) => match take(share, more, wait).await {
                Some(permit) => Some(permit),
                None => return false,
            },
            None => None,
        };
        let Some(all) = take(limits.memory, more, wait).await else {
            return false;
        };
        merge(&mut self.reserved.all, all);
        if let Some(client) = client {
            merge(&mut self.reserved.client, client);
        }
        self.buf.reserve_exact(target - self.buf.len());
        true
    }

    /// The echo of a body cut short before `pending` (a frame that arrived but was not
    /// kept): salvaged from the bytes read and as much of `pending` as fits in the buffer
    /// without growing it, or from `pending` alone when nothing was read before it.
    fn salvage(mut self, pending: &[u8]) -> Echo {
        if self.buf.is_empty() {
            return review::salvage(&pending[..pending.len().min(PREFIX)]);
        }
        let room = self.buf.capacity() - self.buf.len();
        self.buf
            .extend_from_slice(&pending[..pending.len().min(room)]);
        review::salvage(&self.buf)
    }
}

/// Denials and problems at info/warn with their reasons; every review at debug.
fn log(h: &Handled, elapsed: Duration) {
    let uid = h.echo.uid.as_deref().unwrap_or_default();
    let ms = elapsed.as_secs_f64() * 1000.0;
    let verdict = h.outcome.name();
    if let Some(problem) = &h.problem {
        tracing::warn!(uid, operation = h.operation, verdict, elapsed_ms = ms, problem = %problem, "review not validated");
        return;
    }
    let Some(report) = h.decision.as_ref().and_then(|d| d.report.as_ref()) else {
        tracing::debug!(
            uid,
            operation = h.operation,
            verdict,
            elapsed_ms = ms,
            "review answered"
        );
        return;
    };
    let mode = report.mode.name();
    if h.answer.allowed {
        tracing::debug!(uid, operation = h.operation, composition = %report.name, mode, verdict, warnings = h.answer.warnings.len(), elapsed_ms = ms, "Composition allowed");
    } else {
        let message = h
            .answer
            .status
            .as_ref()
            .map(|s| s.message.as_str())
            .unwrap_or_default();
        let code = h.answer.status.as_ref().map_or(0, |s| s.code);
        tracing::info!(uid, operation = h.operation, composition = %report.name, mode, code, elapsed_ms = ms, message, "Composition denied");
    }
}
