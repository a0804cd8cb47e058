//! From a validation [`Report`] to the answer kubectl users read.
//!
//! - Errors at the logical, schema or rendered stage deny with 422 `Invalid`: the message is
//!   `Composition.apiextensions.crossplane.io "<name>" is invalid: <errors>` (one error bare,
//!   several in brackets, as the API server prints `field.ErrorList`) and `details.causes`
//!   holds one cause per error (reason, field, message), which kubectl prints as
//!   `* <field>: <message>` lines.
//! - A mode annotation that is not a mode, and missing or unusable schemas in strict mode,
//!   deny with 403 `Forbidden` (`cannot get validation mode: ...`,
//!   `cannot get the needed CRDs: [...]`), as Crossplane does.
//! - Findings of warning severity become warnings, in allowed and denied answers alike.

use kube_core::Status;
use kube_core::response::{StatusCause, StatusDetails};

use super::review::Answer;
use super::warnings::{self, Warning};
use crate::findings::{BadValue, Finding, Severity, Stage};
use crate::model::APIEXTENSIONS_GROUP;
use crate::validate::Report;

/// The answer for a validated Composition. `name` is how the Composition is called in
/// messages (its name, or its generateName on a create that asks for one).
pub fn for_report(report: &Report, name: &str) -> Answer {
    let subject = format!("Composition {name:?}");
    let warnings = warnings::shape(
        &subject,
        report
            .findings
            .iter()
            .filter(|f| f.severity == Severity::Warning)
            .map(warning),
    );
    if report.verdict.allowed {
        return Answer::allow(warnings);
    }
    let errors: Vec<&Finding> = report
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .collect();
    let causes = errors
        .iter()
        .map(|f| StatusCause {
            reason: f.error.error_type.cause_type().to_string(),
            message: f.error.body(),
            field: f.error.field.clone(),
        })
        .collect();
    let details = StatusDetails {
        name: name.to_string(),
        group: APIEXTENSIONS_GROUP.to_string(),
        kind: "Composition".to_string(),
        uid: String::new(),
        causes,
        retry_after_seconds: 0,
    };
    let status = match report.verdict.code {
        Some(403) => {
            let first = errors.first().map_or(Stage::Crds, |f| f.stage);
            let (head, rest): (Vec<&Finding>, Vec<&Finding>) =
                errors.iter().partition(|f| f.stage == first);
            let mut message = match first {
                Stage::Mode => format!("cannot get validation mode: {}", list(&head)),
                _ => format!(
                    "cannot get the needed CRDs: [{}]",
                    messages(&head).join(", ")
                ),
            };
            if !rest.is_empty() {
                message.push_str(&format!("; and {}", list(&rest)));
            }
            Status::failure(&message, "Forbidden").with_code(403)
        }
        _ => Status::failure(
            &format!(
                "Composition.{APIEXTENSIONS_GROUP} {name:?} is invalid: {}",
                list(&errors)
            ),
            "Invalid",
        )
        .with_code(422),
    };
    Answer::deny(status.with_details(details), warnings)
}

/// Messages without repeats, in order.
fn messages(findings: &[&Finding]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for f in findings {
        let m = f.message();
        if !out.contains(&m) {
            out.push(m);
        }
    }
    out
}

/// As the API server prints an error list: one error bare, several in brackets.
fn list(findings: &[&Finding]) -> String {
    match messages(findings).as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// A warning for a finding; the short form leaves out the offending value, which the field
/// and the detail usually make plain.
fn warning(f: &Finding) -> Warning {
    let short = (f.error.bad_value != BadValue::Omit).then(|| {
        let mut e = f.error.clone();
        e.bad_value = BadValue::Omit;
        e.to_string()
    });
    Warning {
        text: f.message(),
        short,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::FieldError;
    use crate::mode::{self, Mode};

    fn report(mode: Mode, mut findings: Vec<Finding>) -> Report {
        mode::apply_mode(mode, &mut findings);
        Report {
            name: "c".into(),
            mode,
            mode_source: None,
            verdict: mode::verdict(&findings),
            findings,
            stopped: None,
        }
    }

    fn schema_error() -> Finding {
        Finding::new(
            Stage::Schema,
            FieldError::required(
                "spec.resources[0].patches[2].transforms",
                "no transforms were provided: string != integer",
            ),
        )
    }

    fn missing() -> Finding {
        Finding::new(
            Stage::Crds,
            FieldError::not_found(
                "spec.compositeTypeRef",
                "example.org/v1, Kind=XThing",
                "no CRD or XRD defines XThing.example.org",
            ),
        )
    }

    #[test]
    fn invalid_with_causes() {
        let a = for_report(&report(Mode::Strict, vec![schema_error()]), "c");
        let s = a.status.unwrap();
        assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
        assert_eq!(
            s.message,
            r#"Composition.apiextensions.crossplane.io "c" is invalid: spec.resources[0].patches[2].transforms: Required value: no transforms were provided: string != integer"#
        );
        let d = s.details.unwrap();
        assert_eq!(
            (d.kind.as_str(), d.group.as_str(), d.name.as_str()),
            ("Composition", "apiextensions.crossplane.io", "c")
        );
        assert_eq!(d.causes.len(), 1);
        assert_eq!(d.causes[0].reason, "FieldValueRequired");
        assert_eq!(d.causes[0].field, "spec.resources[0].patches[2].transforms");
        assert_eq!(
            d.causes[0].message,
            "Required value: no transforms were provided: string != integer"
        );
    }

    #[test]
    fn forbidden_when_strict_lacks_a_schema() {
        let a = for_report(&report(Mode::Strict, vec![missing(), schema_error()]), "c");
        let s = a.status.unwrap();
        assert_eq!((s.code, s.reason.as_str()), (403, "Forbidden"));
        assert_eq!(
            s.message,
            r#"cannot get the needed CRDs: [spec.compositeTypeRef: Not found: "example.org/v1, Kind=XThing": no CRD or XRD defines XThing.example.org]; and spec.resources[0].patches[2].transforms: Required value: no transforms were provided: string != integer"#
        );
        assert_eq!(s.details.unwrap().causes.len(), 2);
    }

    #[test]
    fn warnings_in_loose_and_warn() {
        let a = for_report(&report(Mode::Loose, vec![missing()]), "c");
        assert!(a.allowed);
        assert_eq!(
            a.warnings,
            [
                // Over 120 characters with the value: the short form.
                r#"Composition "c": spec.compositeTypeRef: Not found: no CRD or XRD defines XThing.example.org"#
            ]
        );
        let a = for_report(&report(Mode::Warn, vec![schema_error(), missing()]), "c");
        assert!(a.allowed);
        assert_eq!(a.warnings.len(), 2);
        // Denied in loose mode: the missing schema is still a warning.
        let a = for_report(&report(Mode::Loose, vec![schema_error(), missing()]), "c");
        assert!(!a.allowed);
        assert_eq!(a.warnings.len(), 1);
    }
}
