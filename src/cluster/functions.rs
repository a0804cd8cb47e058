//! The watch on Crossplane's Functions (`functions.pkg.crossplane.io`, v1), so a pipeline
//! step is recognised by the package of the Function it names, and a step naming none is
//! reported. Only each Function's name, package and resourceVersion are kept.
//!
//! Reviews never wait for it: before the first list, after the API server answered 404 (no
//! Crossplane) or while the first list fails, the Functions are unknown and steps are
//! recognised by their Function's name. After a list, a broken watch keeps the last list.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::ClusterResourceScope;
use kube::runtime::watcher::{self, Event};
use serde::{Deserialize, Serialize};

use super::definitions::slim_metadata;
use super::entries::{EntryError, ErrorClass, rfc3339};
use super::{ListStatus, Shared};
use crate::model::function::{FunctionPackage, FunctionSet, PKG_GROUP};

/// The resource, as RBAC rules and metrics name it.
pub const PLURAL: &str = "functions";

/// A Function as the watch keeps it.
#[derive(Debug, Clone, Deserialize)]
pub struct FunctionObject {
    /// Name and resourceVersion.
    #[serde(deserialize_with = "slim_metadata", default)]
    pub metadata: ObjectMeta,
    /// The package.
    #[serde(default)]
    pub spec: FunctionSpec,
}

/// The part of a Function's spec the watch keeps.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct FunctionSpec {
    /// `spec.package`.
    #[serde(default)]
    pub package: String,
}

