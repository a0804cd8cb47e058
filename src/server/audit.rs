//! The background audit of `serve --audit`: every Composition in the cluster validated again
//! when the schemas under it change, as admission would answer it now.
//!
//! - Compositions come from a watch ([`crate::cluster::compositions`]) into an [`Inventory`];
//! - the cluster source tells which kinds' schemas changed ([`SchemaChange`]): only the
//!   Compositions whose last validation looked one of them up are queued again (all of them
//!   when the changes came faster than they were read);
//! - one dedicated thread validates, at the lowest CPU priority (`SCHED_IDLE`, else nice 19;
//!   nice +10 where the process shares its CPU cgroup with other processes),
//!   using at most `--audit-cpu` of a core, and not while admission reviews are in flight
//!   (for at most [`ADMISSION_YIELD`] at a time: a steady stream of reviews does not stop it);
//!   each validation has admission's options, limits and a deadline. One whose schemas
//!   could not be had is tried again later (1 s doubling to 60 s), one stopped by its
//!   deadline too (10 s doubling to an hour): never a verdict;
//! - each result goes to the metrics, to `/debug/audit`, and through
//!   [`super::audit_results`] to Events on the Composition and a ClusterPolicyReport;
//! - with several replicas, only the one holding the audit's Lease
//!   ([`crate::cluster::lease`]) validates and writes. The others keep the Compositions
//!   watched; one that takes the Lease forgets its reports, reads the verdicts the
//!   ClusterPolicyReport holds (the last holder's) and validates every Composition again, so
//!   that a verdict that did not change is not announced twice.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;
use serde_json::Value;
use tokio::sync::broadcast::{self, error::TryRecvError};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::audit_results::{self, Publish, ResultsStatus};
use super::metrics::Metrics;
use super::schemas::ServedSchemas;
use crate::audit::{self, Dependencies, Inventory, Job, Reason};
use crate::budget::{Budget, Cancel, Limits};
use crate::checks::schema_aware::lookup::{SchemaInfo, SchemaSource};
use crate::cluster::ListView;
use crate::cluster::SchemaChange;
use crate::cluster::compositions::{self, CompositionSink, CompositionWatch};
use crate::cluster::entries::rfc3339;
use crate::cluster::lease::{Leadership, LeaseView};
use crate::findings::Severity;
use crate::mode::Mode;
use crate::model::function::FunctionSet;
use crate::schema::LookupError;
use crate::validate::{Options, Report};

/// How long one validation may take, waiting for schemas included (admission's default
/// webhook timeout).
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(10);
/// How often the worker looks again while admission reviews are in flight.
const ADMISSION_POLL: Duration = Duration::from_millis(10);
/// The longest the worker waits for admission reviews to end before it validates one
/// Composition anyway, at its own lower priority: under reviews that never stop (a busy
/// cluster, a client holding hostile reviews) the audit would otherwise never run.
pub const ADMISSION_YIELD: Duration = Duration::from_secs(2);
/// How long the worker sleeps at most with nothing to do (changes and Compositions wake it).
const IDLE: Duration = Duration::from_secs(1);
/// The longest pause after a validation, whatever it cost.
const MAX_PAUSE: Duration = Duration::from_secs(300);

/// How the audit runs.
#[derive(Debug, Clone)]
pub struct AuditOptions {
    /// The mode of Compositions without the annotation (admission's).
    pub default_mode: Mode,
    /// Whether rendered-resource validation runs (admission's).
    pub rendered: bool,
    /// The memory and work one validation may take (admission's, per review).
    pub limits: Limits,
    /// The share of one core the audit may use, more than 0 and at most 1.
    pub cpu_share: f64,
    /// How long one validation may take, waiting for schemas included.
    pub deadline: Duration,
    /// The stack of the validation thread (Compositions nest as deep as admission's).
    pub stack_bytes: usize,
    /// Compositions per list page.
    pub page_size: u32,
}

/// A validation that could not finish, to try again.
#[derive(Debug, Clone)]
struct Retry {
    attempts: u32,
    due: Instant,
    /// Put back in the inventory's queue (its time came).
    queued: bool,
    reason: String,
    at: SystemTime,
}

/// The wait before the next try: 1 s, 2 s, 4 s, ... 60 s when the schemas could not be had
/// (the cluster's fault, soon mended); 10 s, 20 s, ... an hour when the validation ran out
/// of time, which a Composition of its own cost does again on every try.
fn backoff(attempts: u32, stopped: bool) -> Duration {
    let doubled = 1u64 << attempts.saturating_sub(1).min(12);
    if stopped {
        Duration::from_secs(10 * doubled).min(Duration::from_secs(3600))
    } else {
        Duration::from_secs(doubled).min(Duration::from_secs(60))
    }
}

/// The pause after a validation that took `spent` of CPU time, so that the audit uses at
/// most `share` of a core: `spent · (1/share − 1)`.
pub fn pause_after(spent: Duration, share: f64) -> Duration {
    if !(share > 0.0 && share < 1.0) {
        return Duration::ZERO;
    }
    Duration::try_from_secs_f64(spent.as_secs_f64() * (1.0 / share - 1.0))
        .unwrap_or(MAX_PAUSE)
        .min(MAX_PAUSE)
}

/// Everything but the inventory, behind its own lock (taken after the inventory's).
#[derive(Debug, Default)]
pub(super) struct State {
    retries: BTreeMap<String, Retry>,
    validations: BTreeMap<&'static str, u64>,
    priority: &'static str,
    /// The ClusterPolicyReport's results of each Composition when this term began, kept
    /// in the report until the Composition is validated again.
    pub(super) told: BTreeMap<String, Vec<Value>>,
}

