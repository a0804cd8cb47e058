//! One audit across replicas: leader election on a `coordination.k8s.io/v1` Lease, as
//! client-go's `leaderelection` does it, so that one replica audits and writes Events and
//! the ClusterPolicyReport at a time while every replica answers admission reviews.
//!
//! - Each try reads the Lease; a holder other than this replica keeps it while the record it
//!   holds changes at least every lease duration, as this replica's monotonic clock sees it
//!   (the holder's clock is never compared with ours).
//! - Taking the Lease and renewing it are updates at the resourceVersion read: of two
//!   replicas updating the same version, the API server answers one 409 Conflict.
//! - The holder leads until [`LeaseOptions::renew_deadline`] after the start of its last
//!   renewal that succeeded. The others take over no sooner than a lease duration after they
//!   saw that renewal, which is later than its start: a holder that cannot renew (partitioned,
//!   paused, the API server down) has stopped before another starts. [`Leadership::is_leading`]
//!   reads the clock each time, so a writer asks it right before each write, with no task in
//!   between that could be late.
//! - On shutdown the holder gives the Lease up (holder cleared), so another takes it at its
//!   next try instead of a lease duration later.
//!
//! kube-lease-manager (the crate for kube 5) was read and not used: it renews with a strategic
//! merge patch and keeps reporting leadership while renewals fail, so a partitioned holder
//! would go on writing after another replica took over.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ObjectMeta, PostParams};
use serde::Serialize;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use super::entries::rfc3339;

/// The Lease's name unless told otherwise.
pub const DEFAULT_NAME: &str = "composition-webhook-audit";
/// client-go's default lease duration.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(15);
/// The shortest lease duration accepted (a renewal every 400 ms below that is noise).
pub const MIN_DURATION: Duration = Duration::from_secs(3);

/// Which Lease, and who this replica is.
#[derive(Debug, Clone)]
pub struct LeaseOptions {
    /// The Lease's name.
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// This replica's identity, unique among replicas and across restarts.
    pub identity: String,
    /// How long a holder keeps the Lease without renewing it.
    pub duration: Duration,
}

impl LeaseOptions {
    /// How long the holder leads after the start of its last successful renewal: two
    /// thirds of the duration (client-go's 10 s of 15 s), the rest a margin for the
    /// renewal's own latency.
    pub fn renew_deadline(&self) -> Duration {
        self.duration * 2 / 3
    }

    /// How often a try is made: a seventh of the duration (client-go's 2 s of 15 s).
    pub fn retry_period(&self) -> Duration {
        (self.duration / 7).max(Duration::from_millis(200))
    }
}

/// An identity for this process: the pod's name (the host name in a pod) and something of
/// this process, so that a restarted pod is a new holder.
pub fn identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "composition-webhook".to_string());
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{host}_{:x}{nanos:08x}", std::process::id())
}

/// What the Lease said when last read, and what became of the last try, for
/// `/debug/audit`.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseView {
    /// `namespace/name`.
    pub lease: String,
    /// This replica.
    pub identity: String,
    /// Whether this replica leads now.
    pub leading: bool,
    /// The holder last read (this replica included), if any.
    pub holder: Option<String>,
    /// `spec.leaseTransitions` last read.
    pub transitions: i32,
    /// When this replica last took the Lease (RFC 3339).
    pub acquired_at: Option<String>,
    /// When this replica last renewed it (RFC 3339).
    pub renewed_at: Option<String>,
    /// The last try's failure, until a try succeeds.
    pub last_error: Option<String>,
}

/// The record a follower watches change.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Record {
    holder: String,
    renew: Option<MicroTime>,
    duration: Option<i32>,
    transitions: i32,
}

impl Record {
    fn of(spec: Option<&LeaseSpec>) -> Record {
        Record {
            holder: spec
                .and_then(|s| s.holder_identity.clone())
                .unwrap_or_default(),
            renew: spec.and_then(|s| s.renew_time.clone()),
            duration: spec.and_then(|s| s.lease_duration_seconds),
            transitions: spec.and_then(|s| s.lease_transitions).unwrap_or(0),
        }
    }
}

#[derive(Debug, Default)]
struct State {
    /// Leading until then (monotonic); `None` when not leading.
    until: Option<Instant>,
    /// The record last read, and when it was first seen as it is.
    observed: Option<(Record, Instant)>,
    stopped: bool,
    /// Times this replica took the Lease.
    terms: u64,
    view: LeaseView,
}

