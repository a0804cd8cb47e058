//! `--functions PATH...`: the Functions (`pkg.crossplane.io`) installed, from their
//! manifests, for `validate`, `render` and `serve --crds`. With them a pipeline step is
//! recognised by its Function's package, and a step naming no Function among them is
//! reported; without them steps are recognised by their Function's name.
//!
//! Where Functions run, to run their pipeline steps for real: a Function manifest with
//! `crossplane render`'s annotations `render.crossplane.io/runtime: Development` (and
//! `render.crossplane.io/runtime-development-target`, default `localhost:9443`), or
//! `--function-address NAME=ADDRESS`; both insecure gRPC, as functions run with
//! `--insecure`. `--required-resources` gives the objects their requirements select.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;

use super::{invalid_at, is_list, load_all};
use crate::document::DocumentError;
use crate::model::function::{FunctionPackage, FunctionSet};
use crate::render::function_steps::RequiredObjects;
use crate::runner::steps::{Addresses, FunctionCaller, FunctionCalls};

/// `crossplane render`'s annotation choosing how a Function runs.
pub const ANNOTATION_RUNTIME: &str = "render.crossplane.io/runtime";
/// Where a Function of runtime `Development` listens.
pub const ANNOTATION_DEVELOPMENT_TARGET: &str = "render.crossplane.io/runtime-development-target";
/// `crossplane render`'s default development target.
pub const DEFAULT_DEVELOPMENT_TARGET: &str = "localhost:9443";

/// `--functions PATH...`.
#[derive(Debug, clap::Args)]
pub(super) struct FunctionFiles {
    /// A file or directory (recursive) of Function manifests (pkg.crossplane.io, `kubectl get functions -o yaml` too): pipeline steps are recognised by their Function's package, and a step naming none of them is reported (an error in strict mode, a warning in loose and warn). Without it, steps are recognised by their Function's name. Repeat the flag for more.
    #[arg(
        long = "functions",
        value_name = "PATH",
        env = "COMPOSITION_WEBHOOK_FUNCTIONS",
        value_delimiter = ','
    )]
    pub(super) paths: Vec<PathBuf>,

    /// NAME=ADDRESS: run the pipeline steps of Function NAME by calling it at ADDRESS (host:port, insecure gRPC: a function started with --insecure, as `crossplane render` runs them), and validate what it composes. A Function manifest among --functions with the annotation render.crossplane.io/runtime: Development is called at its render.crossplane.io/runtime-development-target the same way. Repeat the flag for more.
    #[arg(
        long = "function-address",
        value_name = "NAME=ADDRESS",
        value_parser = name_address,
        env = "COMPOSITION_WEBHOOK_FUNCTION_ADDRESSES",
        value_delimiter = ','
    )]
    pub(super) addresses: Vec<(String, String)>,

    /// A file or directory (recursive) of the objects functions may require (EnvironmentConfigs, ...): a step's requirements are answered from them, as `crossplane render --required-resources` does. Repeat the flag for more.
    #[arg(
        long = "required-resources",
        value_name = "PATH",
        env = "COMPOSITION_WEBHOOK_REQUIRED_RESOURCES",
        value_delimiter = ','
    )]
    pub(super) required: Vec<PathBuf>,

    /// A file or directory (recursive) of the composed resources that exist already, as `crossplane render --observed-resources` takes them: each is observed by its annotation crossplane.io/composition-resource-name, and keeps its name and namespace. Repeat the flag for more.
    #[arg(
        long = "observed-resources",
        value_name = "PATH",
        env = "COMPOSITION_WEBHOOK_OBSERVED_RESOURCES",
        value_delimiter = ','
    )]
    pub(super) observed: Vec<PathBuf>,
}

/// `NAME=ADDRESS`.
fn name_address(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((name, address)) if !name.is_empty() && !address.is_empty() => {
            Ok((name.to_string(), address.to_string()))
        }
        _ => Err("expected NAME=ADDRESS (a Function's name and host:port)".to_string()),
    }
}

impl FunctionFiles {
    /// Where functions run, when any is said to ([`FunctionFiles::load_with_addresses`]),
    /// with the required objects of `--required-resources`.
    pub(super) fn calls(
        &self,
        addresses: Addresses,
        errors: &mut Vec<DocumentError>,
    ) -> Option<FunctionCalls> {
        if addresses.is_empty() {
            return None;
        }
        let required = self.required_objects(errors);
        let observed = self.observed_resources(errors);
        match FunctionCaller::with_own_runtime(Arc::new(addresses)) {
            Ok(caller) => {
                Some(FunctionCalls::new(caller, Box::new(required)).with_observed(observed))
            }
            Err(e) => {
                errors.push(DocumentError::Invalid {
                    file: "--function-address".to_string(),
                    message: format!("cannot start the function client: {e}"),
                });
                None
            }
        }
    }

