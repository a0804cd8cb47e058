//! What the audit tells the cluster: Kubernetes Events on a Composition whose verdict
//! changed, and one ClusterPolicyReport (`wgpolicyk8s.io/v1alpha2`) with every Composition's
//! findings, for Policy Reporter and similar UIs.
//!
//! - Events (events.k8s.io/v1, through kube-runtime's recorder, which aggregates repeats into
//!   a series): `Warning` `CompositionInvalid` when a Composition would now be denied (its
//!   first audit included), `Normal` `CompositionValid` when it would be admitted again.
//!   Events of a cluster-scoped object go to the `default` namespace.
//! - The report is written with server-side apply, at most every [`REPORT_INTERVAL`], only
//!   while the API server has the `clusterpolicyreports.wgpolicyk8s.io` CRD serving v1alpha2
//!   (checked in the CRD index before each write: without it, no call at all). It holds at
//!   most [`MAX_RESULTS`] results, failures first; a last `skip` result says how many were
//!   left out. Each result says the Composition's verdict (`admitted`, `code`), so that a
//!   replica taking the audit over knows what the cluster was told ([`told_by`]).
//! - Nothing is written unless this replica audits now ([`Audit`]'s Lease), asked right
//!   before each write.

use std::collections::BTreeMap;
use std::sync::Weak;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use serde::Serialize;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use super::audit::Audit;
use crate::audit::{Inventory, Summary, Transition};
use crate::cluster::describe_kube_error as describe;
use crate::cluster::entries::rfc3339;
use crate::findings::{Finding, Severity};
use crate::model::APIEXTENSIONS_GROUP;
use crate::validate::Report;

/// Who writes Events and the report.
pub const FIELD_MANAGER: &str = "composition-webhook";
/// The report's name.
pub const REPORT_NAME: &str = "composition-webhook-audit";
/// The CRD the report needs.
pub const REPORT_CRD: &str = "clusterpolicyreports.wgpolicyk8s.io";
/// The report's group, version and kind.
const REPORT_GROUP: &str = "wgpolicyk8s.io";
const REPORT_VERSION: &str = "v1alpha2";
/// The most results one report holds (a large report must stay far below etcd's 1.5 MiB).
pub const MAX_RESULTS: usize = 1000;
/// The longest message of a result, and of an Event's note (the API server's limit).
pub const MAX_MESSAGE_BYTES: usize = 1024;
/// How often the report is written at most.
pub const REPORT_INTERVAL: Duration = Duration::from_secs(2);
/// The Event reasons.
pub const INVALID: &str = "CompositionInvalid";
/// The reason of the Event of a Composition admitted again.
pub const VALID: &str = "CompositionValid";

/// What the worker asks of the writer.
#[derive(Debug)]
pub(super) enum Publish {
    /// An Event to record.
    Event(AuditEvent),
    /// The findings changed: the report is to be written again.
    Report,
}

/// An Event on a Composition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEvent {
    /// The Composition.
    pub name: String,
    /// Its uid.
    pub uid: String,
    /// `Warning` (denied) or `Normal` (admitted again).
    pub warning: bool,
    /// The reason: [`INVALID`] or [`VALID`].
    pub reason: &'static str,
    /// The note, at most [`MAX_MESSAGE_BYTES`].
    pub note: String,
}

/// The Event a transition calls for: one when the verdict changed, but none for the first
/// audit of a Composition that is allowed.
pub fn event_for(t: &Transition, report: &Report) -> Option<AuditEvent> {
    if !t.verdict_changed() || (t.before.is_none() && t.after.allowed) {
        return None;
    }
    Some(AuditEvent {
        name: t.name.clone(),
        uid: t.uid.clone(),
        warning: !t.after.allowed,
        reason: if t.after.allowed { VALID } else { INVALID },
        note: note(report),
    })
}

fn plural(n: usize, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}

