//! What the inputs do not determine is never an error: valid upstream material, validated in
//! loose mode with each of its schemas removed in turn, gets no error. A schema missing (the
//! XRD applied in the same `kubectl apply`, a provider not installed yet) leaves the XR's
//! scope, its fields and a composed kind's rules unknown; the findings that depend on them
//! are warnings that say so.
//!
//! Material: every Composition of ../shared/corpus (real Compositions written by others, with
//! the XRDs and CRDs its manifest.json lists) that is valid with all its schemas, and the
//! repository's own real examples (testdata/example: upbound/platform-ref-gcp v0.4.0;
//! testdata/v2: Crossplane v2.3.4's e2e XRDs, provider-upjet-aws v2.6.0's Buckets).

mod common;

use std::path::Path;

use composition_webhook::document;
use composition_webhook::findings::Severity;
use composition_webhook::mode::Mode;
use composition_webhook::schema::Catalog;
use composition_webhook::validate::{Options, Report, Validator};
use serde_json::Value;

/// One schema document and the file it came from.
struct SchemaDoc {
    value: Value,
    source: String,
}

/// The Composition's errors with `schemas` in loose mode, whatever its mode annotation says.
fn errors(composition: &Value, schemas: &[&SchemaDoc], options: &Options) -> Vec<String> {
    let mut catalog = Catalog::new();
    for s in schemas {
        catalog
            .add_document(&s.value, &s.source)
            .unwrap_or_else(|e| panic!("{}: {e}", s.source));
    }
    let mut c = composition.clone();
    if let Some(a) = c
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        a.remove("crossplane.io/composition-schema-aware-validation-mode");
    }
    let options = Options {
        default_mode: Mode::Loose,
        ..options.clone()
    };
    let report: Report = Validator::new(&catalog, options).validate_value(&c);
    report
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .map(|f| f.message())
        .collect()
}

/// Checks one valid Composition with each schema removed; returns the failures.
fn each_removed(
    label: &str,
    composition: &Value,
    schemas: &[SchemaDoc],
    options: &Options,
) -> Option<Vec<String>> {
    let all: Vec<&SchemaDoc> = schemas.iter().collect();
    if !errors(composition, &all, options).is_empty() {
        // Not valid material to begin with.
        return None;
    }
    let mut failures = Vec::new();
    for (i, removed) in schemas.iter().enumerate() {
        let rest: Vec<&SchemaDoc> = schemas
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, s)| s)
            .collect();
        let name = removed
            .value
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        for e in errors(composition, &rest, options) {
            failures.push(format!("{label} without {name} ({}): {e}", removed.source));
        }
    }
    Some(failures)
}

fn load(path: &Path, source: &str) -> Vec<SchemaDoc> {
    document::load_path(path)
        .unwrap_or_else(|e| panic!("{source}: {e}"))
        .into_iter()
        .filter(|d| {
            matches!(
                d.value.get("kind").and_then(Value::as_str),
                Some(
                    "CustomResourceDefinition"
                        | "CompositeResourceDefinition"
                        | "ManagedResourceDefinition"
                )
            )
        })
        .map(|d| SchemaDoc {
            value: d.value,
            source: source.to_string(),
        })
        .collect()
}

#[test]
fn corpus_with_each_schema_removed_has_no_error_in_loose_mode() {
    let Some(corpus) = common::shared_subdir("corpus") else {
        return;
    };
    let manifest = common::read_json(&corpus.join("manifest.json"));
    let mut checked = 0;
    let mut removals = 0;
    let mut failures = Vec::new();
    for entry in manifest["compositions"].as_array().expect("compositions") {
        let rel = entry["file"].as_str().unwrap_or_default();
        let name = entry["composition_name"].as_str().unwrap_or_default();
        let schemas: Vec<SchemaDoc> = common::manifest::schema_files(entry)
            .into_iter()
            .flat_map(|f| load(&corpus.join(f), f))
            .collect();
        let Ok(docs) = document::load_path(&corpus.join(rel)) else {
            continue;
        };
        let Some(doc) = docs
            .iter()
            .find(|d| d.value.pointer("/metadata/name").and_then(Value::as_str) == Some(name))
        else {
            continue;
        };
        let options = if doc.value.pointer("/spec/mode").and_then(Value::as_str) == Some("Pipeline")
        {
            Options::default()
        } else {
            common::v1_options()
        };
        if let Some(f) = each_removed(rel, &doc.value, &schemas, &options) {
            checked += 1;
            removals += schemas.len();
            failures.extend(f);
        }
    }
    eprintln!("{checked} valid corpus Compositions, {removals} schemas removed in turn");
    assert!(checked >= 60, "only {checked} valid Compositions");
    assert!(
        failures.is_empty(),
        "errors that depend on a removed schema:\n{failures:#?}"
    );
}

#[test]
fn testdata_with_each_schema_removed_has_no_error_in_loose_mode() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata");
    let v1 = common::v1_options();
    let v2 = Options::default();
    // (Composition file, schema files, Composition API)
    let cases: [(&str, &[&str], &Options); 3] = [
        (
            "example/composition.yaml",
            &[
                "example/definition.yaml",
                "crds/compute.gcp.upbound.io_networks.yaml",
                "crds/compute.gcp.upbound.io_subnetworks.yaml",
            ],
            &v1,
        ),
        (
            "v2/bucket-composition.yaml",
            &[
                "v2/basic-namespaced.definition.yaml",
                "v2/crds/s3.aws.m.upbound.io_buckets.yaml",
            ],
            &v2,
        ),
        ("v2/app/composition.yaml", &["v2/app/definition.yaml"], &v2),
    ];
    let mut failures = Vec::new();
    for (file, schema_files, options) in cases {
        let schemas: Vec<SchemaDoc> = schema_files
            .iter()
            .flat_map(|f| load(&root.join(f), f))
            .collect();
        let docs = document::load_path(&root.join(file)).expect(file);
        for d in docs {
            let f = each_removed(file, &d.value, &schemas, options)
                .unwrap_or_else(|| panic!("{file} is valid with all its schemas"));
            failures.extend(f);
        }
    }
    assert!(
        failures.is_empty(),
        "errors that depend on a removed schema:\n{failures:#?}"
    );
}
