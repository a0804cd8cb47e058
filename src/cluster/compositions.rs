//! The watch on Compositions (`compositions.apiextensions.crossplane.io`, v1), for the
//! background audit of `serve --audit`: every Composition goes to a [`CompositionSink`] as a
//! JSON value, a full list (the first, and each relist) at once, so that Compositions deleted
//! while the watch was down are forgotten.
//!
//! Admission never waits for it: readiness does not depend on it. Its errors are kept in its
//! [`ListStatus`], which `/debug/audit` shows.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures::StreamExt;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::watcher::{self, Event};
use serde_json::Value;

use super::ListStatus;
use super::entries::{EntryError, ErrorClass, rfc3339};
use crate::model::APIEXTENSIONS_GROUP;

/// The resource, as RBAC rules and metrics name it.
pub const PLURAL: &str = "compositions";

/// Whoever keeps the Compositions the watch sees.
pub trait CompositionSink: Send + Sync {
    /// A full list: every Composition there is.
    fn listed(&self, objects: Vec<Value>);
    /// A Composition created or changed.
    fn applied(&self, object: Value);
    /// A Composition deleted.
    fn deleted(&self, name: &str);
}

/// The state of the watch.
#[derive(Debug, Default)]
pub struct CompositionWatch {
    status: Mutex<ListStatus>,
}

impl CompositionWatch {
    fn lock(&self) -> MutexGuard<'_, ListStatus> {
        // A few assignments per update: a poisoned lock still holds consistent data.
        self.status.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The watch's state.
    pub fn status(&self) -> ListStatus {
        self.lock().clone()
    }

    /// The source's state as the metrics label it: `listed`, `absent` (not served: no
    /// Crossplane), `failing` (not listed, its last attempt failed) or `waiting`.
    pub fn metric_state(&self) -> &'static str {
        match &*self.lock() {
            l if l.absent => "absent",
            l if l.synced => "listed",
            l if l.last_error.is_some() => "failing",
            _ => "waiting",
        }
    }

    fn listed(&self) -> u64 {
        let mut status = self.lock();
        status.synced = true;
        status.absent = false;
        status.lists += 1;
        status.listed_at = Some(rfc3339(std::time::SystemTime::now()));
        status.last_error = None;
        status.lists
    }

    fn event(&self) {
        self.lock()
            .last_error
            .take_if(|e| e.class == ErrorClass::Transient);
    }

    fn failed(&self, error: &watcher::Error) {
        let (class, message, detail, code) = super::watch::describe(error, "Compositions");
        let absent = matches!(error, watcher::Error::InitialListFailed(_)) && code == Some(404);
        let mut status = self.lock();
        if absent {
            if !status.absent {
                tracing::info!(
                    resource = PLURAL,
                    "not served by the API server (no Crossplane): no Compositions to audit"
                );
            }
        } else if code == Some(410) {
            tracing::info!(resource = PLURAL, error = %message, "watch expired: relisting");
        } else {
            tracing::warn!(resource = PLURAL, error = %message, detail = detail.as_deref().unwrap_or_default(), "watch failed: the Compositions last listed are kept");
        }
        status.absent = absent;
        status.last_error = Some(EntryError::now(class, message).with_detail(detail));
    }
}

/// `apiextensions.crossplane.io/v1` `Composition`.
fn api_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(APIEXTENSIONS_GROUP, "v1", "Composition"),
        PLURAL,
    )
}

/// The object as JSON, with the `apiVersion` and `kind` list items may lack.
fn value_of(object: DynamicObject) -> Option<Value> {
    let mut value = serde_json::to_value(object).ok()?;
    let map = value.as_object_mut()?;
    let resource = api_resource();
    map.entry("apiVersion")
        .or_insert_with(|| Value::String(resource.api_version));
    map.entry("kind")
        .or_insert_with(|| Value::String(resource.kind));
    Some(value)
}

/// Watches Compositions until the task is aborted (kube-runtime's watcher, default backoff),
/// `page_size` per list page.
pub async fn run(
    client: kube::Client,
    page_size: u32,
    watch: Arc<CompositionWatch>,
    sink: Arc<dyn CompositionSink>,
) {
    let api = kube::Api::<DynamicObject>::all_with(client, &api_resource());
    let mut stream = super::watch::watch(api, page_size);
    let mut listing: Vec<Value> = Vec::new();
    while let Some(event) = stream.next().await {
        match event {
            Ok(Event::Init) => listing.clear(),
            Ok(Event::InitApply(object)) => listing.extend(value_of(object)),
            Ok(Event::InitDone) => {
                let list = std::mem::take(&mut listing);
                let objects = list.len();
                sink.listed(list);
                let lists = watch.listed();
                tracing::info!(resource = PLURAL, objects, lists, "listed");
            }
            Ok(Event::Apply(object)) => {
                watch.event();
                if let Some(value) = value_of(object) {
                    sink.applied(value);
                }
            }
            Ok(Event::Delete(object)) => {
                watch.event();
                let name = object.metadata.name.unwrap_or_default();
                tracing::debug!(resource = PLURAL, name = %name, "deleted");
                sink.deleted(&name);
            }
            Err(e) => watch.failed(&e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_keeps_its_type_and_the_path_is_the_collections() {
        let object: DynamicObject = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "c", "resourceVersion": "3"},
            "spec": {"compositeTypeRef": {"apiVersion": "example.org/v1", "kind": "XB"}},
        }))
        .expect("a Composition");
        let value = value_of(object).expect("JSON");
        assert_eq!(value["apiVersion"], "apiextensions.crossplane.io/v1");
        assert_eq!(value["kind"], "Composition");
        assert_eq!(value["spec"]["compositeTypeRef"]["kind"], "XB");
        assert_eq!(
            <DynamicObject as kube::Resource>::url_path(&api_resource(), None),
            "/apis/apiextensions.crossplane.io/v1/compositions"
        );
    }

    #[test]
    fn the_metric_state_follows_the_watch() {
        let watch = CompositionWatch::default();
        assert_eq!(watch.metric_state(), "waiting");
        watch.lock().last_error = Some(EntryError::now(ErrorClass::Data, "refused"));
        assert_eq!(watch.metric_state(), "failing");
        assert_eq!(watch.listed(), 1);
        assert_eq!(watch.metric_state(), "listed");
        assert!(watch.status().last_error.is_none());
    }
}
