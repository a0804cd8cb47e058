//! The watch on ManagedResourceActivationPolicies (`managedresourceactivationpolicies
//! .apiextensions.crossplane.io`, v1alpha1, Crossplane v2.0+), so an MRD a policy activates is
//! not reported Inactive while Crossplane has yet to set it Active. Only each policy's name,
//! `spec.activate`, pause annotation, deletion and resourceVersion are kept.
//!
//! Readiness waits for the first list (or a 404: no Crossplane v2). Reviews do not: before
//! it, an MRD is judged by its `spec.state` alone, as without policies. After a list, a
//! broken watch keeps the last one. A change of the policies changes the kinds of the MRDs
//! not Active by their own state, for the verdict cache and the audit.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::core::ClusterResourceScope;
use kube::runtime::watcher::{self, Event};
use serde::{Deserialize, Deserializer, Serialize};

use super::entries::{EntryError, ErrorClass, rfc3339};
use super::{ListStatus, Shared};
use crate::schema::mrd::MRD_GROUP;
use crate::schema::{ActivationPolicies, ActivationPolicy, mrap};

/// The resource, as RBAC rules and metrics name it.
pub const PLURAL: &str = "managedresourceactivationpolicies";

/// A policy as the watch keeps it.
#[derive(Debug, Clone, Deserialize)]
pub struct PolicyObject {
    /// Name, resourceVersion, the pause annotation alone, and the deletion timestamp.
    #[serde(deserialize_with = "policy_metadata", default)]
    pub metadata: ObjectMeta,
    /// `spec.activate`.
    #[serde(default)]
    pub spec: PolicySpec,
}

/// The part of a policy's spec the watch keeps.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct PolicySpec {
    /// `spec.activate`.
    #[serde(default)]
    pub activate: Vec<String>,
}

/// The metadata kept: no managed fields, no annotation but `crossplane.io/paused`.
fn policy_metadata<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Slim {
        name: Option<String>,
        resource_version: Option<String>,
        #[serde(default)]
        annotations: BTreeMap<String, serde_json::Value>,
        deletion_timestamp: Option<Time>,
    }
    let s = Slim::deserialize(d)?;
    let paused: BTreeMap<String, String> = s
        .annotations
        .get(mrap::PAUSED_ANNOTATION)
        .and_then(serde_json::Value::as_str)
        .map(|v| (mrap::PAUSED_ANNOTATION.to_string(), v.to_string()))
        .into_iter()
        .collect();
    Ok(ObjectMeta {
        name: s.name,
        resource_version: s.resource_version,
        annotations: (!paused.is_empty()).then_some(paused),
        deletion_timestamp: s.deletion_timestamp,
        ..ObjectMeta::default()
    })
}

impl kube::Resource for PolicyObject {
    type DynamicType = ();
    type Scope = ClusterResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("ManagedResourceActivationPolicy")
    }
    fn group(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(MRD_GROUP)
    }
    fn version(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("v1alpha1")
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

/// One listed policy.
#[derive(Debug, Clone)]
struct Listed {
    policy: ActivationPolicy,
    resource_version: String,
}

impl From<&PolicyObject> for Listed {
    fn from(p: &PolicyObject) -> Self {
        let paused = p
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(mrap::PAUSED_ANNOTATION))
            .is_some_and(|v| v == "true");
        Listed {
            policy: ActivationPolicy {
                name: p.metadata.name.clone().unwrap_or_default(),
                activate: p.spec.activate.clone(),
                inert: mrap::inert(paused, p.metadata.deletion_timestamp.is_some()),
            },
            resource_version: p.metadata.resource_version.clone().unwrap_or_default(),
        }
    }
}

/// The policies' watch state.
#[derive(Debug, Default)]
struct State {
    status: ListStatus,
    listed: BTreeMap<String, Listed>,
    /// What reviews see: `None` until listed, and while the API server does not serve
    /// policies.
    published: Option<Arc<ActivationPolicies>>,
}

impl State {
    /// Publishes the listed policies (a new set: reviews in flight keep theirs); returns
    /// whether they differ from those published before.
    fn publish(&mut self) -> bool {
        let set = ActivationPolicies::new(self.listed.values().map(|l| l.policy.clone()));
        let changed = self.published.as_deref() != Some(&set);
        self.published = Some(Arc::new(set));
        changed
    }
}

