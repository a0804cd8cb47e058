//! `google.protobuf.Struct` and `Value` to JSON and back, bounded: what composition
//! functions send and answer for every Kubernetes object.
//!
//! A function's answer is hostile input. Its size on the wire is bounded by the client's
//! message limit, but a few bytes of protobuf decode into a much larger tree (an empty
//! `Value` is two bytes on the wire and dozens in memory), so the conversion counts what it
//! builds against [`Limits`]: the nesting depth, the number of values and the bytes of keys
//! and strings. Over a limit it stops with a [`StructError`], never a partial value.
//!
//! Numbers: `Struct` has only doubles. JSON integers go out as doubles, as Go's `structpb`
//! sends them (integers beyond ±2^53 lose precision there too). On the way back every
//! number is a double; [`restore_integers`] turns the integral ones back into integers,
//! which is what happens to them in Crossplane: it takes a desired resource as structpb's
//! `AsMap` (every number a float64; `FromStruct` in
//! `internal/controller/apiextensions/composite/composition_functions.go`) and applies it
//! as JSON, where Go's `encoding/json` prints an integral float64 without a fraction (`3`,
//! not `3.0`), which the API server decodes as an int64. So a resource validates here as
//! the API server sees it from Crossplane, and an `integer` field holding `3.0` is not
//! refused for being a double. NaN and infinities are refused: `encoding/json` refuses to
//! write them, so Crossplane's apply would fail (and JSON has no spelling for them). A
//! `Value` with no kind set is `null`, as `AsMap` makes it.

use prost_types::value::Kind;
use prost_types::{ListValue, Struct, Value as PbValue};
use serde_json::{Map, Number, Value};

/// How much one conversion may build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Nesting of objects and arrays: a scalar is depth 0, `{}` depth 1, `{"a": []}` depth 2.
    pub max_depth: usize,
    /// Values (objects, arrays and scalars, each counted once).
    pub max_values: usize,
    /// Bytes of object keys and strings.
    pub max_bytes: usize,
}

impl Limits {
    /// 64 levels (Kubernetes objects of the test corpus nest fewer than 20; prost's own
    /// decoding stops near 32 levels of `Struct`, as each level is three nested messages
    /// against its recursion limit of 100), a quarter of a million values and 4 MiB of
    /// text: as much text as the largest message the client accepts.
    pub const DEFAULT: Limits = Limits {
        max_depth: 64,
        max_values: 256 * 1024,
        max_bytes: 4 * 1024 * 1024,
    };
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}

/// Why a value was refused. `at` is where, as a JSON path (`spec.items[2]`; empty at the
/// top).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StructError {
    /// Nested deeper than [`Limits::max_depth`].
    #[error("{}nested deeper than {max} levels", at_prefix(at))]
    TooDeep {
        /// The limit.
        max: usize,
        /// Where the limit was passed.
        at: String,
    },
    /// More values than [`Limits::max_values`].
    #[error("{}more than {max} values", at_prefix(at))]
    TooManyValues {
        /// The limit.
        max: usize,
        /// Where the limit was passed.
        at: String,
    },
    /// More bytes of keys and strings than [`Limits::max_bytes`].
    #[error("{}more than {max} bytes of keys and strings", at_prefix(at))]
    TooManyBytes {
        /// The limit.
        max: usize,
        /// Where the limit was passed.
        at: String,
    },
    /// A NaN or infinite number, which JSON cannot hold.
    #[error("{}number {number} is not finite", at_prefix(at))]
    NotFinite {
        /// The number as Rust prints it (`NaN`, `inf`, `-inf`).
        number: String,
        /// Where.
        at: String,
    },
}

fn at_prefix(at: &str) -> String {
    if at.is_empty() {
        String::new()
    } else {
        format!("{at}: ")
    }
}

impl StructError {
    fn at_mut(&mut self) -> &mut String {
        match self {
            StructError::TooDeep { at, .. }
            | StructError::TooManyValues { at, .. }
            | StructError::TooManyBytes { at, .. }
            | StructError::NotFinite { at, .. } => at,
        }
    }

