//! Crossplane's upstream tests, converted to data (../shared/research/crossplane-cases):
//! `logical/`, `fieldpath-parse/` and `mode/`. `upstream_asserted` (type and field) is
//! binding; the derived messages (detail, bad value, full message) are checked too.

mod common;

use std::collections::BTreeMap;

use composition_webhook::checks::logical;
use composition_webhook::fieldpath::{self, Segment, Segments};
use composition_webhook::findings::FieldError;
use composition_webhook::mode::{self, Mode};
use composition_webhook::model::{
    Composition, EnvironmentSourceSelector, Patch, ReadinessCheck, Transform,
};
use serde_json::{Value, json};

fn composition(spec: &Value) -> Composition {
    Composition::from_defaulted_value(&json!({ "spec": spec })).expect("valid model")
}

fn from<T: serde::de::DeserializeOwned>(v: &Value) -> T {
    serde_json::from_value(v.clone()).expect("valid model")
}

/// Compares actual errors with an expected list of {type, field, detail?, badValue?, message?}.
fn compare(id: &str, what: &str, actual: &[FieldError], expected: &Value) -> Vec<String> {
    let empty = vec![];
    let expected = expected.as_array().unwrap_or(&empty);
    let mut problems = Vec::new();
    if actual.len() != expected.len() {
        problems.push(format!(
            "{id} [{what}]: expected {} errors, got {}: {:?}",
            expected.len(),
            actual.len(),
            actual.iter().map(|e| e.to_string()).collect::<Vec<_>>()
        ));
        return problems;
    }
    for (a, e) in actual.iter().zip(expected) {
        let ty = e["type"].as_str().unwrap_or_default();
        if a.error_type.cause_type() != ty || a.field != e["field"].as_str().unwrap_or_default() {
            problems.push(format!(
                "{id} [{what}]: expected {ty} at {}, got {} at {}",
                e["field"],
                a.error_type.cause_type(),
                a.field
            ));
            continue;
        }
        // Documented difference: "invalid regexp" carries Go's reason after a colon.
        let reasoned = |expected: &str, actual: &str| {
            actual == expected
                || (expected.ends_with("invalid regexp")
                    && actual.starts_with(&format!("{expected}: ")))
        };
        if let Some(m) = e.get("message").and_then(Value::as_str)
            && !reasoned(m, &a.to_string())
        {
            problems.push(format!(
                "{id} [{what}]: message\n  expected: {m}\n  actual:   {a}"
            ));
        }
        if let Some(d) = e.get("detail").and_then(Value::as_str)
            && !reasoned(d, &a.detail)
        {
            problems.push(format!("{id} [{what}]: detail {d:?} != {:?}", a.detail));
        }
    }
    problems
}

fn single(err: Option<FieldError>) -> Vec<FieldError> {
    err.into_iter().collect()
}

fn expected_single(v: &Value) -> Value {
    match v.get("error") {
        Some(Value::Null) | None => json!([]),
        Some(e) => json!([e]),
    }
}

