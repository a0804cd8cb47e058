//! The validation mode (`crossplane.io/composition-schema-aware-validation-mode`) and the
//! verdict it gives a set of findings.
//!
//! | mode | schema missing | schema or rendered error | logical error |
//! |---|---|---|---|
//! | `strict` | deny (403) | deny (422) | deny (422) |
//! | `loose` (default) | warning | deny (422) | deny (422) |
//! | `warn` | warning | warning | deny (422) |
//!
//! Unlike upstream, a missing schema is reported for the resource that needs it and every
//! other check still runs.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use crate::findings::{ErrorType, FieldError, Finding, Severity, Stage};
use crate::model::{LEGACY_MODE_ANNOTATION, MODE_ANNOTATION};

/// How schema-aware findings count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Mode {
    /// Missing schemas and schema errors deny.
    Strict,
    /// Missing schemas warn; schema errors deny.
    #[default]
    Loose,
    /// Missing schemas and schema errors warn.
    Warn,
}

impl Mode {
    /// The annotation value.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Strict => "strict",
            Mode::Loose => "loose",
            Mode::Warn => "warn",
        }
    }

    /// The severity of a finding of `stage` under this mode. Mode findings keep their own.
    pub fn severity(self, stage: Stage, error_type: ErrorType) -> Severity {
        match (stage, self) {
            (Stage::Logical, _) | (Stage::Mode, _) => Severity::Error,
            // A schema that exists but cannot be used (two CRDs for one kind) is an error
            // in every mode: it is a broken setup, not an absent one.
            (Stage::Crds, _) if error_type != ErrorType::NotFound => Severity::Error,
            (Stage::Crds, Mode::Strict) => Severity::Error,
            (Stage::Crds, _) => Severity::Warning,
            (Stage::Schema | Stage::Rendered, Mode::Warn) => Severity::Warning,
            (Stage::Schema | Stage::Rendered, _) => Severity::Error,
            // Not validated to the end: only strict refuses what it could not check.
            (Stage::Limits, Mode::Strict) => Severity::Error,
            (Stage::Limits, _) => Severity::Warning,
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown mode name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid schema-aware composition validation mode: {0}")]
pub struct InvalidMode(pub String);

impl FromStr for Mode {
    type Err = InvalidMode;

    /// Case-sensitive, as upstream: `Strict` is not a mode.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "strict" => Ok(Mode::Strict),
            "loose" => Ok(Mode::Loose),
            "warn" => Ok(Mode::Warn),
            other => Err(InvalidMode(other.to_string())),
        }
    }
}

/// Where the mode came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModeSource {
    /// The `crossplane.io/composition-schema-aware-validation-mode` annotation.
    Annotation,
    /// The Crossplane v1.12-v1.13 `crossplane.io/composition-validation-mode` annotation.
    LegacyAnnotation,
    /// The configured default.
    Default,
}

/// The mode of a Composition and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModeChoice {
    /// The mode.
    pub mode: Mode,
    /// Its source.
    pub source: ModeSource,
    /// A legacy annotation whose value was ignored, with the error it has.
    pub ignored: Option<ModeError>,
}

impl ModeChoice {
    /// The warning about an ignored legacy annotation, if any.
    pub fn note(&self) -> Option<Finding> {
        let e = self.ignored.as_ref()?;
        let mut f = e.finding();
        f.severity = Severity::Warning;
        f.error.detail = format!(
            "{}; the annotation was ignored (Crossplane v1.14+ reads {MODE_ANNOTATION} instead)",
            f.error.detail
        );
        Some(f)
    }
}

/// A mode annotation with a value that is not a mode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModeError {
    /// The current annotation (`strict`, `loose` or `warn`).
    #[error("invalid schema-aware composition validation mode: {0}")]
    SchemaAware(String),
    /// The v1.12-v1.13 annotation (`strict` or `loose`).
    #[error("invalid composition validation mode: {0}")]
    Legacy(String),
}

impl ModeError {
    /// The annotation the bad value is in.
    pub fn annotation(&self) -> &'static str {
        match self {
            ModeError::SchemaAware(_) => MODE_ANNOTATION,
            ModeError::Legacy(_) => LEGACY_MODE_ANNOTATION,
        }
    }

    /// The bad value.
    pub fn value(&self) -> &str {
        match self {
            ModeError::SchemaAware(v) | ModeError::Legacy(v) => v,
        }
    }

    /// The finding reporting this error.
    pub fn finding(&self) -> Finding {
        let supported = match self {
            ModeError::SchemaAware(_) => r#""strict", "loose", "warn""#,
            ModeError::Legacy(_) => r#""strict", "loose""#,
        };
        Finding::new(
            Stage::Mode,
            FieldError::new(
                ErrorType::NotSupported,
                format!("metadata.annotations[{}]", self.annotation()),
                self.value().into(),
                format!("supported values: {supported} (case-sensitive)"),
            ),
        )
    }
}

