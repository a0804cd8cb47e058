//! Pipeline steps that run function-patch-and-transform: their `Resources` input holds the
//! same resources, patch sets and environment patches as a Resources-mode Composition, and
//! gets the same checks, with field paths into `spec.pipeline[i].input`.
//!
//! Nothing checks a function's input before the function runs (the API server keeps it
//! opaque), so the input is also checked against its CRD here, as the API server would check
//! a `Resources` object of that CRD (`validate_resource`). Other functions' inputs stay
//! opaque.

use crate::findings::{BadValue, ErrorType, FieldError, Finding, Path, Stage};
use crate::model::{COMBINE_TO_COMPOSITE, TO_COMPOSITE_FIELD_PATH};
use std::sync::{Arc, OnceLock};

use crate::model::{
    ComposedTemplate, Composition, CompositionSpec, MODE_RESOURCES, PatchAndTransformInput,
    PatchAndTransformStep, ResourceSet, apply_input_defaults, is_patch_and_transform,
};
use crate::schema::{self, Schema, validation};

use super::{logical, schema_aware};

/// The patch-and-transform steps of a Composition, and the errors of inputs that do not
/// match their CRD (an input with a field of the wrong type is not read further).
///
/// Each such input is defaulted and validated in place, not copied: it is left in `c` as
/// the API server would store an object of its CRD (defaulted, unknown fields pruned), and,
/// once read, without its bases, which its model holds. Later checks read only its
/// `apiVersion` and `kind`; the logical checks, which look for a `step:` indented into an
/// input, run before.
pub fn read_steps(c: &mut Composition) -> (Vec<PatchAndTransformStep>, Vec<FieldError>) {
    let mut steps = Vec::new();
    let mut errs = Vec::new();
    for (i, step) in c.spec.pipeline.iter_mut().enumerate() {
        let Some(defaulted) = step.input.as_mut().filter(|v| is_patch_and_transform(v)) else {
            continue;
        };
        let at = Path::new("spec").child("pipeline").index(i).child("input");
        apply_input_defaults(defaulted);
        // The model reads the input with its defaults, before validation prunes it: fields
        // of later versions of the function, which its CRD here does not know, are read too.
        // Its bases are moved in after validation, which leaves them as they are (they
        // preserve unknown fields, and nothing below them has a default or a schema).
        let read = PatchAndTransformInput::from_defaulted_without_bases(defaulted);
        // The embedded schema always compiles (a test guards it).
        let found = schema::patch_and_transform_input_validator()
            .map(|compiled| {
                let limits = validation::CelLimits::default();
                validation::validate_defaulted_resource(compiled, defaulted, &at, &limits).errors
            })
            .unwrap_or_default();
        // A base's metadata is the composed resource's, not the input's: neither the API
        // server (the Composition CRD does not know the input's fields) nor the function
        // (it unmarshals the base as it is) checks it; the render validates it as the
        // runtime sends it (v2 replaces a namespaced XR's resources' namespace).
        let found: Vec<FieldError> = found
            .into_iter()
            .filter(|e| !is_base_metadata(&e.field, at.as_str()))
            .collect();
        let wrong_types = found.iter().any(|e| e.error_type == ErrorType::TypeInvalid);
        // A `step:` indented into the input is reported once, at the step's missing name.
        let misplaced_step = at.child("step");
        errs.extend(
            found
                .into_iter()
                .filter(|e| !(step.step.is_empty() && e.field == misplaced_step.as_str())),
        );
        if wrong_types {
            continue;
        }
        match read {
            Ok(mut input) => {
                input.move_bases_from(defaulted);
                steps.push(PatchAndTransformStep { at, input });
            }
            Err(e) => errs.push(FieldError::new(
                ErrorType::TypeInvalid,
                crate::findings::join_path(at.as_str(), &e.field),
                e.value
                    .as_ref()
                    .map(BadValue::from_json)
                    .unwrap_or_default(),
                e.message,
            )),
        }
    }
    (steps, errs)
}

/// Whether `field` is in the `metadata` of a template's base of the input at `input`
/// (`<input>.resources[0].base.metadata.namespace`).
fn is_base_metadata(field: &str, input: &str) -> bool {
    let Some(rest) = field
        .strip_prefix(input)
        .and_then(|r| r.strip_prefix(".resources["))
    else {
        return false;
    };
    let Some((index, rest)) = rest.split_once(']') else {
        return false;
    };
    index.bytes().all(|b| b.is_ascii_digit())
        && rest
            .strip_prefix(".base.metadata")
            .is_some_and(|r| r.is_empty() || r.starts_with(['.', '[']))
}

