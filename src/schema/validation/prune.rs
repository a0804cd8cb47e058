//! Pruning, as apiextensions' structural pruning and `PruneNonNullableNullsWithoutDefaults`
//! do before defaulting and validation.
//!
//! Unknown fields are reported first, as `kubectl apply`'s strict field validation refuses
//! them (worded as `crossplane beta validate` words them, with a "did you mean"), then
//! removed. Not pruned: anything under `x-kubernetes-preserve-unknown-fields` (declared
//! properties below it still are), keys covered by `additionalProperties`, and `apiVersion`,
//! `kind`, `metadata` at the root and in `x-kubernetes-embedded-resource` objects. A value whose type does not match its
//! schema is left alone: the type error says what is wrong with it.

use serde_json::Value;

use super::closest;
use crate::findings::{FieldError, Path, PathAt};
use crate::schema::structural::MAX_SCHEMA_DEPTH;
use crate::schema::{AdditionalProperties, Items, Schema};

const META_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// Reports and removes fields the schema does not know.
pub(super) fn prune_unknown_fields(
    value: &mut Value,
    schema: &Schema,
    path: &Path,
    errs: &mut Vec<FieldError>,
) {
    prune(value, schema, &PathAt::Root(path), true, 0, errs);
}

fn prune(
    value: &mut Value,
    schema: &Schema,
    path: &PathAt<'_>,
    resource_root: bool,
    depth: usize,
    errs: &mut Vec<FieldError>,
) {
    if depth > MAX_SCHEMA_DEPTH {
        return;
    }
    if schema.preserve_unknown_fields {
        keep_unknown(value, schema, path, resource_root, depth, errs);
        return;
    }
    // A node without a type but with properties prunes as an object (pruning reads
    // `properties`, not `type`), as upstream's structural schemas without types do.
    let type_ = match schema.type_.as_deref() {
        None if !schema.properties.is_empty() => Some("object"),
        None if schema.items.is_some() => Some("array"),
        other => other,
    };
    match (value, type_) {
        (Value::Object(map), Some("object")) => {
            let meta = resource_root || schema.embedded_resource;
            let mut unknown = Vec::new();
            for (key, child) in map.iter_mut() {
                if meta && META_FIELDS.contains(&key.as_str()) {
                    continue;
                }
                if let Some(prop) = schema.properties.get(key) {
                    if is_container(child) {
                        let at = PathAt::Child(path, key);
                        prune(child, prop, &at, false, depth + 1, errs);
                    }
                    continue;
                }
                match &schema.additional_properties {
                    Some(AdditionalProperties::Schema(s)) => {
                        if is_container(child) {
                            prune(child, s, &PathAt::Key(path, key), false, depth + 1, errs);
                        }
                    }
                    Some(AdditionalProperties::Bool(true)) => {}
                    _ => {
                        errs.push(unknown_field(&path.path(), key, schema));
                        unknown.push(key.clone());
                    }
                }
            }
            for key in unknown {
                map.shift_remove(&key);
            }
        }
        (Value::Array(items), Some("array")) => match &schema.items {
            Some(Items::Schema(item)) => {
                for (i, child) in items.iter_mut().enumerate() {
                    if is_container(child) {
                        prune(child, item, &PathAt::Index(path, i), false, depth + 1, errs);
                    }
                }
            }
            Some(Items::Tuple(list)) => {
                for (i, (child, item)) in items.iter_mut().zip(list).enumerate() {
                    if is_container(child) {
                        prune(child, item, &PathAt::Index(path, i), false, depth + 1, errs);
                    }
                }
            }
            None => {}
        },
        _ => {}
    }
}

/// An unknown field, as `kubectl apply` (strict field validation) refuses it, worded as
/// `crossplane beta validate` reports it, with the closest known field names of that object.
fn unknown_field(path: &Path, key: &str, schema: &Schema) -> FieldError {
    let mut detail = format!("unknown field: \"{key}\"");
    let suggestions = closest(key, schema.properties.keys().map(String::as_str));
    if !suggestions.is_empty() {
        detail.push_str(&format!(", did you mean {}?", suggestions.join(" or ")));
    }
    FieldError::invalid(path.child(key), key, detail)
}

/// `skipPrune`: under `x-kubernetes-preserve-unknown-fields` unknown keys stay, but declared
/// properties (and `additionalProperties` values) are pruned as usual, and array items keep
/// being skipped.
fn keep_unknown(
    value: &mut Value,
    schema: &Schema,
    path: &PathAt<'_>,
    resource_root: bool,
    depth: usize,
    errs: &mut Vec<FieldError>,
) {
    if depth > MAX_SCHEMA_DEPTH {
        return;
    }
    match value {
        Value::Object(map) => {
            let meta = resource_root || schema.embedded_resource;
            for (key, child) in map.iter_mut() {
                if (meta && META_FIELDS.contains(&key.as_str())) || !is_container(child) {
                    continue;
                }
                if let Some(prop) = schema.properties.get(key) {
                    let at = PathAt::Child(path, key);
                    prune(child, prop, &at, false, depth + 1, errs);
                } else if let Some(add) = schema.additional_properties_schema() {
                    prune(child, add, &PathAt::Key(path, key), false, depth + 1, errs);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = schema.items_schema() {
                for (i, child) in items.iter_mut().enumerate() {
                    if is_container(child) {
                        keep_unknown(child, item, &PathAt::Index(path, i), false, depth + 1, errs);
                    }
                }
            }
        }
        _ => {}
    }
}

/// Only objects and arrays have fields to prune: scalars are not walked (nor their paths
/// built).
fn is_container(v: &Value) -> bool {
    v.is_object() || v.is_array()
}

/// `PruneNonNullableNullsWithoutDefaults`: drops object members that are `null` where the
/// schema is not nullable and has no default (a defaulted one gets its default next).
/// Array items are left alone.
pub(super) fn prune_nulls(value: &mut Value, schema: &Schema) {
    prune_nulls_at(value, schema, 0);
}

/// Below a member or an item without a schema nothing is pruned (`getSchemaForField` finds
/// none, and so on down): an embedded resource's body, or what preserves unknown fields, is
/// not walked.
fn prune_nulls_at(value: &mut Value, schema: &Schema, depth: usize) {
    if depth > MAX_SCHEMA_DEPTH {
        return;
    }
    match value {
        Value::Object(map) => {
            // Most objects hold no null: looked up only for nulls, walked only into
            // objects and arrays (a scalar has nothing to prune).
            if map.values().any(Value::is_null) {
                map.retain(|key, member| {
                    !(member.is_null()
                        && field_schema(key, schema)
                            .is_some_and(|s| !s.nullable && s.default.is_none()))
                });
            }
            for (key, member) in map.iter_mut() {
                if is_container(member)
                    && let Some(s) = field_schema(key, schema)
                {
                    prune_nulls_at(member, s, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = schema.items_schema() {
                for member in items {
                    if is_container(member) {
                        prune_nulls_at(member, item, depth + 1);
                    }
                }
            }
        }
        _ => {}
    }
}

/// `getSchemaForField`: the property's schema, else the `additionalProperties` schema.
fn field_schema<'a>(key: &str, schema: &'a Schema) -> Option<&'a Schema> {
    schema
        .properties
        .get(key)
        .or_else(|| schema.additional_properties_schema())
}
