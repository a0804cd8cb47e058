//! Crossplane's transforms (`math`, `map`, `match`, `string`, `convert`) as the runtime
//! applies them to a patch's value: a port of Crossplane's
//! `internal/controller/apiextensions/composite/composition_transforms.go` (v1.14 to v1.20,
//! the same code as function-patch-and-transform's `transforms.go`).
//!
//! Values are the Go values Kubernetes decodes JSON into (see [`crate::go::value`]): a whole
//! number is an `int64`, any other number a `float64`. The results keep Go's types too: a
//! `map` or `match` result and a `json` conversion are decoded by `json.Unmarshal`, so every
//! number in them is a `float64` (a JSON float in the returned [`Value`]). Go can also
//! produce infinite or NaN floats (a huge multiplication, `"inf"` converted to `float64`);
//! they cannot be written back to JSON, and are reported as the error Go's `json.Marshal`
//! gives when Crossplane later serializes them (`json: unsupported value: +Inf`).
//!
//! Errors carry Crossplane's words: `transform at index 1 returned error: math transform
//! could not resolve: input is required to be a number for math transformer, got string`.

use serde_json::{Number, Value};
use sha1::Digest as _;

use crate::findings::FieldError;
use crate::go::base64::{self, CorruptInputError};
use crate::go::quantity::{self, QuantityError};
use crate::go::regexp::{self, RegexpError};
use crate::go::strconv::{self, NumError};
use crate::go::value::{GoValue, float_to_int64, type_name};
use crate::go::{fmt, json, strings};
use crate::model::{
    CONVERT_FORMATS, ConvertTransform, MATCH_LITERAL, MATCH_REGEXP, MATH_CLAMP_MAX, MATH_CLAMP_MIN,
    MATH_MULTIPLY, MapTransform, MatchTransform, MatchTransformPattern, MathTransform, Runtime,
    StringTransform, Transform, TransformIoType, kinds, string_kinds,
};

/// Why a transform failed, in Crossplane's words.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TransformError {
    /// A transform of a list failed (`transform at index 1 returned error: ...`).
    #[error("transform at index {index} returned error: {error}")]
    AtIndex {
        /// The index of the transform in the list.
        index: usize,
        /// Why it failed.
        error: Box<TransformError>,
    },
    /// This tool cannot run the transform where Crossplane can (a regexp whose program here
    /// is larger than the review's memory): no error of the Composition.
    #[error("not rendered: {0}")]
    NotRendered(String),
    /// The review's budget ran out (a chain of transforms that keeps growing its value).
    #[error("not rendered: the value {0}")]
    Budget(crate::budget::Exceeded),
    /// The transform lacks the configuration of its type (`given transform type math
    /// requires configuration`).
    #[error("given transform type {0} requires configuration")]
    ConfigMissing(String),
    /// The type is not a transform type (`transform type foo is not supported`).
    #[error("transform type {0} is not supported")]
    TypeNotSupported(String),
    /// The transform could not resolve its input (`math transform could not resolve: ...`).
    #[error("{kind} transform could not resolve: {reason}")]
    Resolve {
        /// The transform type, e.g. `math`.
        kind: String,
        /// Why.
        reason: Reason,
    },
}

impl TransformError {
    /// The index of the failing transform, for an error of [`apply_all`].
    pub fn index(&self) -> Option<usize> {
        match self {
            TransformError::AtIndex { index, .. } => Some(*index),
            _ => None,
        }
    }

    /// The error of the transform itself, without the index.
    pub fn inner(&self) -> &TransformError {
        match self {
            TransformError::AtIndex { error, .. } => error.inner(),
            other => other,
        }
    }
}

