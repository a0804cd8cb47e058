//! The `apiextensions.crossplane.io/v1` CompositeResourceDefinition (XRD), as served by
//! Crossplane v1.17.
//!
//! The typed form of an XRD, with the fields of Crossplane's `v1` API. Like the Composition
//! model, enum-like fields keep their raw strings and absent or `null` fields read as their
//! defaults. XR and claim CRDs are generated from XRDs in [`crate::schema::xrd`], which
//! reads the raw value (it also handles `v2` XRDs, which this model does not describe).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::{NameRef, ObjectMeta, TypeReference, null_default};

/// Delete policy of composites: delete composed resources in the background (the default).
pub const DELETE_POLICY_BACKGROUND: &str = "Background";
/// Delete policy of composites: wait for composed resources to be deleted.
pub const DELETE_POLICY_FOREGROUND: &str = "Foreground";
/// Composition update policy: follow new Composition revisions (the default).
pub const UPDATE_POLICY_AUTOMATIC: &str = "Automatic";
/// Composition update policy: stay on the selected revision.
pub const UPDATE_POLICY_MANUAL: &str = "Manual";

/// An `apiextensions.crossplane.io/v1` CompositeResourceDefinition.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(
    description = "A CompositeResourceDefinition (XRD) defines a new type of composite resource (XR) and, optionally, of claim."
)]
pub struct CompositeResourceDefinition {
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
    /// The XRD's spec.
    #[serde(default, deserialize_with = "null_default")]
    pub spec: CompositeResourceDefinitionSpec,
    /// The XRD's status, written by Crossplane.
    #[serde(default)]
    pub status: Option<CompositeResourceDefinitionStatus>,
}

/// `spec` of an XRD.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["group", "names", "versions"]))]
pub struct CompositeResourceDefinitionSpec {
    /// API group of the composite resource and claim types.
    #[serde(default, deserialize_with = "null_default")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"message": "Value is immutable", "rule": "self == oldSelf"}
    ]))]
    pub group: String,
    /// Names of the composite resource type.
    #[serde(default, deserialize_with = "null_default")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"message": "Value is immutable", "rule": "self == oldSelf"}
    ]))]
    pub names: ResourceNames,
    /// Names of the claim type; no claim is offered when absent.
    #[serde(default)]
    #[schemars(extend("x-kubernetes-validations" = [
        {"message": "Value is immutable", "rule": "self == oldSelf"}
    ]))]
    pub claim_names: Option<ResourceNames>,
    /// Keys of the connection secret that composite resources expose.
    #[serde(default, deserialize_with = "null_default")]
    pub connection_secret_keys: Vec<String>,
    /// How composite resources are deleted when their claim is: `Background` (default) or
    /// `Foreground`.
    #[serde(default)]
    #[schemars(extend(
        "enum" = ["Background", "Foreground"],
        "x-crd-default" = "Background"
    ))]
    pub default_composite_delete_policy: Option<String>,
    /// The Composition used when a composite resource selects none.
    #[serde(default)]
    pub default_composition_ref: Option<NameRef>,
    /// The Composition every composite resource must use.
    #[serde(default)]
    #[schemars(extend("x-kubernetes-validations" = [
        {"message": "Value is immutable", "rule": "self == oldSelf"}
    ]))]
    pub enforced_composition_ref: Option<NameRef>,
    /// Whether composite resources follow new Composition revisions: `Automatic` (default)
    /// or `Manual`.
    #[serde(default)]
    #[schemars(extend(
        "enum" = ["Automatic", "Manual"],
        "x-crd-default" = "Automatic"
    ))]
    pub default_composition_update_policy: Option<String>,
    /// Labels and annotations of the generated CRDs.
    #[serde(default)]
    pub metadata: Option<CompositeResourceDefinitionSpecMetadata>,
    /// The versions of the composite resource (and claim) types.
    #[serde(default, deserialize_with = "null_default")]
    pub versions: Vec<CompositeResourceDefinitionVersion>,
    /// Conversion between the versions, copied to the generated CRDs.
    #[serde(default)]
    pub conversion: Option<CustomResourceConversion>,
}

