//! The Composition object, its resources and pipeline steps.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::{EnvironmentConfiguration, ModelError, Patch, PatchSet, ReadinessCheck, null_default};
use crate::schema;
use crate::schema::validation::json_type_name;

/// Composition mode: classic patch-and-transform resources.
pub const MODE_RESOURCES: &str = "Resources";
/// Composition mode: a pipeline of functions.
pub const MODE_PIPELINE: &str = "Pipeline";

/// An `apiextensions.crossplane.io/v1` Composition.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(
    description = "A Composition tells Crossplane how to compose resources for a type of composite resource (XR), with patch-and-transform resources or a pipeline of functions."
)]
pub struct Composition {
    /// `apiVersion` of the object.
    #[serde(default, deserialize_with = "null_default")]
    pub api_version: String,
    /// `kind` of the object.
    #[serde(default, deserialize_with = "null_default")]
    pub kind: String,
    /// The object's metadata (the parts validation uses).
    #[serde(default, deserialize_with = "null_default")]
    #[schemars(schema_with = "super::crds::object_schema", description = "")]
    pub metadata: ObjectMeta,
    /// The Composition's spec.
    #[serde(default, deserialize_with = "null_default")]
    pub spec: CompositionSpec,
}

/// The parts of `metadata` that validation uses.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    /// `metadata.name`.
    #[serde(default, deserialize_with = "null_default")]
    pub name: String,
    /// `metadata.generateName`.
    #[serde(default, deserialize_with = "null_default")]
    pub generate_name: String,
    /// `metadata.annotations`.
    #[serde(default, deserialize_with = "null_default")]
    pub annotations: BTreeMap<String, String>,
    /// `metadata.labels`.
    #[serde(default, deserialize_with = "null_default")]
    pub labels: BTreeMap<String, String>,
}

/// `spec` of a Composition.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["compositeTypeRef"]))]
pub struct CompositionSpec {
    /// The type of composite resource this Composition composes.
    #[serde(default, deserialize_with = "null_default")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"message": "Value is immutable", "rule": "self == oldSelf"}
    ]))]
    pub composite_type_ref: TypeReference,
    /// `Resources` (default) or `Pipeline`; raw, empty when absent.
    #[serde(default, deserialize_with = "null_default")]
    #[schemars(
        description = "How resources are composed: `Resources` (patch-and-transform templates) or `Pipeline` (functions).",
        extend("enum" = ["Resources", "Pipeline"], "x-crd-default" = "Resources")
    )]
    pub mode: String,
    /// Named sets of patches that resources can reference.
    #[serde(default, deserialize_with = "null_default")]
    pub patch_sets: Vec<PatchSet>,
    /// The environment configuration (Crossplane v1.13-v1.17).
    #[serde(default)]
    pub environment: Option<EnvironmentConfiguration>,
    /// The composed resource templates (Resources mode).
    #[serde(default, deserialize_with = "null_default")]
    pub resources: Vec<ComposedTemplate>,
    /// The function pipeline (Pipeline mode).
    #[serde(default, deserialize_with = "null_default")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["step"]))]
    pub pipeline: Vec<PipelineStep>,
    /// Namespace for composite connection secrets.
    #[serde(default)]
    pub write_connection_secrets_to_namespace: Option<String>,
    /// Secret store config for connection details.
    #[serde(default)]
    #[schemars(extend("x-crd-default" = {"name": "default"}))]
    pub publish_connection_details_with_store_config_ref: Option<NameRef>,
}

/// `apiVersion` and `kind` of a referenced type.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["apiVersion", "kind"]))]
pub struct TypeReference {
    /// `group/version`.
    #[serde(default, deserialize_with = "null_default")]
    pub api_version: String,
    /// The kind.
    #[serde(default, deserialize_with = "null_default")]
    pub kind: String,
}

/// A reference by name.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq, JsonSchema)]
#[schemars(extend("required" = ["name"]))]
pub struct NameRef {
    /// The referenced name.
    #[serde(default, deserialize_with = "null_default")]
    pub name: String,
}

/// A composed resource template (`spec.resources[i]`).
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["base"]))]
pub struct ComposedTemplate {
    /// The template's name (optional in the API, required with functions).
    #[serde(default)]
    pub name: Option<String>,
    /// The base object (any Kubernetes resource).
    #[serde(default)]
    #[schemars(schema_with = "super::crds::embedded_resource_schema")]
    pub base: Value,
    /// Patches applied to the base.
    #[serde(default, deserialize_with = "null_default")]
    pub patches: Vec<Patch>,
    /// Connection details exposed from the composed resource.
    #[serde(default, deserialize_with = "null_default")]
    pub connection_details: Vec<ConnectionDetail>,
    /// Readiness checks of the composed resource.
    #[serde(default, deserialize_with = "null_default")]
    #[schemars(extend("x-crd-default" = [
        {"type": "MatchCondition", "matchCondition": {"type": "Ready", "status": "True"}}
    ]))]
    pub readiness_checks: Vec<ReadinessCheck>,
}

