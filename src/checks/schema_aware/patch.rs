//! One patch against the schemas of its two sides (Crossplane's per-type rules, section 4.2
//! of the research notes): field paths first, then the type flow; one error per patch.

use std::cell::RefCell;
use std::collections::HashMap;
use std::marker::PhantomData;

use serde_json::Value;

use super::typeflow::check_type_flow;
use crate::findings::{BadValue, ErrorType, FieldError, Path};
use crate::model::{
    COMBINE_FROM_COMPOSITE, COMBINE_FROM_ENVIRONMENT, COMBINE_STRATEGY_STRING,
    COMBINE_TO_COMPOSITE, COMBINE_TO_ENVIRONMENT, FROM_COMPOSITE_FIELD_PATH,
    FROM_ENVIRONMENT_FIELD_PATH, PATCH_SET, Patch, PatchSet, TO_COMPOSITE_FIELD_PATH,
    TO_ENVIRONMENT_FIELD_PATH,
};
use crate::schema::Schema;
use crate::schema::resolve::{FieldType, PathError, resolve};

/// One side of a patch: a schema (or none: unknown) and what it is called in messages.
#[derive(Debug, Clone, Copy)]
pub struct Side<'a> {
    /// The side's schema; `None` when missing or schemaless (the environment).
    pub schema: Option<&'a Schema>,
    /// `the composite resource`, `the composed resource`, `the environment`.
    pub name: &'static str,
}

impl<'a> Side<'a> {
    /// The composite resource.
    pub fn composite(schema: Option<&'a Schema>) -> Self {
        Side {
            schema,
            name: "the composite resource",
        }
    }

    /// A composed resource.
    pub fn composed(schema: Option<&'a Schema>) -> Self {
        Side {
            schema,
            name: "the composed resource",
        }
    }

    /// The environment: no schema.
    pub fn environment() -> Self {
        Side {
            schema: None,
            name: "the environment",
        }
    }
}

/// The XR and composed resource of a resource's patches.
#[derive(Debug, Clone, Copy)]
pub struct PatchContext<'a> {
    /// The composite resource.
    pub composite: Side<'a>,
    /// The composed resource (the environment, for `spec.environment.patches`).
    pub composed: Side<'a>,
    /// `spec.patchSets` (or a function input's `patchSets`).
    pub patch_sets: &'a [PatchSet],
    /// Field paths already resolved during this check.
    pub resolved: &'a Resolved<'a>,
}

/// Field paths resolved on schemas, kept for one check of a resource set: a patch set's
/// patches are resolved again for every template that uses it.
///
/// Keyed by the addresses of the schema and of the path string, which both outlive the cache
/// (`'p`) unchanged, so an address stands for one content; and addresses, unlike paths, are
/// not the user's to choose, so a plain multiplicative hash is safe.
#[derive(Debug, Default)]
pub struct Resolved<'p> {
    paths: RefCell<ResolvedPaths>,
    held: PhantomData<&'p str>,
}

/// Resolutions by the addresses of the schema (0: none) and of the path, and the path's
/// length.
type ResolvedPaths =
    HashMap<(usize, usize, usize), Result<FieldType, PathError>, crate::hashing::ByAddress>;

impl<'p> Resolved<'p> {
    /// [`resolve`]: the same result, worked out once per schema and path string.
    pub fn resolve(
        &self,
        schema: Option<&'p Schema>,
        path: &'p str,
    ) -> Result<FieldType, PathError> {
        let key = (
            schema.map_or(0, |s| std::ptr::from_ref(s) as usize),
            path.as_ptr() as usize,
            path.len(),
        );
        if let Some(found) = self.paths.borrow().get(&key) {
            return found.clone();
        }
        let result = resolve(schema, path);
        self.paths.borrow_mut().insert(key, result.clone());
        result
    }
}

