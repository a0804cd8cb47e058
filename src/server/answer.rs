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
//! - A denial is bounded like the warnings: at most [`MAX_ERRORS`] causes and errors in the
//!   message, each at most [`MAX_ERROR_CHARS`] characters, [`MAX_ERRORS_CHARS`] in all; what
//!   is left out is counted in a last cause and a last entry, `and N more errors`.

use kube_core::Status;
use kube_core::response::{StatusCause, StatusDetails};

use super::review::Answer;
use super::warnings::{self, Warning};
use crate::checks::schema_aware::lookup::is_deprecation;
use crate::findings::{BadValue, Finding, Severity, Stage};
use crate::model::APIEXTENSIONS_GROUP;
use crate::validate::Report;

/// Causes, and errors in a message, at most (the API server passes a denial on whole: 10,000
/// errors would be a 3 MB answer).
pub const MAX_ERRORS: usize = 100;
/// Characters of one error at most; a longer one loses its middle.
pub const MAX_ERROR_CHARS: usize = 1024;
/// Characters of all errors together at most, in the message and in the causes each.
pub const MAX_ERRORS_CHARS: usize = 16 * 1024;

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
    let mut causes = Vec::new();
    let mut budget = Budget::default();
    for f in &errors {
        let message = warnings::truncate(&f.error.body(), MAX_ERROR_CHARS);
        if !budget.take(f.error.field.chars().count() + message.chars().count()) {
            continue;
        }
        causes.push(StatusCause {
            reason: f.error.error_type.cause_type().to_string(),
            message,
            field: f.error.field.clone(),
        });
    }
    if budget.left_out > 0 {
        causes.push(StatusCause {
            reason: String::new(),
            message: more(budget.left_out),
            field: String::new(),
        });
    }
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
            let mut budget = Budget::default();
            let mut message = match first {
                Stage::Mode => format!("cannot get validation mode: {}", list(&head, &mut budget)),
                _ => format!(
                    "cannot get the needed CRDs: [{}]",
                    bounded_messages(&head, &mut budget).join(", ")
                ),
            };
            if !rest.is_empty() {
                message.push_str(&format!("; and {}", list(&rest, &mut budget)));
            }
            Status::failure(&message, "Forbidden").with_code(403)
        }
        _ => Status::failure(
            &format!(
                "Composition.{APIEXTENSIONS_GROUP} {name:?} is invalid: {}",
                list(&errors, &mut Budget::default())
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
fn list(findings: &[&Finding], budget: &mut Budget) -> String {
    match bounded_messages(findings, budget).as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// [`messages`] within `budget`, each shortened to [`MAX_ERROR_CHARS`], the last one counting
/// those left out.
fn bounded_messages(findings: &[&Finding], budget: &mut Budget) -> Vec<String> {
    let before = budget.left_out;
    let mut out: Vec<String> = messages(findings)
        .into_iter()
        .map(|m| warnings::truncate(&m, MAX_ERROR_CHARS))
        .filter(|m| budget.take(m.chars().count()))
        .collect();
    if budget.left_out > before {
        out.push(more(budget.left_out - before));
    }
    out
}

/// The last entry of a shortened list.
fn more(n: usize) -> String {
    format!(
        "and {n} more error{}; run `composition-webhook validate` on the Composition to see all",
        if n == 1 { "" } else { "s" }
    )
}

/// How many errors, and characters, a list may still take.
#[derive(Default)]
struct Budget {
    taken: usize,
    chars: usize,
    left_out: usize,
}

impl Budget {
    /// Whether an error of `chars` characters fits; if not, it is counted as left out (and
    /// so is every later one, so that the list keeps its order).
    fn take(&mut self, chars: usize) -> bool {
        if self.left_out > 0 || self.taken == MAX_ERRORS || self.chars + chars > MAX_ERRORS_CHARS {
            self.left_out += 1;
            return false;
        }
        self.taken += 1;
        self.chars += chars;
        true
    }
}

/// A warning for a finding; the short form leaves out the offending value, which the field
/// and the detail usually make plain. Not for a deprecated version whose own
/// `deprecationWarning` does not name it: then only the value says which version it is.
fn warning(f: &Finding) -> Warning {
    let value_needed = is_deprecation(f)
        && matches!(&f.error.bad_value, BadValue::Str(v) if !f.error.detail.contains(v.as_str()));
    let short = (f.error.bad_value != BadValue::Omit && !value_needed).then(|| {
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
            function_calls: 0,
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
                "no CRD, MRD or XRD defines XThing.example.org",
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
            r#"cannot get the needed CRDs: [spec.compositeTypeRef: Not found: "example.org/v1, Kind=XThing": no CRD, MRD or XRD defines XThing.example.org]; and spec.resources[0].patches[2].transforms: Required value: no transforms were provided: string != integer"#
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
                r#"Composition "c": spec.compositeTypeRef: Not found: no CRD, MRD or XRD defines XThing.example.org"#
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

    /// A deprecated version's warning (the API server's text after the value): short enough
    /// for the API server whole, without the value, for the provider-kubernetes example (its
    /// text names the version); with the value for a text that does not; a
    /// `deprecationWarning` of the 256 characters a CRD allows is cut to the limit, its end
    /// kept.
    #[test]
    fn deprecation_warnings_fit() {
        let deprecated = |text: &str| {
            Finding::advisory(
                Stage::Crds,
                FieldError::invalid(
                    "spec.pipeline[0].input.resources[12].base.apiVersion",
                    "kubernetes.crossplane.io/v1alpha1",
                    text,
                ),
            )
        };
        let default = "kubernetes.crossplane.io/v1alpha1 Object is deprecated; use kubernetes.crossplane.io/v1alpha2 Object";
        let name = "x".repeat(40);
        let a = for_report(&report(Mode::Strict, vec![deprecated(default)]), &name);
        assert!(a.allowed);
        assert_eq!(
            a.warnings,
            [format!(
                "Composition \"{name}\": spec.pipeline[0].input.resources[12].base.apiVersion: Invalid value: {default}"
            )]
        );
        // A text of its own that does not name the version keeps the value (provider-upjet-aws
        // v2.6.0's Bucket v1beta1).
        let own = "This API version is deprecated. Deprecated since v2.6.0.";
        let a = for_report(&report(Mode::Strict, vec![deprecated(own)]), &name);
        assert_eq!(
            a.warnings,
            [format!(
                "Composition \"{name}\": spec.pipeline[0].input.resources[12].base.apiVersion: Invalid value: \"kubernetes.crossplane.io/v1alpha1\": {own}"
            )]
        );
        let custom = format!("{} ends here", "w".repeat(256 - " ends here".len()));
        let a = for_report(&report(Mode::Strict, vec![deprecated(&custom)]), "c");
        assert_eq!(a.warnings[0].chars().count(), warnings::MAX_ONE);
        assert!(a.warnings[0].starts_with("Composition \"c\": spec.pipeline[0]"));
        assert!(a.warnings[0].ends_with("w ends here"));
    }

    fn duplicate(i: usize) -> Finding {
        Finding::new(
            Stage::Logical,
            FieldError::duplicate(format!("spec.resources[{i}].name"), "r"),
        )
    }

    #[test]
    fn denials_are_bounded_with_a_count_of_the_rest() {
        let a = for_report(
            &report(Mode::Loose, (0..10_000).map(duplicate).collect()),
            "c",
        );
        let s = a.status.unwrap();
        let causes = s.details.unwrap().causes;
        assert_eq!(causes.len(), MAX_ERRORS + 1);
        assert_eq!(causes[99].field, "spec.resources[99].name");
        assert_eq!(
            (causes[100].field.as_str(), causes[100].message.as_str()),
            (
                "",
                "and 9900 more errors; run `composition-webhook validate` on the Composition to see all"
            )
        );
        assert!(s.message.starts_with(
            r#"Composition.apiextensions.crossplane.io "c" is invalid: [spec.resources[0].name: Duplicate value: "r", "#
        ));
        assert!(s.message.ends_with(
            r#"spec.resources[99].name: Duplicate value: "r", and 9900 more errors; run `composition-webhook validate` on the Composition to see all]"#
        ), "{}", s.message);
        // Long errors: fewer fit, and each is shortened.
        let long = |i: usize| {
            Finding::new(
                Stage::Schema,
                FieldError::invalid(format!("spec.x[{i}]"), "v".repeat(5000), "bad"),
            )
        };
        let a = for_report(&report(Mode::Strict, (0..50).map(long).collect()), "c");
        let s = a.status.unwrap();
        assert!(s.message.chars().count() < MAX_ERRORS_CHARS + 500);
        let causes = s.details.unwrap().causes;
        let total: usize = causes.iter().map(|c| c.message.chars().count()).sum();
        assert!(total <= MAX_ERRORS_CHARS, "{total}");
        assert!(
            causes
                .iter()
                .all(|c| c.message.chars().count() <= MAX_ERROR_CHARS)
        );
        let kept = causes.len() - 1;
        assert_eq!(
            causes[kept].message,
            format!(
                "and {} more errors; run `composition-webhook validate` on the Composition to see all",
                50 - kept
            )
        );
    }
}