impl ComposedTemplate {
    /// `apiVersion` of the base, if it is a string.
    pub fn base_api_version(&self) -> Option<&str> {
        crate::json::field(&self.base, "apiVersion").and_then(Value::as_str)
    }

    /// `kind` of the base, if it is a string.
    pub fn base_kind(&self) -> Option<&str> {
        crate::json::field(&self.base, "kind").and_then(Value::as_str)
    }
}

/// Connection detail type: read a key of the composed resource's connection secret.
pub const CONNECTION_FROM_SECRET_KEY: &str = "FromConnectionSecretKey";
/// Connection detail type: read a field of the composed resource.
pub const CONNECTION_FROM_FIELD_PATH: &str = "FromFieldPath";
/// Connection detail type: a fixed value.
pub const CONNECTION_FROM_VALUE: &str = "FromValue";

/// A connection detail (`spec.resources[i].connectionDetails[j]`).
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionDetail {
    /// Key in the composite's connection secret.
    #[serde(default)]
    pub name: Option<String>,
    /// Explicit type; inferred at run time when absent.
    #[serde(default)]
    #[schemars(extend("enum" = ["FromConnectionSecretKey", "FromFieldPath", "FromValue"]))]
    pub r#type: Option<String>,
    /// Key of the composed resource's connection secret.
    #[serde(default)]
    pub from_connection_secret_key: Option<String>,
    /// Field path in the composed resource.
    #[serde(default)]
    pub from_field_path: Option<String>,
    /// Fixed value.
    #[serde(default)]
    pub value: Option<String>,
}

impl ConnectionDetail {
    /// The type the runtime uses: explicit `type`, else inferred from which field is set
    /// (value, then fromConnectionSecretKey, then fromFieldPath), else FromConnectionSecretKey.
    pub fn effective_type(&self) -> &str {
        if let Some(t) = self.r#type.as_deref() {
            return t;
        }
        if self.value.is_some() {
            CONNECTION_FROM_VALUE
        } else if self.from_connection_secret_key.is_some() {
            CONNECTION_FROM_SECRET_KEY
        } else if self.from_field_path.is_some() {
            CONNECTION_FROM_FIELD_PATH
        } else {
            CONNECTION_FROM_SECRET_KEY
        }
    }
}

/// A pipeline step (`spec.pipeline[i]`).
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["step", "functionRef"]))]
pub struct PipelineStep {
    /// The step's name, unique within the pipeline.
    #[serde(default, deserialize_with = "null_default")]
    pub step: String,
    /// The function to run.
    #[serde(default, deserialize_with = "null_default")]
    pub function_ref: NameRef,
    /// The function's input (opaque unless it is function-patch-and-transform's).
    #[serde(default)]
    #[schemars(
        schema_with = "super::crds::embedded_resource_schema",
        description = "The function's input: a Kubernetes-style object the function defines."
    )]
    pub input: Option<Value>,
    /// Credentials passed to the function.
    #[serde(default, deserialize_with = "null_default")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub credentials: Vec<FunctionCredentials>,
}

/// Credential source: none.
pub const CREDENTIAL_SOURCE_NONE: &str = "None";
/// Credential source: a Secret.
pub const CREDENTIAL_SOURCE_SECRET: &str = "Secret";

/// Credentials of a pipeline step (`spec.pipeline[i].credentials[j]`).
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["name", "source"]))]
pub struct FunctionCredentials {
    /// Name of the credential, unique within the step.
    #[serde(default, deserialize_with = "null_default")]
    pub name: String,
    /// `None` or `Secret`.
    #[serde(default, deserialize_with = "null_default")]
    #[schemars(extend("enum" = ["None", "Secret"]))]
    pub source: String,
    /// The Secret, when source is `Secret`.
    #[serde(default)]
    pub secret_ref: Option<SecretReference>,
}

/// A reference to a Secret.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[schemars(extend("required" = ["name", "namespace"]))]
pub struct SecretReference {
    /// Secret name.
    #[serde(default, deserialize_with = "null_default")]
    pub name: String,
    /// Secret namespace.
    #[serde(default, deserialize_with = "null_default")]
    pub namespace: String,
}

