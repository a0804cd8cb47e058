//! Applying one patch as Crossplane does at run time (`ApplyFromFieldPathPatch`,
//! `ApplyCombineFromVariablesPatch`): read the source, skip an optional patch whose source
//! is absent, run the transforms, write (or merge) the result at the destination, expanding
//! `[*]` over the elements that exist there.

use serde_json::Value;

use super::paved::{self, Merge};
use super::transform;
use crate::fieldpath::{self, Segments};
use crate::go::fmt;
use crate::model::{self, COMBINE_STRATEGY_STRING, Patch, PatchPolicy};

/// The deepest destination path rendered.
pub const MAX_DEST_SEGMENTS: usize = 128;
/// The most fields one wildcard destination is expanded to.
pub const MAX_TARGETS: usize = 10_000;

/// What a patch did.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The value was written at the destination; at these paths when the destination has
    /// `[*]` (the elements it was expanded to), none otherwise (the path as written: kept
    /// by the patch, not copied into every record).
    Written(Vec<Segments>),
    /// The source field is absent, so the runtime skipped the patch (`required` when the
    /// policy is `Required`: then the runtime does not create the resource until it exists).
    Skipped {
        /// The absent source field path.
        source: String,
        /// Whether `policy.fromFieldPath` is `Required`.
        required: bool,
    },
    /// A patch the first render of composed resources does not run (to the XR or to the
    /// environment: they read observed resources).
    NotRun,
    /// The runtime fails with this message.
    Failed(String),
    /// This tool cannot run the patch where Crossplane can (see
    /// [`transform::TransformError::NotRendered`]); the destination is left as it was.
    NotRendered(String),
}

/// Which way a patch type copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// From the XR (or environment) to the composed resource.
    In,
    /// From the composed resource to the XR (or environment).
    Out,
}

/// The direction of a patch type and whether it reads the environment.
pub fn direction(patch_type: &str) -> Option<(Direction, bool)> {
    Some(match patch_type {
        model::FROM_COMPOSITE_FIELD_PATH | model::COMBINE_FROM_COMPOSITE => (Direction::In, false),
        model::FROM_ENVIRONMENT_FIELD_PATH | model::COMBINE_FROM_ENVIRONMENT => {
            (Direction::In, true)
        }
        model::TO_COMPOSITE_FIELD_PATH | model::COMBINE_TO_COMPOSITE => (Direction::Out, false),
        model::TO_ENVIRONMENT_FIELD_PATH | model::COMBINE_TO_ENVIRONMENT => (Direction::Out, true),
        _ => return None,
    })
}

/// A path parsed into segments borrowed from the patch.
type Parsed<'a> = Result<fieldpath::SegmentRefs<'a>, fieldpath::ParseError>;

/// A patch's field paths, parsed once: a patch set's patches are applied to every template
/// that uses it, with the same paths each time. The segments borrow the patch's strings.
#[derive(Debug, Clone)]
pub struct ParsedPaths<'a> {
    /// `fromFieldPath`.
    source: Option<Parsed<'a>>,
    /// Each combine variable's `fromFieldPath`, in order.
    variables: Vec<Parsed<'a>>,
    /// The destination (`toFieldPath`, else `fromFieldPath` for a patch that is not a
    /// combine).
    dest: Option<Parsed<'a>>,
}

impl<'a> ParsedPaths<'a> {
    /// The paths of `patch`, parsed.
    pub fn of(patch: &'a Patch) -> Self {
        let combine = is_combine(patch);
        ParsedPaths {
            source: patch
                .from_field_path
                .as_deref()
                .map(fieldpath::parse_borrowed),
            variables: match &patch.combine {
                Some(c) if combine => c
                    .variables
                    .iter()
                    .map(|v| fieldpath::parse_borrowed(&v.from_field_path))
                    .collect(),
                _ => Vec::new(),
            },
            dest: destination(patch, combine).map(fieldpath::parse_borrowed),
        }
    }
}

fn is_combine(patch: &Patch) -> bool {
    matches!(
        patch.effective_type(),
        model::COMBINE_FROM_COMPOSITE
            | model::COMBINE_FROM_ENVIRONMENT
            | model::COMBINE_TO_COMPOSITE
            | model::COMBINE_TO_ENVIRONMENT
    )
}

/// The destination, which defaults to the source path (not for a combine).
fn destination(patch: &Patch, combine: bool) -> Option<&str> {
    patch
        .to_field_path
        .as_deref()
        .or(patch.from_field_path.as_deref().filter(|_| !combine))
}

/// Applies `patch` reading `from` and writing `to` (the caller picks XR, environment or
/// composed resource by [`direction`]).
pub fn apply(patch: &Patch, from: &Value, to: &mut Value) -> Outcome {
    apply_parsed(patch, &ParsedPaths::of(patch), from, to)
}