/// The background audit: the Compositions, their last reports, the validation thread.
pub struct Audit {
    inventory: Mutex<Inventory>,
    /// Wakes the worker (paired with `inventory`).
    wake: Condvar,
    state: Mutex<State>,
    pub(super) results: Mutex<ResultsStatus>,
    watch: Arc<CompositionWatch>,
    pub(super) schemas: Arc<dyn ServedSchemas>,
    metrics: Arc<Metrics>,
    options: AuditOptions,
    cancel: Cancel,
    stopping: AtomicBool,
    publish: Option<mpsc::UnboundedSender<Publish>>,
    /// With several replicas, whether this one audits now.
    leadership: Option<Leadership>,
    /// The term whose start was handled (0: none): the inventory started over for it.
    term: AtomicU64,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl std::fmt::Debug for Audit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Audit")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// Locks `m`; a panic while it was held left consistent data (each update is a few
/// assignments, or one inventory call).
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The name of a reason, as metrics and `/debug/audit` show it.
pub fn reason_name(reason: Reason) -> &'static str {
    match reason {
        Reason::New => "new",
        Reason::Changed => "changed",
        Reason::Schemas => "schemas",
        Reason::Functions => "functions",
        Reason::Retry => "retry",
    }
}

impl Audit {
    /// Starts the audit on the current tokio runtime: the validation thread, and with a
    /// `client`, the watch on Compositions and the task writing Events and the
    /// ClusterPolicyReport. `changes` are the schema source's (see
    /// [`crate::cluster::ClusterSchemas::changes`]). With `leadership`, it validates and
    /// writes only while this replica holds the Lease. Call [`Audit::stop`] to end it.
    pub fn start(
        schemas: Arc<dyn ServedSchemas>,
        changes: broadcast::Receiver<SchemaChange>,
        client: Option<kube::Client>,
        leadership: Option<Leadership>,
        metrics: Arc<Metrics>,
        options: AuditOptions,
    ) -> Arc<Audit> {
        let (publish, published) = match client {
            Some(_) => {
                let (tx, rx) = mpsc::unbounded_channel();
                (Some(tx), Some(rx))
            }
            None => (None, None),
        };
        let audit = Arc::new(Audit {
            inventory: Mutex::new(Inventory::new()),
            wake: Condvar::new(),
            state: Mutex::default(),
            results: Mutex::default(),
            watch: Arc::default(),
            schemas,
            metrics,
            options,
            cancel: Cancel::new(),
            stopping: AtomicBool::new(false),
            publish,
            leadership,
            term: AtomicU64::new(0),
            tasks: Mutex::default(),
            thread: Mutex::default(),
        });
        let mut tasks = Vec::new();
        // Wakes the worker when a change arrives; the worker reads them itself, between
        // validations, so a change during one is seen after its report is recorded.
        let mut woken = changes.resubscribe();
        let weak = Arc::downgrade(&audit);
        tasks.push(tokio::spawn(async move {
            while !matches!(woken.recv().await, Err(broadcast::error::RecvError::Closed)) {
                match weak.upgrade() {
                    Some(audit) => audit.wake(),
                    None => return,
                }
            }
        }));
        if let (Some(client), Some(leadership)) = (&client, &audit.leadership) {
            tasks.push(tokio::spawn(follow_terms(
                Arc::downgrade(&audit),
                client.clone(),
                leadership.changes(),
            )));
        }
        if let (Some(client), Some(published)) = (client, published) {
            let sink: Arc<dyn CompositionSink> = Arc::new(Sink(Arc::downgrade(&audit)));
            tasks.push(tokio::spawn(compositions::run(
                client.clone(),
                audit.options.page_size,
                audit.watch.clone(),
                sink,
            )));
            tasks.push(tokio::spawn(audit_results::run(
                Arc::downgrade(&audit),
                client,
                published,
            )));
        }
        *lock(&audit.tasks) = tasks;
        let worker = audit.clone();
        let spawned = std::thread::Builder::new()
            .name("audit".to_string())
            .stack_size(audit.options.stack_bytes)
            .spawn(move || worker.work(changes));
        match spawned {
            Ok(thread) => *lock(&audit.thread) = Some(thread),
            Err(e) => {
                tracing::error!(error = %e, "cannot start the audit's thread: no Composition is audited")
            }
        }
        tracing::info!(
            cpu_share = audit.options.cpu_share,
            "auditing Compositions in the background"
        );
        audit
    }

