//! `--functions PATH...`: the Functions (`pkg.crossplane.io`) installed, from their
//! manifests, for `validate`, `render` and `serve --crds`. With them a pipeline step is
//! recognised by its Function's package, and a step naming no Function among them is
//! reported; without them steps are recognised by their Function's name.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;

use super::{invalid_at, is_list, load_all};
use crate::document::DocumentError;
use crate::model::function::{FunctionPackage, FunctionSet};

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
}

impl FunctionFiles {
    /// The Functions of the files; `None` when the flag is not given. A Function without a
    /// name or package, or files without any Function, are errors.
    pub(super) fn load(&self, errors: &mut Vec<DocumentError>) -> Option<Arc<FunctionSet>> {
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
