//! Structural OpenAPI v3 schemas as Kubernetes CRDs use them.
//!
//! [`Schema`] is parsed from the `openAPIV3Schema` value of a CRD version. It keeps the
//! keywords the API server and Crossplane's validator look at and drops `description`
//! (the largest part of provider CRDs) to save memory. Unknown keys are ignored; a known
//! key holding a JSON value of the wrong type is a [`SchemaError::WrongType`] naming the
//! key's location, e.g. `properties.spec.properties.size.maxItems: expected an integer`.

use serde_json::{Map, Value};
use thiserror::Error;

/// Deepest schema nesting accepted by [`Schema::from_value`].
///
/// Real CRDs stay far below this (the deepest provider schemas are around 40 levels);
/// the cap keeps recursion on hostile input from overflowing the stack.
pub const MAX_SCHEMA_DEPTH: usize = 256;

/// Errors found while reading schemas, CRDs and XRDs.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SchemaError {
    /// A known key holds a JSON value of the wrong type.
    #[error("{}: expected {expected}", display_path(.path))]
    WrongType {
        /// Location of the key, e.g. `properties.spec.maxItems`.
        path: String,
        /// What was expected, e.g. `an integer`.
        expected: &'static str,
    },
    /// Schema nesting exceeds [`MAX_SCHEMA_DEPTH`].
    #[error("{}: schema nesting exceeds the limit of {limit} levels", display_path(.path))]
    TooDeep {
        /// Location of the first schema beyond the limit.
        path: String,
        /// The limit that was exceeded.
        limit: usize,
    },
    /// A value that must be present is missing.
    #[error("{}: required value is missing", display_path(.path))]
    Missing {
        /// Location of the missing value, e.g. `spec.names.kind`.
        path: String,
    },
    /// A value is present and well-typed but not acceptable.
    #[error("{}: {message}", display_path(.path))]
    Invalid {
        /// Location of the value.
        path: String,
        /// What is wrong with it.
        message: String,
    },
    /// An error inside a named document (a CRD or XRD file).
    #[error("{origin}: {what}: {error}")]
    Document {
        /// Where the document came from (usually a file name).
        origin: String,
        /// Which object, e.g. `CustomResourceDefinition "buckets.s3.aws.upbound.io"`.
        what: String,
        /// The underlying error.
        error: Box<SchemaError>,
    },
}

impl SchemaError {
    /// The location inside the document (or schema) the error refers to.
    pub fn path(&self) -> &str {
        match self {
            Self::WrongType { path, .. }
            | Self::TooDeep { path, .. }
            | Self::Missing { path }
            | Self::Invalid { path, .. } => path,
            Self::Document { error, .. } => error.path(),
        }
    }

    /// Wraps the error with the document it was found in.
    pub fn in_document(self, origin: &str, what: String) -> Self {
        Self::Document {
            origin: origin.to_string(),
            what,
            error: Box::new(self),
        }
    }
}

/// An empty path is the schema root; say so instead of printing nothing.
fn display_path(path: &str) -> &str {
    if path.is_empty() { "(root)" } else { path }
}

/// `additionalProperties`: either a boolean or a schema for the values of unknown keys.
#[derive(Debug, Clone, PartialEq)]
pub enum AdditionalProperties {
    /// `additionalProperties: true|false`.
    Bool(bool),
    /// `additionalProperties: {schema}`.
    Schema(Box<Schema>),
}

/// `items`: a single schema for every element, or a list of schemas (tuple form).
#[derive(Debug, Clone, PartialEq)]
pub enum Items {
    /// `items: {schema}`.
    Schema(Box<Schema>),
    /// `items: [{schema}, ...]` (not structural, but accepted by the parser).
    Tuple(Vec<Schema>),
}

/// One `x-kubernetes-validations` CEL rule.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ValidationRule {
    /// The CEL expression.
    pub rule: String,
    /// Static message shown when the rule fails.
    pub message: Option<String>,
    /// CEL expression producing the message.
    pub message_expression: Option<String>,
    /// Machine-readable reason (`FieldValueInvalid`, `FieldValueForbidden`, ...).
    pub reason: Option<String>,
    /// Relative JSON path the error is reported at.
    pub field_path: Option<String>,
    /// Whether `oldSelf` is optional (transition rules on create).
    pub optional_old_self: Option<bool>,
}