    /// Stops the watch, the tasks and the thread (a validation in progress stops at its next
    /// check).
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Release);
        self.cancel.cancel();
        self.wake();
        for task in lock(&self.tasks).drain(..) {
            task.abort();
        }
        let thread = lock(&self.thread).take();
        if let Some(thread) = thread
            && thread.thread().id() != std::thread::current().id()
        {
            let _ = thread.join();
        }
    }

    fn stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// Whether this replica audits now: always on its own, else while it holds the Lease
    /// and the start of its term was handled.
    fn auditing(&self) -> bool {
        match &self.leadership {
            None => true,
            Some(l) => self.term.load(Ordering::Acquire) != 0 && l.is_leading(),
        }
    }

    /// Whether Events and the report may be written now: asked right before each write.
    pub(super) fn may_write(&self) -> bool {
        !self.stopping() && self.auditing()
    }

    /// Stops auditing and gives the Lease up (within `within`), so that another replica
    /// takes over at its next try.
    pub async fn release_lease(&self, within: Duration) {
        if let Some(leadership) = &self.leadership {
            leadership.release(within).await;
        }
    }

    /// A term began: every report forgotten, the verdicts the cluster was told (by name:
    /// uid, summary, results) taken as the Compositions' prior ones, everything queued.
    fn begin_term(&self, term: u64, told: audit_results::Told) {
        let queued = {
            let mut inventory = self.inventory();
            let queued = inventory.start_over(&told.summaries);
            let mut state = self.state();
            state.retries.clear();
            state.told = told.results;
            self.metrics.set_audit_queue(inventory.queued());
            queued
        };
        self.term.store(term, Ordering::Release);
        self.metrics.set_audit_leader(true);
        tracing::info!(
            term,
            compositions = queued,
            known = self.state().told.len(),
            "auditing every Composition: this replica holds the audit's Lease"
        );
        self.send(Publish::Report);
        self.wake();
    }

    /// The term ended: nothing more is validated or written, and this replica's findings
    /// leave the metrics (the holder's are the ones to read).
    fn end_term(&self) {
        self.term.store(0, Ordering::Release);
        self.metrics.set_audit_leader(false);
        let inventory = self.inventory();
        for (name, _) in inventory.iter() {
            self.metrics.remove_audit_findings(name);
        }
        self.metrics.set_audit_queue(0);
    }

    /// The Compositions, each with its last report and what it depended on (for change
    /// impact: who depends on a kind, and what they were last found to be).
    pub fn inventory(&self) -> MutexGuard<'_, Inventory> {
        lock(&self.inventory)
    }

    /// Everything but the inventory (lock the inventory first when both are needed).
    pub(super) fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Wakes the worker.
    fn wake(&self) {
        let _inventory = self.inventory();
        self.wake.notify_all();
    }

    /// Sleeps `d`, or less when stopping.
    fn pause(&self, d: Duration) {
        if d.is_zero() {
            return;
        }
        let end = Instant::now() + d;
        let mut inventory = self.inventory();
        while !self.stopping() {
            let now = Instant::now();
            if now >= end {
                return;
            }
            inventory = self
                .wake
                .wait_timeout(inventory, end - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    fn send(&self, message: Publish) {
        if let Some(tx) = &self.publish {
            // Gone only when stopping.
            let _ = tx.send(message);
        }
    }

    /// A Composition is gone: its series, retry and report entry with it.
    fn forget(&self, name: &str) {
        self.metrics.remove_audit_findings(name);
        self.state().retries.remove(name);
    }

    /// The options of a validation: admission's ([`super::admission::decide`]), so that the
    /// audit's verdict is the one admission would answer now.
    fn validation_options(&self) -> Options {
        Options::admitted(self.options.default_mode, self.options.rendered)
    }

    // -----------------------------------------------------------------------------------
    // The worker

    fn work(self: Arc<Self>, mut changes: broadcast::Receiver<SchemaChange>) {
        let priority = lower_priority();
        tracing::debug!(priority, "audit thread started");
        self.state().priority = priority;
        let mut yielding: Option<Instant> = None;
        while !self.stopping() {
            // Admission first: the audit waits while any review is being read or validated,
            // up to ADMISSION_YIELD at a time.
            if self.metrics.in_flight().get() > 0 {
                let since = *yielding.get_or_insert_with(Instant::now);
                if since.elapsed() < ADMISSION_YIELD {
                    std::thread::sleep(ADMISSION_POLL);
                    continue;
                }
            } else {
                yielding = None;
            }
            // Another replica audits.
            if !self.auditing() {
                self.pause(Duration::from_millis(200));
                continue;
            }
            // Before the first lists every lookup would wait, then fail.
            if !self.schemas.readiness().ready {
                self.pause(Duration::from_millis(200));
                continue;
            }
            let job = {
                let mut inventory = self.inventory();
                self.take_changes(&mut inventory, &mut changes);
                let next_due = self.due_retries(&mut inventory);
                let job = inventory.next_job();
                self.metrics.set_audit_queue(inventory.queued());
                match job {
                    Some(job) => job,
                    None => {
                        let idle = next_due.map_or(IDLE, |d| d.min(IDLE));
                        drop(
                            self.wake
                                .wait_timeout(inventory, idle)
                                .unwrap_or_else(PoisonError::into_inner),
                        );
                        continue;
                    }
                }
            };
            let reason = reason_name(job.reason);
            let cpu = CpuClock::start();
            // A panic is a bug; the thread lives on and tries the Composition again later.
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                self.validate(&job)
            }))
            .unwrap_or_else(|panic| {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                tracing::error!(composition = %job.name, panic = %what, "audit validation panicked");
                Outcome::Retry {
                    reason: format!("the validation failed: {what}"),
                    stopped: false,
                }
            });
            let spent = cpu.spent();
            self.metrics.audit_validated(reason);
            *self.state().validations.entry(reason).or_default() += 1;
            self.finish(&job, outcome);
            self.pause(pause_after(spent, self.options.cpu_share));
            yielding = None;
        }
    }

    /// Queues the Compositions that used what changed.
    fn take_changes(
        &self,
        inventory: &mut Inventory,
        changes: &mut broadcast::Receiver<SchemaChange>,
    ) {
        loop {
            match changes.try_recv() {
                Ok(SchemaChange::Kinds(kinds)) => {
                    inventory.schemas_changed(&kinds);
                }
                Ok(SchemaChange::Functions) => {
                    inventory.functions_changed();
                }
                Err(TryRecvError::Lagged(missed)) => {
                    tracing::info!(
                        missed,
                        "schema changes came faster than the audit read them: auditing every Composition again"
                    );
                    let every: BTreeSet<audit::Kind> = inventory
                        .iter()
                        .filter_map(|(_, item)| item.last.as_ref())
                        .flat_map(|last| last.dependencies.kinds.iter().cloned())
                        .collect();
                    inventory.schemas_changed(&every);
                    inventory.functions_changed();
                }
                Err(TryRecvError::Empty | TryRecvError::Closed) => return,
            }
        }
    }

    /// Queues the retries whose time has come; returns how long until the next one.
    fn due_retries(&self, inventory: &mut Inventory) -> Option<Duration> {
        let now = Instant::now();
        let mut state = self.state();
        state
            .retries
            .retain(|name, _| inventory.get(name).is_some());
        let mut next: Option<Duration> = None;
        for (name, retry) in state.retries.iter_mut().filter(|(_, r)| !r.queued) {
            if retry.due <= now {
                inventory.retry(name);
                retry.queued = true;
            } else {
                let wait = retry.due - now;
                next = Some(next.map_or(wait, |n| n.min(wait)));
            }
        }
        next
    }

    fn validate(&self, job: &Job) -> Outcome {
        let until = Instant::now() + self.options.deadline;
        let source = self.schemas.for_request(until);
        let watched = Watched {
            inner: source.as_ref(),
            unavailable: Mutex::default(),
        };
        let budget = Budget::new(self.options.limits)
            .with_deadline(until)
            .with_cancel(self.cancel.clone());
        let (report, dependencies) =
            audit::validate_recorded(&watched, self.validation_options(), budget, &job.value());
        // As admission: past the deadline (or stopping) the answer would go by the mode.
        if let Some(stopped) = report.stopped.as_ref().filter(|e| !e.is_input()) {
            return Outcome::Retry {
                reason: format!(
                    "the validation {stopped} ({} s)",
                    self.options.deadline.as_secs_f64()
                ),
                stopped: true,
            };
        }
        if let Some(reason) = lock(&watched.unavailable).take() {
            return Outcome::Retry {
                reason,
                stopped: false,
            };
        }
        Outcome::Done(report, dependencies)
    }

    fn finish(&self, job: &Job, outcome: Outcome) {
        let (report, dependencies) = match outcome {
            Outcome::Retry { reason, stopped } => {
                let now = Instant::now();
                let mut state = self.state();
                let retry = state.retries.entry(job.name.clone()).or_insert(Retry {
                    attempts: 0,
                    due: now,
                    queued: false,
                    reason: String::new(),
                    at: SystemTime::now(),
                });
                retry.attempts = retry.attempts.saturating_add(1);
                retry.due = now + backoff(retry.attempts, stopped);
                retry.queued = false;
                retry.at = SystemTime::now();
                tracing::debug!(composition = %job.name, attempts = retry.attempts, reason = %reason, "audit to be tried again");
                retry.reason = reason;
                return;
            }
            Outcome::Done(report, dependencies) => (report, dependencies),
        };
        // The Lease was lost meanwhile: the next holder validates it again.
        if !self.auditing() {
            return;
        }
        let mut inventory = self.inventory();
        let Some(transition) = inventory.record(job, report, dependencies, SystemTime::now())
        else {
            return; // Changed or deleted meanwhile: the newer version is queued.
        };
        self.state().retries.remove(&job.name);
        let after = transition.after;
        self.metrics
            .set_audit_findings(&transition.name, after.errors, after.warnings);
        let Some(last) = inventory
            .get(&transition.name)
            .and_then(|item| item.last.as_ref())
        else {
            return;
        };
        let report = last.report.clone();
        drop(inventory);
        if transition.verdict_changed() {
            let code = after.code.unwrap_or_default();
            if after.allowed {
                tracing::info!(composition = %transition.name, errors = after.errors, warnings = after.warnings, "audit: Composition allowed");
            } else {
                tracing::info!(composition = %transition.name, code, errors = after.errors, warnings = after.warnings, "audit: Composition denied");
            }
        }
        if let Some(event) = audit_results::event_for(&transition, &report) {
            self.send(Publish::Event(event));
        }
        if transition.before.is_none() || !transition.change.is_empty() {
            self.send(Publish::Report);
        }
    }

    // -----------------------------------------------------------------------------------
    // What the operations port shows

    /// The Compositions watch as a watched source of the metrics: name, state, objects.
    pub fn source(&self) -> (&'static str, &'static str, i64) {
        let n = self.inventory().len();
        (
            "composition",
            self.watch.metric_state(),
            i64::try_from(n).unwrap_or(i64::MAX),
        )
    }

    /// Brings the queue length gauge up to date.
    pub fn refresh_metrics(&self) {
        let queued = self.inventory().queued();
        self.metrics.set_audit_queue(queued);
    }

    /// `/debug/audit`.
    pub fn view(&self) -> AuditView {
        let inventory = self.inventory();
        let state = self.state();
        let mut allowed = 0;
        let mut denied = 0;
        let compositions: Vec<CompositionView> = inventory
            .iter()
            .map(|(name, item)| {
                let last = item.last.as_ref();
                match last.map(|l| l.report.verdict.allowed) {
                    Some(true) => allowed += 1,
                    Some(false) => denied += 1,
                    None => {}
                }
                let retry = state.retries.get(name).map(|r| RetryView {
                    attempts: r.attempts,
                    reason: r.reason.clone(),
                    at: rfc3339(r.at),
                    queued: r.queued,
                });
                CompositionView {
                    name: name.to_string(),
                    resource_version: item.resource_version.clone(),
                    audited_resource_version: last.map(|l| l.resource_version.clone()),
                    mode: last.map(|l| l.report.mode.name()),
                    allowed: last.map(|l| l.report.verdict.allowed),
                    code: last.and_then(|l| l.report.verdict.code),
                    errors: last.map_or(0, |l| l.report.count(Severity::Error)),
                    warnings: last.map_or(0, |l| l.report.count(Severity::Warning)),
                    findings: last.map_or_else(Vec::new, |l| findings_view(&l.report)),
                    dependencies: last.map(|l| DependenciesView::of(&l.dependencies)),
                    audited_at: last.map(|l| rfc3339(l.at)),
                    pending: item.pending.map(reason_name),
                    retry,
                }
            })
            .collect();
        AuditView {
            lease: self.leadership.as_ref().map(Leadership::view),
            auditing: self.auditing(),
            watch: ListView {
                resource: compositions::PLURAL,
                objects: inventory.len(),
                status: self.watch.status(),
            },
            priority: state.priority,
            cpu_share: self.options.cpu_share,
            queued: inventory.queued(),
            audited: allowed + denied,
            allowed,
            denied,
            retrying: state.retries.len(),
            validations: state.validations.clone(),
            results: lock(&self.results).clone(),
            compositions,
        }
    }
}