impl Composition {
    /// Reads a Composition from a JSON value as the API server would hand it to a webhook:
    /// the defaults of `api`'s Composition CRD are applied first (idempotent for objects
    /// that already came through the API server), then the typed model is read.
    pub fn from_value(
        value: &Value,
        api: &schema::CompositionApi,
    ) -> Result<Composition, ModelError> {
        Self::from_defaulted_value(&with_api_defaults(value, api))
    }

    /// Reads a Composition without applying defaults.
    pub fn from_defaulted_value(value: &Value) -> Result<Composition, ModelError> {
        if !value.is_object() {
            return Err(ModelError {
                field: String::new(),
                message: format!(
                    "a Composition must be an object, got {}",
                    json_type_name(value)
                ),
                value: None,
            });
        }
        // Plain serde first: serde_path_to_error allocates a segment per key it passes.
        // Only a failure (the same, deterministic one) is read again for its path.
        match Composition::deserialize(value) {
            Ok(c) => Ok(c),
            Err(_) => serde_path_to_error::deserialize(value).map_err(|e| model_error(value, e)),
        }
    }

    /// As [`Composition::from_defaulted_value`], moving the resources' bases and the pipeline
    /// steps' inputs out of `value` instead of copying them (they are most of a Composition).
    /// On success `value` is left with `null` in their places; on an error it is as it was.
    pub fn from_defaulted_value_mut(value: &mut Value) -> Result<Composition, ModelError> {
        if !value.is_object() {
            return Self::from_defaulted_value(value);
        }
        let bases = take_members(value, "resources", "base");
        let inputs = take_members(value, "pipeline", "input");
        match Composition::deserialize(&*value) {
            Ok(mut c) => {
                give_taken(&mut c, bases, inputs);
                Ok(c)
            }
            Err(_) => {
                put_members(value, "resources", "base", bases);
                put_members(value, "pipeline", "input", inputs);
                serde_path_to_error::deserialize(&*value).map_err(|e| model_error(value, e))
            }
        }
    }

    /// As [`Composition::from_defaulted_value_mut`], reading `value` by value: its strings are
    /// moved into the model instead of copied. An error needs `value` as it was to be told
    /// (its path and the value there), and `value` is used up by then: [`Unread`] says what
    /// is known, and the caller that can reads the same JSON again into
    /// [`Composition::from_defaulted_value_mut`] for the error.
    pub fn from_defaulted_value_owned(mut value: Value) -> Result<Composition, Unread> {
        let Some(object) = value.as_object_mut() else {
            return Err(Unread {
                metadata: ObjectMeta::default(),
                message: format!(
                    "a Composition must be an object, got {}",
                    json_type_name(&value)
                ),
            });
        };
        // Read first, by reference (a few strings), so that an error still knows the name and
        // the mode annotation.
        let metadata = match object.get_mut("metadata").map(Value::take) {
            Some(m) => super::null_default::<_, ObjectMeta>(&m).map_err(|e| Unread {
                metadata: ObjectMeta::default(),
                message: e.to_string(),
            })?,
            None => ObjectMeta::default(),
        };
        // Taken out first: read through serde, every object of a base would be built again.
        let bases = take_members(&mut value, "resources", "base");
        let inputs = take_members(&mut value, "pipeline", "input");
        let mut c = match Composition::deserialize(value) {
            Ok(c) => c,
            Err(e) => {
                return Err(Unread {
                    metadata,
                    message: e.to_string(),
                });
            }
        };
        c.metadata = metadata;
        give_taken(&mut c, bases, inputs);
        Ok(c)
    }

    /// The mode, with the API default (`Resources`) when absent.
    pub fn mode(&self) -> &str {
        if self.spec.mode.is_empty() {
            MODE_RESOURCES
        } else {
            &self.spec.mode
        }
    }
}

/// What is known of a Composition that could not be read by value into its model
/// ([`Composition::from_defaulted_value_owned`]).
#[derive(Debug)]
pub struct Unread {
    /// Its metadata, when that could be read.
    pub metadata: ObjectMeta,
    /// serde's error, without the field it is at.
    pub message: String,
}

/// Takes member `member` of every object item of `spec.<list>`, leaving `null`; a `null`
/// member is left alone (the model reads it as absent).
fn take_members(value: &mut Value, list: &str, member: &str) -> Vec<(usize, Value)> {
    match value.get_mut("spec").and_then(|s| s.get_mut(list)) {
        Some(Value::Array(items)) => take_from(items, member),
        _ => Vec::new(),
    }
}

