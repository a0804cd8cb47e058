//! Helpers shared by the integration tests: locating ../shared and reading case files.
#![allow(dead_code)]

pub mod manifest;
pub mod training;

use std::path::{Path, PathBuf};

use composition_webhook::schema::{CompositionApi, CrossplaneVersion};
use composition_webhook::validate::Options;
use serde_json::Value;

/// Crossplane v1.17.0's Composition API, for v1 material (Resources mode by default).
pub fn v1_api() -> CompositionApi {
    CompositionApi::embedded(CrossplaneVersion::V1)
}

/// The default options with Crossplane v1's Composition API.
pub fn v1_options() -> Options {
    Options {
        composition_api: v1_api(),
        ..Options::default()
    }
}

/// The `shared/` folder beside the project (CI clones the project with it beside).
pub fn shared_dir() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared");
    dir.is_dir().then(|| dir.canonicalize().unwrap_or(dir))
}

/// A folder under `shared/`. Missing: the test is skipped with a note, except in CI, where
/// shared/ must be there and its absence fails the test.
pub fn shared_subdir(rel: &str) -> Option<PathBuf> {
    match shared_dir().map(|d| d.join(rel)).filter(|d| d.is_dir()) {
        Some(d) => Some(d),
        None if std::env::var_os("CI").is_some() => {
            panic!("../shared/{rel} is missing: CI must run with shared/ beside the project")
        }
        None => {
            eprintln!("note: ../shared/{rel} not found; skipping");
            None
        }
    }
}

/// Every `*.yaml` file under `dir`, sorted.
pub fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files
}

/// Reads one YAML document as JSON.
pub fn read_yaml(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The converted upstream cases of `research/crossplane-cases/<folder>`: id, case, file.
/// Empty when ../shared is absent outside CI.
pub fn cases(folder: &str) -> Vec<(String, Value, PathBuf)> {
    let Some(dir) = shared_subdir(&format!("research/crossplane-cases/{folder}")) else {
        return Vec::new();
    };
    yaml_files(&dir)
        .into_iter()
        .map(|f| {
            let case = read_yaml(&f);
            let id = case["id"].as_str().unwrap_or_default().to_string();
            (id, case, f)
        })
        .collect()
}

/// A catalog of a case's CRDs, each inline or a `$ref` relative to the case `file`.
pub fn case_catalog(crds: &[Value], file: &Path) -> composition_webhook::schema::Catalog {
    let mut catalog = composition_webhook::schema::Catalog::new();
    for crd in crds {
        let doc = match crd.get("$ref").and_then(Value::as_str) {
            Some(r) => read_yaml(&file.parent().expect("dir").join(r)),
            None => crd.clone(),
        };
        catalog
            .add_document(&doc, &file.display().to_string())
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    }
    catalog
}

/// Reads a JSON file.
pub fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