impl CompositionSink for Audit {
    fn listed(&self, objects: Vec<Value>) {
        let gone = {
            let mut inventory = self.inventory();
            let gone = inventory.replace_all(objects.iter());
            self.metrics.set_audit_queue(inventory.queued());
            self.wake.notify_all();
            gone
        };
        for name in &gone {
            self.forget(name);
        }
        if !gone.is_empty() {
            self.send(Publish::Report);
        }
    }

    fn applied(&self, object: Value) {
        let mut inventory = self.inventory();
        if inventory.upsert(&object) {
            self.metrics.set_audit_queue(inventory.queued());
            self.wake.notify_all();
        }
    }

    fn deleted(&self, name: &str) {
        let removed = self.inventory().remove(name).is_some();
        if removed {
            self.forget(name);
            self.send(Publish::Report);
        }
    }
}

/// Follows this replica's terms as holder of the Lease: at the start of one, reads what the
/// cluster was told and starts the audit over; at its end, stops it.
async fn follow_terms(
    audit: Weak<Audit>,
    client: kube::Client,
    mut terms: tokio::sync::watch::Receiver<Option<u64>>,
) {
    loop {
        let term = *terms.borrow_and_update();
        let Some(current) = audit.upgrade() else {
            return;
        };
        let started = current.term.load(Ordering::Acquire);
        match term {
            Some(term) if term != started => {
                if started != 0 {
                    current.end_term();
                }
                drop(current);
                let told = audit_results::told(&client, &audit).await;
                let Some(current) = audit.upgrade() else {
                    return;
                };
                // Still this term (a lost Lease is seen at the next change).
                if *terms.borrow() == Some(term) {
                    current.begin_term(term, told);
                }
            }
            None if started != 0 => current.end_term(),
            _ => {}
        }
        if terms.changed().await.is_err() {
            return;
        }
    }
}