/// The problems of patch `p` at the path `at` builds (`spec.resources[i].patches[j]`), built
/// only for an error: at most one per patch, and for a PatchSet patch one per failing patch of
/// the set, at `<at>.patchSets[k].patches[l]` (k, l index `spec.patchSets`).
pub fn check_patch_at<'a>(
    p: &'a Patch,
    ctx: &PatchContext<'a>,
    at: &dyn Fn() -> Path,
) -> Vec<FieldError> {
    let (from, to) = match p.effective_type() {
        FROM_COMPOSITE_FIELD_PATH | COMBINE_FROM_COMPOSITE => (ctx.composite, ctx.composed),
        TO_COMPOSITE_FIELD_PATH | COMBINE_TO_COMPOSITE => (ctx.composed, ctx.composite),
        FROM_ENVIRONMENT_FIELD_PATH | COMBINE_FROM_ENVIRONMENT => {
            (Side::environment(), ctx.composed)
        }
        TO_ENVIRONMENT_FIELD_PATH | COMBINE_TO_ENVIRONMENT => (ctx.composed, Side::environment()),
        PATCH_SET => return check_patch_set(p, ctx, at),
        _ => return Vec::new(), // An unknown type is a logical error.
    };
    let combine = matches!(
        p.effective_type(),
        COMBINE_FROM_COMPOSITE
            | COMBINE_TO_COMPOSITE
            | COMBINE_FROM_ENVIRONMENT
            | COMBINE_TO_ENVIRONMENT
    );
    let err = if combine {
        check_combine(p, from, to, ctx.resolved)
    } else {
        check_field_paths(p, from, to, ctx.resolved)
    };
    err.map(|e| e.prefixed(at().as_str())).into_iter().collect()
}

fn check_patch_set<'a>(
    p: &'a Patch,
    ctx: &PatchContext<'a>,
    at: &dyn Fn() -> Path,
) -> Vec<FieldError> {
    let Some(name) = p.patch_set_name.as_deref() else {
        return Vec::new();
    };
    let mut errs = Vec::new();
    for (k, set) in ctx.patch_sets.iter().enumerate() {
        if set.name != name {
            continue;
        }
        for (l, inner) in set.patches.iter().enumerate() {
            // A patch set is checked again for every template that uses it.
            if crate::budget::step().is_err() {
                return errs;
            }
            // Nested patch sets are a logical error.
            if inner.effective_type() == PATCH_SET {
                continue;
            }
            let inner_at = || at().child("patchSets").index(k).child("patches").index(l);
            errs.extend(check_patch_at(inner, ctx, &inner_at));
        }
    }
    errs
}

/// Resolves `path` on `side`; an error is Invalid at `field` with the path as value.
fn resolve_on<'a>(
    side: Side<'a>,
    path: &'a str,
    field: &str,
    resolved: &Resolved<'a>,
) -> Result<FieldType, Box<FieldError>> {
    resolve_side(side, path, resolved).map_err(|e| Box::new(FieldError::invalid(field, path, e)))
}

/// Resolves `path` on `side`; the error's message, with where a v1 machinery field went
/// when `side` is a v2 composite resource.
fn resolve_side<'a>(
    side: Side<'a>,
    path: &'a str,
    resolved: &Resolved<'a>,
) -> Result<FieldType, String> {
    resolved
        .resolve(side.schema, path)
        .map_err(|e| match v2_hint(side, path) {
            Some(hint) => format!("{e}; {hint}"),
            None => e.to_string(),
        })
}

