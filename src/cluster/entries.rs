//! The cache entry of one (group, kind) that a Composition needed, with the states and the
//! error rules of gRPC's xDS data-error handling (gRFC A88), applied to schemas:
//!
//! - **transient** errors (API server unreachable, watch broken, 5xx, no answer in time)
//!   never drop a cached schema: it is still used, and the error is kept as the entry's
//!   ambient error;
//! - **data** errors (definition deleted, schema unusable, 401/403/404 answers) keep the last
//!   good schema too, and record the error, unless `--fail-on-data-errors` is set: then the
//!   schema is dropped and the kind is validated as if it had none.

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use serde::Serialize;

use super::definitions::Summary;
use crate::schema::Catalog;

/// The state of an entry (the CSDS `ClientResourceStatus` names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum State {
    /// Needed, not received yet.
    Requested,
    /// Received and usable.
    Acked,
    /// No CRD or XRD defines the kind (never did, or was deleted).
    DoesNotExist,
    /// The definition exists but its schema cannot be used.
    Nacked,
    /// The API server answered an error for it (403, 404, 500, ...).
    ReceivedError,
    /// No answer in time.
    Timeout,
}

impl State {
    /// The label of an entry in this state, with or without a cached schema, as the
    /// `cache_state` label of gRFC A78/A88 (`nacked_but_cached`, ...).
    pub fn metric_label(self, cached: bool) -> &'static str {
        match (self, cached) {
            (State::Requested, _) => "requested",
            (State::Acked, _) => "acked",
            (State::DoesNotExist, false) => "does_not_exist",
            (State::DoesNotExist, true) => "does_not_exist_but_cached",
            (State::Nacked, false) => "nacked",
            (State::Nacked, true) => "nacked_but_cached",
            (State::ReceivedError, false) => "received_error",
            (State::ReceivedError, true) => "received_error_but_cached",
            (State::Timeout, _) => "timeout",
        }
    }

    /// Every metric label, in order.
    pub const METRIC_LABELS: [&'static str; 9] = [
        "acked",
        "does_not_exist",
        "does_not_exist_but_cached",
        "nacked",
        "nacked_but_cached",
        "received_error",
        "received_error_but_cached",
        "timeout",
        "requested",
    ];
}

/// Whether an error may drop a cached schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ErrorClass {
    /// Connectivity: never drops a schema.
    Transient,
    /// About the definition itself: drops it only with `--fail-on-data-errors`.
    Data,
}

/// An error recorded on an entry.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EntryError {
    /// What happened, naming the definition, short enough for an admission warning.
    pub message: String,
    /// The API server's or the client's own words, when there are more.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Transient or data.
    pub class: ErrorClass,
    /// When (RFC 3339).
    pub at: String,
}

impl EntryError {
    /// An error that happened now.
    pub fn now(class: ErrorClass, message: impl Into<String>) -> Self {
        EntryError {
            message: message.into(),
            detail: None,
            class,
            at: rfc3339(SystemTime::now()),
        }
    }

    /// With the API server's or the client's own words.
    pub fn with_detail(mut self, detail: Option<String>) -> Self {
        self.detail = detail;
        self
    }
}

/// A schema received for an entry: the definition it came from, parsed.
#[derive(Debug, Clone)]
pub struct Cached {
    /// The definition (name and resourceVersion).
    pub definition: Summary,
    /// The definition parsed, as the file catalog parses files (an XRD yields its XR's CRD).
    pub catalog: Arc<Catalog>,
    /// When it was received (RFC 3339).
    pub received: String,
}

/// The cache entry of one (group, kind).
#[derive(Debug, Clone)]
pub struct Entry {
    /// The state.
    pub state: State,
    /// The last good schema, if any.
    pub cached: Option<Cached>,
    /// The most recent error; with a cached schema still in use, the ambient error.
    pub error: Option<EntryError>,
    /// The definition being fetched, if a fetch is in flight.
    pub fetching: Option<Summary>,
    /// Failed fetches in a row (for the retry backoff).
    pub failures: u32,
    /// When a request last needed it (entries without a schema are evicted oldest first).
    pub last_needed: Instant,
}

impl Entry {
    /// A new entry: requested, nothing received.
    pub fn requested() -> Self {
        Entry {
            state: State::Requested,
            cached: None,
            error: None,
            fetching: None,
            failures: 0,
            last_needed: Instant::now(),
        }
    }

    /// A definition received and parsed.
    pub fn received(&mut self, definition: Summary, catalog: Arc<Catalog>) {
        self.state = State::Acked;
        self.cached = Some(Cached {
            definition,
            catalog,
            received: rfc3339(SystemTime::now()),
        });
        self.error = None;
        self.failures = 0;
    }

