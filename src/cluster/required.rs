//! What a function step requires, read from the cluster as Crossplane's
//! `ExistingRequiredResourcesFetcher` reads it, and only read: a selector by name is one
//! `GET` (absent: nothing found), one by labels a `LIST` in its namespace (or every
//! namespace) filtered by the labels, sorted by namespace and name. The kind's resource
//! (plural, scope) comes from discovery, once per kind.
//!
//! Called from a review's thread, which it blocks on the runtime within the review's
//! deadline (at most [`MAX_WAIT`] a request). What the webhook may not read (RBAC grants
//! EnvironmentConfigs in `deploy/`), or cannot reach in time, is not answered: the step's
//! findings are then warnings.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, ListParams};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;
use serde_json::Value;

use crate::render::function_steps::{Matching, Required, ResourceSelector};

/// The longest one read waits.
pub const MAX_WAIT: Duration = Duration::from_secs(2);
/// The most objects one label selector answers.
pub const MAX_OBJECTS: u32 = 100;

/// Required resources from the cluster.
pub struct ClusterRequired {
    client: kube::Client,
    handle: tokio::runtime::Handle,
    /// Each kind's resource, by `apiVersion` and kind, once discovered.
    kinds: Mutex<HashMap<(String, String), ApiResource>>,
}

impl std::fmt::Debug for ClusterRequired {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterRequired").finish_non_exhaustive()
    }
}

impl ClusterRequired {
    /// Reads through `client` on the runtime of `handle`.
    pub fn new(client: kube::Client, handle: tokio::runtime::Handle) -> Self {
        ClusterRequired {
            client,
            handle,
            kinds: Mutex::new(HashMap::new()),
        }
    }

    /// Runs `future` from the review's thread within the deadline and [`MAX_WAIT`].
    fn block<T>(
        &self,
        future: impl std::future::Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, String> {
        let wait = crate::budget::deadline()
            .map_or(MAX_WAIT, |d| d.saturating_duration_since(Instant::now()))
            .min(MAX_WAIT);
        let timed = tokio::time::timeout(wait, future);
        let result = match tokio::runtime::Handle::try_current() {
            Ok(_) => tokio::task::block_in_place(|| self.handle.block_on(timed)),
            Err(_) => self.handle.block_on(timed),
        };
        match result {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(kube::Error::Api(status))) => Err(super::describe_api_error(&status)),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("the API server did not answer within {wait:?}")),
        }
    }

    fn resource(&self, api_version: &str, kind: &str) -> Result<ApiResource, String> {
        let key = (api_version.to_string(), kind.to_string());
        if let Some(r) = self
            .kinds
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
        {
            return Ok(r.clone());
        }
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let (resource, _) = self.block(kube::discovery::pinned_kind(&self.client, &gvk))?;
        self.kinds
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, resource.clone());
        Ok(resource)
    }
}

impl Required for ClusterRequired {
    fn resources(&self, s: &ResourceSelector) -> Result<Option<Vec<Value>>, String> {
        let resource = self.resource(&s.api_version, &s.kind)?;
        let api: Api<DynamicObject> = match s.namespace.as_deref().filter(|n| !n.is_empty()) {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &resource),
            None => Api::all_with(self.client.clone(), &resource),
        };
        let objects = match &s.matching {
            Matching::Name(name) => match self.block(api.get_opt(name))? {
                Some(object) => vec![object],
                None => return Ok(None),
            },
            Matching::Labels(labels) => {
                let selector = labels
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(",");
                let params = ListParams::default().labels(&selector).limit(MAX_OBJECTS);
                self.block(api.list(&params))?.items
            }
        };
        let mut found: Vec<Value> = objects
            .into_iter()
            .filter_map(|o| {
                let mut v = serde_json::to_value(o).ok()?;
                // The list leaves them out of each item; Crossplane's objects have them.
                if let Some(m) = v.as_object_mut() {
                    m.insert("apiVersion".into(), Value::String(s.api_version.clone()));
                    m.insert("kind".into(), Value::String(s.kind.clone()));
                }
                Some(v)
            })
            .collect();
        let key = |o: &Value| {
            let text = |p: &str| {
                o.pointer(p)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            (text("/metadata/namespace"), text("/metadata/name"))
        };
        found.sort_by_key(key);
        Ok(Some(found))
    }

    fn schema(&self, _: &str, _: &str) -> Option<Value> {
        None
    }
}
