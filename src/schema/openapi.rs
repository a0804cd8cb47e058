//! Built-in kinds' schemas from the OpenAPI v3 documents kube-apiserver serves
//! (`/openapi/v3/api/v1`, `/openapi/v3/apis/<group>/<version>`): each kind's schema is the
//! component its `x-kubernetes-group-version-kind` names, with every `$ref` inlined, turned
//! into the structural form the rest of the core validates with.
//!
//! What the conversion does, and why:
//! - `$ref` and `allOf: [{$ref}]` are inlined (the sibling `default` kept); a component that
//!   refers back to itself (`JSONSchemaProps`) becomes type-less at the cycle, accepting
//!   anything there rather than refusing what the API server takes;
//! - `IntOrString` (`format: int-or-string`, `oneOf` integer/string) becomes
//!   `x-kubernetes-int-or-string`; `Quantity` becomes a type-less node marked
//!   [`Schema::quantity`]: the API server decodes `1`, `0.5` and `"500m"` alike, and refuses a
//!   string `resource.ParseQuantity` does not take (`lots`) with its message (not
//!   `int-or-string`, which refuses `0.5`);
//! - an object without `properties` or `additionalProperties` (`RawExtension`, `FieldsV1`)
//!   keeps unknown fields, as Go's decoder does for them;
//! - nested `ObjectMeta` (a pod template's `metadata`) keeps unknown fields: metadata is
//!   validated by its own rules ([`crate::schema::validation::ObjectMetaRules`]);
//! - descriptions, `x-kubernetes-patch-*`, `x-kubernetes-unions` and discriminators are
//!   dropped; `required`, `enum`, `default`, `format` and the list and map types are kept.
//!
//! Nothing here performs I/O: a document comes in as a `serde_json::Value`.

use std::collections::{BTreeMap, HashSet};

use serde_json::{Map, Value, json};

use super::structural::{AdditionalProperties, Items, MAX_SCHEMA_DEPTH, Schema, SchemaError};

/// `io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta`.
const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
/// `io.k8s.apimachinery.pkg.api.resource.Quantity`.
const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";
/// Marks a Quantity in the converted value, for [`mark_quantities`] (no CRD keyword says it,
/// so [`Schema::from_value`] does not read one).
const QUANTITY_MARK: &str = "x-composition-webhook-quantity";
/// `#/components/schemas/`.
const REF_PREFIX: &str = "#/components/schemas/";

/// Whether `default` is a value of the inlined schema `m`. kube-openapi writes a Go struct's
/// zero value, `{}`, as the default of every struct-typed field, `IntOrString` and
/// `Quantity` too (a Service port's `targetPort`): applied, it is an object where the API
/// server, which never applies these defaults to built-in kinds (its Go defaulting sets
/// `targetPort` from `port`), has nothing, and validation would refuse it.
fn default_fits(m: &Map<String, Value>, default: &Value) -> bool {
    if is_go_zero(default) {
        return false;
    }
    match m.get("type").and_then(Value::as_str) {
        Some("object") => default.is_object(),
        Some("array") => default.is_array(),
        Some("string") => default.is_string(),
        Some("integer" | "number") => default.is_number(),
        Some("boolean") => default.is_boolean(),
        _ if m.contains_key("x-kubernetes-int-or-string") => {
            default.is_string() || default.is_i64() || default.is_u64()
        }
        _ if m.contains_key(QUANTITY_MARK) => default.is_string() || default.is_number(),
        _ => false,
    }
}

/// `""`, `0` or `false`: the default kube-openapi writes for every field of a Go struct
/// without one of its own. The API server does not apply OpenAPI defaults to built-in
/// kinds; applied, these would fill required fields its Go validation refuses empty.
fn is_go_zero(v: &Value) -> bool {
    match v {
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        _ => false,
    }
}

/// A kind a document defines.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Gvk {
    /// The API group (empty for the core group).
    pub group: String,
    /// The version.
    pub version: String,
    /// The kind.
    pub kind: String,
}