/// The watch's view of the audit, without keeping it alive.
struct Sink(Weak<Audit>);

impl CompositionSink for Sink {
    fn listed(&self, objects: Vec<Value>) {
        if let Some(audit) = self.0.upgrade() {
            audit.listed(objects);
        }
    }

    fn applied(&self, object: Value) {
        if let Some(audit) = self.0.upgrade() {
            audit.applied(object);
        }
    }

    fn deleted(&self, name: &str) {
        if let Some(audit) = self.0.upgrade() {
            audit.deleted(name);
        }
    }
}

/// How a validation ended.
enum Outcome {
    /// A report to record.
    Done(Report, Dependencies),
    /// To try again later.
    Retry {
        /// Why it did not finish.
        reason: String,
        /// Whether its deadline stopped it (the Composition's own cost, likely again).
        stopped: bool,
    },
}

/// A schema source that remembers the first lookup that could not be answered.
struct Watched<'a> {
    inner: &'a dyn SchemaSource,
    unavailable: Mutex<Option<String>>,
}

impl SchemaSource for Watched<'_> {
    fn resolve(&self, group: &str, kind: &str, version: &str) -> Result<SchemaInfo, LookupError> {
        let result = self.inner.resolve(group, kind, version);
        if let Err(LookupError::Unavailable { reason, .. }) = &result {
            let name = if group.is_empty() {
                kind.to_string()
            } else {
                format!("{kind}.{group}")
            };
            lock(&self.unavailable)
                .get_or_insert_with(|| format!("the schema of {name} is not available: {reason}"));
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

/// The CPU time of the calling thread (Linux), else wall time.
struct CpuClock(Duration, Instant);

impl CpuClock {
    fn start() -> Self {
        CpuClock(thread_cpu_time().unwrap_or_default(), Instant::now())
    }

    fn spent(&self) -> Duration {
        match thread_cpu_time() {
            Some(now) => now.saturating_sub(self.0),
            None => self.1.elapsed(),
        }
    }
}

#[cfg(target_os = "linux")]
fn thread_cpu_time() -> Option<Duration> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes the calling thread's CPU clock into `ts`, which outlives the call.
    let ok = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } == 0;
    let secs = u64::try_from(ts.tv_sec).ok()?;
    let nanos = u32::try_from(ts.tv_nsec).ok()?;
    ok.then(|| Duration::new(secs, nanos))
}

