//! The Compositions known to an audit: each one's object (slimmed), its last report and what
//! that report depended on, and a queue of those to validate again.
//!
//! Whatever feeds it (a watch on Compositions, files) calls [`Inventory::upsert`] and
//! [`Inventory::remove`]; a schema change calls [`Inventory::schemas_changed`] with the kinds
//! it touched. A worker takes [`Job`]s with [`Inventory::next_job`], validates them and hands the
//! reports back with [`Inventory::record`], which says how the verdict changed.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::SystemTime;

use serde::Serialize;
use serde_json::Value;

use super::dependencies::{Dependencies, Kind};
use super::impact::{Change, compare};
use crate::findings::Severity;
use crate::validate::Report;

/// The annotation `kubectl apply` keeps a whole copy of the object in.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Why a Composition waits to be validated (again).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Reason {
    /// Never validated.
    New,
    /// The Composition changed.
    Changed,
    /// A schema it uses changed.
    Schemas,
    /// The installed Functions changed.
    Functions,
    /// Its last validation could not finish (the deadline, an unreachable API server).
    Retry,
}

/// A verdict in brief.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Whether it would be admitted.
    pub allowed: bool,
    /// The HTTP status of a denial.
    pub code: Option<u16>,
    /// Findings that deny.
    pub errors: usize,
    /// Findings that warn.
    pub warnings: usize,
}

impl Summary {
    /// The summary of a report.
    pub fn of(report: &Report) -> Self {
        Summary {
            allowed: report.verdict.allowed,
            code: report.verdict.code,
            errors: report.count(Severity::Error),
            warnings: report.count(Severity::Warning),
        }
    }
}

/// The last validation of a Composition.
#[derive(Debug, Clone)]
pub struct Audited {
    /// The resourceVersion validated.
    pub resource_version: String,
    /// The report.
    pub report: Arc<Report>,
    /// What it depended on.
    pub dependencies: Dependencies,
    /// When.
    pub at: SystemTime,
}

