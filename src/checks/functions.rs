//! The Functions a pipeline's steps name (`spec.pipeline[i].functionRef.name`), when the
//! schema source knows which are installed: a step naming none cannot run (Crossplane
//! fails the whole pipeline until a Function of that name is installed), and an input of one
//! well-known function's kind sent to another is never read as meant: an error naming both.
//! Without the Functions nothing is reported: steps are recognised by name.

use std::sync::Arc;

use super::schema_aware::lookup::{SchemaInfo, SchemaSource};
use crate::findings::{FieldError, Finding, Path, Stage};
use crate::model::function::{FunctionPackage, FunctionSet, KnownFunction};
use crate::model::{Composition, is_patch_and_transform};
use crate::schema::LookupError;

/// The longest `functionRef.name` compared with the installed names for a typo (a DNS
/// label; the package manager's names, `crossplane-contrib-function-auto-ready`, are
/// shorter).
const MAX_COMPARED: usize = 63;

/// The most missing Functions that get a suggestion: a pipeline of thousands of steps costs
/// no more.
const MAX_SUGGESTED: usize = 16;

/// The findings about the Functions `c`'s steps name, given the installed `functions`.
pub fn check(c: &Composition, functions: Option<&FunctionSet>) -> Vec<Finding> {
    let Some(functions) = functions else {
        return Vec::new();
    };
    let mut findings = Vec::new();
    let mut suggested = 0;
    for (i, step) in c.spec.pipeline.iter().enumerate() {
        if crate::budget::step().is_err() {
            break;
        }
        let name = step.function_ref.name.as_str();
        if name.is_empty() {
            continue; // Reported by the logical checks.
        }
        let at = Path::new("spec")
            .child("pipeline")
            .index(i)
            .child("functionRef")
            .child("name");
        let pt_input = step.input.as_ref().is_some_and(is_patch_and_transform);
        match functions.get(name) {
            None => {
                let suggest = suggested < MAX_SUGGESTED;
                suggested += 1;
                findings.push(Finding::new(
                    Stage::Crds,
                    FieldError::not_found(at, name, missing(name, pt_input, functions, suggest)),
                ));
            }
            Some(f) => {
                // An input of another well-known function's kind is never read as meant: the
                // step's function decodes it as its own (function-go-templating then fails
                // every time, "source is required").
                let input = step.input.as_ref().and_then(input_kind);
                if let Some((group, kind, owner)) = input
                    && f.function != KnownFunction::Other
                    && owner != f.function
                {
                    findings.push(Finding::new(
                        Stage::Schema,
                        FieldError::invalid(
                            at,
                            name,
                            format!(
                                "the input is {owner}'s ({group} {kind}), but this Function's package is {}, which does not read it",
                                f.function
                            ),
                        ),
                    ));
                }
            }
        }
    }
    findings
}

/// The group and kind of an input that is a well-known function's, with that function.
fn input_kind(input: &serde_json::Value) -> Option<(&str, &str, KnownFunction)> {
    let group = input.get("apiVersion")?.as_str()?.split_once('/')?.0;
    let kind = input.get("kind")?.as_str()?;
    Some((group, kind, KnownFunction::by_input(group, kind)?))
}