    /// The error one level up: `segment` is prepended to its path. Paths are built only
    /// while an error unwinds, so a successful conversion builds none.
    fn within(mut self, segment: Segment<'_>) -> Self {
        let at = self.at_mut();
        let mut prefixed = match segment {
            Segment::Key(key) => key.to_string(),
            Segment::Index(i) => format!("[{i}]"),
        };
        if !at.is_empty() && !at.starts_with('[') {
            prefixed.push('.');
        }
        prefixed.push_str(at);
        *at = prefixed;
        self
    }
}

enum Segment<'a> {
    Key(&'a str),
    Index(usize),
}

/// What conversions have built so far, against their [`Limits`]: one allowance for several
/// values (all the resources of one answer) bounds them together.
#[derive(Debug, Clone)]
pub struct Allowance {
    limits: Limits,
    values: usize,
    bytes: usize,
}

impl Allowance {
    /// An allowance with nothing spent.
    pub fn new(limits: Limits) -> Self {
        Allowance {
            limits,
            values: 0,
            bytes: 0,
        }
    }

    /// A JSON object as a `Struct`, as Go's `structpb.NewStruct` builds it.
    pub fn encode_object(&mut self, object: &Map<String, Value>) -> Result<Struct, StructError> {
        self.count(1, 0)?;
        object_to_struct(object, 1, self)
    }

    /// A JSON value as a `Value`, as Go's `structpb.NewValue` builds it.
    pub fn encode_value(&mut self, value: &Value) -> Result<PbValue, StructError> {
        json_to_pb(value, 0, self)
    }

    /// A `Struct` as a JSON object, every number a double ([`restore_integers`] restores
    /// integers).
    pub fn decode_struct(&mut self, object: &Struct) -> Result<Map<String, Value>, StructError> {
        self.count(1, 0)?;
        struct_to_object(object, 1, self)
    }

    /// A `Value` as JSON, every number a double ([`restore_integers`] restores integers).
    pub fn decode_value(&mut self, value: &PbValue) -> Result<Value, StructError> {
        pb_to_json(value, 0, self)
    }

    /// Counts one value at `depth` holding `text` bytes of key or string.
    fn count(&mut self, depth: usize, text: usize) -> Result<(), StructError> {
        if depth > self.limits.max_depth {
            return Err(StructError::TooDeep {
                max: self.limits.max_depth,
                at: String::new(),
            });
        }
        self.values += 1;
        if self.values > self.limits.max_values {
            return Err(StructError::TooManyValues {
                max: self.limits.max_values,
                at: String::new(),
            });
        }
        self.bytes = self.bytes.saturating_add(text);
        if self.bytes > self.limits.max_bytes {
            return Err(StructError::TooManyBytes {
                max: self.limits.max_bytes,
                at: String::new(),
            });
        }
        Ok(())
    }
}

/// A JSON object as a `Struct`, within `limits` ([`Allowance::encode_object`]).
pub fn to_struct(object: &Map<String, Value>, limits: Limits) -> Result<Struct, StructError> {
    Allowance::new(limits).encode_object(object)
}

/// A JSON value as a `Value`, within `limits` ([`Allowance::encode_value`]).
pub fn to_value(value: &Value, limits: Limits) -> Result<PbValue, StructError> {
    Allowance::new(limits).encode_value(value)
}

/// A `Struct` as a JSON object, within `limits` ([`Allowance::decode_struct`]).
pub fn from_struct(object: &Struct, limits: Limits) -> Result<Map<String, Value>, StructError> {
    Allowance::new(limits).decode_struct(object)
}

/// A `Value` as JSON, within `limits` ([`Allowance::decode_value`]).
pub fn from_value(value: &PbValue, limits: Limits) -> Result<Value, StructError> {
    Allowance::new(limits).decode_value(value)
}