    /// The definition exists but cannot be used (a data error).
    pub fn nacked(&mut self, message: String, fail_on_data_errors: bool) {
        let error = EntryError::now(ErrorClass::Data, message);
        self.data_error(State::Nacked, error, fail_on_data_errors);
    }

    /// No definition for the kind: deleted (a data error when a schema was cached) or never
    /// there.
    pub fn does_not_exist(&mut self, message: String, fail_on_data_errors: bool) {
        let error = EntryError::now(ErrorClass::Data, message);
        self.data_error(State::DoesNotExist, error, fail_on_data_errors);
    }

    /// The API server answered an error. Data errors (401, 403, 404) set RECEIVED_ERROR and
    /// drop the schema only with `fail_on_data_errors`; other answers (5xx, 429) are
    /// transient: they set RECEIVED_ERROR only when nothing is cached, else they are ambient.
    pub fn answered_error(&mut self, error: EntryError, fail: bool) {
        match error.class {
            ErrorClass::Data => self.data_error(State::ReceivedError, error, fail),
            ErrorClass::Transient => {
                if self.cached.is_none() {
                    self.state = State::ReceivedError;
                }
                self.error = Some(error);
            }
        }
    }

    /// No answer (unreachable, or too slow): TIMEOUT when nothing is cached, else ambient.
    pub fn no_answer(&mut self, error: EntryError) {
        if self.cached.is_none() {
            self.state = State::Timeout;
        }
        self.error = Some(error);
    }

    fn data_error(&mut self, state: State, error: EntryError, fail_on_data_errors: bool) {
        if fail_on_data_errors {
            self.cached = None;
        }
        self.state = state;
        self.error = Some(error);
    }

    /// The metric label of the entry.
    pub fn metric_label(&self) -> &'static str {
        self.state.metric_label(self.cached.is_some())
    }

    /// What a validation sees of the entry: the definition whose schema is cached, and the
    /// state (a kept schema is stale outside ACKED). Errors are left out: a transient one is
    /// only ambient, and one without a schema makes the lookup unavailable, which is retried.
    pub fn observed(&self) -> (Option<Summary>, State) {
        (
            self.cached.as_ref().map(|c| c.definition.clone()),
            self.state,
        )
    }
}

/// A time as RFC 3339 (UTC, seconds).
pub fn rfc3339(t: SystemTime) -> String {
    let t = time::OffsetDateTime::from(t);
    t.replace_nanosecond(0)
        .unwrap_or(t)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::super::definitions::Source;
    use super::*;

    fn definition() -> Summary {
        Summary {
            source: Source::Crd,
            name: "buckets.example.org".into(),
            resource_version: "7".into(),
            group: "example.org".into(),
            kind: "Bucket".into(),
            served: vec!["v1".into()],
            state: None,
        }
    }

    fn transient(message: &str) -> EntryError {
        EntryError::now(ErrorClass::Transient, message)
    }

    fn acked() -> Entry {
        let mut e = Entry::requested();
        e.received(definition(), Arc::new(Catalog::new()));
        e
    }

    #[test]
    fn transient_errors_never_drop_a_cached_schema() {
        let mut e = acked();
        e.no_answer(transient("unreachable"));
        assert_eq!((e.state, e.metric_label()), (State::Acked, "acked"));
        assert!(e.cached.is_some());
        e.answered_error(transient("503"), true);
        assert_eq!(e.metric_label(), "acked");
        assert_eq!(
            e.error.as_ref().map(|x| x.class),
            Some(ErrorClass::Transient)
        );

        let mut fresh = Entry::requested();
        fresh.no_answer(transient("unreachable"));
        assert_eq!(fresh.metric_label(), "timeout");
        let mut fresh = Entry::requested();
        fresh.answered_error(transient("503"), false);
        assert_eq!(fresh.metric_label(), "received_error");
    }

    #[test]
    fn data_errors_keep_the_schema_unless_failing_on_them() {
        let mut e = acked();
        e.does_not_exist("deleted".into(), false);
        assert_eq!(e.metric_label(), "does_not_exist_but_cached");
        let mut e = acked();
        e.does_not_exist("deleted".into(), true);
        assert_eq!(e.metric_label(), "does_not_exist");
        let mut e = acked();
        e.nacked("not structural".into(), false);
        assert_eq!(e.metric_label(), "nacked_but_cached");
        let mut e = acked();
        e.answered_error(EntryError::now(ErrorClass::Data, "403"), false);
        assert_eq!(e.metric_label(), "received_error_but_cached");
        e.answered_error(EntryError::now(ErrorClass::Data, "403"), true);
        assert_eq!(e.metric_label(), "received_error");
        e.received(definition(), Arc::new(Catalog::new()));
        assert_eq!((e.metric_label(), e.error.is_none()), ("acked", true));
    }
}