struct Shared {
    options: LeaseOptions,
    client: kube::Client,
    state: Mutex<State>,
    leading: watch::Sender<Option<u64>>,
    stop: Notify,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// This replica's part in the election: whether it leads now, and word when that changes.
/// Cloned cheaply; the election runs until [`Leadership::release`].
#[derive(Debug, Clone)]
pub struct Leadership(Arc<Shared>);

/// What one try found.
enum Tried {
    /// This replica holds the Lease, renewed by the update that started then.
    Holding(Instant),
    /// Another holds it.
    HeldBy(String),
    /// Another replica updated it first.
    Conflict,
}

/// Why a try failed.
#[derive(Debug, thiserror::Error)]
enum TryError {
    #[error("{0}")]
    Api(String),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
}

impl From<kube::Error> for TryError {
    fn from(e: kube::Error) -> Self {
        TryError::Api(super::describe_kube_error(&e))
    }
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Leadership {
    /// Starts the election on the current tokio runtime.
    pub fn start(client: kube::Client, options: LeaseOptions) -> (Leadership, JoinHandle<()>) {
        let view = LeaseView {
            lease: format!("{}/{}", options.namespace, options.name),
            identity: options.identity.clone(),
            ..LeaseView::default()
        };
        let shared = Arc::new(Shared {
            options,
            client,
            state: Mutex::new(State {
                view,
                ..State::default()
            }),
            leading: watch::channel(None).0,
            stop: Notify::new(),
        });
        let leadership = Leadership(shared);
        let task = tokio::spawn(leadership.clone().run());
        (leadership, task)
    }

    /// Whether this replica leads now: ask right before each write.
    pub fn is_leading(&self) -> bool {
        let state = lock(&self.0.state);
        !state.stopped && state.until.is_some_and(|until| Instant::now() < until)
    }

    /// Word of each change of [`Leadership::is_leading`]: the term (counting from 1 each time
    /// this replica took the Lease) while leading, `None` while not. Sent after the fact: a
    /// writer still asks `is_leading`.
    pub fn changes(&self) -> watch::Receiver<Option<u64>> {
        self.0.leading.subscribe()
    }

    /// The options.
    pub fn options(&self) -> &LeaseOptions {
        &self.0.options
    }

    /// What `/debug/audit` shows.
    pub fn view(&self) -> LeaseView {
        let leading = self.is_leading();
        let mut view = lock(&self.0.state).view.clone();
        view.leading = leading;
        view
    }

    /// Stops leading at once and ends the election; a holder then gives the Lease up so
    /// another replica takes it at its next try. Waits at most `within` for the API server.
    pub async fn release(&self, within: Duration) {
        let was_leading = {
            let mut state = lock(&self.0.state);
            let was = state.until.is_some_and(|until| Instant::now() < until);
            state.stopped = true;
            state.until = None;
            was
        };
        self.0.stop.notify_waiters();
        self.0.leading.send_replace(None);
        if !was_leading {
            return;
        }
        let options = &self.0.options;
        let api: kube::Api<Lease> =
            kube::Api::namespaced(self.0.client.clone(), &options.namespace);
        let give_up = async {
            let mut lease = api.get(&options.name).await?;
            let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
            if spec.holder_identity.as_deref() != Some(options.identity.as_str()) {
                return Ok(());
            }
            spec.holder_identity = None;
            spec.lease_duration_seconds = Some(1);
            spec.renew_time = Some(MicroTime(Timestamp::now()));
            api.replace(&options.name, &PostParams::default(), &lease)
                .await
                .map(drop)
        };
        match tokio::time::timeout(within, give_up).await {
            Ok(Ok(())) => tracing::info!(lease = %options.name, "gave the audit's Lease up"),
            Ok(Err::<(), kube::Error>(e)) => {
                tracing::warn!(lease = %options.name, error = %TryError::from(e), "cannot give the audit's Lease up: another replica takes it when it expires")
            }
            Err(_) => {
                tracing::warn!(lease = %options.name, "cannot give the audit's Lease up in time: another replica takes it when it expires")
            }
        }
    }

    async fn run(self) {
        let options = self.0.options.clone();
        let api: kube::Api<Lease> =
            kube::Api::namespaced(self.0.client.clone(), &options.namespace);
        let mut tries: u64 = 0;
        loop {
            if lock(&self.0.state).stopped {
                return;
            }
            let started = Instant::now();
            // A holder's try must end before its leadership would; a follower's within a period.
            let budget = lock(&self.0.state)
                .until
                .map_or(options.retry_period(), |until| {
                    until.saturating_duration_since(started)
                })
                .max(Duration::from_millis(100));
            let tried = match tokio::time::timeout(budget, self.try_once(&api, started)).await {
                Ok(result) => result,
                Err(_) => Err(TryError::Timeout(budget)),
            };
            let next = self.record(tried);
            tries = tries.wrapping_add(1);
            // Followers spread their tries (client-go's jitter of up to 1.2 periods).
            let jitter = if self.is_leading() {
                Duration::ZERO
            } else {
                let spread =
                    xxhash_rust::xxh3::xxh3_64(format!("{}{tries}", options.identity).as_bytes());
                options
                    .retry_period()
                    .mul_f64((spread % 1000) as f64 / 5000.0)
            };
            let wake = next.min(started + options.retry_period() + jitter);
            tokio::select! {
                _ = tokio::time::sleep_until(wake.into()) => {}
                _ = self.0.stop.notified() => return,
            }
        }
    }

    /// Records a try; returns when leadership ends if it does before the next try.
    fn record(&self, tried: Result<Tried, TryError>) -> Instant {
        let options = &self.0.options;
        let now = Instant::now();
        let was_leading;
        let leading;
        let term;
        let next;
        {
            let mut state = lock(&self.0.state);
            if state.stopped {
                return now;
            }
            was_leading = state.until.is_some_and(|until| now < until);
            match tried {
                Ok(Tried::Holding(renewed)) => {
                    state.until = Some(renewed + options.renew_deadline());
                    let at = Some(rfc3339(SystemTime::now()));
                    if !was_leading {
                        state.view.acquired_at = at.clone();
                    }
                    state.view.renewed_at = at;
                    state.view.holder = Some(options.identity.clone());
                    state.view.last_error = None;
                }
                Ok(Tried::HeldBy(holder)) => {
                    state.until = None;
                    state.view.holder = Some(holder).filter(|h| !h.is_empty());
                    state.view.last_error = None;
                }
                Ok(Tried::Conflict) => {
                    state.until = None;
                    state.view.last_error =
                        Some("another replica updated the Lease first".to_string());
                }
                Err(e) => {
                    let error = e.to_string();
                    if state.view.last_error.as_deref() != Some(error.as_str()) {
                        tracing::warn!(lease = %options.name, error = %error, "cannot read or renew the audit's Lease");
                    }
                    state.view.last_error = Some(error);
                }
            }
            leading = state.until.is_some_and(|until| now < until);
            if leading && !was_leading {
                state.terms += 1;
            }
            term = leading.then_some(state.terms);
            next = state
                .until
                .filter(|_| leading)
                .unwrap_or(now + options.retry_period());
        }
        if leading != was_leading {
            if leading {
                tracing::info!(lease = %options.name, identity = %options.identity, "this replica audits: it holds the Lease");
            } else {
                tracing::info!(lease = %options.name, identity = %options.identity, "this replica stopped auditing: it no longer holds the Lease");
            }
        }
        self.0.leading.send_if_modified(|sent| {
            let changed = *sent != term;
            *sent = term;
            changed
        });
        next
    }

    /// One try: read the Lease, create it, take it or renew it.
    async fn try_once(&self, api: &kube::Api<Lease>, started: Instant) -> Result<Tried, TryError> {
        let options = &self.0.options;
        let me = options.identity.as_str();
        let seconds = i32::try_from(options.duration.as_secs()).unwrap_or(i32::MAX);
        let now = || Some(MicroTime(Timestamp::now()));
        let current = match api.get_opt(&options.name).await? {
            Some(lease) => lease,
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(options.name.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(LeaseSpec {
                        holder_identity: Some(me.to_string()),
                        lease_duration_seconds: Some(seconds),
                        acquire_time: now(),
                        renew_time: now(),
                        lease_transitions: Some(0),
                        ..LeaseSpec::default()
                    }),
                };
                return match api.create(&PostParams::default(), &lease).await {
                    Ok(_) => Ok(Tried::Holding(started)),
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(Tried::Conflict),
                    Err(e) => Err(e.into()),
                };
            }
        };
        let record = Record::of(current.spec.as_ref());
        let seen = {
            let mut state = lock(&self.0.state);
            state.view.transitions = record.transitions;
            match &state.observed {
                Some((r, at)) if *r == record => *at,
                _ => {
                    let at = Instant::now();
                    state.observed = Some((record.clone(), at));
                    at
                }
            }
        };
        let held_by_other = !record.holder.is_empty() && record.holder != me;
        if held_by_other {
            let held_for = record
                .duration
                .and_then(|s| u64::try_from(s).ok())
                .map_or(options.duration, Duration::from_secs);
            if Instant::now() < seen + held_for {
                return Ok(Tried::HeldBy(record.holder));
            }
            tracing::info!(lease = %options.name, holder = %record.holder, "the audit's Lease was not renewed within its duration: taking it over");
        }
        let mut lease = current;
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if record.holder != me {
            spec.holder_identity = Some(me.to_string());
            spec.acquire_time = now();
            spec.lease_transitions = Some(record.transitions.saturating_add(1));
        }
        spec.renew_time = now();
        spec.lease_duration_seconds = Some(seconds);
        // At the resourceVersion read: a 409 when another replica updated it since.
        match api
            .replace(&options.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(Tried::Holding(started)),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(Tried::Conflict),
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_holder_stops_a_third_of_a_duration_before_another_may_start() {
        let options = LeaseOptions {
            name: DEFAULT_NAME.into(),
            namespace: "default".into(),
            identity: identity(),
            duration: DEFAULT_DURATION,
        };
        assert_eq!(options.renew_deadline(), Duration::from_secs(10));
        assert_eq!(options.retry_period(), Duration::from_nanos(2_142_857_142));
        assert!(options.identity.contains('_'));
    }
}