/// `depth` is the depth of the value being converted; objects and arrays hold theirs at
/// `depth + 1`, counted before they are built.
fn json_to_pb(
    value: &Value,
    depth: usize,
    counter: &mut Allowance,
) -> Result<PbValue, StructError> {
    let kind = match value {
        Value::Null => {
            counter.count(depth, 0)?;
            Kind::NullValue(0)
        }
        Value::Bool(b) => {
            counter.count(depth, 0)?;
            Kind::BoolValue(*b)
        }
        Value::Number(n) => {
            counter.count(depth, 0)?;
            // Every serde_json number has an f64 (rounded beyond 2^53, as Go's float64()).
            Kind::NumberValue(n.as_f64().unwrap_or(0.0))
        }
        Value::String(s) => {
            counter.count(depth, s.len())?;
            Kind::StringValue(s.clone())
        }
        Value::Array(items) => {
            counter.count(depth + 1, 0)?;
            let mut values = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                values.push(
                    json_to_pb(item, depth + 1, counter)
                        .map_err(|e| e.within(Segment::Index(i)))?,
                );
            }
            Kind::ListValue(ListValue { values })
        }
        Value::Object(object) => {
            counter.count(depth + 1, 0)?;
            Kind::StructValue(object_to_struct(object, depth + 1, counter)?)
        }
    };
    Ok(PbValue { kind: Some(kind) })
}

fn object_to_struct(
    object: &Map<String, Value>,
    depth: usize,
    counter: &mut Allowance,
) -> Result<Struct, StructError> {
    let mut fields = std::collections::BTreeMap::new();
    for (key, value) in object {
        counter.bytes = counter.bytes.saturating_add(key.len());
        let converted =
            json_to_pb(value, depth, counter).map_err(|e| e.within(Segment::Key(key)))?;
        fields.insert(key.clone(), converted);
    }
    Ok(Struct { fields })
}

fn pb_to_json(
    value: &PbValue,
    depth: usize,
    counter: &mut Allowance,
) -> Result<Value, StructError> {
    match &value.kind {
        // structpb's AsInterface: no kind is nil.
        None | Some(Kind::NullValue(_)) => {
            counter.count(depth, 0)?;
            Ok(Value::Null)
        }
        Some(Kind::BoolValue(b)) => {
            counter.count(depth, 0)?;
            Ok(Value::Bool(*b))
        }
        Some(Kind::NumberValue(n)) => {
            counter.count(depth, 0)?;
            Number::from_f64(*n)
                .map(Value::Number)
                .ok_or_else(|| StructError::NotFinite {
                    number: n.to_string(),
                    at: String::new(),
                })
        }
        Some(Kind::StringValue(s)) => {
            counter.count(depth, s.len())?;
            Ok(Value::String(s.clone()))
        }
        Some(Kind::ListValue(list)) => {
            counter.count(depth + 1, 0)?;
            let mut items = Vec::with_capacity(list.values.len().min(counter.limits.max_values));
            for (i, item) in list.values.iter().enumerate() {
                items.push(
                    pb_to_json(item, depth + 1, counter)
                        .map_err(|e| e.within(Segment::Index(i)))?,
                );
            }
            Ok(Value::Array(items))
        }
        Some(Kind::StructValue(object)) => {
            counter.count(depth + 1, 0)?;
            Ok(Value::Object(struct_to_object(object, depth + 1, counter)?))
        }
    }
}

fn struct_to_object(
    object: &Struct,
    depth: usize,
    counter: &mut Allowance,
) -> Result<Map<String, Value>, StructError> {
    let mut map = Map::new();
    for (key, value) in &object.fields {
        counter.bytes = counter.bytes.saturating_add(key.len());
        let converted =
            pb_to_json(value, depth, counter).map_err(|e| e.within(Segment::Key(key)))?;
        map.insert(key.clone(), converted);
    }
    Ok(map)
}

