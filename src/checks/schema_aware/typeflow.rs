//! Type flow: the type of a patch's value from its source field, through each transform,
//! to its destination field.
//!
//! Crossplane's rules (v1.17 `validateIOTypesWithTransforms` and the runtime's conversion
//! table), made precise where upstream was not: math keeps integers integral where the
//! runtime does, arrays stay arrays (so `Join` works on real array fields), map and match
//! results are typed when all their values share one type, and a mismatch reports the type
//! the transforms produce rather than the source type.

use std::fmt;

use serde_json::Value;

use crate::findings::{BadValue, ErrorType, FieldError};
use crate::model::{
    MATH_MULTIPLY, Runtime, STRING_CONVERSIONS, Transform, TransformIoType, kinds, string_kinds,
};
use crate::schema::resolve::{FieldType, JsonType};

/// The type of a value between transforms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// One transform IO type (`int` is normalised to `int64`).
    Io(TransformIoType),
    /// An `int64` or a `float64` (math on an input of unknown type, a clamp of a float).
    Numeric,
    /// Anything.
    Unknown,
}

impl Flow {
    /// The flow type of a source field.
    pub fn of_field(t: FieldType) -> Flow {
        match t.known() {
            Some(JsonType::String) => Flow::Io(TransformIoType::String),
            Some(JsonType::Boolean) => Flow::Io(TransformIoType::Bool),
            Some(JsonType::Integer) => Flow::Io(TransformIoType::Int64),
            Some(JsonType::Number) => Flow::Io(TransformIoType::Float64),
            Some(JsonType::Object) => Flow::Io(TransformIoType::Object),
            Some(JsonType::Array) => Flow::Io(TransformIoType::Array),
            Some(JsonType::Null) | None => Flow::Unknown,
        }
    }

    /// The JSON type of a value of this flow type, if it is one.
    pub fn json_type(self) -> Option<JsonType> {
        match self {
            Flow::Io(io) => Some(json_of_io(io)),
            Flow::Numeric => Some(JsonType::Number),
            Flow::Unknown => None,
        }
    }

    fn of_json_value(v: &Value) -> Flow {
        match v {
            Value::String(_) => Flow::Io(TransformIoType::String),
            Value::Bool(_) => Flow::Io(TransformIoType::Bool),
            Value::Number(n) if n.is_i64() || n.is_u64() => Flow::Io(TransformIoType::Int64),
            Value::Number(_) => Flow::Io(TransformIoType::Float64),
            Value::Object(_) => Flow::Io(TransformIoType::Object),
            Value::Array(_) => Flow::Io(TransformIoType::Array),
            Value::Null => Flow::Unknown,
        }
    }

    /// The common type of several values: one type, `Numeric` for integers mixed with
    /// floats, otherwise unknown.
    fn common(types: impl IntoIterator<Item = Flow>) -> Flow {
        let mut acc: Option<Flow> = None;
        for t in types {
            acc = Some(match (acc, t) {
                (_, Flow::Unknown) => return Flow::Unknown,
                (None, t) => t,
                (Some(a), t) if a == t => a,
                (Some(a), t) if a.is_numeric() && t.is_numeric() => Flow::Numeric,
                _ => return Flow::Unknown,
            });
        }
        acc.unwrap_or(Flow::Unknown)
    }

    fn is_numeric(self) -> bool {
        matches!(
            self,
            Flow::Numeric | Flow::Io(TransformIoType::Int64 | TransformIoType::Float64)
        )
    }
}

impl fmt::Display for Flow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Flow::Io(io) => io.fmt(f),
            Flow::Numeric => f.write_str("int64 or float64"),
            Flow::Unknown => f.write_str("unknown"),
        }
    }
}

/// The JSON type of a transform IO type.
pub fn json_of_io(io: TransformIoType) -> JsonType {
    match io {
        TransformIoType::String => JsonType::String,
        TransformIoType::Bool => JsonType::Boolean,
        TransformIoType::Int | TransformIoType::Int64 => JsonType::Integer,
        TransformIoType::Float64 => JsonType::Number,
        TransformIoType::Object => JsonType::Object,
        TransformIoType::Array => JsonType::Array,
    }
}

fn normalise(io: TransformIoType) -> TransformIoType {
    if io == TransformIoType::Int {
        TransformIoType::Int64
    } else {
        io
    }
}