/// A node's `properties`, in the order of their names (as a sorted map would hold them),
/// found by hashing the name: validation looks up every member of every object it walks,
/// and a provider's `forProvider` has hundreds of properties.
pub type Properties = indexmap::IndexMap<String, Schema, crate::hashing::BySchema>;

/// A structural OpenAPI v3 schema node (Kubernetes `JSONSchemaProps`, minus descriptions).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Schema {
    /// `type`, kept raw (`object`, `array`, `string`, `integer`, `number`, `boolean`, or empty).
    pub type_: Option<String>,
    /// `properties`.
    pub properties: Properties,
    /// `additionalProperties`.
    pub additional_properties: Option<AdditionalProperties>,
    /// `items`.
    pub items: Option<Items>,
    /// `required` property names.
    pub required: Vec<String>,
    /// `nullable`.
    pub nullable: bool,
    /// `default` (a JSON `null` default counts as no default, as in Kubernetes).
    pub default: Option<Value>,
    /// `enum` values.
    pub enum_values: Vec<Value>,
    /// `format`.
    pub format: Option<String>,
    /// `pattern`.
    pub pattern: Option<String>,
    /// `minimum`.
    pub minimum: Option<f64>,
    /// `maximum`.
    pub maximum: Option<f64>,
    /// `exclusiveMinimum` (OpenAPI 3.0 boolean form).
    pub exclusive_minimum: bool,
    /// `exclusiveMaximum` (OpenAPI 3.0 boolean form).
    pub exclusive_maximum: bool,
    /// `multipleOf`.
    pub multiple_of: Option<f64>,
    /// `minLength`.
    pub min_length: Option<u64>,
    /// `maxLength`.
    pub max_length: Option<u64>,
    /// `minItems`.
    pub min_items: Option<u64>,
    /// `maxItems`.
    pub max_items: Option<u64>,
    /// `minProperties`.
    pub min_properties: Option<u64>,
    /// `maxProperties`.
    pub max_properties: Option<u64>,
    /// `uniqueItems`.
    pub unique_items: bool,
    /// `x-kubernetes-preserve-unknown-fields`.
    pub preserve_unknown_fields: bool,
    /// `x-kubernetes-int-or-string`.
    pub int_or_string: bool,
    /// A `resource.Quantity` of a built-in kind: a JSON number, or a string
    /// `resource.ParseQuantity` takes. Set only by the conversion of built-in kinds' OpenAPI
    /// ([`super::openapi`]), never read from a CRD: no CRD keyword says it.
    pub quantity: bool,
    /// `x-kubernetes-embedded-resource`.
    pub embedded_resource: bool,
    /// `x-kubernetes-list-type` (`atomic`, `set`, `map`).
    pub list_type: Option<String>,
    /// `x-kubernetes-list-map-keys`.
    pub list_map_keys: Vec<String>,
    /// `x-kubernetes-map-type` (`atomic`, `granular`).
    pub map_type: Option<String>,
    /// `x-kubernetes-validations`.
    pub validations: Vec<ValidationRule>,
    /// `allOf`.
    pub all_of: Vec<Schema>,
    /// `anyOf`.
    pub any_of: Vec<Schema>,
    /// `oneOf`.
    pub one_of: Vec<Schema>,
    /// `not`.
    pub not: Option<Box<Schema>>,
    /// Whether a `default` lies below this node where defaulting looks (`properties`,
    /// `additionalProperties`, a single `items`); defaulting skips subtrees without one. Set
    /// by the parser: a schema changed after parsing must keep it true where it adds defaults.
    pub defaults_below: bool,
}

