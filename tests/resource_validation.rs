//! Rendered validation: custom resources validated as kube-apiserver validates them on
//! create (unknown fields, null pruning, defaults, schema, embedded resources, list types,
//! CEL), driven by testdata/rendered/violations.yaml, plus the root prefix, the compile
//! cache, what cannot be compiled, and the largest provider CRDs of ../shared/corpus.

mod common;

use std::collections::BTreeMap;
use std::path::Path as FsPath;
use std::sync::Arc;
use std::time::{Duration, Instant};

use composition_webhook::document;
use composition_webhook::findings::Path;
use composition_webhook::schema::validation::{
    CEL_NOT_CHECKED, CelLimits, CompiledSchema, compiled, validate_resource,
};
use composition_webhook::schema::{Crd, Schema};
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Suite {
    schemas: BTreeMap<String, Value>,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    name: String,
    /// A shared schema's name, or an inline `openAPIV3Schema`.
    schema: Value,
    #[serde(default)]
    root: String,
    #[serde(default)]
    limits: Option<Limits>,
    object: Value,
    errors: Vec<String>,
    #[serde(default)]
    notes: Vec<String>,
    #[serde(default)]
    result: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Limits {
    max_evaluations: Option<usize>,
    deadline_ms: Option<u64>,
}

fn suite() -> Suite {
    let path = FsPath::new(env!("CARGO_MANIFEST_DIR")).join("testdata/rendered/violations.yaml");
    let text = std::fs::read_to_string(&path).expect("read violations.yaml");
    let docs = document::parse_documents("violations.yaml", &text).expect("parse violations.yaml");
    let [doc] = docs.as_slice() else {
        panic!("violations.yaml holds one document");
    };
    serde_json::from_value(doc.value.clone()).expect("violations.yaml has the suite's shape")
}

fn limits(case: &Case) -> CelLimits {
    let mut limits = CelLimits::default();
    if let Some(l) = &case.limits {
        if let Some(n) = l.max_evaluations {
            limits.max_evaluations = n;
        }
        if let Some(ms) = l.deadline_ms {
            limits.deadline = Duration::from_millis(ms);
        }
    }
    limits
}

#[test]
fn violations_yaml() {
    let suite = suite();
    assert!(suite.cases.len() >= 45, "{} cases", suite.cases.len());
    let mut schemas: BTreeMap<String, CompiledSchema> = BTreeMap::new();
    for (name, v) in &suite.schemas {
        let schema = Schema::from_value(v).unwrap_or_else(|e| panic!("schema {name}: {e}"));
        let compiled =
            CompiledSchema::compile(&schema).unwrap_or_else(|e| panic!("schema {name}: {e}"));
        schemas.insert(name.clone(), compiled);
    }
    let mut failures = Vec::new();
    for case in &suite.cases {
        let inline;
        let compiled = match &case.schema {
            Value::String(name) => schemas
                .get(name)
                .unwrap_or_else(|| panic!("{}: no schema {name}", case.name)),
            v => {
                let schema = Schema::from_value(v).unwrap_or_else(|e| panic!("{}: {e}", case.name));
                inline = CompiledSchema::compile(&schema)
                    .unwrap_or_else(|e| panic!("{}: {e}", case.name));
                &inline
            }
        };
        let mut object = case.object.clone();
        let result =
            validate_resource(compiled, &mut object, &Path::new(&case.root), &limits(case));
        let errors: Vec<String> = result.errors.iter().map(ToString::to_string).collect();
        if errors != case.errors {
            failures.push(format!(
                "{}:\n  expected errors {:#?}\n  got {:#?}",
                case.name, case.errors, errors
            ));
        }
        if result.notes != case.notes {
            failures.push(format!(
                "{}:\n  expected notes {:#?}\n  got {:#?}",
                case.name, case.notes, result.notes
            ));
        }
        if let Some(expected) = &case.result
            && *expected != object
        {
            failures.push(format!(
                "{}:\n  expected object {expected}\n  got {object}",
                case.name
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn compile(v: Value) -> CompiledSchema {
    CompiledSchema::compile(&Schema::from_value(&v).expect("schema")).expect("compiles")
}

#[test]
fn root_prefixes_the_field_but_not_the_detail() {
    let c = compile(
        json!({"type": "object", "properties": {"spec": {"type": "object",
        "properties": {"x": {"type": "integer"}}}}}),
    );
    let mut object = json!({"spec": {"x": "nope"}});
    let result = validate_resource(
        &c,
        &mut object,
        &Path::new("spec.resources[2].base"),
        &CelLimits::default(),
    );
    let error = &result.errors[0];
    assert_eq!(error.field, "spec.resources[2].base.spec.x");
    assert_eq!(
        error.detail,
        r#"spec.x in body must be of type integer: "string""#
    );
    assert_eq!(
        error.to_string(),
        r#"spec.resources[2].base.spec.x: Invalid value: "string": spec.x in body must be of type integer: "string""#
    );
}

#[test]
fn blocking_errors_skip_cel_only_when_there_are_rules() {
    let without_rules = compile(json!({"type": "object", "required": ["a"]}));
    let result = validate_resource(
        &without_rules,
        &mut json!({}),
        &Path::default(),
        &CelLimits::default(),
    );
    assert_eq!(result.notes, Vec::<String>::new());
    let with_rules = compile(json!({"type": "object", "required": ["a"],
        "x-kubernetes-validations": [{"rule": "true"}]}));
    let result = validate_resource(
        &with_rules,
        &mut json!({}),
        &Path::default(),
        &CelLimits::default(),
    );
    assert_eq!(result.notes, [CEL_NOT_CHECKED]);
}

#[test]
fn what_cannot_be_compiled_becomes_notes() {
    let c = compile(
        json!({"type": "object", "properties": {"spec": {"type": "object",
        "x-kubernetes-validations": [{"rule": "self.a =="}, {"rule": "has(self.a)", "message": "a is required"}],
        "properties": {
            "a": {"type": "string", "pattern": "(?<=x)y"},
            "b": {"type": "string", "x-kubernetes-validations": [
                {"rule": "self == oldSelf", "optionalOldSelf": true}]}}}}}),
    );
    assert_eq!(c.cel_rule_count(), 1);
    let result = validate_resource(
        &c,
        &mut json!({"spec": {"b": "x"}}),
        &Path::default(),
        &CelLimits::default(),
    );
    assert_eq!(
        result
            .errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        ["spec: Invalid value: \"object\": a is required"]
    );
    assert_eq!(result.notes.len(), 3, "{:#?}", result.notes);
    assert!(
        result.notes[0].starts_with(
            r#"schema properties.spec.properties.a: pattern "(?<=x)y" is not checked"#
        ),
        "{}",
        result.notes[0]
    );
    assert!(
        result.notes[1].starts_with(r#"rule "self.a ==" at properties.spec is not checked: "#),
        "{}",
        result.notes[1]
    );
    assert_eq!(
        result.notes[2],
        r#"rule "self == oldSelf" at properties.spec.properties.b uses oldSelf with optionalOldSelf and is not checked on create"#
    );
}

#[test]
fn compiled_schemas_are_cached_per_arc() {
    let schema = Arc::new(Schema::from_value(&json!({"type": "object"})).expect("schema"));
    let first = compiled(&schema).expect("compiles");
    let second = compiled(&schema).expect("compiles");
    assert!(Arc::ptr_eq(&first, &second));
    let copy = Arc::new((*schema).clone());
    let third = compiled(&copy).expect("compiles");
    assert!(!Arc::ptr_eq(&first, &third), "another Arc is another entry");
}

#[test]
fn cel_rules_on_list_items_count_per_item() {
    let c = compile(
        json!({"type": "object", "properties": {"l": {"type": "array",
        "items": {"type": "integer", "x-kubernetes-validations": [{"rule": "self > 0"}]}}}}),
    );
    let limits = CelLimits {
        max_evaluations: 2,
        deadline: Duration::from_secs(1),
    };
    let result = validate_resource(&c, &mut json!({"l": [1, 2, 0]}), &Path::default(), &limits);
    assert!(result.errors.is_empty());
    assert_eq!(
        result.notes,
        [
            r#"CEL validation stopped after 2 rule evaluations because the limit of 2 evaluations was reached; not evaluated: "self > 0" at l[2]"#
        ]
    );
}

#[test]
fn costly_rules_are_not_evaluated() {
    let c = compile(
        json!({"type": "object", "properties": {"l": {"type": "array",
        "items": {"type": "integer"},
        "x-kubernetes-validations": [{"rule": "self.all(x, self.all(y, self.all(z, x + y + z >= 0)))"}]}}}),
    );
    let mut object = json!({"l": (0..200).collect::<Vec<i64>>()});
    let result = validate_resource(&c, &mut object, &Path::default(), &CelLimits::default());
    assert!(result.errors.is_empty());
    assert_eq!(
        result.notes,
        [
            r#"rule "self.all(x, self.all(y, self.all(z, x + y + z >= 0)))" at l is not evaluated: its estimated cost exceeds 1000000"#
        ]
    );
}

/// The largest provider CRDs of the corpus compile, and a rendered-like resource validates.
/// Prints compile and validation times (debug builds are much slower than release).
#[test]
fn largest_corpus_crds_compile_and_validate() {
    let Some(corpus) = common::shared_subdir("corpus") else {
        return;
    };
    for rel in [
        "crds/container.gcp.upbound.io/provider-upjet-gcp@v1.0.1/container.gcp.upbound.io_clusters.yaml",
        "crds/containerservice.azure.upbound.io/provider-upjet-azure@v0.42.1/containerservice.azure.upbound.io_kubernetesclusters.yaml",
        "crds/rds.aws.upbound.io/provider-upjet-aws@v0.47.0/rds.aws.upbound.io_instances.yaml",
    ] {
        let path = corpus.join(rel);
        let docs = document::load_path(&path).unwrap_or_else(|e| panic!("{e}"));
        let crd = Crd::from_value(&docs[0].value).unwrap_or_else(|e| panic!("{rel}: {e}"));
        let version = crd.versions.last().expect("a version");
        let schema = version.schema.as_ref().expect("a schema");
        let start = Instant::now();
        let c = CompiledSchema::compile(schema).unwrap_or_else(|e| panic!("{rel}: {e}"));
        let compile_time = start.elapsed();
        let mut object = json!({
            "apiVersion": format!("{}/{}", crd.group, version.name),
            "kind": crd.names.kind,
            "metadata": {"name": "x"},
            "spec": {"forProvider": {"location": "europe-west1", "region": "eu-west-1",
                                     "resourceGroupName": "rg", "instanceClass": "db.t3.micro",
                                     "unknownKnob": true},
                     "providerConfigRef": {"name": "default"}}
        });
        let start = Instant::now();
        let result = validate_resource(
            &c,
            &mut object,
            &Path::new("spec.resources[0].base"),
            &CelLimits::default(),
        );
        let validate_time = start.elapsed();
        assert!(
            result
                .errors
                .iter()
                .any(|e| e.field == "spec.resources[0].base.spec.forProvider.unknownKnob"),
            "{rel}: {:#?}",
            result.errors
        );
        eprintln!(
            "{rel}: compiled in {compile_time:?} ({} CEL rules, {} notes), validated in {validate_time:?}:",
            c.cel_rule_count(),
            result.notes.len(),
        );
        for e in &result.errors {
            eprintln!("  {e}");
        }
    }
}
