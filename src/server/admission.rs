//! What to answer a readable AdmissionRequest: the decision, apart from HTTP and time.
//!
//! - DELETE and CONNECT are allowed: a Composition being deleted has nothing to validate.
//! - CREATE and UPDATE validate the new object (`oldObject` is not looked at: immutable
//!   fields are the Composition CRD's own CEL rules, checked before any webhook).
//! - An object that is not an `apiextensions.crossplane.io` Composition is allowed with a
//!   warning: the webhook configuration should not have sent it.

use std::collections::BTreeMap;
use std::time::Duration;

use kube_core::Status;
use kube_core::admission::Operation;

use super::answer;
use super::metrics::Outcome;
use super::review::{self, Answer, Request, ReviewError};
use super::warnings::{self, Warning};
use crate::budget::{Exceeded, Limits};
use crate::checks::schema_aware::lookup::SchemaSource;
use crate::findings::{BadValue, ErrorType, FieldError, Finding, Stage};
use crate::mode::{self, Mode};
use crate::model::{APIEXTENSIONS_GROUP, LEGACY_MODE_ANNOTATION, MODE_ANNOTATION};
use crate::validate::{Options, Report, Validator};
use serde_json::{Map, Value};

/// The decision on one request.
#[derive(Debug)]
pub struct Decision {
    /// The answer.
    pub answer: Answer,
    /// How it ended, for metrics.
    pub outcome: Outcome,
    /// The mode the Composition was judged by (`None` when none was validated).
    pub mode: Option<Mode>,
    /// The validation report, when a Composition was validated.
    pub report: Option<Report>,
}

/// The name of a request's operation, for logs and metrics.
pub fn operation_name(op: &Operation) -> &'static str {
    match op {
        Operation::Create => "CREATE",
        Operation::Update => "UPDATE",
        Operation::Delete => "DELETE",
        Operation::Connect => "CONNECT",
    }
}

/// Decides on a request. `started` is called with the mode and the Composition's name as
/// soon as they are known, before validation: should the deadline pass during validation,
/// the answer still follows the Composition's mode. When `started` returns an answer (the
/// deadline has already passed), that is the answer and nothing is validated.
pub fn decide(
    request: Request,
    schemas: &dyn SchemaSource,
    default_mode: Mode,
    rendered: bool,
    time: Duration,
    started: impl FnOnce(Mode, &str) -> Option<Answer>,
) -> Decision {
    decide_rereading(
        request,
        schemas,
        default_mode,
        rendered,
        time,
        None,
        started,
        None::<fn() -> Option<Map<String, Value>>>,
    )
}

/// [`decide`], running function steps through `calls` when given, and given a way to read the request's object again (the webhook decodes its body
/// again): then the Composition is used up, read into its model by value and its bases
/// rendered into the resources ([`Validator::validate_owned_rereading`]), and the object is
/// read again only for what needs it as it was (a model error, a finding rendered again from
/// its bases).
#[allow(clippy::too_many_arguments)]
pub fn decide_rereading(
    request: Request,
    schemas: &dyn SchemaSource,
    default_mode: Mode,
    rendered: bool,
    time: Duration,
    calls: Option<crate::render::Calls<'_>>,
    started: impl FnOnce(Mode, &str) -> Option<Answer>,
    reread: Option<impl FnOnce() -> Option<Map<String, Value>>>,
) -> Decision {
    let op = operation_name(&request.operation);
    if matches!(request.operation, Operation::Delete | Operation::Connect) {
        return Decision {
            answer: Answer::allow(Vec::new()),
            outcome: Outcome::Allowed,
            mode: None,
            report: None,
        };
    }
    let kind = &request.kind;
    if !review::is_composition(&kind.group, &kind.kind) {
        let what = if kind.group.is_empty() {
            format!("{}/{}", kind.version, kind.kind)
        } else {
            format!("{}/{}, Kind={}", kind.group, kind.version, kind.kind)
        };
        let warning = Warning::new(format!(
            "not validated: composition-webhook checks only {APIEXTENSIONS_GROUP} Compositions, not {what}; the webhook configuration's rules should not send it"
        ));
        let subject = format!("{} {:?}", kind.kind, request.name);
        return Decision {
            answer: Answer::allow(warnings::shape(&subject, [warning])),
            outcome: Outcome::Warned,
            mode: None,
            report: None,
        };
    }
    let Some(object) = request.object else {
        return Decision {
            answer: Answer::bad_request(&ReviewError::NoObject(op)),
            outcome: Outcome::Malformed,
            mode: None,
            report: None,
        };
    };
    let metadata = object.get("metadata");
    let text = |field: &str| metadata.and_then(|m| m.get(field)).and_then(Value::as_str);
    let name = display_name(text("name"), text("generateName"));
    let mode = mode::mode_from_annotations(&mode_annotations(metadata), default_mode)
        .map_or(Mode::Strict, |c| c.mode);
    if let Some(answer) = started(mode, &name) {
        return Decision {
            answer,
            outcome: Outcome::DeadlineExceeded,
            mode: Some(mode),
            report: None,
        };
    }
    let validator = Validator::new(schemas, Options::admitted(default_mode, rendered));
    let validator = match calls {
        Some(calls) => validator.with_calls(calls),
        None => validator,
    };
    let report = match reread {
        Some(reread) => validator
            .validate_owned_rereading(Value::Object(object), || reread().map(Value::Object)),
        None => validator.validate_owned(Value::Object(object)),
    };
    // Stopped by the deadline or a cancellation: the answer goes by the mode, as for a
    // review that never started.
    if report.stopped.as_ref().is_some_and(|e| !e.is_input()) {
        return Decision {
            answer: deadline_answer(report.mode, &name, time),
            outcome: Outcome::DeadlineExceeded,
            mode: Some(report.mode),
            report: None,
        };
    }
    let answer = answer::for_report(&report, &name);
    let outcome = match (answer.allowed, answer.warnings.is_empty()) {
        (false, _) => Outcome::Denied,
        (true, true) => Outcome::Allowed,
        (true, false) => Outcome::Warned,
    };
    Decision {
        answer,
        outcome,
        mode: Some(report.mode),
        report: Some(report),
    }
}