/// The policies of the cluster, as last listed and watched.
#[derive(Debug, Default)]
pub(crate) struct Policies {
    state: Mutex<State>,
}

impl Policies {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Every update is a few assignments: a poisoned lock still holds consistent data.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The policies, once listed; `None` before, or when the API server does not serve them.
    pub(crate) fn current(&self) -> Option<Arc<ActivationPolicies>> {
        self.lock().published.clone()
    }

    /// Why readiness waits for the policies, if it does: until they are listed or known to
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
            "the webhook has not listed ManagedResourceActivationPolicies from the API server yet{error}"
        ))
    }

    /// How readiness and the metrics count the policies: `2 MRAPs` or `no MRAPs (...)`
    /// when the API server does not serve them; the source's metric state and the count.
    pub(crate) fn summary(&self) -> (String, &'static str, i64) {
        let state = self.lock();
        let n = state.listed.len();
        let words = if state.status.absent {
            format!("no MRAPs (the API server does not serve {PLURAL})")
        } else {
            format!("{n} MRAP{}", if n == 1 { "" } else { "s" })
        };
        let metric_state = match &state.status {
            l if l.absent => "absent",
            l if l.synced => "listed",
            l if l.last_error.is_some() => "failing",
            _ => "waiting",
        };
        (words, metric_state, i64::try_from(n).unwrap_or(i64::MAX))
    }

    /// A list or watch of policies succeeded: its transient error is over.
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
    pub(crate) fn view(&self) -> PoliciesView {
        let state = self.lock();
        PoliciesView {
            resource: PLURAL,
            objects: state.listed.len(),
            status: state.status.clone(),
            policies: state
                .listed
                .values()
                .map(|l| PolicyView {
                    policy: l.policy.clone(),
                    resource_version: l.resource_version.clone(),
                })
                .collect(),
        }
    }

    /// A full list arrived; returns how many lists so far, and whether the policies
    /// published changed.
    fn listed(&self, list: Vec<Listed>) -> (u64, bool) {
        let mut state = self.lock();
        state.listed = list
            .into_iter()
            .map(|l| (l.policy.name.clone(), l))
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

    /// A policy was created or changed; returns whether the policies published changed.
    fn applied(&self, l: Listed) -> bool {
        let mut state = self.lock();
        state.status.last_error = None;
        state.listed.insert(l.policy.name.clone(), l);
        state.status.synced && state.publish()
    }

    /// A policy was deleted; returns whether the policies published changed.
    fn deleted(&self, name: &str) -> bool {
        let mut state = self.lock();
        state.status.last_error = None;
        state.listed.remove(name);
        state.status.synced && state.publish()
    }

    /// The watch failed: the last list stays in use. A 404 to the first list means the API
    /// server does not serve policies (before Crossplane v2): none, not waited for. Returns
    /// whether the policies published changed (to none).
    fn failed(&self, error: &watcher::Error) -> bool {
        let (class, message, detail, code) =
            super::watch::describe(error, "ManagedResourceActivationPolicies");
        let absent = matches!(error, watcher::Error::InitialListFailed(_)) && code == Some(404);
        let mut state = self.lock();
        let changed = absent && state.published.is_some();
        if absent {
            if !state.status.absent {
                tracing::info!(
                    resource = PLURAL,
                    "not served by the API server: MRDs are judged by their spec.state"
                );
            }
            state.status.synced = false;
            state.listed.clear();
            state.published = None;
        } else if code == Some(410) {
            tracing::info!(resource = PLURAL, error = %message, "watch expired: relisting");
        } else {
            tracing::warn!(resource = PLURAL, error = %message, detail = detail.as_deref().unwrap_or_default(), "watch failed: the last list of ManagedResourceActivationPolicies is kept");
        }
        state.status.absent = absent;
        state.status.last_error = Some(EntryError::now(class, message).with_detail(detail));
        changed
    }
}