impl Schema {
    /// The schema as an `openAPIV3Schema` value (what a function's `required_schemas` get):
    /// what [`Schema::from_value`] reads, written back; a [`Schema::quantity`] node as the
    /// API server's OpenAPI has it (`x-kubernetes-int-or-string`).
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        let mut put = |key: &str, value: Value| {
            m.insert(key.to_string(), value);
        };
        if let Some(t) = &self.type_ {
            put("type", Value::String(t.clone()));
        }
        if !self.properties.is_empty() {
            let properties: Map<String, Value> = self
                .properties
                .iter()
                .map(|(k, v)| (k.clone(), v.to_value()))
                .collect();
            put("properties", Value::Object(properties));
        }
        match &self.additional_properties {
            Some(AdditionalProperties::Bool(b)) => put("additionalProperties", Value::Bool(*b)),
            Some(AdditionalProperties::Schema(s)) => put("additionalProperties", s.to_value()),
            None => {}
        }
        match &self.items {
            Some(Items::Schema(s)) => put("items", s.to_value()),
            Some(Items::Tuple(t)) => put("items", t.iter().map(Schema::to_value).collect()),
            None => {}
        }
        let strings = |v: &[String]| Value::Array(v.iter().cloned().map(Value::String).collect());
        if !self.required.is_empty() {
            put("required", strings(&self.required));
        }
        if self.nullable {
            put("nullable", Value::Bool(true));
        }
        if let Some(d) = &self.default {
            put("default", d.clone());
        }
        if !self.enum_values.is_empty() {
            put("enum", Value::Array(self.enum_values.clone()));
        }
        for (key, text) in [
            ("format", &self.format),
            ("pattern", &self.pattern),
            ("x-kubernetes-list-type", &self.list_type),
            ("x-kubernetes-map-type", &self.map_type),
        ] {
            if let Some(t) = text {
                put(key, Value::String(t.clone()));
            }
        }
        for (key, n) in [
            ("minimum", self.minimum),
            ("maximum", self.maximum),
            ("multipleOf", self.multiple_of),
        ] {
            if let Some(n) = n.and_then(serde_json::Number::from_f64) {
                put(key, Value::Number(n));
            }
        }
        for (key, n) in [
            ("minLength", self.min_length),
            ("maxLength", self.max_length),
            ("minItems", self.min_items),
            ("maxItems", self.max_items),
            ("minProperties", self.min_properties),
            ("maxProperties", self.max_properties),
        ] {
            if let Some(n) = n {
                put(key, Value::from(n));
            }
        }
        for (key, flag) in [
            ("exclusiveMinimum", self.exclusive_minimum),
            ("exclusiveMaximum", self.exclusive_maximum),
            ("uniqueItems", self.unique_items),
            (
                "x-kubernetes-preserve-unknown-fields",
                self.preserve_unknown_fields,
            ),
            (
                "x-kubernetes-int-or-string",
                self.int_or_string || self.quantity,
            ),
            ("x-kubernetes-embedded-resource", self.embedded_resource),
        ] {
            if flag {
                put(key, Value::Bool(true));
            }
        }
        if !self.list_map_keys.is_empty() {
            put("x-kubernetes-list-map-keys", strings(&self.list_map_keys));
        }
        if !self.validations.is_empty() {
            let rules = self
                .validations
                .iter()
                .map(|r| {
                    let mut rule = Map::new();
                    rule.insert("rule".into(), Value::String(r.rule.clone()));
                    for (key, text) in [
                        ("message", &r.message),
                        ("messageExpression", &r.message_expression),
                        ("reason", &r.reason),
                        ("fieldPath", &r.field_path),
                    ] {
                        if let Some(t) = text {
                            rule.insert(key.into(), Value::String(t.clone()));
                        }
                    }
                    if let Some(o) = r.optional_old_self {
                        rule.insert("optionalOldSelf".into(), Value::Bool(o));
                    }
                    Value::Object(rule)
                })
                .collect();
            put("x-kubernetes-validations", Value::Array(rules));
        }
        for (key, list) in [
            ("allOf", &self.all_of),
            ("anyOf", &self.any_of),
            ("oneOf", &self.one_of),
        ] {
            if !list.is_empty() {
                put(key, list.iter().map(Schema::to_value).collect());
            }
        }
        if let Some(not) = &self.not {
            put("not", not.to_value());
        }
        Value::Object(m)
    }

    /// Parses a schema (an `openAPIV3Schema` value); error locations are relative to it.
    pub fn from_value(value: &Value) -> Result<Schema, SchemaError> {
        Self::from_value_at(value, "")
    }

    /// Parses a schema whose location in its document is `path`, so that errors name
    /// the full location (e.g. `spec.versions[0].schema.openAPIV3Schema.properties.x.type`).
    pub fn from_value_at(value: &Value, path: &str) -> Result<Schema, SchemaError> {
        parse(value, path, 0)
    }

    /// The schema of property `name`, if declared in `properties`.
    pub fn property(&self, name: &str) -> Option<&Schema> {
        self.properties.get(name)
    }

    /// The schema of array elements when `items` is a single schema.
    pub fn items_schema(&self) -> Option<&Schema> {
        match &self.items {
            Some(Items::Schema(s)) => Some(s),
            _ => None,
        }
    }

    /// The schema of map values when `additionalProperties` is a schema.
    pub fn additional_properties_schema(&self) -> Option<&Schema> {
        match &self.additional_properties {
            Some(AdditionalProperties::Schema(s)) => Some(s),
            _ => None,
        }
    }

    /// Walks declared `properties` by name; the segment `[]` steps into a single `items`
    /// schema. A convenience for tests and reports, not Crossplane's field path resolution.
    pub fn descend(&self, segments: &[&str]) -> Option<&Schema> {
        let mut current = self;
        for segment in segments {
            current = if *segment == "[]" {
                current.items_schema()?
            } else {
                current.property(segment)?
            };
        }
        Some(current)
    }
}

