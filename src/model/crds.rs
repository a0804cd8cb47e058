//! Crossplane's Composition and CompositeResourceDefinition CRDs, generated from the model.
//!
//! `crds/apiextensions.crossplane.io_compositions.yaml` and
//! `crds/apiextensions.crossplane.io_compositeresourcedefinitions.yaml` are the output of
//! [`generated_crds_yaml`] (`composition-webhook crds --out crds/`), so that a cluster
//! without Crossplane can serve Compositions and XRDs to the webhook, with schemas that
//! cannot drift from what the model reads. The CRDs' names, versions, printer columns and
//! subresources are those of Crossplane v1.17.0; the schemas are derived with `schemars`
//! from [`Composition`] and [`CompositeResourceDefinition`] and made structural:
//!
//! - `Option<T>` becomes `T` (the API server rejects `null` where a schema is not nullable,
//!   as Crossplane's own CRDs do);
//! - a schema that accepts anything (`serde_json::Value`) keeps unknown fields
//!   (`x-kubernetes-preserve-unknown-fields: true`);
//! - `default`s: schemars writes the Rust `Default` of every `#[serde(default)]` field
//!   (`""`, `[]`, `null`), which the API server would then apply; they are dropped, and
//!   the model states the API defaults with `#[schemars(extend("x-crd-default" = ...))]`,
//!   which become the schemas' `default`s;
//! - `required`, enums, list types and CEL rules come from `#[schemars(extend(...))]` on
//!   the model; titles are dropped and `required` is sorted.
//!
//! Anything else that is not structural (`$ref`, `oneOf`, `anyOf` other than an `Option`'s,
//! a node without a type) is a [`CrdError`]. kube's `StructuralSchemaRewriter` is not
//! needed: it hoists the `oneOf`/`anyOf` of Rust enums, which the model does not have (it
//! keeps raw strings), and kube makes `Option`s `nullable`, which Crossplane's CRDs are not.
//! Nothing here performs I/O.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceDefinition, CustomResourceDefinitionNames,
    CustomResourceDefinitionSpec, CustomResourceDefinitionVersion, CustomResourceSubresourceStatus,
    CustomResourceSubresources, CustomResourceValidation, JSONSchemaProps,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde_json::{Map, Value};

use super::{APIEXTENSIONS_GROUP, CompositeResourceDefinition, Composition, Patch};

/// File name of the generated Composition CRD (in `crds/`).
pub const COMPOSITIONS_CRD_FILE: &str = "apiextensions.crossplane.io_compositions.yaml";
/// File name of the generated CompositeResourceDefinition CRD (in `crds/`).
pub const XRDS_CRD_FILE: &str = "apiextensions.crossplane.io_compositeresourcedefinitions.yaml";

/// The comment at the top of each generated file.
pub const GENERATED_HEADER: &str = "\
# Generated from composition-webhook's model (src/model/) by
# `composition-webhook crds --out crds/`. Do not edit: regenerate instead.
";

/// The extension key the model uses for API defaults (see the module docs).
const CRD_DEFAULT_KEY: &str = "x-crd-default";

/// A model type whose schema is not structural.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CrdError {
    /// A schema node that a structural schema cannot have.
    #[error("{}: {message}", if .path.is_empty() { "(root)" } else { .path.as_str() })]
    NotStructural {
        /// Where, as `properties.spec.properties.mode`.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// The schema does not read as a Kubernetes `JSONSchemaProps`.
    #[error("not a JSONSchemaProps: {0}")]
    Conversion(String),
    /// The CRD could not be written as YAML.
    #[error("writing YAML: {0}")]
    Yaml(String),
}

/// The structural `openAPIV3Schema` of a model type.
pub fn structural_schema<T: JsonSchema>() -> Result<JSONSchemaProps, CrdError> {
    let generator = SchemaSettings::draft07()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator();
    let mut value = generator.into_root_schema_for::<T>().to_value();
    make_structural(&mut value, "")?;
    serde_json::from_value(value).map_err(|e| CrdError::Conversion(e.to_string()))
}

