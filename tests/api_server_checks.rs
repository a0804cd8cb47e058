//! What the API server refuses in a Composition file before any webhook sees it: wrong
//! types, enums, required and unknown fields (`kubectl apply` validates fields strictly).
//! Checked for files; skipped for admission requests, which went through the API server.

mod common;

use composition_webhook::schema::Catalog;
use composition_webhook::validate::{Options, Validator};
use serde_json::{Value, json};

fn base() -> Value {
    json!({
        "apiVersion": "apiextensions.crossplane.io/v1",
        "kind": "Composition",
        "metadata": {"name": "x", "labels": {"app.kubernetes.io/version": "1.2"}},
        "spec": {
            "compositeTypeRef": {"apiVersion": "example.org/v1", "kind": "XThing"},
            "resources": [{
                "name": "a",
                "base": {"apiVersion": "a.example.org/v1", "kind": "A", "spec": {"anything": [1]}},
                "patches": [{"fromFieldPath": "spec.a", "toFieldPath": "spec.a"}]
            }]
        }
    })
}

fn logical(value: &Value, as_api_server: bool) -> Vec<String> {
    let catalog = Catalog::new();
    let options = Options {
        as_api_server,
        ..common::v1_options()
    };
    let report = Validator::new(&catalog, options).validate_value(value);
    report
        .findings
        .iter()
        .filter(|f| f.stage.name() == "logical")
        .map(|f| f.message())
        .collect()
}

#[test]
fn a_valid_file_passes() {
    assert_eq!(logical(&base(), true), Vec::<String>::new());
}

#[test]
fn unknown_fields_with_suggestions() {
    let mut v = base();
    v["spec"]["resources"][0]["patches"][0] =
        json!({"fromFieldPath": "spec.a", "toFieldpath": "spec.b"});
    v["spec"]["resource"] = json!([]);
    assert_eq!(
        logical(&v, true),
        [
            r#"spec.resources[0].patches[0].toFieldpath: Invalid value: "toFieldpath": unknown field: "toFieldpath", did you mean "toFieldPath"?"#,
            r#"spec.resource: Invalid value: "resource": unknown field: "resource", did you mean "resources"?"#,
        ]
    );
    // The admission path: the API server already decided; nothing is reported again.
    assert_eq!(logical(&v, false), Vec::<String>::new());
}

#[test]
fn enums_and_required_fields() {
    let mut v = base();
    v["spec"]["resources"][0]["patches"][0]["policy"] = json!({"fromFieldPath": "Maybe"});
    v["spec"]["resources"][0]["patches"]
        .as_array_mut()
        .unwrap()
        .push(json!({
            "type": "CombineFromComposite", "toFieldPath": "spec.b",
            "combine": {"strategy": "concat", "variables": [{}]}
        }));
    v["spec"]["resources"][0]["patches"][0]["transforms"] = json!([{"math": {"multiply": 2}}]);
    assert_eq!(
        logical(&v, true),
        [
            r#"spec.resources[0].patches[0].policy.fromFieldPath: Unsupported value: "Maybe": supported values: "Optional", "Required""#,
            "spec.resources[0].patches[0].transforms[0].type: Required value",
            r#"spec.resources[0].patches[1].combine.strategy: Unsupported value: "concat": supported values: "string""#,
            "spec.resources[0].patches[1].combine.variables[0].fromFieldPath: Required value",
        ]
    );
}

#[test]
fn wrong_types_including_arrays_for_objects() {
    let mut v = base();
    v["spec"]["compositeTypeRef"] = json!(["example.org/v1", "XThing"]);
    v["spec"]["resources"][0]["readinessChecks"] =
        json!([{"type": "MatchInteger", "fieldPath": "status.x", "matchInteger": "1"}]);
    assert_eq!(
        logical(&v, true),
        [
            r#"spec.compositeTypeRef: Invalid value: "array": spec.compositeTypeRef in body must be of type object: "array""#,
            r#"spec.resources[0].readinessChecks[0].matchInteger: Invalid value: "string": spec.resources[0].readinessChecks[0].matchInteger in body must be of type integer: "string""#,
        ]
    );
    let mut v = base();
    v["spec"] = json!([]);
    assert_eq!(
        logical(&v, true),
        [r#"spec: Invalid value: "array": spec in body must be of type object: "array""#]
    );
}

#[test]
fn map_keys_are_bracketed() {
    let mut v = base();
    v["spec"]["resources"][0]["patches"][0]["transforms"] = json!([{"type": "map", "map": {"us-east-1": "a"}}, {"type": "match", "match": {"patterns": [{"literal": "a", "result": {"x": 1}}]}}]);
    assert_eq!(
        logical(&v, true),
        Vec::<String>::new(),
        "map pairs and results are free-form"
    );
    v["metadata"]["annotations"] =
        json!({"crossplane.io/composition-schema-aware-validation-mode": 1});
    let catalog = Catalog::new();
    let report = Validator::new(&catalog, common::v1_options()).validate_value(&v);
    assert_eq!(
        report.findings[0].message(),
        r#"metadata.annotations[crossplane.io/composition-schema-aware-validation-mode]: Invalid value: 1: must be of type string, got integer"#
    );
}
