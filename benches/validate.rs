//! Benchmarks of full, schema-aware validation of one Composition
//! (`Validator::validate_value`: the API server's defaults and checks, the logical checks and
//! every schema-aware check against the composed resources' CRDs and the XRD).
//!
//! The schemas are loaded once into a warm [`Catalog`], outside the measured loop, as in the
//! webhook, which loads them at start-up; only the validation of an already parsed
//! Composition is measured (no YAML parsing, no schema compilation).
//!
//! Targets: schema-aware validation of a 30-resource Composition in under 1 ms on one core;
//! rendering and validating the rendered resources of a 30-resource corpus Composition in
//! under 2 ms (`rendered/…`).
//!
//! Cases:
//!
//! - `synthetic/…`: the platform-ref-gcp network Composition of `testdata/example` with its
//!   resources (and their patches) replicated, each under a distinct name, to exactly 30
//!   resources, validated against `testdata/crds` and the example's XRD. It is checked once,
//!   before measuring, to have no error findings, so the happy path is what is measured.
//! - `corpus/…`: the 3 Compositions of `../shared/corpus` with the most composed resources
//!   (`spec.resources`, or the bases of function-patch-and-transform pipeline steps), each
//!   with the schema files its `manifest.json` entry lists, named after its file. Their
//!   findings, if any, are printed once and not asserted. Skipped with a note when
//!   `../shared/corpus` is missing. `corpus/…` is the whole engine (rendered validation
//!   included), `corpus-no-render/…` without the third level, `rendered/…` the third level
//!   alone (render from the mock XR, validate every rendered resource, warm validators).
//!
//! Run with `cargo bench --bench validate`.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[path = "../tests/common/manifest.rs"]
mod manifest;

use composition_webhook::checks::schema_aware::lookup::SchemaSource;
use composition_webhook::checks::{patch_and_transform, rendered};
use composition_webhook::document;
use composition_webhook::findings::Severity;
use composition_webhook::model::{self, Composition};
use composition_webhook::schema::{Catalog, CompositionApi, CrossplaneVersion, split_api_version};
use composition_webhook::validate::{Options, Validator};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::Value;

/// The corpus and the example are Crossplane v1 Compositions (Resources mode): v1.17.0's
/// Composition API, as the webhook's defaults are.
fn v1_options() -> Options {
    Options {
        composition_api: CompositionApi::embedded(CrossplaneVersion::V1),
        ..Options::default()
    }
}

/// Resources in the synthetic Composition.
const SYNTHETIC_RESOURCES: usize = 30;

/// How many of the corpus' largest Compositions are benchmarked.
const CORPUS_CASES: usize = 3;

/// The project's root.
fn project_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every document of a YAML (or JSON) file.
fn load(path: &Path) -> Result<Vec<Value>, String> {
    document::load_path(path)
        .map(|docs| docs.into_iter().map(|d| d.value).collect())
        .map_err(|e| e.to_string())
}

/// A catalog holding every definition (CRD or XRD) of `files`.
fn catalog_of(files: &[PathBuf]) -> Result<Catalog, String> {
    let mut catalog = Catalog::new();
    for file in files {
        let source = file.display().to_string();
        for value in load(file)? {
            catalog
                .add_document(&value, &source)
                .map_err(|e| format!("{source}: {e}"))?;
        }
    }
    Ok(catalog)
}

/// `template` with its resources replicated, in order, to exactly `count` resources, each
/// named `<kind>-<index>` (Crossplane wants all resources named or none).
fn replicated(template: &Value, count: usize) -> Value {
    let resources = template
        .pointer("/spec/resources")
        .and_then(Value::as_array)
        .filter(|r| !r.is_empty())
        .expect("the template has spec.resources");
    let copies = resources
        .iter()
        .cycle()
        .take(count)
        .enumerate()
        .map(|(i, resource)| {
            let kind = resource
                .pointer("/base/kind")
                .and_then(Value::as_str)
                .unwrap_or("resource")
                .to_lowercase();
            let mut resource = resource.clone();
            resource["name"] = Value::String(format!("{kind}-{i:02}"));
            resource
        })
        .collect();
    let mut composition = template.clone();
    composition["spec"]["resources"] = Value::Array(copies);
    composition
}

fn bench_synthetic(c: &mut Criterion) {
    let testdata = project_dir().join("testdata");
    let catalog = catalog_of(&[
        testdata.join("crds/compute.gcp.upbound.io_networks.yaml"),
        testdata.join("crds/compute.gcp.upbound.io_subnetworks.yaml"),
        testdata.join("example/definition.yaml"),
    ])
    .expect("the testdata schemas load");
    let template = load(&testdata.join("example/composition.yaml"))
        .expect("the example Composition loads")
        .into_iter()
        .next()
        .expect("one document");
    let composition = replicated(&template, SYNTHETIC_RESOURCES);
    let resources = composition
        .pointer("/spec/resources")
        .and_then(Value::as_array)
        .expect("resources");
    assert_eq!(resources.len(), SYNTHETIC_RESOURCES);
    assert!(
        resources
            .iter()
            .all(|r| r["patches"].as_array().is_some_and(|p| !p.is_empty())),
        "every resource keeps its patches"
    );

    let validator = Validator::new(&catalog, v1_options());
    let report = validator.validate_value(&composition);
    let errors: Vec<String> = report
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .map(|f| f.message())
        .collect();
    assert!(
        errors.is_empty(),
        "the synthetic Composition must validate without errors: {errors:#?}"
    );

    c.bench_function(
        &format!("synthetic/platform-ref-gcp-network-{SYNTHETIC_RESOURCES}-resources"),
        |b| b.iter(|| validator.validate_value(black_box(&composition))),
    );
}