/// The names of a generated CRD (`spec.names`, `spec.claimNames`), as in a CRD.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["kind", "plural"]))]
pub struct ResourceNames {
    /// Plural resource name, used in URLs.
    #[serde(default, deserialize_with = "null_default")]
    pub plural: String,
    /// Singular resource name.
    #[serde(default)]
    pub singular: Option<String>,
    /// Short names, for `kubectl get`.
    #[serde(default, deserialize_with = "null_default")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub short_names: Vec<String>,
    /// The kind.
    #[serde(default, deserialize_with = "null_default")]
    pub kind: String,
    /// The kind of lists (`<kind>List` when absent).
    #[serde(default)]
    pub list_kind: Option<String>,
    /// Categories the resources belong to, for `kubectl get <category>`.
    #[serde(default, deserialize_with = "null_default")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub categories: Vec<String>,
}

/// Labels and annotations given to the CRDs generated from an XRD.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct CompositeResourceDefinitionSpecMetadata {
    /// Labels of the generated CRDs.
    #[serde(default, deserialize_with = "null_default")]
    pub labels: BTreeMap<String, String>,
    /// Annotations of the generated CRDs.
    #[serde(default, deserialize_with = "null_default")]
    pub annotations: BTreeMap<String, String>,
}

/// One version of an XRD (`spec.versions[i]`).
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["name", "referenceable", "served"]))]
pub struct CompositeResourceDefinitionVersion {
    /// The version name, e.g. `v1alpha1`.
    #[serde(default, deserialize_with = "null_default")]
    pub name: String,
    /// Whether Compositions may reference this version (exactly one version is).
    #[serde(default, deserialize_with = "null_default")]
    pub referenceable: bool,
    /// Whether the version is served.
    #[serde(default, deserialize_with = "null_default")]
    pub served: bool,
    /// Whether the version is deprecated.
    #[serde(default)]
    pub deprecated: Option<bool>,
    /// Warning returned to clients of a deprecated version.
    #[serde(default)]
    #[schemars(extend("maxLength" = 256))]
    pub deprecation_warning: Option<String>,
    /// The version's schema.
    #[serde(default)]
    pub schema: Option<CompositeResourceValidation>,
    /// Extra columns of `kubectl get`.
    #[serde(default, deserialize_with = "null_default")]
    pub additional_printer_columns: Vec<CustomResourceColumnDefinition>,
}

/// The schema of an XRD version.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct CompositeResourceValidation {
    /// The OpenAPI v3 schema of the composite resource (and claim), kept raw.
    #[serde(default, rename = "openAPIV3Schema")]
    #[schemars(schema_with = "super::crds::preserved_object_schema")]
    pub open_api_v3_schema: Option<Value>,
}

/// An extra column of `kubectl get`, as in a CRD.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["jsonPath", "name", "type"]))]
pub struct CustomResourceColumnDefinition {
    /// The column header.
    #[serde(default, deserialize_with = "null_default")]
    pub name: String,
    /// The OpenAPI type of the column, e.g. `string` or `date`.
    #[serde(default, deserialize_with = "null_default")]
    pub r#type: String,
    /// The OpenAPI format of the column.
    #[serde(default)]
    pub format: Option<String>,
    /// A human-readable description of the column.
    #[serde(default)]
    pub description: Option<String>,
    /// Importance of the column: 0 is shown in the standard view, higher only in wide views.
    #[serde(default)]
    pub priority: Option<i32>,
    /// The JSON path of the value, relative to the resource.
    #[serde(default, deserialize_with = "null_default")]
    pub json_path: String,
}