/// The decision on a Composition whose JSON alone holds more values than a review's memory
/// allows (`values` of them): a finding by the mode, as for a budget spent in validation.
pub fn over_budget(mode: Mode, name: &str, values: usize, limits: Limits) -> Decision {
    let exceeded = Exceeded::Memory {
        limit: limits.memory_bytes,
    };
    let mut findings = vec![Finding::new(
        Stage::Limits,
        FieldError::new(
            ErrorType::TooMany,
            "spec",
            BadValue::Omit,
            format!(
                "reading the Composition ({values} JSON values) {exceeded}; it was not validated"
            ),
        ),
    )];
    mode::apply_mode(mode, &mut findings);
    let report = Report {
        name: name.to_string(),
        mode,
        mode_source: None,
        verdict: mode::verdict(&findings),
        findings,
        stopped: Some(exceeded),
        function_calls: 0,
    };
    let answer = answer::for_report(&report, name);
    let outcome = if answer.allowed {
        Outcome::Warned
    } else {
        Outcome::Denied
    };
    Decision {
        answer,
        outcome,
        mode: Some(mode),
        report: Some(report),
    }
}

/// The mode annotations among `metadata.annotations` (only those: the others, such as a
/// large `last-applied-configuration`, are not copied).
fn mode_annotations(metadata: Option<&Value>) -> BTreeMap<String, String> {
    let annotations = metadata
        .and_then(|m| m.get("annotations"))
        .and_then(Value::as_object);
    [MODE_ANNOTATION, LEGACY_MODE_ANNOTATION]
        .into_iter()
        .filter_map(|key| {
            let v = annotations?.get(key)?.as_str()?;
            Some((key.to_string(), v.to_string()))
        })
        .collect()
}

/// How a Composition is called in messages: its name, or `<generateName>*` on a create that
/// asks for a generated name.
pub fn display_name(name: Option<&str>, generate_name: Option<&str>) -> String {
    match (name, generate_name) {
        (Some(n), _) if !n.is_empty() => n.to_string(),
        (_, Some(g)) if !g.is_empty() => format!("{g}*"),
        _ => String::new(),
    }
}

/// The answer when validation could not finish within `budget`: strict mode denies what it
/// could not check (504 `Timeout`); loose and warn admit it with a warning.
pub fn deadline_answer(mode: Mode, name: &str, budget: Duration) -> Answer {
    let why = format!(
        "validation did not finish within {}, the time left before the API server's webhook timeout",
        human(budget)
    );
    match mode {
        Mode::Strict => Answer::deny(
            Status::failure(
                &format!(
                    "Composition {name:?} was not validated: {why}; strict mode denies what it cannot check. Try again; if it persists, give the webhook more CPU or raise timeoutSeconds in its ValidatingWebhookConfiguration"
                ),
                "Timeout",
            )
            .with_code(504),
            Vec::new(),
        ),
        Mode::Loose | Mode::Warn => Answer::allow(warnings::shape(
            &format!("Composition {name:?}"),
            [Warning::new(format!(
                "admitted without validation ({} mode): {why}",
                mode.name()
            ))],
        )),
    }
}