/// `s` cut to at most `max` bytes, on a character boundary, `…` marking a cut.
fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// An Event's note: the verdict, the counts and, for a denial, the errors that deny (as
/// admission words them) as far as [`MAX_MESSAGE_BYTES`] allows.
pub fn note(report: &Report) -> String {
    let counts = format!(
        "{}, {}",
        plural(report.count(Severity::Error), "error"),
        plural(report.count(Severity::Warning), "warning")
    );
    if report.verdict.allowed {
        return format!("Would now be admitted: {counts}");
    }
    let code = report
        .verdict
        .code
        .map(|c| format!(" ({c})"))
        .unwrap_or_default();
    let mut out = format!("Would now be denied{code}: {counts}");
    let errors: Vec<&Finding> = report
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .collect();
    for (i, f) in errors.iter().enumerate() {
        let sep = if i == 0 { ": " } else { "; " };
        let left = errors.len() - i - 1;
        let more = if left > 0 {
            format!("; and {left} more")
        } else {
            String::new()
        };
        let message = f.message();
        if out.len() + sep.len() + message.len() + more.len() <= MAX_MESSAGE_BYTES {
            out.push_str(sep);
            out.push_str(&message);
            continue;
        }
        let unsaid = format!("; and {} more", errors.len() - i);
        if i == 0 {
            // The first error is said, cut, whatever its length.
            let room = MAX_MESSAGE_BYTES.saturating_sub(out.len() + sep.len() + more.len());
            out.push_str(sep);
            out.push_str(&cut(&message, room));
            out.push_str(&more);
        } else {
            out.push_str(&unsaid);
        }
        break;
    }
    cut(&out, MAX_MESSAGE_BYTES)
}

// ---------------------------------------------------------------------------------------
// The ClusterPolicyReport

/// The reference of a Composition, as Events and results name it.
fn composition_ref(name: &str, uid: &str) -> Value {
    json!({
        "apiVersion": format!("{APIEXTENSIONS_GROUP}/v1"),
        "kind": "Composition",
        "name": name,
        "uid": uid,
    })
}

/// The report's results for one Composition's last report: a `fail` (error) or `warn`
/// (warning) per finding, or one `pass` without any.
fn results_of(name: &str, uid: &str, report: &Report, at: SystemTime) -> Vec<(u8, Value)> {
    let seconds = at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let result = |outcome: &str, rule: &str, message: String, properties: Map<String, Value>| {
        let mut r = json!({
            "policy": FIELD_MANAGER,
            "rule": rule,
            "result": outcome,
            "message": cut(&message, MAX_MESSAGE_BYTES),
            "source": FIELD_MANAGER,
            "scored": true,
            "timestamp": {"seconds": seconds, "nanos": 0},
            "resources": [composition_ref(name, uid)],
            "properties": properties,
        });
        match outcome {
            "fail" => r["severity"] = json!("high"),
            "warn" => r["severity"] = json!("medium"),
            _ => {}
        }
        r
    };
    let mode = || {
        let mut p = Map::new();
        p.insert("mode".into(), json!(report.mode.name()));
        p.insert("admitted".into(), json!(report.verdict.allowed.to_string()));
        if let Some(code) = report.verdict.code {
            p.insert("code".into(), json!(code.to_string()));
        }
        p
    };
    if report.findings.is_empty() {
        return vec![(
            2,
            result("pass", "valid", "no findings".to_string(), mode()),
        )];
    }
    report
        .findings
        .iter()
        .map(|f| {
            let mut properties = mode();
            properties.insert("field".into(), json!(f.error.field));
            properties.insert("stage".into(), json!(f.stage.name()));
            let (rank, outcome) = match f.severity {
                Severity::Error => (0, "fail"),
                Severity::Warning => (1, "warn"),
            };
            (
                rank,
                result(outcome, f.error.error_type.name(), f.message(), properties),
            )
        })
        .collect()
}

/// The rank of a result read back: failures, warnings, the rest.
fn rank(result: &Value) -> u8 {
    match result["result"].as_str() {
        Some("fail") => 0,
        Some("warn") => 1,
        _ => 2,
    }
}