/// How the API server converts between the versions of a CRD, as in a CRD.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["strategy"]))]
pub struct CustomResourceConversion {
    /// `None` (only `apiVersion` changes) or `Webhook`.
    #[serde(default, deserialize_with = "null_default")]
    pub strategy: String,
    /// The conversion webhook, for strategy `Webhook`.
    #[serde(default)]
    pub webhook: Option<WebhookConversion>,
}

/// A conversion webhook.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["conversionReviewVersions"]))]
pub struct WebhookConversion {
    /// How to reach the webhook.
    #[serde(default)]
    pub client_config: Option<WebhookClientConfig>,
    /// `ConversionReview` versions the webhook understands, preferred first.
    #[serde(default, deserialize_with = "null_default")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub conversion_review_versions: Vec<String>,
}

/// How to reach a webhook: a URL or a Service.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookClientConfig {
    /// The webhook's URL (`https://host:port/path`).
    #[serde(default)]
    pub url: Option<String>,
    /// The webhook's Service.
    #[serde(default)]
    pub service: Option<ServiceReference>,
    /// PEM CA bundle (base64) to verify the webhook's certificate.
    #[serde(default)]
    #[schemars(extend("format" = "byte"))]
    pub ca_bundle: Option<String>,
}

/// A reference to a Service.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[schemars(extend("required" = ["name", "namespace"]))]
pub struct ServiceReference {
    /// The Service's namespace.
    #[serde(default, deserialize_with = "null_default")]
    pub namespace: String,
    /// The Service's name.
    #[serde(default, deserialize_with = "null_default")]
    pub name: String,
    /// URL path of requests to the Service.
    #[serde(default)]
    pub path: Option<String>,
    /// Port of the Service (443 when absent).
    #[serde(default)]
    pub port: Option<i32>,
}

/// `status` of an XRD.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct CompositeResourceDefinitionStatus {
    /// Conditions of the XRD (`Established`, `Offered`).
    #[serde(default, deserialize_with = "null_default")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The types the XRD's controllers serve.
    #[serde(default)]
    pub controllers: Option<CompositeResourceDefinitionControllerStatus>,
}

/// A condition of a Crossplane resource.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["lastTransitionTime", "reason", "status", "type"]))]
pub struct Condition {
    /// The condition type, e.g. `Established`.
    #[serde(default, deserialize_with = "null_default")]
    pub r#type: String,
    /// `True`, `False` or `Unknown`.
    #[serde(default, deserialize_with = "null_default")]
    pub status: String,
    /// When the condition last changed (RFC 3339).
    #[serde(default, deserialize_with = "null_default")]
    #[schemars(extend("format" = "date-time"))]
    pub last_transition_time: String,
    /// Why the condition last changed, in CamelCase.
    #[serde(default, deserialize_with = "null_default")]
    pub reason: String,
    /// Details of the change.
    #[serde(default)]
    pub message: Option<String>,
    /// The `metadata.generation` the condition was set for.
    #[serde(default)]
    pub observed_generation: Option<i64>,
}

/// The types served by an XRD's controllers.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CompositeResourceDefinitionControllerStatus {
    /// The composite resource type.
    #[serde(default)]
    pub composite_resource_type: Option<TypeReference>,
    /// The claim type.
    #[serde(default)]
    pub composite_resource_claim_type: Option<TypeReference>,
}

impl CompositeResourceDefinition {
    /// Reads an XRD from a JSON value (no defaults applied); errors name the field, as
    /// [`crate::model::Composition::from_value`]'s do.
    pub fn from_value(value: &Value) -> Result<CompositeResourceDefinition, super::ModelError> {
        if !value.is_object() {
            return Err(super::ModelError {
                field: String::new(),
                message: format!(
                    "a CompositeResourceDefinition must be an object, got {}",
                    crate::schema::validation::json_type_name(value)
                ),
                value: None,
            });
        }
        serde_path_to_error::deserialize(value)
            .map_err(|e| super::composition::model_error(value, e))
    }