/// Why a document or a kind's schema could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OpenApiError {
    /// The document has no `components.schemas` object.
    #[error("the OpenAPI document has no components.schemas")]
    NoComponents,
    /// The converted schema is not a structural schema this tool reads.
    #[error("the schema of {kind} cannot be read: {source}")]
    Schema {
        /// The kind.
        kind: String,
        /// Why.
        source: SchemaError,
    },
    /// Inlining its references would make a schema larger than any real kind's.
    #[error("the schema of {kind} inlines to more than {MAX_INLINED_NODES} nodes")]
    TooLarge {
        /// The kind.
        kind: String,
    },
}

/// Most schema nodes one kind may inline to. References inlined at every use can grow
/// exponentially with depth; the largest v1.28.4 kind (a Pod template's) has a few thousand.
pub const MAX_INLINED_NODES: usize = 200_000;

/// The state of inlining one kind: the components being inlined (a cycle stops there) and
/// the nodes converted so far.
struct Walk {
    stack: HashSet<String>,
    nodes: usize,
}

/// One OpenAPI v3 document of a group version, indexed by kind.
#[derive(Debug)]
pub struct Document {
    components: Map<String, Value>,
    /// Each kind's component name and whether it is namespaced (`None`: no path says).
    kinds: BTreeMap<Gvk, (String, Option<bool>)>,
}

impl Document {
    /// Reads a document (`components.schemas`, and `paths` for the kinds' scopes).
    ///
    /// # Errors
    ///
    /// [`OpenApiError::NoComponents`] when it has no schemas.
    pub fn from_value(mut doc: Value) -> Result<Self, OpenApiError> {
        let components = match doc.pointer_mut("/components/schemas").map(Value::take) {
            Some(Value::Object(m)) => m,
            _ => return Err(OpenApiError::NoComponents),
        };
        let mut kinds = BTreeMap::new();
        for (name, schema) in &components {
            for gvk in gvks(schema) {
                kinds.insert(gvk, (name.clone(), None));
            }
        }
        // A kind whose create path has `{namespace}` in it is namespaced.
        if let Some(paths) = doc.get("paths").and_then(Value::as_object) {
            for (path, item) in paths {
                let Some(post) = item.get("post") else {
                    continue;
                };
                for gvk in post
                    .get("x-kubernetes-group-version-kind")
                    .map(gvk_of)
                    .into_iter()
                    .flatten()
                {
                    if let Some(entry) = kinds.get_mut(&gvk) {
                        let namespaced = path.contains("/namespaces/{namespace}/");
                        entry.1 = Some(entry.1.unwrap_or(false) || namespaced);
                    }
                }
            }
        }
        Ok(Document { components, kinds })
    }

    /// The kinds the document defines.
    pub fn kinds(&self) -> impl Iterator<Item = &Gvk> {
        self.kinds.keys()
    }

    /// Whether `gvk` is namespaced, as the document's paths say (`None`: not said).
    pub fn namespaced(&self, gvk: &Gvk) -> Option<bool> {
        self.kinds.get(gvk).and_then(|(_, n)| *n)
    }

    /// The structural schema of `gvk`, or `None` when the document does not define it.
    ///
    /// # Errors
    ///
    /// [`OpenApiError::Schema`] when the converted schema cannot be read.
    pub fn schema(&self, gvk: &Gvk) -> Result<Option<Schema>, OpenApiError> {
        let Some((name, _)) = self.kinds.get(gvk) else {
            return Ok(None);
        };
        let mut walk = Walk {
            stack: HashSet::new(),
            nodes: 0,
        };
        let mut value = self.inline_component(name, &mut walk, 0);
        if walk.nodes > MAX_INLINED_NODES {
            return Err(OpenApiError::TooLarge {
                kind: gvk.kind.clone(),
            });
        }
        // The root's metadata is never pruned; it keeps unknown fields like a nested one.
        if let Some(props) = value.get_mut("properties").and_then(Value::as_object_mut) {
            props.insert("metadata".into(), object_meta());
        }
        let mut schema = Schema::from_value(&value).map_err(|source| OpenApiError::Schema {
            kind: gvk.kind.clone(),
            source,
        })?;
        mark_quantities(&value, &mut schema, 0);
        Ok(Some(schema))
    }

