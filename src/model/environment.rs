//! `spec.environment` (Crossplane v1.13-v1.17): EnvironmentConfig sources and patches.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::{Patch, null_default};

/// Environment source type: by name.
pub const ENV_SOURCE_REFERENCE: &str = "Reference";
/// Environment source type: by label selector.
pub const ENV_SOURCE_SELECTOR: &str = "Selector";
/// Selector mode: exactly one EnvironmentConfig.
pub const ENV_SELECTOR_SINGLE: &str = "Single";
/// Selector mode: several EnvironmentConfigs.
pub const ENV_SELECTOR_MULTIPLE: &str = "Multiple";
/// Label matcher type: value read from the XR.
pub const ENV_MATCHER_FROM_COMPOSITE: &str = "FromCompositeFieldPath";
/// Label matcher type: fixed value.
pub const ENV_MATCHER_VALUE: &str = "Value";

/// `spec.environment`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EnvironmentConfiguration {
    /// Default data of the environment.
    #[serde(default)]
    pub default_data: Option<Map<String, Value>>,
    /// Where EnvironmentConfigs come from.
    #[serde(default, deserialize_with = "null_default")]
    pub environment_configs: Vec<EnvironmentSource>,
    /// Patches between the XR and the environment.
    #[serde(default, deserialize_with = "null_default")]
    #[schemars(schema_with = "super::crds::environment_patches_schema")]
    pub patches: Vec<Patch>,
    /// Resolution policy.
    #[serde(default)]
    #[schemars(with = "Option<EnvironmentPolicy>")]
    pub policy: Option<Value>,
}

/// The schema of `spec.environment.policy` (the model keeps the raw value).
#[derive(JsonSchema)]
#[allow(dead_code)] // Only its schema is used.
struct EnvironmentPolicy {
    /// Whether the environment must resolve: `Required` (default) or `Optional`.
    #[schemars(extend("enum" = ["Required", "Optional"], "x-crd-default" = "Required"))]
    resolution: Option<String>,
    /// When the environment is resolved: `Always` or `IfNotPresent`.
    #[schemars(extend("enum" = ["Always", "IfNotPresent"]))]
    resolve: Option<String>,
}

/// An EnvironmentConfig source.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EnvironmentSource {
    /// `Reference` or `Selector`; raw.
    #[serde(default, deserialize_with = "null_default")]
    #[schemars(
        description = "How EnvironmentConfigs are found: `Reference` (by name) or `Selector` (by labels).",
        extend("enum" = ["Reference", "Selector"], "x-crd-default" = "Reference")
    )]
    pub r#type: String,
    /// The referenced EnvironmentConfig.
    #[serde(default)]
    pub r#ref: Option<EnvironmentSourceReference>,
    /// The selector.
    #[serde(default)]
    pub selector: Option<EnvironmentSourceSelector>,
}

/// Reference to an EnvironmentConfig by name.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[schemars(extend("required" = ["name"]))]
pub struct EnvironmentSourceReference {
    /// Name of the EnvironmentConfig.
    #[serde(default, deserialize_with = "null_default")]
    pub name: String,
}

/// Selector for EnvironmentConfigs.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EnvironmentSourceSelector {
    /// `Single` or `Multiple`; raw.
    #[serde(default, deserialize_with = "null_default")]
    #[schemars(
        description = "`Single` (exactly one EnvironmentConfig) or `Multiple`.",
        extend("enum" = ["Single", "Multiple"], "x-crd-default" = "Single")
    )]
    pub mode: String,
    /// Maximum number of matches (Multiple mode).
    #[serde(default)]
    #[schemars(with = "Option<i64>")]
    pub max_match: Option<u64>,
    /// Minimum number of matches (Multiple mode).
    #[serde(default)]
    #[schemars(with = "Option<i64>")]
    pub min_match: Option<u64>,
    /// Sort key of matches.
    #[serde(default)]
    #[schemars(extend("x-crd-default" = "metadata.name"))]
    pub sort_by_field_path: Option<String>,
    /// Label matchers.
    #[serde(default, deserialize_with = "null_default")]
    pub match_labels: Vec<EnvironmentSourceSelectorLabelMatcher>,
}

/// A label matcher of an environment selector.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["key"]))]
pub struct EnvironmentSourceSelectorLabelMatcher {
    /// `FromCompositeFieldPath` or `Value`; raw.
    #[serde(default, deserialize_with = "null_default")]
    #[schemars(
        description = "Where the label value comes from: `FromCompositeFieldPath` or `Value`.",
        extend("enum" = ["FromCompositeFieldPath", "Value"], "x-crd-default" = "FromCompositeFieldPath")
    )]
    pub r#type: String,
    /// Label key.
    #[serde(default, deserialize_with = "null_default")]
    pub key: String,
    /// XR field holding the label value.
    #[serde(default)]
    pub value_from_field_path: Option<String>,
    /// `Optional` or `Required`.
    #[serde(default)]
    #[schemars(extend("enum" = ["Optional", "Required"], "x-crd-default" = "Required"))]
    pub from_field_path_policy: Option<String>,
    /// Fixed label value.
    #[serde(default)]
    pub value: Option<String>,
}
