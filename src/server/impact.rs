//! Change impact at admission: an UPDATE of a CRD, MRD or XRD is checked against the
//! Compositions that use the kinds it defines. Each Composition the update would break gets a
//! warning naming it and the field; with `--deny-breaking-changes` the update is denied.
//!
//! The Compositions and what each uses come from the background audit's inventory; both the
//! schemas in force and the updated ones are validated now, so only what this update changes
//! is reported.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};

use kube_core::Status;
use serde_json::{Map, Value};

use super::admission::Decision;
use super::metrics::Outcome;
use super::review::Answer;
use super::warnings::{self, Warning};
use crate::audit::{self, Inventory, Kind, Overlay};
use crate::checks::schema_aware::lookup::SchemaSource;
use crate::findings::go_quote;
use crate::mode::Mode;
use crate::validate::Options;

/// Where the Compositions that use some kinds come from.
pub trait Dependents: Send + Sync {
    /// The Compositions whose last validation looked up any of `kinds`: name and object.
    fn dependents(&self, kinds: &BTreeSet<Kind>) -> Vec<(String, Arc<str>)>;
}

impl Dependents for Mutex<Inventory> {
    fn dependents(&self, kinds: &BTreeSet<Kind>) -> Vec<(String, Arc<str>)> {
        self.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .dependent_objects(kinds)
    }
}

impl Dependents for super::audit::Audit {
    fn dependents(&self, kinds: &BTreeSet<Kind>) -> Vec<(String, Arc<str>)> {
        self.inventory().dependent_objects(kinds)
    }
}

/// Change impact as configured.
#[derive(Clone)]
pub struct ChangeImpact {
    /// The Compositions.
    pub compositions: Arc<dyn Dependents>,
    /// Deny an update that breaks a Composition (else: warnings only).
    pub deny: bool,
}

impl std::fmt::Debug for ChangeImpact {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChangeImpact")
            .field("deny", &self.deny)
            .finish_non_exhaustive()
    }
}

/// The definitions whose updates are assessed: (group, kind) of the object, and how messages
/// name one.
pub fn definition_label(group: &str, kind: &str) -> Option<&'static str> {
    match (group, kind) {
        ("apiextensions.k8s.io", "CustomResourceDefinition") => Some("CRD"),
        ("apiextensions.crossplane.io", "ManagedResourceDefinition") => Some("MRD"),
        ("apiextensions.crossplane.io", "CompositeResourceDefinition") => Some("XRD"),
        _ => None,
    }
}

