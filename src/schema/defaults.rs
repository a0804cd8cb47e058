//! kube-apiserver's structural defaulting.
//!
//! A port of `apiextensions-apiserver/pkg/apiserver/schema/defaulting/algorithm.go`
//! (`Default`): for an object, every property with a `default` that is absent, or `null`
//! while the property is not `nullable`, gets a deep copy of the default; then every
//! member is visited with its property schema, or with the `additionalProperties` schema
//! (where a non-nullable `null` member takes that schema's default). For an array, every
//! non-nullable `null` element takes the `items` default and every element is visited.
//! Freshly defaulted values are visited too, so defaults nested inside them apply.
//!
//! Only `properties`, `additionalProperties` and a single `items` schema are followed (a
//! structural schema has no defaults below `allOf`/`anyOf`/`oneOf`/`not`), so recursion is
//! bounded by the schema's depth; [`MAX_SCHEMA_DEPTH`] caps it for schemas built by hand.

use serde_json::Value;

use super::structural::{MAX_SCHEMA_DEPTH, Schema};

/// Applies the schema's defaults to `value` in place, exactly as the API server does on
/// create, update and read.
pub fn apply_defaults(value: &mut Value, schema: &Schema) {
    default_at(value, schema, 0);
}

/// `isNonNullableNull`: `null` where the schema does not allow it.
fn is_non_nullable_null(value: &Value, schema: Option<&Schema>) -> bool {
    value.is_null() && schema.is_some_and(|s| !s.nullable)
}