/// [`apply`] with the patch's paths already parsed (`paths` must be [`ParsedPaths::of`]
/// `patch`).
pub fn apply_parsed(patch: &Patch, paths: &ParsedPaths, from: &Value, to: &mut Value) -> Outcome {
    let combine = is_combine(patch);
    let required = patch
        .policy
        .as_ref()
        .and_then(|p| p.from_field_path.as_deref())
        == Some("Required");
    let input = if combine {
        match combined(patch, &paths.variables, from, required) {
            Ok(v) => v,
            Err(o) => return o,
        }
    } else {
        let (Some(source), Some(path)) = (patch.from_field_path.as_deref(), &paths.source) else {
            return Outcome::Failed(format!(
                "FromFieldPath is required by type {}",
                patch.effective_type()
            ));
        };
        match read(from, source, path, required) {
            Ok(v) => v,
            Err(o) => return o,
        }
    };
    let output = match transform::apply_all(&patch.transforms, input) {
        Ok(v) => v,
        Err(e) => {
            return match e.inner() {
                transform::TransformError::NotRendered(m) => Outcome::NotRendered(m.clone()),
                _ => Outcome::Failed(e.to_string()),
            };
        }
    };
    // The destination defaults to the source path.
    let (Some(dest), Some(parsed)) = (destination(patch, combine), &paths.dest) else {
        return Outcome::Failed(format!(
            "ToFieldPath is required by type {}",
            patch.effective_type()
        ));
    };
    let dest_path = match parsed {
        Ok(p) => p,
        Err(e) => return Outcome::Failed(format!("cannot parse path {dest:?}: {e}")),
    };
    // Objects as deep as the documents the reader accepts; deeper ones are not built.
    if dest_path.len() > MAX_DEST_SEGMENTS {
        return Outcome::NotRendered(format!(
            "ToFieldPath has {} segments, more than the {MAX_DEST_SEGMENTS} rendering follows",
            dest_path.len()
        ));
    }
    let merge = if combine {
        None
    } else {
        merge_options(patch.policy.as_ref())
    };
    let expanded = if dest.contains("[*]") {
        Some(match paved::expand_wildcards(to, dest_path.as_slice()) {
            Ok(t) if t.is_empty() => {
                return Outcome::Failed(format!("cannot expand ToFieldPath {dest}"));
            }
            Ok(t) if t.len() > MAX_TARGETS => {
                return Outcome::NotRendered(format!(
                    "ToFieldPath {dest} expands to {} fields, more than the {MAX_TARGETS} rendering follows",
                    t.len()
                ));
            }
            Ok(t) => t,
            Err(e) => return Outcome::Failed(e.to_string()),
        })
    } else {
        None
    };
    let written = match &expanded {
        Some(targets) => write_all(to, targets, output, merge),
        None => write_all(to, std::slice::from_ref(dest_path), output, merge),
    };
    match written {
        Ok(()) => Outcome::Written(expanded.unwrap_or_default()),
        Err(failed) => failed,
    }
}

/// Writes `output` at every one of `targets` (a copy each, the last the value itself).
fn write_all<P: AsRef<[S]>, S: fieldpath::AsSegment>(
    to: &mut Value,
    targets: &[P],
    output: Value,
    merge: Option<Merge>,
) -> Result<(), Outcome> {
    let mut output = Some(output);
    for (k, target) in targets.iter().enumerate() {
        let target = target.as_ref();
        let Some(value) = output.as_ref() else { break };
        // Every target gets a copy: one large value written to many places adds up.
        if let Err(e) = crate::budget::reserve_copy(value) {
            return Err(Outcome::Failed(format!(
                "not rendered: writing {} {e}",
                fieldpath::path_string(target)
            )));
        }
        // The last target takes the value itself.
        let value = if k + 1 == targets.len() {
            output.take().unwrap_or_default()
        } else {
            value.clone()
        };
        if let Err(e) = paved::merge_value(to, target, value, merge) {
            return Err(Outcome::Failed(format!("cannot patch to object: {e}")));
        }
    }
    Ok(())
}

/// The value at `source` (parsed: `path`), or how the patch ends when it is absent.
fn read(from: &Value, source: &str, path: &Parsed<'_>, required: bool) -> Result<Value, Outcome> {
    let path = path
        .as_ref()
        .map_err(|e| Outcome::Failed(format!("cannot parse path {source:?}: {e}")))?;
    match paved::find(from, path.as_slice()) {
        Ok(Some(v)) => {
            // Each patch copies its source: a large one read by many patches adds up.
            crate::budget::reserve_copy(v)
                .map_err(|e| Outcome::Failed(format!("not rendered: copying {source} {e}")))?;
            Ok(v.clone())
        }
        Ok(None) => Err(Outcome::Skipped {
            source: source.to_string(),
            required,
        }),
        Err(e) => Err(Outcome::Failed(e.to_string())),
    }
}

