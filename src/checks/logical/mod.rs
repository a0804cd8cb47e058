//! Logical validation: what can be checked on a Composition by itself, without any schema.
//!
//! Runs upstream's checks (Crossplane v1.17 `Composition.Validate()`, in its order: mode,
//! patch sets, resources, pipeline, environment) and the ones upstream left as TODO:
//! connection details, combine format verbs against variables, regexp capture groups,
//! duplicate patch set names and the fields the Composition CRD requires (which the API
//! server enforces, but files never went through an API server).

mod connection;
mod environment;
mod patch;
mod paths;
mod readiness;
mod transform;

pub use connection::validate_connection_detail;
pub use environment::{validate_environment, validate_environment_patch, validate_selector};
pub use patch::validate_patch;
pub use paths::validate_field_paths;
pub use readiness::validate_readiness_check;
pub use transform::validate_transform;

use std::collections::HashSet;

use crate::findings::{BadValue, ErrorType, FieldError, Path};
use crate::model::{ComposedTemplate, Composition, MODE_PIPELINE, MODE_RESOURCES, PATCH_SET};
use crate::schema::split_api_version;

/// Names a Composition declares, checked for repeats.
type Names<'a> = HashSet<&'a str, crate::hashing::ByInput>;

/// Every logical error of a Composition: upstream's checks in upstream's order, then the
/// syntax of every field path; preceded, with `as_api_server`, by what the API server checks
/// before a webhook sees the object (its name, the fields the Composition CRD requires).
/// Files never went through an API server; admission requests did.
pub fn validate(c: &Composition, as_api_server: bool) -> Vec<FieldError> {
    let mut errs = if as_api_server {
        let mut errs = validate_name(c);
        errs.extend(validate_required(c));
        errs
    } else {
        Vec::new()
    };
    errs.extend(validate_upstream(c));
    errs.extend(validate_field_paths(c));
    errs
}

/// `metadata.name` as the API server validates names of cluster-scoped custom resources:
/// present (or `generateName`), and an RFC 1123 subdomain.
pub fn validate_name(c: &Composition) -> Vec<FieldError> {
    let name = &c.metadata.name;
    if name.is_empty() {
        if c.metadata.generate_name.is_empty() {
            return vec![FieldError::required(
                "metadata.name",
                "name or generateName is required",
            )];
        }
        return Vec::new();
    }
    crate::schema::validation::names::dns1123_subdomain(name)
        .into_iter()
        .map(|detail| FieldError::invalid("metadata.name", name.as_str(), detail))
        .collect()
}

/// Upstream's `Composition.Validate()` groups, in its order (mode, patch sets, resources,
/// pipeline, environment), with the extra checks folded into the groups they belong to.
pub fn validate_upstream(c: &Composition) -> Vec<FieldError> {
    let mut errs = Vec::new();
    errs.extend(validate_mode(c));
    errs.extend(validate_patch_sets(c));
    errs.extend(validate_resources(c));
    errs.extend(validate_pipeline(c));
    errs.extend(validate_environment(c));
    errs
}

/// Fields the Composition CRD requires: the API server rejects their absence, so a
/// Composition from a file must be told the same.
pub fn validate_required(c: &Composition) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let type_ref = Path::new("spec").child("compositeTypeRef");
    if c.spec.composite_type_ref.api_version.is_empty() {
        errs.push(FieldError::required(
            type_ref.child("apiVersion"),
            "the composite resource's apiVersion (group/version) is required",
        ));
    } else if !matches!(
        split_api_version(&c.spec.composite_type_ref.api_version),
        Some((group, _)) if !group.is_empty()
    ) {
        errs.push(FieldError::invalid(
            type_ref.child("apiVersion"),
            c.spec.composite_type_ref.api_version.as_str(),
            "must be group/version: composite resources always belong to an API group",
        ));
    }
    if c.spec.composite_type_ref.kind.is_empty() {
        errs.push(FieldError::required(
            type_ref.child("kind"),
            "the composite resource's kind is required",
        ));
    }
    errs.extend(validate_bases(&c.spec.resources, &Path::new("spec")));
    for (i, step) in c.spec.pipeline.iter().enumerate() {
        let p = Path::new("spec").child("pipeline").index(i);
        if step.step.is_empty() {
            // A `step:` indented one level too deep lands in the function's input.
            let misplaced = step
                .input
                .as_ref()
                .and_then(|i| i.get("step"))
                .is_some_and(|s| s.is_string());
            errs.push(FieldError::required(
                p.child("step"),
                if misplaced {
                    "every pipeline step needs a name; `step` is set inside `input` instead: is it indented one level too deep?"
                } else {
                    "every pipeline step needs a name"
                },
            ));
        }
        if step.function_ref.name.is_empty() {
            errs.push(FieldError::required(
                p.child("functionRef").child("name"),
                "every pipeline step must name the Function it runs",
            ));
        }
    }
    errs
}