/// Joins a parent location and a key the way error messages print them.
pub(crate) fn join(path: &str, key: &str) -> String {
    let key = if key.contains(['.', '[', ']']) || key.is_empty() {
        format!("[{key}]")
    } else {
        key.to_string()
    };
    if path.is_empty() {
        key
    } else if key.starts_with('[') {
        format!("{path}{key}")
    } else {
        format!("{path}.{key}")
    }
}

/// Appends an index segment, e.g. `allOf[2]`.
pub(crate) fn index(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}

fn wrong(path: &str, key: &str, expected: &'static str) -> SchemaError {
    SchemaError::WrongType {
        path: join(path, key),
        expected,
    }
}

/// Reads a key, treating JSON `null` as absent (Go's decoder does the same for pointers).
fn get<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    obj.get(key).filter(|v| !v.is_null())
}

fn get_string(
    obj: &Map<String, Value>,
    path: &str,
    key: &str,
) -> Result<Option<String>, SchemaError> {
    match get(obj, key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(wrong(path, key, "a string")),
    }
}

fn get_bool(obj: &Map<String, Value>, path: &str, key: &str) -> Result<Option<bool>, SchemaError> {
    match get(obj, key) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(wrong(path, key, "a boolean")),
    }
}

fn get_number(obj: &Map<String, Value>, path: &str, key: &str) -> Result<Option<f64>, SchemaError> {
    match get(obj, key) {
        None => Ok(None),
        Some(Value::Number(n)) => n
            .as_f64()
            .map(Some)
            .ok_or_else(|| wrong(path, key, "a number")),
        Some(_) => Err(wrong(path, key, "a number")),
    }
}

/// Non-negative integers; an integral float (`5.0`, as some YAML emitters write) is accepted.
fn get_count(obj: &Map<String, Value>, path: &str, key: &str) -> Result<Option<u64>, SchemaError> {
    match get(obj, key) {
        None => Ok(None),
        Some(Value::Number(n)) => {
            if let Some(u) = n.as_u64() {
                return Ok(Some(u));
            }
            if n.as_i64().is_some() {
                return Err(wrong(path, key, "a non-negative integer"));
            }
            match n.as_f64() {
                Some(f) if f.fract() == 0.0 && f >= 0.0 && f <= u64::MAX as f64 => {
                    Ok(Some(f as u64))
                }
                _ => Err(wrong(path, key, "an integer")),
            }
        }
        Some(_) => Err(wrong(path, key, "an integer")),
    }
}

fn get_strings(
    obj: &Map<String, Value>,
    path: &str,
    key: &str,
) -> Result<Vec<String>, SchemaError> {
    match get(obj, key) {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::String(s) => Ok(s.clone()),
                _ => Err(SchemaError::WrongType {
                    path: index(&join(path, key), i),
                    expected: "a string",
                }),
            })
            .collect(),
        Some(_) => Err(wrong(path, key, "an array of strings")),
    }
}

fn get_validations(
    obj: &Map<String, Value>,
    path: &str,
) -> Result<Vec<ValidationRule>, SchemaError> {
    const KEY: &str = "x-kubernetes-validations";
    let items = match get(obj, KEY) {
        None => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(wrong(path, KEY, "an array")),
    };
    let base = join(path, KEY);
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let at = index(&base, i);
            let Value::Object(rule) = item else {
                return Err(SchemaError::WrongType {
                    path: at,
                    expected: "an object",
                });
            };
            Ok(ValidationRule {
                rule: get_string(rule, &at, "rule")?.unwrap_or_default(),
                message: get_string(rule, &at, "message")?,
                message_expression: get_string(rule, &at, "messageExpression")?,
                reason: get_string(rule, &at, "reason")?,
                field_path: get_string(rule, &at, "fieldPath")?,
                optional_old_self: get_bool(rule, &at, "optionalOldSelf")?,
            })
        })
        .collect()
}

