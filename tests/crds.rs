//! crds/: the Composition and CompositeResourceDefinition CRDs generated from the model.
//!
//! The committed files are exactly what the generator writes; the CRDs are structural and
//! read by the project's own CRD parser; their schemas match Crossplane v1.17.0's
//! (crds/upstream/) keyword by keyword, except for the differences allowed below; and the
//! API server would treat Compositions and XRDs alike under both: same defaults, same
//! validation errors (testdata/, the corpus of ../shared/corpus, and hand-made mistakes).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use composition_webhook::document;
use composition_webhook::findings::Path as FieldPath;
use composition_webhook::model::crds::{
    COMPOSITIONS_CRD_FILE, GENERATED_HEADER, XRDS_CRD_FILE, composite_resource_definition_crd,
    composition_crd, generated_crds_yaml,
};
use composition_webhook::schema::validation::{CelLimits, CompiledSchema, validate_resource};
use composition_webhook::schema::{Crd, Schema, apply_defaults};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps,
};
use serde_json::{Value, json};

/// Differences from Crossplane v1.17.0's CRDs that are on purpose: (file, where, why).
///
/// `where` is what [`Difference`] displays: a CRD field (`metadata.annotations`) or a
/// schema keyword (`v1 spec.mode: default`). Descriptions are never compared: ours come
/// from the model's doc comments. An entry that no longer differs fails the test.
const ALLOWED: &[(&str, &str, &str)] = &[
    (
        COMPOSITIONS_CRD_FILE,
        "metadata.annotations",
        "upstream's files carry controller-gen's version (controller-gen.kubebuilder.io/version); ours are not written by controller-gen",
    ),
    (
        XRDS_CRD_FILE,
        "metadata.annotations",
        "upstream's files carry controller-gen's version (controller-gen.kubebuilder.io/version); ours are not written by controller-gen",
    ),
];

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn upstream(file: &str) -> Value {
    common::read_yaml(&repo(&format!("crds/upstream/{file}")))
}

/// The generated CRDs as JSON, by file name.
fn generated() -> Vec<(&'static str, Value)> {
    vec![
        (
            COMPOSITIONS_CRD_FILE,
            serde_json::to_value(composition_crd()).expect("JSON"),
        ),
        (
            XRDS_CRD_FILE,
            serde_json::to_value(composite_resource_definition_crd()).expect("JSON"),
        ),
    ]
}

#[test]
fn committed_files_are_what_the_model_generates() {
    let hint = "run `cargo run -- crds --out crds/` and commit the result";
    for (file, text) in generated_crds_yaml() {
        let path = repo(&format!("crds/{file}"));
        let committed = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e}; {hint}", path.display()));
        assert!(
            committed == text,
            "crds/{file} is not what the model generates: {hint}"
        );
        assert!(text.starts_with(GENERATED_HEADER));
    }
    let mut present: Vec<String> = std::fs::read_dir(repo("crds"))
        .expect("crds/")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    present.sort();
    assert_eq!(
        present,
        [XRDS_CRD_FILE, COMPOSITIONS_CRD_FILE],
        "crds/ holds only the generated files (upstream copies go in crds/upstream/)"
    );
}

#[test]
fn yaml_reads_back_as_the_generated_crds() {
    let files = generated_crds_yaml();
    for ((file, text), (_, crd)) in files.iter().zip(generated()) {
        let docs = document::parse_documents(file, text).expect("YAML");
        let [doc] = docs.as_slice() else {
            panic!("{file}: one document");
        };
        assert_eq!(doc.value, crd, "{file}");
        let typed: CustomResourceDefinition =
            serde_json::from_value(doc.value.clone()).expect("a CustomResourceDefinition");
        assert_eq!(serde_json::to_value(&typed).expect("JSON"), crd);
    }
    // The stream printed without --out is both files, one document each.
    let stream: String = files.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(
        document::parse_documents("stream", &stream)
            .expect("YAML")
            .len(),
        2
    );
}