/// Rewrites a schemars schema node (and its subschemas) as described in the module docs.
fn make_structural(node: &mut Value, path: &str) -> Result<(), CrdError> {
    let not_structural = |message: String| CrdError::NotStructural {
        path: path.to_string(),
        message,
    };
    if *node == Value::Bool(true) {
        *node = Value::Object(Map::new());
    }
    let Value::Object(map) = node else {
        return Err(not_structural(format!("schema {node} is not an object")));
    };
    // `Option<T>` of a type with subschemas: `anyOf: [T, {type: null}]`.
    if let Some(any_of) = map.remove("anyOf") {
        let mut branches: Vec<Value> = match any_of {
            Value::Array(branches) => branches,
            other => return Err(not_structural(format!("anyOf is {other}"))),
        };
        branches.retain(|b| b.get("type") != Some(&Value::from("null")));
        let [Value::Object(inner)] = branches.as_slice() else {
            return Err(not_structural(
                "anyOf is only supported for Option<T>".to_string(),
            ));
        };
        for (k, v) in inner {
            map.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
    // `Option<T>` of a plain type: `type: [T, "null"]`.
    if let Some(Value::Array(types)) = map.get("type") {
        let types: Vec<&Value> = types.iter().filter(|t| *t != "null").collect();
        let [single] = types.as_slice() else {
            return Err(not_structural(format!(
                "a schema has one type, not {types:?}"
            )));
        };
        let single = (*single).clone();
        map.insert("type".to_string(), single);
    }
    for key in [
        "$ref",
        "$defs",
        "definitions",
        "oneOf",
        "allOf",
        "not",
        "const",
    ] {
        if map.contains_key(key) {
            return Err(not_structural(format!("unsupported keyword {key}")));
        }
    }
    map.remove("title");
    map.remove("default");
    if let Some(default) = map.remove(CRD_DEFAULT_KEY) {
        map.insert("default".to_string(), default);
    }
    if let Some(Value::Array(required)) = map.get_mut("required") {
        required.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
        required.dedup();
    }
    if let Some(Value::Object(properties)) = map.get_mut("properties") {
        for (name, property) in properties.iter_mut() {
            make_structural(property, &join(path, &format!("properties.{name}")))?;
        }
    }
    for key in ["items", "additionalProperties"] {
        match map.get_mut(key) {
            Some(Value::Bool(false)) if key == "additionalProperties" => {}
            Some(sub) => make_structural(sub, &join(path, key))?,
            None => {}
        }
    }
    let has = |k: &str| map.contains_key(k);
    if !has("type")
        && !has("x-kubernetes-preserve-unknown-fields")
        && !has("x-kubernetes-int-or-string")
    {
        if has("properties") || has("items") || has("additionalProperties") || has("enum") {
            return Err(not_structural(
                "a schema with fields needs a type".to_string(),
            ));
        }
        // Accepts anything: a `serde_json::Value`.
        map.insert(
            "x-kubernetes-preserve-unknown-fields".to_string(),
            Value::Bool(true),
        );
    }
    Ok(())
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Schema of a field the CRDs declare as a bare object (`metadata`).
pub(crate) fn object_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "object"})
}

/// Schema of an embedded Kubernetes object kept as is (a template's `base`, a step's
/// `input`).
pub(crate) fn embedded_resource_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-embedded-resource": true,
        "x-kubernetes-preserve-unknown-fields": true
    })
}

/// Schema of an object kept as is (an XRD version's `openAPIV3Schema`).
pub(crate) fn preserved_object_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true
    })
}

/// A Go `int` field: an integer without `format` (controller-gen writes none for `int`).
pub(crate) fn go_int(schema: &mut Schema) {
    schema.remove("format");
}

