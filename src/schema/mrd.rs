//! ManagedResourceDefinitions (Crossplane v2.0+): a provider ships one per managed resource
//! kind, with the CRD's own spec (group, names, scope, versions and their schemas) and a
//! `spec.state`. Crossplane creates the CRD only for an *Active* MRD (one a
//! ManagedResourceActivationPolicy activated, or set Active by hand); until then the API
//! server does not serve the kind. The MRD's schema is the schema the CRD will have.

use serde_json::Value;

use super::crd::Crd;
use super::structural::SchemaError;

/// The API group of ManagedResourceDefinitions and their activation policies.
pub const MRD_GROUP: &str = "apiextensions.crossplane.io";

/// Whether a document is a ManagedResourceDefinition.
pub fn is_mrd(api_version: &str, kind: &str) -> bool {
    kind == "ManagedResourceDefinition" && api_version == "apiextensions.crossplane.io/v1alpha1"
}

/// `spec.state` of an MRD.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum MrdState {
    /// Crossplane creates (and keeps) the kind's CRD.
    Active,
    /// No CRD: the API server refuses the kind (the default).
    Inactive,
}

impl MrdState {
    /// The state of `spec.state`: Active only when it says so (the CRD defaults it to
    /// Inactive).
    pub fn parse(state: Option<&str>) -> Self {
        match state {
            Some("Active") => MrdState::Active,
            _ => MrdState::Inactive,
        }
    }

    /// `Active` or `Inactive`.
    pub fn name(self) -> &'static str {
        match self {
            MrdState::Active => "Active",
            MrdState::Inactive => "Inactive",
        }
    }
}

/// An MRD read: the CRD it stands for, and its state.
#[derive(Debug, Clone)]
pub struct Mrd {
    /// The MRD's `metadata.name` (`<plural>.<group>`, as its CRD's).
    pub name: String,
    /// The CRD Crossplane creates from it (same name, group, names, scope and versions).
    pub crd: Crd,
    /// `spec.state`.
    pub state: MrdState,
    /// Its `Established` condition, when it has one: whether its CRD is established.
    pub established: Option<bool>,
}

impl Mrd {
    /// Reads an MRD document.
    pub fn from_value(value: &Value) -> Result<Mrd, SchemaError> {
        // The spec is a CRD's spec with two more fields (state, connectionDetails), which
        // the CRD reader ignores; read it as the v1 CRD it becomes.
        let mut crd_value = serde_json::Map::new();
        crd_value.insert(
            "apiVersion".into(),
            Value::String("apiextensions.k8s.io/v1".into()),
        );
        for field in ["metadata", "spec"] {
            if let Some(v) = value.get(field) {
                crd_value.insert(field.into(), v.clone());
            }
        }
        let crd = Crd::from_value(&Value::Object(crd_value))?;
        let state = MrdState::parse(value.pointer("/spec/state").and_then(Value::as_str));
        let established = value
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|conditions| {
                conditions
                    .iter()
                    .find(|c| c.get("type").and_then(Value::as_str) == Some("Established"))
            })
            .and_then(|c| c.get("status").and_then(Value::as_str))
            .map(|s| s == "True");
        Ok(Mrd {
            name: crd.name.clone(),
            crd,
            state,
            established,
        })
    }
}

/// The `spec.activate` entries of a ManagedResourceActivationPolicy that would activate an
/// MRD of `group`: its name, or a wildcard over its provider's groups (policies match names
/// with Go's `filepath.Match`: [`super::mrap`]).
pub fn activation_entries(group: &str) -> String {
    let provider_wide = group
        .split_once('.')
        .map(|(_, rest)| rest)
        .filter(|rest| rest.contains('.'))
        .unwrap_or(group);
    format!("its name or \"*.{provider_wide}\"")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_mrd_reads_as_its_crd_with_its_state() {
        let v = json!({
            "apiVersion": "apiextensions.crossplane.io/v1alpha1",
            "kind": "ManagedResourceDefinition",
            "metadata": {"name": "buckets.s3.aws.m.upbound.io"},
            "spec": {"group": "s3.aws.m.upbound.io", "scope": "Namespaced",
                     "names": {"kind": "Bucket", "plural": "buckets"},
                     "connectionDetails": [{"name": "k", "description": "d"}],
                     "versions": [{"name": "v1beta1", "served": true, "storage": true,
                                   "schema": {"openAPIV3Schema": {"type": "object"}}}]},
            "status": {"conditions": [{"type": "Established", "status": "False"}]}
        });
        assert!(is_mrd(
            "apiextensions.crossplane.io/v1alpha1",
            "ManagedResourceDefinition"
        ));
        let mrd = Mrd::from_value(&v).expect("reads");
        assert_eq!(mrd.name, "buckets.s3.aws.m.upbound.io");
        assert_eq!(mrd.crd.names.kind, "Bucket");
        assert_eq!(mrd.state, MrdState::Inactive);
        assert_eq!(mrd.established, Some(false));
        assert_eq!(
            activation_entries("s3.aws.m.upbound.io"),
            "its name or \"*.aws.m.upbound.io\""
        );
    }
}