/// Every problem that makes a schema node non-structural, or that upstream does not have.
fn structural_problems(node: &Value, path: &str, problems: &mut Vec<String>) {
    let Some(map) = node.as_object() else {
        problems.push(format!("{path}: not an object"));
        return;
    };
    let flag = |k: &str| map.get(k) == Some(&Value::Bool(true));
    if !map.contains_key("type")
        && !flag("x-kubernetes-preserve-unknown-fields")
        && !flag("x-kubernetes-int-or-string")
    {
        problems.push(format!("{path}: no type"));
    }
    for key in ["$ref", "$schema", "definitions", "nullable", "title"] {
        if map.contains_key(key) {
            problems.push(format!("{path}: {key}"));
        }
    }
    for key in ["anyOf", "oneOf", "allOf", "not"] {
        if map.contains_key(key) {
            problems.push(format!("{path}: {key} (upstream has none)"));
        }
    }
    if let Some(Value::Object(props)) = map.get("properties") {
        for (name, prop) in props {
            structural_problems(prop, &format!("{path}.{name}"), problems);
        }
    }
    if let Some(items) = map.get("items") {
        structural_problems(items, &format!("{path}[]"), problems);
    }
    match map.get("additionalProperties") {
        Some(Value::Bool(_)) | None => {}
        Some(schema) => structural_problems(schema, &format!("{path}{{}}"), problems),
    }
}

#[test]
fn generated_crds_are_structural_and_parse() {
    for (file, crd) in generated() {
        let versions = crd["spec"]["versions"].as_array().expect("versions");
        for version in versions {
            let schema = &version["schema"]["openAPIV3Schema"];
            let mut problems = Vec::new();
            structural_problems(schema, "", &mut problems);
            assert!(problems.is_empty(), "{file}: {problems:#?}");
            // Nothing the k8s-openapi type does not know (it would drop it silently).
            let typed: JSONSchemaProps =
                serde_json::from_value(schema.clone()).expect("JSONSchemaProps");
            assert_eq!(
                &serde_json::to_value(typed).expect("JSON"),
                schema,
                "{file}"
            );
        }
        let parsed = Crd::from_value(&crd).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(
            parsed
                .all_problems()
                .map(|p| p.to_string())
                .collect::<Vec<_>>(),
            Vec::<String>::new(),
            "{file}"
        );
        assert_eq!(parsed.served_versions(), ["v1"], "{file}");
        let v1 = parsed.version("v1").expect("v1");
        assert!(v1.storage && v1.schema.is_some(), "{file}");
        assert_eq!(parsed.group, "apiextensions.crossplane.io");
    }
}

/// One difference between a generated CRD and upstream's.
#[derive(Debug, Clone, PartialEq)]
struct Difference {
    /// `metadata.annotations`, or `v1 spec.resources[].base: type`.
    location: String,
    generated: Option<Value>,
    upstream: Option<Value>,
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |v: &Option<Value>| v.as_ref().map_or("(absent)".to_string(), Value::to_string);
        write!(
            f,
            "{}: generated {}, upstream {}",
            self.location,
            show(&self.generated),
            show(&self.upstream)
        )
    }
}

/// Keys whose values are subschemas (walked) or prose (not compared).
const NOT_COMPARED: [&str; 4] = ["description", "properties", "items", "additionalProperties"];

