//! Property test of rendering and validation under a budget: random Compositions built
//! from the pieces that have broken the renderer before (huge and wildcard indexes, Go
//! format verbs with million-wide widths and precisions, argument indexes, regexps Go and
//! Rust disagree on, chained transforms, patch sets, environment copies) are validated
//! against the example XRD and CRDs with rendering on. None may panic, and none may hold
//! more than its memory budget (with the slack of one unit of work between two checks).
//!
//! The test binary counts allocations per thread with the crate's own
//! [`CountingAllocator`], as the webhook's binary does, so the budget sees real memory.
//! CI runs 256 cases; `PROPTEST_CASES=20000 cargo test --release --test bounded_properties`
//! is the longer run (docs/tests.md).

use composition_webhook::budget::{self, Budget, CountingAllocator, Limits};
use composition_webhook::document;
use composition_webhook::mode::Mode;
use composition_webhook::schema::Catalog;
use composition_webhook::validate::{Options, Validator};
use proptest::prelude::*;
use serde_json::{Value, json};

#[global_allocator]
static GLOBAL: CountingAllocator<std::alloc::System> = CountingAllocator(std::alloc::System);

/// A small budget, so that the hostile cases reach it quickly.
const LIMITS: Limits = Limits {
    memory_bytes: 8 * 1024 * 1024,
    steps: 200_000,
};

fn catalog() -> Catalog {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata");
    let mut catalog = Catalog::new();
    let roots = [dir.join("crds"), dir.join("example/definition.yaml")];
    let files = roots
        .iter()
        .flat_map(|r| document::collect_files(r).expect("schema files"));
    for path in files {
        for doc in document::load_path(&path).expect("schemas") {
            catalog
                .add_document(&doc.value, &doc.source)
                .expect("schema");
        }
    }
    catalog
}

fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z]{1,6}".prop_map(|s| format!(".{s}")),
        1 => Just("[*]".to_string()),
        1 => prop_oneof![
            Just(0u64),
            Just(3),
            Just(1000),
            Just(1_000_000),
            Just(4_294_967_295),
            Just(1 << 40)
        ]
        .prop_map(|i| format!("[{i}]")),
        1 => "[a-z./-]{1,8}".prop_map(|k| format!("[{k}]")),
    ]
}

fn field_path() -> impl Strategy<Value = String> {
    let root = prop_oneof![
        Just("spec"),
        Just("metadata"),
        Just("status"),
        Just("spec.forProvider"),
        Just("metadata.annotations")
    ];
    (root, prop::collection::vec(segment(), 0..5)).prop_map(|(r, s)| format!("{r}{}", s.concat()))
}

fn verb() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("%s".to_string()),
        Just("%v".to_string()),
        Just("%d".to_string()),
        Just("%q".to_string()),
        Just("%x".to_string()),
        Just("%#v".to_string()),
        Just("%+v".to_string()),
        Just("%T".to_string()),
        Just("%U".to_string()),
        Just("%%".to_string()),
        Just("%!".to_string()),
        Just("%*d".to_string()),
        Just("%[2]s".to_string()),
        Just("%[1]*.[2]*f".to_string()),
        Just("%.65536f".to_string()),
        Just("%.70000e".to_string()),
        Just("%999999v".to_string()),
        Just("%999999[1]v".to_string()),
        Just("%-1000000s".to_string()),
        Just("%.1000000d".to_string()),
        Just("%08.3f".to_string()),
        "[a-z -]{0,5}",
    ]
}

fn format_string() -> impl Strategy<Value = String> {
    prop::collection::vec(verb(), 1..12).prop_map(|v| v.concat())
}

fn regexp() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(r"^(\w+)-(\d+)$".to_string()),
        Just(r"\pL{1000}".to_string()),
        Just(r"(a+)+b".to_string()),
        Just(r"[[:alpha:]]+".to_string()),
        Just(r"(?P<x>a)(?P<x>b)".to_string()),
        Just(r"\Q.*\E".to_string()),
        Just(r"a{1001}".to_string()),
        Just(r"(".to_string()),
        "[a-z().*+?|\\[\\]]{0,12}",
    ]
}

fn transform() -> impl Strategy<Value = Value> {
    prop_oneof![
        format_string().prop_map(|f| json!({"type": "string", "string": {"type": "Format", "fmt": f}})),
        regexp().prop_map(|r| json!({"type": "string", "string": {"type": "Regexp", "regexp": {"match": r}}})),
        Just(json!({"type": "string", "string": {"type": "Convert", "convert": "ToUpper"}})),
        Just(json!({"type": "string", "string": {"type": "Convert", "convert": "ToJson"}})),
        Just(json!({"type": "string", "string": {"type": "TrimPrefix", "trim": "x"}})),
        Just(json!({"type": "string", "string": {"type": "Join", "join": {"separator": ","}}})),
        prop_oneof![Just("string"), Just("int64"), Just("bool"), Just("float64"), Just("object"), Just("array")]
            .prop_map(|t| json!({"type": "convert", "convert": {"toType": t}})),
        any::<i32>().prop_map(|m| json!({"type": "math", "math": {"type": "Multiply", "multiply": m}})),
        Just(json!({"type": "map", "map": {"a": "b", "network-id": [1, 2, 3]}})),
        regexp().prop_map(|r| json!({"type": "match", "match": {"patterns": [{"type": "regexp", "regexp": r, "result": "x"}], "fallbackTo": "Input"}})),
    ]
}

