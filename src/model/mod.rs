//! The `apiextensions.crossplane.io/v1` Composition, as served by Crossplane v1.14 to v1.20.
//!
//! Fields keep the raw strings of the API (`type: FromCompositeFieldPath`), because several
//! checks compare the raw value, exactly as upstream does. Objects read from files get the
//! defaults the Composition CRD would give them through the API server first
//! ([`Composition::from_value`] applies them). Unknown fields are ignored; a known field of the
//! wrong type is a [`ModelError`] naming the field.

mod composition;
mod environment;
mod patch;
mod readiness;
mod transform;

pub use composition::*;
pub use environment::*;
pub use patch::*;
pub use readiness::*;
pub use transform::*;

use serde::{Deserialize, Deserializer};

/// The API group of Compositions and XRDs.
pub const APIEXTENSIONS_GROUP: &str = "apiextensions.crossplane.io";

/// The mode annotation (Crossplane v1.14+).
pub const MODE_ANNOTATION: &str = "crossplane.io/composition-schema-aware-validation-mode";

/// The mode annotation of Crossplane v1.12-v1.13, still honoured (see [`crate::mode`]).
pub const LEGACY_MODE_ANNOTATION: &str = "crossplane.io/composition-validation-mode";

/// A known field of a Composition has a value of the wrong type.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ModelError {
    /// Kubernetes-style path of the field, e.g. `spec.resources[0].patches[1].transforms`.
    pub field: String,
    /// What is wrong, e.g. `must be of type array, got string`.
    pub message: String,
    /// The offending value, when it could be found in the input.
    pub value: Option<serde_json::Value>,
}

/// Deserializes `null` (and absence, with `#[serde(default)]`) as the type's default, as the
/// API server treats a null list or string in a non-nullable field.
pub(crate) fn null_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// Splits `group/version` (or a bare `version` for the core group) into group and version.
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.rsplit_once('/') {
        Some((group, version)) => (group, version),
        None => ("", api_version),
    }
}

/// Go's `schema.GroupVersionKind.String()`: `group/version, Kind=Kind`.
pub fn gvk_string(api_version: &str, kind: &str) -> String {
    let (group, version) = split_api_version(api_version);
    if group.is_empty() {
        format!("/{version}, Kind={kind}")
    } else {
        format!("{group}/{version}, Kind={kind}")
    }
}