/// The patches of a step that write the composite resource outside its `status`: Crossplane
/// (v1's Pipeline mode and v2) applies a pipeline's desired composite resource through the
/// status subresource (`composition_functions.go`, `Status().Patch`), so the API server
/// drops such a write without a word. A warning at each: the Composition runs, the value
/// never arrives.
pub fn dropped_composite_writes(step: &PatchAndTransformStep) -> Vec<Finding> {
    let input = &step.input;
    let resources = input
        .resources
        .iter()
        .enumerate()
        .map(|(i, r)| (step.at.child("resources").index(i), r.patches.as_slice()));
    let sets = input
        .patch_sets
        .iter()
        .enumerate()
        .map(|(i, s)| (step.at.child("patchSets").index(i), s.patches.as_slice()));
    let environment = input
        .environment
        .iter()
        .map(|e| (step.at.child("environment"), e.patches.as_slice()));
    let mut findings = Vec::new();
    for (at, patches) in resources.chain(sets).chain(environment) {
        for (j, p) in patches.iter().enumerate() {
            if !matches!(
                p.effective_type(),
                TO_COMPOSITE_FIELD_PATH | COMBINE_TO_COMPOSITE
            ) {
                continue;
            }
            // Without `toFieldPath` a patch writes where it reads.
            let Some(to) = p.to_field_path.as_deref().or(p.from_field_path.as_deref()) else {
                continue;
            };
            let top = to.split(['.', '[']).next().unwrap_or_default();
            if top == "status" || to.is_empty() {
                continue;
            }
            findings.push(Finding::advisory(
                Stage::Schema,
                FieldError::invalid(
                    at.child("patches").index(j).child("toFieldPath"),
                    to,
                    "Crossplane applies a pipeline's composite resource through its status subresource, which drops this write: the composite resource never gets this value (only status.* is written)",
                ),
            ));
        }
    }
    findings
}

/// The logical errors of a step's input: those of a Resources-mode Composition with the
/// same resources, patch sets and environment patches (lent to it, not copied: the step has
/// them back when this returns).
pub fn validate_logical(step: &mut PatchAndTransformStep) -> Vec<FieldError> {
    let mut c = Composition {
        spec: CompositionSpec {
            mode: MODE_RESOURCES.to_string(),
            patch_sets: std::mem::take(&mut step.input.patch_sets),
            environment: step.input.environment.take(),
            resources: std::mem::take(&mut step.input.resources),
            ..CompositionSpec::default()
        },
        ..Composition::default()
    };
    let errs = logical_of(&c, step);
    step.input.patch_sets = std::mem::take(&mut c.spec.patch_sets);
    step.input.environment = c.spec.environment.take();
    step.input.resources = std::mem::take(&mut c.spec.resources);
    errs
}

/// [`validate_logical`] of `c`, the Composition standing in for `step`'s input.
fn logical_of(c: &Composition, step: &PatchAndTransformStep) -> Vec<FieldError> {
    let spec = Path::new("spec");
    let mut errs = logical::validate_patch_sets(c);
    errs.extend(logical::validate_resources(c));
    errs.extend(logical::validate_environment(c));
    // A template without a base patches the resource an earlier step composed (P&T's
    // README, "use P&T with other functions"); only a base that is there is checked.
    let with_base: Vec<_> = c
        .spec
        .resources
        .iter()
        .enumerate()
        .filter(|(_, r)| !r.base.is_null())
        .collect();
    errs.extend(
        logical::validate_bases(&c.spec.resources, &spec)
            .into_iter()
            .filter(|e| {
                with_base.iter().any(|(i, _)| {
                    let at = spec.child("resources").index(*i);
                    related_to(&e.field, at.as_str())
                })
            }),
    );
    errs.extend(logical::validate_field_paths(c));
    for e in &mut errs {
        // Move `spec.x` to `spec.pipeline[i].input.x`.
        if let Some(rest) = e.field.strip_prefix("spec") {
            e.field = format!("{}{rest}", step.at.as_str());
        }
    }
    if let Some(stand_in) = connection_secret_stand_in(step) {
        let c = Composition {
            spec: CompositionSpec {
                mode: MODE_RESOURCES.to_string(),
                resources: vec![stand_in],
                ..CompositionSpec::default()
            },
            ..Composition::default()
        };
        let mut found = logical::validate_resources(&c);
        found.extend(logical::validate_field_paths(&c));
        let from = spec.child("resources").index(0);
        errs.extend(
            found
                .into_iter()
                .map(|e| to_connection_ref(e, from.as_str(), step)),
        );
    }
    errs
}