/// Whether the runtime converts `from` to `to` with `format` (its `GetConversionFunc`):
/// the same type is a no-op whatever the format.
pub fn conversion_supported(from: TransformIoType, to: TransformIoType, format: &str) -> bool {
    use TransformIoType::*;
    let (from, to) = (normalise(from), normalise(to));
    if from == to {
        return true;
    }
    matches!(
        (from, to, format),
        (String, Int64 | Bool, "none")
            | (String, Float64, "none" | "quantity")
            | (String, Object | Array, "json")
            | (Int64, String | Bool | Float64, "none")
            | (Bool, String | Int64 | Float64, "none")
            | (Float64, String | Int64 | Bool, "none")
    )
}

/// Why a transform cannot take its input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputError(pub String);

/// The output type of a transform given its input type, or why it cannot take that input.
/// A transform whose own configuration is invalid (reported by the logical checks) yields
/// an unknown type.
pub fn transform_output(t: &Transform, input: Flow) -> Result<Flow, InputError> {
    use TransformIoType as Io;
    let not = |what: &str| Err(InputError(format!("{what}, got {input}")));
    match t.r#type.as_str() {
        kinds::MATH => {
            let Some(m) = &t.math else {
                return Ok(Flow::Unknown);
            };
            match input {
                // Multiply and the clamps keep integers integral.
                Flow::Io(Io::Int64 | Io::Int) => Ok(Flow::Io(Io::Int64)),
                Flow::Io(Io::Float64) if m.r#type == MATH_MULTIPLY => Ok(Flow::Io(Io::Float64)),
                // A clamp returns a float input or its integer bound.
                Flow::Io(Io::Float64) | Flow::Numeric | Flow::Unknown => Ok(Flow::Numeric),
                Flow::Io(_) => not("math transform can only be used with numeric types"),
            }
        }
        kinds::MAP => {
            if !matches!(input, Flow::Io(Io::String) | Flow::Unknown) {
                return not("map transform can only be used with string types");
            }
            Ok(t.map.as_ref().map_or(Flow::Unknown, |m| {
                Flow::common(m.pairs.values().map(Flow::of_json_value))
            }))
        }
        kinds::MATCH => {
            if !matches!(input, Flow::Io(Io::String) | Flow::Unknown) {
                return not("match transform can only be used with string input types");
            }
            let Some(m) = &t.r#match else {
                return Ok(Flow::Unknown);
            };
            let results = m.patterns.iter().map(|p| Flow::of_json_value(&p.result));
            let fallback = if m.fallback_to == "Input" {
                Some(input)
            } else {
                m.fallback_value
                    .as_ref()
                    .filter(|v| !v.is_null())
                    .map(Flow::of_json_value)
            };
            Ok(Flow::common(results.chain(fallback)))
        }
        kinds::STRING => {
            let Some(s) = &t.string else {
                return Ok(Flow::Unknown);
            };
            let string_input = matches!(input, Flow::Io(Io::String) | Flow::Unknown);
            let pt = t.runtime == Runtime::PatchAndTransform;
            match s.r#type.as_str() {
                // P&T has no default type: the logical checks report it.
                "" if pt => return Ok(Flow::Unknown),
                // P&T's Replace formats any input with %v, as Format does.
                string_kinds::FORMAT => {}
                string_kinds::REPLACE if pt => {}
                string_kinds::CONVERT => {
                    let conversion = s.convert.as_deref().unwrap_or_default();
                    let needs_string = matches!(
                        conversion,
                        "ToUpper" | "ToLower" | "ToBase64" | "FromBase64"
                    );
                    if needs_string && !string_input {
                        return not("string transform can only be used with string input types");
                    }
                    if !STRING_CONVERSIONS.contains(&conversion) {
                        return Ok(Flow::Unknown);
                    }
                }
                string_kinds::TRIM_PREFIX | string_kinds::TRIM_SUFFIX | string_kinds::REGEXP => {
                    if !string_input {
                        return not("string transform can only be used with string input types");
                    }
                }
                string_kinds::JOIN => {
                    if !matches!(input, Flow::Io(Io::Array) | Flow::Unknown) {
                        return not(
                            "string transform join type can only be used with arrays as input",
                        );
                    }
                }
                other => return Err(InputError(format!("unknown string transform type {other}"))),
            }
            Ok(Flow::Io(Io::String))
        }
        kinds::CONVERT => {
            let Some(c) = &t.convert else {
                return Ok(Flow::Unknown);
            };
            let Some(to) = TransformIoType::parse(&c.to_type) else {
                return Ok(Flow::Unknown);
            };
            let format = c.effective_format();
            let from = match input {
                Flow::Io(io) => Some(io),
                // Integers convert wherever floats do.
                Flow::Numeric => Some(Io::Float64),
                Flow::Unknown => None,
            };
            if let Some(from) = from
                && !conversion_supported(from, to, format)
            {
                return Err(InputError(format!(
                    "conversion from {from} to {} is not supported with format {format}",
                    normalise(to)
                )));
            }
            Ok(Flow::Io(normalise(to)))
        }
        other => Err(InputError(format!("unknown transform type {other}"))),
    }
}