    fn inline_component(&self, name: &str, walk: &mut Walk, depth: usize) -> Value {
        if name == OBJECT_META {
            return object_meta();
        }
        if name == QUANTITY {
            return json!({QUANTITY_MARK: true});
        }
        if walk.stack.contains(name) || depth > MAX_SCHEMA_DEPTH {
            // A cycle: anything is accepted below this point.
            return json!({});
        }
        let Some(schema) = self.components.get(name) else {
            return json!({});
        };
        walk.stack.insert(name.to_string());
        let out = self.convert(schema, walk, depth + 1);
        walk.stack.remove(name);
        out
    }

    /// One schema node, converted.
    fn convert(&self, node: &Value, walk: &mut Walk, depth: usize) -> Value {
        let Some(obj) = node.as_object() else {
            return json!({});
        };
        walk.nodes += 1;
        if depth > MAX_SCHEMA_DEPTH || walk.nodes > MAX_INLINED_NODES {
            return json!({});
        }
        // `$ref`, or `allOf` of one `$ref`: the referenced schema, with this node's default.
        let referenced = obj.get("$ref").and_then(Value::as_str).or_else(|| {
            match obj
                .get("allOf")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
            {
                Some([one]) => one.get("$ref").and_then(Value::as_str),
                _ => None,
            }
        });
        if let Some(r) = referenced {
            let name = r.strip_prefix(REF_PREFIX).unwrap_or(r);
            let mut inlined = self.inline_component(name, walk, depth);
            if let (Some(default), Some(m)) = (obj.get("default"), inlined.as_object_mut())
                && default_fits(m, default)
            {
                m.insert("default".into(), default.clone());
            }
            return inlined;
        }
        if obj.get("format").and_then(Value::as_str) == Some("int-or-string") {
            return json!({"x-kubernetes-int-or-string": true});
        }
        if obj.contains_key("oneOf") || obj.contains_key("anyOf") {
            // `Quantity`: a string or a number. Other unions: accept what any branch takes.
            return json!({});
        }
        let mut out = Map::new();
        for (key, value) in obj {
            match key.as_str() {
                // A Go zero value hides a required field (a container's `name: ""`), which
                // the API server's Go validation still requires.
                "default" if is_go_zero(value) => {}
                "type"
                | "format"
                | "enum"
                | "default"
                | "required"
                | "nullable"
                | "minimum"
                | "maximum"
                | "exclusiveMinimum"
                | "exclusiveMaximum"
                | "minLength"
                | "maxLength"
                | "pattern"
                | "minItems"
                | "maxItems"
                | "uniqueItems"
                | "minProperties"
                | "maxProperties"
                | "multipleOf"
                | "x-kubernetes-list-type"
                | "x-kubernetes-list-map-keys"
                | "x-kubernetes-map-type"
                | "x-kubernetes-preserve-unknown-fields"
                | "x-kubernetes-embedded-resource"
                | "x-kubernetes-int-or-string" => {
                    out.insert(key.clone(), value.clone());
                }
                "properties" => {
                    let props: Map<String, Value> = value
                        .as_object()
                        .map(|m| {
                            m.iter()
                                .map(|(k, v)| (k.clone(), self.convert(v, walk, depth + 1)))
                                .collect()
                        })
                        .unwrap_or_default();
                    out.insert(key.clone(), Value::Object(props));
                }
                "items" | "additionalProperties" if value.is_object() => {
                    out.insert(key.clone(), self.convert(value, walk, depth + 1));
                }
                "additionalProperties" => {
                    out.insert(key.clone(), value.clone());
                }
                _ => {}
            }
        }
        // `RawExtension`, `FieldsV1`: objects whose content Go keeps as it is.
        if out.get("type").and_then(Value::as_str) == Some("object")
            && !out.contains_key("properties")
            && !out.contains_key("additionalProperties")
        {
            out.insert("x-kubernetes-preserve-unknown-fields".into(), json!(true));
        }
        Value::Object(out)
    }
}