/// Why a transform could not resolve its input.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Reason {
    /// The configuration is invalid, as upstream's `Validate` says it at run time
    /// (`multiply: Required value: must specify a value if a multiply math transform is
    /// specified`, `toType: Invalid value: "foo": invalid type`).
    #[error("{0}")]
    Invalid(Box<FieldError>),
    /// A math transform's input is not a number.
    #[error("input is required to be a number for math transformer, got {0}")]
    MathInputNotNumber(&'static str),
    /// A map transform's input is not a string.
    #[error("type {0} is not supported for map transform")]
    MapInputType(&'static str),
    /// A map transform has no pair for the input.
    #[error("key {0} is not found in map")]
    MapKeyNotFound(String),
    /// A map transform's pair is `null`, which the API keeps as no JSON at all.
    #[error("value for key {0} is not valid JSON: unexpected end of JSON input")]
    MapValueNull(String),
    /// A pattern of a match transform failed.
    #[error("cannot match pattern at index {index}: {error}")]
    MatchPattern {
        /// The index of the pattern.
        index: usize,
        /// Why.
        error: MatchError,
    },
    /// `fallbackTo: Input` with a `fallbackValue`.
    #[error("cannot set both a fallback value and the fallback to input flag")]
    MatchFallbackBoth,
    /// A string transform's type is unknown.
    #[error("type {0} is not supported for string transform type")]
    StringType(String),
    /// A string transform lacks the field of its type (`string transform of type Format fmt
    /// is not set`).
    #[error("string transform of type {kind} {field} is not set")]
    StringConfigMissing {
        /// The string transform type.
        kind: String,
        /// The missing field: `fmt`, `convert`, `trim`, `regexp` or `join`.
        field: &'static str,
    },
    /// A string conversion is unknown.
    #[error("type {0} is not supported for string convert")]
    StringConvertType(String),
    /// `FromBase64` of a string that is not base64 (Go's `CorruptInputError`).
    #[error("string is not valid base64: {0}")]
    Base64(CorruptInputError),
    /// A string transform's regexp does not compile.
    #[error("could not compile regexp: {0}")]
    RegexpCompile(String),
    /// This tool cannot run the transform (see [`TransformError::NotRendered`]).
    #[error("not rendered: {0}")]
    NotRendered(String),
    /// A string transform's regexp does not match, or has no such group.
    #[error("regexp {} had no matches for group {group}", strconv::quote(.regexp))]
    RegexpNoMatch {
        /// The expression.
        regexp: String,
        /// The group asked for.
        group: i64,
    },
    /// A Join transform's input is not an array.
    #[error("cannot join non-array values")]
    JoinNotArray,
    /// The review's budget ran out while building the result.
    #[error("not rendered: the value {0}")]
    Budget(crate::budget::Exceeded),
    /// A Join transform's input is not an array, in function-patch-and-transform's words.
    #[error("could not parse input array")]
    PatchAndTransformJoinNotArray,
    /// A convert transform's input is an object, an array or null (`invalid input type
    /// []interface {}`).
    #[error("invalid input type {0}")]
    ConvertInputType(&'static str),
    /// No conversion between the types with the format.
    #[error("conversion from {from} to {to} is not supported with format {format}")]
    ConvertNotSupported {
        /// The input type.
        from: &'static str,
        /// The output type (`int` read as `int64`).
        to: String,
        /// The format.
        format: String,
    },
    /// A string did not parse as a number or bool (`strconv.ParseInt: parsing "x": invalid
    /// syntax`).
    #[error(transparent)]
    Parse(#[from] NumError),
    /// A string did not parse as a Kubernetes quantity.
    #[error(transparent)]
    Quantity(#[from] QuantityError),
    /// A string did not parse as JSON of the wanted type (Go's `encoding/json` message).
    #[error("{0}")]
    Json(String),
    /// The result is a float JSON cannot hold: `+Inf`, `-Inf` or `NaN`.
    #[error("json: unsupported value: {0}")]
    Unrepresentable(String),
}

/// Why a pattern of a match transform failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MatchError {
    /// This tool cannot run the pattern (see [`TransformError::NotRendered`]).
    #[error("not rendered: {0}")]
    NotRendered(String),
    /// The pattern type is unknown.
    #[error("unsupported pattern type '{0}'")]
    PatternType(String),
    /// The pattern lacks the field of its type (`literal is required by type literal`).
    #[error("{0} is required by type {0}")]
    Required(&'static str),
    /// The input is not a string (`null` for a regexp pattern and a nil input).
    #[error("unsupported input type '{0}'")]
    InputType(&'static str),
    /// The regexp does not compile.
    #[error("cannot compile regexp: {0}")]
    Compile(String),
}

/// Applies `transforms` in order to `input`, as Crossplane's runtime does: the first failure
/// stops, wrapped with its index.
pub fn apply_all(transforms: &[Transform], input: Value) -> Result<Value, TransformError> {
    let mut value = input;
    for (index, t) in transforms.iter().enumerate() {
        crate::budget::step().map_err(TransformError::Budget)?;
        value = apply(t, value).map_err(|e| TransformError::AtIndex {
            index,
            error: Box::new(e),
        })?;
    }
    Ok(value)
}

/// Applies one transform.
pub fn apply(t: &Transform, input: Value) -> Result<Value, TransformError> {
    let kind = t.r#type.as_str();
    let missing = || TransformError::ConfigMissing(kind.to_string());
    let result = match kind {
        kinds::MATH => math(t.math.as_ref().ok_or_else(missing)?, input),
        kinds::MAP => map(t.map.as_ref().ok_or_else(missing)?, input),
        kinds::MATCH => match_(t.r#match.as_ref().ok_or_else(missing)?, input),
        kinds::STRING => string(t.string.as_ref().ok_or_else(missing)?, input, t.runtime),
        kinds::CONVERT => convert(t.convert.as_ref().ok_or_else(missing)?, input),
        _ => return Err(TransformError::TypeNotSupported(kind.to_string())),
    };
    result.map_err(|reason| match reason {
        Reason::Budget(e) => TransformError::Budget(e),
        Reason::NotRendered(m)
        | Reason::MatchPattern {
            error: MatchError::NotRendered(m),
            ..
        } => TransformError::NotRendered(m),
        reason => TransformError::Resolve {
            kind: kind.to_string(),
            reason,
        },
    })
}

/// A float64 result, unless JSON cannot hold it.
fn float_value(f: f64) -> Result<Value, Reason> {
    Number::from_f64(f)
        .map(Value::Number)
        .ok_or_else(|| Reason::Unrepresentable(strconv::format_float(f, b'g', -1)))
}

fn math(m: &MathTransform, input: Value) -> Result<Value, Reason> {
    let kind = if m.r#type.is_empty() {
        MATH_MULTIPLY
    } else {
        m.r#type.as_str()
    };
    // Upstream validates the configuration first, with the API's words.
    let required = |field: &str, what: &str| {
        Reason::Invalid(Box::new(FieldError::required(
            field,
            format!("must specify a value if a {what} math transform is specified"),
        )))
    };
    let bound = match kind {
        MATH_MULTIPLY => m.multiply.ok_or_else(|| required("multiply", "multiply"))?,
        MATH_CLAMP_MIN => m
            .clamp_min
            .ok_or_else(|| required("clampMin", "clamp min"))?,
        MATH_CLAMP_MAX => m
            .clamp_max
            .ok_or_else(|| required("clampMax", "clamp max"))?,
        other => {
            return Err(Reason::Invalid(Box::new(FieldError::invalid(
                "type",
                other,
                "unknown math transform type",
            ))));
        }
    };
    let number = match GoValue::of(&input) {
        g @ (GoValue::Int(_) | GoValue::Float(_)) => g,
        g => return Err(Reason::MathInputNotNumber(g.type_name())),
    };
    if kind == MATH_MULTIPLY {
        return match number {
            // Go's int64 multiplication wraps.
            GoValue::Int(i) => Ok(Value::from(i.wrapping_mul(bound))),
            GoValue::Float(f) => float_value(f * bound as f64),
            _ => Err(Reason::MathInputNotNumber(number.type_name())),
        };
    }
    // Clamps compare the input truncated to an int64, and keep its type when in bounds.
    let truncated = match number {
        GoValue::Int(i) => i,
        GoValue::Float(f) => float_to_int64(f),
        _ => 0,
    };
    let out_of_bounds = if kind == MATH_CLAMP_MIN {
        truncated < bound
    } else {
        truncated > bound
    };
    Ok(if out_of_bounds {
        Value::from(bound)
    } else {
        input
    })
}

fn map(m: &MapTransform, input: Value) -> Result<Value, Reason> {
    let Value::String(key) = input else {
        return Err(Reason::MapInputType(type_name(&input)));
    };
    match m.pairs.get(&key) {
        None => Err(Reason::MapKeyNotFound(key)),
        Some(Value::Null) => Err(Reason::MapValueNull(key)),
        Some(v) => Ok(json::decoded(v.clone())),
    }
}

fn match_(m: &MatchTransform, input: Value) -> Result<Value, Reason> {
    for (index, p) in m.patterns.iter().enumerate() {
        if pattern_matches(p, &input).map_err(|error| Reason::MatchPattern { index, error })? {
            return Ok(json::decoded(p.result.clone()));
        }
    }
    // A null fallback value is no fallback value: the API keeps no JSON for it.
    let fallback = m.fallback_value.as_ref().filter(|v| !v.is_null());
    if m.fallback_to == "Input" {
        if fallback.is_some() {
            return Err(Reason::MatchFallbackBoth);
        }
        return Ok(input);
    }
    Ok(fallback.cloned().map(json::decoded).unwrap_or(Value::Null))
}

fn pattern_matches(p: &MatchTransformPattern, input: &Value) -> Result<bool, MatchError> {
    match p.r#type.as_str() {
        // The API defaults the type to literal.
        MATCH_LITERAL | "" => {
            let literal = p
                .literal
                .as_ref()
                .ok_or(MatchError::Required(MATCH_LITERAL))?;
            match input {
                Value::String(s) => Ok(s == literal),
                other => Err(MatchError::InputType(type_name(other))),
            }
        }
        MATCH_REGEXP => {
            let pattern = p
                .regexp
                .as_ref()
                .ok_or(MatchError::Required(MATCH_REGEXP))?;
            // Compiled first: Go refuses a bad pattern whatever the input.
            let compile = |haystack: &str| {
                regexp::compile_to_search(pattern, haystack).map_err(|e| match e {
                    RegexpError::Invalid(m) => MatchError::Compile(m),
                    RegexpError::TooLarge(m) => MatchError::NotRendered(m),
                })
            };
            match input {
                Value::String(s) => Ok(compile(s)?.is_match(s)),
                Value::Null => compile("").and(Err(MatchError::InputType("null"))),
                other => compile("").and(Err(MatchError::InputType(type_name(other)))),
            }
        }
        other => Err(MatchError::PatternType(other.to_string())),
    }
}

fn string(s: &StringTransform, input: Value, runtime: Runtime) -> Result<Value, Reason> {
    let pt = runtime == Runtime::PatchAndTransform;
    // The API defaults the type to Format; nothing defaults P&T's input.
    let kind = if s.r#type.is_empty() && !pt {
        string_kinds::FORMAT
    } else {
        s.r#type.as_str()
    };
    let missing = |field| Reason::StringConfigMissing {
        kind: kind.to_string(),
        field,
    };
    let out = match kind {
        string_kinds::FORMAT => {
            let format = s.fmt.as_ref().ok_or_else(|| missing("fmt"))?;
            fmt::sprintf(format, std::slice::from_ref(&input))
        }
        string_kinds::CONVERT => {
            let conversion = s.convert.as_ref().ok_or_else(|| missing("convert"))?;
            string_convert(conversion, &input)?
        }
        string_kinds::TRIM_PREFIX | string_kinds::TRIM_SUFFIX => {
            let trim = s.trim.as_ref().ok_or_else(|| missing("trim"))?;
            let text = fmt::sprint_v(&input);
            let trimmed = if kind == string_kinds::TRIM_PREFIX {
                text.strip_prefix(trim.as_str())
            } else {
                text.strip_suffix(trim.as_str())
            };
            trimmed.map(str::to_string).unwrap_or(text)
        }
        string_kinds::REGEXP => {
            let r = s.regexp.as_ref().ok_or_else(|| missing("regexp"))?;
            let text = fmt::sprint_v(&input);
            let re = regexp::compile_to_search(&r.r#match, &text).map_err(|e| match e {
                RegexpError::Invalid(m) => Reason::RegexpCompile(m),
                RegexpError::TooLarge(m) => Reason::NotRendered(m),
            })?;
            // Group 0, the whole match, by default.
            let group = r.group.unwrap_or(0);
            let no_match = || Reason::RegexpNoMatch {
                regexp: r.r#match.clone(),
                group,
            };
            let captures = re.captures(&text).ok_or_else(no_match)?;
            // Go would panic on a negative group; it is reported as no match.
            let index = usize::try_from(group).map_err(|_| no_match())?;
            if index >= captures.len() {
                return Err(no_match());
            }
            // A group that took no part in the match is "" in Go.
            captures
                .get(index)
                .map(|m| m.as_str().to_string())
                .unwrap_or_default()
        }
        string_kinds::JOIN if pt => {
            let join = s.join.as_ref().ok_or_else(|| missing("join"))?;
            let Value::Array(items) = &input else {
                return Err(Reason::PatchAndTransformJoinNotArray);
            };
            patch_and_transform_join(items, &join.separator)?
        }
        string_kinds::REPLACE if pt => {
            let r = s.replace.as_ref().ok_or_else(|| missing("replace"))?;
            strings::replace_all(&fmt::sprint_v(&input), &r.search, &r.replace)
                .map_err(Reason::Budget)?
        }
        string_kinds::JOIN => {
            let join = s.join.as_ref().ok_or_else(|| missing("join"))?;
            let Value::Array(items) = &input else {
                return Err(Reason::JoinNotArray);
            };
            items
                .iter()
                .map(fmt::sprint_v)
                .collect::<Vec<_>>()
                .join(&join.separator)
        }
        other => return Err(Reason::StringType(other.to_string())),
    };
    Ok(Value::String(out))
}

/// P&T v0.10.8's Join: each element formatted with `%v` and followed by the separator, then
/// the last *byte* cut when the separator is not empty. A separator of more than one byte
/// so keeps all but its last byte at the end (`", "` gives `"a, b,"`), and a multi-byte
/// rune is cut in half (written as U+FFFD per byte, as Go's `json.Marshal` does).
fn patch_and_transform_join(items: &[Value], separator: &str) -> Result<String, Reason> {
    if items.is_empty() {
        return Ok(String::new());
    }
    let mut out = Vec::new();
    for item in items {
        crate::budget::step().map_err(Reason::Budget)?;
        let text = fmt::sprint_v(item);
        crate::budget::reserve(text.len().saturating_add(separator.len()))
            .map_err(Reason::Budget)?;
        out.extend_from_slice(text.as_bytes());
        out.extend_from_slice(separator.as_bytes());
    }
    if !separator.is_empty() {
        out.pop();
    }
    Ok(json::string_from_bytes(&out))
}

fn string_convert(conversion: &str, input: &Value) -> Result<String, Reason> {
    let text = fmt::sprint_v(input);
    // Hashes and checksums take a string's bytes, or any other value's JSON.
    let hashed = || match input {
        Value::String(s) => s.clone().into_bytes(),
        other => json::marshal(other).into_bytes(),
    };
    Ok(match conversion {
        "ToUpper" => strings::to_upper(&text),
        "ToLower" => strings::to_lower(&text),
        "ToJson" => json::marshal(input),
        "ToBase64" => base64::encode_to_string(text.as_bytes()),
        "FromBase64" => {
            json::string_from_bytes(&base64::decode_string(&text).map_err(Reason::Base64)?)
        }
        "ToSha1" => hex::encode(sha1::Sha1::digest(hashed())),
        "ToSha256" => hex::encode(sha2::Sha256::digest(hashed())),
        "ToSha512" => hex::encode(sha2::Sha512::digest(hashed())),
        "ToAdler32" => adler2::adler32_slice(&hashed()).to_string(),
        other => return Err(Reason::StringConvertType(other.to_string())),
    })
}

fn convert(c: &ConvertTransform, input: Value) -> Result<Value, Reason> {
    // Upstream's Validate: a null format is `none`; anything not in the enum is invalid.
    let format = c.format.as_deref().unwrap_or("none");
    if !CONVERT_FORMATS.contains(&format) {
        return Err(Reason::Invalid(Box::new(FieldError::invalid(
            "format",
            format,
            "invalid format",
        ))));
    }
    if TransformIoType::parse(&c.to_type).is_none() {
        return Err(Reason::Invalid(Box::new(FieldError::invalid(
            "toType",
            c.to_type.as_str(),
            "invalid type",
        ))));
    }
    let go = GoValue::of(&input);
    let from = match go {
        GoValue::Str(_) => "string",
        GoValue::Bool(_) => "bool",
        GoValue::Int(_) => "int64",
        GoValue::Float(_) => "float64",
        other => return Err(Reason::ConvertInputType(other.type_name())),
    };
    let to = if c.to_type == "int" {
        "int64"
    } else {
        c.to_type.as_str()
    };
    if from == to {
        return Ok(input);
    }
    match (go, to, format) {
        (GoValue::Str(s), "int64", "none") => Ok(Value::from(strconv::parse_int(s)?)),
        (GoValue::Str(s), "bool", "none") => Ok(Value::Bool(strconv::parse_bool(s)?)),
        (GoValue::Str(s), "float64", "none") => float_value(strconv::parse_float(s)?),
        (GoValue::Str(s), "float64", "quantity") => {
            float_value(quantity::parse_approximate_f64(s)?)
        }
        (GoValue::Str(s), "object", "json") => {
            json::unmarshal(s, json::Target::Object).map_err(Reason::Json)
        }
        (GoValue::Str(s), "array", "json") => {
            json::unmarshal(s, json::Target::Array).map_err(Reason::Json)
        }
        (GoValue::Int(i), "string", "none") => Ok(Value::String(i.to_string())),
        (GoValue::Int(i), "bool", "none") => Ok(Value::Bool(i == 1)),
        (GoValue::Int(i), "float64", "none") => float_value(i as f64),
        (GoValue::Bool(b), "string", "none") => Ok(Value::String(b.to_string())),
        (GoValue::Bool(b), "int64", "none") => Ok(Value::from(i64::from(b))),
        (GoValue::Bool(b), "float64", "none") => float_value(if b { 1.0 } else { 0.0 }),
        (GoValue::Float(f), "string", "none") => {
            Ok(Value::String(strconv::format_float(f, b'f', -1)))
        }
        (GoValue::Float(f), "int64", "none") => Ok(Value::from(float_to_int64(f))),
        (GoValue::Float(f), "bool", "none") => Ok(Value::Bool(f == 1.0)),
        _ => Err(Reason::ConvertNotSupported {
            from,
            to: to.to_string(),
            format: format.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A transform from its JSON form.
    fn t(v: Value) -> Transform {
        serde_json::from_value(v).unwrap_or_default()
    }

    /// Applies one transform given as JSON; the error as its message.
    fn run(transform: Value, input: Value) -> Result<Value, String> {
        apply(&t(transform), input).map_err(|e| e.to_string())
    }

    fn err(transform: Value, input: Value) -> String {
        run(transform, input).err().unwrap_or_default()
    }

    fn math(m: Value) -> Value {
        json!({"type": "math", "math": m})
    }

    fn string(s: Value) -> Value {
        json!({"type": "string", "string": s})
    }

    fn conv(to: &str, format: Option<&str>) -> Value {
        match format {
            Some(f) => json!({"type": "convert", "convert": {"toType": to, "format": f}}),
            None => json!({"type": "convert", "convert": {"toType": to}}),
        }
    }

    #[test]
    fn math_keeps_gos_types() {
        let double = math(json!({"multiply": 2}));
        let out = run(double.clone(), json!(3));
        assert_eq!(out, Ok(json!(6)));
        assert!(out.is_ok_and(|v| v.is_i64()));
        let out = run(double.clone(), json!(1.5));
        assert_eq!(out, Ok(json!(3.0)));
        assert!(out.is_ok_and(|v| v.is_f64()));
        assert_eq!(run(double.clone(), json!(i64::MAX)), Ok(json!(-2)));
        assert_eq!(
            err(math(json!({"multiply": 10})), json!(1e308)),
            "math transform could not resolve: json: unsupported value: +Inf"
        );
        assert_eq!(
            err(double.clone(), json!("ola")),
            "math transform could not resolve: input is required to be a number for math transformer, got string"
        );
        assert_eq!(
            err(double, json!(null)),
            "math transform could not resolve: input is required to be a number for math transformer, got <nil>"
        );
        let clamp_min = math(json!({"type": "ClampMin", "clampMin": 2}));
        assert_eq!(run(clamp_min.clone(), json!(1)), Ok(json!(2)));
        assert_eq!(run(clamp_min.clone(), json!(3)), Ok(json!(3)));
        assert_eq!(run(clamp_min, json!(1.9)), Ok(json!(2)));
        let clamp_max = math(json!({"type": "ClampMax", "clampMax": 2}));
        assert_eq!(run(clamp_max.clone(), json!(3)), Ok(json!(2)));
        // 2.9 truncates to 2, which is in bounds: the float is kept.
        assert_eq!(run(clamp_max, json!(2.9)), Ok(json!(2.9)));
        assert_eq!(
            err(math(json!({})), json!(25)),
            "math transform could not resolve: multiply: Required value: must specify a value if a multiply math transform is specified"
        );
        assert_eq!(
            err(math(json!({"type": "ClampMin"})), json!(25)),
            "math transform could not resolve: clampMin: Required value: must specify a value if a clamp min math transform is specified"
        );
        assert_eq!(
            err(math(json!({"type": "ClampMax"})), json!(25)),
            "math transform could not resolve: clampMax: Required value: must specify a value if a clamp max math transform is specified"
        );
        assert_eq!(
            err(math(json!({"type": "bad"})), json!(25)),
            r#"math transform could not resolve: type: Invalid value: "bad": unknown math transform type"#
        );
    }

    #[test]
    fn transform_types_and_configuration() {
        assert_eq!(
            err(json!({"type": "math"}), json!(1)),
            "given transform type math requires configuration"
        );
        assert_eq!(
            err(json!({"type": "convert"}), json!(1)),
            "given transform type convert requires configuration"
        );
        assert_eq!(
            err(json!({"type": "foo"}), json!(1)),
            "transform type foo is not supported"
        );
    }

    #[test]
    fn map_decodes_values_as_go() {
        let m = json!({"type": "map", "map": {"ola": "voila", "n": 1, "o": {"a": [2]}, "z": null}});
        assert_eq!(run(m.clone(), json!("ola")), Ok(json!("voila")));
        // json.Unmarshal gives float64 numbers.
        assert!(run(m.clone(), json!("n")).is_ok_and(|v| v.is_f64() && v == json!(1.0)));
        assert_eq!(run(m.clone(), json!("o")), Ok(json!({"a": [2.0]})));
        assert_eq!(
            err(m.clone(), json!("nope")),
            "map transform could not resolve: key nope is not found in map"
        );
        assert_eq!(
            err(m.clone(), json!(5)),
            "map transform could not resolve: type int64 is not supported for map transform"
        );
        assert_eq!(
            err(m, json!("z")),
            "map transform could not resolve: value for key z is not valid JSON: unexpected end of JSON input"
        );
    }

    #[test]
    fn match_patterns_and_fallbacks() {
        let m = |patterns: Value, rest: Value| {
            let mut spec = json!({"patterns": patterns});
            if let (Some(spec), Some(rest)) = (spec.as_object_mut(), rest.as_object()) {
                spec.extend(rest.clone());
            }
            json!({"type": "match", "match": spec})
        };
        let patterns = json!([
            {"type": "literal", "literal": "foo", "result": "bar"},
            {"literal": "five", "result": 5},
            {"type": "regexp", "regexp": "^foo.*$", "result": {"a": 1}},
        ]);
        assert_eq!(
            run(m(patterns.clone(), json!({})), json!("foo")),
            Ok(json!("bar"))
        );
        assert!(run(m(patterns.clone(), json!({})), json!("five")).is_ok_and(|v| v.is_f64()));
        assert_eq!(
            run(m(patterns.clone(), json!({})), json!("foobar")),
            Ok(json!({"a": 1.0}))
        );
        assert_eq!(
            run(m(patterns.clone(), json!({})), json!("x")),
            Ok(json!(null))
        );
        assert_eq!(
            run(
                m(patterns.clone(), json!({"fallbackValue": "fb"})),
                json!("x")
            ),
            Ok(json!("fb"))
        );
        assert_eq!(
            run(m(json!([]), json!({"fallbackTo": "Input"})), json!("x")),
            Ok(json!("x"))
        );
        assert_eq!(
            run(
                m(
                    json!([]),
                    json!({"fallbackTo": "Input", "fallbackValue": null})
                ),
                json!("x")
            ),
            Ok(json!("x"))
        );
        assert_eq!(
            err(
                m(
                    json!([]),
                    json!({"fallbackTo": "Input", "fallbackValue": "foo"})
                ),
                json!("x")
            ),
            "match transform could not resolve: cannot set both a fallback value and the fallback to input flag"
        );
        assert_eq!(
            err(m(json!([{"literal": "5"}]), json!({})), json!(5)),
            "match transform could not resolve: cannot match pattern at index 0: unsupported input type 'int64'"
        );
        assert_eq!(
            err(m(json!([{"literal": "5"}]), json!({})), json!(null)),
            "match transform could not resolve: cannot match pattern at index 0: unsupported input type '<nil>'"
        );
        assert_eq!(
            err(
                m(json!([{"type": "regexp", "regexp": "a"}]), json!({})),
                json!(null)
            ),
            "match transform could not resolve: cannot match pattern at index 0: unsupported input type 'null'"
        );
        assert_eq!(
            err(m(json!([{"type": "literal"}]), json!({})), json!("x")),
            "match transform could not resolve: cannot match pattern at index 0: literal is required by type literal"
        );
        assert_eq!(
            err(
                m(json!([{"literal": "a"}, {"type": "regexp"}]), json!({})),
                json!("x")
            ),
            "match transform could not resolve: cannot match pattern at index 1: regexp is required by type regexp"
        );
        assert_eq!(
            err(
                m(json!([{"type": "regexp", "regexp": "?="}]), json!({})),
                json!("x")
            ),
            "match transform could not resolve: cannot match pattern at index 0: cannot compile regexp: error parsing regexp: missing argument to repetition operator: `?`"
        );
        assert_eq!(
            err(m(json!([{"type": "glob"}]), json!({})), json!("x")),
            "match transform could not resolve: cannot match pattern at index 0: unsupported pattern type 'glob'"
        );
    }

    #[test]
    fn string_format_and_trim() {
        let fmt = |f: &str| string(json!({"type": "Format", "fmt": f}));
        assert_eq!(
            run(fmt("verycool%s"), json!("thing")),
            Ok(json!("verycoolthing"))
        );
        assert_eq!(
            run(fmt("the largest %d"), json!(8)),
            Ok(json!("the largest 8"))
        );
        assert_eq!(run(fmt("%05.1f"), json!(5.4321)), Ok(json!("005.4")));
        assert_eq!(run(fmt("%s"), json!(5)), Ok(json!("%!s(int64=5)")));
        assert_eq!(run(fmt("%s-%s"), json!("a")), Ok(json!("a-%!s(MISSING)")));
        // The type defaults to Format.
        assert_eq!(
            run(string(json!({"fmt": "x-%v"})), json!([1, 2])),
            Ok(json!("x-[1 2]"))
        );
        assert_eq!(
            err(string(json!({"type": "Format"})), json!("v")),
            "string transform could not resolve: string transform of type Format fmt is not set"
        );
        assert_eq!(
            err(string(json!({"type": "Something"})), json!("v")),
            "string transform could not resolve: type Something is not supported for string transform type"
        );
        let prefix = string(json!({"type": "TrimPrefix", "trim": "https://"}));
        assert_eq!(
            run(prefix.clone(), json!("https://crossplane.io")),
            Ok(json!("crossplane.io"))
        );
        assert_eq!(
            run(prefix, json!("crossplane.io")),
            Ok(json!("crossplane.io"))
        );
        let suffix = string(json!({"type": "TrimSuffix", "trim": "-test"}));
        assert_eq!(run(suffix, json!("my-string-test")), Ok(json!("my-string")));
        assert_eq!(
            run(
                string(json!({"type": "TrimPrefix", "trim": "12"})),
                json!(12345)
            ),
            Ok(json!("345"))
        );
        assert_eq!(
            err(string(json!({"type": "TrimSuffix"})), json!("v")),
            "string transform could not resolve: string transform of type TrimSuffix trim is not set"
        );
    }

    #[test]
    fn string_conversions() {
        let c = |conversion: &str| string(json!({"type": "Convert", "convert": conversion}));
        assert_eq!(
            run(c("ToUpper"), json!("crossplane")),
            Ok(json!("CROSSPLANE"))
        );
        // Go maps rune by rune: ß has no single-rune upper case.
        assert_eq!(run(c("ToUpper"), json!("straße")), Ok(json!("STRAßE")));
        assert_eq!(
            run(c("ToLower"), json!("CrossPlane İ")),
            Ok(json!("crossplane i"))
        );
        assert_eq!(run(c("ToUpper"), json!(1.5)), Ok(json!("1.5")));
        assert_eq!(
            run(c("ToBase64"), json!("CrossPlane")),
            Ok(json!("Q3Jvc3NQbGFuZQ=="))
        );
        assert_eq!(
            run(c("FromBase64"), json!("Q3Jvc3NQbGFuZQ==")),
            Ok(json!("CrossPlane"))
        );
        assert_eq!(
            run(c("FromBase64"), json!("Q3Jv\nc3NQbGFuZQ==\r\n")),
            Ok(json!("CrossPlane"))
        );
        // StdEncoding ignores the unused bits of the last symbol.
        assert_eq!(run(c("FromBase64"), json!("YR==")), Ok(json!("a")));
        assert_eq!(run(c("FromBase64"), json!("/w==")), Ok(json!("\u{FFFD}")));
        let b64 = |s: &str| err(c("FromBase64"), json!(s));
        assert_eq!(
            b64("Q3Jvc3NQbGFuZQ"),
            "string transform could not resolve: string is not valid base64: illegal base64 data at input byte 12"
        );
        assert_eq!(
            b64("Q3Jv!3NQ"),
            "string transform could not resolve: string is not valid base64: illegal base64 data at input byte 4"
        );
        assert_eq!(
            b64("YQ=a"),
            "string transform could not resolve: string is not valid base64: illegal base64 data at input byte 2"
        );
        assert_eq!(
            b64("YQ="),
            "string transform could not resolve: string is not valid base64: illegal base64 data at input byte 3"
        );
        assert_eq!(
            b64("YQ==YQ=="),
            "string transform could not resolve: string is not valid base64: illegal base64 data at input byte 4"
        );
        assert_eq!(
            b64("Y==="),
            "string transform could not resolve: string is not valid base64: illegal base64 data at input byte 1"
        );
        assert_eq!(
            run(c("ToJson"), json!({"foo": "bar", "a": [1, 1.5, "<"]})),
            Ok(json!(r#"{"a":[1,1.5,"\u003c"],"foo":"bar"}"#))
        );
        assert_eq!(run(c("ToJson"), json!("s")), Ok(json!("\"s\"")));
        assert_eq!(
            run(c("ToSha1"), json!("Crossplane")),
            Ok(json!("3b683dc8ff44122b331a5e4f253dd69d90726d75"))
        );
        assert_eq!(
            run(c("ToSha256"), json!("Crossplane")),
            Ok(json!(
                "19c8a7c24ed0067f606815b59e5b82d92935ff69deed04171457a55018e31224"
            ))
        );
        let sha512_1234 = "d404559f602eab6fd602ac7680dacbfaadd13630335e951f097af3900e9de176b6db28512f2e000b9d04fba5133e8b1c6e8df59db3a8ab9d60be4b97cc9e81db";
        assert_eq!(run(c("ToSha512"), json!(1234)), Ok(json!(sha512_1234)));
        assert_eq!(run(c("ToSha512"), json!("1234")), Ok(json!(sha512_1234)));
        // Non-strings hash their JSON.
        assert_eq!(
            run(c("ToSha256"), json!({"a": 1})),
            Ok(json!(
                "015abd7f5cc57a2dd94b7590f04ad8084273905ee33ec5cebeae62276a97f862"
            ))
        );
        assert_eq!(
            run(c("ToAdler32"), json!("Crossplane")),
            Ok(json!("373097499"))
        );
        assert_eq!(
            run(c("ToAdler32"), json!("⡌⠁⠧⠑ ⠼⠁⠒  ⡍⠜⠇⠑⠹⠰⠎ ⡣⠕⠌")),
            Ok(json!("4110427190"))
        );
        assert_eq!(
            err(c("Something"), json!("v")),
            "string transform could not resolve: type Something is not supported for string convert"
        );
        assert_eq!(
            err(string(json!({"type": "Convert"})), json!("v")),
            "string transform could not resolve: string transform of type Convert convert is not set"
        );
    }

    #[test]
    fn string_regexp_and_join() {
        let re = |m: Value| string(json!({"type": "Regexp", "regexp": m}));
        assert_eq!(
            run(re(json!({"match": "[0-9]"})), json!("my-1-string")),
            Ok(json!("1"))
        );
        assert_eq!(
            run(
                re(json!({"match": "my-([0-9]+)-string", "group": 1})),
                json!("my-1-string")
            ),
            Ok(json!("1"))
        );
        assert_eq!(
            run(
                re(json!({"match": r"^arn:aws:iam::(\d+):", "group": 1})),
                json!("arn:aws:iam::123456789012:role/x")
            ),
            Ok(json!("123456789012"))
        );
        // A group that takes no part in the match is empty.
        assert_eq!(
            run(re(json!({"match": "a(x)?", "group": 1})), json!("a")),
            Ok(json!(""))
        );
        assert_eq!(
            run(re(json!({"match": r"\d+"})), json!(1234.5)),
            Ok(json!("1234"))
        );
        assert_eq!(
            err(
                re(json!({"match": "my-([0-9]+)-string", "group": 2})),
                json!("my-1-string")
            ),
            r#"string transform could not resolve: regexp "my-([0-9]+)-string" had no matches for group 2"#
        );
        assert_eq!(
            err(re(json!({"match": r"^x(\d)"})), json!("y")),
            r#"string transform could not resolve: regexp "^x(\\d)" had no matches for group 0"#
        );
        assert_eq!(
            err(re(json!({"match": "[a-z"})), json!("x")),
            "string transform could not resolve: could not compile regexp: error parsing regexp: missing closing ]: `[a-z`"
        );
        assert_eq!(
            err(string(json!({"type": "Regexp"})), json!("v")),
            "string transform could not resolve: string transform of type Regexp regexp is not set"
        );
        let join = |sep: &str| string(json!({"type": "Join", "join": {"separator": sep}}));
        assert_eq!(run(join(","), json!(["a", "b", "c"])), Ok(json!("a,b,c")));
        assert_eq!(run(join(","), json!([0.0, 1.0, 1.5])), Ok(json!("0,1,1.5")));
        assert_eq!(
            run(join(", "), json!([1, true, null, {"k": "v"}, ["x"]])),
            Ok(json!("1, true, <nil>, map[k:v], [x]"))
        );
        assert_eq!(run(join("-"), json!([])), Ok(json!("")));
        assert_eq!(
            err(join(","), json!("wrong-type")),
            "string transform could not resolve: cannot join non-array values"
        );
        assert_eq!(
            err(string(json!({"type": "Join"})), json!(["a"])),
            "string transform could not resolve: string transform of type Join join is not set"
        );
    }

    /// Applies one transform as function-patch-and-transform's runtime does.
    fn run_pt(transform: Value, input: Value) -> Result<Value, String> {
        let mut t = t(transform);
        t.runtime = Runtime::PatchAndTransform;
        apply(&t, input).map_err(|e| e.to_string())
    }

    /// P&T v0.10.8's `transforms.go` (`stringJoinTransform`, `stringReplaceTransform`) and
    /// its `transforms_test.go` cases ("ReplaceFound": Crossplane to Bossplane).
    #[test]
    fn patch_and_transform_join_and_replace() {
        let join = |sep: &str| string(json!({"type": "Join", "join": {"separator": sep}}));
        // transforms_test.go: ["cross", "plane", 42] joined with "-".
        assert_eq!(
            run_pt(join("-"), json!(["cross", "plane", 42])),
            Ok(json!("cross-plane-42"))
        );
        // Only the last byte of the trailing separator is cut: Go's `result[:len(result)-1]`.
        assert_eq!(run_pt(join(", "), json!(["a", "b"])), Ok(json!("a, b,")));
        // Core joins properly.
        assert_eq!(run(join(", "), json!(["a", "b"])), Ok(json!("a, b")));
        // A multi-byte separator loses half a rune, which JSON writes as U+FFFD.
        assert_eq!(
            run_pt(join("é"), json!(["a", "b"])),
            Ok(json!("aéb\u{fffd}"))
        );
        assert_eq!(run_pt(join(""), json!(["a", 1])), Ok(json!("a1")));
        assert_eq!(run_pt(join("-"), json!([])), Ok(json!("")));
        assert_eq!(
            run_pt(join(","), json!("x")),
            Err("string transform could not resolve: could not parse input array".to_string())
        );
        let replace = |search: &str, with: &str| {
            string(json!({"type": "Replace", "replace": {"search": search, "replace": with}}))
        };
        assert_eq!(
            run_pt(replace("Cr", "B"), json!("Crossplane")),
            Ok(json!("Bossplane"))
        );
        assert_eq!(
            run_pt(replace("xx", "B"), json!("Crossplane")),
            Ok(json!("Crossplane"))
        );
        // %v of the input, every occurrence.
        assert_eq!(run_pt(replace("1", "one"), json!(11)), Ok(json!("oneone")));
        // strings.ReplaceAll with an empty search (validate.go rejects it first).
        assert_eq!(run_pt(replace("", "-"), json!("ab")), Ok(json!("-a-b-")));
        assert_eq!(
            run_pt(string(json!({"type": "Replace"})), json!("a")),
            Err(
                "string transform could not resolve: string transform of type Replace replace is not set"
                    .to_string()
            )
        );
        // Core v1.17 has no Replace.
        assert_eq!(
            err(replace("a", "b"), json!("a")),
            "string transform could not resolve: type Replace is not supported for string transform type"
        );
        // No default type in P&T.
        assert_eq!(
            run_pt(string(json!({"fmt": "%s"})), json!("a")),
            Err(
                "string transform could not resolve: type  is not supported for string transform type"
                    .to_string()
            )
        );
    }

    #[test]
    fn conversions_follow_upstreams_table() {
        assert_eq!(run(conv("bool", None), json!("true")), Ok(json!(true)));
        assert_eq!(run(conv("float64", None), json!("1000")), Ok(json!(1000.0)));
        assert_eq!(
            run(conv("float64", Some("quantity")), json!("1000m")),
            Ok(json!(1.0))
        );
        assert_eq!(
            run(conv("float64", Some("quantity")), json!("1.5Gi")),
            Ok(json!(1_610_612_736.0))
        );
        assert_eq!(run(conv("int64", None), json!("-42")), Ok(json!(-42)));
        assert_eq!(run(conv("int", None), json!(1)), Ok(json!(1)));
        assert_eq!(run(conv("bool", None), json!(true)), Ok(json!(true)));
        assert_eq!(
            run(conv("string", Some("quantity")), json!("x")),
            Ok(json!("x"))
        );
        assert_eq!(run(conv("string", None), json!(5)), Ok(json!("5")));
        assert_eq!(run(conv("bool", None), json!(1)), Ok(json!(true)));
        assert_eq!(run(conv("bool", None), json!(2)), Ok(json!(false)));
        assert!(run(conv("float64", None), json!(5)).is_ok_and(|v| v.is_f64() && v == json!(5.0)));
        assert_eq!(run(conv("string", None), json!(true)), Ok(json!("true")));
        assert_eq!(run(conv("int64", None), json!(true)), Ok(json!(1)));
        assert_eq!(run(conv("float64", None), json!(false)), Ok(json!(0.0)));
        assert_eq!(run(conv("string", None), json!(1.5)), Ok(json!("1.5")));
        assert_eq!(
            run(conv("string", None), json!(1e21)),
            Ok(json!("1000000000000000000000"))
        );
        assert_eq!(
            run(conv("string", None), json!(1e-7)),
            Ok(json!("0.0000001"))
        );
        assert_eq!(run(conv("int64", None), json!(1.1)), Ok(json!(1)));
        assert_eq!(run(conv("int64", None), json!(-2.9)), Ok(json!(-2)));
        assert_eq!(run(conv("bool", None), json!(1.0)), Ok(json!(true)));
        assert_eq!(
            run(
                conv("object", Some("json")),
                json!(r#"{"foo":"bar","n":1}"#)
            ),
            Ok(json!({"foo": "bar", "n": 1.0}))
        );
        assert_eq!(
            run(
                conv("array", Some("json")),
                json!(r#"["foo", "bar", "baz"]"#)
            ),
            Ok(json!(["foo", "bar", "baz"]))
        );
        assert_eq!(
            run(conv("object", Some("json")), json!("null")),
            Ok(json!(null))
        );
    }

    #[test]
    fn conversion_errors_are_upstreams() {
        assert_eq!(
            err(conv("string", None), json!([64])),
            "convert transform could not resolve: invalid input type []interface {}"
        );
        assert_eq!(
            err(conv("string", None), json!({"a": 1})),
            "convert transform could not resolve: invalid input type map[string]interface {}"
        );
        assert_eq!(
            err(conv("string", None), json!(null)),
            "convert transform could not resolve: invalid input type <nil>"
        );
        assert_eq!(
            err(conv("string", Some("quantity")), json!(100)),
            "convert transform could not resolve: conversion from int64 to string is not supported with format quantity"
        );
        assert_eq!(
            err(conv("object", None), json!("{}")),
            "convert transform could not resolve: conversion from string to object is not supported with format none"
        );
        assert_eq!(
            err(conv("int", Some("quantity")), json!("1k")),
            "convert transform could not resolve: conversion from string to int64 is not supported with format quantity"
        );
        assert_eq!(
            err(conv("[]int", None), json!("[64]")),
            r#"convert transform could not resolve: toType: Invalid value: "[]int": invalid type"#
        );
        assert_eq!(
            err(conv("int", Some("wrong")), json!("1")),
            r#"convert transform could not resolve: format: Invalid value: "wrong": invalid format"#
        );
        assert_eq!(
            err(conv("int64", None), json!("4x")),
            r#"convert transform could not resolve: strconv.ParseInt: parsing "4x": invalid syntax"#
        );
        assert_eq!(
            err(conv("bool", None), json!("yes")),
            r#"convert transform could not resolve: strconv.ParseBool: parsing "yes": invalid syntax"#
        );
        assert_eq!(
            err(conv("float64", None), json!("1e400")),
            r#"convert transform could not resolve: strconv.ParseFloat: parsing "1e400": value out of range"#
        );
        assert_eq!(
            err(conv("float64", None), json!("-inf")),
            "convert transform could not resolve: json: unsupported value: -Inf"
        );
        assert_eq!(
            err(conv("float64", Some("quantity")), json!("1000 blabla")),
            "convert transform could not resolve: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        );
        assert_eq!(
            err(conv("float64", Some("quantity")), json!("1Gb")),
            "convert transform could not resolve: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        );
        assert_eq!(
            err(conv("float64", Some("quantity")), json!("1mi")),
            "convert transform could not resolve: unable to parse quantity's suffix"
        );
        assert_eq!(
            err(conv("object", Some("json")), json!("[1]")),
            "convert transform could not resolve: json: cannot unmarshal array into Go value of type map[string]interface {}"
        );
        assert_eq!(
            err(conv("array", Some("json")), json!("[1,")),
            "convert transform could not resolve: unexpected end of JSON input"
        );
    }

    #[test]
    fn apply_all_chains_and_reports_the_index() {
        let transforms: Vec<Transform> = [
            json!({"type": "map", "map": {"small": "1", "large": "x"}}),
            json!({"type": "convert", "convert": {"toType": "int64"}}),
            json!({"type": "math", "math": {"multiply": 1024}}),
            json!({"type": "string", "string": {"fmt": "%dMi"}}),
        ]
        .into_iter()
        .map(t)
        .collect();
        assert_eq!(apply_all(&transforms, json!("small")), Ok(json!("1024Mi")));
        assert_eq!(apply_all(&[], json!("same")), Ok(json!("same")));
        let e = apply_all(&transforms, json!("large"));
        assert_eq!(
            e.as_ref().map_err(ToString::to_string),
            Err(r#"transform at index 1 returned error: convert transform could not resolve: strconv.ParseInt: parsing "x": invalid syntax"#.to_string())
        );
        assert_eq!(e.as_ref().err().and_then(TransformError::index), Some(1));
        assert!(matches!(
            e.as_ref().err().map(TransformError::inner),
            Some(TransformError::Resolve { kind, reason: Reason::Parse(_) }) if kind == "convert"
        ));
        let e = apply_all(&transforms, json!(5)).map_err(|e| e.to_string());
        assert_eq!(
            e,
            Err("transform at index 0 returned error: map transform could not resolve: type int64 is not supported for map transform".to_string())
        );
    }
}
