//! Rendered-resource validation: render every composed resource from a composite resource
//! (a minimal mock built from the XR schema, or a real one) and validate each against its
//! CRD as the API server would on create. Findings are reported at the template's base
//! (`spec.resources[0].base.spec.forProvider.region`) so the user sees which template is
//! wrong.
//!
//! A mock XR holds only what its schema requires, so some findings are about the mock, not
//! the Composition. Those are warnings in every mode, with the reason:
//! - a required field set only by a patch whose source the mock does not have (an optional
//!   XR field without default, the environment);
//! - a value constraint broken by a value patched from the mock (a real XR may hold another);
//! - a patch that fails at run time on a mock value (a transform's map without that key).
//!
//! A finding at a field that a patch with a logical or schema error writes is the same
//! problem seen again, and is dropped.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::checks::patch_and_transform::PatchAndTransformStep;
use crate::checks::schema_aware::lookup::SchemaSource;
use crate::findings::{BadValue, ErrorType, FieldError, Finding, Path, Stage};
use crate::model::{ComposedTemplate, Composition};
use crate::render::patch::Outcome;
use crate::render::{self, FunctionRole, PatchRecord, Rendered, RenderedResource, mock};
use crate::schema::validation::{self, CelLimits};
use crate::schema::{Schema, split_api_version};

/// The CEL budget of one rendered resource.
pub const CEL_LIMITS: CelLimits = CelLimits {
    max_evaluations: 10_000,
    deadline: Duration::from_millis(200),
};