fn default_at(value: &mut Value, schema: &Schema, depth: usize) {
    // Nothing below to apply: the walk would change nothing (a base or an input, say).
    if depth > MAX_SCHEMA_DEPTH || !schema.defaults_below {
        return;
    }
    match value {
        Value::Object(map) => {
            // In the properties' order, only those with a default on or below them: the
            // members are looked up by name (a scan), not each property by a member's.
            for (name, prop) in &schema.properties {
                if let Some(default) = &prop.default {
                    let missing_or_null = match crate::json::member(map, name) {
                        None => true,
                        Some(v) => is_non_nullable_null(v, Some(prop)),
                    };
                    if missing_or_null {
                        map.insert(name.clone(), default.clone());
                    }
                }
                // A freshly defaulted value is visited too.
                if prop.defaults_below
                    && let Some(member) = crate::json::member_mut(map, name)
                {
                    default_at(member, prop, depth + 1);
                }
            }
            // `additionalProperties` without a default on or below it changes nothing (a
            // `null` member would take its absent default: `null`).
            let additional = schema
                .additional_properties_schema()
                .filter(|add| add.default.is_some() || add.defaults_below);
            if let Some(add) = additional {
                for (name, member) in map.iter_mut() {
                    if schema.properties.contains_key(name) {
                        continue;
                    }
                    if is_non_nullable_null(member, Some(add)) {
                        // Upstream copies the default even when there is none, which
                        // leaves the null in place.
                        *member = add.default.clone().unwrap_or(Value::Null);
                    }
                    default_at(member, add, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            let Some(item_schema) = schema.items_schema() else {
                return;
            };
            for item in items.iter_mut() {
                if is_non_nullable_null(item, Some(item_schema)) {
                    *item = item_schema.default.clone().unwrap_or(Value::Null);
                }
                default_at(item, item_schema, depth + 1);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(v: Value) -> Schema {
        Schema::from_value(&v).expect("valid schema")
    }

    #[test]
    fn absent_properties_get_defaults() {
        let s = schema(json!({"type": "object", "properties": {
            "a": {"type": "string", "default": "x"},
            "b": {"type": "integer"},
            "c": {"type": "integer", "default": 3}
        }}));
        let mut v = json!({"c": 7});
        apply_defaults(&mut v, &s);
        assert_eq!(v, json!({"c": 7, "a": "x"}));
    }

    #[test]
    fn null_non_nullable_gets_default_nullable_null_is_kept() {
        let s = schema(json!({"type": "object", "properties": {
            "a": {"type": "string", "default": "x"},
            "b": {"type": "string", "default": "y", "nullable": true},
            "c": {"type": "string"}
        }}));
        let mut v = json!({"a": null, "b": null, "c": null});
        apply_defaults(&mut v, &s);
        // c has no default: defaulting leaves the null (pruning would remove it).
        assert_eq!(v, json!({"a": "x", "b": null, "c": null}));
    }

    #[test]
    fn nested_and_freshly_defaulted_values_are_visited() {
        let s = schema(json!({"type": "object", "properties": {
            "spec": {"type": "object", "default": {}, "properties": {
                "mode": {"type": "string", "default": "Resources"},
                "inner": {"type": "object", "default": {"keep": true}, "properties": {
                    "deep": {"type": "integer", "default": 1},
                    "keep": {"type": "boolean"}
                }}
            }}
        }}));
        let mut v = json!({});
        apply_defaults(&mut v, &s);
        assert_eq!(
            v,
            json!({"spec": {"mode": "Resources", "inner": {"keep": true, "deep": 1}}})
        );
    }

    #[test]
    fn array_items_are_defaulted() {
        let s = schema(json!({"type": "object", "properties": {
            "list": {"type": "array", "items": {"type": "object", "default": {"t": "d"},
                "properties": {"t": {"type": "string", "default": "x"},
                               "u": {"type": "string"}}}}
        }}));
        let mut v = json!({"list": [{}, {"t": "set"}, null, {"u": "z"}]});
        apply_defaults(&mut v, &s);
        assert_eq!(
            v,
            json!({"list": [{"t": "x"}, {"t": "set"}, {"t": "d"}, {"u": "z", "t": "x"}]})
        );
    }

    #[test]
    fn nullable_items_keep_null() {
        let s = schema(json!({"type": "array",
            "items": {"type": "string", "nullable": true, "default": "d"}}));
        let mut v = json!([null, "a"]);
        apply_defaults(&mut v, &s);
        assert_eq!(v, json!([null, "a"]));
    }

    #[test]
    fn additional_properties_values_are_defaulted() {
        let s = schema(json!({"type": "object", "properties": {
            "known": {"type": "object", "properties": {"k": {"type": "string", "default": "kk"}}}
        }, "additionalProperties": {"type": "object", "default": {"from": "default"},
            "properties": {"x": {"type": "integer", "default": 5}}}}));
        let mut v = json!({"known": {}, "a": {}, "b": null, "c": {"x": 1}});
        apply_defaults(&mut v, &s);
        assert_eq!(
            v,
            json!({"known": {"k": "kk"}, "a": {"x": 5}, "b": {"from": "default", "x": 5},
                   "c": {"x": 1}})
        );
    }

    #[test]
    fn additional_properties_without_default_leave_null() {
        let s = schema(json!({"type": "object", "additionalProperties": {"type": "string"}}));
        let mut v = json!({"a": null});
        apply_defaults(&mut v, &s);
        assert_eq!(v, json!({"a": null}));
    }

    #[test]
    fn scalars_and_mismatched_shapes_are_left_alone() {
        let s = schema(json!({"type": "object", "properties": {
            "a": {"type": "object", "properties": {"b": {"type": "string", "default": "x"}}}
        }}));
        let mut v = json!({"a": "not an object"});
        apply_defaults(&mut v, &s);
        assert_eq!(v, json!({"a": "not an object"}));
        let mut v = json!(42);
        apply_defaults(&mut v, &s);
        assert_eq!(v, json!(42));
    }

    #[test]
    fn preserve_unknown_fields_subtrees_are_not_defaulted() {
        let s = schema(json!({"type": "object", "properties": {
            "base": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
        }}));
        let mut v = json!({"base": {"spec": null}});
        apply_defaults(&mut v, &s);
        assert_eq!(v, json!({"base": {"spec": null}}));
    }

    /// Go's `Default` as written (`algorithm.go`), every property and member visited: what
    /// the walk must agree with.
    fn go_default(x: &mut Value, s: &Schema) {
        match x {
            Value::Object(map) => {
                for (k, prop) in &s.properties {
                    let Some(default) = &prop.default else {
                        continue;
                    };
                    if map
                        .get(k)
                        .is_none_or(|v| is_non_nullable_null(v, Some(prop)))
                    {
                        map.insert(k.clone(), default.clone());
                    }
                }
                for (k, v) in map.iter_mut() {
                    if let Some(prop) = s.properties.get(k) {
                        go_default(v, prop);
                    } else if let Some(add) = s.additional_properties_schema() {
                        if is_non_nullable_null(v, Some(add)) {
                            *v = add.default.clone().unwrap_or(Value::Null);
                        }
                        go_default(v, add);
                    }
                }
            }
            Value::Array(items) => {
                let Some(item) = s.items_schema() else {
                    return;
                };
                for v in items.iter_mut() {
                    if is_non_nullable_null(v, Some(item)) {
                        *v = item.default.clone().unwrap_or(Value::Null);
                    }
                    go_default(v, item);
                }
            }
            _ => {}
        }
    }

    /// Object schemas over the names `a`, `b`, `c`, with defaults, `nullable`,
    /// `additionalProperties` and `items` here and there.
    fn schemas() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let default = prop_oneof![
            Just(None),
            Just(Some(json!("d"))),
            Just(Some(json!({}))),
            Just(Some(json!({"a": null}))),
            Just(Some(json!([null]))),
        ];
        let leaf = (default.clone(), any::<bool>()).prop_map(|(d, nullable)| {
            let mut s = json!({"type": "string", "nullable": nullable});
            if let Some(d) = d {
                s["default"] = d;
            }
            s
        });
        leaf.prop_recursive(4, 24, 3, move |inner| {
            (
                proptest::collection::btree_map(
                    prop_oneof![Just("a"), Just("b"), Just("c")],
                    inner.clone(),
                    0..3,
                ),
                proptest::option::of(inner.clone()),
                proptest::option::of(inner),
                default.clone(),
                any::<bool>(),
            )
                .prop_map(|(properties, additional, items, d, nullable)| {
                    let mut s = json!({"type": "object", "properties": properties,
                        "nullable": nullable});
                    if let Some(a) = additional {
                        s["additionalProperties"] = a;
                    }
                    if let Some(i) = items {
                        // An array schema instead, its items the generated schema.
                        s = json!({"type": "array", "items": i, "nullable": nullable});
                    }
                    if let Some(d) = d {
                        s["default"] = d;
                    }
                    s
                })
        })
    }

    /// Values over the names `a` to `e`, with nulls.
    fn values() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![Just(Value::Null), Just(json!("v")), Just(json!(1))];
        leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
                proptest::collection::btree_map(
                    prop_oneof![Just("a"), Just("b"), Just("c"), Just("d"), Just("e")],
                    inner,
                    0..4,
                )
                .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.into(), v)).collect())),
            ]
        })
    }

    proptest::proptest! {
        // Enough cases that a null member meets an `additionalProperties` default.
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4096))]
        #[test]
        fn defaults_as_go_does(s in schemas(), v in values()) {
            let s = schema(s);
            let (mut walked, mut expected) = (v.clone(), v);
            apply_defaults(&mut walked, &s);
            go_default(&mut expected, &s);
            // The same members in the same order.
            proptest::prop_assert_eq!(walked.to_string(), expected.to_string());
        }
    }
}