/// Compares two schema nodes keyword by keyword (`required` as a set), then their
/// properties, items and additionalProperties.
fn compare_schemas(
    generated: Option<&Value>,
    upstream: Option<&Value>,
    at: &str,
    out: &mut Vec<Difference>,
) {
    let empty = serde_json::Map::new();
    let g = generated.and_then(Value::as_object).unwrap_or(&empty);
    let u = upstream.and_then(Value::as_object).unwrap_or(&empty);
    let node = if at.is_empty() { "(root)" } else { at };
    let keys: BTreeSet<&String> = g.keys().chain(u.keys()).collect();
    for key in keys {
        if NOT_COMPARED.contains(&key.as_str()) {
            continue;
        }
        let (mut gv, mut uv) = (g.get(key).cloned(), u.get(key).cloned());
        if key == "required" {
            for v in [&mut gv, &mut uv].into_iter().flatten() {
                if let Value::Array(names) = v {
                    names.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
                }
            }
        }
        if gv != uv {
            out.push(Difference {
                location: format!("{node}: {key}"),
                generated: gv,
                upstream: uv,
            });
        }
    }
    let props = |m: &serde_json::Map<String, Value>| -> BTreeMap<String, Value> {
        m.get("properties")
            .and_then(Value::as_object)
            .map(|p| p.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default()
    };
    let (gp, up) = (props(g), props(u));
    let names: BTreeSet<&String> = gp.keys().chain(up.keys()).collect();
    for name in names {
        let child = if at.is_empty() {
            name.clone()
        } else {
            format!("{at}.{name}")
        };
        match (gp.get(name), up.get(name)) {
            (Some(a), Some(b)) => compare_schemas(Some(a), Some(b), &child, out),
            (a, b) => out.push(Difference {
                location: format!("{child}: (property)"),
                generated: a.map(|_| json!("present")),
                upstream: b.map(|_| json!("present")),
            }),
        }
    }
    for (key, suffix) in [("items", "[]"), ("additionalProperties", "{}")] {
        match (g.get(key), u.get(key)) {
            (None, None) => {}
            (Some(a @ Value::Object(_)), Some(b @ Value::Object(_))) => {
                compare_schemas(Some(a), Some(b), &format!("{at}{suffix}"), out)
            }
            (a, b) if a != b => out.push(Difference {
                location: format!("{node}: {key}"),
                generated: a.cloned(),
                upstream: b.cloned(),
            }),
            _ => {}
        }
    }
}

/// Every difference between a generated CRD and upstream's: the CRD's fields outside the
/// versions, each version's fields outside the schema, then the schemas.
fn differences(generated: &Value, upstream: &Value) -> Vec<Difference> {
    fn compare_fields(
        prefix: &str,
        g: &Value,
        u: &Value,
        skip: &[&str],
        out: &mut Vec<Difference>,
    ) {
        let empty = serde_json::Map::new();
        let (g, u) = (
            g.as_object().unwrap_or(&empty),
            u.as_object().unwrap_or(&empty),
        );
        let keys: BTreeSet<&String> = g.keys().chain(u.keys()).collect();
        for key in keys {
            if skip.contains(&key.as_str()) || g.get(key) == u.get(key) {
                continue;
            }
            out.push(Difference {
                location: format!("{prefix}{key}"),
                generated: g.get(key).cloned(),
                upstream: u.get(key).cloned(),
            });
        }
    }
    let mut out = Vec::new();
    compare_fields("", generated, upstream, &["metadata", "spec"], &mut out);
    compare_fields(
        "metadata.",
        &generated["metadata"],
        &upstream["metadata"],
        &[],
        &mut out,
    );
    compare_fields(
        "spec.",
        &generated["spec"],
        &upstream["spec"],
        &["versions"],
        &mut out,
    );
    let by_name = |crd: &Value| -> BTreeMap<String, Value> {
        crd["spec"]["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|v| {
                (
                    v["name"].as_str().unwrap_or_default().to_string(),
                    v.clone(),
                )
            })
            .collect()
    };
    let (gv, uv) = (by_name(generated), by_name(upstream));
    let names: BTreeSet<&String> = gv.keys().chain(uv.keys()).collect();
    for name in names {
        let (g, u) = (
            gv.get(name).unwrap_or(&Value::Null),
            uv.get(name).unwrap_or(&Value::Null),
        );
        compare_fields(
            &format!("spec.versions[{name}]."),
            g,
            u,
            &["schema"],
            &mut out,
        );
        let mut schema = Vec::new();
        compare_schemas(
            g.pointer("/schema/openAPIV3Schema"),
            u.pointer("/schema/openAPIV3Schema"),
            "",
            &mut schema,
        );
        out.extend(schema.into_iter().map(|d| Difference {
            location: format!("{name} {}", d.location),
            ..d
        }));
    }
    out.sort_by(|a, b| a.location.cmp(&b.location));
    out
}

#[test]
fn schemas_match_upstream_but_for_the_allowed_differences() {
    let mut unexpected = Vec::new();
    let mut used = BTreeSet::new();
    for (file, crd) in generated() {
        for d in differences(&crd, &upstream(file)) {
            match ALLOWED
                .iter()
                .position(|(f, at, _)| *f == file && *at == d.location)
            {
                Some(i) => {
                    used.insert(i);
                }
                None => unexpected.push(format!("{file}: {d}")),
            }
        }
    }
    assert!(
        unexpected.is_empty(),
        "differences from Crossplane v1.17.0's CRDs (fix the model's #[schemars] attributes, or allow them in ALLOWED with a reason):\n{}",
        unexpected.join("\n")
    );
    let stale: Vec<String> = ALLOWED
        .iter()
        .enumerate()
        .filter(|(i, _)| !used.contains(i))
        .map(|(_, (f, at, _))| format!("{f}: {at}"))
        .collect();
    assert!(
        stale.is_empty(),
        "ALLOWED entries that no longer differ (remove them):\n{}",
        stale.join("\n")
    );
}

