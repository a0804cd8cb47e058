//! The `apiextensions.crossplane.io/v1` Composition, as served by Crossplane v1.14 to v1.20.
//!
//! Fields keep the raw strings of the API (`type: FromCompositeFieldPath`), because several
//! checks compare the raw value, exactly as upstream does. Objects read from files get the
//! defaults the Composition CRD would give them through the API server first
//! ([`Composition::from_value`] applies them). Unknown fields are ignored; a known field of the
//! wrong type is a [`ModelError`] naming the field.
//!
//! [`CompositeResourceDefinition`] is the typed XRD (v1). Both types derive `JsonSchema`:
//! [`crds`] generates Crossplane's Composition and XRD CRDs from them, so the attributes
//! `#[schemars(...)]` on the model state what the API server enforces (enums, defaults,
//! required fields) and must follow Crossplane's CRDs.

mod composition;
pub mod crds;
mod definition;
mod environment;
pub mod function;
mod function_input;
mod patch;
mod readiness;
mod resource_set;
mod transform;

pub use composition::*;
pub use definition::*;
pub use environment::*;
pub use function_input::*;
pub use patch::*;
pub use readiness::*;
pub use resource_set::*;
pub use transform::*;

use serde::{Deserialize, Deserializer};

/// The API group of Compositions and XRDs.
pub const APIEXTENSIONS_GROUP: &str = "apiextensions.crossplane.io";

/// The mode annotation (Crossplane v1.14+).
pub const MODE_ANNOTATION: &str = "crossplane.io/composition-schema-aware-validation-mode";

/// The mode annotation of Crossplane v1.12-v1.13, still honoured (see [`crate::mode`]).
pub const LEGACY_MODE_ANNOTATION: &str = "crossplane.io/composition-validation-mode";

/// A known field of a Composition has a value of the wrong type.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ModelError {
    /// Kubernetes-style path of the field, e.g. `spec.resources[0].patches[1].transforms`.
    pub field: String,
    /// What is wrong, e.g. `must be of type array, got string`.
    pub message: String,
    /// The offending value, when it could be found in the input.
    pub value: Option<serde_json::Value>,
}

/// Deserializes `null` (and absence, with `#[serde(default)]`) as the type's default, as the
/// API server treats a null list or string in a non-nullable field.
pub(crate) fn null_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Crossplane v1's Composition API: these Compositions are in Resources mode.
    fn v1() -> crate::schema::CompositionApi {
        crate::schema::CompositionApi::embedded(crate::schema::CrossplaneVersion::V1)
    }

    #[test]
    fn files_get_the_composition_crd_defaults() {
        let c = Composition::from_value(&json!({
            "apiVersion": "apiextensions.crossplane.io/v1",
            "kind": "Composition",
            "metadata": {"name": "x"},
            "spec": {
                "compositeTypeRef": {"apiVersion": "example.org/v1", "kind": "XThing"},
                "resources": [{
                    "base": {"apiVersion": "a.example.org/v1", "kind": "A"},
                    "patches": [{
                        "fromFieldPath": "spec.a",
                        "transforms": [
                            {"type": "string", "string": {"fmt": "%s"}},
                            {"type": "math", "math": {"multiply": 2}},
                            {"type": "match", "match": {"patterns": [{"literal": "a", "result": 1}]}}
                        ]
                    }]
                }]
            }
        }), &v1())
        .expect("valid");
        assert_eq!(c.spec.mode, "Resources");
        let r = &c.spec.resources[0];
        assert_eq!(
            r.readiness_checks,
            [ReadinessCheck {
                r#type: "MatchCondition".into(),
                match_condition: Some(MatchConditionReadinessCheck {
                    r#type: "Ready".into(),
                    status: "True".into()
                }),
                ..Default::default()
            }]
        );
        let p = &r.patches[0];
        assert_eq!(p.r#type, FROM_COMPOSITE_FIELD_PATH);
        assert_eq!(p.transforms[0].string.as_ref().unwrap().r#type, "Format");
        assert_eq!(p.transforms[1].math.as_ref().unwrap().r#type, MATH_MULTIPLY);
        let m = p.transforms[2].r#match.as_ref().unwrap();
        assert_eq!(
            (m.fallback_to.as_str(), m.patterns[0].r#type.as_str()),
            ("Value", "literal")
        );
        // Explicit empty readiness checks are kept: the API server defaults absent fields only.
        let c = Composition::from_value(
            &json!({"spec": {"resources": [{"readinessChecks": []}]}}),
            &v1(),
        )
        .unwrap();
        assert!(c.spec.resources[0].readiness_checks.is_empty());
    }

    /// Moving the bases and inputs out reads the same model; on an error the value is left
    /// as it was and the error is the same.
    #[test]
    fn reading_by_moving_is_reading_by_copying() {
        let good = json!({"spec": {
            "resources": [
                {"name": "a", "base": {"apiVersion": "v1", "kind": "A", "spec": {"x": [1, 2.5]}}},
                {"name": "b", "base": null},
                {"name": "c"}
            ],
            "pipeline": [
                {"step": "s", "functionRef": {"name": "f"}, "input": {"kind": "I"}},
                {"step": "t", "functionRef": {"name": "f"}, "input": null}
            ]
        }});
        let copied = Composition::from_defaulted_value(&good).expect("valid");
        let mut moved_from = good.clone();
        let moved = Composition::from_defaulted_value_mut(&mut moved_from).expect("valid");
        assert_eq!(format!("{moved:?}"), format!("{copied:?}"));
        assert!(moved_from["spec"]["resources"][0]["base"].is_null());

        let bad = json!({"spec": {"resources": [
            {"base": {"apiVersion": "v1", "kind": "A"}},
            {"base": {"kind": "B"}, "patches": {"a": 1}}
        ], "pipeline": [{"step": "s", "input": {"kind": "I"}}]}});
        let mut kept = bad.clone();
        let moved = Composition::from_defaulted_value_mut(&mut kept).unwrap_err();
        assert_eq!(moved, Composition::from_defaulted_value(&bad).unwrap_err());
        assert_eq!(moved.field, "spec.resources[1].patches");
        assert_eq!(kept, bad);
    }

    #[test]
    fn nulls_and_wrong_types() {
        let c = Composition::from_value(
            &json!({"spec": {"resources": null, "patchSets": [{"name": "a", "patches": null}]}}),
            &v1(),
        )
        .expect("nulls read as absent");
        assert!(c.spec.resources.is_empty());
        assert!(c.spec.patch_sets[0].patches.is_empty());
        let e = Composition::from_value(
            &json!({"spec": {"resources": [{"patches": {"a": 1}}]}}),
            &v1(),
        )
        .unwrap_err();
        assert_eq!(e.field, "spec.resources[0].patches");
        assert_eq!(e.message, "must be of type array, got object");
        let e = Composition::from_value(&json!(["not", "an", "object"]), &v1()).unwrap_err();
        assert_eq!(e.message, "a Composition must be an object, got array");
    }
}