fn patch() -> impl Strategy<Value = Value> {
    let transforms = || prop::collection::vec(transform(), 0..4);
    prop_oneof![
        3 => (field_path(), field_path(), transforms()).prop_map(|(from, to, t)| json!({
            "type": "FromCompositeFieldPath", "fromFieldPath": from, "toFieldPath": to, "transforms": t
        })),
        1 => (field_path(), format_string(), transforms()).prop_map(|(to, fmt, t)| json!({
            "type": "CombineFromComposite", "toFieldPath": to, "transforms": t,
            "combine": {"strategy": "string", "variables": [
                {"fromFieldPath": "spec.id"}, {"fromFieldPath": "metadata.name"}],
                "string": {"fmt": fmt}}
        })),
        1 => (field_path(), field_path()).prop_map(|(from, to)| json!({
            "type": "FromEnvironmentFieldPath", "fromFieldPath": from.replacen("spec", "data", 1), "toFieldPath": to
        })),
        1 => (field_path(), field_path()).prop_map(|(from, to)| json!({
            "type": "ToCompositeFieldPath", "fromFieldPath": from, "toFieldPath": to
        })),
        1 => Just(json!({"type": "PatchSet", "patchSetName": "common"})),
    ]
}

fn composition() -> impl Strategy<Value = Value> {
    let template = prop::collection::vec(patch(), 0..6).prop_map(|patches| {
        json!({
            "name": "n",
            "base": {"apiVersion": "compute.gcp.upbound.io/v1beta1", "kind": "Network",
                     "spec": {"forProvider": {"routingMode": "REGIONAL"}}},
            "patches": patches,
        })
    });
    (
        prop::collection::vec(template, 1..4),
        prop::collection::vec(patch(), 0..6),
        0usize..4,
    )
        .prop_map(|(mut resources, common, env_kib)| {
            for (i, r) in resources.iter_mut().enumerate() {
                r["name"] = json!(format!("n{i}"));
            }
            let data: serde_json::Map<String, Value> = (0..env_kib * 64)
                .map(|i| (format!("k{i}"), json!("x".repeat(16))))
                .collect();
            json!({
                "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
                "metadata": {"name": "generated"},
                "spec": {
                    "compositeTypeRef": {"apiVersion": "gcp.platformref.upbound.io/v1alpha1", "kind": "XNetwork"},
                    "environment": {"defaultData": {"data": data}},
                    "patchSets": [{"name": "common", "patches": common.into_iter()
                        .filter(|p| p["type"] != "PatchSet").collect::<Vec<_>>()}],
                    "resources": resources,
                }
            })
        })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(256),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn rendering_and_validation_keep_to_the_budget(c in composition()) {
        let catalog = catalog();
        let validator = Validator::new(&catalog, Options {
            default_mode: Mode::Strict,
            ..Options::default()
        })
        .with_budget(Budget::new(LIMITS));
        let (report, peak) = budget::peak_during(|| validator.validate_value(&c));
        // One unit of work may pass the limit before the next check sees it: a value copied
        // or formatted once more. Twice the limit is the bound the webhook is sized by.
        prop_assert!(
            peak <= 2 * LIMITS.memory_bytes + (4 << 20),
            "peak {peak} bytes for {}", serde_json::to_string(&c).unwrap_or_default()
        );
        // Strict mode never admits what it could not finish.
        if report.stopped.is_some() {
            prop_assert!(!report.verdict.allowed);
        }
    }
}

/// What the model does not keep of a Composition (here a MiB of `managedFields`, which the
/// audit reads with every Composition of the cluster) is freed before rendering, which
/// allocates as much again: the Composition holds less at once than the same one without
/// it, and is judged the same.
#[test]
fn what_the_model_does_not_keep_is_freed_before_rendering() {
    let catalog = catalog();
    let validator = Validator::new(&catalog, Options::admitted(Mode::Loose, true));
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/example/composition.yaml");
    let light = document::load_path(&path)
        .expect("the example")
        .remove(0)
        .value;
    let mut heavy = light.clone();
    heavy["metadata"]["managedFields"] = json!([{
        "manager": "kubectl-client-side-apply",
        "operation": "Update",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:spec": {"f:note": "x".repeat(1 << 20)}},
    }]);
    // Validators are compiled on first use and kept: not part of either measure.
    validator.validate_owned(light.clone());
    let (light_report, light_peak) = budget::peak_during(|| validator.validate_owned(light));
    let (heavy_report, heavy_peak) = budget::peak_during(|| validator.validate_owned(heavy));
    assert!(light_report.verdict.allowed, "{:?}", light_report.findings);
    assert_eq!(heavy_report.verdict, light_report.verdict);
    assert_eq!(heavy_report.findings, light_report.findings);
    assert!(
        heavy_peak < light_peak,
        "held at most {heavy_peak} bytes with the MiB, {light_peak} without"
    );
}