#[cfg(not(target_os = "linux"))]
fn thread_cpu_time() -> Option<Duration> {
    None
}

/// Where the process has a CPU cgroup of its own (a pod's container), runs the calling
/// thread at the lowest priority there is: Linux's `SCHED_IDLE` (it runs only on a core
/// nothing else in the cgroup wants), else nice 19. Elsewhere those would starve the audit
/// beside any busy process of the host (its reports never written), so it runs 10 nice
/// levels below the server; it still waits for reviews in flight and keeps to
/// `--audit-cpu`. Returns which.
#[cfg(target_os = "linux")]
fn lower_priority() -> &'static str {
    if !super::priority::cgroup_of_its_own().0 {
        if super::priority::lower_this_thread(10).is_ok() {
            return "nice +10 (the process shares its CPU cgroup)";
        }
        return "normal (nice +10 could not be set)";
    }
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: sets the calling thread's (0) policy; `param` outlives the call.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } == 0 {
        return "SCHED_IDLE";
    }
    if super::priority::lower_this_thread(super::priority::TO_LOWEST).is_ok() {
        return "nice 19";
    }
    "normal (neither SCHED_IDLE nor nice 19 could be set)"
}

#[cfg(not(target_os = "linux"))]
fn lower_priority() -> &'static str {
    "normal"
}

// ---------------------------------------------------------------------------------------
// `/debug/audit`

/// `/debug/audit`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditView {
    /// The watch on Compositions.
    pub watch: ListView,
    /// With several replicas, the audit's Lease as this replica sees it.
    pub lease: Option<LeaseView>,
    /// Whether this replica validates and writes now (it holds the Lease, or runs alone).
    pub auditing: bool,
    /// The validation thread's priority (`SCHED_IDLE`, `nice 19`, `nice +10 (...)`).
    pub priority: &'static str,
    /// `--audit-cpu`.
    pub cpu_share: f64,
    /// Compositions waiting to be validated.
    pub queued: usize,
    /// Compositions with a verdict.
    pub audited: usize,
    /// Of those, allowed.
    pub allowed: usize,
    /// Of those, denied.
    pub denied: usize,
    /// Compositions whose last validation could not finish, to be tried again.
    pub retrying: usize,
    /// Validations run, by why.
    pub validations: BTreeMap<&'static str, u64>,
    /// Events and the ClusterPolicyReport.
    #[serde(flatten)]
    pub results: ResultsStatus,
    /// Each Composition.
    pub compositions: Vec<CompositionView>,
}

/// One Composition.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CompositionView {
    /// `metadata.name`.
    pub name: String,
    /// The resourceVersion known.
    pub resource_version: String,
    /// The resourceVersion last validated.
    pub audited_resource_version: Option<String>,
    /// The mode it was judged by.
    pub mode: Option<&'static str>,
    /// Whether admission would allow it now.
    pub allowed: Option<bool>,
    /// The HTTP code of a denial.
    pub code: Option<u16>,
    /// Findings that deny.
    pub errors: usize,
    /// Findings that warn.
    pub warnings: usize,
    /// Every finding.
    pub findings: Vec<FindingView>,
    /// What the last validation looked up.
    pub dependencies: Option<DependenciesView>,
    /// When it was last validated (RFC 3339).
    pub audited_at: Option<String>,
    /// Why it waits to be validated, if it does.
    pub pending: Option<&'static str>,
    /// Its last validation could not finish: it is tried again.
    pub retry: Option<RetryView>,
}

/// One finding.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FindingView {
    /// `error` or `warning`.
    pub severity: &'static str,
    /// The stage that found it.
    pub stage: &'static str,
    /// The field.
    pub field: String,
    /// The Kubernetes field error, as admission words it.
    pub message: String,
}

fn findings_view(report: &Report) -> Vec<FindingView> {
    report
        .findings
        .iter()
        .map(|f| FindingView {
            severity: f.severity.name(),
            stage: f.stage.name(),
            field: f.error.field.clone(),
            message: f.message(),
        })
        .collect()
}

/// What a validation depended on.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DependenciesView {
    /// The kinds looked up, as `Kind.group` (`Kind` for the core group).
    pub kinds: Vec<String>,
    /// Whether the installed Functions were asked for.
    pub functions: bool,
}

impl DependenciesView {
    fn of(d: &Dependencies) -> Self {
        DependenciesView {
            kinds: d
                .kinds
                .iter()
                .map(|(group, kind)| {
                    if group.is_empty() {
                        kind.clone()
                    } else {
                        format!("{kind}.{group}")
                    }
                })
                .collect(),
            functions: d.functions,
        }
    }
}

