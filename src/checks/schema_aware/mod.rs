//! Schema-aware checks: patches, readiness checks, connection details and environment
//! patches against the schemas of the composite resource (XR) and of each composed resource.
//!
//! Passes run in Crossplane's order (patches, readiness checks, connection details,
//! environment patches). A missing schema makes its side unknown: the checks that need it
//! are skipped and every other check still runs. The same checks run on the resources of
//! a Resources-mode Composition and on each function-patch-and-transform step of a
//! Pipeline-mode one.

pub mod lookup;
pub mod patch;
pub mod scope;
pub mod typeflow;

use std::sync::Arc;

use crate::findings::{FieldError, Path};
use crate::model::{
    MATCH_FALSE, MATCH_INTEGER, MATCH_STRING, MATCH_TRUE, ReadinessCheck, ResourceSet,
};
use crate::schema::Schema;
use crate::schema::resolve::{FieldType, JsonType};
use patch::{PatchContext, Resolved, Side, check_patch_at};

/// Every schema-aware error of a resource set. `composed[i]` is the schema of
/// `resources[i]` (missing entries are unknown).
pub fn check(
    set: &ResourceSet<'_>,
    composite: Option<&Schema>,
    composed: &[Option<Arc<Schema>>],
) -> Vec<FieldError> {
    let schema_of = |i: usize| composed.get(i).and_then(|s| s.as_deref());
    let resources = set.at.child("resources");
    let mut errs = Vec::new();
    let resolved = Resolved::default();
    for (i, res) in set.resources.iter().enumerate() {
        let ctx = PatchContext {
            composite: Side::composite(composite),
            composed: Side::composed(schema_of(i)),
            patch_sets: set.patch_sets,
            resolved: &resolved,
        };
        for (j, p) in res.patches.iter().enumerate() {
            if crate::budget::step().is_err() {
                return errs;
            }
            errs.extend(check_patch_at(p, &ctx, &|| {
                resources.index(i).child("patches").index(j)
            }));
        }
    }
    for (i, res) in set.resources.iter().enumerate() {
        let at = || resources.index(i).child("readinessChecks");
        for (j, rc) in res.readiness_checks.iter().enumerate() {
            errs.extend(check_readiness(rc, schema_of(i), &resolved, &|| {
                at().index(j)
            }));
        }
    }
    for (i, res) in set.resources.iter().enumerate() {
        for (j, cd) in res.connection_details.iter().enumerate() {
            let Some(path) = cd.from_field_path.as_deref() else {
                continue;
            };
            if let Err(e) = resolved.resolve(schema_of(i), path) {
                errs.push(FieldError::invalid(
                    resources
                        .index(i)
                        .child("connectionDetails")
                        .index(j)
                        .child("fromFieldPath"),
                    path,
                    e.to_string(),
                ));
            }
        }
    }
    let env = || set.at.child("environment").child("patches");
    let ctx = PatchContext {
        composite: Side::composite(composite),
        composed: Side::environment(),
        patch_sets: &[],
        resolved: &resolved,
    };
    for (j, p) in set.environment_patches().iter().enumerate() {
        errs.extend(check_patch_at(p, &ctx, &|| env().index(j)));
    }
    errs
}

/// A readiness check's field path against the composed resource's schema, and its type
/// against what the check compares (MatchInteger accepts a `number` field: Kubernetes
/// stores whole numbers as integers).
fn check_readiness<'a>(
    rc: &'a ReadinessCheck,
    schema: Option<&'a Schema>,
    resolved: &Resolved<'a>,
    at: &dyn Fn() -> Path,
) -> Option<FieldError> {
    if rc.field_path.is_empty() {
        return None;
    }
    let field = || at().child("fieldPath");
    let found = match resolved.resolve(schema, &rc.field_path) {
        Ok(t) => t,
        Err(e) => {
            return Some(FieldError::invalid(
                field(),
                rc.field_path.as_str(),
                e.to_string(),
            ));
        }
    };
    let expected = match rc.r#type.as_str() {
        MATCH_STRING => JsonType::String,
        MATCH_INTEGER => JsonType::Integer,
        MATCH_TRUE | MATCH_FALSE => JsonType::Boolean,
        _ => return None,
    };
    let fits = match found {
        FieldType::Unknown => true,
        FieldType::IntOrString => matches!(expected, JsonType::Integer | JsonType::String),
        FieldType::Known(JsonType::Number) => expected == JsonType::Integer,
        FieldType::Known(t) => t == expected,
    };
    if fits {
        return None;
    }
    Some(FieldError::invalid(
        field(),
        rc.field_path.as_str(),
        format!(
            "expected field path to be of type {expected}: {} compares a {expected}, but the schema says {found}",
            rc.r#type
        ),
    ))
}
