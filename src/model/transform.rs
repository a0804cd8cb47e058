//! Transforms applied to patch values.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::null_default;

/// Transform type names.
pub mod kinds {
    /// Multiply or clamp a number.
    pub const MATH: &str = "math";
    /// Map an input string to a value.
    pub const MAP: &str = "map";
    /// Match the input against patterns.
    pub const MATCH: &str = "match";
    /// String operations.
    pub const STRING: &str = "string";
    /// Type conversion.
    pub const CONVERT: &str = "convert";
}

/// Which code applies a transform. Crossplane core (Resources-mode Compositions) and
/// function-patch-and-transform share the transform API but not every detail of it: P&T
/// v0.10.8 also has string `Replace`, reads its input without the CRD's defaults, and joins
/// differently. P&T's runtime, not its input CRD, is the authority for its steps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Runtime {
    /// Crossplane core v1.17's composition engine (`spec.resources`).
    #[default]
    Core,
    /// function-patch-and-transform v0.10.8 (a Pipeline step's `Resources` input).
    PatchAndTransform,
}

/// A transform (`...patches[j].transforms[k]`).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, JsonSchema)]
#[schemars(extend("required" = ["type"]))]
pub struct Transform {
    /// The runtime that applies this transform; not part of the API (set when a P&T input
    /// is read, see [`super::PatchAndTransformInput::from_value`]).
    #[serde(skip)]
    #[schemars(skip)]
    pub runtime: Runtime,
    /// The raw transform type.
    #[serde(default, deserialize_with = "null_default")]
    #[schemars(
        description = "The transform type; its configuration is the field of the same name.",
        extend("enum" = ["map", "match", "math", "string", "convert"])
    )]
    pub r#type: String,
    /// Math configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub math: Option<MathTransform>,
    /// Map configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub map: Option<MapTransform>,
    /// Match configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub r#match: Option<MatchTransform>,
    /// String configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub string: Option<StringTransform>,
    /// Convert configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub convert: Option<ConvertTransform>,
}

/// Math transform type: multiply by `multiply` (the default).
pub const MATH_MULTIPLY: &str = "Multiply";
/// Math transform type: at least `clampMin`.
pub const MATH_CLAMP_MIN: &str = "ClampMin";
/// Math transform type: at most `clampMax`.
pub const MATH_CLAMP_MAX: &str = "ClampMax";

/// Math transform configuration.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MathTransform {
    /// The raw math type; empty means Multiply.
    #[serde(default, deserialize_with = "null_default")]
    #[schemars(
        description = "The math operation.",
        extend("enum" = ["Multiply", "ClampMin", "ClampMax"], "x-crd-default" = "Multiply")
    )]
    pub r#type: String,
    /// Factor for Multiply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multiply: Option<i64>,
    /// Bound for ClampMin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clamp_min: Option<i64>,
    /// Bound for ClampMax.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clamp_max: Option<i64>,
}

/// Map transform configuration: the pairs are the object's own keys.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(transparent)]
pub struct MapTransform {
    /// Input string to output value.
    pub pairs: Map<String, Value>,
}

/// Match pattern type: the input equals `literal`.
pub const MATCH_LITERAL: &str = "literal";
/// Match pattern type: the input matches `regexp`.
pub const MATCH_REGEXP: &str = "regexp";

/// Match transform configuration.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MatchTransform {
    /// Patterns tried in order.
    #[serde(default, deserialize_with = "null_default")]
    pub patterns: Vec<MatchTransformPattern>,
    /// Value when nothing matches (fallbackTo Value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_value: Option<Value>,
    /// `Value` (default) or `Input`.
    #[serde(default, deserialize_with = "null_default")]
    #[schemars(extend("enum" = ["Value", "Input"], "x-crd-default" = "Value"))]
    pub fallback_to: String,
}

/// A pattern of a match transform.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, JsonSchema)]
#[schemars(extend("required" = ["type", "result"]))]
pub struct MatchTransformPattern {
    /// The raw pattern type; empty means literal.
    #[serde(default, deserialize_with = "null_default")]
    #[schemars(
        description = "How the input is compared: `literal` or `regexp`.",
        extend("enum" = ["literal", "regexp"], "x-crd-default" = "literal")
    )]
    pub r#type: String,
    /// Literal to compare with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub literal: Option<String>,
    /// Regular expression (RE2 syntax) to match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regexp: Option<String>,
    /// The output when the pattern matches.
    #[serde(default)]
    pub result: Value,
}

/// String transform types.
pub mod string_kinds {
    /// Go format string.
    pub const FORMAT: &str = "Format";
    /// A conversion (see `convert`).
    pub const CONVERT: &str = "Convert";
    /// Remove a prefix.
    pub const TRIM_PREFIX: &str = "TrimPrefix";
    /// Remove a suffix.
    pub const TRIM_SUFFIX: &str = "TrimSuffix";
    /// Extract with a regular expression.
    pub const REGEXP: &str = "Regexp";
    /// Join an array with a separator.
    pub const JOIN: &str = "Join";
    /// Replace every occurrence of a string (function-patch-and-transform only; Crossplane
    /// core v1.17 does not have it).
    pub const REPLACE: &str = "Replace";
}