/// Every base is an object with a string `apiVersion` (group/version) and `kind`; `at` holds
/// the `resources` list (`spec`, or a patch-and-transform step's `input`).
pub fn validate_bases(resources: &[ComposedTemplate], at: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, res) in resources.iter().enumerate() {
        // Spelled out only for an error: most bases have none.
        let base = || at.child("resources").index(i).child("base");
        match &res.base {
            serde_json::Value::Object(obj) => {
                for key in ["apiVersion", "kind"] {
                    match crate::json::member(obj, key) {
                        Some(serde_json::Value::String(s))
                            if key == "apiVersion"
                                && !s.is_empty()
                                && split_api_version(s).is_none() =>
                        {
                            errs.push(FieldError::invalid(
                                base().child(key),
                                s.as_str(),
                                "must be group/version, or version for the core group",
                            ))
                        }
                        Some(serde_json::Value::String(s)) if !s.is_empty() => {}
                        Some(serde_json::Value::String(_)) | None => {
                            errs.push(FieldError::required(
                                base().child(key),
                                "every base must set its apiVersion and kind",
                            ))
                        }
                        Some(other) => errs.push(FieldError::invalid(
                            base().child(key),
                            BadValue::from_json(other),
                            "must be a string",
                        )),
                    }
                }
            }
            serde_json::Value::Null => errs.push(FieldError::required(
                base(),
                "every resource needs a base object",
            )),
            other => errs.push(FieldError::invalid(
                base(),
                BadValue::from_json(other),
                "the base must be a Kubernetes object",
            )),
        }
    }
    errs
}

/// `spec.mode` needs the matching list: resources in Resources mode, a pipeline in Pipeline
/// mode. An unknown mode is reported (the CRD's enum would reject it).
pub fn validate_mode(c: &Composition) -> Vec<FieldError> {
    let mut errs = Vec::new();
    match c.spec.mode.as_str() {
        "" | MODE_RESOURCES => {
            if c.spec.resources.is_empty() {
                errs.push(FieldError::required(
                    "spec.resources",
                    "an array of resources is required in Resources mode (the default if no mode is specified)",
                ));
            }
        }
        MODE_PIPELINE => {
            if c.spec.pipeline.is_empty() {
                errs.push(FieldError::required(
                    "spec.pipeline",
                    "an array of pipeline steps is required in Pipeline mode",
                ));
            }
        }
        other => errs.push(FieldError::new(
            ErrorType::NotSupported,
            "spec.mode",
            BadValue::from(other),
            r#"supported values: "Resources", "Pipeline""#,
        )),
    }
    errs
}

