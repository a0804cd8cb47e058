//! Fetching a definition (`GET`) when a needed kind has none cached or its resourceVersion
//! changed, parsing it as the file catalog parses files, and recording the outcome on the
//! kind's entry (and, when a validation would see it differently, telling
//! [`super::ClusterSchemas::changes`]). Failures are retried with a backoff (1 s doubling to
//! 60 s) for as long as the entry still wants that definition.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc;

use super::definitions::Summary;
use super::entries::{EntryError, ErrorClass, State};
use super::index::Key;
use super::{Shared, describe_api_error, error_class};
use crate::schema::{Catalog, SchemaError};

/// Fetches every definition sent on `jobs`, each in its own task.
pub(crate) async fn run(
    shared: Arc<Shared>,
    client: kube::Client,
    mut jobs: mpsc::UnboundedReceiver<(Key, Summary)>,
) {
    while let Some((key, definition)) = jobs.recv().await {
        tokio::spawn(fetch(shared.clone(), client.clone(), key, definition));
    }
}

/// What a fetch came back with.
pub(super) enum Outcome {
    Parsed(Box<Catalog>, String),
    Unusable(String),
    Answered(EntryError),
    NoAnswer(EntryError),
}

async fn fetch(shared: Arc<Shared>, client: kube::Client, key: Key, definition: Summary) {
    let timeout = shared.options.request_timeout;
    let outcome = match get(&client, &definition, timeout).await {
        Ok(value) => parse(&value, &key, &definition),
        Err(outcome) => outcome,
    };
    if let Some(delay) = record(&shared, &key, definition, outcome) {
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let mut inner = shared.lock();
            shared.reconcile(&mut inner, [key]);
        });
    }
}

/// Records what the fetch of `definition` for `key` came back with, unless the entry no
/// longer waits for it; returns when to try again after a failure.
pub(super) fn record(
    shared: &Shared,
    key: &Key,
    definition: Summary,
    outcome: Outcome,
) -> Option<Duration> {
    let mut inner = shared.lock();
    let Some(entry) = inner.entries.get_mut(key) else {
        return None; // Evicted meanwhile.
    };
    if entry.fetching.as_ref() != Some(&definition) {
        return None; // A newer version is being fetched, or the definition is gone.
    }
    entry.fetching = None;
    let before = entry.observed();
    let fail = shared.options.fail_on_data_errors;
    let failed = match outcome {
        Outcome::Parsed(catalog, resource_version) => {
            let mut definition = definition;
            definition.resource_version = resource_version;
            tracing::debug!(group = %key.0, kind = %key.1, definition = %definition.label(), resource_version = %definition.resource_version, "schema received");
            entry.received(definition, Arc::new(*catalog));
            false
        }
        Outcome::Unusable(message) => {
            tracing::warn!(group = %key.0, kind = %key.1, error = %message, "schema unusable");
            entry.nacked(message, fail);
            true
        }
        Outcome::Answered(error) => {
            tracing::warn!(group = %key.0, kind = %key.1, error = %error.message, detail = error.detail.as_deref().unwrap_or_default(), "schema not received");
            entry.answered_error(error, fail);
            true
        }
        Outcome::NoAnswer(error) => {
            tracing::warn!(group = %key.0, kind = %key.1, error = %error.message, detail = error.detail.as_deref().unwrap_or_default(), "schema not received");
            entry.no_answer(error);
            true
        }
    };
    let retry = failed.then(|| {
        entry.failures = entry.failures.saturating_add(1);
        backoff(entry.failures)
    });
    // Nobody saw it REQUESTED: a validation asking waits for this answer (or gives up,
    // leaving it TIMEOUT).
    let changed = entry.observed() != before && before.1 != State::Requested;
    shared.changed.notify_all();
    drop(inner);
    if changed {
        shared.kinds_changed(BTreeSet::from([key.clone()]));
    }
    retry
}

/// 1 s, 2 s, 4 s, ... 60 s.
fn backoff(failures: u32) -> Duration {
    Duration::from_secs(1u64 << failures.saturating_sub(1).min(6)).min(Duration::from_secs(60))
}

async fn get(client: &kube::Client, d: &Summary, timeout: Duration) -> Result<Value, Outcome> {
    let transient = |message: String, detail: Option<String>| {
        Outcome::NoAnswer(EntryError::now(ErrorClass::Transient, message).with_detail(detail))
    };
    let request = kube::core::Request::new(d.source.path())
        .get(&d.name, &kube::api::GetParams::default())
        .map_err(|e| {
            transient(
                format!("cannot build the request for {}", d.label()),
                Some(e.to_string()),
            )
        })?;
    match tokio::time::timeout(timeout, client.request::<Value>(request)).await {
        Err(_) => Err(transient(
            format!(
                "the API server did not send {} within {} s",
                d.label(),
                timeout.as_secs_f64()
            ),
            None,
        )),
        Ok(Ok(value)) => Ok(value),
        Ok(Err(kube::Error::Api(status))) => Err(Outcome::Answered(
            EntryError::now(
                error_class(status.code),
                format!(
                    "the API server answered {} to getting {}",
                    describe_api_error(&status),
                    d.label()
                ),
            )
            .with_detail(Some(status.message.clone())),
        )),
        Ok(Err(e)) => Err(transient(
            format!("the API server could not be reached to get {}", d.label()),
            Some(e.to_string()),
        )),
    }
}

fn parse(value: &Value, key: &Key, d: &Summary) -> Outcome {
    let resource_version = value
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .unwrap_or(&d.resource_version)
        .to_string();
    let mut catalog = Catalog::new();
    if let Err(e) = catalog.add_document(value, &d.label()) {
        let e = match e {
            SchemaError::Document { error, .. } => *error,
            other => other,
        };
        return Outcome::Unusable(format!("{} cannot be used: {e}", d.label()));
    }
    let (group, kind) = key;
    let Some(entry) = catalog
        .entries()
        .find(|e| e.group() == group && e.kind() == kind)
    else {
        return Outcome::Unusable(format!("{} no longer defines {kind}.{group}", d.label()));
    };
    // Unusable when no served version has a schema because each one's is broken (a
    // version without any schema is the lookup's to report).
    let served: Vec<_> = entry.versions().iter().filter(|v| v.served).collect();
    if served.iter().all(|v| v.schema.is_none())
        && let Some((version, error)) = served
            .iter()
            .find_map(|v| Some((&v.name, v.schema_error.as_ref()?)))
    {
        return Outcome::Unusable(format!(
            "{} cannot be used: the schema of version {version}: {error}",
            d.label()
        ));
    }
    Outcome::Parsed(Box::new(catalog), resource_version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_to_a_minute() {
        let secs: Vec<u64> = (1..=9).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(secs, vec![1, 2, 4, 8, 16, 32, 60, 60, 60]);
    }
}