/// Reads the mode from a Composition's annotations. The current annotation wins; the legacy
/// one (which only knew `strict` and `loose`) is honoured when it is the only one, and
/// ignored, with a note, when its value is not one of those (Crossplane v1.14+ ignores it).
pub fn mode_from_annotations(
    annotations: &BTreeMap<String, String>,
    default: Mode,
) -> Result<ModeChoice, ModeError> {
    if let Some(v) = annotations.get(MODE_ANNOTATION) {
        let mode = v.parse().map_err(|_| ModeError::SchemaAware(v.clone()))?;
        return Ok(ModeChoice {
            mode,
            source: ModeSource::Annotation,
            ignored: None,
        });
    }
    let (mode, source, ignored) = match legacy_mode(annotations) {
        Some(Ok(mode)) => (mode, ModeSource::LegacyAnnotation, None),
        Some(Err(e)) => (default, ModeSource::Default, Some(e)),
        None => (default, ModeSource::Default, None),
    };
    Ok(ModeChoice {
        mode,
        source,
        ignored,
    })
}

/// The mode of the Crossplane v1.12-v1.13 annotation, read as those versions did (`None` when
/// absent).
pub fn legacy_mode(annotations: &BTreeMap<String, String>) -> Option<Result<Mode, ModeError>> {
    let v = annotations.get(LEGACY_MODE_ANNOTATION)?;
    Some(match v.as_str() {
        "strict" => Ok(Mode::Strict),
        "loose" => Ok(Mode::Loose),
        _ => Err(ModeError::Legacy(v.clone())),
    })
}

/// The answer for a Composition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// Whether the Composition is admitted.
    pub allowed: bool,
    /// HTTP status of a denial: 422 (Invalid) or 403 (Forbidden).
    pub code: Option<u16>,
}

impl Verdict {
    /// The Kubernetes `Status.reason` of a denial.
    pub fn reason(&self) -> Option<&'static str> {
        match self.code {
            Some(403) => Some("Forbidden"),
            Some(_) => Some("Invalid"),
            None => None,
        }
    }
}

/// Gives each finding its severity under `mode` (mode findings keep theirs).
pub fn apply_mode(mode: Mode, findings: &mut [Finding]) {
    for f in findings.iter_mut().filter(|f| f.stage != Stage::Mode) {
        f.severity = if f.advisory {
            Severity::Warning
        } else {
            mode.severity(f.stage, f.error.error_type)
        };
    }
}

/// The verdict: denied when any finding is an error. The code is the one of the earliest
/// stage with an error, in the order upstream decides: logical errors are 422 Invalid, a bad
/// mode or unusable/missing schemas 403 Forbidden, schema and rendered errors 422 Invalid.
pub fn verdict(findings: &[Finding]) -> Verdict {
    let first = findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .map(|f| f.stage)
        .min();
    match first {
        None => Verdict {
            allowed: true,
            code: None,
        },
        Some(Stage::Mode | Stage::Crds) => Verdict {
            allowed: false,
            code: Some(403),
        },
        Some(_) => Verdict {
            allowed: false,
            code: Some(422),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ann(k: &str, v: &str) -> BTreeMap<String, String> {
        BTreeMap::from([(k.to_string(), v.to_string())])
    }

    #[test]
    fn reads_annotations() {
        let none = BTreeMap::new();
        assert_eq!(
            mode_from_annotations(&none, Mode::Loose).unwrap().mode,
            Mode::Loose
        );
        assert_eq!(
            mode_from_annotations(&ann(MODE_ANNOTATION, "warn"), Mode::Loose).unwrap(),
            ModeChoice {
                mode: Mode::Warn,
                source: ModeSource::Annotation,
                ignored: None
            }
        );
        assert_eq!(
            mode_from_annotations(&ann(MODE_ANNOTATION, "Strict"), Mode::Loose)
                .unwrap_err()
                .to_string(),
            "invalid schema-aware composition validation mode: Strict"
        );
        let legacy =
            mode_from_annotations(&ann(LEGACY_MODE_ANNOTATION, "warn"), Mode::Loose).unwrap();
        assert_eq!(
            (legacy.mode, legacy.source),
            (Mode::Loose, ModeSource::Default)
        );
        let note = legacy.note().unwrap();
        assert_eq!(note.severity, Severity::Warning);
        assert_eq!(
            note.message(),
            r#"metadata.annotations[crossplane.io/composition-validation-mode]: Unsupported value: "warn": supported values: "strict", "loose" (case-sensitive); the annotation was ignored (Crossplane v1.14+ reads crossplane.io/composition-schema-aware-validation-mode instead)"#
        );
    }

    #[test]
    fn mode_table() {
        use ErrorType::*;
        assert_eq!(
            Mode::Strict.severity(Stage::Crds, NotFound),
            Severity::Error
        );
        assert_eq!(
            Mode::Loose.severity(Stage::Crds, NotFound),
            Severity::Warning
        );
        assert_eq!(Mode::Warn.severity(Stage::Crds, Internal), Severity::Error);
        assert_eq!(
            Mode::Loose.severity(Stage::Schema, Invalid),
            Severity::Error
        );
        assert_eq!(
            Mode::Warn.severity(Stage::Rendered, Invalid),
            Severity::Warning
        );
        assert_eq!(
            Mode::Warn.severity(Stage::Logical, Invalid),
            Severity::Error
        );
    }
}
