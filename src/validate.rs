//! The validation engine: one Composition in, a [`Report`] out.
//!
//! Order: read the model (with the API server's defaults), logical checks, the mode
//! annotation, schema lookups; then the mode gives every finding its severity and the
//! findings give the verdict.

use serde_json::Value;

use crate::checks::{self, schemas::SchemaSource};
use crate::findings::{BadValue, ErrorType, FieldError, Finding, Stage};
use crate::mode::{self, Mode, ModeSource, Verdict};
use crate::model::Composition;

/// Engine settings.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// The mode of Compositions without the mode annotation.
    pub default_mode: Mode,
    /// Also check what the API server checks before a webhook sees a Composition (its name,
    /// the fields the Composition CRD requires): on for files, off for admission requests.
    pub as_api_server: bool,
}

impl Default for Options {
    /// Loose by default, checking as the API server would (for files).
    fn default() -> Self {
        Options {
            default_mode: Mode::default(),
            as_api_server: true,
        }
    }
}

/// The result of validating one Composition.
#[derive(Debug, Clone)]
pub struct Report {
    /// `metadata.name` (empty when absent).
    pub name: String,
    /// The mode the findings were judged by (strict when the annotation is invalid).
    pub mode: Mode,
    /// Where the mode came from; `None` when the annotation is invalid.
    pub mode_source: Option<ModeSource>,
    /// Every finding, in stage order, each with its severity.
    pub findings: Vec<Finding>,
    /// Allowed or denied, and how.
    pub verdict: Verdict,
}

impl Report {
    /// Number of findings of a severity.
    pub fn count(&self, severity: crate::findings::Severity) -> usize {
        self.findings
            .iter()
            .filter(|f| f.severity == severity)
            .count()
    }
}

/// Validates Compositions against the schemas of a [`SchemaSource`].
pub struct Validator<'a> {
    schemas: &'a dyn SchemaSource,
    options: Options,
}

impl<'a> Validator<'a> {
    /// A validator using `schemas`.
    pub fn new(schemas: &'a dyn SchemaSource, options: Options) -> Self {
        Validator { schemas, options }
    }

    /// Validates a Composition given as JSON (from a file or an AdmissionReview).
    pub fn validate_value(&self, value: &Value) -> Report {
        match Composition::from_value(value) {
            Ok(c) => self.validate(&c),
            Err(e) => {
                let name = value
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                let bad = e
                    .value
                    .as_ref()
                    .map(BadValue::from_json)
                    .unwrap_or_default();
                let finding = Finding::new(
                    Stage::Logical,
                    FieldError::new(ErrorType::TypeInvalid, e.field, bad, e.message),
                );
                // The mode annotation can still be read when another field cannot.
                let annotations = value
                    .pointer("/metadata/annotations")
                    .and_then(|a| serde_json::from_value(a.clone()).ok())
                    .unwrap_or_default();
                let choice = mode::mode_from_annotations(&annotations, self.options.default_mode);
                let mut findings = vec![finding];
                if let Err(e) = &choice {
                    findings.push(e.finding());
                }
                self.finish(name, choice, findings)
            }
        }
    }

    /// Validates a parsed Composition (defaults already applied).
    pub fn validate(&self, c: &Composition) -> Report {
        let mut findings: Vec<Finding> = checks::logical::validate(c, self.options.as_api_server)
            .into_iter()
            .map(|e| Finding::new(Stage::Logical, e))
            .collect();
        let choice =
            mode::mode_from_annotations(&c.metadata.annotations, self.options.default_mode);
        if let Err(e) = &choice {
            findings.push(e.finding());
        }
        let (_schemas, lookup_findings) = checks::schemas::resolve(c, self.schemas);
        findings.extend(lookup_findings);
        self.finish(c.metadata.name.clone(), choice, findings)
    }

    fn finish(
        &self,
        name: String,
        choice: Result<mode::ModeChoice, mode::ModeError>,
        mut findings: Vec<Finding>,
    ) -> Report {
        // An unusable mode annotation denies anyway; judge the rest strictly.
        let (mode, mode_source) = match choice {
            Ok(c) => (c.mode, Some(c.source)),
            Err(_) => (Mode::Strict, None),
        };
        findings.sort_by_key(|f| f.stage);
        mode::apply_mode(mode, &mut findings);
        let verdict = mode::verdict(&findings);
        Report {
            name,
            mode,
            mode_source,
            findings,
            verdict,
        }
    }
}