fn parse(value: &Value, path: &str, depth: usize) -> Result<Schema, SchemaError> {
    let mut schema = Schema::default();
    parse_into(&mut schema, value, path, depth)?;
    Ok(schema)
}

/// Parses `value` into `target`. Recursion goes through here only, and this frame is kept
/// small (children are parsed in place, keywords in a separate frame) so that the depth
/// cap, not the thread's stack size, is what stops hostile nesting, even in debug builds.
fn parse_into(
    target: &mut Schema,
    value: &Value,
    path: &str,
    depth: usize,
) -> Result<(), SchemaError> {
    if depth > MAX_SCHEMA_DEPTH {
        return Err(SchemaError::TooDeep {
            path: path.to_string(),
            limit: MAX_SCHEMA_DEPTH,
        });
    }
    let Value::Object(obj) = value else {
        return Err(SchemaError::WrongType {
            path: path.to_string(),
            expected: "an object",
        });
    };
    parse_keywords(target, obj, path)?;

    match get(obj, "properties") {
        None => {}
        Some(Value::Object(props)) => {
            let base = join(path, "properties");
            for (name, prop) in props {
                let slot = target.properties.entry(name.clone()).or_default();
                parse_into(slot, prop, &join(&base, name), depth + 1)?;
            }
            target.properties.sort_unstable_keys();
        }
        Some(_) => return Err(wrong(path, "properties", "an object")),
    }

    match get(obj, "additionalProperties") {
        None => {}
        Some(Value::Bool(b)) => target.additional_properties = Some(AdditionalProperties::Bool(*b)),
        Some(v @ Value::Object(_)) => {
            let mut child = new_box();
            parse_into(
                &mut child,
                v,
                &join(path, "additionalProperties"),
                depth + 1,
            )?;
            target.additional_properties = Some(AdditionalProperties::Schema(child));
        }
        Some(_) => {
            return Err(wrong(
                path,
                "additionalProperties",
                "a boolean or an object",
            ));
        }
    }

    match get(obj, "items") {
        None => {}
        Some(v @ Value::Object(_)) => {
            let mut child = new_box();
            parse_into(&mut child, v, &join(path, "items"), depth + 1)?;
            target.items = Some(Items::Schema(child));
        }
        Some(Value::Array(list)) => {
            let mut tuple = Vec::with_capacity(list.len());
            parse_list(&mut tuple, list, &join(path, "items"), depth)?;
            target.items = Some(Items::Tuple(tuple));
        }
        Some(_) => return Err(wrong(path, "items", "an object or an array")),
    }

    for (key, which) in [("allOf", 0), ("anyOf", 1), ("oneOf", 2)] {
        match get(obj, key) {
            None => {}
            Some(Value::Array(list)) => {
                let dest = match which {
                    0 => &mut target.all_of,
                    1 => &mut target.any_of,
                    _ => &mut target.one_of,
                };
                parse_list(dest, list, &join(path, key), depth)?;
            }
            Some(_) => return Err(wrong(path, key, "an array")),
        }
    }

    if let Some(v) = get(obj, "not") {
        let mut child = new_box();
        parse_into(&mut child, v, &join(path, "not"), depth + 1)?;
        target.not = Some(child);
    }
    target.defaults_below = defaults_below(target);
    Ok(())
}

/// Whether defaulting (see [`super::apply_defaults`]) may find a `default` below `s`: one on a
/// child it visits, or below one. The children's flags are already set.
fn defaults_below(s: &Schema) -> bool {
    let has = |c: &Schema| c.default.is_some() || c.defaults_below;
    s.properties.values().any(has)
        || s.additional_properties_schema().is_some_and(has)
        || s.items_schema().is_some_and(has)
}

fn parse_list(
    dest: &mut Vec<Schema>,
    list: &[Value],
    base: &str,
    depth: usize,
) -> Result<(), SchemaError> {
    for (i, v) in list.iter().enumerate() {
        let slot = push_default(dest);
        parse_into(slot, v, &index(base, i), depth + 1)?;
    }
    Ok(())
}

// Out of line so the large default value is built in a short-lived frame, not in the
// recursive one.
#[inline(never)]
fn new_box() -> Box<Schema> {
    Box::default()
}

#[inline(never)]
fn push_default(dest: &mut Vec<Schema>) -> &mut Schema {
    dest.push(Schema::default());
    let last = dest.len() - 1;
    &mut dest[last]
}