/// `/debug/schemas`' policies: the watch's state and each policy listed.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoliciesView {
    /// `managedresourceactivationpolicies`.
    pub resource: &'static str,
    /// Policies listed.
    pub objects: usize,
    /// The watch.
    #[serde(flatten)]
    pub status: ListStatus,
    /// Each policy.
    pub policies: Vec<PolicyView>,
}

/// One policy: `name`, `activate`, `inert` (`Paused`, `Deleting`) when Crossplane skips it,
/// and `resourceVersion`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyView {
    /// The policy.
    #[serde(flatten)]
    pub policy: ActivationPolicy,
    /// `metadata.resourceVersion`.
    pub resource_version: String,
}

/// Watches policies until the task is aborted (kube-runtime's watcher, default backoff).
pub(crate) async fn run(shared: Arc<Shared>, client: kube::Client) {
    let api = kube::Api::<PolicyObject>::all(client);
    let mut stream = super::watch::watch(api, shared.options.page_size);
    let mut listing: Vec<Listed> = Vec::new();
    while let Some(event) = stream.next().await {
        let changed = match event {
            Ok(Event::Init) => {
                listing.clear();
                false
            }
            Ok(Event::InitApply(p)) => {
                listing.push(Listed::from(&p));
                false
            }
            Ok(Event::InitDone) => {
                let list = std::mem::take(&mut listing);
                let objects = list.len();
                let (lists, changed) = shared.policies.listed(list);
                tracing::info!(resource = PLURAL, objects, lists, "listed");
                changed
            }
            Ok(Event::Apply(p)) => {
                let l = Listed::from(&p);
                tracing::debug!(resource = PLURAL, name = %l.policy.name, activate = ?l.policy.activate, "changed");
                shared.policies.applied(l)
            }
            Ok(Event::Delete(p)) => {
                let name = p.metadata.name.unwrap_or_default();
                tracing::debug!(resource = PLURAL, name = %name, "deleted");
                shared.policies.deleted(&name)
            }
            Err(e) => shared.policies.failed(&e),
        };
        if changed {
            shared.policies_changed();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_keeps_its_name_entries_pause_and_resource_version_only() {
        let json = r#"{"apiVersion":"apiextensions.crossplane.io/v1alpha1",
            "kind":"ManagedResourceActivationPolicy",
            "metadata":{"name":"default","resourceVersion":"7","uid":"u",
              "annotations":{"crossplane.io/paused":"true","meta.helm.sh/release-name":"crossplane"},
              "managedFields":[{"manager":"helm"}]},
            "spec":{"activate":["*"]},
            "status":{"activated":["buckets.s3.aws.m.upbound.io"]}}"#;
        let p: PolicyObject = serde_json::from_str(json).expect("parses");
        assert_eq!(p.metadata.annotations.as_ref().map(BTreeMap::len), Some(1));
        let l = Listed::from(&p);
        assert_eq!(l.policy.activate, ["*"]);
        assert_eq!(l.policy.inert, Some(mrap::Inert::Paused));
        assert_eq!(l.resource_version, "7");
        assert_eq!(
            <PolicyObject as kube::Resource>::url_path(&(), None),
            "/apis/apiextensions.crossplane.io/v1alpha1/managedresourceactivationpolicies"
        );
    }

    #[test]
    fn unknown_until_listed_then_changes_of_what_activates_are_published() {
        let policies = Policies::default();
        assert!(policies.current().is_none());
        let listed = |name: &str, activate: &str, rv: &str| Listed {
            policy: ActivationPolicy {
                name: name.into(),
                activate: vec![activate.into()],
                inert: None,
            },
            resource_version: rv.into(),
        };
        assert!(!policies.applied(listed("early", "*", "1")));
        assert_eq!(
            policies.listed(vec![listed("aws", "*.aws.m.upbound.io", "2")]),
            (1, true)
        );
        assert_eq!(policies.waiting(), None);
        assert_eq!(policies.summary().0, "1 MRAP");
        // A new resourceVersion of the same policy activates the same MRDs.
        assert!(!policies.applied(listed("aws", "*.aws.m.upbound.io", "3")));
        assert!(policies.applied(listed("aws", "*", "4")));
        assert!(policies.deleted("aws"));
        assert!(policies.current().is_some_and(|p| p.is_empty()));
    }
}
