//! What changed between two reports of one Composition (findings that appeared, findings
//! that went away), and what a definition change would break.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::checks::schema_aware::lookup::SchemaSource;
use crate::findings::{Finding, Severity};
use crate::validate::{Options, Validator};

/// The difference between two sets of findings.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Change {
    /// Findings of the second report the first did not have.
    pub added: Vec<Finding>,
    /// Findings of the first report the second no longer has.
    pub cleared: Vec<Finding>,
}

impl Change {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.cleared.is_empty()
    }

    /// The added findings that deny (errors): what a change breaks.
    pub fn breaking(&self) -> impl Iterator<Item = &Finding> {
        self.added.iter().filter(|f| f.severity == Severity::Error)
    }
}

/// A finding's identity across validations: where it is, what it is, and how severe. Its
/// stage is left out (the same problem may be found at another level once a schema changes).
fn identity(f: &Finding) -> (&str, &str, &str, Severity) {
    (
        f.error.field.as_str(),
        f.error.error_type.name(),
        f.error.detail.as_str(),
        f.severity,
    )
}

/// What changed from `before` to `after`, each side in its own order.
pub fn compare(before: &[Finding], after: &[Finding]) -> Change {
    let old: BTreeSet<_> = before.iter().map(identity).collect();
    let new: BTreeSet<_> = after.iter().map(identity).collect();
    Change {
        added: after
            .iter()
            .filter(|f| !old.contains(&identity(f)))
            .cloned()
            .collect(),
        cleared: before
            .iter()
            .filter(|f| !new.contains(&identity(f)))
            .cloned()
            .collect(),
    }
}

/// A Composition that a change breaks: the errors it would newly have.
#[derive(Debug, Clone)]
pub struct Broken {
    /// The Composition's name.
    pub composition: String,
    /// The errors it has with the change and not without.
    pub findings: Vec<Finding>,
}

/// What a change would do to the Compositions that use what it changes.
#[derive(Debug, Clone, Default)]
pub struct Assessment {
    /// The Compositions it breaks, in the order given.
    pub broken: Vec<Broken>,
    /// How many Compositions were assessed.
    pub assessed: usize,
    /// Those that could not be (the time or budget of the request ran out first).
    pub not_assessed: Vec<String>,
}

/// Validates each Composition against the schemas in force (`current`) and as they would be
/// after a change (`changed`): the errors only the second has are what the change breaks.
/// Both sides are validated now, so a report made before some other change does not count
/// against this one. A validation stopped early (deadline, budget) leaves the rest unassessed.
pub fn assess(
    compositions: impl IntoIterator<Item = (String, Value)>,
    current: &dyn SchemaSource,
    changed: &dyn SchemaSource,
    options: &Options,
) -> Assessment {
    let mut out = Assessment::default();
    let mut stopped = false;
    for (name, object) in compositions {
        if stopped {
            out.not_assessed.push(name);
            continue;
        }
        let before = Validator::new(current, options.clone()).validate_value(&object);
        let after = Validator::new(changed, options.clone()).validate_value(&object);
        if before.stopped.is_some() || after.stopped.is_some() {
            stopped = true;
            out.not_assessed.push(name);
            continue;
        }
        out.assessed += 1;
        let change = compare(&before.findings, &after.findings);
        let findings: Vec<Finding> = change.breaking().cloned().collect();
        if !findings.is_empty() {
            out.broken.push(Broken {
                composition: name,
                findings,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::{FieldError, Stage};

    fn finding(field: &str, detail: &str, severity: Severity) -> Finding {
        let mut f = Finding::new(
            Stage::Schema,
            FieldError::invalid(field, "x".to_string(), detail),
        );
        f.severity = severity;
        f
    }

    #[test]
    fn added_and_cleared_findings_are_told_apart_from_those_kept() {
        let kept = finding("spec.a", "kept", Severity::Error);
        let gone = finding("spec.b", "gone", Severity::Warning);
        let new_error = finding("spec.c", "new", Severity::Error);
        let new_warning = finding("spec.d", "new", Severity::Warning);
        let change = compare(
            &[kept.clone(), gone.clone()],
            &[new_error.clone(), kept, new_warning.clone()],
        );
        assert_eq!(change.added, [new_error.clone(), new_warning]);
        assert_eq!(change.cleared, [gone]);
        assert_eq!(change.breaking().collect::<Vec<_>>(), [&new_error]);
        let same = std::slice::from_ref(&new_error);
        assert!(compare(same, same).is_empty());
    }

    #[test]
    fn a_finding_that_becomes_an_error_is_new() {
        let warning = finding("spec.a", "same words", Severity::Warning);
        let error = finding("spec.a", "same words", Severity::Error);
        let change = compare(&[warning], std::slice::from_ref(&error));
        assert_eq!(change.breaking().collect::<Vec<_>>(), [&error]);
    }

    fn value(file: &str) -> Value {
        let path = format!("{}/testdata/audit/{file}", env!("CARGO_MANIFEST_DIR"));
        crate::document::load_path(std::path::Path::new(&path)).expect("testdata")[0]
            .value
            .clone()
    }

    #[test]
    fn removing_a_field_a_composition_patches_breaks_it_and_restoring_it_does_not() {
        use crate::audit::Overlay;
        use crate::schema::Catalog;

        let mut catalog = Catalog::new();
        for file in ["xrd.yaml", "bucket-crd.yaml"] {
            catalog.add_document(&value(file), file).expect("schema");
        }
        let options = Options::default();
        let compositions = || [("buckets".to_string(), value("composition.yaml"))];

        let removed = value("bucket-crd-without-region.yaml");
        let overlay = Overlay::new(&removed, &catalog).expect("a CRD");
        assert_eq!(
            overlay.kinds().iter().cloned().collect::<Vec<_>>(),
            [("storage.example.org".to_string(), "Bucket".to_string())]
        );
        let a = assess(compositions(), &catalog, &overlay, &options);
        assert_eq!(
            (a.assessed, a.not_assessed.len(), a.broken.len()),
            (1, 0, 1)
        );
        let messages: Vec<String> = a.broken[0].findings.iter().map(|f| f.message()).collect();
        assert_eq!(
            messages,
            [
                "spec.pipeline[0].input.resources[0].patches[0].toFieldPath: Invalid value: \"spec.forProvider.region\": field 'region' is not valid according to the schema"
            ]
        );

        let kept = value("bucket-crd.yaml");
        let overlay = Overlay::new(&kept, &catalog).expect("a CRD");
        let a = assess(compositions(), &catalog, &overlay, &options);
        assert_eq!((a.assessed, a.broken.len()), (1, 0));
    }
}