    /// The objects of `--observed-resources`, by their composition-resource-name; one
    /// without it is an input error, as Crossplane refuses to compose with it.
    pub(super) fn observed_resources(
        &self,
        errors: &mut Vec<DocumentError>,
    ) -> std::collections::BTreeMap<String, serde_json::Map<String, Value>> {
        let mut observed = std::collections::BTreeMap::new();
        for doc in load_all(&self.observed, errors) {
            let name = doc
                .value
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(crate::render::ANNOTATION_RESOURCE_NAME))
                .and_then(Value::as_str)
                .map(str::to_string);
            match (name, doc.value.as_object()) {
                (Some(name), Some(object)) => {
                    observed.insert(name, object.clone());
                }
                _ => errors.push(DocumentError::Invalid {
                    file: doc.source.clone(),
                    message: format!(
                        "an observed resource needs the annotation {} naming it",
                        crate::render::ANNOTATION_RESOURCE_NAME
                    ),
                }),
            }
        }
        observed
    }

    /// The objects of `--required-resources`.
    pub(super) fn required_objects(&self, errors: &mut Vec<DocumentError>) -> RequiredObjects {
        RequiredObjects::new(
            load_all(&self.required, errors)
                .into_iter()
                .flat_map(|d| match d.value.get("items").and_then(Value::as_array) {
                    Some(items) if is_list(&d.value) => items.clone(),
                    _ => vec![d.value],
                })
                .collect(),
        )
    }

    /// The addresses of `--function-address` alone.
    pub(super) fn flag_addresses(&self) -> Addresses {
        let mut addresses = Addresses::new();
        for (name, address) in &self.addresses {
            addresses.insert(name.clone(), address);
        }
        addresses
    }

    /// [`FunctionFiles::load`], and where functions run: `--function-address`, and the
    /// Functions annotated `render.crossplane.io/runtime: Development`.
    pub(super) fn load_with_addresses(
        &self,
        errors: &mut Vec<DocumentError>,
    ) -> (Option<Arc<FunctionSet>>, Addresses) {
        let mut addresses = Addresses::new();
        let set = self.load_set(errors, &mut addresses);
        for (name, address) in &self.addresses {
            addresses.insert(name.clone(), address);
        }
        (set, addresses)
    }

    /// The Functions of the files; `None` when the flag is not given. A Function without a
    /// name or package, or files without any Function, are errors.
    fn load_set(
        &self,
        errors: &mut Vec<DocumentError>,
        addresses: &mut Addresses,
    ) -> Option<Arc<FunctionSet>> {
        if self.paths.is_empty() {
            return None;
        }
        let before = errors.len();
        let docs = load_all(&self.paths, errors);
        let mut set = FunctionSet::new();
        let mut found = false;
        for doc in &docs {
            let items: Vec<(String, &Value)> =
                match doc.value.get("items").and_then(Value::as_array) {
                    Some(items) if is_list(&doc.value) => items
                        .iter()
                        .enumerate()
                        .map(|(i, v)| (format!("items[{i}]."), v))
                        .collect(),
                    _ => vec![(String::new(), &doc.value)],
                };
            for (prefix, value) in items {
                if !FunctionPackage::is_manifest(value) {
                    continue;
                }
                found = true;
                let annotation = |key: &str| {
                    value
                        .pointer("/metadata/annotations")
                        .and_then(|a| a.get(key))
                        .and_then(Value::as_str)
                };
                let name = value.pointer("/metadata/name").and_then(Value::as_str);
                if let (Some(name), Some("Development")) = (name, annotation(ANNOTATION_RUNTIME)) {
                    let target = annotation(ANNOTATION_DEVELOPMENT_TARGET)
                        .filter(|t| !t.is_empty())
                        .unwrap_or(DEFAULT_DEVELOPMENT_TARGET);
                    addresses.insert(name, target);
                }
                match FunctionPackage::from_manifest(value) {
                    Ok(f) => set.insert(f),
                    Err(e) => errors.push(invalid_at(
                        doc,
                        doc.position_of(&format!("{prefix}{}", e.field)),
                        format!("Function: {e}"),
                    )),
                }
            }
        }
        if !found && errors.len() == before {
            errors.push(DocumentError::Invalid {
                file: self
                    .paths
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                message: "no Function (pkg.crossplane.io) found in the --functions files"
                    .to_string(),
            });
        }
        Some(Arc::new(set))
    }
}