#[test]
fn the_comparison_sees_differences() {
    let upstream = upstream(COMPOSITIONS_CRD_FILE);
    let mut changed = upstream.clone();
    let spec = "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties";
    let mode = changed
        .pointer_mut(&format!("{spec}/mode"))
        .and_then(Value::as_object_mut)
        .expect("mode");
    mode.insert("default".into(), json!("Pipeline"));
    mode.insert("description".into(), json!("not compared"));
    changed
        .pointer_mut(&format!("{spec}/resources/items/properties"))
        .and_then(Value::as_object_mut)
        .expect("resource properties")
        .remove("name");
    changed
        .pointer_mut(&format!("{spec}/pipeline/items"))
        .and_then(Value::as_object_mut)
        .expect("step")
        .insert("required".into(), json!(["step", "functionRef"]));
    let found: Vec<String> = differences(&changed, &upstream)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        found,
        [
            "v1 spec.mode: default: generated \"Pipeline\", upstream \"Resources\"",
            "v1 spec.resources[].name: (property): generated (absent), upstream \"present\"",
        ]
    );
}

/// The `v1` schema of a CRD document, parsed by the project's CRD parser.
fn v1_schema(crd: &Value) -> Schema {
    let parsed = Crd::from_value(crd).expect("CRD");
    let schema = parsed.schema_for("v1").schema.expect("v1 schema");
    Schema::clone(schema)
}

/// Objects of `kind` (apiextensions.crossplane.io/v1) in testdata/, and in
/// ../shared/corpus/`corpus` when it is there.
fn objects(kind: &str, corpus: &str) -> Vec<(String, Value)> {
    let mut roots = vec![repo("testdata")];
    roots.extend(common::shared_subdir(&format!("corpus/{corpus}")));
    let mut found = Vec::new();
    for root in roots {
        for file in document::collect_files(&root).expect("files") {
            let Ok(docs) = document::load_path(&file) else {
                continue; // testdata holds files with syntax errors on purpose.
            };
            for doc in docs {
                let items = match doc.value.get("items").and_then(Value::as_array) {
                    Some(items) => items.clone(),
                    None => vec![doc.value.clone()],
                };
                for (i, item) in items.into_iter().enumerate() {
                    if item["kind"] == kind
                        && item["apiVersion"] == "apiextensions.crossplane.io/v1"
                    {
                        found.push((format!("{}#{}.{i}", file.display(), doc.index), item));
                    }
                }
            }
        }
    }
    assert!(found.len() >= 2, "{kind}s found: {}", found.len());
    found
}

/// A hand-made broken object: its name, the object, and whether the API server refuses it.
type Broken = (String, Value, bool);