/// The object function-patch-and-transform applies `writeConnectionSecretToRef.patches`
/// to (v0.10.8 `connection.go`, `applyConnectionSecretPatches`): `apiVersion: v1`,
/// `kind: SecretReference`, `name` and `namespace`, as a template to check like others.
fn connection_secret_stand_in(step: &PatchAndTransformStep) -> Option<ComposedTemplate> {
    let r = step
        .input
        .write_connection_secret_to_ref
        .as_ref()
        .filter(|r| !r.patches.is_empty())?;
    Some(ComposedTemplate {
        name: Some("writeConnectionSecretToRef".to_string()),
        base: serde_json::json!({
            "apiVersion": "v1", "kind": "SecretReference",
            "name": r.name, "namespace": r.namespace,
        }),
        patches: r.patches.clone(),
        ..ComposedTemplate::default()
    })
}

/// What the function reads back from the stand-in: `name` and `namespace`, as strings
/// (anything else a patch writes there is dropped).
fn connection_secret_schema() -> Arc<Schema> {
    static SCHEMA: OnceLock<Arc<Schema>> = OnceLock::new();
    SCHEMA
        .get_or_init(|| {
            let v = serde_json::json!({"type": "object", "properties": {
                "name": {"type": "string"}, "namespace": {"type": "string"}}});
            Arc::new(Schema::from_value(&v).unwrap_or_default())
        })
        .clone()
}

/// An error at the stand-in (`from`, e.g. `spec.resources[0]`) moved to the step's
/// `writeConnectionSecretToRef`.
fn to_connection_ref(mut e: FieldError, from: &str, step: &PatchAndTransformStep) -> FieldError {
    if let Some(rest) = e.field.strip_prefix(from) {
        e.field = format!(
            "{}{rest}",
            step.at.child("writeConnectionSecretToRef").as_str()
        );
    }
    e
}

/// The schema errors of a step's `writeConnectionSecretToRef.patches`: their sources on the
/// composite resource, their destinations on the secret reference (only `name` and
/// `namespace`, strings, are read back), and the types between them.
pub fn check_connection_secret(
    step: &PatchAndTransformStep,
    composite: Option<&Schema>,
) -> Vec<FieldError> {
    let Some(stand_in) = connection_secret_stand_in(step) else {
        return Vec::new();
    };
    let at = Path::new("writeConnectionSecretToRef");
    let from = at.child("resources").index(0);
    // Only `name` and `namespace` are read back (a `metadata.name`, which any other
    // object has, included): a patch to anything else does nothing.
    let mut errs = Vec::new();
    // The patches reported so, whose destination and types the schema check skips.
    let mut idle = Vec::new();
    for (j, p) in stand_in.patches.iter().enumerate() {
        if crate::budget::step().is_err() {
            break;
        }
        // Other types are refused by the input's CRD already.
        if !matches!(
            p.effective_type(),
            crate::model::FROM_COMPOSITE_FIELD_PATH | crate::model::COMBINE_FROM_COMPOSITE
        ) {
            continue;
        }
        let to = p.to_field_path.as_deref().or(p.from_field_path.as_deref());
        if let Some(to) = to.filter(|t| !matches!(*t, "name" | "namespace")) {
            let defaulted = if p.to_field_path.is_none() {
                " (toFieldPath defaults to fromFieldPath)"
            } else {
                ""
            };
            let patch = from.child("patches").index(j);
            errs.push(FieldError::invalid(
                patch.child("toFieldPath"),
                to,
                format!(
                    "function-patch-and-transform reads only name and namespace back from the connection secret reference{defaulted}: this patch would change nothing"
                ),
            ));
            idle.push(patch);
        }
    }
    let templates = [stand_in];
    let set = ResourceSet::new(&templates, &[], None, &at);
    let found = schema_aware::check(&set, composite, &[Some(connection_secret_schema())]);
    errs.extend(found.into_iter().filter(|e| {
        !idle.iter().any(|patch| {
            let to = patch.child("toFieldPath");
            let transforms = patch.child("transforms");
            e.field == to.as_str()
                || e.field == transforms.as_str()
                || e.field.starts_with(&format!("{}[", transforms.as_str()))
        })
    }));
    errs.into_iter()
        .map(|e| to_connection_ref(e, from.as_str(), step))
        .collect()
}

/// Whether `field` is `at` or under it.
fn related_to(field: &str, at: &str) -> bool {
    field
        .strip_prefix(at)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
}