/// 2^63: the doubles in `[-2^63, 2^63)` are the integral ones an int64 holds.
const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;

/// Every integral double in `value` that an int64 holds becomes an integer, in place:
/// what the API server reads from Crossplane's JSON of a function's answer (see the
/// module's comment). `3.0` becomes `3`; `3.5`, `1e300` stay doubles.
/// Applied to every number, not only where a schema says `integer`, because the API server
/// reads every such number as an integer: a `number` field holding `3` is valid either way,
/// and a `string` field holding it is refused as the API server refuses it ("must be of
/// type string", found `integer`, not `number`).
pub fn restore_integers(value: &mut Value) {
    // An explicit stack: the value may be as deep as the limits allow.
    let mut todo = vec![value];
    while let Some(value) = todo.pop() {
        match value {
            Value::Number(n) => {
                if let Some(f) = n.as_f64().filter(|_| n.is_f64())
                    && f.fract() == 0.0
                    && (-TWO_POW_63..TWO_POW_63).contains(&f)
                {
                    // In range and integral: the cast is exact.
                    *n = Number::from(f as i64);
                }
            }
            Value::Array(items) => todo.extend(items.iter_mut()),
            Value::Object(object) => todo.extend(object.values_mut()),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn round_trip(value: &Value) -> Value {
        let pb = to_value(value, Limits::DEFAULT).expect("to protobuf");
        from_value(&pb, Limits::DEFAULT).expect("from protobuf")
    }

    #[test]
    fn objects_round_trip() {
        let value = json!({
            "apiVersion": "example.org/v1",
            "kind": "Bucket",
            "metadata": {"name": "b", "labels": {"a.b/c": "d"}},
            "spec": {"tags": ["x", "y"], "public": false, "note": null, "empty": {}, "none": []},
        });
        assert_eq!(round_trip(&value), value);
        let object = value.as_object().expect("an object");
        let pb = to_struct(object, Limits::DEFAULT).expect("a struct");
        assert_eq!(&from_struct(&pb, Limits::DEFAULT).expect("back"), object);
    }

    #[test]
    fn integers_go_out_as_doubles_and_come_back_where_integral() {
        let value = json!({"replicas": 3, "ratio": 0.5, "big": 9007199254740993_u64, "neg": -7});
        let pb = to_value(&value, Limits::DEFAULT).expect("to protobuf");
        let Some(Kind::StructValue(s)) = &pb.kind else {
            panic!("a struct: {pb:?}")
        };
        assert_eq!(s.fields["replicas"].kind, Some(Kind::NumberValue(3.0)));
        // Beyond 2^53 the double rounds, as Go's float64(int64) does.
        assert_eq!(
            s.fields["big"].kind,
            Some(Kind::NumberValue(9007199254740992.0))
        );

        let mut back = from_value(&pb, Limits::DEFAULT).expect("back");
        assert!(back["replicas"].is_f64(), "a double before restoring");
        restore_integers(&mut back);
        assert_eq!(
            back,
            json!({"replicas": 3, "ratio": 0.5, "big": 9007199254740992_i64, "neg": -7})
        );
        assert!(back["replicas"].is_i64() && back["ratio"].is_f64());
    }

    #[test]
    fn restoring_leaves_what_an_int64_cannot_hold() {
        let mut value = json!([1.0, -0.0, 1.5, 1e300, -TWO_POW_63, TWO_POW_63]);
        restore_integers(&mut value);
        assert_eq!(value[0], json!(1));
        assert!(value[1].is_i64(), "-0.0 is integral: {}", value[1]);
        assert!(value[2].is_f64() && value[3].is_f64());
        assert_eq!(value[4], json!(i64::MIN));
        assert!(value[5].is_f64(), "2^63 is past i64::MAX");
    }

    #[test]
    fn nan_and_infinities_are_refused() {
        for (n, printed) in [
            (f64::NAN, "NaN"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
        ] {
            let mut fields = std::collections::BTreeMap::new();
            let list = PbValue {
                kind: Some(Kind::ListValue(ListValue {
                    values: vec![
                        PbValue {
                            kind: Some(Kind::NumberValue(1.0)),
                        },
                        PbValue {
                            kind: Some(Kind::NumberValue(n)),
                        },
                    ],
                })),
            };
            fields.insert(
                "spec".to_string(),
                PbValue {
                    kind: Some(Kind::StructValue(Struct {
                        fields: [("size".to_string(), list)].into(),
                    })),
                },
            );
            let error = from_struct(&Struct { fields }, Limits::DEFAULT).expect_err("refused");
            assert_eq!(
                error,
                StructError::NotFinite {
                    number: printed.to_string(),
                    at: "spec.size[1]".to_string()
                }
            );
            assert_eq!(
                error.to_string(),
                format!("spec.size[1]: number {printed} is not finite")
            );
        }
    }

    #[test]
    fn a_value_without_kind_is_null() {
        let s = Struct {
            fields: [("a".to_string(), PbValue { kind: None })].into(),
        };
        assert_eq!(
            Value::Object(from_struct(&s, Limits::DEFAULT).expect("an object")),
            json!({"a": null})
        );
    }

    /// `{"a": {"a": ... {}}}`, `levels` objects deep, as protobuf.
    fn nested(levels: usize) -> PbValue {
        let mut value = PbValue {
            kind: Some(Kind::StructValue(Struct::default())),
        };
        for _ in 1..levels {
            value = PbValue {
                kind: Some(Kind::StructValue(Struct {
                    fields: [("a".to_string(), value)].into(),
                })),
            };
        }
        value
    }

    #[test]
    fn depth_is_bounded() {
        let limits = Limits {
            max_depth: 5,
            ..Limits::DEFAULT
        };
        assert!(from_value(&nested(5), limits).is_ok());
        assert_eq!(
            from_value(&nested(6), limits),
            Err(StructError::TooDeep {
                max: 5,
                at: "a.a.a.a.a".into()
            })
        );
        // Arrays count as objects do, and the way out is bounded alike.
        let deep = json!([[[[[[1]]]]]]);
        assert_eq!(
            to_value(&deep, limits),
            Err(StructError::TooDeep {
                max: 5,
                at: "[0][0][0][0][0]".into()
            })
        );
        assert!(to_value(&json!([[[[[1]]]]]), limits).is_ok());
        // A hostile depth far past the limit stops at the limit, without exhausting the stack.
        assert!(matches!(
            from_value(&nested(1_000), Limits::DEFAULT),
            Err(StructError::TooDeep { max: 64, .. })
        ));
    }

    #[test]
    fn values_and_bytes_are_bounded() {
        let limits = Limits {
            max_values: 4,
            ..Limits::DEFAULT
        };
        // The array and three numbers: four values.
        assert!(to_value(&json!([1, 2, 3]), limits).is_ok());
        assert_eq!(
            to_value(&json!([1, 2, 3, 4]), limits),
            Err(StructError::TooManyValues {
                max: 4,
                at: "[3]".into()
            })
        );
        let limits = Limits {
            max_bytes: 6,
            ..Limits::DEFAULT
        };
        // Keys count with strings: "ab" + "cdef" is six bytes.
        assert!(to_value(&json!({"ab": "cdef"}), limits).is_ok());
        assert_eq!(
            to_value(&json!({"ab": "cdefg"}), limits),
            Err(StructError::TooManyBytes {
                max: 6,
                at: "ab".into()
            })
        );
        let many = PbValue {
            kind: Some(Kind::ListValue(ListValue {
                values: vec![
                    PbValue {
                        kind: Some(Kind::BoolValue(true))
                    };
                    10
                ],
            })),
        };
        assert!(matches!(
            from_value(
                &many,
                Limits {
                    max_values: 9,
                    ..Limits::DEFAULT
                }
            ),
            Err(StructError::TooManyValues { max: 9, .. })
        ));
    }
}