/// Each generated CRD's upstream file, kind, corpus folder and hand-made broken objects.
fn definitions() -> [(&'static str, &'static str, &'static str, Vec<Broken>); 2] {
    [
        (
            COMPOSITIONS_CRD_FILE,
            "Composition",
            "compositions",
            broken_compositions(),
        ),
        (
            XRDS_CRD_FILE,
            "CompositeResourceDefinition",
            "xrds",
            broken_xrds(),
        ),
    ]
}

/// Hand-made Compositions, one mistake (or edge case) each: name, object, and whether the
/// API server refuses it.
fn broken_compositions() -> Vec<Broken> {
    let base = json!({
        "apiVersion": "apiextensions.crossplane.io/v1",
        "kind": "Composition",
        "metadata": {"name": "broken"},
        "spec": {
            "compositeTypeRef": {"apiVersion": "example.org/v1", "kind": "XThing"},
            "resources": [{"name": "a", "base": {"apiVersion": "v1", "kind": "ConfigMap"}}]
        }
    });
    let with = |name: &str, pointer: &str, value: Value| {
        let mut c = base.clone();
        let (parent, key) = pointer.rsplit_once('/').expect("pointer");
        c.pointer_mut(parent)
            .and_then(Value::as_object_mut)
            .unwrap_or_else(|| panic!("{parent}"))
            .insert(key.to_string(), value);
        // Edge cases the API server accepts: null is defaulted, map values are free.
        let refused = !matches!(name, "null mode" | "map with any values");
        (name.to_string(), c, refused)
    };
    vec![
        with("mode", "/spec/mode", json!("Functions")),
        with("null mode", "/spec/mode", Value::Null),
        with("no compositeTypeRef", "/spec/compositeTypeRef", Value::Null),
        with(
            "compositeTypeRef without kind",
            "/spec/compositeTypeRef",
            json!({"apiVersion": "a/v1"}),
        ),
        with(
            "base not an object",
            "/spec/resources/0/base",
            json!("ConfigMap"),
        ),
        with(
            "base without kind",
            "/spec/resources/0/base",
            json!({"apiVersion": "v1"}),
        ),
        with("unknown field", "/spec/resources/0/bases", json!({})),
        with(
            "patch type",
            "/spec/resources/0/patches",
            json!([{"type": "FromXR", "fromFieldPath": "a"}]),
        ),
        with(
            "policy.toFieldPath",
            "/spec/resources/0/patches",
            json!([{"fromFieldPath": "a", "policy": {"toFieldPath": "MergeObjects"}}]),
        ),
        with(
            "transform without type",
            "/spec/resources/0/patches",
            json!([{"fromFieldPath": "a", "transforms": [{"math": {"multiply": 2}}]}]),
        ),
        with(
            "math clamp as string",
            "/spec/resources/0/patches",
            json!([{"fromFieldPath": "a", "transforms": [{"type": "math", "math": {"type": "ClampMin", "clampMin": "1"}}]}]),
        ),
        with(
            "string convert",
            "/spec/resources/0/patches",
            json!([{"fromFieldPath": "a", "transforms": [{"type": "string", "string": {"type": "Convert", "convert": "ToTitle"}}]}]),
        ),
        with(
            "match pattern without result",
            "/spec/resources/0/patches",
            json!([{"fromFieldPath": "a", "transforms": [{"type": "match", "match": {"patterns": [{"literal": "x"}]}}]}]),
        ),
        with(
            "map with any values",
            "/spec/resources/0/patches",
            json!([{"fromFieldPath": "a", "transforms": [{"type": "map", "map": {"a": {"b": [1]}, "c": null}}]}]),
        ),
        with(
            "combine without variables",
            "/spec/resources/0/patches",
            json!([{"type": "CombineFromComposite", "toFieldPath": "x", "combine": {"strategy": "string", "variables": [], "string": {}}}]),
        ),
        with(
            "readiness type",
            "/spec/resources/0/readinessChecks",
            json!([{"type": "Ready"}]),
        ),
        with(
            "readiness integer",
            "/spec/resources/0/readinessChecks",
            json!([{"type": "MatchInteger", "fieldPath": "a", "matchInteger": 1.5}]),
        ),
        with(
            "connection detail type",
            "/spec/resources/0/connectionDetails",
            json!([{"type": "FromSecret", "name": "a"}]),
        ),
        with(
            "patch set without patches",
            "/spec/patchSets",
            json!([{"name": "p"}]),
        ),
        with(
            "environment patch type",
            "/spec/environment",
            json!({"patches": [{"type": "PatchSet", "patchSetName": "p"}]}),
        ),
        with(
            "environment selector",
            "/spec/environment",
            json!({"environmentConfigs": [{"type": "Selector", "selector": {"mode": "Many", "maxMatch": "2", "matchLabels": [{"type": "Value"}]}}], "policy": {"resolve": "Never"}}),
        ),
        with(
            "pipeline",
            "/spec/pipeline",
            json!([
                {"step": "a", "functionRef": {"name": "f"}, "input": {"apiVersion": "x.fn.io/v1", "kind": "Input", "any": [1]}},
                {"step": "a", "functionRef": {}, "credentials": [{"name": "c", "source": "Vault"}, {"name": "c", "source": "Secret", "secretRef": {"name": "s"}}]},
                {"functionRef": {"name": "g"}, "input": {"kind": "NoVersion"}}
            ]),
        ),
        with(
            "store config",
            "/spec/publishConnectionDetailsWithStoreConfigRef",
            json!({}),
        ),
    ]
}

/// Hand-made XRDs, one mistake each (as [`broken_compositions`]).
fn broken_xrds() -> Vec<Broken> {
    let base = json!({
        "apiVersion": "apiextensions.crossplane.io/v1",
        "kind": "CompositeResourceDefinition",
        "metadata": {"name": "xthings.example.org"},
        "spec": {
            "group": "example.org",
            "names": {"kind": "XThing", "plural": "xthings"},
            "versions": [{"name": "v1", "served": true, "referenceable": true,
                "schema": {"openAPIV3Schema": {"type": "object"}}}]
        }
    });
    let with = |name: &str, key: &str, value: Value| {
        let mut x = base.clone();
        x["spec"][key] = value;
        (name.to_string(), x, true)
    };
    vec![
        with("no group", "group", Value::Null),
        with("names without plural", "names", json!({"kind": "XThing"})),
        with(
            "claim names",
            "claimNames",
            json!({"kind": "Thing", "shortNames": "t"}),
        ),
        with(
            "delete policy",
            "defaultCompositeDeletePolicy",
            json!("Orphan"),
        ),
        with(
            "update policy",
            "defaultCompositionUpdatePolicy",
            json!("Never"),
        ),
        with("composition ref", "defaultCompositionRef", json!({})),
        with(
            "version",
            "versions",
            json!([{"name": "v1", "served": "yes", "deprecationWarning": "x".repeat(300),
            "additionalPrinterColumns": [{"name": "A", "priority": "high"}]}]),
        ),
        with(
            "conversion",
            "conversion",
            json!({"webhook": {"clientConfig": {"service": {"name": "s", "port": "https"}, "caBundle": "not base64!"}}}),
        ),
        with("metadata", "metadata", json!({"labels": {"a": 1}})),
    ]
}

#[test]
fn api_defaults_are_upstream_s() {
    let cases = definitions();
    for ((file, kind, corpus, broken), (_, crd)) in cases.into_iter().zip(generated()) {
        let ours = v1_schema(&crd);
        let theirs = v1_schema(&upstream(file));
        let mut changed = 0;
        let all = objects(kind, corpus)
            .into_iter()
            .chain(broken.into_iter().map(|(name, object, _)| (name, object)));
        for (name, object) in all {
            let (mut a, mut b) = (object.clone(), object.clone());
            apply_defaults(&mut a, &ours);
            apply_defaults(&mut b, &theirs);
            assert_eq!(a, b, "{name}: defaults differ");
            changed += usize::from(a != object);
        }
        assert!(changed > 0, "{kind}: no object got a default");
    }
}

#[test]
fn the_api_server_would_validate_alike() {
    let cases = definitions();
    for ((file, kind, corpus, broken), (_, crd)) in cases.into_iter().zip(generated()) {
        let ours = CompiledSchema::compile(&v1_schema(&crd)).expect("compiles");
        let theirs = CompiledSchema::compile(&v1_schema(&upstream(file))).expect("compiles");
        let all = objects(kind, corpus)
            .into_iter()
            .map(|(name, object)| (name, object, None))
            .chain(
                broken
                    .into_iter()
                    .map(|(n, o, refused)| (n, o, Some(refused))),
            );
        for (name, object, refused) in all {
            let (mut a, mut b) = (object.clone(), object.clone());
            let root = FieldPath::default();
            let limits = CelLimits::default();
            let ra = validate_resource(&ours, &mut a, &root, &limits);
            let rb = validate_resource(&theirs, &mut b, &root, &limits);
            assert_eq!(ra, rb, "{name}: validation differs");
            assert_eq!(a, b, "{name}: pruned and defaulted objects differ");
            if let Some(refused) = refused {
                assert_eq!(
                    !ra.errors.is_empty(),
                    refused,
                    "{kind} {name}: {:#?}",
                    ra.errors
                );
            }
        }
    }
}

fn run_crds(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_composition-webhook"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .arg("crds")
        .args(args)
        .output()
        .expect("run the binary")
}

#[test]
fn cli_prints_or_writes_the_crds() {
    let files = generated_crds_yaml();
    let o = run_crds(&[]);
    assert_eq!(o.status.code(), Some(0));
    let stream: String = files.iter().map(|(_, t)| t.as_str()).collect();
    assert!(String::from_utf8_lossy(&o.stdout) == stream);

    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("crds-out/nested");
    let _ = std::fs::remove_dir_all(&dir);
    let o = run_crds(&["--out", dir.to_str().expect("UTF-8 path")]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    for (file, text) in &files {
        let written = std::fs::read_to_string(dir.join(file)).expect("written");
        assert!(written == *text, "{file}");
        assert!(
            String::from_utf8_lossy(&o.stdout)
                .contains(&format!("wrote {}", dir.join(file).display()))
        );
    }

    // A file where the directory should be.
    let file = dir.join(COMPOSITIONS_CRD_FILE);
    let o = run_crds(&["--out", file.to_str().expect("UTF-8 path")]);
    assert_eq!(o.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.starts_with(&format!("error: creating {}: ", file.display())),
        "{stderr}"
    );
}
