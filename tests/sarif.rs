//! `--output sarif` as CI systems read it: the real binary's `validate` and `audit` logs valid
//! against OASIS's SARIF 2.1.0 JSON schema (`testdata/sarif/sarif-schema-2.1.0.json`), with
//! exact rule ids, levels, messages, files, lines and columns, input errors as the
//! invocation's notifications, and URIs percent-encoded relative to the current directory.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::{Value, json};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn run_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_composition-webhook"))
        .current_dir(dir)
        .args(args)
        .env_remove("COMPOSITION_WEBHOOK_MODE")
        .env_remove("COMPOSITION_WEBHOOK_OUTPUT")
        .env_remove("COMPOSITION_WEBHOOK_CROSSPLANE_VERSION")
        .env_remove("COMPOSITION_WEBHOOK_CRDS")
        .env_remove("COMPOSITION_WEBHOOK_KUBECONFIG")
        .output()
        .expect("run the binary")
}

fn run(args: &[&str]) -> Output {
    run_in(root(), args)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The SARIF 2.1.0 schema's validator, formats checked.
fn schema() -> &'static jsonschema::Validator {
    static VALIDATOR: OnceLock<jsonschema::Validator> = OnceLock::new();
    VALIDATOR.get_or_init(|| {
        let text = std::fs::read(root().join("testdata/sarif/sarif-schema-2.1.0.json"))
            .expect("the vendored SARIF schema");
        let mut schema: Value = serde_json::from_slice(&text).expect("schema JSON");
        // The `language` patterns of `run` and `toolComponent` have a stray `]` (a literal
        // in ECMA-262's lenient mode) that the meta-schema's regex check refuses: escaped,
        // the same pattern.
        for at in ["run", "toolComponent"] {
            let language = schema
                .pointer_mut(&format!("/definitions/{at}/properties/language/pattern"))
                .expect("a language pattern");
            assert_eq!(language, "^[a-zA-Z]{2}|^[a-zA-Z]{2}-[a-zA-Z]{2}]?$");
            *language = json!(r"^[a-zA-Z]{2}|^[a-zA-Z]{2}-[a-zA-Z]{2}\]?$");
        }
        jsonschema::options()
            .should_validate_formats(true)
            .build(&schema)
            .expect("the SARIF schema compiles")
    })
}

/// Why `log` breaks the SARIF schema, one line per error; empty when it is valid.
fn schema_errors(log: &Value) -> Vec<String> {
    schema()
        .iter_errors(log)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

/// The log printed on standard output, checked against the schema.
fn valid_log(o: &Output) -> Value {
    let log: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("one JSON object on stdout ({e}); stderr: {}", stderr(o)));
    let errors = schema_errors(&log);
    assert!(errors.is_empty(), "not SARIF 2.1.0:\n{}", errors.join("\n"));
    log
}

/// Each result as (ruleId, level, message, uri, startLine, startColumn).
fn results(log: &Value) -> Vec<(String, String, String, String, u64, u64)> {
    log["runs"][0]["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            let physical = &r["locations"][0]["physicalLocation"];
            (
                r["ruleId"].as_str().unwrap_or_default().to_string(),
                r["level"].as_str().unwrap_or_default().to_string(),
                r["message"]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                physical["artifactLocation"]["uri"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                physical["region"]["startLine"].as_u64().unwrap_or_default(),
                physical["region"]["startColumn"]
                    .as_u64()
                    .unwrap_or_default(),
            )
        })
        .collect()
}

fn row(
    rule: &str,
    level: &str,
    message: &str,
    uri: &str,
    line: u64,
    column: u64,
) -> (String, String, String, String, u64, u64) {
    (
        rule.into(),
        level.into(),
        message.into(),
        uri.into(),
        line,
        column,
    )
}

const COMPOSITION: &str = "testdata/invalid/composition.yaml";
const RENDERED: &str = "testdata/invalid/rendered.yaml";
const SYNTAX_ERROR: &str = "testdata/cli/syntax-error.yaml";