/// The decision on an UPDATE of a definition (`label` from [`definition_label`]).
pub fn decide(
    label: &str,
    object: Map<String, Value>,
    schemas: &dyn SchemaSource,
    impact: &ChangeImpact,
    default_mode: Mode,
    rendered: bool,
) -> Decision {
    let name = object
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let subject = format!("{label} {name}");
    let object = Value::Object(object);
    // A definition we cannot read is the API server's (or Crossplane's) to refuse.
    let overlay = match Overlay::new(&object, schemas) {
        Ok(o) => o,
        Err(e) => {
            tracing::debug!(definition = %subject, error = %e, "change impact: not assessed");
            return allowed(Vec::new());
        }
    };
    let dependents = impact.compositions.dependents(overlay.kinds());
    if dependents.is_empty() {
        return allowed(Vec::new());
    }
    let options = Options::admitted(default_mode, rendered);
    let compositions = dependents.into_iter().filter_map(|(n, json)| {
        // Stored from a parsed object, so it parses.
        serde_json::from_str(&json).ok().map(|v| (n, v))
    });
    let assessment = audit::assess(compositions, schemas, &overlay, &options);
    let broken: usize = assessment.broken.len();
    tracing::info!(
        definition = %subject,
        assessed = assessment.assessed,
        broken,
        not_assessed = assessment.not_assessed.len(),
        "change impact"
    );
    let mut found: Vec<Warning> = assessment
        .broken
        .iter()
        .flat_map(|b| {
            b.findings.iter().map(|f| {
                Warning::new(format!(
                    "breaks Composition {}: {}",
                    go_quote(&b.composition),
                    f.message()
                ))
            })
        })
        .collect();
    if !assessment.not_assessed.is_empty() {
        let n = assessment.not_assessed.len();
        found.push(Warning::new(format!(
            "{n} Composition{} using it not checked in time: {}",
            if n == 1 { "" } else { "s" },
            assessment
                .not_assessed
                .iter()
                .map(|c| go_quote(c))
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let shaped = warnings::shape(&subject, found);
    if impact.deny && broken > 0 {
        let names: Vec<String> = assessment
            .broken
            .iter()
            .map(|b| go_quote(&b.composition))
            .collect();
        let message = format!(
            "{subject}: this update breaks {broken} Composition{}: {} (see the warnings; the webhook denies breaking changes)",
            if broken == 1 { "" } else { "s" },
            names.join(", ")
        );
        return Decision {
            answer: Answer::deny(
                Status::failure(&message, "Forbidden").with_code(403),
                shaped,
            ),
            outcome: Outcome::Denied,
            mode: None,
            report: None,
        };
    }
    allowed(shaped)
}

fn allowed(warnings: Vec<String>) -> Decision {
    let outcome = if warnings.is_empty() {
        Outcome::Allowed
    } else {
        Outcome::Warned
    };
    Decision {
        answer: Answer::allow(warnings),
        outcome,
        mode: None,
        report: None,
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::SystemTime;

    use super::*;
    use crate::audit::validate_recorded;
    use crate::budget::Budget;
    use crate::schema::Catalog;

    fn value(file: &str) -> Value {
        let path = format!("{}/testdata/audit/{file}", env!("CARGO_MANIFEST_DIR"));
        crate::document::load_path(Path::new(&path)).expect("testdata")[0]
            .value
            .clone()
    }

    fn object(file: &str) -> Map<String, Value> {
        match value(file) {
            Value::Object(o) => o,
            other => panic!("{file}: {other}"),
        }
    }

    /// The cluster's schemas, and an inventory whose one Composition was audited against them.
    fn cluster() -> (Catalog, ChangeImpact) {
        let mut catalog = Catalog::new();
        for file in ["xrd.yaml", "bucket-crd.yaml"] {
            catalog.add_document(&value(file), file).expect("schema");
        }
        let mut inventory = Inventory::new();
        let mut composition = value("composition.yaml");
        composition["metadata"]["resourceVersion"] = "7".into();
        inventory.upsert(&composition);
        let job = inventory.next_job().expect("queued");
        let (report, deps) = validate_recorded(
            &catalog,
            Options::default(),
            Budget::default(),
            &job.value(),
        );
        assert!(report.verdict.allowed, "{:?}", report.findings);
        inventory.record(&job, report, deps, SystemTime::now());
        let impact = ChangeImpact {
            compositions: Arc::new(Mutex::new(inventory)),
            deny: false,
        };
        (catalog, impact)
    }

    fn decide_update(file: &str, impact: &ChangeImpact, catalog: &Catalog) -> Decision {
        let object = object(file);
        let kind = object["kind"].as_str().unwrap_or_default().to_string();
        let group = object["apiVersion"]
            .as_str()
            .and_then(|a| a.split_once('/'))
            .map(|(g, _)| g.to_string())
            .unwrap_or_default();
        let label = definition_label(&group, &kind).expect("a definition");
        decide(label, object, catalog, impact, Mode::Loose, true)
    }

    const BROKEN: &str = "CRD buckets.storage.example.org: breaks Composition \"buckets\": spec.pipeline[0].input.resources[0].patches[0].toFieldPath: Invalid value: \"spec.forProvider.region\": field 'region' is not valid according to the schema";

    #[test]
    fn an_update_that_removes_a_patched_field_warns_naming_the_composition_and_field() {
        let (catalog, impact) = cluster();
        let d = decide_update("bucket-crd-without-region.yaml", &impact, &catalog);
        assert!(d.answer.allowed);
        assert_eq!(d.outcome, Outcome::Warned);
        assert_eq!(d.answer.warnings, [BROKEN]);

        let d = decide_update("bucket-crd.yaml", &impact, &catalog);
        assert!(d.answer.allowed);
        assert_eq!(d.outcome, Outcome::Allowed);
        assert!(d.answer.warnings.is_empty(), "{:?}", d.answer.warnings);
    }

    #[test]
    fn with_deny_a_breaking_update_is_forbidden_and_a_harmless_one_is_not() {
        let (catalog, mut impact) = cluster();
        impact.deny = true;
        let d = decide_update("bucket-crd-without-region.yaml", &impact, &catalog);
        assert!(!d.answer.allowed);
        assert_eq!(d.outcome, Outcome::Denied);
        let status = d.answer.status.as_ref().expect("a Status");
        assert_eq!(status.code, 403);
        assert_eq!(
            status.message,
            "CRD buckets.storage.example.org: this update breaks 1 Composition: \"buckets\" (see the warnings; the webhook denies breaking changes)"
        );
        assert_eq!(d.answer.warnings, [BROKEN]);
        assert!(
            decide_update("bucket-crd.yaml", &impact, &catalog)
                .answer
                .allowed
        );
    }

    #[test]
    fn an_xrd_update_that_removes_a_field_the_composition_reads_breaks_it() {
        let (catalog, impact) = cluster();
        let mut xrd = value("xrd.yaml");
        xrd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"] =
            serde_json::json!({"location": {"type": "string"}});
        let Value::Object(object) = xrd else {
            unreachable!()
        };
        let d = decide("XRD", object, &catalog, &impact, Mode::Loose, true);
        assert_eq!(
            d.answer.warnings,
            [
                "XRD xbuckets.example.org: breaks Composition \"buckets\": spec.pipeline[0].input.resources[0].patches[0].fromFieldPath: Invalid value: \"spec.region\": field 'region' is not valid according to the schema"
            ]
        );
    }

    #[test]
    fn an_update_of_a_kind_no_composition_uses_is_not_looked_at() {
        let (catalog, impact) = cluster();
        let mut crd = value("bucket-crd-without-region.yaml");
        crd["spec"]["names"]["kind"] = "Queue".into();
        let Value::Object(object) = crd else {
            unreachable!()
        };
        let d = decide("CRD", object, &catalog, &impact, Mode::Loose, true);
        assert_eq!((d.answer.allowed, d.outcome), (true, Outcome::Allowed));
        assert!(d.answer.warnings.is_empty());
    }
}