/// The ClusterPolicyReport of every audited Composition (one not audited yet keeps its
/// results in `told`, the report as this replica's term began, or is left out): failures
/// first, then warnings, then passes, each in the Compositions' order; at most
/// `max_results`, the last one then a `skip` saying how many were left out. The summary
/// counts the results the report holds.
pub fn policy_report(
    inventory: &Inventory,
    told: &BTreeMap<String, Vec<Value>>,
    max_results: usize,
) -> Value {
    let mut results: Vec<(u8, Value)> = inventory
        .iter()
        .flat_map(|(name, item)| match &item.last {
            Some(last) => results_of(name, &item.uid, &last.report, last.at),
            None => told
                .get(name)
                .into_iter()
                .flatten()
                .filter(|r| r["resources"][0]["uid"] == item.uid.as_str())
                .map(|r| (rank(r), r.clone()))
                .collect(),
        })
        .collect();
    // Stable: each Composition's results keep their order.
    results.sort_by_key(|(rank, _)| *rank);
    let total = results.len();
    let max_results = max_results.max(1);
    let mut results: Vec<Value> = results.into_iter().map(|(_, r)| r).collect();
    if total > max_results {
        results.truncate(max_results - 1);
        let left_out = total - results.len();
        results.push(json!({
            "policy": FIELD_MANAGER,
            "rule": "truncated",
            "result": "skip",
            "message": format!(
                "{left_out} more results left out: this report holds at most {max_results}; the webhook's /debug/audit lists every finding"
            ),
            "source": FIELD_MANAGER,
        }));
    }
    let count = |outcome: &str| results.iter().filter(|r| r["result"] == outcome).count();
    let summary = json!({
        "pass": count("pass"),
        "fail": count("fail"),
        "warn": count("warn"),
        "error": count("error"),
        "skip": count("skip"),
    });
    json!({
        "apiVersion": format!("{REPORT_GROUP}/{REPORT_VERSION}"),
        "kind": "ClusterPolicyReport",
        "metadata": {
            "name": REPORT_NAME,
            "labels": {"app.kubernetes.io/managed-by": FIELD_MANAGER},
        },
        "results": results,
        "summary": summary,
    })
}

// ---------------------------------------------------------------------------------------
// Writing them

/// What `/debug/audit` shows of Events and the report.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResultsStatus {
    /// Events written.
    pub events: EventsStatus,
    /// The ClusterPolicyReport.
    pub policy_report: ReportStatus,
}

/// Events written.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventsStatus {
    /// Recorded (created, or a repeat patched).
    pub recorded: u64,
    /// Refused or failed.
    pub failed: u64,
    /// The last failure.
    pub last_error: Option<String>,
}

/// The ClusterPolicyReport.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReportStatus {
    /// Its name.
    pub name: &'static str,
    /// Whether the API server has its CRD (serving v1alpha2): without it nothing is written.
    pub crd: bool,
    /// Times written.
    pub writes: u64,
    /// When last written (RFC 3339).
    pub written_at: Option<String>,
    /// Results in it.
    pub results: usize,
    /// The last failure, until the next write.
    pub last_error: Option<String>,
}

/// How long a new holder waits for the ClusterPolicyReport before it audits without it.
const TOLD_TIMEOUT: Duration = Duration::from_secs(10);

/// What the cluster was told before this replica's term: from the ClusterPolicyReport, each
/// Composition's verdict (by name: uid and summary) and its results.
#[derive(Debug, Default)]
pub struct Told {
    /// The verdicts, of the Compositions whose results say one.
    pub summaries: BTreeMap<String, (String, Summary)>,
    /// The results, by Composition.
    pub results: BTreeMap<String, Vec<Value>>,
}

/// Reads what a ClusterPolicyReport told: results by Composition, and the verdicts they say
/// (results without `admitted`, written by an older webhook, say none). A truncated report
/// tells nothing of the Compositions it left out.
pub fn told_by(report: &Value) -> Told {
    let mut told = Told::default();
    for result in report["results"].as_array().into_iter().flatten() {
        if result["source"] != FIELD_MANAGER || result["result"] == "skip" {
            continue;
        }
        let resource = &result["resources"][0];
        let (Some(name), true) = (resource["name"].as_str(), resource["uid"].is_string()) else {
            continue;
        };
        told.results
            .entry(name.to_string())
            .or_default()
            .push(result.clone());
    }
    for (name, results) in &told.results {
        let properties = &results[0]["properties"];
        let Some(allowed) = properties["admitted"].as_str().and_then(|a| a.parse().ok()) else {
            continue;
        };
        let count = |outcome: &str| results.iter().filter(|r| r["result"] == outcome).count();
        let summary = Summary {
            allowed,
            code: properties["code"].as_str().and_then(|c| c.parse().ok()),
            errors: count("fail"),
            warnings: count("warn"),
        };
        let uid = results[0]["resources"][0]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        told.summaries.insert(name.clone(), (uid, summary));
    }
    told
}