#[test]
fn validate_with_errors_warnings_and_a_syntax_error() {
    // No XRD: each Composition's composite resource is a missing schema, a warning in loose
    // mode; the mistakes are errors; the syntax error fails the execution.
    let o = run(&[
        "validate",
        "--output",
        "sarif",
        "--crossplane-version",
        "v1",
        "--crds",
        "testdata/crds",
        COMPOSITION,
        RENDERED,
        SYNTAX_ERROR,
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let log = valid_log(&o);
    let run = &log["runs"][0];
    let driver = &run["tool"]["driver"];
    assert_eq!(driver["name"], "composition-webhook");
    assert_eq!(driver["version"], env!("CARGO_PKG_VERSION"));
    let rules: Vec<&str> = driver["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .filter_map(|r| r["id"].as_str())
        .collect();
    assert_eq!(
        rules,
        [
            "logical/Required",
            "logical/Duplicate",
            "logical/Invalid",
            "crds/NotFound",
            "schema/Invalid",
            "rendered/Invalid",
        ]
    );
    // Each result points at its rule.
    for r in run["results"].as_array().expect("results") {
        let index = r["ruleIndex"].as_u64().expect("ruleIndex") as usize;
        assert_eq!(driver["rules"][index]["id"], r["ruleId"], "{r}");
    }
    let found = results(&log);
    let expected = [
        row(
            "logical/Invalid",
            "error",
            r#"spec.resources[0].patches[0].patchSetName: Invalid value: "comon": patchSetName must be the name of a declared patchSet"#,
            COMPOSITION,
            25,
            11,
        ),
        row(
            "crds/NotFound",
            "warning",
            r#"spec.compositeTypeRef: Not found: "gcp.platformref.upbound.io/v1alpha1, Kind=XNetwork": no CRD, MRD or XRD defines XNetwork.gcp.platformref.upbound.io; checks that need the schema of the composite resource were skipped"#,
            RENDERED,
            11,
            3,
        ),
        row(
            "rendered/Invalid",
            "error",
            r#"spec.resources[0].base.spec.forProvider.routingMod: Invalid value: "routingMod": unknown field: "routingMod", did you mean "routingMode"?"#,
            RENDERED,
            22,
            13,
        ),
    ];
    for e in &expected {
        assert!(found.contains(e), "{e:?} not among\n{found:#?}");
    }
    assert_eq!(
        found.iter().filter(|r| r.1 == "warning").count(),
        2,
        "{found:#?}"
    );
    // Where and what: the Composition, its mode and verdict.
    let first = &run["results"][0];
    assert_eq!(
        first["locations"][0]["logicalLocations"][0]["fullyQualifiedName"],
        "Composition/xnetworks-broken.gcp.platformref.upbound.io/spec.resources[0].patches[0].patchSetName"
    );
    assert_eq!(
        first["properties"],
        json!({"composition": "xnetworks-broken.gcp.platformref.upbound.io", "mode": "loose",
               "verdict": "denied", "stage": "logical", "type": "Invalid",
               "field": "spec.resources[0].patches[0].patchSetName"})
    );
    // The syntax error: the execution failed, and says where.
    assert_eq!(
        run["invocations"],
        json!([{"executionSuccessful": false, "toolExecutionNotifications": [{
            "level": "error",
            "message": {"text": "testdata/cli/syntax-error.yaml:11:5: illegal placement of ':' indicator"},
            "locations": [{"physicalLocation": {
                "artifactLocation": {"uri": SYNTAX_ERROR, "uriBaseId": "%SRCROOT%"},
                "region": {"startLine": 11, "startColumn": 5}}}],
        }]}])
    );
    let base = run["originalUriBaseIds"]["%SRCROOT%"]["uri"]
        .as_str()
        .expect("%SRCROOT%");
    assert!(
        base.starts_with("file:///") && base.ends_with('/'),
        "{base}"
    );
    // Standard error still says it for people.
    assert_eq!(
        stderr(&o),
        "error: testdata/cli/syntax-error.yaml:11:5: illegal placement of ':' indicator\n"
    );
}

#[test]
fn validate_of_valid_files_succeeds_without_results() {
    let o = run(&[
        "validate",
        "--output",
        "sarif",
        "--crossplane-version",
        "v1",
        "--crds",
        "testdata/crds",
        "testdata/example",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let log = valid_log(&o);
    assert_eq!(log["version"], "2.1.0");
    assert_eq!(log["runs"][0]["results"], json!([]));
    assert_eq!(log["runs"][0]["tool"]["driver"]["rules"], json!([]));
    assert_eq!(
        log["runs"][0]["invocations"],
        json!([{"executionSuccessful": true}])
    );
}

#[test]
fn no_composition_found_is_still_a_log() {
    let o = run(&["validate", "--output", "sarif", "testdata/crds"]);
    assert_eq!(o.status.code(), Some(2));
    let log = valid_log(&o);
    assert_eq!(
        log["runs"][0]["invocations"],
        json!([{"executionSuccessful": false, "toolExecutionNotifications": [{
            "level": "error",
            "message": {"text": "no Composition (apiextensions.crossplane.io/v1) found in testdata/crds"},
        }]}])
    );
}

#[test]
fn audit_of_files() {
    let o = run(&[
        "audit",
        "--output",
        "sarif",
        "--crossplane-version",
        "v1",
        "--crds",
        "testdata/crds",
        "testdata/example",
        "testdata/invalid",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let log = valid_log(&o);
    let found = results(&log);
    assert_eq!(found.len(), 12, "{found:#?}");
    assert!(found.iter().all(|r| r.1 == "error"), "{found:#?}");
    assert_eq!(
        found[0],
        row(
            "logical/Invalid",
            "error",
            r#"spec.resources[0].patches[0].patchSetName: Invalid value: "comon": patchSetName must be the name of a declared patchSet"#,
            COMPOSITION,
            25,
            11,
        )
    );
    assert_eq!(
        log["runs"][0]["invocations"],
        json!([{"executionSuccessful": true}])
    );
}

/// A scratch directory under the target dir.
fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

#[test]
fn file_uris_are_percent_encoded_and_relative_to_the_current_directory() {
    let dir = scratch("sarif-uris");
    let sub = dir.join("my compositions");
    std::fs::create_dir_all(&sub).expect("mkdir");
    std::fs::copy(root().join(COMPOSITION), sub.join("größe#1.yaml")).expect("copy");
    let crds = root().join("testdata/crds");
    let o = run_in(
        &dir,
        &[
            "validate",
            "--output",
            "sarif",
            "--crossplane-version",
            "v1",
            "--crds",
            crds.to_str().expect("UTF-8 path"),
            "my compositions",
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let log = valid_log(&o);
    let found = results(&log);
    assert_eq!(
        found[0].3, "my%20compositions/gr%C3%B6%C3%9Fe%231.yaml",
        "{found:#?}"
    );
    assert_eq!((found[0].4, found[0].5), (25, 11));
    let base = log["runs"][0]["originalUriBaseIds"]["%SRCROOT%"]["uri"]
        .as_str()
        .expect("%SRCROOT%")
        .to_string();
    assert!(base.ends_with("/sarif-uris/"), "{base}");
}

#[test]
fn the_schema_refuses_broken_logs() {
    // The check above would catch output that breaks the format: each of these breaks it.
    let o = run(&[
        "validate",
        "--output",
        "sarif",
        "--crossplane-version",
        "v1",
        "--crds",
        "testdata/crds",
        RENDERED,
    ]);
    let log = valid_log(&o);
    let result = "/runs/0/results/0";
    // (what, where, the value put there: `None` removes it).
    let broken = [
        ("no version", "/version".to_string(), None),
        (
            "a level SARIF does not have",
            format!("{result}/level"),
            Some(json!("fatal")),
        ),
        (
            "line 0",
            format!("{result}/locations/0/physicalLocation/region/startLine"),
            Some(json!(0)),
        ),
        (
            "a message without text",
            format!("{result}/message"),
            Some(json!({"markdown": 1})),
        ),
        (
            "a property SARIF does not define",
            format!("{result}/severity"),
            Some(json!("error")),
        ),
        (
            "a URI that is not one",
            "/runs/0/tool/driver/informationUri".to_string(),
            Some(json!("not a uri")),
        ),
    ];
    for (what, at, value) in broken {
        let mut copy = log.clone();
        let (parent, key) = at.rsplit_once('/').expect("a pointer");
        let parent = copy
            .pointer_mut(parent)
            .and_then(Value::as_object_mut)
            .unwrap_or_else(|| panic!("{what}: {parent} is not an object"));
        match value {
            Some(v) => parent.insert(key.to_string(), v),
            None => parent.remove(key),
        };
        assert!(!schema_errors(&copy).is_empty(), "{what}: accepted");
    }
}