/// One corpus Composition with the catalog of the schemas it needs.
struct CorpusCase {
    /// The Composition's file, relative to the corpus.
    file: String,
    catalog: Catalog,
    composition: Value,
}

/// The corpus' largest Compositions (most composed resources, then most patches), loaded;
/// `None` (with a note) when the corpus is missing or unreadable.
fn corpus_cases() -> Option<Vec<CorpusCase>> {
    let corpus = project_dir().join("../shared/corpus");
    let manifest_path = corpus.join("manifest.json");
    if !manifest_path.is_file() {
        eprintln!(
            "note: {} not found; skipping the corpus benchmarks",
            corpus.display()
        );
        return None;
    }
    let manifest: Value = match std::fs::read_to_string(&manifest_path)
        .map_err(|e| e.to_string())
        .and_then(|text| serde_json::from_str(&text).map_err(|e| e.to_string()))
    {
        Ok(m) => m,
        Err(e) => {
            eprintln!(
                "note: {}: {e}; skipping the corpus benchmarks",
                manifest_path.display()
            );
            return None;
        }
    };
    let count = |e: &Value, key: &str| e[key].as_u64().unwrap_or(0);
    let mut entries: Vec<&Value> = manifest["compositions"]
        .as_array()
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    entries.sort_by(|a, b| {
        count(b, "n_resources")
            .cmp(&count(a, "n_resources"))
            .then(count(b, "n_patches").cmp(&count(a, "n_patches")))
            .then(a["file"].as_str().cmp(&b["file"].as_str()))
    });

    let mut cases = Vec::new();
    for entry in entries.into_iter().take(CORPUS_CASES) {
        match corpus_case(&corpus, entry) {
            Ok(case) => cases.push(case),
            Err(e) => eprintln!("note: corpus case skipped: {e}"),
        }
    }
    Some(cases)
}

/// Loads one manifest entry: its schema files into a catalog, and its Composition.
fn corpus_case(corpus: &Path, entry: &Value) -> Result<CorpusCase, String> {
    let file = entry["file"].as_str().ok_or("an entry without a file")?;
    let name = entry["composition_name"].as_str().unwrap_or_default();
    let schema_files = manifest::schema_files(entry);
    let paths: Vec<PathBuf> = schema_files.iter().map(|f| corpus.join(f)).collect();
    let catalog = catalog_of(&paths).map_err(|e| format!("{file}: {e}"))?;
    let composition = load(&corpus.join(file))
        .map_err(|e| format!("{file}: {e}"))?
        .into_iter()
        .find(|v| v.pointer("/metadata/name").and_then(Value::as_str) == Some(name))
        .ok_or_else(|| format!("{file}: no Composition named {name}"))?;
    Ok(CorpusCase {
        file: file.to_string(),
        catalog,
        composition,
    })
}

fn bench_corpus(c: &mut Criterion) {
    let Some(cases) = corpus_cases() else {
        return;
    };
    for case in &cases {
        let validator = Validator::new(&case.catalog, v1_options());
        let report = validator.validate_value(&case.composition);
        eprintln!(
            "note: {}: {} errors, {} warnings",
            case.file,
            report.count(Severity::Error),
            report.count(Severity::Warning)
        );
        let id = case
            .file
            .strip_prefix("compositions/")
            .unwrap_or(&case.file);
        c.bench_function(&format!("corpus/{id}"), |b| {
            b.iter(|| validator.validate_value(black_box(&case.composition)))
        });
        let without = Validator::new(
            &case.catalog,
            Options {
                rendered: false,
                ..v1_options()
            },
        );
        c.bench_function(&format!("corpus-no-render/{id}"), |b| {
            b.iter(|| without.validate_value(black_box(&case.composition)))
        });
        bench_rendered(c, id, case);
    }
}

/// Rendering every composed resource from the mock XR and validating each against its CRD
/// (compiled validators warm), alone: the third level's own cost.
fn bench_rendered(c: &mut Criterion, id: &str, case: &CorpusCase) {
    let Ok(mut composition) = Composition::from_defaulted_value(&model::with_api_defaults(
        &case.composition,
        &CompositionApi::embedded(CrossplaneVersion::V1),
    )) else {
        return;
    };
    let (steps, _) = patch_and_transform::read_steps(&mut composition);
    let t = &composition.spec.composite_type_ref;
    let xr_schema = split_api_version(&t.api_version)
        .and_then(|(g, v)| case.catalog.resolve(g, &t.kind, v).ok())
        .and_then(|i| i.schema);
    let composite = rendered::Composite::Mock(xr_schema.as_deref());
    let runtime = composition_webhook::render::Runtime::V2;
    let findings = rendered::check(
        &composition,
        &steps,
        composite,
        &case.catalog,
        &[],
        runtime,
        None,
    );
    eprintln!(
        "note: {}: {} rendered resources, {} rendered findings",
        case.file,
        composition.spec.resources.len()
            + steps.iter().map(|s| s.input.resources.len()).sum::<usize>(),
        findings.len()
    );
    c.bench_function(&format!("rendered/{id}"), |b| {
        b.iter(|| {
            rendered::check(
                black_box(&composition),
                &steps,
                composite,
                &case.catalog,
                &[],
                runtime,
                None,
            )
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(50)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = bench_synthetic, bench_corpus
}
criterion_main!(benches);