/// The schema each template's patches apply to. A template with a base has its own
/// (`composed[i]`); one without patches the resource of the same name an earlier template
/// composed, as rendering finds it: the latest one, in this or an earlier P&T step.
/// `composed` holds each step's base schemas, in pipeline order; templates whose resource
/// no P&T step composes are returned, with their step, for a warning.
pub fn resolve_baseless(
    steps: &[PatchAndTransformStep],
    composed: &mut [Vec<Option<std::sync::Arc<crate::schema::Schema>>>],
) -> Vec<(usize, usize)> {
    let mut by_name: std::collections::HashMap<
        &str,
        Option<std::sync::Arc<crate::schema::Schema>>,
        crate::hashing::ByInput,
    > = std::collections::HashMap::default();
    let mut unknown = Vec::new();
    for (s, step) in steps.iter().enumerate() {
        for (i, t) in step.input.resources.iter().enumerate() {
            if crate::budget::step().is_err() {
                return unknown;
            }
            let Some(name) = t.name.as_deref() else {
                continue;
            };
            let Some(schemas) = composed.get_mut(s) else {
                continue;
            };
            if !t.base.is_null() {
                by_name.insert(name, schemas.get(i).cloned().flatten());
                continue;
            }
            match by_name.get(name) {
                Some(earlier) => {
                    if let Some(slot) = schemas.get_mut(i) {
                        slot.clone_from(earlier);
                    }
                }
                None => unknown.push((s, i)),
            }
        }
    }
    unknown
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// A v2 Composition of one function-patch-and-transform step with `input` (its
    /// `apiVersion` and `kind` added), for an XR of `xr_kind`.
    fn one_step(xr_kind: &str, mut input: Value) -> Composition {
        input["apiVersion"] = json!("pt.fn.crossplane.io/v1beta1");
        input["kind"] = json!("Resources");
        let v2 = crate::schema::CompositionApi::embedded(crate::schema::CrossplaneVersion::V2);
        Composition::from_defaulted_value(&crate::model::with_api_defaults(
            &json!({
                "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
                "metadata": {"name": "c"},
                "spec": {"compositeTypeRef": {"apiVersion": "example.org/v1", "kind": xr_kind},
                    "mode": "Pipeline",
                    "pipeline": [{"step": "pt",
                        "functionRef": {"name": "function-patch-and-transform"},
                        "input": input}]}
            }),
            &v2,
        ))
        .expect("model")
    }

    #[test]
    fn a_step_has_its_input_back_after_its_logical_checks() {
        let mut c = one_step(
            "XDb",
            json!({
                "patchSets": [{"name": "common", "patches": [
                    {"fromFieldPath": "spec.region", "toFieldPath": "spec.forProvider.region"}]}],
                "environment": {"patches": [{"type": "FromCompositeFieldPath",
                    "fromFieldPath": "spec.size", "toFieldPath": "size"}]},
                "resources": [{"name": "db",
                    "base": {"apiVersion": "rds.aws/v1", "kind": "Instance"},
                    "patches": [{"type": "PatchSet", "patchSetName": "missing"}]}]}),
        );
        let (mut steps, errors) = read_steps(&mut c);
        assert!(errors.is_empty(), "{errors:?}");
        let before = format!("{steps:?}");
        let found = validate_logical(&mut steps[0]);
        // Checked as a Resources-mode Composition, reported at the step's input.
        assert_eq!(
            found.iter().map(|e| e.field.as_str()).collect::<Vec<_>>(),
            ["spec.pipeline[0].input.resources[0].patches[0].patchSetName"],
            "{found:?}"
        );
        assert_eq!(format!("{steps:?}"), before);
    }

    /// The bases are moved into the model after the input is validated: validation must
    /// leave them as written (unknown fields and members, nulls, labels; an item without a
    /// base, a null one), as the model read before validation had them.
    #[test]
    fn a_step_reads_its_bases_as_written_around_validation() {
        let bases = [
            json!({"apiVersion": "ec2.aws.m.upbound.io/v1beta1", "kind": "VPC",
                "metadata": {"labels": {"a": "b"}, "annotations": null, "unknownMeta": {"x": 1}},
                "spec": {"forProvider": {"region": null, "cidrBlock": "10.0.0.0/16",
                    "tags": {"k": null}}, "unknown": [null, {"a": null}]},
                "status": {"atProvider": {}}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"}}),
        ];
        let mut c = one_step(
            "XNet",
            json!({"resources": [
                {"name": "vpc", "base": bases[0],
                    "patches": [{"fromFieldPath": "spec.region",
                        "toFieldPath": "spec.forProvider.region"}]},
                {"name": "later"},
                {"name": "null", "base": null},
                {"name": "cm", "base": bases[1]}]}),
        );
        let input = c.spec.pipeline[0].input.clone().expect("input");
        let (steps, errors) = read_steps(&mut c);
        assert!(errors.is_empty(), "{errors:?}");
        let read: Vec<_> = steps[0].input.resources.iter().map(|t| &t.base).collect();
        assert_eq!(read, [&bases[0], &Value::Null, &Value::Null, &bases[1]]);
        // As the whole input read through serde, before validation, has them.
        let whole = PatchAndTransformInput::from_value(&input).expect("input model");
        assert_eq!(format!("{:?}", steps[0].input), format!("{whole:?}"));
        // Left in the Composition defaulted (a patch's type), without its bases.
        let left = c.spec.pipeline[0].input.as_ref().expect("input");
        assert_eq!(left["apiVersion"], input["apiVersion"]);
        assert_eq!(left["kind"], input["kind"]);
        assert_eq!(
            left["resources"][0]["patches"][0]["type"],
            "FromCompositeFieldPath"
        );
        assert!(
            left["resources"]
                .as_array()
                .expect("resources")
                .iter()
                .all(|r| r.get("base").is_none_or(Value::is_null))
        );
    }

    /// A P&T input defaulted before pruning is not defaulted again by its validation: the
    /// errors and the object left are those of defaulting again. The input holds what
    /// pruning and defaulting meet: members that take a default (absent, or null where the
    /// field is not nullable), nulls without a default, unknown fields, wrong types.
    #[test]
    fn an_input_defaulted_before_pruning_validates_as_if_defaulted_again() {
        let compiled = schema::patch_and_transform_input_validator().expect("compiles");
        let limits = validation::CelLimits::default();
        let at = Path::new("spec").child("pipeline").index(0).child("input");
        let (mut defaulted, mut errors) = (false, 0);
        for input in [
            json!({"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources",
                "unknown": {"a": null},
                "resources": [{"name": "a", "base": {"apiVersion": "v1", "kind": "ConfigMap"},
                    "readinessChecks": [{"type": "None", "unknown": 1}],
                    "patches": [
                        {"fromFieldPath": "spec.a", "toFieldPath": null, "type": null,
                            "transforms": [
                                {"type": "string", "string": {"fmt": "%s", "type": null}},
                                {"type": "math", "math": {"multiply": 2}},
                                {"type": "match", "match": {"patterns": [
                                    {"regexp": "a.*", "result": "x"}], "fallbackTo": null}}]},
                        {"type": "CombineFromComposite", "combine": {"variables": null},
                            "unknownPatchField": "x", "policy": null}]}]}),
            json!({"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources",
                "patchSets": [{"name": "p", "patches": [{"fromFieldPath": 3}]}],
                "environment": {"patches": [{"fromFieldPath": "a", "unknown": null}]},
                "resources": "not a list"}),
        ] {
            let mut once = input.clone();
            apply_input_defaults(&mut once);
            let mut twice = once.clone();
            let kept = validation::validate_defaulted_resource(compiled, &mut once, &at, &limits);
            let again = validation::validate_resource(compiled, &mut twice, &at, &limits);
            assert_eq!(once, twice, "{input}");
            assert_eq!(
                format!("{:?}", kept.errors),
                format!("{:?}", again.errors),
                "{input}"
            );
            assert_eq!(kept.notes, again.notes, "{input}");
            defaulted |= once.pointer("/resources/0/patches/0/type")
                == Some(&json!("FromCompositeFieldPath"));
            errors += kept.errors.len();
        }
        // Not vacuous: a null took its default before pruning, and errors were found.
        assert!(defaulted && errors > 0);
    }

    #[test]
    fn a_bases_metadata_is_told_from_the_inputs_own() {
        let input = "spec.pipeline[0].input";
        for (field, is) in [
            (
                "spec.pipeline[0].input.resources[0].base.metadata.namespace",
                true,
            ),
            ("spec.pipeline[0].input.resources[12].base.metadata", true),
            (
                "spec.pipeline[0].input.resources[1].base.metadata.labels[a/]",
                true,
            ),
            ("spec.pipeline[0].input.resources[0].base.metadataX", false),
            (
                "spec.pipeline[0].input.resources[0].base.spec.metadata",
                false,
            ),
            ("spec.pipeline[0].input.metadata.name", false),
            (
                "spec.pipeline[1].input.resources[0].base.metadata.name",
                false,
            ),
        ] {
            assert_eq!(is_base_metadata(field, input), is, "{field}");
        }
    }
}
