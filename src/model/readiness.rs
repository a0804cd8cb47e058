//! Readiness checks of composed resources.

use schemars::JsonSchema;
use serde::Deserialize;

use super::null_default;

/// Readiness check type: the field equals `matchString`.
pub const MATCH_STRING: &str = "MatchString";
/// Readiness check type: the field equals `matchInteger`.
pub const MATCH_INTEGER: &str = "MatchInteger";
/// Readiness check type: the field is `true`.
pub const MATCH_TRUE: &str = "MatchTrue";
/// Readiness check type: the field is `false`.
pub const MATCH_FALSE: &str = "MatchFalse";

/// Readiness check types.
pub const READINESS_TYPES: [&str; 7] = [
    "NonEmpty",
    "MatchString",
    "MatchInteger",
    "MatchTrue",
    "MatchFalse",
    "MatchCondition",
    "None",
];

/// A readiness check (`spec.resources[i].readinessChecks[j]`).
#[derive(Debug, Clone, Default, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["type"]))]
pub struct ReadinessCheck {
    /// The raw type.
    #[serde(default, deserialize_with = "null_default")]
    #[schemars(
        description = "What makes the composed resource ready.",
        extend("enum" = [
            "MatchString", "MatchInteger", "NonEmpty", "MatchCondition",
            "MatchTrue", "MatchFalse", "None"
        ])
    )]
    pub r#type: String,
    /// Field of the composed resource to check.
    #[serde(default, deserialize_with = "null_default")]
    pub field_path: String,
    /// Value for MatchString.
    #[serde(default, deserialize_with = "null_default")]
    pub match_string: String,
    /// Value for MatchInteger.
    #[serde(default, deserialize_with = "null_default")]
    pub match_integer: i64,
    /// Condition for MatchCondition.
    #[serde(default)]
    pub match_condition: Option<MatchConditionReadinessCheck>,
}

/// The condition a MatchCondition readiness check waits for.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, JsonSchema)]
#[schemars(extend("required" = ["type", "status"]))]
pub struct MatchConditionReadinessCheck {
    /// Condition type, e.g. `Ready`.
    #[serde(default, deserialize_with = "null_default")]
    #[schemars(extend("x-crd-default" = "Ready"))]
    pub r#type: String,
    /// Condition status, e.g. `True`.
    #[serde(default, deserialize_with = "null_default")]
    #[schemars(extend("x-crd-default" = "True"))]
    pub status: String,
}