/// The patches of `spec.environment`: a patch without `patchSetName`, of the four types
/// that make sense between the composite resource and the environment.
pub(crate) fn environment_patches_schema(generator: &mut SchemaGenerator) -> Schema {
    let mut schema = generator.subschema_for::<Vec<Patch>>();
    if let Some(Value::Object(properties)) = schema.pointer_mut("/items/properties") {
        properties.remove("patchSetName");
        if let Some(Value::Object(patch_type)) = properties.get_mut("type") {
            patch_type.insert(
                "enum".to_string(),
                serde_json::json!([
                    "FromCompositeFieldPath",
                    "ToCompositeFieldPath",
                    "CombineFromComposite",
                    "CombineToComposite"
                ]),
            );
        }
    }
    schema
}

/// What differs between the two CRDs.
struct CrdShape<'a> {
    plural: &'a str,
    kind: &'a str,
    short_names: &'a [&'a str],
    columns: Vec<CustomResourceColumnDefinition>,
    status_subresource: bool,
    schema: JSONSchemaProps,
}

fn column(name: &str, type_: &str, json_path: &str) -> CustomResourceColumnDefinition {
    CustomResourceColumnDefinition {
        name: name.to_string(),
        type_: type_.to_string(),
        json_path: json_path.to_string(),
        ..Default::default()
    }
}

