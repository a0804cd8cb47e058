//! What the API server refuses in a Composition file before any webhook sees it, as it
//! validates a custom resource of the Composition CRD: unknown fields (`kubectl apply`
//! validates fields strictly), wrong types, enums, required fields, the CRD's other
//! constraints (item counts, embedded resources, list types) and its CEL rules. Checked for
//! files; skipped for admission requests, which went through the API server. The
//! function-patch-and-transform input is checked against its CRD by the same validator, for
//! both.

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
    logical_with(
        value,
        Options {
            as_api_server,
            ..common::v1_options()
        },
    )
}

/// The logical findings under Crossplane v2.3.4's Composition API.
fn logical_v2(value: &Value, as_api_server: bool) -> Vec<String> {
    logical_with(
        value,
        Options {
            as_api_server,
            ..Options::default()
        },
    )
}

fn logical_with(value: &Value, options: Options) -> Vec<String> {
    let catalog = Catalog::new();
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

/// The CRD's constraints beyond types, in the API server's words: they replace the logical
/// checks' words for the same field (kubectl shows the API server's; its webhook never runs).
#[test]
fn item_counts_and_embedded_resources() {
    let mut v = base();
    v["spec"]["resources"][0]["base"]["apiVersion"] = json!("a/b/c");
    v["spec"]["resources"][0]["patches"]
        .as_array_mut()
        .unwrap()
        .push(json!({
            "type": "CombineFromComposite", "toFieldPath": "spec.b",
            "combine": {"strategy": "string", "variables": [], "string": {"fmt": "%s"}}
        }));
    assert_eq!(
        logical(&v, true),
        [
            // `minItems: 1` (the walker did not check it; the logical check said "Required
            // value: a combine needs at least one variable").
            "spec.resources[0].patches[1].combine.variables: Invalid value: 0: spec.resources[0].patches[1].combine.variables in body should have at least 1 items",
            // `base` is an `x-kubernetes-embedded-resource`: apiextensions' `objectmeta`
            // validation parses its apiVersion (the logical check said "must be
            // group/version, or version for the core group").
            r#"spec.resources[0].base.apiVersion: Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c"#,
        ]
    );
    // The admission path: the API server already decided; the logical checks' words remain.
    assert_eq!(
        logical(&v, false),
        [
            "spec.resources[0].patches[1].combine.variables: Required value: a combine needs at least one variable"
        ]
    );
}

fn pipeline(steps: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.crossplane.io/v1",
        "kind": "Composition",
        "metadata": {"name": "x"},
        "spec": {
            "compositeTypeRef": {"apiVersion": "example.org/v1", "kind": "XThing"},
            "mode": "Pipeline",
            "pipeline": steps
        }
    })
}