/// Where a field of a v1 XR is in a v2 (Namespaced or Cluster) XR, whose machinery is under
/// `spec.crossplane` (crossplane-runtime v2.3.3 `pkg/xcrd/schemas.go`
/// `CompositeResourceSpecProps`): composition selection and `resourceRefs` moved there;
/// claims and connection secrets exist only with scope LegacyCluster.
fn v2_hint(side: Side<'_>, path: &str) -> Option<String> {
    let schema = side.schema?;
    if side.name != Side::composite(None).name
        || schema
            .descend(&["spec", "crossplane", "compositionRef"])
            .is_none()
    {
        return None;
    }
    let rest = path.strip_prefix("spec.")?;
    let field = rest.split(['.', '[']).next().unwrap_or_default();
    let v2_xr = "a Crossplane v2 composite resource (scope Namespaced or Cluster)";
    match field {
        "compositionRef"
        | "compositionSelector"
        | "compositionRevisionRef"
        | "compositionRevisionSelector"
        | "compositionUpdatePolicy"
        | "resourceRefs" => Some(format!(
            "in {v2_xr} spec.{field} moved to spec.crossplane.{field}"
        )),
        "claimRef" => Some(format!(
            "{v2_xr} has no claim: spec.claimRef exists only with scope LegacyCluster"
        )),
        "writeConnectionSecretToRef" | "publishConnectionDetailsTo" => Some(format!(
            "{v2_xr} writes no connection secret: spec.{field} exists only with scope LegacyCluster (function-patch-and-transform composes the Secret its input.writeConnectionSecretToRef names)"
        )),
        _ => None,
    }
}

/// The destination of a patch: its `toFieldPath`, or, when that is omitted, the
/// `fromFieldPath` (where the runtime writes).
fn destination<'a>(
    p: &'a Patch,
    to: Side<'a>,
    from_path: &'a str,
    resolved: &Resolved<'a>,
) -> Result<FieldType, Box<FieldError>> {
    match p.to_field_path.as_deref() {
        Some(path) => resolve_on(to, path, "toFieldPath", resolved),
        None => resolve_side(to, from_path, resolved).map_err(|e| {
            Box::new(FieldError::invalid(
                "toFieldPath",
                from_path,
                format!(
                    "toFieldPath is not set, so the value is written to the fromFieldPath in {}: {e}",
                    to.name
                ),
            ))
        }),
    }
}

fn check_field_paths<'a>(
    p: &'a Patch,
    from: Side<'a>,
    to: Side<'a>,
    resolved: &Resolved<'a>,
) -> Option<FieldError> {
    let from_path = p.from_field_path.as_deref()?; // Missing: a logical error.
    let source = match resolve_on(from, from_path, "fromFieldPath", resolved) {
        Ok(t) => t,
        Err(e) => return Some(*e),
    };
    let dest = match destination(p, to, from_path, resolved) {
        Ok(t) => t,
        Err(e) => return Some(*e),
    };
    check_type_flow(source, &p.transforms, dest, "the fromFieldPath")
}

fn check_combine<'a>(
    p: &'a Patch,
    from: Side<'a>,
    to: Side<'a>,
    resolved: &Resolved<'a>,
) -> Option<FieldError> {
    let combine = p.combine.as_ref()?; // Missing: a logical error.
    let dest = match p.to_field_path.as_deref() {
        Some(path) => match resolve_on(to, path, "toFieldPath", resolved) {
            Ok(t) => t,
            Err(e) => return Some(*e),
        },
        None => return None, // Required by the logical checks.
    };
    let problems: Vec<String> = combine
        .variables
        .iter()
        .enumerate()
        .filter_map(|(k, v)| {
            resolve_side(from, &v.from_field_path, resolved)
                .err()
                .map(|e| {
                    FieldError::invalid(
                        format!("variables[{k}].fromFieldPath"),
                        v.from_field_path.as_str(),
                        e,
                    )
                    .to_string()
                })
        })
        .collect();
    if !problems.is_empty() {
        let variables: Vec<Value> = combine
            .variables
            .iter()
            .map(|v| serde_json::json!({ "fromFieldPath": v.from_field_path }))
            .collect();
        let detail = match problems.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        return Some(FieldError::new(
            ErrorType::Invalid,
            "combine",
            BadValue::Json(Value::Array(variables)),
            detail,
        ));
    }
    if combine.strategy == COMBINE_STRATEGY_STRING {
        combine.string.as_ref()?; // Required by the logical checks.
    } else {
        return None; // An unknown strategy is a logical error.
    }
    check_type_flow(
        FieldType::Known(crate::schema::resolve::JsonType::String),
        &p.transforms,
        dest,
        "the combined string",
    )
}