#[test]
fn logical_cases() {
    let Some(dir) = common::shared_subdir("research/crossplane-cases/logical") else {
        return;
    };
    let mut problems = Vec::new();
    let mut count = 0;
    for file in common::yaml_files(&dir) {
        let case = common::read_yaml(&file);
        let id = case["id"].as_str().unwrap_or_default().to_string();
        let level = case["level"].as_str().unwrap_or_default();
        let input = &case["input"];
        let expected = &case["expected"];
        count += 1;
        if level.starts_with("logical/validate") {
            let c = composition(&input["spec"]);
            let sub = match level.split_whitespace().next().unwrap_or_default() {
                "logical/validateMode" => logical::validate_mode(&c),
                "logical/validateResourceName" => logical::validate_resource_names(&c),
                "logical/validatePatchSets" => logical::validate_patch_sets(&c),
                "logical/validatePipeline" => logical::validate_pipeline(&c),
                "logical/validateResources" => logical::validate_resources(&c),
                "logical/validateEnvironment" => logical::validate_environment(&c),
                other => panic!("{id}: unknown level {other}"),
            };
            problems.extend(compare(
                &id,
                "upstream",
                &sub,
                &expected["upstream_asserted"]["errors"],
            ));
            problems.extend(compare(
                &id,
                "sub",
                &sub,
                &expected["sub_validator_derived"]["errors"],
            ));
            let full = logical::validate_upstream(&c);
            problems.extend(compare(
                &id,
                "full",
                &full,
                &expected["full_logical_validation_derived"]["errors"],
            ));
            continue;
        }
        if level == "transforms/Transform.GetOutputType" {
            let t: Transform = from(&input["transform"]);
            let want = &expected["upstream_asserted"];
            match t.declared_output_type() {
                Ok(out) => {
                    let got = out;
                    if want["error"] != Value::Null || json!(got) != want["outputType"] {
                        problems.push(format!("{id}: got {got:?}, want {want}"));
                    }
                }
                Err(e) => {
                    if want["error"].as_str() != Some(e.to_string().as_str()) {
                        problems.push(format!("{id}: got error {e}, want {want}"));
                    }
                }
            }
            continue;
        }
        let actual = match level {
            "logical/PatchValidate" => {
                single(logical::validate_patch(&from::<Patch>(&input["patch"])))
            }
            "logical/TransformValidate" => single(logical::validate_transform(&from::<Transform>(
                &input["transform"],
            ))),
            "logical/ReadinessCheckValidate" => {
                single(logical::validate_readiness_check(&from::<ReadinessCheck>(
                    &input["readiness_check"],
                )))
            }
            "logical/EnvironmentPatchValidate" => single(logical::validate_environment_patch(
                &from::<Patch>(&input["environment_patch"]),
            )),
            "logical/EnvironmentSourceSelectorValidate" => single(logical::validate_selector(
                &from::<EnvironmentSourceSelector>(&input["environment_selector"]),
            )),
            other => panic!("{id}: unknown level {other}"),
        };
        problems.extend(compare(
            &id,
            "upstream",
            &actual,
            &expected_single(&expected["upstream_asserted"]),
        ));
        problems.extend(compare(
            &id,
            "derived",
            &actual,
            &expected_single(&expected["derived"]),
        ));
    }
    assert!(count >= 78, "expected the 78 logical cases, found {count}");
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

fn segment(v: &Value) -> Segment {
    match (v.get("field"), v.get("index")) {
        (Some(f), _) => Segment::Field(f.as_str().unwrap_or_default().to_string()),
        (_, Some(i)) => Segment::Index(i.as_u64().unwrap_or_default() as u32),
        _ => panic!("bad segment {v}"),
    }
}

#[test]
fn fieldpath_parse_cases() {
    let Some(dir) = common::shared_subdir("research/crossplane-cases/fieldpath-parse") else {
        return;
    };
    let mut problems = Vec::new();
    let files = common::yaml_files(&dir);
    assert!(files.len() >= 30);
    for file in files {
        let case = common::read_yaml(&file);
        let id = case["id"].as_str().unwrap_or_default();
        let want = &case["expected"]["upstream_asserted"];
        let input = &case["input"];
        if let Some(path) = input.get("path").and_then(Value::as_str) {
            let got = fieldpath::parse(path);
            match (&got, want["error"].as_str()) {
                (Err(e), Some(msg)) if e.to_string() == msg => {}
                (Ok(segs), None) => {
                    let expected: Vec<Segment> = want["segments"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(segment)
                        .collect();
                    if segs.0 != expected {
                        problems.push(format!("{id}: {segs:?} != {expected:?}"));
                    }
                }
                _ => problems.push(format!("{id}: got {got:?}, want {want}")),
            }
        } else if let Some(content) = input.get("bracket_content").and_then(Value::as_str) {
            let got = fieldpath::field_or_index(content);
            if got != segment(&want["segment"]) {
                problems.push(format!("{id}: {got:?} != {}", want["segment"]));
            }
        } else {
            let segs = Segments(
                input["segments"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(segment)
                    .collect(),
            );
            if Some(segs.to_string().as_str()) != want["string"].as_str() {
                problems.push(format!("{id}: {segs} != {}", want["string"]));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn mode_cases() {
    let Some(dir) = common::shared_subdir("research/crossplane-cases/mode") else {
        return;
    };
    let mut problems = Vec::new();
    let files = common::yaml_files(&dir);
    assert!(
        files.len() >= 8,
        "expected the 8 mode cases, found {}",
        files.len()
    );
    for file in files {
        let case = common::read_yaml(&file);
        let id = case["id"].as_str().unwrap_or_default();
        let annotations: BTreeMap<String, String> =
            serde_json::from_value(case["input"]["metadata"]["annotations"].clone())
                .unwrap_or_default();
        // Upstream's defaults: `warn` since v1.14, `loose` before. Ours is a flag (default
        // loose), so each case runs with the default of the version it was taken from.
        let default = match case["level"].as_str() {
            Some("webhook/GetValidationMode") => Mode::Loose,
            _ => Mode::Warn,
        };
        let want = &case["expected"]["upstream_asserted"];
        // v1.13's reader is kept as `legacy_mode`; v1.14+'s is `mode_from_annotations`.
        let got = match case["level"].as_str() {
            Some("webhook/GetValidationMode") => {
                mode::legacy_mode(&annotations).unwrap_or(Ok(default))
            }
            _ => mode::mode_from_annotations(&annotations, default).map(|c| c.mode),
        };
        match got {
            Ok(mode) if want["mode"].as_str() == Some(mode.name()) => {}
            Err(e) if want["error"].as_str() == Some(e.to_string().as_str()) => {}
            other => problems.push(format!("{id}: got {other:?}, want {want}")),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