/// A validation to try again.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RetryView {
    /// Attempts that could not finish, in a row.
    pub attempts: u32,
    /// Why the last one could not.
    pub reason: String,
    /// When (RFC 3339).
    pub at: String,
    /// Queued again (its backoff is over).
    pub queued: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document::parse_documents;
    use crate::schema::Catalog;
    use crate::server::FileSchemas;
    use crate::server::operations::Readiness;
    use serde_json::json;

    #[test]
    fn the_pause_keeps_the_audit_to_its_share_of_a_core() {
        let ms = |n| Duration::from_millis(n);
        assert_eq!(pause_after(ms(100), 0.25), ms(300));
        assert_eq!(pause_after(ms(100), 0.5), ms(100));
        assert_eq!(pause_after(ms(100), 1.0), Duration::ZERO);
        assert_eq!(pause_after(Duration::from_secs(1000), 0.01), MAX_PAUSE);
        let secs: Vec<u64> = (1..=8).map(|n| backoff(n, false).as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 32, 60, 60]);
        let secs: Vec<u64> = [1, 2, 3, 8, 9, 40]
            .map(|n| backoff(n, true).as_secs())
            .into();
        assert_eq!(secs, [10, 20, 40, 1280, 2560, 3600]);
    }

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
    schema: {openAPIV3Schema: {type: object, properties: {spec: {type: object, properties: {size: {type: string}, namespace: {type: string, default: default}}}}}}