/// One Composition of the inventory.
#[derive(Debug, Clone)]
pub struct Item {
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.resourceVersion` of the object held.
    pub resource_version: String,
    /// The object as compact JSON, without `managedFields` and the last-applied annotation.
    pub object: Arc<str>,
    /// The last validation, if any.
    pub last: Option<Audited>,
    /// Before its first validation here, the verdict the cluster was last told (by another
    /// replica's audit), if known: what a first validation is compared with.
    pub prior: Option<Summary>,
    /// Why it waits in the queue, if it does.
    pub pending: Option<Reason>,
}

/// A Composition to validate.
#[derive(Debug, Clone)]
pub struct Job {
    /// Its name.
    pub name: String,
    /// The resourceVersion of `object`.
    pub resource_version: String,
    /// The object (compact JSON).
    pub object: Arc<str>,
    /// Why.
    pub reason: Reason,
}

impl Job {
    /// The object, parsed.
    pub fn value(&self) -> Value {
        // Stored from a parsed value, so it parses; should it not, validation reports it.
        serde_json::from_str(&self.object).unwrap_or(Value::Null)
    }
}

/// How a Composition's verdict moved with a new report.
#[derive(Debug, Clone)]
pub struct Transition {
    /// The Composition.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// The resourceVersion validated.
    pub resource_version: String,
    /// The verdict before (`None` the first time).
    pub before: Option<Summary>,
    /// The verdict now.
    pub after: Summary,
    /// Findings added and cleared.
    pub change: Change,
}

impl Transition {
    /// Whether the verdict itself changed (allowed or not, and how), the first validation
    /// included.
    pub fn verdict_changed(&self) -> bool {
        self.before
            .is_none_or(|b| (b.allowed, b.code) != (self.after.allowed, self.after.code))
    }
}

/// The Compositions known, by name.
#[derive(Debug, Default)]
pub struct Inventory {
    items: BTreeMap<String, Item>,
    queue: VecDeque<String>,
}

impl Inventory {
    /// Empty.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds or updates a Composition from its object; queues it when its resourceVersion is
    /// new. Returns whether it was queued. Objects without a name are ignored.
    pub fn upsert(&mut self, object: &Value) -> bool {
        let meta = |field: &str| {
            object
                .pointer(&format!("/metadata/{field}"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let name = meta("name");
        if name.is_empty() {
            return false;
        }
        let resource_version = meta("resourceVersion");
        if let Some(item) = self.items.get(&name)
            && item.resource_version == resource_version
            && !resource_version.is_empty()
        {
            return false;
        }
        let item = Item {
            uid: meta("uid"),
            resource_version,
            object: slim(object).into(),
            last: None,
            prior: None,
            pending: None,
        };
        let reason = match self.items.insert(name.clone(), item) {
            Some(old) => {
                let item = self.items.get_mut(&name).expect("just inserted");
                item.last = old.last;
                item.prior = old.prior;
                // Already queued: it keeps its place (and the queue one entry per name).
                if old.pending.is_some() {
                    item.pending = old.pending;
                    return true;
                }
                Reason::Changed
            }
            None => Reason::New,
        };
        self.enqueue(&name, reason);
        true
    }

    /// Replaces every Composition with `objects` (a full list): queues the new and changed
    /// ones, removes the others and returns their names.
    pub fn replace_all<'a>(&mut self, objects: impl IntoIterator<Item = &'a Value>) -> Vec<String> {
        let mut seen = BTreeSet::new();
        for object in objects {
            if let Some(name) = object.pointer("/metadata/name").and_then(Value::as_str) {
                seen.insert(name.to_string());
            }
            self.upsert(object);
        }
        let gone: Vec<String> = self
            .items
            .keys()
            .filter(|n| !seen.contains(*n))
            .cloned()
            .collect();
        for name in &gone {
            self.remove(name);
        }
        gone
    }

    /// Forgets a Composition; returns it.
    pub fn remove(&mut self, name: &str) -> Option<Item> {
        let item = self.items.remove(name)?;
        if item.pending.is_some() {
            self.queue.retain(|n| n != name);
        }
        Some(item)
    }

    /// Queues every Composition whose last validation looked up one of `kinds`; returns how
    /// many were queued.
    pub fn schemas_changed(&mut self, kinds: &BTreeSet<Kind>) -> usize {
        self.queue_where(Reason::Schemas, |deps| deps.uses_any(kinds))
    }

    /// Queues every Composition whose last validation asked for the installed Functions.
    pub fn functions_changed(&mut self) -> usize {
        self.queue_where(Reason::Functions, |deps| deps.functions)
    }

    fn queue_where(&mut self, reason: Reason, uses: impl Fn(&Dependencies) -> bool) -> usize {
        let names: Vec<String> = self
            .items
            .iter()
            .filter(|(_, i)| i.last.as_ref().is_some_and(|l| uses(&l.dependencies)))
            .map(|(n, _)| n.clone())
            .collect();
        names.iter().filter(|n| self.enqueue(n, reason)).count()
    }

    /// Forgets every report (another replica's audit may have run since) and queues every
    /// Composition as new; `prior` are the verdicts the cluster was last told, by name and
    /// uid: a Composition's first validation is compared with its own, so a verdict that did
    /// not change is not announced again. Returns how many were queued.
    pub fn start_over(&mut self, prior: &BTreeMap<String, (String, Summary)>) -> usize {
        let names: Vec<String> = self.items.keys().cloned().collect();
        for name in &names {
            if let Some(item) = self.items.get_mut(name) {
                item.last = None;
                item.prior = prior
                    .get(name)
                    .filter(|(uid, _)| *uid == item.uid)
                    .map(|(_, summary)| *summary);
            }
        }
        names
            .iter()
            .filter(|n| self.enqueue(n, Reason::New))
            .count()
    }

    /// Queues `name` again (its validation could not finish).
    pub fn retry(&mut self, name: &str) -> bool {
        self.enqueue(name, Reason::Retry)
    }

    /// Puts `name` at the back of the queue unless it is queued already.
    fn enqueue(&mut self, name: &str, reason: Reason) -> bool {
        let Some(item) = self.items.get_mut(name) else {
            return false;
        };
        if item.pending.is_some() {
            return false;
        }
        item.pending = Some(reason);
        self.queue.push_back(name.to_string());
        true
    }

    /// The next Composition to validate, taken off the queue.
    pub fn next_job(&mut self) -> Option<Job> {
        while let Some(name) = self.queue.pop_front() {
            let Some(item) = self.items.get_mut(&name) else {
                continue;
            };
            let Some(reason) = item.pending.take() else {
                continue;
            };
            return Some(Job {
                name,
                resource_version: item.resource_version.clone(),
                object: item.object.clone(),
                reason,
            });
        }
        None
    }

    /// How many Compositions wait.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Records the report of `job`; `None` when the Composition changed or went away in the
    /// meantime (then the report is stale and dropped), else how its verdict moved.
    pub fn record(
        &mut self,
        job: &Job,
        report: Report,
        dependencies: Dependencies,
        at: SystemTime,
    ) -> Option<Transition> {
        let item = self.items.get_mut(&job.name)?;
        if item.resource_version != job.resource_version {
            return None;
        }
        let before = item.last.as_ref();
        let change = compare(
            before.map_or(&[][..], |b| &b.report.findings),
            &report.findings,
        );
        let transition = Transition {
            name: job.name.clone(),
            uid: item.uid.clone(),
            resource_version: job.resource_version.clone(),
            before: before.map(|b| Summary::of(&b.report)).or(item.prior),
            after: Summary::of(&report),
            change,
        };
        item.prior = None;
        item.last = Some(Audited {
            resource_version: job.resource_version.clone(),
            report: Arc::new(report),
            dependencies,
            at,
        });
        Some(transition)
    }

    /// A Composition.
    pub fn get(&self, name: &str) -> Option<&Item> {
        self.items.get(name)
    }

    /// Every Composition, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Item)> {
        self.items.iter().map(|(n, i)| (n.as_str(), i))
    }

    /// How many Compositions are known.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether none is known.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The name and object of every Composition whose last validation looked up any of
    /// `kinds`, and of every one not validated here yet (what it uses is not known: another
    /// replica audits, or this one has not come to it).
    pub fn dependent_objects(&self, kinds: &BTreeSet<Kind>) -> Vec<(String, Arc<str>)> {
        self.items
            .iter()
            .filter(|(_, i)| {
                i.last
                    .as_ref()
                    .is_none_or(|last| last.dependencies.uses_any(kinds))
            })
            .map(|(name, item)| (name.clone(), item.object.clone()))
            .collect()
    }

    /// The Compositions whose last validation looked up any of `kinds`, with that report.
    pub fn dependents(&self, kinds: &BTreeSet<Kind>) -> Vec<(&str, &Item, &Audited)> {
        self.items
            .iter()
            .filter_map(|(n, i)| {
                let last = i.last.as_ref()?;
                last.dependencies
                    .uses_any(kinds)
                    .then_some((n.as_str(), i, last))
            })
            .collect()
    }
}

/// The object as compact JSON without what validation never reads and can be large:
/// `metadata.managedFields` and `kubectl apply`'s copy of the whole object.
fn slim(object: &Value) -> String {
    let heavy = object.pointer("/metadata/managedFields").is_some()
        || object
            .pointer("/metadata/annotations")
            .and_then(Value::as_object)
            .is_some_and(|a| a.contains_key(LAST_APPLIED));
    if !heavy {
        return object.to_string();
    }
    let mut copy = object.clone();
    if let Some(meta) = copy.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
        if let Some(a) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
            a.remove(LAST_APPLIED);
        }
    }
    copy.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::{FieldError, Finding, Stage};
    use crate::mode::{Mode, Verdict};
    use serde_json::json;

    fn composition(name: &str, rv: &str) -> Value {
        json!({
            "apiVersion": "apiextensions.crossplane.io/v1",
            "kind": "Composition",
            "metadata": {
                "name": name, "uid": format!("uid-{name}"), "resourceVersion": rv,
                "managedFields": [{"manager": "kubectl"}],
                "annotations": {LAST_APPLIED: "{…}", "keep": "me"},
            },
            "spec": {"compositeTypeRef": {"apiVersion": "example.org/v1", "kind": "XBucket"}},
        })
    }

    fn report(errors: &[&str]) -> Report {
        let findings: Vec<Finding> = errors
            .iter()
            .map(|field| Finding::new(Stage::Schema, FieldError::required(*field, "")))
            .collect();
        Report {
            name: "c".to_string(),
            mode: Mode::Loose,
            mode_source: None,
            verdict: Verdict {
                allowed: findings.is_empty(),
                code: (!findings.is_empty()).then_some(422),
            },
            findings,
            stopped: None,
            function_calls: 0,
        }
    }

    fn deps(kinds: &[&str]) -> Dependencies {
        Dependencies {
            kinds: kinds
                .iter()
                .map(|k| ("example.org".to_string(), k.to_string()))
                .collect(),
            functions: false,
        }
    }

    fn kinds(kinds: &[&str]) -> BTreeSet<Kind> {
        deps(kinds).kinds
    }

    #[test]
    fn a_schema_change_queues_only_the_compositions_that_use_it() {
        let mut inv = Inventory::new();
        for (name, uses) in [("a", "XBucket"), ("b", "XQueue")] {
            assert!(inv.upsert(&composition(name, "1")));
            let job = inv.next_job().expect("queued");
            assert_eq!((job.name.as_str(), job.reason), (name, Reason::New));
            inv.record(&job, report(&[]), deps(&[uses]), SystemTime::now());
        }
        assert_eq!(inv.next_job().map(|j| j.name), None);
        assert_eq!(inv.schemas_changed(&kinds(&["XQueue", "XOther"])), 1);
        // Queued once, however many changes arrive before it is validated.
        assert_eq!(inv.schemas_changed(&kinds(&["XQueue"])), 0);
        let job = inv.next_job().expect("b queued");
        assert_eq!((job.name.as_str(), job.reason), ("b", Reason::Schemas));
        let t = inv
            .record(
                &job,
                report(&["spec.x"]),
                deps(&["XQueue"]),
                SystemTime::now(),
            )
            .expect("current");
        assert!(t.verdict_changed());
        assert_eq!(t.change.breaking().count(), 1);
        assert_eq!(
            inv.dependents(&kinds(&["XQueue"]))
                .iter()
                .map(|(n, _, _)| *n)
                .collect::<Vec<_>>(),
            ["b"]
        );
    }

    #[test]
    fn the_same_resource_version_is_not_queued_twice_and_a_stale_report_is_dropped() {
        let mut inv = Inventory::new();
        assert!(inv.upsert(&composition("a", "1")));
        let stale = inv.next_job().expect("queued");
        assert!(!inv.upsert(&composition("a", "1")));
        assert!(inv.upsert(&composition("a", "2")));
        assert!(
            inv.record(&stale, report(&[]), deps(&[]), SystemTime::now())
                .is_none()
        );
        let job = inv.next_job().expect("changed");
        assert_eq!(
            (job.resource_version.as_str(), job.reason),
            ("2", Reason::Changed)
        );
        let object = job.value();
        assert_eq!(object.pointer("/metadata/managedFields"), None);
        assert_eq!(
            object.pointer("/metadata/annotations"),
            Some(&json!({"keep": "me"}))
        );
    }

    #[test]
    fn updates_of_a_queued_composition_keep_one_place_in_the_queue() {
        let mut inv = Inventory::new();
        assert!(inv.upsert(&composition("a", "1")));
        for rv in 2..100 {
            assert!(inv.upsert(&composition("a", &rv.to_string())));
        }
        assert_eq!(inv.queued(), 1);
        let job = inv.next_job().expect("queued");
        assert_eq!(
            (job.resource_version.as_str(), job.reason),
            ("99", Reason::New)
        );
        assert_eq!((inv.queued(), inv.next_job().map(|j| j.name)), (0, None));
    }

    #[test]
    fn a_full_list_removes_the_compositions_it_lacks() {
        let mut inv = Inventory::new();
        inv.upsert(&composition("a", "1"));
        inv.upsert(&composition("b", "1"));
        let gone = inv.replace_all([&composition("b", "1"), &composition("c", "1")]);
        assert_eq!(gone, ["a"]);
        let names: Vec<String> = std::iter::from_fn(|| inv.next_job())
            .map(|j| j.name)
            .collect();
        assert_eq!(names, ["b", "c"]);
        assert_eq!(inv.len(), 2);
    }
}