/// Which composite resource the resources are rendered from.
#[derive(Debug, Clone, Copy)]
pub enum Composite<'a> {
    /// A mock built from the XR schema (`None` when the schema is missing: then the mock has
    /// only what Crossplane sets).
    Mock(Option<&'a Schema>),
    /// A real composite resource (`render --xr`).
    Real(&'a Value),
}

/// The composite resource to render from.
pub fn composite_value(c: &Composition, composite: Composite<'_>) -> Value {
    match composite {
        Composite::Real(v) => v.clone(),
        Composite::Mock(schema) => {
            let type_ref = &c.spec.composite_type_ref;
            let of = mock::Of {
                api_version: &type_ref.api_version,
                kind: &type_ref.kind,
                composition: &c.metadata.name,
                secrets_namespace: c.spec.write_connection_secrets_to_namespace.as_deref(),
            };
            mock::composite(schema, &of)
                // A non-object XR schema is reported by the schema checks; render from the
                // bare mock then.
                .or_else(|_| mock::composite(None, &of))
                .unwrap_or_default()
        }
    }
}

/// Schemas the lookups of the schema-aware stage already found for the templates' bases,
/// by `apiVersion` and kind: rendered resources of those kinds reuse them instead of being
/// looked up again.
#[derive(Debug, Default)]
pub struct KnownSchemas(HashMap<(String, String), Arc<Schema>>);

impl KnownSchemas {
    /// Records `schemas[i]`, the schema found for `templates[i]`'s base.
    pub fn add(&mut self, templates: &[ComposedTemplate], schemas: &[Option<Arc<Schema>>]) {
        for (t, schema) in templates.iter().zip(schemas) {
            if let (Some(api_version), Some(kind), Some(schema)) =
                (t.base_api_version(), t.base_kind(), schema)
            {
                self.0
                    .insert((api_version.to_string(), kind.to_string()), schema.clone());
            }
        }
    }

    fn get(&self, api_version: &str, kind: &str) -> Option<Arc<Schema>> {
        self.0
            .get(&(api_version.to_string(), kind.to_string()))
            .cloned()
    }
}

/// Renders `c` and validates every rendered resource whose CRD is known: from `known`, else
/// from `source`. `earlier` are the logical and schema findings (to drop repeats of them).
pub fn check(
    c: &Composition,
    steps: &[PatchAndTransformStep],
    composite: Composite<'_>,
    known: &KnownSchemas,
    source: &dyn SchemaSource,
    earlier: &[Finding],
) -> Vec<Finding> {
    let xr = composite_value(c, composite);
    let mut rendered = render::render(c, steps, &xr);
    let mock = matches!(composite, Composite::Mock(_));
    let mut findings = Vec::new();
    findings.extend(opaque_note(&rendered));
    // An environment patch not rendered leaves the environment unknown: said, not judged.
    for (at, why) in &rendered.environment_not_rendered {
        findings.push(not_rendered(at, why));
    }
    let resources = std::mem::take(&mut rendered.resources);
    for resource in resources {
        if crate::budget::step().is_err() {
            break;
        }
        // Findings of a step that a later, unrendered function may change are warnings; so
        // are those of a resource a later filter may remove, with the filter named.
        let later = if !rendered.changed_later(&resource.at).is_empty() {
            Later::Changed
        } else {
            let filters = rendered.removed_later(&resource.at, resource.name.as_deref());
            match filters.as_slice() {
                [] => Later::Unchanged,
                steps => Later::MayBeRemoved(
                    steps
                        .iter()
                        .map(|o| format!("{:?} (step {:?})", o.function, o.step))
                        .collect::<Vec<_>>()
                        .join(", "),
                ),
            }
        };
        findings.extend(check_resource(
            resource,
            &later,
            mock,
            (known, source),
            earlier,
        ));
    }
    findings
}

/// What the steps after a rendered resource's can do to it.
enum Later {
    /// Nothing that is not rendered.
    Unchanged,
    /// A function that is not rendered may change it.
    Changed,
    /// A filter (named) may remove it.
    MayBeRemoved(String),
}

/// A warning that this tool did not render something Crossplane runs, at `at`.
fn not_rendered(at: &str, why: &str) -> Finding {
    finding(
        FieldError::new(
            ErrorType::NotRendered,
            at,
            BadValue::Omit,
            format!("{why}; what it writes is not validated"),
        ),
        true,
    )
}

/// One note naming the functions whose effect is not rendered (those that may compose or
/// change resources: not readiness, context or filter functions).
fn opaque_note(rendered: &Rendered) -> Option<Finding> {
    let opaque: Vec<_> = rendered
        .opaque_steps
        .iter()
        .filter(|o| o.role == FunctionRole::Opaque)
        .collect();
    let first = opaque.first()?;
    let names = opaque
        .iter()
        .map(|o| format!("{:?} (step {:?})", o.function, o.step))
        .collect::<Vec<_>>()
        .join(", ");
    let detail = if rendered.resources.is_empty() {
        format!(
            "function {names}: recognised by its name as none whose effect is known, what it \
             composes cannot be known without running it, so no composed resource was validated"
        )
    } else {
        format!(
            "function {names}: recognised by its name as none whose effect is known, what it \
             does to composed resources cannot be known without running it, so only the patch-and-transform steps were rendered, and rendered \
             findings of the steps before it are warnings"
        )
    };
    Some(Finding::advisory(
        Stage::Rendered,
        FieldError::new(
            ErrorType::NotRendered,
            first.at.as_str(),
            BadValue::Omit,
            detail,
        ),
    ))
}

/// The findings of one rendered resource, validated in place (pruned and defaulted: the
/// resource is not needed afterwards).
fn check_resource(
    mut resource: RenderedResource,
    later: &Later,
    mock: bool,
    (known, source): (&KnownSchemas, &dyn SchemaSource),
    earlier: &[Finding],
) -> Vec<Finding> {
    let mut findings = Vec::new();
    for record in &resource.patches {
        if let Outcome::NotRendered(message) = &record.outcome {
            // Not an error of the Composition: say what was not checked.
            findings.push(not_rendered(&record.at, message));
        }
        if let Outcome::Failed(message) = &record.outcome
            && !has_finding(earlier, &record.at)
        {
            let e = FieldError::invalid(
                record.at.as_str(),
                record.from.as_str(),
                if mock {
                    format!("rendering from the mock composite resource fails: {message}")
                } else {
                    format!("rendering fails: {message}")
                },
            );
            findings.push(finding(e, mock));
        }
    }
    let Some(mut object) = resource.object.take() else {
        return findings;
    };
    let Some(schema) = schema_of(&object, known, source) else {
        return findings; // A missing CRD is reported by the schema lookups.
    };
    let Ok(compiled) = validation::compiled(&schema) else {
        return findings;
    };
    let root = if resource.at.as_str().is_empty() {
        Path::default()
    } else {
        resource.at.child("base")
    };
    // The API server ignores status on create (the status subresource sets it).
    if let Some(o) = object.as_object_mut() {
        o.remove("status");
    }
    // Validation walks the object and may copy parts of it (defaults, CEL).
    if crate::budget::reserve_copy(&object).is_err() {
        return findings;
    }
    let result = validation::validate_resource(&compiled, &mut object, &root, &CEL_LIMITS);
    for (i, error) in result.errors.into_iter().enumerate() {
        if crate::budget::step().is_err() {
            break;
        }
        let relative = relative(&error.field, root.as_str());
        let from_rule = i >= result.rules_from;
        if let Some(f) = judge(error, &relative, from_rule, &resource, mock, earlier) {
            let f = match later {
                Later::Unchanged => f,
                Later::Changed => Finding::advisory(Stage::Rendered, f.error),
                Later::MayBeRemoved(filters) => {
                    let mut error = f.error;
                    append(
                        &mut error,
                        &format!(
                            "function {filters} may remove this resource (recognised by its \
                             name), so this is a warning"
                        ),
                    );
                    Finding::advisory(Stage::Rendered, error)
                }
            };
            findings.push(f);
        }
    }
    findings
}

fn finding(error: FieldError, advisory: bool) -> Finding {
    if advisory {
        Finding::advisory(Stage::Rendered, error)
    } else {
        Finding::new(Stage::Rendered, error)
    }
}

/// The finding for one rendered error, or `None` when it repeats an earlier one.
fn judge(
    mut error: FieldError,
    relative: &[String],
    from_rule: bool,
    resource: &RenderedResource,
    mock: bool,
    earlier: &[Finding],
) -> Option<Finding> {
    let related: Vec<&PatchRecord> = resource
        .patches
        .iter()
        .filter(|r| {
            r.to.as_deref()
                .is_some_and(|to| related(&tokens(to), relative))
        })
        .collect();
    // A patch with its own error already explains what it writes; one this tool could not
    // render leaves its fields unknown.
    if related
        .iter()
        .any(|r| has_finding(earlier, &r.at) || matches!(r.outcome, Outcome::NotRendered(_)))
    {
        return None;
    }
    // With `policy.fromFieldPath: Required` the runtime does not create the resource until
    // the source exists: the field is never missing on the API server.
    if related
        .iter()
        .any(|r| matches!(r.outcome, Outcome::Skipped { required: true, .. }))
    {
        return None;
    }
    let skipped: Vec<&&PatchRecord> = related
        .iter()
        .filter(|r| matches!(r.outcome, Outcome::Skipped { .. }))
        .collect();
    let written: Vec<&&PatchRecord> = related
        .iter()
        .filter(|r| {
            matches!(r.outcome, Outcome::Written(_))
                && r.to
                    .as_deref()
                    .is_some_and(|to| under(relative, &tokens(to)))
        })
        .collect();
    let required = error.error_type == ErrorType::Required;
    if let Some(r) = skipped.first().filter(|_| required || from_rule) {
        let why = if r.from_environment {
            format!(
                "from the environment's {}, which is empty when rendered without \
                 EnvironmentConfigs",
                r.from
            )
        } else if r.from.starts_with("status.") {
            format!(
                "from {}, which the composite resource gets only later, in its status; until \
                 then the resource is invalid (policy.fromFieldPath: Required would wait for it)",
                r.from
            )
        } else if mock {
            format!(
                "from {}, which the mock composite resource does not have (optional, no \
                 default); a composite resource without it renders an invalid resource",
                r.from
            )
        } else {
            format!(
                "from {}, which this composite resource does not have",
                r.from
            )
        };
        append(&mut error, &format!("set only by {} {why}", r.at));
        return Some(finding(error, true));
    }
    if mock && let Some(r) = written.first() {
        append(
            &mut error,
            &format!(
                "the value comes from {} ({}) of the mock composite resource",
                r.at, r.from
            ),
        );
        return Some(finding(error, true));
    }
    Some(finding(error, false))
}

fn append(error: &mut FieldError, note: &str) {
    if error.detail.is_empty() {
        error.detail = note.to_string();
    } else {
        error.detail = format!("{} ({note})", error.detail);
    }
}

/// Whether an earlier logical or schema finding is at `at` or inside it.
fn has_finding(earlier: &[Finding], at: &str) -> bool {
    earlier.iter().any(|f| {
        matches!(f.stage, Stage::Logical | Stage::Schema)
            && f.error
                .field
                .strip_prefix(at)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
    })
}

/// The schema of a rendered object's kind, if its CRD is known.
fn schema_of(
    object: &Value,
    known: &KnownSchemas,
    source: &dyn SchemaSource,
) -> Option<Arc<Schema>> {
    let api_version = object.get("apiVersion")?.as_str()?;
    let kind = object.get("kind")?.as_str()?;
    if let Some(schema) = known.get(api_version, kind) {
        return Some(schema);
    }
    let (group, version) = split_api_version(api_version)?;
    source.resolve(group, kind, version).ok()?.schema
}

/// `field` relative to `root`, as path tokens.
fn relative(field: &str, root: &str) -> Vec<String> {
    let rest = if root.is_empty() {
        field
    } else {
        field.strip_prefix(root).unwrap_or(field)
    };
    tokens(rest)
}

/// A field path as tokens, the same for Kubernetes' `a.b[key][0]` and Crossplane's
/// `a.b.key[0]` spellings.
fn tokens(path: &str) -> Vec<String> {
    path.replace('[', ".")
        .replace(']', "")
        .split('.')
        .filter(|s| !s.is_empty())
        .map(|s| s.trim_matches(|c| c == '\'' || c == '"').to_string())
        .collect()
}

/// Whether one path contains the other.
fn related(a: &[String], b: &[String]) -> bool {
    under(a, b) || under(b, a)
}

/// Whether `path` is `parent` or inside it; a `*` segment of a patch's `toFieldPath`
/// stands for every element or key.
fn under(path: &[String], parent: &[String]) -> bool {
    path.len() >= parent.len()
        && path
            .iter()
            .zip(parent)
            .all(|(a, b)| a == b || a == "*" || b == "*")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_compare_across_spellings() {
        assert_eq!(
            tokens("metadata.labels[app]"),
            tokens("metadata.labels.app")
        );
        assert_eq!(tokens("spec.l[0].x"), ["spec", "l", "0", "x"]);
        assert_eq!(
            relative("spec.resources[0].base.spec.a", "spec.resources[0].base"),
            ["spec", "a"]
        );
        assert!(related(&tokens("spec.a"), &tokens("spec.a.b")));
        assert!(!related(&tokens("spec.a"), &tokens("spec.ab")));
        assert!(under(
            &tokens("spec.rules[1].port"),
            &tokens("spec.rules[*].port")
        ));
        assert!(!under(
            &tokens("spec.rules[1]"),
            &tokens("spec.rules[*].port")
        ));
    }
}