"#;

    fn composition(name: &str, rv: &str, to: &str) -> Value {
        json!({
            "apiVersion": "apiextensions.crossplane.io/v1",
            "kind": "Composition",
            "metadata": {"name": name, "uid": format!("uid-{name}"), "resourceVersion": rv},
            "spec": {
                "compositeTypeRef": {"apiVersion": "example.org/v1", "kind": "XBucket"},
                "resources": [{
                    "name": "config",
                    // v1's Resources mode drops a base's namespace: a patch sets it.
                    "base": {"apiVersion": "v1", "kind": "ConfigMap"},
                    "patches": [
                        {"fromFieldPath": "spec.namespace", "toFieldPath": "metadata.namespace"},
                        {"fromFieldPath": "spec.size", "toFieldPath": to},
                    ],
                }],
            },
        })
    }

    /// The files' schemas, and a kind whose lookups the API server cannot answer.
    struct Schemas {
        files: FileSchemas,
        unavailable: &'static str,
    }

    impl SchemaSource for Schemas {
        fn resolve(
            &self,
            group: &str,
            kind: &str,
            version: &str,
        ) -> Result<SchemaInfo, LookupError> {
            if kind == self.unavailable {
                return Err(LookupError::Unavailable {
                    group: group.to_string(),
                    kind: kind.to_string(),
                    reason: "the API server did not answer".to_string(),
                });
            }
            self.files.catalog.resolve(group, kind, version)
        }
    }

    impl ServedSchemas for Schemas {
        fn for_request(&self, _until: Instant) -> Box<dyn SchemaSource + '_> {
            Box::new(self)
        }
        fn readiness(&self) -> Readiness {
            Readiness::ready("test")
        }
        fn kinds(&self) -> usize {
            self.files.catalog.len()
        }
    }

    fn schemas(unavailable: &'static str) -> Arc<dyn ServedSchemas> {
        let mut catalog = Catalog::new();
        for doc in parse_documents("xrd.yaml", XRD).expect("XRD") {
            catalog.add_document(&doc.value, "xrd.yaml").expect("XRD");
        }
        Arc::new(Schemas {
            files: FileSchemas {
                catalog,
                functions: None,
                description: String::new(),
            },
            unavailable,
        })
    }

    fn options() -> AuditOptions {
        AuditOptions {
            default_mode: Mode::Loose,
            rendered: true,
            limits: Limits::DEFAULT,
            cpu_share: 1.0,
            deadline: DEFAULT_DEADLINE,
            stack_bytes: 64 << 20,
            page_size: 50,
        }
    }

    /// Waits until `check` holds of the view.
    fn until(audit: &Audit, what: &str, check: impl Fn(&AuditView) -> bool) -> AuditView {
        let end = Instant::now() + Duration::from_secs(20);
        loop {
            let view = audit.view();
            if check(&view) {
                return view;
            }
            assert!(Instant::now() < end, "not within 20 s: {what}: {view:#?}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn count(view: &AuditView, reason: &str) -> u64 {
        view.validations.get(reason).copied().unwrap_or(0)
    }

    fn kinds(pairs: &[(&str, &str)]) -> SchemaChange {
        SchemaChange::Kinds(
            pairs
                .iter()
                .map(|(g, k)| (g.to_string(), k.to_string()))
                .collect(),
        )
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn only_the_compositions_that_use_a_changed_kind_are_validated_again() {
        let (tx, rx) = broadcast::channel(16);
        let metrics = Arc::new(Metrics::new());
        let audit = Audit::start(schemas("none"), rx, None, None, metrics.clone(), options());
        audit.listed(vec![
            composition("a", "1", "data.size"),
            composition("b", "1", "data.size"),
        ]);
        let view = until(&audit, "both audited", |v| v.audited == 2);
        assert_eq!((view.allowed, count(&view, "new")), (2, 2));
        let deps = view.compositions[0].dependencies.clone().expect("deps");
        assert_eq!(deps.kinds, ["ConfigMap", "XBucket.example.org"]);
        assert!(deps.functions, "the Functions are asked for");

        // A kind neither uses: nothing validated. One they both use: both, once.
        tx.send(kinds(&[("example.org", "XQueue")])).expect("sent");
        tx.send(kinds(&[("", "ConfigMap"), ("example.org", "XBucket")]))
            .expect("sent");
        let view = until(&audit, "validated again", |v| count(v, "schemas") >= 2);
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(count(&audit.view(), "schemas"), 2, "{view:#?}");
        // The Functions: both asked for them.
        tx.send(SchemaChange::Functions).expect("sent");
        until(&audit, "validated again", |v| count(v, "functions") == 2);
        // A changed Composition is validated again.
        audit.applied(composition("b", "2", "data.size"));
        until(&audit, "b's new version", |v| {
            v.compositions[1].audited_resource_version.as_deref() == Some("2")
        });
        let text = metrics.encode();
        for line in [
            r#"composition_webhook_audit_validations_total{reason="new"} 2"#,
            r#"composition_webhook_audit_validations_total{reason="schemas"} 2"#,
            r#"composition_webhook_audit_validations_total{reason="changed"} 1"#,
            r#"composition_webhook_audit_validations_total{reason="functions"} 2"#,
            r#"composition_webhook_audit_findings{composition="a",severity="error"} 0"#,
        ] {
            assert!(text.contains(line), "missing {line} in\n{text}");
        }
        // Gone: its series with it.
        audit.deleted("a");
        audit.listed(vec![composition("b", "2", "data.size")]);
        assert!(!metrics.encode().contains(r#"composition="a""#));
        assert_eq!(audit.view().compositions.len(), 1);
        audit.stop();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn nothing_is_validated_while_a_review_is_in_flight() {
        let (_tx, rx) = broadcast::channel(16);
        let metrics = Arc::new(Metrics::new());
        metrics.in_flight().set(1);
        let audit = Audit::start(schemas("none"), rx, None, None, metrics.clone(), options());
        audit.applied(composition("a", "1", "data.size"));
        std::thread::sleep(Duration::from_millis(300));
        let view = audit.view();
        assert_eq!((view.queued, view.audited), (1, 0));
        metrics.in_flight().set(0);
        until(&audit, "audited once the review is answered", |v| {
            v.audited == 1
        });
        audit.stop();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reviews_that_never_stop_do_not_stop_the_audit() {
        let (_tx, rx) = broadcast::channel(16);
        let metrics = Arc::new(Metrics::new());
        metrics.in_flight().set(1);
        let audit = Audit::start(schemas("none"), rx, None, None, metrics.clone(), options());
        audit.listed(vec![
            composition("a", "1", "data.size"),
            composition("b", "1", "data.size"),
        ]);
        // One Composition per ADMISSION_YIELD (2 s) while reviews stay in flight.
        until(&audit, "both audited under reviews in flight", |v| {
            v.audited == 2
        });
        assert_eq!(metrics.in_flight().get(), 1);
        audit.stop();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_validation_whose_schemas_are_unavailable_is_retried_not_recorded() {
        let (_tx, rx) = broadcast::channel(16);
        let audit = Audit::start(
            schemas("ConfigMap"),
            rx,
            None,
            None,
            Arc::new(Metrics::new()),
            options(),
        );
        audit.applied(composition("a", "1", "data.size"));
        let view = until(&audit, "tried twice", |v| {
            v.compositions[0]
                .retry
                .as_ref()
                .is_some_and(|r| r.attempts >= 2)
        });
        let c = &view.compositions[0];
        assert_eq!((c.allowed, c.audited_at.as_deref()), (None, None));
        let retry = c.retry.as_ref().expect("retry");
        assert_eq!(
            retry.reason,
            "the schema of ConfigMap is not available: the API server did not answer"
        );
        assert_eq!((count(&view, "new"), count(&view, "retry")), (1, 1));
        assert_eq!(view.retrying, 1);
        audit.stop();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_audit_answers_what_admission_answers() {
        let (_tx, rx) = broadcast::channel(16);
        let schemas = schemas("none");
        let audit = Audit::start(
            schemas.clone(),
            rx,
            None,
            None,
            Arc::new(Metrics::new()),
            options(),
        );
        let broken = composition("broken", "1", "datta.size");
        let mut strict = composition("strict", "1", "spec.size");
        strict["metadata"]["annotations"] = json!({crate::model::MODE_ANNOTATION: "strict"});
        strict["spec"]["resources"][0]["base"] =
            json!({"apiVersion": "example.org/v1", "kind": "Missing"});
        let objects = vec![composition("fine", "1", "data.size"), broken, strict];
        audit.listed(objects.clone());
        let view = until(&audit, "all audited", |v| v.audited == 3);
        for object in objects {
            let audited = view
                .compositions
                .iter()
                .find(|c| c.name == object["metadata"]["name"])
                .expect("audited");
            let request = serde_json::from_value(json!({
                "uid": "u", "operation": "CREATE",
                "kind": {"group": "apiextensions.crossplane.io", "version": "v1", "kind": "Composition"},
                "name": object["metadata"]["name"], "object": object,
            }))
            .expect("request");
            let decision = crate::server::admission::decide(
                request,
                schemas.for_request(Instant::now()).as_ref(),
                Mode::Loose,
                true,
                DEFAULT_DEADLINE,
                |_, _| None,
            );
            let report = decision.report.expect("validated");
            assert_eq!(
                (audited.allowed, audited.code),
                (Some(report.verdict.allowed), report.verdict.code),
                "{}",
                audited.name
            );
            let messages: Vec<String> = report.findings.iter().map(|f| f.message()).collect();
            let audited_messages: Vec<String> =
                audited.findings.iter().map(|f| f.message.clone()).collect();
            assert_eq!(audited_messages, messages, "{}", audited.name);
        }
        assert_eq!((view.allowed, view.denied), (1, 2));
        let codes: Vec<Option<u16>> = view.compositions.iter().map(|c| c.code).collect();
        assert_eq!(codes, [Some(422), None, Some(403)]);
        audit.stop();
    }
}
