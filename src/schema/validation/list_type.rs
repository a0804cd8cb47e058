//! `x-kubernetes-list-type: set` and `map` invariants, as apiextensions' `listtype`
//! validation checks them: a `Duplicate value` at the second occurrence of each repeated
//! element (set) or key (map, keyed by `x-kubernetes-list-map-keys`; a missing key counts as
//! a key of its own). Compound values compare as Go's JSON encodes them, scalars by type and
//! value (`1` and `1.0` differ).

use std::collections::HashMap;

use serde_json::{Map, Number, Value};

use super::Subtrees;
use crate::findings::{BadValue, FieldError, Path, PathAt};
use crate::schema::Schema;

/// Appends the list-type errors of `value` to `out`.
pub(super) fn validate(
    value: &Value,
    schema: &Schema,
    relevant: &Subtrees,
    root: &Path,
    out: &mut Vec<FieldError>,
) {
    relevant.walk(value, schema, root, &mut |value, schema, path| {
        if let Value::Array(items) = value {
            list(items, schema, path, out);
        }
    });
}

/// The invariant of one list.
fn list(items: &[Value], schema: &Schema, path: &PathAt<'_>, out: &mut Vec<FieldError>) {
    match schema.list_type.as_deref() {
        Some("set") => duplicates(path, items, first_repeats(items.iter().map(Key::of)), out),
        Some("map") => list_map(items, schema, path, out),
        _ => {}
    }
}

fn list_map(items: &[Value], schema: &Schema, path: &PathAt<'_>, out: &mut Vec<FieldError>) {
    if let Some((i, bad)) = items
        .iter()
        .enumerate()
        .find(|(_, x)| !x.is_null() && !x.is_object())
    {
        out.push(FieldError::invalid(
            path.path().index(i),
            BadValue::from_json(bad),
            "must be an object for an array of list-type map",
        ));
        return;
    }
    // One key: its value (or "unspecified"); several: the object of the keys present.
    let keys: Vec<Value> = items
        .iter()
        .map(|x| {
            let mut key = Map::new();
            for name in &schema.list_map_keys {
                if let Some(v) = x.get(name) {
                    key.insert(name.clone(), v.clone());
                }
            }
            Value::Object(key)
        })
        .collect();
    duplicates(path, &keys, first_repeats(keys.iter().map(Key::of)), out);
}

/// A `Duplicate value` at each of `repeats` (indexes of `shown`, which holds what each
/// prints): the list's path is spelled out once, however many there are.
fn duplicates(path: &PathAt<'_>, shown: &[Value], repeats: Vec<usize>, out: &mut Vec<FieldError>) {
    if repeats.is_empty() {
        return;
    }
    let path = path.path();
    for i in repeats {
        out.push(FieldError::duplicate(path.index(i), bad_value(&shown[i])));
    }
}

/// What Go compares: scalars by dynamic type and value, compounds by their JSON.
#[derive(PartialEq, Eq, Hash)]
enum Key {
    Null,
    Bool(bool),
    Int(i128),
    Float(u64),
    Str(String),
    Compound(String),
}

impl Key {
    fn of(v: &Value) -> Key {
        match v {
            Value::Null => Key::Null,
            Value::Bool(b) => Key::Bool(*b),
            Value::Number(n) => match (n.as_i64(), n.as_u64()) {
                (Some(i), _) => Key::Int(i128::from(i)),
                (_, Some(u)) => Key::Int(i128::from(u)),
                _ => Key::Float(n.as_f64().unwrap_or(f64::NAN).to_bits()),
            },
            Value::String(s) => Key::Str(s.clone()),
            compound => Key::Compound(crate::go::json::marshal(compound)),
        }
    }
}

/// Indexes of the second occurrence of every repeated key.
fn first_repeats(keys: impl Iterator<Item = Key>) -> Vec<usize> {
    let mut seen: HashMap<Key, usize, crate::hashing::ByInput> = HashMap::default();
    let mut repeats = Vec::new();
    for (i, key) in keys.enumerate() {
        let times = seen.entry(key).or_insert(0);
        *times += 1;
        if *times == 2 {
            repeats.push(i);
        }
    }
    repeats
}

/// The value printed for a duplicate: structures as Go's JSON prints them (sorted keys,
/// integral floats without a fraction).
fn bad_value(v: &Value) -> BadValue {
    match v {
        Value::Object(_) | Value::Array(_) => BadValue::Json(canonical(v)),
        other => BadValue::from_json(other),
    }
}

fn canonical(v: &Value) -> Value {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), canonical(&map[k])))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 1e15 => {
                Value::Number(Number::from(f as i64))
            }
            _ => v.clone(),
        },
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::validation::shown_errors;
    use serde_json::json;

    /// `ports` a list-type set, `rules` a list-type map keyed by `name` and `port`, both
    /// below a list, as a rendered resource's nested lists are.
    fn errors(value: Value) -> Vec<String> {
        let schema = Schema::from_value(&json!({"type": "object", "properties": {
        "items": {"type": "array", "items": {"type": "object", "properties": {
            "ports": {"type": "array", "x-kubernetes-list-type": "set",
                "items": {"x-kubernetes-preserve-unknown-fields": true}},
            "rules": {"type": "array", "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name", "port"],
                "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
        }}}}}))
        .expect("schema");
        shown_errors(&schema, json!({"items": value}), "spec.forProvider")
    }

    #[test]
    fn each_repeat_is_a_duplicate_at_its_item() {
        assert_eq!(
            errors(json!([
                {"ports": [80, 443], "rules": [{"name": "a", "port": 1}, {"name": "a", "port": 2}]},
                {
                    "ports": [80, 80.0, 443, 80, {"b": 1, "a": 2}, {"a": 2, "b": 1}],
                    "rules": [{"name": "a", "port": 1}, {"name": "a"}, {"port": 1, "name": "a", "x": 0}, {"name": "a"}]
                }
            ])),
            [
                "spec.forProvider.items[1].ports[3]: Duplicate value: 80",
                r#"spec.forProvider.items[1].ports[5]: Duplicate value: {"a":2,"b":1}"#,
                r#"spec.forProvider.items[1].rules[2]: Duplicate value: {"name":"a","port":1}"#,
                r#"spec.forProvider.items[1].rules[3]: Duplicate value: {"name":"a"}"#,
            ]
        );
    }
}