/// Patch sets: no nested PatchSet patches, every patch valid, names unique and present, and
/// every `patchSetName` of a resource patch names a declared patch set.
pub fn validate_patch_sets(c: &Composition) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut declared = Names::default();
    for (i, ps) in c.spec.patch_sets.iter().enumerate() {
        let p = || Path::new("spec").child("patchSets").index(i);
        if ps.name.is_empty() {
            errs.push(FieldError::required(
                p().child("name"),
                "every patch set needs a name",
            ));
        } else if !declared.insert(ps.name.as_str()) {
            errs.push(FieldError::duplicate(p().child("name"), ps.name.as_str()));
        }
        for (j, patch) in ps.patches.iter().enumerate() {
            let pp = || p().child("patches").index(j);
            // Upstream compares the raw type, so only an explicit PatchSet is caught here.
            if patch.r#type == PATCH_SET {
                errs.push(FieldError::invalid(
                    pp().child("type"),
                    patch.r#type.as_str(),
                    "cannot use patches within patches",
                ));
                continue;
            }
            if let Some(e) = validate_patch(patch) {
                errs.push(e.prefixed(pp().as_str()));
            }
        }
    }
    for (i, res) in c.spec.resources.iter().enumerate() {
        for (j, patch) in res.patches.iter().enumerate() {
            if patch.r#type != PATCH_SET {
                continue;
            }
            // Spelled out only for an error.
            let field = || {
                Path::new("spec")
                    .child("resources")
                    .index(i)
                    .child("patches")
                    .index(j)
                    .child("patchSetName")
            };
            match patch.patch_set_name.as_deref() {
                None => errs.push(FieldError::required(
                    field(),
                    "must be specified when type is patchSet",
                )),
                Some(name) if !declared.contains(name) => errs.push(FieldError::invalid(
                    field(),
                    name,
                    "patchSetName must be the name of a declared patchSet",
                )),
                Some(_) => {}
            }
        }
    }
    errs
}

/// Resource names, then every patch, readiness check and connection detail of each resource.
pub fn validate_resources(c: &Composition) -> Vec<FieldError> {
    let mut errs = validate_resource_names(c);
    for (i, res) in c.spec.resources.iter().enumerate() {
        let r = || Path::new("spec").child("resources").index(i);
        for (j, patch) in res.patches.iter().enumerate() {
            if let Some(e) = validate_patch(patch) {
                errs.push(e.prefixed(r().child("patches").index(j).as_str()));
            }
        }
        for (j, check) in res.readiness_checks.iter().enumerate() {
            if let Some(e) = validate_readiness_check(check) {
                errs.push(e.prefixed(r().child("readinessChecks").index(j).as_str()));
            }
        }
        for (j, detail) in res.connection_details.iter().enumerate() {
            if let Some(e) = validate_connection_detail(detail) {
                errs.push(e.prefixed(r().child("connectionDetails").index(j).as_str()));
            }
        }
    }
    errs
}

/// Either every resource is named or none is; names are unique; with a pipeline every
/// resource must be named.
pub fn validate_resource_names(c: &Composition) -> Vec<FieldError> {
    const MIXED: &str = "cannot mix named and anonymous resources, all resources must have a name or none must have a name";
    let mut errs = Vec::new();
    let mut seen = Names::default();
    for (i, res) in c.spec.resources.iter().enumerate() {
        let field = || Path::new("spec").child("resources").index(i).child("name");
        let name = res.name.as_deref().unwrap_or("");
        if name.is_empty() {
            if !c.spec.pipeline.is_empty() {
                errs.push(FieldError::required(
                    field(),
                    "cannot have anonymous resources when composition has functions",
                ));
            } else if !seen.is_empty() {
                errs.push(FieldError::required(field(), MIXED));
            }
            continue;
        }
        if i > 0 && seen.is_empty() {
            errs.push(FieldError::invalid(field(), name, MIXED));
            continue;
        }
        if !seen.insert(name) {
            errs.push(FieldError::duplicate(field(), name));
        }
    }
    errs
}

/// Pipeline steps: unique step names, unique credential names within a step, a secretRef
/// for Secret credentials.
pub fn validate_pipeline(c: &Composition) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut steps = Names::default();
    for (i, step) in c.spec.pipeline.iter().enumerate() {
        let p = Path::new("spec").child("pipeline").index(i);
        if !step.step.is_empty() && !steps.insert(step.step.as_str()) {
            errs.push(FieldError::duplicate(p.child("step"), step.step.as_str()));
        }
        let mut creds = Names::default();
        for (j, cred) in step.credentials.iter().enumerate() {
            let cp = p.child("credentials").index(j);
            if !creds.insert(cred.name.as_str()) {
                errs.push(FieldError::duplicate(cp.child("name"), cred.name.as_str()));
            }
            if cred.source == crate::model::CREDENTIAL_SOURCE_SECRET && cred.secret_ref.is_none() {
                errs.push(FieldError::required(
                    cp.child("secretRef"),
                    "must be specified when source is Secret",
                ));
            }
        }
    }
    errs
}
