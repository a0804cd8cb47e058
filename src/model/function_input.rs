//! The input of function-patch-and-transform (`pt.fn.crossplane.io`, kind `Resources`): the
//! same resources, patch sets and environment patches as a Resources-mode Composition, in a
//! Pipeline step's `input`.

use serde::Deserialize;
use serde_json::Value;

use super::{
    ComposedTemplate, EnvironmentConfiguration, ModelError, Patch, PatchSet, Runtime, null_default,
};
use crate::findings::Path;
use crate::schema;

/// The API group of function-patch-and-transform's input.
pub const PATCH_AND_TRANSFORM_GROUP: &str = "pt.fn.crossplane.io";
/// The kind of function-patch-and-transform's input.
pub const PATCH_AND_TRANSFORM_KIND: &str = "Resources";

/// A pipeline step running function-patch-and-transform, with its input read.
#[derive(Debug, Clone)]
pub struct PatchAndTransformStep {
    /// `spec.pipeline[i].input`.
    pub at: Path,
    /// The input.
    pub input: PatchAndTransformInput,
}

/// A function-patch-and-transform `Resources` input.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PatchAndTransformInput {
    /// Named sets of patches that resources can reference.
    #[serde(default, deserialize_with = "null_default")]
    pub patch_sets: Vec<PatchSet>,
    /// Patches between the composite resource and the environment.
    #[serde(default)]
    pub environment: Option<EnvironmentConfiguration>,
    /// The composed resource templates.
    #[serde(default, deserialize_with = "null_default")]
    pub resources: Vec<ComposedTemplate>,
    /// The Secret a Crossplane v2 XR's connection details are written to, and the patches
    /// from the XR that name it.
    #[serde(default)]
    pub write_connection_secret_to_ref: Option<ConnectionSecretRef>,
}

/// `writeConnectionSecretToRef` of a P&T input (v0.10.x).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionSecretRef {
    /// The Secret's name.
    #[serde(default, deserialize_with = "null_default")]
    pub name: String,
    /// The Secret's namespace.
    #[serde(default, deserialize_with = "null_default")]
    pub namespace: String,
    /// Patches from the XR to `name` and `namespace` (FromCompositeFieldPath and
    /// CombineFromComposite only).
    #[serde(default, deserialize_with = "null_default")]
    pub patches: Vec<Patch>,
}

/// Whether a step input is function-patch-and-transform's (any version).
pub fn is_patch_and_transform(input: &Value) -> bool {
    let group = input
        .get("apiVersion")
        .and_then(Value::as_str)
        .and_then(|v| v.split_once('/'))
        .map(|(g, _)| g);
    group == Some(PATCH_AND_TRANSFORM_GROUP)
        && input.get("kind").and_then(Value::as_str) == Some(PATCH_AND_TRANSFORM_KIND)
}

impl PatchAndTransformInput {
    /// Reads an input with the defaults of its CRD applied (the function's own defaults:
    /// patch type FromCompositeFieldPath, string transform Format, ...). Errors name fields
    /// relative to the input.
    pub fn from_value(input: &Value) -> Result<PatchAndTransformInput, ModelError> {
        Self::from_defaulted(&with_input_defaults(input))
    }

    /// As [`PatchAndTransformInput::from_defaulted`], except the resources' bases: they are
    /// taken out of `defaulted` while the rest is read, and put back, and the templates' bases
    /// stay null until [`PatchAndTransformInput::move_bases_from`] moves them in. Reading them
    /// through serde would build every object again, hashing its keys; copying them would
    /// copy what the caller drops.
    pub fn from_defaulted_without_bases(
        defaulted: &mut Value,
    ) -> Result<PatchAndTransformInput, ModelError> {
        let Some(Value::Array(items)) = defaulted.get_mut("resources") else {
            return Self::from_defaulted(defaulted);
        };
        let bases = super::composition::take_from(items, "base");
        // A base is any value: without them the rest reads as it would with them.
        let read = Self::from_defaulted(defaulted);
        if let Some(Value::Array(items)) = defaulted.get_mut("resources") {
            super::composition::put_into(items, "base", bases);
        }
        read
    }