/// Every keyword that is not a sub-schema; out of line to keep `parse_into`'s frame small.
#[inline(never)]
fn parse_keywords(s: &mut Schema, obj: &Map<String, Value>, path: &str) -> Result<(), SchemaError> {
    s.type_ = get_string(obj, path, "type")?;
    s.required = get_strings(obj, path, "required")?;
    s.nullable = get_bool(obj, path, "nullable")?.unwrap_or(false);
    s.default = get(obj, "default").cloned();
    s.enum_values = match get(obj, "enum") {
        None => Vec::new(),
        Some(Value::Array(values)) => values.clone(),
        Some(_) => return Err(wrong(path, "enum", "an array")),
    };
    s.format = get_string(obj, path, "format")?;
    s.pattern = get_string(obj, path, "pattern")?;
    s.minimum = get_number(obj, path, "minimum")?;
    s.maximum = get_number(obj, path, "maximum")?;
    s.exclusive_minimum = get_bool(obj, path, "exclusiveMinimum")?.unwrap_or(false);
    s.exclusive_maximum = get_bool(obj, path, "exclusiveMaximum")?.unwrap_or(false);
    s.multiple_of = get_number(obj, path, "multipleOf")?;
    s.min_length = get_count(obj, path, "minLength")?;
    s.max_length = get_count(obj, path, "maxLength")?;
    s.min_items = get_count(obj, path, "minItems")?;
    s.max_items = get_count(obj, path, "maxItems")?;
    s.min_properties = get_count(obj, path, "minProperties")?;
    s.max_properties = get_count(obj, path, "maxProperties")?;
    s.unique_items = get_bool(obj, path, "uniqueItems")?.unwrap_or(false);
    s.preserve_unknown_fields =
        get_bool(obj, path, "x-kubernetes-preserve-unknown-fields")?.unwrap_or(false);
    s.int_or_string = get_bool(obj, path, "x-kubernetes-int-or-string")?.unwrap_or(false);
    s.embedded_resource = get_bool(obj, path, "x-kubernetes-embedded-resource")?.unwrap_or(false);
    s.list_type = get_string(obj, path, "x-kubernetes-list-type")?;
    s.list_map_keys = get_strings(obj, path, "x-kubernetes-list-map-keys")?;
    s.map_type = get_string(obj, path, "x-kubernetes-map-type")?;
    s.validations = get_validations(obj, path)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schema_written_back_reads_the_same() {
        let value = json!({
            "type": "object", "required": ["spec"], "x-kubernetes-preserve-unknown-fields": true,
            "properties": {"spec": {"type": "object",
                "x-kubernetes-validations": [{"rule": "self.a > 0", "message": "a", "reason": "FieldValueInvalid"}],
                "properties": {
                    "a": {"type": "integer", "minimum": 1, "maximum": 10, "default": 3},
                    "b": {"type": "string", "enum": ["x", "y"], "pattern": "^[a-z]$", "maxLength": 1},
                    "c": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["n"],
                          "items": {"type": "object", "required": ["n"], "properties": {"n": {"type": "string"}}}},
                    "d": {"type": "object", "additionalProperties": {"type": "string"}},
                    "e": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]}}}}
        });
        let schema = Schema::from_value(&value).expect("a schema");
        let again = Schema::from_value(&schema.to_value()).expect("written back");
        assert_eq!(again, schema);
        assert_eq!(
            schema.to_value()["properties"]["spec"]["properties"]["a"],
            json!({"type": "integer", "minimum": 1.0, "maximum": 10.0, "default": 3})
        );
    }
    use serde_json::json;

    /// Properties iterate in the order of their names, whatever order the CRD lists them
    /// in (what builds mock values, suggestions and errors from them reads them so), and
    /// are found by name.
    #[test]
    fn properties_are_in_the_order_of_their_names() {
        let s = Schema::from_value(&json!({"type": "object", "properties": {
            "zone": {"type": "string"},
            "Beta": {"type": "string"},
            "alpha": {"type": "object", "properties": {"y": {}, "x": {}, "a_b": {}, "a": {}}},
            "_x": {"type": "string"}
        }}))
        .expect("schema");
        let names = |s: &Schema| s.properties.keys().cloned().collect::<Vec<_>>();
        assert_eq!(names(&s), ["Beta", "_x", "alpha", "zone"]);
        let alpha = s.property("alpha").expect("alpha");
        assert_eq!(names(alpha), ["a", "a_b", "x", "y"]);
        assert_eq!(
            s.properties.get("zone").and_then(|z| z.type_.as_deref()),
            Some("string")
        );
        assert!(s.properties.get("Zone").is_none());
    }

    #[test]
    fn parses_every_keyword() {
        let v = json!({
            "type": "object",
            "description": "dropped",
            "required": ["spec"],
            "x-kubernetes-validations": [{
                "rule": "self.a == 1", "message": "m", "messageExpression": "'x'",
                "reason": "FieldValueInvalid", "fieldPath": ".a", "optionalOldSelf": true
            }],
            "properties": {
                "spec": {
                    "type": "object",
                    "nullable": true,
                    "default": {},
                    "minProperties": 1,
                    "maxProperties": 9,
                    "x-kubernetes-map-type": "atomic",
                    "properties": {
                        "size": {"type": "integer", "minimum": 1, "maximum": 10.5,
                                 "exclusiveMinimum": true, "exclusiveMaximum": false,
                                 "multipleOf": 2, "format": "int64"},
                        "name": {"type": "string", "pattern": "^a", "minLength": 1,
                                 "maxLength": 63.0, "enum": ["a", "b"]},
                        "tags": {"type": "array", "minItems": 0, "maxItems": 5,
                                 "uniqueItems": true, "x-kubernetes-list-type": "map",
                                 "x-kubernetes-list-map-keys": ["k"],
                                 "items": {"type": "object", "properties": {"k": {"type": "string"}}}},
                        "tuple": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "closed": {"type": "object", "additionalProperties": false},
                        "port": {"x-kubernetes-int-or-string": true,
                                 "anyOf": [{"type": "integer"}, {"type": "string"}]},
                        "raw": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                                "x-kubernetes-embedded-resource": true},
                        "combo": {"allOf": [{"required": ["a"]}], "oneOf": [{"required": ["b"]}],
                                  "not": {"required": ["c"]}}
                    }
                }
            }
        });
        let s = Schema::from_value(&v).expect("valid schema");
        assert_eq!(s.type_.as_deref(), Some("object"));
        assert_eq!(s.required, vec!["spec"]);
        assert_eq!(s.validations[0].rule, "self.a == 1");
        assert_eq!(s.validations[0].optional_old_self, Some(true));
        let spec = s.property("spec").expect("spec");
        assert!(spec.nullable);
        assert_eq!(spec.default, Some(json!({})));
        assert_eq!(spec.min_properties, Some(1));
        assert_eq!(spec.map_type.as_deref(), Some("atomic"));
        let size = spec.property("size").expect("size");
        assert_eq!(size.minimum, Some(1.0));
        assert_eq!(size.maximum, Some(10.5));
        assert!(size.exclusive_minimum && !size.exclusive_maximum);
        assert_eq!(size.multiple_of, Some(2.0));
        let name = spec.property("name").expect("name");
        assert_eq!(name.max_length, Some(63));
        assert_eq!(name.enum_values, vec![json!("a"), json!("b")]);
        let tags = spec.property("tags").expect("tags");
        assert_eq!(tags.max_items, Some(5));
        assert!(tags.unique_items);
        assert_eq!(tags.list_map_keys, vec!["k"]);
        assert!(s.descend(&["spec", "tags", "[]", "k"]).is_some());
        assert!(
            matches!(spec.property("tuple").and_then(|t| t.items.as_ref()), Some(Items::Tuple(t)) if t.len() == 2)
        );
        assert!(
            spec.property("labels")
                .and_then(Schema::additional_properties_schema)
                .is_some()
        );
        assert_eq!(
            spec.property("closed")
                .and_then(|c| c.additional_properties.clone()),
            Some(AdditionalProperties::Bool(false))
        );
        let port = spec.property("port").expect("port");
        assert!(port.int_or_string && port.type_.is_none() && port.any_of.len() == 2);
        let raw = spec.property("raw").expect("raw");
        assert!(raw.preserve_unknown_fields && raw.embedded_resource);
        let combo = spec.property("combo").expect("combo");
        assert_eq!(combo.all_of.len(), 1);
        assert_eq!(combo.one_of.len(), 1);
        assert!(combo.not.is_some());
    }

    #[test]
    fn defaults_below_marks_the_paths_to_defaults() {
        let s = Schema::from_value(&json!({"type": "object", "properties": {
            "plain": {"type": "object", "properties": {"a": {"type": "string"}}},
            "list": {"type": "array", "items": {"type": "object", "properties": {
                "t": {"type": "string", "default": "x"}}}},
            "map": {"type": "object", "additionalProperties": {"type": "string", "default": "d"}},
            "own": {"type": "string", "default": "o"},
            "other": {"allOf": [{"properties": {"z": {"default": 1}}}]}
        }}))
        .expect("valid schema");
        assert!(s.defaults_below);
        let p = |name: &str| s.property(name).expect(name).defaults_below;
        assert!(!p("plain") && p("list") && p("map") && !p("own") && !p("other"));
        assert!(!Schema::default().defaults_below);
    }

    #[test]
    fn null_values_count_as_absent() {
        let s = Schema::from_value(&json!({"type": null, "default": null, "maxItems": null}))
            .expect("nulls are fine");
        assert_eq!(s, Schema::default());
    }

    #[test]
    fn wrong_type_names_the_location() {
        let v = json!({"properties": {"spec": {"properties": {"size": {"maxItems": "3"}}}}});
        let err = Schema::from_value(&v).expect_err("maxItems is a string");
        assert_eq!(
            err.to_string(),
            "properties.spec.properties.size.maxItems: expected an integer"
        );
        let v = json!({"properties": {"a.b": {"items": [{"type": 1}]}}});
        let err = Schema::from_value_at(&v, "spec.versions[0].schema.openAPIV3Schema")
            .expect_err("type is a number");
        assert_eq!(
            err.to_string(),
            "spec.versions[0].schema.openAPIV3Schema.properties[a.b].items[0].type: expected a string"
        );
        let err = Schema::from_value(&json!(["x"])).expect_err("not an object");
        assert_eq!(err.to_string(), "(root): expected an object");
        let err = Schema::from_value(&json!({"required": ["a", 1]})).expect_err("number");
        assert_eq!(err.to_string(), "required[1]: expected a string");
        let err = Schema::from_value(&json!({"minLength": -1})).expect_err("negative");
        assert_eq!(
            err.to_string(),
            "minLength: expected a non-negative integer"
        );
        let err = Schema::from_value(&json!({"additionalProperties": "yes"})).expect_err("string");
        assert_eq!(
            err.to_string(),
            "additionalProperties: expected a boolean or an object"
        );
        let err = Schema::from_value(&json!({"x-kubernetes-validations": [{"rule": 1}]}))
            .expect_err("rule");
        assert_eq!(
            err.to_string(),
            "x-kubernetes-validations[0].rule: expected a string"
        );
    }

    fn nested(levels: usize) -> Value {
        // Built by moving values (json! would deep-copy `v` at every level).
        let mut v = json!({"type": "string"});
        for _ in 0..levels {
            let mut props = Map::new();
            props.insert("a".to_string(), v);
            let mut node = Map::new();
            node.insert("type".to_string(), json!("object"));
            node.insert("properties".to_string(), Value::Object(props));
            v = Value::Object(node);
        }
        v
    }

    #[test]
    fn depth_is_capped() {
        // The deepest accepted schema parses within a 1 MiB stack even in debug builds
        // (half of what a spawned thread gets by default).
        let deepest = nested(MAX_SCHEMA_DEPTH);
        let parsed = std::thread::Builder::new()
            .stack_size(1024 * 1024)
            .spawn(move || Schema::from_value(&deepest).is_ok())
            .expect("spawn")
            .join()
            .expect("no overflow");
        assert!(parsed);
        let err = Schema::from_value(&nested(MAX_SCHEMA_DEPTH + 1)).expect_err("too deep");
        assert!(matches!(
            err,
            SchemaError::TooDeep {
                limit: MAX_SCHEMA_DEPTH,
                ..
            }
        ));
        assert!(
            err.to_string()
                .contains("schema nesting exceeds the limit of 256 levels")
        );
    }

    #[test]
    fn pathological_depth_does_not_overflow() {
        // Build and drop the deep value on a big stack (serde_json's drop recurses), but
        // parse it on a thread with the default 2 MiB stack: the cap must stop recursion.
        let big = |f: Box<dyn FnOnce() -> Value + Send>| {
            std::thread::Builder::new()
                .stack_size(256 * 1024 * 1024)
                .spawn(f)
                .expect("spawn")
                .join()
                .expect("no panic")
        };
        let value = big(Box::new(|| nested(20_000)));
        let (result, value) = std::thread::spawn(move || {
            let r = Schema::from_value(&value).map(|_| ());
            (r, value)
        })
        .join()
        .expect("parse must not overflow");
        assert!(matches!(result, Err(SchemaError::TooDeep { .. })));
        big(Box::new(move || {
            drop(value);
            Value::Null
        }));
    }
}
