//! Field path syntax: every path a Composition holds must parse (crossplane-runtime's
//! grammar), whatever the schemas. Upstream finds these only in its schema-aware stage.

use crate::fieldpath;
use crate::findings::{FieldError, Path};
use crate::model::{Composition, Patch};

/// An error for each field path of the Composition that does not parse.
pub fn validate_field_paths(c: &Composition) -> Vec<FieldError> {
    let mut errs = Vec::new();
    // Where a path is held is only spelled out for a path that does not parse.
    let mut check = |at: &dyn Fn() -> Path, path: Option<&str>| {
        if let Some(path) = path
            && let Err(e) = fieldpath::check(path)
        {
            errs.push(FieldError::invalid(at(), path, e.to_string()));
        }
    };
    let spec = Path::new("spec");
    for (i, set) in c.spec.patch_sets.iter().enumerate() {
        for (j, p) in set.patches.iter().enumerate() {
            patch_paths(
                &|| spec.child("patchSets").index(i).child("patches").index(j),
                p,
                &mut check,
            );
        }
    }
    for (i, res) in c.spec.resources.iter().enumerate() {
        let r = || spec.child("resources").index(i);
        for (j, p) in res.patches.iter().enumerate() {
            patch_paths(&|| r().child("patches").index(j), p, &mut check);
        }
        for (j, rc) in res.readiness_checks.iter().enumerate() {
            let path = Some(rc.field_path.as_str()).filter(|p| !p.is_empty());
            check(
                &|| r().child("readinessChecks").index(j).child("fieldPath"),
                path,
            );
        }
        for (j, d) in res.connection_details.iter().enumerate() {
            check(
                &|| {
                    r().child("connectionDetails")
                        .index(j)
                        .child("fromFieldPath")
                },
                d.from_field_path.as_deref(),
            );
        }
    }
    if let Some(env) = &c.spec.environment {
        let e = || spec.child("environment");
        for (j, p) in env.patches.iter().enumerate() {
            patch_paths(&|| e().child("patches").index(j), p, &mut check);
        }
        for (i, source) in env.environment_configs.iter().enumerate() {
            let Some(sel) = &source.selector else {
                continue;
            };
            let s = || e().child("environmentConfigs").index(i).child("selector");
            check(
                &|| s().child("sortByFieldPath"),
                sel.sort_by_field_path.as_deref(),
            );
            for (k, m) in sel.match_labels.iter().enumerate() {
                check(
                    &|| {
                        s().child("matchLabels")
                            .index(k)
                            .child("valueFromFieldPath")
                    },
                    m.value_from_field_path.as_deref(),
                );
            }
        }
    }
    errs
}

fn patch_paths(
    at: &dyn Fn() -> Path,
    p: &Patch,
    check: &mut impl FnMut(&dyn Fn() -> Path, Option<&str>),
) {
    check(
        &|| at().child("fromFieldPath"),
        p.from_field_path.as_deref(),
    );
    check(&|| at().child("toFieldPath"), p.to_field_path.as_deref());
    if let Some(combine) = &p.combine {
        for (k, v) in combine.variables.iter().enumerate() {
            check(
                &|| {
                    at().child("combine")
                        .child("variables")
                        .index(k)
                        .child("fromFieldPath")
                },
                Some(v.from_field_path.as_str()),
            );
        }
    }
}