/// String conversion types of a string transform.
pub const STRING_CONVERSIONS: [&str; 9] = [
    "ToUpper",
    "ToLower",
    "ToBase64",
    "FromBase64",
    "ToJson",
    "ToSha1",
    "ToSha256",
    "ToSha512",
    "ToAdler32",
];

/// String transform configuration.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, JsonSchema)]
pub struct StringTransform {
    /// The raw string transform type; empty means Format.
    #[serde(default, deserialize_with = "null_default")]
    #[schemars(
        description = "The string operation.",
        extend(
            "enum" = ["Format", "Convert", "TrimPrefix", "TrimSuffix", "Regexp", "Join"],
            "x-crd-default" = "Format"
        )
    )]
    pub r#type: String,
    /// Format string for Format.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fmt: Option<String>,
    /// Conversion for Convert.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = [
        "ToUpper", "ToLower", "ToBase64", "FromBase64", "ToJson",
        "ToSha1", "ToSha256", "ToSha512", "ToAdler32"
    ]))]
    pub convert: Option<String>,
    /// Prefix or suffix for TrimPrefix/TrimSuffix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trim: Option<String>,
    /// Expression for Regexp.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regexp: Option<StringTransformRegexp>,
    /// Separator for Join.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub join: Option<StringTransformJoin>,
    /// Search and replacement for Replace (P&T only: kept out of the core CRD's schema).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub replace: Option<StringTransformReplace>,
}

/// Replace configuration of a string transform (function-patch-and-transform).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
pub struct StringTransformReplace {
    /// The string to search for; P&T requires it to be non-empty.
    #[serde(default, deserialize_with = "null_default")]
    pub search: String,
    /// What replaces each occurrence.
    #[serde(default, deserialize_with = "null_default")]
    pub replace: String,
}

/// Regexp configuration of a string transform.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, JsonSchema)]
#[schemars(extend("required" = ["match"]))]
pub struct StringTransformRegexp {
    /// The expression (RE2 syntax).
    #[serde(default, deserialize_with = "null_default")]
    pub r#match: String,
    /// Capture group to output (0, the whole match, by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = super::crds::go_int)]
    pub group: Option<i64>,
}

/// Join configuration of a string transform.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, JsonSchema)]
#[schemars(extend("required" = ["separator"]))]
pub struct StringTransformJoin {
    /// Separator between elements.
    #[serde(default, deserialize_with = "null_default")]
    pub separator: String,
}

/// Convert formats.
pub const CONVERT_FORMATS: [&str; 3] = ["none", "quantity", "json"];

/// Convert transform configuration.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["toType"]))]
pub struct ConvertTransform {
    /// Target type: string, int, int64, bool, float64, object or array.
    #[serde(default, deserialize_with = "null_default")]
    #[schemars(extend("enum" = ["string", "int", "int64", "bool", "float64", "object", "array"]))]
    pub to_type: String,
    /// Input format: none (default), quantity or json.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["none", "quantity", "json"]))]
    pub format: Option<String>,
}

impl ConvertTransform {
    /// The format with its default (`none`).
    pub fn effective_format(&self) -> &str {
        match self.format.as_deref() {
            None | Some("") => "none",
            Some(f) => f,
        }
    }
}

/// The value types transforms read and produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransformIoType {
    /// `string`.
    String,
    /// `bool`.
    Bool,
    /// `int` (normalised to int64 by conversions).
    Int,
    /// `int64`.
    Int64,
    /// `float64`.
    Float64,
    /// `object`.
    Object,
    /// `array`.
    Array,
}

impl TransformIoType {
    /// Parses a `convert.toType` value.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "string" => Self::String,
            "bool" => Self::Bool,
            "int" => Self::Int,
            "int64" => Self::Int64,
            "float64" => Self::Float64,
            "object" => Self::Object,
            "array" => Self::Array,
            _ => return None,
        })
    }

    /// The name as the API writes it.
    pub fn name(self) -> &'static str {
        match self {
            Self::String => "string",
            Self::Bool => "bool",
            Self::Int => "int",
            Self::Int64 => "int64",
            Self::Float64 => "float64",
            Self::Object => "object",
            Self::Array => "array",
        }
    }
}

impl fmt::Display for TransformIoType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A transform whose type is not one of the known types.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unable to get output type, unknown transform type: {0}")]
pub struct UnknownTransformType(pub String);

impl Transform {
    /// The output type as upstream's `Transform.GetOutputType()` states it, without looking at
    /// the input: math gives float64, map and match an unknown type (`None`), string gives
    /// string, convert its raw `toType` (even one that is not a type).
    pub fn declared_output_type(&self) -> Result<Option<String>, UnknownTransformType> {
        match self.r#type.as_str() {
            kinds::MATH => Ok(Some(TransformIoType::Float64.name().to_string())),
            kinds::MAP | kinds::MATCH => Ok(None),
            kinds::STRING => Ok(Some(TransformIoType::String.name().to_string())),
            kinds::CONVERT => Ok(self.convert.as_ref().map(|c| c.to_type.clone())),
            other => Err(UnknownTransformType(other.to_string())),
        }
    }
}
