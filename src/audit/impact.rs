//! What changed between two reports of one Composition: findings that appeared and
//! findings that went away.

use std::collections::BTreeSet;

use crate::findings::{Finding, Severity};

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
}
