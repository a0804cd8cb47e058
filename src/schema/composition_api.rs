//! The Composition API the checks follow: which Composition CRD defaults a Composition read
//! from a file and decides what the API server would refuse in it.
//!
//! Crossplane v1 and v2 serve different Composition CRDs under the same
//! `apiextensions.crossplane.io/v1`: v2's `mode` defaults to `Pipeline` and is the only mode,
//! and `spec.resources`, `spec.patchSets`, `spec.environment` and
//! `spec.publishConnectionDetailsWithStoreConfigRef` are gone (v2 adds
//! `spec.pipeline[].requirements`). Offline, v2.3's rules apply unless the user picks v1's or
//! gives the Composition CRD of the Crossplane they run, which decides over both. In a
//! cluster the API server has already applied its own CRD: its defaults are idempotent, and
//! its refusals are not checked again.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use super::catalog::Catalog;
use super::crd::Crd;
use super::embedded;
use super::structural::Schema;
use super::validation::{self, CompileError, CompiledSchema};

/// The Crossplane major versions whose Composition CRD is embedded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CrossplaneVersion {
    /// Crossplane v1.14–v1.20, by v1.17.0's Composition CRD.
    V1,
    /// Crossplane v2.0–v2.3, by v2.3.4's Composition CRD.
    #[default]
    V2,
}

impl CrossplaneVersion {
    /// The release whose Composition CRD is embedded for this major version.
    pub fn release(self) -> &'static str {
        match self {
            CrossplaneVersion::V1 => "v1.17.0",
            CrossplaneVersion::V2 => "v2.3.4",
        }
    }
}

/// What `--crossplane-version` accepts: a major version (`v1`, `2`) or a release (`v1.20`,
/// `2.3.4`), with or without the `v`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{0:?} is not a Crossplane version: give v2 (v2.0 to v2.3, the default) or v1 (v1.14 to v1.20), optionally with a minor and patch release such as v1.20 or 2.3.4"
)]
pub struct VersionError(String);

impl FromStr for CrossplaneVersion {
    type Err = VersionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || VersionError(s.to_string());
        let digits = s.trim().strip_prefix(['v', 'V']).unwrap_or(s.trim());
        let mut parts = digits.split('.');
        let major = parts.next().ok_or_else(bad)?;
        // Every further part is a number: `v1.20` and `2.3.4` pick their major version.
        let rest: Vec<&str> = parts.collect();
        if rest.len() > 2
            || rest
                .iter()
                .any(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()))
        {
            return Err(bad());
        }
        match major {
            "1" => Ok(CrossplaneVersion::V1),
            "2" => Ok(CrossplaneVersion::V2),
            _ => Err(bad()),
        }
    }
}

impl fmt::Display for CrossplaneVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CrossplaneVersion::V1 => "v1",
            CrossplaneVersion::V2 => "v2",
        })
    }
}

/// Where the Composition CRD the checks follow came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiOrigin {
    /// The CRD embedded for a Crossplane major version.
    Embedded(CrossplaneVersion),
    /// A `compositions.apiextensions.crossplane.io` CRD given with the schemas (its source).
    Given(String),
}

/// The Composition CRD (its `v1` schema) the checks follow.
#[derive(Debug, Clone)]
pub struct CompositionApi {
    schema: Arc<Schema>,
    origin: ApiOrigin,
}

impl Default for CompositionApi {
    /// Crossplane v2's.
    fn default() -> Self {
        CompositionApi::embedded(CrossplaneVersion::default())
    }
}

impl CompositionApi {
    /// The embedded Composition CRD of `version`.
    pub fn embedded(version: CrossplaneVersion) -> Self {
        CompositionApi {
            schema: embedded::composition_crd_schema_of(version),
            origin: ApiOrigin::Embedded(version),
        }
    }

    /// The Composition CRD among `catalog`'s, if there is one with a `v1` schema: the API
    /// of the Crossplane the user runs, which decides over any embedded one.
    pub fn given(catalog: &Catalog) -> Option<Self> {
        let entry = catalog.entries().find(|e| {
            !e.origin().is_generated()
                && e.group() == "apiextensions.crossplane.io"
                && e.kind() == "Composition"
        })?;
        Self::from_crd(entry.crd(), entry.source())
    }

    /// The `v1` schema of a Composition CRD read from `source`.
    pub fn from_crd(crd: &Crd, source: &str) -> Option<Self> {
        let schema = crd.schema_for("v1").schema?.clone();
        Some(CompositionApi {
            schema,
            origin: ApiOrigin::Given(source.to_string()),
        })
    }

    /// The given CRD in `catalog` if there is one, else the embedded one of `version`.
    pub fn choose(catalog: &Catalog, version: CrossplaneVersion) -> Self {
        Self::given(catalog).unwrap_or_else(|| Self::embedded(version))
    }

    /// The CRD's `v1` schema.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// The CRD's `v1` schema compiled for validation: once per schema (see
    /// [`validation::compiled`]; the embedded schemas live as long as the process).
    ///
    /// # Errors
    ///
    /// The [`CompileError`] of a schema the validator refuses.
    pub fn compiled(&self) -> Result<Arc<CompiledSchema>, CompileError> {
        validation::compiled(&self.schema)
    }