/// Sets [`Schema::quantity`] where the converted `value` (which `schema` was read from) has
/// [`QUANTITY_MARK`].
fn mark_quantities(value: &Value, schema: &mut Schema, depth: usize) {
    if depth > MAX_SCHEMA_DEPTH {
        return;
    }
    if value.get(QUANTITY_MARK).is_some() {
        schema.quantity = true;
    }
    if let Some(props) = value.get("properties").and_then(Value::as_object) {
        for (name, child) in &mut schema.properties {
            if let Some(v) = props.get(name) {
                mark_quantities(v, child, depth + 1);
            }
        }
    }
    if let (Some(v), Some(Items::Schema(child))) = (value.get("items"), schema.items.as_mut()) {
        mark_quantities(v, child, depth + 1);
    }
    if let (Some(v), Some(AdditionalProperties::Schema(child))) = (
        value.get("additionalProperties"),
        schema.additional_properties.as_mut(),
    ) {
        mark_quantities(v, child, depth + 1);
    }
}

/// ObjectMeta anywhere: an object that keeps unknown fields (its own rules check it).
fn object_meta() -> Value {
    json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
}

/// The kinds a component is the schema of.
fn gvks(schema: &Value) -> Vec<Gvk> {
    schema
        .get("x-kubernetes-group-version-kind")
        .map(gvk_of)
        .unwrap_or_default()
}

