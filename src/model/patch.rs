//! Patches, patch sets and combines.

use schemars::JsonSchema;
use serde::Deserialize;

use super::{Transform, null_default};

/// Patch type: XR field to composed resource field (the default).
pub const FROM_COMPOSITE_FIELD_PATH: &str = "FromCompositeFieldPath";
/// Patch type: environment field to composed resource field.
pub const FROM_ENVIRONMENT_FIELD_PATH: &str = "FromEnvironmentFieldPath";
/// Patch type: include a named patch set.
pub const PATCH_SET: &str = "PatchSet";
/// Patch type: composed resource field to XR field.
pub const TO_COMPOSITE_FIELD_PATH: &str = "ToCompositeFieldPath";
/// Patch type: composed resource field to environment field.
pub const TO_ENVIRONMENT_FIELD_PATH: &str = "ToEnvironmentFieldPath";
/// Patch type: several XR fields combined into a composed resource field.
pub const COMBINE_FROM_COMPOSITE: &str = "CombineFromComposite";
/// Patch type: several environment fields combined into a composed resource field.
pub const COMBINE_FROM_ENVIRONMENT: &str = "CombineFromEnvironment";
/// Patch type: several composed resource fields combined into an XR field.
pub const COMBINE_TO_COMPOSITE: &str = "CombineToComposite";
/// Patch type: several composed resource fields combined into an environment field.
pub const COMBINE_TO_ENVIRONMENT: &str = "CombineToEnvironment";

/// Combine strategy: format the variables with a Go format string.
pub const COMBINE_STRATEGY_STRING: &str = "string";

/// A patch (`spec.resources[i].patches[j]`, `spec.patchSets[i].patches[j]` and, with a subset
/// of types, `spec.environment.patches[j]`).
#[derive(Debug, Clone, Default, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Patch {
    /// The raw patch type; empty when absent (the API defaults it to FromCompositeFieldPath).
    #[serde(default, deserialize_with = "null_default")]
    #[schemars(
        description = "The patch type: where the value comes from and where it goes.",
        extend(
            "enum" = [
                "FromCompositeFieldPath",
                "FromEnvironmentFieldPath",
                "PatchSet",
                "ToCompositeFieldPath",
                "ToEnvironmentFieldPath",
                "CombineFromEnvironment",
                "CombineFromComposite",
                "CombineToComposite",
                "CombineToEnvironment"
            ],
            "x-crd-default" = "FromCompositeFieldPath"
        )
    )]
    pub r#type: String,
    /// Source field path.
    #[serde(default)]
    pub from_field_path: Option<String>,
    /// Combine configuration of the Combine* types.
    #[serde(default)]
    pub combine: Option<Combine>,
    /// Destination field path (defaults to `fromFieldPath` at run time).
    #[serde(default)]
    pub to_field_path: Option<String>,
    /// The patch set to include, for type PatchSet.
    #[serde(default)]
    pub patch_set_name: Option<String>,
    /// Transforms applied to the value, in order.
    #[serde(default, deserialize_with = "null_default")]
    pub transforms: Vec<Transform>,
    /// Patch policy.
    #[serde(default)]
    pub policy: Option<PatchPolicy>,
}

impl Patch {
    /// The patch type with the API default applied.
    pub fn effective_type(&self) -> &str {
        if self.r#type.is_empty() {
            FROM_COMPOSITE_FIELD_PATH
        } else {
            &self.r#type
        }
    }
}

/// Combine configuration.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["strategy", "variables"]))]
pub struct Combine {
    /// The source fields.
    #[serde(default, deserialize_with = "null_default")]
    #[schemars(extend("minItems" = 1))]
    pub variables: Vec<CombineVariable>,
    /// The strategy (`string`).
    #[serde(default, deserialize_with = "null_default")]
    #[schemars(extend("enum" = ["string"]))]
    pub strategy: String,
    /// Configuration of the `string` strategy.
    #[serde(default)]
    pub string: Option<StringCombine>,
}

/// A combine variable.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["fromFieldPath"]))]
pub struct CombineVariable {
    /// Source field path.
    #[serde(default, deserialize_with = "null_default")]
    pub from_field_path: String,
}

/// Configuration of the `string` combine strategy.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, JsonSchema)]
#[schemars(extend("required" = ["fmt"]))]
pub struct StringCombine {
    /// Go format string with one verb per variable.
    #[serde(default, deserialize_with = "null_default")]
    pub fmt: String,
}

/// Patch policy.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PatchPolicy {
    /// `Optional` (default) or `Required`: whether a missing source field is an error.
    #[serde(default)]
    #[schemars(extend("enum" = ["Optional", "Required"]))]
    pub from_field_path: Option<String>,
    /// How values are merged into the destination (Composition `v1`, deprecated upstream).
    #[serde(default)]
    pub merge_options: Option<MergeOptions>,
    /// How values are written (function-patch-and-transform): `Replace` (default),
    /// `MergeObjects`, `MergeObjectsAppendArrays`, `ForceMergeObjects`,
    /// `ForceMergeObjectsAppendArrays` and the deprecated `MergeObject`, `AppendArray`.
    /// Not a field of the Composition API (v1.17): left out of the Composition CRD.
    #[serde(default)]
    #[schemars(skip)]
    pub to_field_path: Option<String>,
}

/// Merge options of a patch policy.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MergeOptions {
    /// Keep existing map values.
    #[serde(default)]
    pub keep_map_values: Option<bool>,
    /// Append to existing slices.
    #[serde(default)]
    pub append_slice: Option<bool>,
}

/// A named set of patches (`spec.patchSets[i]`).
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[schemars(extend("required" = ["name", "patches"]))]
pub struct PatchSet {
    /// Name referenced by `patchSetName`.
    #[serde(default, deserialize_with = "null_default")]
    pub name: String,
    /// The patches.
    #[serde(default, deserialize_with = "null_default")]
    pub patches: Vec<Patch>,
}