    /// Moves the resources' bases of `defaulted` (the input this model was read from with
    /// [`PatchAndTransformInput::from_defaulted_without_bases`]) into the templates: each item
    /// of `resources` became the template at its index. `defaulted` is left without them.
    pub fn move_bases_from(&mut self, defaulted: &mut Value) {
        let Some(Value::Array(items)) = defaulted.get_mut("resources") else {
            return;
        };
        let bases = super::composition::take_from(items, "base");
        super::composition::give_bases(&mut self.resources, bases);
    }

    /// As [`PatchAndTransformInput::from_value`], of an input whose defaults are applied
    /// already ([`with_input_defaults`]).
    pub fn from_defaulted(defaulted: &Value) -> Result<PatchAndTransformInput, ModelError> {
        // Plain serde first; a failure is read again for its path (see `Composition`).
        let mut read = match PatchAndTransformInput::deserialize(defaulted) {
            Ok(read) => read,
            Err(_) => serde_path_to_error::deserialize(defaulted)
                .map_err(|e| super::composition::model_error(defaulted, e))?,
        };
        read.mark_runtime();
        Ok(read)
    }

    /// Marks every transform as applied by function-patch-and-transform, so checks and
    /// rendering follow its runtime rather than Crossplane core's.
    fn mark_runtime(&mut self) {
        let environment = self
            .environment
            .iter_mut()
            .flat_map(|e| e.patches.iter_mut());
        let patches = self
            .patch_sets
            .iter_mut()
            .flat_map(|s| s.patches.iter_mut())
            .chain(self.resources.iter_mut().flat_map(|r| r.patches.iter_mut()))
            .chain(environment)
            .chain(
                self.write_connection_secret_to_ref
                    .iter_mut()
                    .flat_map(|r| r.patches.iter_mut()),
            );
        for patch in patches {
            // A spent budget is reported by the caller's next step; the checks stop there.
            if crate::budget::step().is_err() {
                return;
            }
            mark_patch(patch);
        }
    }
}

fn mark_patch(patch: &mut Patch) {
    for t in &mut patch.transforms {
        t.runtime = Runtime::PatchAndTransform;
    }
}

/// A copy of an input with its CRD's defaults.
pub fn with_input_defaults(input: &Value) -> Value {
    let mut defaulted = input.clone();
    apply_input_defaults(&mut defaulted);
    defaulted
}

/// Gives an input its CRD's defaults, in place.
pub fn apply_input_defaults(input: &mut Value) {
    schema::apply_defaults(input, schema::patch_and_transform_input_schema());
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What each read gives, as text: the model, or the error (its field, message and value).
    fn read(result: Result<PatchAndTransformInput, ModelError>) -> String {
        match result {
            Ok(input) => format!("{input:?}"),
            Err(e) => format!("{e:?}"),
        }
    }

    #[test]
    fn bases_moved_in_read_as_through_serde() {
        let base = json!({"apiVersion": "ec2.aws.upbound.io/v1beta1", "kind": "VPC",
            "spec": {"forProvider": {"region": "eu-west-1", "tags": {"a": "b"}}}});
        let patch =
            json!({"fromFieldPath": "spec.region", "toFieldPath": "spec.forProvider.region"});
        for input in [
            json!({"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources",
                "resources": [
                    {"name": "vpc", "base": base, "patches": [patch]},
                    {"name": "no-base", "patches": [patch]},
                    {"name": "null-base", "base": null},
                    "not an object",
                    {"name": "last", "base": "not an object either"}]}),
            // A field of the wrong type: the same error, its path and value.
            json!({"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources",
                "resources": [{"name": "vpc", "base": base, "patches": "x"}]}),
            json!({"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources",
                "resources": {"vpc": base}}),
        ] {
            let mut defaulted = with_input_defaults(&input);
            let before = defaulted.clone();
            let expected = read(PatchAndTransformInput::from_defaulted(&defaulted));
            let got = PatchAndTransformInput::from_defaulted_without_bases(&mut defaulted);
            // Put back as it was.
            assert_eq!(defaulted.to_string(), before.to_string(), "{input}");
            let got = read(got.map(|mut model| {
                model.move_bases_from(&mut defaulted);
                model
            }));
            assert_eq!(got, expected, "{input}");
        }
    }
}