/// Checks that a value of type `source` goes through `transforms` and fits a destination of
/// type `destination`. Field paths are relative to the patch (`transforms`, `transforms[k]`).
/// `source_name` names the source in the message (`the fromFieldPath`).
pub fn check_type_flow(
    source: FieldType,
    transforms: &[Transform],
    destination: FieldType,
    source_name: &str,
) -> Option<FieldError> {
    let source_flow = Flow::of_field(source);
    if transforms.is_empty() {
        let produced = source_flow.json_type()?;
        if destination.accepts(produced) {
            return None;
        }
        return Some(FieldError::required(
            "transforms",
            format!(
                "{source_name} does not have a type compatible with the toFieldPath according to their schemas and no transforms were provided: {produced} != {destination}{}",
                convert_hint(source_flow, destination)
            ),
        ));
    }
    let mut current = source_flow;
    for (k, t) in transforms.iter().enumerate() {
        match transform_output(t, current) {
            Ok(next) => current = next,
            Err(InputError(detail)) => {
                return Some(FieldError::new(
                    ErrorType::Invalid,
                    format!("transforms[{k}]"),
                    transform_value(t),
                    detail,
                ));
            }
        }
    }
    let produced = current.json_type()?;
    let fits = match current {
        // An int64 or a float64: fine wherever either could go.
        Flow::Numeric => {
            destination.accepts(JsonType::Integer) || destination.accepts(JsonType::Number)
        }
        _ => destination.accepts(produced),
    };
    if fits {
        return None;
    }
    Some(FieldError::new(
        ErrorType::Invalid,
        "transforms",
        BadValue::Json(Value::Array(
            transforms.iter().map(transform_json).collect(),
        )),
        format!(
            "the provided transforms do not output a type compatible with the toFieldPath according to the schema: {current_json} != {destination}",
            current_json = produced_name(current)
        ),
    ))
}

/// Suggests the convert transform that would fix a mismatch, when the runtime has one.
fn convert_hint(source: Flow, destination: FieldType) -> String {
    use TransformIoType as Io;
    let (Flow::Io(from), Some(to)) = (source, destination.known()) else {
        return String::new();
    };
    let to = match to {
        JsonType::String => Io::String,
        JsonType::Boolean => Io::Bool,
        JsonType::Integer => Io::Int64,
        JsonType::Number => Io::Float64,
        JsonType::Object => Io::Object,
        JsonType::Array => Io::Array,
        JsonType::Null => return String::new(),
    };
    // A number into a boolean (or back) is more often the wrong field than a conversion.
    let numeric = |t: Io| matches!(t, Io::Int | Io::Int64 | Io::Float64);
    if (from == Io::Bool && numeric(to)) || (to == Io::Bool && numeric(from)) {
        return String::new();
    }
    let format = if from == Io::String && matches!(to, Io::Object | Io::Array) {
        "json"
    } else {
        "none"
    };
    if !conversion_supported(from, to, format) {
        return String::new();
    }
    let format = if format == "none" {
        String::new()
    } else {
        format!(", format: {format}")
    };
    format!(" (a convert transform with toType: {to}{format} would do)")
}

fn produced_name(f: Flow) -> String {
    match f {
        Flow::Numeric => "number".to_string(),
        other => other
            .json_type()
            .map(|t| t.name().to_string())
            .unwrap_or_default(),
    }
}

fn transform_json(t: &Transform) -> Value {
    serde_json::to_value(t).unwrap_or(Value::Null)
}

fn transform_value(t: &Transform) -> BadValue {
    BadValue::Json(transform_json(t))
}