/// Why a step naming no installed Function is reported: with `suggest`, the installed
/// Functions it may have meant, else the package such a step usually runs. Short enough for
/// an admission warning (256 characters with the field and the Composition's name).
fn missing(name: &str, pt_input: bool, functions: &FunctionSet, suggest: bool) -> String {
    let mut detail =
        "Crossplane cannot run the pipeline until a Function of this name is installed".to_string();
    let expected = match KnownFunction::suggested_by(name) {
        KnownFunction::Other if pt_input => KnownFunction::PatchAndTransform,
        other => other,
    };
    let meant: Vec<&FunctionPackage> = if !suggest {
        Vec::new()
    } else if expected == KnownFunction::Other {
        // A misspelt name: the installed names an edit or two away (one for short names).
        let most = (name.len() / 4).clamp(1, 2);
        if name.len() > MAX_COMPARED {
            Vec::new()
        } else {
            functions
                .iter()
                .filter(|f| strsim::damerau_levenshtein(name, &f.name) <= most)
                .collect()
        }
    } else {
        functions
            .iter()
            .filter(|f| f.function == expected)
            .collect()
    };
    let meant: Vec<String> = meant
        .iter()
        .take(3)
        .map(|f| format!("{:?}", f.name))
        .collect();
    if !meant.is_empty() {
        detail.push_str(&format!("; did you mean {}?", meant.join(" or ")));
    } else if let Some(usual) = expected.usual_package() {
        detail.push_str(&format!(" (usually {usual})"));
    }
    detail
}

/// A schema source with Functions from files (`--functions`).
pub struct WithFunctions<S> {
    /// Where the schemas come from.
    pub schemas: S,
    /// The Functions (`None`: none given, steps are recognised by name).
    pub functions: Option<Arc<FunctionSet>>,
}

impl<S: SchemaSource> SchemaSource for WithFunctions<S> {
    fn resolve(&self, group: &str, kind: &str, version: &str) -> Result<SchemaInfo, LookupError> {
        self.schemas.resolve(group, kind, version)
    }

    fn functions(&self) -> Option<Arc<FunctionSet>> {
        self.functions.clone()
    }