/// The combined value of a Combine patch: every variable must exist.
fn combined(
    patch: &Patch,
    paths: &[Parsed<'_>],
    from: &Value,
    required: bool,
) -> Result<Value, Outcome> {
    let Some(combine) = &patch.combine else {
        return Err(Outcome::Failed(format!(
            "Combine is required by type {}",
            patch.effective_type()
        )));
    };
    if combine.variables.is_empty() {
        return Err(Outcome::Failed(
            "combine patch types require at least one variable".into(),
        ));
    }
    let mut values = Vec::with_capacity(combine.variables.len());
    for (var, path) in combine.variables.iter().zip(paths) {
        values.push(read(from, &var.from_field_path, path, required)?);
    }
    if combine.strategy != COMBINE_STRATEGY_STRING {
        return Err(Outcome::Failed(format!(
            "combine strategy {} is not supported",
            combine.strategy
        )));
    }
    let Some(string) = &combine.string else {
        return Err(Outcome::Failed(format!(
            "given combine strategy {} requires configuration",
            combine.strategy
        )));
    };
    Ok(Value::String(fmt::sprintf(&string.fmt, &values)))
}

/// The merge options of a patch policy: function-patch-and-transform's `toFieldPath`
/// policy, else the Composition's `mergeOptions`; `None` replaces.
fn merge_options(policy: Option<&PatchPolicy>) -> Option<Merge> {
    let policy = policy?;
    match policy.to_field_path.as_deref() {
        Some("MergeObjects" | "MergeObject") => Some(Merge {
            keep_map_values: true,
            append_slice: false,
        }),
        Some("MergeObjectsAppendArrays") => Some(Merge {
            keep_map_values: true,
            append_slice: true,
        }),
        Some("ForceMergeObjects") => Some(Merge::default()),
        Some("ForceMergeObjectsAppendArrays" | "AppendArray") => Some(Merge {
            keep_map_values: false,
            append_slice: true,
        }),
        _ => policy.merge_options.as_ref().map(|m| Merge {
            keep_map_values: m.keep_map_values.unwrap_or(false),
            append_slice: m.append_slice.unwrap_or(false),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn patch(v: Value) -> Patch {
        serde_json::from_value(v).expect("patch")
    }

    #[test]
    fn from_composite_with_transforms() {
        let xr = json!({"spec": {"size": 2, "name": "db"}});
        let mut cd = json!({"spec": {}});
        let p = patch(
            json!({"type": "FromCompositeFieldPath", "fromFieldPath": "spec.name",
            "toFieldPath": "spec.forProvider.id",
            "transforms": [{"type": "string", "string": {"type": "Format", "fmt": "%s-x"}}]}),
        );
        assert_eq!(apply(&p, &xr, &mut cd), Outcome::Written(Vec::new()));
        assert_eq!(cd["spec"]["forProvider"]["id"], "db-x");
        // The destination defaults to the source path.
        let p = patch(json!({"fromFieldPath": "spec.size"}));
        apply(&p, &xr, &mut cd);
        assert_eq!(cd["spec"]["size"], 2);
    }

    #[test]
    fn absent_sources_skip() {
        let xr = json!({"spec": {"a": "x"}});
        let mut cd = json!({});
        let p = patch(
            json!({"fromFieldPath": "spec.missing", "toFieldPath": "spec.b",
            "policy": {"fromFieldPath": "Required"}}),
        );
        assert_eq!(
            apply(&p, &xr, &mut cd),
            Outcome::Skipped {
                source: "spec.missing".into(),
                required: true
            }
        );
        let p = patch(
            json!({"type": "CombineFromComposite", "toFieldPath": "spec.c",
            "combine": {"strategy": "string", "variables": [{"fromFieldPath": "spec.a"},
                {"fromFieldPath": "spec.nope"}], "string": {"fmt": "%s-%s"}}}),
        );
        assert!(matches!(apply(&p, &xr, &mut cd), Outcome::Skipped { .. }));
        assert_eq!(cd, json!({}));
    }

    #[test]
    fn combine_and_wildcards_and_merge() {
        let xr = json!({"spec": {"a": "x", "n": 3, "tags": {"k": "v"}}});
        let mut cd = json!({"spec": {"rules": [{"p": 0}, {"p": 0}], "tags": {"old": "1"}}});
        let p = patch(
            json!({"type": "CombineFromComposite", "toFieldPath": "spec.name",
            "combine": {"strategy": "string", "variables": [{"fromFieldPath": "spec.a"},
                {"fromFieldPath": "spec.n"}], "string": {"fmt": "%s-%d"}}}),
        );
        apply(&p, &xr, &mut cd);
        assert_eq!(cd["spec"]["name"], "x-3");
        let p = patch(json!({"fromFieldPath": "spec.n", "toFieldPath": "spec.rules[*].p"}));
        assert_eq!(
            apply(&p, &xr, &mut cd),
            Outcome::Written(vec![
                fieldpath::parse("spec.rules[0].p").expect("path"),
                fieldpath::parse("spec.rules[1].p").expect("path")
            ])
        );
        let p = patch(
            json!({"fromFieldPath": "spec.tags", "toFieldPath": "spec.tags",
            "policy": {"toFieldPath": "MergeObjects"}}),
        );
        apply(&p, &xr, &mut cd);
        assert_eq!(cd["spec"]["tags"], json!({"old": "1", "k": "v"}));
        let p = patch(json!({"fromFieldPath": "spec.n", "toFieldPath": "spec.none[*].p"}));
        assert_eq!(
            apply(&p, &xr, &mut cd),
            Outcome::Failed("cannot expand ToFieldPath spec.none[*].p".into())
        );
    }
}