impl kube::Resource for FunctionObject {
    type DynamicType = ();
    type Scope = ClusterResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("Function")
    }
    fn group(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(PKG_GROUP)
    }
    fn version(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("v1")
    }
    fn plural(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(PLURAL)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// One listed Function.
#[derive(Debug, Clone)]
struct Listed {
    package: FunctionPackage,
    resource_version: String,
}

impl From<&FunctionObject> for Listed {
    fn from(f: &FunctionObject) -> Self {
        Listed {
            package: FunctionPackage::new(
                f.metadata.name.clone().unwrap_or_default(),
                &f.spec.package,
            ),
            resource_version: f.metadata.resource_version.clone().unwrap_or_default(),
        }
    }
}

/// The Functions' watch state.
#[derive(Debug, Default)]
struct State {
    status: ListStatus,
    listed: BTreeMap<String, Listed>,
    /// What reviews see: `None` until listed, and while the API server does not serve
    /// Functions.
    published: Option<Arc<FunctionSet>>,
}

impl State {
    /// Publishes the listed Functions (a new set: reviews in flight keep theirs); returns
    /// whether they differ from those published before.
    fn publish(&mut self) -> bool {
        let mut set = FunctionSet::new();
        for l in self.listed.values() {
            set.insert(l.package.clone());
        }
        let changed = self.published.as_deref() != Some(&set);
        self.published = Some(Arc::new(set));
        changed
    }
}

/// The Functions of the cluster, as last listed and watched.
#[derive(Debug, Default)]
pub(crate) struct Functions {
    state: Mutex<State>,
}

impl Functions {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Every update is a few assignments: a poisoned lock still holds consistent data.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The Functions, once listed; `None` (recognise by name) before, or when the API
    /// server does not serve them.
    pub(crate) fn current(&self) -> Option<Arc<FunctionSet>> {
        self.lock().published.clone()
    }

    /// Why readiness waits for the Functions, if it does: until they are listed or known to
    /// be absent.
    pub(crate) fn waiting(&self) -> Option<String> {
        let state = self.lock();
        if state.status.synced || state.status.absent {
            return None;
        }
        let error = state
            .status
            .last_error
            .as_ref()
            .map(|e| format!(": {}", e.message))
            .unwrap_or_default();
        Some(format!(
            "the webhook has not listed Functions from the API server yet{error}"
        ))
    }

    /// How readiness and the metrics count the Functions: `3 Functions` or `no Functions
    /// (...)` when the API server does not serve them; the source's metric state (as the
    /// definitions' sources) and the Functions listed.
    pub(crate) fn summary(&self) -> (String, &'static str, i64) {
        let state = self.lock();
        let n = state.listed.len();
        let words = if state.status.absent {
            "no Functions (the API server does not serve functions.pkg.crossplane.io v1)"
                .to_string()
        } else {
            format!("{n} Function{}", if n == 1 { "" } else { "s" })
        };
        let metric_state = match &state.status {
            l if l.absent => "absent",
            l if l.synced => "listed",
            l if l.last_error.is_some() => "failing",
            _ => "waiting",
        };
        (words, metric_state, i64::try_from(n).unwrap_or(i64::MAX))
    }

    /// A list or watch of Functions succeeded: its transient error is over.
    pub(crate) fn contact_restored(&self) {
        let mut state = self.lock();
        if state
            .status
            .last_error
            .take_if(|e| e.class == ErrorClass::Transient)
            .is_some()
        {
            tracing::info!(resource = PLURAL, "API server reachable again");
        }
    }

    /// What `/debug/schemas` shows.
    pub(crate) fn view(&self) -> FunctionsView {
        let state = self.lock();
        FunctionsView {
            resource: PLURAL,
            objects: state.listed.len(),
            status: state.status.clone(),
            functions: state
                .listed
                .values()
                .map(|l| FunctionView {
                    name: l.package.name.clone(),
                    package: l.package.package.to_string(),
                    function: l.package.function.package_name(),
                    resource_version: l.resource_version.clone(),
                })
                .collect(),
        }
    }

    /// A full list arrived; returns how many lists so far, and whether the Functions
    /// published changed.
    fn listed(&self, list: Vec<Listed>) -> (u64, bool) {
        let mut state = self.lock();
        state.listed = list
            .into_iter()
            .map(|l| (l.package.name.clone(), l))
            .collect();
        let status = &mut state.status;
        status.synced = true;
        status.absent = false;
        status.lists += 1;
        status.listed_at = Some(rfc3339(std::time::SystemTime::now()));
        status.last_error = None;
        let lists = status.lists;
        (lists, state.publish())
    }

    /// A Function was created or changed; returns whether the Functions published changed.
    fn applied(&self, l: Listed) -> bool {
        let mut state = self.lock();
        state.status.last_error = None;
        state.listed.insert(l.package.name.clone(), l);
        state.status.synced && state.publish()
    }

    /// A Function was deleted; returns whether the Functions published changed.
    fn deleted(&self, name: &str) -> bool {
        let mut state = self.lock();
        state.status.last_error = None;
        state.listed.remove(name);
        state.status.synced && state.publish()
    }

    /// The watch failed: the last list stays in use. A 404 to the first list means the API
    /// server does not serve Functions (no Crossplane): they are unknown, not waited for.
    /// Returns whether the Functions published changed (to none).
    fn failed(&self, error: &watcher::Error) -> bool {
        let (class, message, detail, code) = super::watch::describe(error, "Functions");
        let absent = matches!(error, watcher::Error::InitialListFailed(_)) && code == Some(404);
        let mut state = self.lock();
        let changed = absent && state.published.is_some();
        if absent {
            if !state.status.absent {
                tracing::info!(
                    resource = PLURAL,
                    "not served by the API server: no Functions, steps are recognised by their Function's name"
                );
            }
            state.status.synced = false;
            state.listed.clear();
            state.published = None;
        } else if code == Some(410) {
            tracing::info!(resource = PLURAL, error = %message, "watch expired: relisting");
        } else {
            tracing::warn!(resource = PLURAL, error = %message, detail = detail.as_deref().unwrap_or_default(), "watch failed: the last list of Functions is kept");
        }
        state.status.absent = absent;
        state.status.last_error = Some(EntryError::now(class, message).with_detail(detail));
        changed
    }
}

/// `/debug/schemas`' Functions: the watch's state and each Function listed.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FunctionsView {
    /// `functions`.
    pub resource: &'static str,
    /// Functions listed.
    pub objects: usize,
    /// The watch.
    #[serde(flatten)]
    pub status: ListStatus,
    /// Each Function.
    pub functions: Vec<FunctionView>,
}

/// One Function.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FunctionView {
    /// `metadata.name`.
    pub name: String,
    /// `spec.package`.
    pub package: String,
    /// The well-known function the package is (`function-auto-ready`), if it is one.
    pub function: Option<&'static str>,
    /// `metadata.resourceVersion`.
    pub resource_version: String,
}