    /// Where the CRD came from.
    pub fn origin(&self) -> &ApiOrigin {
        &self.origin
    }

    /// Which API was applied, for a message: how to pick another where a flag can.
    pub fn applied(&self) -> String {
        match &self.origin {
            ApiOrigin::Embedded(CrossplaneVersion::V2) => format!(
                "checked against {self}; for Crossplane v1, validate with --crossplane-version v1"
            ),
            ApiOrigin::Embedded(CrossplaneVersion::V1) => format!(
                "checked against {self}; for Crossplane v2, validate with --crossplane-version v2"
            ),
            _ => format!("checked against {self}"),
        }
    }

    /// Whether the API has only Pipeline mode (Crossplane v2): no `spec.resources`.
    pub fn pipeline_only(&self) -> bool {
        self.schema.descend(&["spec", "resources"]).is_none()
    }
}

impl fmt::Display for CompositionApi {
    /// "Crossplane v2.3.4's Composition API" or "the Composition CRD in FILE".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.origin {
            ApiOrigin::Embedded(v) => write!(f, "Crossplane {}'s Composition API", v.release()),
            ApiOrigin::Given(source) => write!(f, "the Composition CRD in {source}"),
        }
    }
}

/// What a Crossplane v1 field of a Composition became in v2, for an API without it (the
/// words added to the API server's "unknown field"). `None` for any other field.
pub fn moved_in_v2(field: &str) -> Option<&'static str> {
    Some(match field {
        "spec.resources" => {
            "Crossplane v2 Compositions have no spec.resources: compose resources in a pipeline step of function-patch-and-transform (`crossplane beta convert pipeline-composition` converts a v1 Composition)"
        }
        "spec.patchSets" => {
            "Crossplane v2 Compositions have no spec.patchSets: declare them in the function-patch-and-transform step's input (input.patchSets)"
        }
        "spec.environment" => {
            "Crossplane v2 Compositions have no spec.environment: select EnvironmentConfigs with a function-environment-configs step in the pipeline"
        }
        "spec.publishConnectionDetailsWithStoreConfigRef" => {
            "Crossplane v2 removed external secret stores: a composite resource's connection details go to the Secret its composition writes"
        }
        "spec.mode" => {
            "Crossplane v2 runs only Pipeline mode: move spec.resources into a function-patch-and-transform step (`crossplane beta convert pipeline-composition` converts a v1 Composition)"
        }
        _ => return None,
    })
}

/// Whether `field` is one Crossplane v2 added to a pipeline step (`spec.pipeline[N].requirements`),
/// for an API without it.
pub fn added_in_v2(field: &str) -> bool {
    field
        .strip_prefix("spec.pipeline[")
        .and_then(|rest| rest.strip_suffix("].requirements"))
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_by_major() {
        for (text, want) in [
            ("v1", CrossplaneVersion::V1),
            ("1", CrossplaneVersion::V1),
            ("v1.20", CrossplaneVersion::V1),
            ("1.14.0", CrossplaneVersion::V1),
            ("v2", CrossplaneVersion::V2),
            ("2.3.4", CrossplaneVersion::V2),
            ("V2.0", CrossplaneVersion::V2),
        ] {
            assert_eq!(text.parse::<CrossplaneVersion>(), Ok(want), "{text}");
        }
        for bad in ["", "v", "3", "v1.x", "1.", "1.2.3.4", "latest", "v2-rc"] {
            let e = bad.parse::<CrossplaneVersion>().expect_err(bad);
            assert!(e.to_string().contains("is not a Crossplane version"), "{e}");
        }
    }

    #[test]
    fn requirements_of_a_step_are_v2s() {
        assert!(added_in_v2("spec.pipeline[0].requirements"));
        assert!(added_in_v2("spec.pipeline[12].requirements"));
        for other in [
            "spec.pipeline[].requirements",
            "spec.pipeline[0].requirements.requiredResources",
            "spec.pipeline[x].requirements",
            "spec.requirements",
        ] {
            assert!(!added_in_v2(other), "{other}");
        }
    }

    #[test]
    fn embedded_apis_differ_as_v1_and_v2_do() {
        let v1 = CompositionApi::embedded(CrossplaneVersion::V1);
        let v2 = CompositionApi::default();
        assert!(!v1.pipeline_only());
        assert!(v2.pipeline_only());
        assert_eq!(v2.to_string(), "Crossplane v2.3.4's Composition API");
        let mode_default = |api: &CompositionApi| {
            api.schema()
                .descend(&["spec", "mode"])
                .and_then(|s| s.default.clone())
        };
        assert_eq!(mode_default(&v1), Some(serde_json::json!("Resources")));
        assert_eq!(mode_default(&v2), Some(serde_json::json!("Pipeline")));
        assert!(
            v2.schema()
                .descend(&["spec", "pipeline", "[]", "requirements"])
                .is_some()
        );
    }
}