    fn activation_policies(&self) -> Option<Arc<crate::schema::ActivationPolicies>> {
        self.schemas.activation_policies()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn composition(pipeline: serde_json::Value) -> Composition {
        let api = crate::schema::CompositionApi::embedded(crate::schema::CrossplaneVersion::V2);
        Composition::from_value(
            &json!({
                "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
                "metadata": {"name": "c"},
                "spec": {"compositeTypeRef": {"apiVersion": "example.org/v1", "kind": "X"},
                         "mode": "Pipeline", "pipeline": pipeline}
            }),
            &api,
        )
        .expect("a Composition")
    }

    fn installed() -> FunctionSet {
        let mut set = FunctionSet::new();
        set.insert(FunctionPackage::new(
            "pt",
            "xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform:v0.10.8",
        ));
        set.insert(FunctionPackage::new(
            "templates",
            "xpkg.crossplane.io/crossplane-contrib/function-go-templating:v0.9.0",
        ));
        set.insert(FunctionPackage::new(
            "acme",
            "registry.example.com/acme/function-acme:v1",
        ));
        set
    }

    fn messages(c: &Composition, set: Option<&FunctionSet>) -> Vec<(bool, String)> {
        check(c, set)
            .iter()
            .map(|f| (f.advisory, f.message()))
            .collect()
    }

    #[test]
    fn nothing_without_the_functions_and_nothing_when_every_step_has_its_function() {
        let c = composition(json!([
            {"step": "a", "functionRef": {"name": "nowhere"}},
        ]));
        assert!(check(&c, None).is_empty());
        let c = composition(json!([
            {"step": "a", "functionRef": {"name": "pt"},
             "input": {"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources"}},
            {"step": "b", "functionRef": {"name": "acme"},
             "input": {"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources"}},
        ]));
        assert!(check(&c, Some(&installed())).is_empty());
    }

    #[test]
    fn missing_functions_say_what_they_usually_are_and_what_is_installed() {
        let set = installed();
        let c = composition(json!([
            {"step": "a", "functionRef": {"name": "function-patch-and-transform"}},
            {"step": "b", "functionRef": {"name": "resources"},
             "input": {"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources"}},
            {"step": "c", "functionRef": {"name": "templatess"}},
            {"step": "d", "functionRef": {"name": "function-auto-ready"}},
            {"step": "e", "functionRef": {"name": "unheard-of"}},
        ]));
        let base = "Crossplane cannot run the pipeline until a Function of this name is installed";
        assert_eq!(
            messages(&c, Some(&set)),
            [
                (
                    false,
                    format!(
                        "spec.pipeline[0].functionRef.name: Not found: \"function-patch-and-transform\": {base}; did you mean \"pt\"?"
                    )
                ),
                (
                    false,
                    format!(
                        "spec.pipeline[1].functionRef.name: Not found: \"resources\": {base}; did you mean \"pt\"?"
                    )
                ),
                (
                    false,
                    format!(
                        "spec.pipeline[2].functionRef.name: Not found: \"templatess\": {base}; did you mean \"templates\"?"
                    )
                ),
                (
                    false,
                    format!(
                        "spec.pipeline[3].functionRef.name: Not found: \"function-auto-ready\": {base} (usually xpkg.crossplane.io/crossplane-contrib/function-auto-ready)"
                    )
                ),
                (
                    false,
                    format!("spec.pipeline[4].functionRef.name: Not found: \"unheard-of\": {base}")
                ),
            ]
        );
    }

    #[test]
    fn only_the_first_missing_functions_get_suggestions() {
        let steps: Vec<_> = (0..MAX_SUGGESTED + 1)
            .map(|i| json!({"step": format!("s{i}"), "functionRef": {"name": "templatess"}}))
            .collect();
        let found = messages(&composition(json!(steps)), Some(&installed()));
        assert_eq!(found.len(), MAX_SUGGESTED + 1);
        assert!(
            found[MAX_SUGGESTED - 1]
                .1
                .ends_with("did you mean \"templates\"?")
        );
        assert!(found[MAX_SUGGESTED].1.ends_with(
            "Crossplane cannot run the pipeline until a Function of this name is installed"
        ));
    }

    #[test]
    fn an_input_of_another_known_function_is_an_error() {
        let c = composition(json!([
            {"step": "a", "functionRef": {"name": "templates"},
             "input": {"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources"}},
        ]));
        assert_eq!(
            messages(&c, Some(&installed())),
            [(
                false,
                "spec.pipeline[0].functionRef.name: Invalid value: \"templates\": the input is function-patch-and-transform's (pt.fn.crossplane.io Resources), but this Function's package is function-go-templating, which does not read it".to_string()
            )]
        );
    }

    /// Inputs as each function's own examples give them (function-go-templating's
    /// `example/inline`, function-kcl's `examples/default`), sent to the wrong function.
    #[test]
    fn inputs_are_their_functions_own() {
        let c = composition(json!([
            {"step": "a", "functionRef": {"name": "pt"},
             "input": {"apiVersion": "gotemplating.fn.crossplane.io/v1beta1", "kind": "GoTemplate",
                       "source": "Inline"}},
            {"step": "b", "functionRef": {"name": "templates"},
             "input": {"apiVersion": "krm.kcl.dev/v1alpha1", "kind": "KCLInput"}},
            {"step": "c", "functionRef": {"name": "templates"},
             "input": {"apiVersion": "gotemplating.fn.crossplane.io/v1beta1", "kind": "GoTemplate"}},
            {"step": "d", "functionRef": {"name": "templates"},
             "input": {"apiVersion": "acme.example.com/v1", "kind": "Resources"}},
            {"step": "e", "functionRef": {"name": "acme"},
             "input": {"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources"}},
        ]));
        assert_eq!(
            messages(&c, Some(&installed())),
            [
                (
                    false,
                    "spec.pipeline[0].functionRef.name: Invalid value: \"pt\": the input is function-go-templating's (gotemplating.fn.crossplane.io GoTemplate), but this Function's package is function-patch-and-transform, which does not read it".to_string()
                ),
                (
                    false,
                    "spec.pipeline[1].functionRef.name: Invalid value: \"templates\": the input is function-kcl's (krm.kcl.dev KCLInput), but this Function's package is function-go-templating, which does not read it".to_string()
                ),
            ]
        );
    }
}
