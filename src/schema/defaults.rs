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
            for (name, prop) in &schema.properties {
                let Some(default) = &prop.default else {
                    continue;
                };
                let missing_or_null = match crate::json::member(map, name) {
                    None => true,
                    Some(v) => is_non_nullable_null(v, Some(prop)),
                };
                if missing_or_null {
                    map.insert(name.clone(), default.clone());
                }
            }
            let additional = schema.additional_properties_schema();
            for (name, member) in map.iter_mut() {
                // A scalar has nothing below it to default and is no null to replace.
                if !(member.is_object() || member.is_array() || member.is_null()) {
                    continue;
                }
                if let Some(prop) = schema.properties.get(name) {
                    default_at(member, prop, depth + 1);
                } else if let Some(add) = additional {
                    // `additionalProperties: true` has no schema, so nothing to default.
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
}