/// An `x-kubernetes-group-version-kind`: a list on components, one object on operations.
fn gvk_of(v: &Value) -> Vec<Gvk> {
    let one = std::slice::from_ref(v);
    let all = match v {
        Value::Array(a) => a.as_slice(),
        Value::Object(_) => one,
        _ => &[],
    };
    all.iter()
        .filter_map(|g| {
            Some(Gvk {
                group: g.get("group")?.as_str()?.to_string(),
                version: g.get("version")?.as_str()?.to_string(),
                kind: g.get("kind")?.as_str()?.to_string(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each level references the next twice: 2^40 nodes inlined, stopped at the bound.
    #[test]
    fn references_that_double_at_every_level_are_refused() {
        let mut schemas = Map::new();
        for i in 0..40 {
            let next = json!({"$ref": format!("#/components/schemas/L{}", i + 1)});
            schemas.insert(
                format!("L{i}"),
                json!({"type": "object", "properties": {"a": next, "b": next}}),
            );
        }
        schemas.insert("L40".into(), json!({"type": "string"}));
        schemas.get_mut("L0").expect("root")["x-kubernetes-group-version-kind"] =
            json!([{"group": "example", "version": "v1", "kind": "Deep"}]);
        let doc = Document::from_value(json!({"paths": {}, "components": {"schemas": schemas}}))
            .expect("document");
        let gvk = Gvk {
            group: "example".into(),
            version: "v1".into(),
            kind: "Deep".into(),
        };
        let started = std::time::Instant::now();
        let err = doc.schema(&gvk).expect_err("too large");
        assert_eq!(
            err.to_string(),
            "the schema of Deep inlines to more than 200000 nodes"
        );
        // Stopped at the bound, not after inlining all of it (which would not end).
        assert!(started.elapsed() < std::time::Duration::from_secs(60));
    }

    fn doc() -> Document {
        Document::from_value(json!({
            "paths": {
                "/apis/example/v1/namespaces/{namespace}/widgets": {"post": {
                    "x-kubernetes-group-version-kind": {"group": "example", "version": "v1", "kind": "Widget"}}},
                "/apis/example/v1/gadgets": {"post": {
                    "x-kubernetes-group-version-kind": {"group": "example", "version": "v1", "kind": "Gadget"}}}
            },
            "components": {"schemas": {
                "Widget": {"type": "object",
                    "x-kubernetes-group-version-kind": [{"group": "example", "version": "v1", "kind": "Widget"}],
                    "properties": {
                        "metadata": {"allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}]},
                        "spec": {"default": {}, "allOf": [{"$ref": "#/components/schemas/Spec"}]}}},
                "Gadget": {"type": "object",
                    "x-kubernetes-group-version-kind": [{"group": "example", "version": "v1", "kind": "Gadget"}],
                    "properties": {"raw": {"type": "object", "description": "RawExtension"}}},
                "Spec": {"type": "object", "required": ["port"], "properties": {
                    "port": {"$ref": "#/components/schemas/IntOrString"},
                    "cpu": {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.api.resource.Quantity"},
                    "limits": {"type": "object", "additionalProperties": {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.api.resource.Quantity"}},
                    "mode": {"type": "string", "enum": ["a", "b"], "description": "x"},
                    "child": {"$ref": "#/components/schemas/Spec"}}},
                "IntOrString": {"format": "int-or-string", "oneOf": [{"type": "integer"}, {"type": "string"}]},
                "io.k8s.apimachinery.pkg.api.resource.Quantity": {"oneOf": [{"type": "string"}, {"type": "number"}]},
                "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {"type": "object", "properties": {"name": {"type": "string"}}}
            }}
        }))
        .expect("document")
    }

    fn gvk(kind: &str) -> Gvk {
        Gvk {
            group: "example".into(),
            version: "v1".into(),
            kind: kind.into(),
        }
    }

    #[test]
    fn a_struct_zero_default_is_dropped_where_it_is_no_value_of_the_type() {
        // kube-apiserver v1.28.4's ServicePort.targetPort: `default: {}` on an IntOrString.
        let d = Document::from_value(json!({
            "components": {"schemas": {
                "Port": {"type": "object",
                    "x-kubernetes-group-version-kind": [{"group": "", "version": "v1", "kind": "Port"}],
                    "properties": {
                        "targetPort": {"default": {}, "allOf": [{"$ref": "#/components/schemas/IntOrString"}]},
                        "name": {"type": "string", "default": ""},
                        "spec": {"default": {}, "allOf": [{"$ref": "#/components/schemas/Spec"}]}}},
                "Spec": {"type": "object", "properties": {"a": {"type": "string"}}},
                "IntOrString": {"format": "int-or-string", "oneOf": [{"type": "integer"}, {"type": "string"}]}
            }}
        }))
        .expect("document");
        let gvk = Gvk {
            group: String::new(),
            version: "v1".into(),
            kind: "Port".into(),
        };
        let s = d.schema(&gvk).expect("schema").expect("defined");
        assert_eq!(s.property("targetPort").expect("targetPort").default, None);
        assert_eq!(s.property("name").expect("name").default, None);
        assert_eq!(s.property("spec").expect("spec").default, Some(json!({})));
    }

    #[test]
    fn refs_are_inlined_and_go_types_mapped() {
        let d = doc();
        assert_eq!(d.namespaced(&gvk("Widget")), Some(true));
        assert_eq!(d.namespaced(&gvk("Gadget")), Some(false));
        let s = d.schema(&gvk("Widget")).expect("schema").expect("defined");
        let spec = s.property("spec").expect("spec");
        assert_eq!(spec.default, Some(json!({})));
        assert_eq!(spec.required, ["port"]);
        assert!(spec.property("port").expect("port").int_or_string);
        let cpu = spec.property("cpu").expect("cpu");
        assert_eq!((cpu.type_.as_deref(), cpu.quantity), (None, true));
        let limits = spec.property("limits").expect("limits");
        assert!(!limits.quantity);
        assert!(
            limits
                .additional_properties_schema()
                .expect("a value schema")
                .quantity
        );
        assert!(!spec.property("port").expect("port").quantity);
        assert_eq!(
            spec.property("mode").expect("mode").enum_values,
            [json!("a"), json!("b")]
        );
        // The cycle back to Spec accepts anything.
        assert_eq!(spec.property("child").expect("child").type_, None);
        assert!(
            s.property("metadata")
                .expect("metadata")
                .preserve_unknown_fields
        );
        let g = d.schema(&gvk("Gadget")).expect("schema").expect("defined");
        assert!(g.property("raw").expect("raw").preserve_unknown_fields);
        assert!(d.schema(&gvk("Nope")).expect("no error").is_none());
    }
}