    /// The delete policy with its API default (`Background`).
    pub fn default_composite_delete_policy(&self) -> &str {
        self.spec
            .default_composite_delete_policy
            .as_deref()
            .unwrap_or(DELETE_POLICY_BACKGROUND)
    }

    /// The update policy with its API default (`Automatic`).
    pub fn default_composition_update_policy(&self) -> &str {
        self.spec
            .default_composition_update_policy
            .as_deref()
            .unwrap_or(UPDATE_POLICY_AUTOMATIC)
    }

    /// The version Compositions reference, if exactly one is referenceable.
    pub fn referenceable_version(&self) -> Option<&CompositeResourceDefinitionVersion> {
        let mut referenceable = self.spec.versions.iter().filter(|v| v.referenceable);
        match (referenceable.next(), referenceable.next()) {
            (Some(v), None) => Some(v),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_an_xrd() {
        let xrd = CompositeResourceDefinition::from_value(&json!({
            "apiVersion": "apiextensions.crossplane.io/v1",
            "kind": "CompositeResourceDefinition",
            "metadata": {"name": "xthings.example.org"},
            "spec": {
                "group": "example.org",
                "names": {"kind": "XThing", "plural": "xthings", "shortNames": null},
                "claimNames": {"kind": "Thing", "plural": "things", "categories": ["a"]},
                "connectionSecretKeys": ["url"],
                "defaultCompositionRef": {"name": "c"},
                "metadata": {"labels": {"a": "b"}},
                "conversion": {"strategy": "None"},
                "versions": [
                    {"name": "v1alpha1", "served": true, "referenceable": false,
                     "deprecated": true, "deprecationWarning": "old"},
                    {"name": "v1", "served": true, "referenceable": true,
                     "schema": {"openAPIV3Schema": {"type": "object"}},
                     "additionalPrinterColumns": [
                        {"name": "N", "type": "string", "jsonPath": ".spec.n", "priority": 1}
                     ]}
                ]
            },
            "status": {"conditions": [{"type": "Established", "status": "True",
                "lastTransitionTime": "2024-01-01T00:00:00Z", "reason": "WatchingCompositeResource"}]}
        }))
        .expect("valid");
        assert_eq!(xrd.spec.group, "example.org");
        assert_eq!(xrd.spec.names.kind, "XThing");
        assert!(xrd.spec.names.short_names.is_empty());
        assert_eq!(xrd.spec.claim_names.as_ref().unwrap().categories, ["a"]);
        assert_eq!(
            xrd.default_composite_delete_policy(),
            DELETE_POLICY_BACKGROUND
        );
        assert_eq!(
            xrd.default_composition_update_policy(),
            UPDATE_POLICY_AUTOMATIC
        );
        let v = xrd
            .referenceable_version()
            .expect("one referenceable version");
        assert_eq!(v.name, "v1");
        assert_eq!(
            v.schema.as_ref().and_then(|s| s.open_api_v3_schema.clone()),
            Some(json!({"type": "object"}))
        );
        assert_eq!(v.additional_printer_columns[0].priority, Some(1));
        assert_eq!(
            xrd.spec.versions[0].deprecation_warning.as_deref(),
            Some("old")
        );
        let status = xrd.status.expect("status");
        assert_eq!(status.conditions[0].reason, "WatchingCompositeResource");
    }

    #[test]
    fn wrong_types_name_the_field() {
        let e = CompositeResourceDefinition::from_value(
            &json!({"spec": {"versions": [{"name": "v1", "served": "yes"}]}}),
        )
        .unwrap_err();
        assert_eq!(e.field, "spec.versions[0].served");
        assert_eq!(e.message, "must be of type boolean, got string");
        let e = CompositeResourceDefinition::from_value(&json!("xrd")).unwrap_err();
        assert_eq!(
            e.message,
            "a CompositeResourceDefinition must be an object, got string"
        );
    }
}