/// What the cluster was told, read from the ClusterPolicyReport where its CRD is served;
/// nothing when it is not, or cannot be read (then verdicts that did not change are
/// announced again).
pub(super) async fn told(client: &kube::Client, audit: &Weak<Audit>) -> Told {
    let served = audit.upgrade().is_some_and(|a| {
        a.schemas
            .crd_versions(REPORT_CRD)
            .is_some_and(|v| v.iter().any(|v| v == REPORT_VERSION))
    });
    if !served {
        return Told::default();
    }
    // The term waits for this read: a stalled API server must not hold the audit.
    let reports = reports_api(client.clone());
    let error = match tokio::time::timeout(TOLD_TIMEOUT, reports.get_opt(REPORT_NAME)).await {
        Ok(Ok(Some(report))) => {
            return serde_json::to_value(&report).map_or_else(|_| Told::default(), |v| told_by(&v));
        }
        Ok(Ok(None)) => return Told::default(),
        Ok(Err(e)) => describe(&e),
        Err(_) => format!("no answer within {} s", TOLD_TIMEOUT.as_secs()),
    };
    tracing::warn!(report = REPORT_NAME, error = %error, "cannot read the ClusterPolicyReport: Events already recorded may be recorded again");
    Told::default()
}

fn reports_api(client: kube::Client) -> kube::Api<DynamicObject> {
    kube::Api::<DynamicObject>::all_with(
        client,
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(REPORT_GROUP, REPORT_VERSION, "ClusterPolicyReport"),
            "clusterpolicyreports",
        ),
    )
}

/// Writes the Events and the report the worker asks for, until the audit is gone.
pub(super) async fn run(
    audit: Weak<Audit>,
    client: kube::Client,
    mut published: mpsc::UnboundedReceiver<Publish>,
) {
    let instance = std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty());
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: FIELD_MANAGER.to_string(),
            instance,
        },
    );
    let reports = reports_api(client);
    let mut ticks = tokio::time::interval(REPORT_INTERVAL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut dirty = false;
    let mut present = false;
    let mut failures = 0u32;
    let mut not_before = Instant::now();
    loop {
        tokio::select! {
            message = published.recv() => match message {
                None => return,
                Some(Publish::Report) => dirty = true,
                Some(Publish::Event(event)) => {
                    let Some(audit) = audit.upgrade() else { return };
                    if audit.may_write() {
                        record(&recorder, &audit, event).await;
                    }
                }
            },
            _ = ticks.tick() => {
                let Some(audit) = audit.upgrade() else { return };
                let served = audit
                    .schemas
                    .crd_versions(REPORT_CRD)
                    .is_some_and(|v| v.iter().any(|v| v == REPORT_VERSION));
                // Written whole when the CRD appears.
                dirty |= served && !present;
                present = served;
                {
                    let mut status = super::audit::lock(&audit.results);
                    status.policy_report.name = REPORT_NAME;
                    status.policy_report.crd = present;
                }
                if !present || !dirty || Instant::now() < not_before || !audit.may_write() {
                    continue;
                }
                let report = {
                    let inventory = audit.inventory();
                    policy_report(&inventory, &audit.state().told, MAX_RESULTS)
                };
                let results = report["results"].as_array().map_or(0, Vec::len);
                let params = PatchParams::apply(FIELD_MANAGER).force();
                let written = reports.patch(REPORT_NAME, &params, &Patch::Apply(&report)).await;
                let mut status = super::audit::lock(&audit.results);
                let status = &mut status.policy_report;
                match written {
                    Ok(_) => {
                        dirty = false;
                        failures = 0;
                        status.writes += 1;
                        status.written_at = Some(rfc3339(SystemTime::now()));
                        status.results = results;
                        status.last_error = None;
                    }
                    Err(e) => {
                        failures = failures.saturating_add(1);
                        let wait = REPORT_INTERVAL
                            .saturating_mul(1 << failures.min(5))
                            .min(Duration::from_secs(60));
                        not_before = Instant::now() + wait;
                        let error = describe(&e);
                        tracing::warn!(report = REPORT_NAME, error = %error, "cannot write the ClusterPolicyReport");
                        status.last_error = Some(error);
                    }
                }
            }
        }
    }
}