/// A duration as people write it: `9s`, `900ms`.
fn human(d: Duration) -> String {
    if d.subsec_millis() == 0 && d.as_secs() > 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Catalog;

    fn request(body: serde_json::Value) -> Request {
        let review = serde_json::json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": body,
        });
        super::super::review::decode(None, review.to_string().as_bytes(), usize::MAX).unwrap()
    }

    fn base(op: &str, group: &str, kind: &str) -> serde_json::Value {
        serde_json::json!({
            "uid": "u", "operation": op, "userInfo": {}, "name": "n",
            "kind": {"group": group, "version": "v1", "kind": kind},
            "resource": {"group": group, "version": "v1", "resource": "things"},
        })
    }

    #[test]
    fn delete_connect_and_other_kinds() {
        let catalog = Catalog::new();
        let none = |_: Mode, _: &str| None;
        for op in ["DELETE", "CONNECT"] {
            let d = decide(
                request(base(op, APIEXTENSIONS_GROUP, "Composition")),
                &catalog,
                Mode::Loose,
                true,
                Duration::from_secs(9),
                none,
            );
            assert_eq!((d.answer.allowed, d.outcome), (true, Outcome::Allowed));
        }
        let d = decide(
            request(base("CREATE", "", "ConfigMap")),
            &catalog,
            Mode::Loose,
            true,
            Duration::from_secs(9),
            none,
        );
        assert!(d.answer.allowed);
        assert_eq!(
            d.answer.warnings,
            [
                r#"ConfigMap "n": not validated: composition-webhook checks only apiextensions.crossplane.io Compositions, not v1/ConfigMap; the webhook configuration's rules should not send it"#
            ]
        );
        let d = decide(
            request(base("UPDATE", APIEXTENSIONS_GROUP, "Composition")),
            &catalog,
            Mode::Loose,
            true,
            Duration::from_secs(9),
            none,
        );
        assert_eq!(d.outcome, Outcome::Malformed);
        assert_eq!(
            d.answer.status.unwrap().message,
            "the AdmissionReview request (UPDATE) has no object"
        );
    }

    #[test]
    fn nothing_validated_past_the_deadline() {
        let mut body = base("CREATE", APIEXTENSIONS_GROUP, "Composition");
        body["object"] = serde_json::json!({
            "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
            "metadata": {"name": "c", "annotations": {crate::model::MODE_ANNOTATION: "strict"}},
            "spec": {},
        });
        let d = decide(
            request(body),
            &Catalog::new(),
            Mode::Loose,
            true,
            Duration::from_secs(9),
            |mode, name| Some(deadline_answer(mode, name, Duration::ZERO)),
        );
        assert_eq!(
            (d.outcome, d.mode, d.report.is_none()),
            (Outcome::DeadlineExceeded, Some(Mode::Strict), true)
        );
        assert_eq!(d.answer.status.unwrap().code, 504);
    }

    #[test]
    fn cancelled_validation_answers_by_mode() {
        let mut body = base("CREATE", APIEXTENSIONS_GROUP, "Composition");
        body["object"] = serde_json::json!({
            "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
            "metadata": {"name": "c", "annotations": {crate::model::MODE_ANNOTATION: "strict"}},
            "spec": {"compositeTypeRef": {"apiVersion": "example.org/v1", "kind": "XDb"},
                "resources": [{"name": "db", "base": {"apiVersion": "example.org/v1", "kind": "Db"},
                    "patches": [{"fromFieldPath": "spec.size", "toFieldPath": "spec.size"}]}]},
        });
        let cancel = crate::budget::Cancel::new();
        cancel.cancel();
        let budget = crate::budget::Budget::default().with_cancel(cancel);
        let (d, _) = budget.run(|| {
            decide(
                request(body),
                &Catalog::new(),
                Mode::Loose,
                true,
                Duration::from_secs(9),
                |_, _| None,
            )
        });
        assert_eq!(
            (d.outcome, d.mode, d.report.is_none()),
            (Outcome::DeadlineExceeded, Some(Mode::Strict), true)
        );
        assert_eq!(d.answer.status.unwrap().code, 504);
    }

    #[test]
    fn deadline_by_mode() {
        let a = deadline_answer(Mode::Strict, "c", Duration::from_secs(9));
        let s = a.status.unwrap();
        assert_eq!((s.code, s.reason.as_str()), (504, "Timeout"));
        assert!(s.message.starts_with(
            "Composition \"c\" was not validated: validation did not finish within 9s"
        ));
        let a = deadline_answer(Mode::Loose, "c", Duration::from_millis(900));
        assert!(a.allowed);
        assert_eq!(
            a.warnings,
            [
                "Composition \"c\": admitted without validation (loose mode): validation did not finish within 900ms, the time left before the API server's webhook timeout"
            ]
        );
    }
}
