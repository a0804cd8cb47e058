//! Loads every real CRD and XRD of the shared corpus into one catalog.
//!
//! The corpus lives outside the repository (`shared/` beside the checkout); when it is
//! absent they pass with a note, except in CI, where its absence fails them.

mod common;

use std::path::{Path, PathBuf};

use composition_webhook::document;
use composition_webhook::schema::{
    Catalog, CrossplaneVersion, Origin, apply_defaults, composition_crd_schema_of,
};
use serde_json::Value;

/// Every `*.yaml` file under `dir`, recursively.
fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            yaml_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(path);
        }
    }
}

#[test]
fn every_corpus_crd_and_xrd_loads() {
    let Some(corpus) = common::shared_subdir("corpus") else {
        return;
    };
    let mut files = Vec::new();
    yaml_files(&corpus.join("crds"), &mut files);
    yaml_files(&corpus.join("xrds"), &mut files);
    files.sort();
    assert!(
        !files.is_empty(),
        "no CRD/XRD files under {}",
        corpus.display()
    );

    let mut catalog = Catalog::new();
    let mut errors = Vec::new();
    let mut added = 0;
    for file in &files {
        let source = file.display().to_string();
        let docs = match document::load_path(file) {
            Ok(docs) => docs,
            Err(e) => {
                errors.push(format!("YAML: {e}"));
                continue;
            }
        };
        for doc in docs {
            match catalog.add_document(&doc.value, &source) {
                Ok(a) => added += a.crd_count(),
                Err(e) => errors.push(e.to_string()),
            }
        }
    }
    assert!(errors.is_empty(), "errors:\n{}", errors.join("\n"));

    // Every version of every CRD has a usable schema.
    let problems: Vec<String> = catalog
        .entries()
        .flat_map(|e| {
            e.crd()
                .all_problems()
                .map(|p| format!("{}: {}: {p}", e.source(), e.name()))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(problems.is_empty(), "problems:\n{}", problems.join("\n"));

    // Every XRD produced an XR CRD with Crossplane's machinery.
    let mut composites = 0;
    for entry in catalog.entries() {
        if let Origin::CompositeFromXrd { .. } = entry.origin() {
            composites += 1;
            for version in entry.versions() {
                let schema = version.schema.as_ref().expect("XR schema");
                assert!(
                    schema
                        .descend(&["spec", "compositionRef", "name"])
                        .is_some(),
                    "{}: {}",
                    entry.source(),
                    entry.name()
                );
                assert!(schema.descend(&["status", "conditions"]).is_some());
            }
        }
    }
    println!(
        "{} files, {} CRDs added, {} distinct entries, {} XR CRDs from XRDs",
        files.len(),
        added,
        catalog.len(),
        composites
    );
    assert!(composites > 0);
}

#[test]
fn every_corpus_composition_takes_api_server_defaults() {
    let Some(corpus) = common::shared_subdir("corpus") else {
        return;
    };
    let mut files = Vec::new();
    yaml_files(&corpus.join("compositions"), &mut files);
    let mut count = 0;
    let mut unreadable = Vec::new();
    for file in &files {
        let docs = match document::load_path(file) {
            Ok(docs) => docs,
            Err(e) => {
                unreadable.push(e.to_string());
                continue;
            }
        };
        for mut doc in docs.into_iter().map(|d| d.value) {
            if doc.get("kind").and_then(Value::as_str) != Some("Composition") {
                continue;
            }
            // The corpus is Crossplane v1 material.
            apply_defaults(&mut doc, &composition_crd_schema_of(CrossplaneVersion::V1));
            let mode = doc.pointer("/spec/mode").and_then(Value::as_str);
            assert!(
                matches!(mode, Some("Resources" | "Pipeline")),
                "{}: mode {mode:?}",
                file.display()
            );
            count += 1;
        }
    }
    println!(
        "{count} compositions defaulted; {} files unreadable as YAML:\n{}",
        unreadable.len(),
        unreadable.join("\n")
    );
    assert!(count >= 100, "{count} compositions");
    // The one unreadable file is a reviewed defect (testdata/corpus-expectations.yaml).
    assert_eq!(unreadable.len(), 1, "{unreadable:?}");
}