/// Watches Functions until the task is aborted (kube-runtime's watcher, default backoff).
pub(crate) async fn run(shared: Arc<Shared>, client: kube::Client) {
    let api = kube::Api::<FunctionObject>::all(client);
    let mut stream = super::watch::watch(api, shared.options.page_size);
    let mut listing: Vec<Listed> = Vec::new();
    while let Some(event) = stream.next().await {
        let changed = match event {
            Ok(Event::Init) => {
                listing.clear();
                false
            }
            Ok(Event::InitApply(f)) => {
                listing.push(Listed::from(&f));
                false
            }
            Ok(Event::InitDone) => {
                let list = std::mem::take(&mut listing);
                let objects = list.len();
                let (lists, changed) = shared.functions.listed(list);
                tracing::info!(resource = PLURAL, objects, lists, "listed");
                changed
            }
            Ok(Event::Apply(f)) => {
                let l = Listed::from(&f);
                tracing::debug!(resource = PLURAL, name = %l.package.name, package = %l.package.package, "changed");
                shared.functions.applied(l)
            }
            Ok(Event::Delete(f)) => {
                let name = f.metadata.name.unwrap_or_default();
                tracing::debug!(resource = PLURAL, name = %name, "deleted");
                shared.functions.deleted(&name)
            }
            Err(e) => shared.functions.failed(&e),
        };
        if changed {
            shared.functions_changed();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(name: &str, package: &str, rv: &str) -> Listed {
        Listed {
            package: FunctionPackage::new(name, package),
            resource_version: rv.to_string(),
        }
    }

    #[test]
    fn a_function_keeps_its_name_package_and_resource_version_only() {
        let json = r#"{"apiVersion":"pkg.crossplane.io/v1","kind":"Function",
            "metadata":{"name":"render","resourceVersion":"9","uid":"u",
              "annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{...}"}},
            "spec":{"package":"xpkg.crossplane.io/crossplane-contrib/function-auto-ready:v0.5.0",
              "packagePullPolicy":"IfNotPresent"},
            "status":{"conditions":[{"type":"Healthy","status":"True"}]}}"#;
        let f: FunctionObject = serde_json::from_str(json).expect("parses");
        assert_eq!(f.metadata.annotations, None);
        let l = Listed::from(&f);
        assert_eq!(
            l.package.function,
            crate::model::function::KnownFunction::AutoReady
        );
        assert_eq!(l.resource_version, "9");
        assert_eq!(
            <FunctionObject as kube::Resource>::url_path(&(), None),
            "/apis/pkg.crossplane.io/v1/functions"
        );
    }

    #[test]
    fn unknown_until_listed_then_every_change_is_published() {
        let functions = Functions::default();
        assert!(functions.current().is_none());
        assert_eq!(
            functions.waiting().as_deref(),
            Some("the webhook has not listed Functions from the API server yet")
        );
        // Changes before the first list are not published alone.
        assert!(!functions.applied(listed("early", "x.io/a/function-kcl:v1", "1")));
        assert!(functions.current().is_none());
        let pt = listed(
            "pt",
            "xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform:v0.10.8",
            "2",
        );
        assert_eq!(functions.listed(vec![pt.clone()]), (1, true));
        assert_eq!(functions.waiting(), None);
        let first = functions.current().expect("published");
        assert!(first.get("pt").is_some() && first.get("early").is_none());
        // A relist or a new resourceVersion of the same packages changes nothing validated.
        assert_eq!(functions.listed(vec![pt.clone()]), (2, false));
        let touched = Listed {
            resource_version: "4".into(),
            ..pt
        };
        assert!(!functions.applied(touched));
        assert!(functions.deleted("pt"));
        assert!(!functions.deleted("never-listed"));
        assert!(functions.applied(listed(
            "renamed",
            "x.io/a/function-patch-and-transform:v1",
            "3",
        )));
        let now = functions.current().expect("published");
        assert!(now.get("pt").is_none() && now.get("renamed").is_some());
        // A review that took the first set keeps it.
        assert!(first.get("pt").is_some());
        let view = functions.view();
        assert_eq!(view.objects, 1);
        assert_eq!(
            view.functions[0].function,
            Some("function-patch-and-transform")
        );
        assert_eq!(view.functions[0].resource_version, "3");
    }
}
