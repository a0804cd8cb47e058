//! The Go values Kubernetes decodes JSON into, and Go's conversions between them.
//!
//! Kubernetes (`k8s.io/apimachinery`'s unstructured JSON) decodes a whole number that fits
//! into an `int64`, any other number into a `float64`, and the rest into `string`, `bool`,
//! `[]interface {}`, `map[string]interface {}` and nil. A [`serde_json::Value`] is read the
//! same way: a number serde holds as an `i64` is an `int64`; any other number (written with
//! a fraction or an exponent, or above `i64::MAX`) is a `float64`.

use serde_json::{Map, Value};

/// A JSON value seen as the Go value Kubernetes decodes it into.
#[derive(Debug, Clone, Copy)]
pub enum GoValue<'a> {
    /// `nil`.
    Nil,
    /// `bool`.
    Bool(bool),
    /// `int64`: a number serde holds as an `i64`.
    Int(i64),
    /// `float64`: any other number.
    Float(f64),
    /// `string`.
    Str(&'a str),
    /// `[]interface {}`.
    Slice(&'a [Value]),
    /// `map[string]interface {}`.
    Map(&'a Map<String, Value>),
}

impl<'a> GoValue<'a> {
    /// The Go value of a JSON value.
    pub fn of(v: &'a Value) -> Self {
        match v {
            Value::Null => Self::Nil,
            Value::Bool(b) => Self::Bool(*b),
            // Kubernetes keeps a number as int64 only when it parses as one; a u64 above
            // i64::MAX becomes a float64, as does anything with a fraction or an exponent.
            Value::Number(n) => match n.as_i64() {
                Some(i) => Self::Int(i),
                None => Self::Float(n.as_f64().unwrap_or_default()),
            },
            Value::String(s) => Self::Str(s),
            Value::Array(a) => Self::Slice(a),
            Value::Object(m) => Self::Map(m),
        }
    }

    /// The type as Go's `%T` prints it.
    pub fn type_name(self) -> &'static str {
        match self {
            Self::Nil => "<nil>",
            Self::Bool(_) => "bool",
            Self::Int(_) => "int64",
            Self::Float(_) => "float64",
            Self::Str(_) => "string",
            Self::Slice(_) => "[]interface {}",
            Self::Map(_) => "map[string]interface {}",
        }
    }
}

/// The Go type of a value decoded from Kubernetes JSON, as `%T` prints it: `<nil>`, `bool`,
/// `int64`, `float64`, `string`, `[]interface {}` or `map[string]interface {}`.
pub fn type_name(v: &Value) -> &'static str {
    GoValue::of(v).type_name()
}

/// Go's conversion `int64(f)` as amd64 computes it: truncation toward zero, and the most
/// negative `int64` for NaN and values out of range (the Go specification leaves them to the
/// implementation; `CVTTSD2SQ` gives that).
pub fn float_to_int64(f: f64) -> i64 {
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if (-LIMIT..LIMIT).contains(&f) {
        f as i64
    } else {
        i64::MIN
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_values_are_gos() {
        let table = [
            (json!(null), "<nil>"),
            (json!(true), "bool"),
            (json!(1), "int64"),
            (json!(-9223372036854775808i64), "int64"),
            (json!(9223372036854775807u64), "int64"),
            (json!(9223372036854775808u64), "float64"),
            (json!(1.0), "float64"),
            (json!(1.5), "float64"),
            (json!("s"), "string"),
            (json!([1]), "[]interface {}"),
            (json!({"a": 1}), "map[string]interface {}"),
        ];
        for (value, want) in table {
            assert_eq!(type_name(&value), want, "{value}");
        }
    }

    /// `int64(f)` on amd64: the Go specification's truncation, and `0x8000000000000000`
    /// where it is implementation-defined.
    #[test]
    fn float_to_int64_is_amd64s() {
        let table = [
            (1.1, 1),
            (1.9, 1),
            (-2.9, -2),
            (-0.0, 0),
            (9.2e18, 9_200_000_000_000_000_000),
            (-9_223_372_036_854_775_808.0, i64::MIN),
            (9_223_372_036_854_775_808.0, i64::MIN),
            (1e300, i64::MIN),
            (-1e300, i64::MIN),
            (f64::INFINITY, i64::MIN),
            (f64::NAN, i64::MIN),
        ];
        for (f, want) in table {
            assert_eq!(float_to_int64(f), want, "int64({f:e})");
        }
    }
}