/// Gives the model read without them the bases and pipeline inputs [`take_members`] took:
/// each item became one template or step, at its index (null where the member was taken, as
/// the model reads a null base or input).
fn give_taken(c: &mut Composition, bases: Vec<(usize, Value)>, inputs: Vec<(usize, Value)>) {
    give_bases(&mut c.spec.resources, bases);
    for (i, input) in inputs {
        if let Some(step) = c.spec.pipeline.get_mut(i) {
            step.input = Some(input);
        }
    }
}

/// Puts back what [`take_members`] took.
fn put_members(value: &mut Value, list: &str, member: &str, taken: Vec<(usize, Value)>) {
    if let Some(Value::Array(items)) = value.get_mut("spec").and_then(|s| s.get_mut(list)) {
        put_into(items, member, taken);
    }
}

/// Takes member `member` of every object of `items`, leaving `null`, with its index; a
/// `null` member is left alone.
pub(super) fn take_from(items: &mut [Value], member: &str) -> Vec<(usize, Value)> {
    items
        .iter_mut()
        .enumerate()
        .filter_map(|(i, item)| {
            let slot = item.as_object_mut()?.get_mut(member)?;
            (!slot.is_null()).then(|| (i, slot.take()))
        })
        .collect()
}

/// Gives each template the base [`take_from`] took from the item it was read from (the
/// item at its index).
pub(super) fn give_bases(templates: &mut [ComposedTemplate], bases: Vec<(usize, Value)>) {
    for (i, base) in bases {
        if let Some(t) = templates.get_mut(i) {
            t.base = base;
        }
    }
}

/// Puts back what [`take_from`] took.
pub(super) fn put_into(items: &mut [Value], member: &str, taken: Vec<(usize, Value)>) {
    for (i, v) in taken {
        if let Some(slot) = items
            .get_mut(i)
            .and_then(Value::as_object_mut)
            .and_then(|o| o.get_mut(member))
        {
            *slot = v;
        }
    }
}

/// A copy of a Composition with the defaults the API server gives it (those of `api`'s
/// Composition CRD); idempotent for objects that already came through the API server.
pub fn with_api_defaults(value: &Value, api: &schema::CompositionApi) -> Value {
    let mut defaulted = value.clone();
    schema::apply_defaults(&mut defaulted, api.schema());
    defaulted
}

/// Turns serde's error into a field error: the path as Kubernetes writes it, and what was
/// expected in words a Crossplane user knows.
pub(super) fn model_error(
    root: &Value,
    e: serde_path_to_error::Error<serde_json::Error>,
) -> ModelError {
    let mut field = String::new();
    let mut node = Some(root);
    for segment in e.path().iter() {
        match segment {
            serde_path_to_error::Segment::Seq { index } => {
                field.push_str(&format!("[{index}]"));
                node = node.and_then(|n| n.get(*index));
            }
            serde_path_to_error::Segment::Map { key } => {
                // Map keys go in brackets (`labels[app.kubernetes.io/name]`), field names
                // after a dot. serde does not say which this is: the model's maps are the
                // ones below, and no field name has other characters than these.
                let in_map = MAP_FIELDS.iter().any(|m| field.ends_with(m))
                    || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if in_map {
                    field.push_str(&format!("[{key}]"));
                } else {
                    if !field.is_empty() {
                        field.push('.');
                    }
                    field.push_str(key);
                }
                node = node.and_then(|n| n.get(key));
            }
            serde_path_to_error::Segment::Enum { variant } => {
                field.push('.');
                field.push_str(variant);
            }
            serde_path_to_error::Segment::Unknown => {}
        }
    }
    let inner = e.into_inner().to_string();
    let message = match node {
        Some(v) => match expected_type(&inner) {
            Some(expected) => format!("must be of type {expected}, got {}", json_type_name(v)),
            None => inner,
        },
        None => inner,
    };
    ModelError {
        field,
        message,
        value: node.cloned(),
    }
}

/// The fields of the model that are maps keyed by user data.
const MAP_FIELDS: [&str; 4] = ["annotations", "labels", "defaultData", ".map"];

/// Maps serde's "expected ..." wording to OpenAPI type names.
fn expected_type(serde_message: &str) -> Option<&'static str> {
    let expected = serde_message.split(", expected ").nth(1)?;
    Some(
        if expected.starts_with("a string") || expected.starts_with("a borrowed string") {
            "string"
        } else if expected.starts_with("a sequence") {
            "array"
        } else if expected.starts_with("i64") || expected.starts_with("u64") {
            "integer"
        } else if expected.starts_with("a boolean") {
            "boolean"
        } else if expected.starts_with("struct") || expected.starts_with("a map") {
            "object"
        } else {
            return None;
        },
    )
}