/// A cluster-scoped `apiextensions.crossplane.io` CRD with one version, `v1`, served and
/// stored, in the category `crossplane`.
fn crossplane_crd(shape: CrdShape<'_>) -> CustomResourceDefinition {
    let singular = shape.kind.to_lowercase();
    CustomResourceDefinition {
        metadata: ObjectMeta {
            name: Some(format!("{}.{APIEXTENSIONS_GROUP}", shape.plural)),
            ..Default::default()
        },
        spec: CustomResourceDefinitionSpec {
            group: APIEXTENSIONS_GROUP.to_string(),
            names: CustomResourceDefinitionNames {
                categories: Some(vec!["crossplane".to_string()]),
                kind: shape.kind.to_string(),
                list_kind: Some(format!("{}List", shape.kind)),
                plural: shape.plural.to_string(),
                short_names: Some(shape.short_names.iter().map(|s| s.to_string()).collect()),
                singular: Some(singular),
            },
            scope: "Cluster".to_string(),
            versions: vec![CustomResourceDefinitionVersion {
                additional_printer_columns: Some(shape.columns),
                name: "v1".to_string(),
                schema: Some(CustomResourceValidation {
                    open_api_v3_schema: Some(shape.schema),
                }),
                served: true,
                storage: true,
                subresources: Some(CustomResourceSubresources {
                    status: shape
                        .status_subresource
                        .then(|| CustomResourceSubresourceStatus(Value::Object(Map::new()))),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        },
        status: None,
    }
}

/// The CRD of `compositions.apiextensions.crossplane.io`, with [`Composition`]'s schema.
pub fn try_composition_crd() -> Result<CustomResourceDefinition, CrdError> {
    Ok(crossplane_crd(CrdShape {
        plural: "compositions",
        kind: "Composition",
        short_names: &["comp"],
        columns: vec![
            column("XR-KIND", "string", ".spec.compositeTypeRef.kind"),
            column(
                "XR-APIVERSION",
                "string",
                ".spec.compositeTypeRef.apiVersion",
            ),
            column("AGE", "date", ".metadata.creationTimestamp"),
        ],
        status_subresource: false,
        schema: structural_schema::<Composition>()?,
    }))
}

/// The CRD of `compositeresourcedefinitions.apiextensions.crossplane.io`, with
/// [`CompositeResourceDefinition`]'s schema.
pub fn try_composite_resource_definition_crd() -> Result<CustomResourceDefinition, CrdError> {
    Ok(crossplane_crd(CrdShape {
        plural: "compositeresourcedefinitions",
        kind: "CompositeResourceDefinition",
        short_names: &["xrd", "xrds"],
        columns: vec![
            column(
                "ESTABLISHED",
                "string",
                ".status.conditions[?(@.type=='Established')].status",
            ),
            column(
                "OFFERED",
                "string",
                ".status.conditions[?(@.type=='Offered')].status",
            ),
            column("AGE", "date", ".metadata.creationTimestamp"),
        ],
        status_subresource: true,
        schema: structural_schema::<CompositeResourceDefinition>()?,
    }))
}

/// The generated Composition CRD.
///
/// # Panics
///
/// Panics if the model's schema is not structural: the model is a build-time constant,
/// and the tests of this module guard it.
pub fn composition_crd() -> CustomResourceDefinition {
    try_composition_crd().unwrap_or_else(|e| panic!("Composition CRD: {e}"))
}

/// The generated CompositeResourceDefinition CRD.
///
/// # Panics
///
/// As [`composition_crd`].
pub fn composite_resource_definition_crd() -> CustomResourceDefinition {
    try_composite_resource_definition_crd()
        .unwrap_or_else(|e| panic!("CompositeResourceDefinition CRD: {e}"))
}

/// The CRD files of `crds/`: file name and exact text (header comment, then one YAML
/// document), Compositions first.
pub fn try_generated_crds_yaml() -> Result<Vec<(&'static str, String)>, CrdError> {
    let crds = [
        (COMPOSITIONS_CRD_FILE, try_composition_crd()?),
        (XRDS_CRD_FILE, try_composite_resource_definition_crd()?),
    ];
    crds.into_iter()
        .map(|(file, crd)| {
            let yaml = serde_saphyr::to_string(&crd).map_err(|e| CrdError::Yaml(e.to_string()))?;
            Ok((file, format!("{GENERATED_HEADER}---\n{yaml}")))
        })
        .collect()
}

/// The CRD files of `crds/` (see [`try_generated_crds_yaml`]).
///
/// # Panics
///
/// As [`composition_crd`], or if a CRD cannot be written as YAML (it always can: it is
/// plain data).
pub fn generated_crds_yaml() -> Vec<(&'static str, String)> {
    try_generated_crds_yaml().unwrap_or_else(|e| panic!("generated CRDs: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{CONVERT_FORMATS, READINESS_TYPES, STRING_CONVERSIONS};
    use serde_json::json;

    fn structural(mut v: Value) -> Result<Value, CrdError> {
        make_structural(&mut v, "")?;
        Ok(v)
    }

    #[test]
    fn options_lose_their_null() {
        let s = structural(json!({"type": "object", "properties": {
            "a": {"type": ["string", "null"], "description": "d"},
            "b": {"anyOf": [{"type": "object", "properties": {"x": {"type": "integer"}}},
                            {"type": "null"}], "description": "outer"}
        }}))
        .unwrap();
        assert_eq!(
            s["properties"]["a"],
            json!({"type": "string", "description": "d"})
        );
        assert_eq!(
            s["properties"]["b"],
            json!({"type": "object", "description": "outer",
                   "properties": {"x": {"type": "integer"}}})
        );
    }

    #[test]
    fn anything_keeps_unknown_fields() {
        let s = structural(json!({"type": "object", "properties": {
            "v": true,
            "d": {"description": "any"},
            "m": {"type": "object", "additionalProperties": true}
        }}))
        .unwrap();
        let keep = json!({"x-kubernetes-preserve-unknown-fields": true});
        assert_eq!(s["properties"]["v"], keep);
        assert_eq!(
            s["properties"]["d"]["x-kubernetes-preserve-unknown-fields"],
            true
        );
        assert_eq!(s["properties"]["m"]["additionalProperties"], keep);
    }

    #[test]
    fn only_stated_defaults_are_kept() {
        let s = structural(
            json!({"type": "object", "title": "T", "required": ["b", "a"],
            "properties": {
                "a": {"type": "string", "default": ""},
                "b": {"type": "string", "default": "", "x-crd-default": "B"}
            }}),
        )
        .unwrap();
        assert_eq!(
            s,
            json!({"type": "object", "required": ["a", "b"], "properties": {
                "a": {"type": "string"},
                "b": {"type": "string", "default": "B"}
            }})
        );
    }

    #[test]
    fn non_structural_schemas_are_errors() {
        let e = structural(json!({"type": "object", "properties": {
            "a": {"oneOf": [{"type": "string"}, {"type": "integer"}]}
        }}))
        .unwrap_err();
        assert_eq!(e.to_string(), "properties.a: unsupported keyword oneOf");
        let e = structural(json!({"properties": {"a": {"type": "string"}}})).unwrap_err();
        assert_eq!(e.to_string(), "(root): a schema with fields needs a type");
        let e = structural(json!({"type": ["string", "integer"]})).unwrap_err();
        assert!(
            e.to_string().starts_with("(root): a schema has one type"),
            "{e}"
        );
        let e = structural(json!({"type": "array", "items": {"$ref": "#/$defs/X"}})).unwrap_err();
        assert_eq!(e.to_string(), "items: unsupported keyword $ref");
        assert!(structural(json!(false)).is_err());
    }

    #[test]
    fn both_crds_generate() {
        let files = try_generated_crds_yaml().expect("the model's schemas are structural");
        let names: Vec<&str> = files.iter().map(|(f, _)| *f).collect();
        assert_eq!(names, [COMPOSITIONS_CRD_FILE, XRDS_CRD_FILE]);
        for (_, text) in &files {
            assert!(text.starts_with(GENERATED_HEADER));
        }
    }

    /// The enums of the schema are the values the model's checks know.
    #[test]
    fn enums_agree_with_the_model_constants() {
        let crd = serde_json::to_value(composition_crd()).unwrap();
        let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
        let enum_of = |pointer: &str| -> Vec<String> {
            let mut values: Vec<String> = spec
                .pointer(pointer)
                .and_then(|s| s["enum"].as_array())
                .unwrap_or_else(|| panic!("no enum at {pointer}"))
                .iter()
                .map(|v| v.as_str().unwrap_or_default().to_string())
                .collect();
            values.sort();
            values
        };
        let sorted = |values: &[&str]| {
            let mut v: Vec<String> = values.iter().map(|s| s.to_string()).collect();
            v.sort();
            v
        };
        let resources = "/resources/items/properties";
        assert_eq!(
            enum_of(&format!(
                "{resources}/readinessChecks/items/properties/type"
            )),
            sorted(&READINESS_TYPES)
        );
        let transform = format!("{resources}/patches/items/properties/transforms/items/properties");
        assert_eq!(
            enum_of(&format!("{transform}/string/properties/convert")),
            sorted(&STRING_CONVERSIONS)
        );
        assert_eq!(
            enum_of(&format!("{transform}/convert/properties/format")),
            sorted(&CONVERT_FORMATS)
        );
        let patch_types = enum_of(&format!("{resources}/patches/items/properties/type"));
        for t in [
            super::super::FROM_COMPOSITE_FIELD_PATH,
            super::super::FROM_ENVIRONMENT_FIELD_PATH,
            super::super::PATCH_SET,
            super::super::TO_COMPOSITE_FIELD_PATH,
            super::super::TO_ENVIRONMENT_FIELD_PATH,
            super::super::COMBINE_FROM_COMPOSITE,
            super::super::COMBINE_FROM_ENVIRONMENT,
            super::super::COMBINE_TO_COMPOSITE,
            super::super::COMBINE_TO_ENVIRONMENT,
        ] {
            assert!(patch_types.iter().any(|p| p == t), "{t}");
        }
        assert_eq!(patch_types.len(), 9);
        let env = enum_of("/environment/properties/patches/items/properties/type");
        assert_eq!(env.len(), 4);
        assert!(
            spec.pointer("/environment/properties/patches/items/properties/patchSetName")
                .is_none()
        );
    }
}