/// Crossplane v2's CRD: its CEL rules, the pipeline as a list keyed by step name, and each
/// input an embedded resource.
#[test]
fn crossplane_v2_rules_list_types_and_inputs() {
    let mut v = pipeline(json!([]));
    v["spec"].as_object_mut().unwrap().remove("pipeline");
    // `self.mode == 'Pipeline' && has(self.pipeline)` on `spec`, reported at `spec` with the
    // rule's message; the logical check's `spec.pipeline: Required value` with the same
    // words is the same problem.
    assert_eq!(
        logical_v2(&v, true),
        [
            r#"spec: Invalid value: "object": an array of pipeline steps is required in Pipeline mode"#
        ]
    );
    assert_eq!(
        logical_v2(&v, false),
        ["spec.pipeline: Required value: an array of pipeline steps is required in Pipeline mode"]
    );
    let step = |name: &str| json!({"step": name, "functionRef": {"name": "function-auto-ready"}});
    let v = pipeline(json!([
        step("a"),
        step("a"),
        {"step": "b", "functionRef": {"name": "function-x"}, "input": {"foo": "bar"}}
    ]));
    // In the API server's order: embedded resources, then list types. The duplicate step
    // is reported at the item, as `x-kubernetes-list-type: map` reports it; the logical
    // check's `spec.pipeline[1].step: Duplicate value` is the same problem.
    assert_eq!(
        logical_v2(&v, true),
        [
            "spec.pipeline[2].input.apiVersion: Required value",
            "spec.pipeline[2].input.kind: Required value",
            r#"spec.pipeline[1]: Duplicate value: {"step":"a"}"#,
        ]
    );
    assert_eq!(
        logical_v2(&v, false),
        [r#"spec.pipeline[1].step: Duplicate value: "a""#]
    );
    let mut with_credentials = step("a");
    with_credentials["credentials"] = json!([{"name": "c", "source": "None"}]);
    assert_eq!(
        logical_v2(&pipeline(json!([with_credentials])), true),
        [
            r#"spec.pipeline[0].credentials[0]: Invalid value: "object": the Secret source requires a secretRef"#
        ],
        "v2.3.4's rule, as its API server applies it"
    );
}

fn patch_and_transform(resources: Value) -> Value {
    pipeline(json!([{
        "step": "pt",
        "functionRef": {"name": "function-patch-and-transform"},
        "input": {
            "apiVersion": "pt.fn.crossplane.io/v1beta1",
            "kind": "Resources",
            "resources": resources
        }
    }]))
}

/// The patch-and-transform input against its CRD, for files and admission requests alike:
/// the error's field is its place in the Composition, the detail its path in the input (an
/// object of that CRD), as for rendered resources; the walker repeated the full path in the
/// detail. An input with a value of the wrong type is not read further.
#[test]
fn patch_and_transform_inputs() {
    let missing_from = json!({"type": "FromCompositeFieldPath", "toFieldPath": "data.a"});
    let wrong_type = patch_and_transform(json!([{
        "name": 3,
        "base": {"apiVersion": "v1", "kind": "ConfigMap"},
        "patches": [missing_from]
    }]));
    for as_api_server in [true, false] {
        assert_eq!(
            logical_v2(&wrong_type, as_api_server),
            [
                r#"spec.pipeline[0].input.resources[0].name: Invalid value: "integer": resources[0].name in body must be of type string: "integer""#
            ]
        );
    }
    let wrong_enum = patch_and_transform(json!([{
        "name": "cm",
        "base": {"apiVersion": "v1", "kind": "ConfigMap"},
        "patches": [missing_from, {"fromFieldPath": "spec.a", "toFieldPath": "data.b", "policy": {"fromFieldPath": "Sometimes"}}]
    }]));
    assert_eq!(
        logical_v2(&wrong_enum, false),
        [
            r#"spec.pipeline[0].input.resources[0].patches[1].policy.fromFieldPath: Unsupported value: "Sometimes": supported values: "Optional", "Required""#,
            "spec.pipeline[0].input.resources[0].patches[0].fromFieldPath: Required value: fromFieldPath must be set for patch type FromCompositeFieldPath",
        ]
    );
}

/// The webhook reads a Composition into its model by value (its strings moved, not copied),
/// which uses it up; an error of the model is told from the same Composition read again, with
/// its field and value, as for a file (`Validator::validate_owned_rereading`).
#[test]
fn a_model_error_is_told_from_the_composition_read_again() {
    let catalog = Catalog::new();
    let validator = Validator::new(&catalog, Options::admitted(Default::default(), true));
    let messages = |r: &composition_webhook::validate::Report| -> Vec<String> {
        r.findings.iter().map(|f| f.message()).collect()
    };
    let mut wrong_spec = base();
    wrong_spec["spec"]["resources"][0]["patches"][0]["transforms"] = json!("upper");
    let mut wrong_annotation = base();
    wrong_annotation["metadata"]["annotations"] =
        json!({"crossplane.io/composition-schema-aware-validation-mode": 1});
    for (v, want, unread) in [
        (
            wrong_spec,
            r#"spec.resources[0].patches[0].transforms: Invalid value: "upper": must be of type array, got string"#,
            r#"Invalid value: invalid type: string "upper", expected a sequence"#,
        ),
        (
            wrong_annotation,
            r#"metadata.annotations[crossplane.io/composition-schema-aware-validation-mode]: Invalid value: 1: must be of type string, got integer"#,
            "Invalid value: invalid type: integer `1`, expected a string",
        ),
    ] {
        let kept = validator.validate_owned(v.clone());
        assert_eq!(messages(&kept), [want]);
        let mut rereads = 0;
        let used_up = validator.validate_owned_rereading(v.clone(), || {
            rereads += 1;
            Some(v.clone())
        });
        assert_eq!(rereads, 1);
        assert_eq!(messages(&used_up), [want]);
        assert_eq!(used_up.verdict, kept.verdict);
        // Not read again: serde's words, without the field.
        let unread_report = validator.validate_owned_rereading(v.clone(), || None);
        assert_eq!(messages(&unread_report), [unread]);
    }
    // A valid Composition is read once.
    let v = base();
    let used_up = validator.validate_owned_rereading(v.clone(), || panic!("read again"));
    assert_eq!(messages(&used_up), messages(&validator.validate_owned(v)));
}