/// Records one Event on its Composition.
async fn record(recorder: &Recorder, audit: &Audit, event: AuditEvent) {
    let reference = ObjectReference {
        api_version: Some(format!("{APIEXTENSIONS_GROUP}/v1")),
        kind: Some("Composition".to_string()),
        name: Some(event.name.clone()),
        uid: Some(event.uid.clone()).filter(|u| !u.is_empty()),
        ..ObjectReference::default()
    };
    let published = recorder
        .publish(
            &Event {
                type_: if event.warning {
                    EventType::Warning
                } else {
                    EventType::Normal
                },
                reason: event.reason.to_string(),
                note: Some(event.note),
                action: "Audit".to_string(),
                secondary: None,
            },
            &reference,
        )
        .await;
    let mut status = super::audit::lock(&audit.results);
    match published {
        Ok(()) => status.events.recorded += 1,
        Err(e) => {
            let error = describe(&e);
            tracing::warn!(composition = %event.name, reason = event.reason, error = %error, "cannot record the Event");
            status.events.failed += 1;
            status.events.last_error = Some(error);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::{Change, Dependencies, Summary};
    use crate::findings::{FieldError, Stage};
    use crate::mode::{Mode, Verdict};

    fn report(name: &str, errors: &[&str], warnings: &[&str]) -> Report {
        let finding = |field: &&str, severity| {
            let mut f = Finding::new(
                Stage::Schema,
                FieldError::invalid(*field, "x".to_string(), "not in the schema"),
            );
            f.severity = severity;
            f
        };
        let findings: Vec<Finding> = errors
            .iter()
            .map(|f| finding(f, Severity::Error))
            .chain(warnings.iter().map(|f| finding(f, Severity::Warning)))
            .collect();
        Report {
            name: name.to_string(),
            mode: Mode::Loose,
            mode_source: None,
            verdict: Verdict {
                allowed: errors.is_empty(),
                code: (!errors.is_empty()).then_some(422),
            },
            findings,
            stopped: None,
            function_calls: 0,
        }
    }

    fn transition(before: Option<&Report>, after: &Report) -> Transition {
        Transition {
            name: "c".into(),
            uid: "u".into(),
            resource_version: "1".into(),
            before: before.map(Summary::of),
            after: Summary::of(after),
            change: Change::default(),
        }
    }

    #[test]
    fn an_event_when_the_verdict_changes_but_none_for_a_first_allowed() {
        let fine = report("c", &[], &["spec.w"]);
        let broken = report("c", &["spec.a", "spec.b"], &[]);
        assert_eq!(event_for(&transition(None, &fine), &fine), None);
        assert_eq!(event_for(&transition(Some(&fine), &fine), &fine), None);
        let denied = event_for(&transition(None, &broken), &broken).expect("an event");
        assert_eq!((denied.warning, denied.reason), (true, INVALID));
        assert_eq!(
            denied.note,
            "Would now be denied (422): 2 errors, 0 warnings: spec.a: Invalid value: \"x\": not in the schema; spec.b: Invalid value: \"x\": not in the schema"
        );
        let again = event_for(&transition(Some(&broken), &fine), &fine).expect("an event");
        assert_eq!((again.warning, again.reason), (false, VALID));
        assert_eq!(again.note, "Would now be admitted: 0 errors, 1 warning");
    }

    #[test]
    fn a_note_is_at_most_a_kib() {
        let long = format!("spec.{}", "é".repeat(600));
        let many: Vec<String> = (0..40).map(|i| format!("spec.field{i}")).collect();
        let fields: Vec<&str> = many.iter().map(String::as_str).collect();
        let r = report("c", &fields, &[]);
        let n = note(&r);
        assert!(n.len() <= MAX_MESSAGE_BYTES, "{}", n.len());
        assert!(n.ends_with(" more"), "{n}");
        let said = n.matches("not in the schema").count();
        assert!(n.ends_with(&format!("; and {} more", 40 - said)), "{n}");
        let r = report("c", &[&long, "spec.b"], &[]);
        let n = note(&r);
        assert!(n.len() <= MAX_MESSAGE_BYTES, "{}", n.len());
        assert!(n.contains('…') && n.ends_with("; and 1 more"), "{n}");
    }

    fn inventory(reports: &[(&str, Report)]) -> Inventory {
        let mut inventory = Inventory::new();
        for (name, r) in reports {
            inventory.upsert(&json!({"metadata": {"name": name, "uid": format!("uid-{name}"), "resourceVersion": "1"}}));
            let job = inventory.next_job().expect("queued");
            let at = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
            inventory.record(&job, r.clone(), Dependencies::default(), at);
        }
        inventory
    }

    #[test]
    fn the_report_puts_failures_first_and_counts_what_it_holds() {
        let inv = inventory(&[
            ("a", report("a", &[], &[])),
            ("b", report("b", &["spec.x"], &["spec.y"])),
        ]);
        let r = policy_report(&inv, &BTreeMap::new(), MAX_RESULTS);
        assert_eq!(r["metadata"]["name"], REPORT_NAME);
        assert_eq!(
            r["metadata"]["labels"]["app.kubernetes.io/managed-by"],
            "composition-webhook"
        );
        assert_eq!(r.get("scope"), None);
        let outcomes: Vec<&str> = r["results"]
            .as_array()
            .expect("results")
            .iter()
            .map(|x| x["result"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(outcomes, ["fail", "warn", "pass"]);
        assert_eq!(
            r["results"][0],
            json!({
                "policy": "composition-webhook", "rule": "Invalid", "result": "fail",
                "severity": "high",
                "message": "spec.x: Invalid value: \"x\": not in the schema",
                "source": "composition-webhook", "scored": true,
                "timestamp": {"seconds": 1_700_000_000u64, "nanos": 0},
                "resources": [{"apiVersion": "apiextensions.crossplane.io/v1",
                               "kind": "Composition", "name": "b", "uid": "uid-b"}],
                "properties": {"mode": "loose", "admitted": "false", "code": "422", "field": "spec.x", "stage": "schema"},
            })
        );
        assert_eq!(r["results"][2]["rule"], "valid");
        assert_eq!(r["results"][2]["resources"][0]["name"], "a");
        assert_eq!(
            r["summary"],
            json!({"pass": 1, "fail": 1, "warn": 1, "error": 0, "skip": 0})
        );

        let capped = policy_report(&inv, &BTreeMap::new(), 2);
        assert_eq!(capped["results"].as_array().map(Vec::len), Some(2));
        assert_eq!(
            capped["results"][1]["message"],
            "2 more results left out: this report holds at most 2; the webhook's /debug/audit lists every finding"
        );
        assert_eq!(
            capped["summary"],
            json!({"pass": 0, "fail": 1, "warn": 0, "error": 0, "skip": 1})
        );
    }

    #[test]
    fn a_new_holder_reads_the_verdicts_the_report_told_and_keeps_them_until_it_audits() {
        let inv = inventory(&[
            ("a", report("a", &[], &[])),
            ("b", report("b", &["spec.x"], &["spec.y"])),
        ]);
        let written = policy_report(&inv, &BTreeMap::new(), MAX_RESULTS);
        let told = told_by(&written);
        let summary = |allowed, code, errors, warnings| Summary {
            allowed,
            code,
            errors,
            warnings,
        };
        assert_eq!(
            told.summaries,
            BTreeMap::from([
                (
                    "a".to_string(),
                    ("uid-a".to_string(), summary(true, None, 0, 0))
                ),
                (
                    "b".to_string(),
                    ("uid-b".to_string(), summary(false, Some(422), 1, 1))
                ),
            ])
        );
        // Another replica's inventory: the same Compositions, none audited there yet, and
        // one with a new uid (deleted and made again since): its old results are not its own.
        let mut other = Inventory::new();
        for (name, uid) in [("a", "uid-a"), ("b", "uid-b2")] {
            other.upsert(&json!({"metadata": {"name": name, "uid": uid, "resourceVersion": "2"}}));
        }
        assert_eq!(other.start_over(&told.summaries), 0, "both queued already");
        assert_eq!(
            other.get("a").and_then(|i| i.prior),
            Some(summary(true, None, 0, 0))
        );
        assert_eq!(other.get("b").and_then(|i| i.prior), None);
        let kept = policy_report(&other, &told.results, MAX_RESULTS);
        let kept_results = kept["results"].as_array().expect("results");
        assert_eq!(kept_results.len(), 1, "{kept:#}");
        assert_eq!(kept_results[0], written["results"][2]);
        // An older webhook's results say no verdict: nothing is assumed.
        let mut old = written.clone();
        for r in old["results"].as_array_mut().expect("results") {
            r["properties"]
                .as_object_mut()
                .expect("properties")
                .remove("admitted");
        }
        assert!(told_by(&old).summaries.is_empty());
    }
}
