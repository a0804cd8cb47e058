//! The `composition-webhook validate` command as a user runs it: exact output lines, JSON
//! shape, exit statuses, modes and bad input.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_composition-webhook"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .env_remove("COMPOSITION_WEBHOOK_MODE")
        .env_remove("COMPOSITION_WEBHOOK_CROSSPLANE_VERSION")
        .output()
        .expect("run the binary")
}

/// `run` with `--crossplane-version v1` after the subcommand: the example and most fixtures
/// here are Crossplane v1 Compositions (Resources mode, upbound/platform-ref-gcp v0.4.0).
fn run_v1(args: &[&str]) -> Output {
    let mut with = args.to_vec();
    with.splice(1..1, ["--crossplane-version", "v1"]);
    run(&with)
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn lines(o: &Output) -> Vec<String> {
    stdout(o).lines().map(str::to_string).collect()
}

/// A scratch directory under the target dir, unique per test.
fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

const INVALID: &str = "testdata/invalid/composition.yaml";

/// Writes `text` to `file` and validates it against the example's CRDs and XRD.
fn validate_with_example_schemas(file: &std::path::Path, text: &str, flags: &[&str]) -> Output {
    std::fs::write(file, text).expect("write scratch file");
    let mut args = vec![
        "validate",
        "--crds",
        "testdata/crds",
        "--crds",
        "testdata/example",
    ];
    args.extend_from_slice(flags);
    args.push(file.to_str().expect("UTF-8 path"));
    run_v1(&args)
}

#[test]
fn valid_example_is_allowed() {
    let o = run_v1(&["validate", "--crds", "testdata/crds", "testdata/example"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        lines(&o),
        [
            r#"testdata/example/composition.yaml: Composition "xnetworks.gcp.platformref.upbound.io" (mode loose): allowed: 0 errors, 0 warnings"#,
            "1 Composition validated against 3 schemas and Crossplane v1.17.0's Composition API: 1 allowed, 0 denied",
        ]
    );
    assert_eq!(stderr(&o), "");
}

#[test]
fn invalid_example_text_output() {
    let o = run_v1(&[
        "validate",
        "--crds",
        "testdata/crds",
        "testdata/example",
        "testdata/invalid",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let f = INVALID;
    let r = "testdata/invalid/rendered.yaml";
    assert_eq!(
        lines(&o),
        [
            r#"testdata/example/composition.yaml: Composition "xnetworks.gcp.platformref.upbound.io" (mode loose): allowed: 0 errors, 0 warnings"#.to_string(),
            format!(r#"{f}:25: error: spec.resources[0].patches[0].patchSetName: Invalid value: "comon": patchSetName must be the name of a declared patchSet"#),
            format!(r#"{f}:32: error: spec.resources[0].patches[1].combine.string.fmt: Invalid value: "%s-%s": the format uses 2 values but combine.variables lists 1 variable: the value would contain %!s(MISSING)"#),
            format!(r#"{f}:38: error: spec.resources[1].name: Duplicate value: "network""#),
            format!("{f}:47: error: spec.resources[1].patches[0].fromFieldPath: Required value: fromFieldPath must be set for patch type FromCompositeFieldPath"),
            format!(r#"{f}:55: error: spec.resources[1].patches[1].transforms[0].string.regexp.match: Invalid value: "net-(.*": invalid regexp: missing closing )"#),
            format!("{f}:57: error: spec.resources[1].readinessChecks[0].matchString: Required value: cannot be empty for type MatchString"),
            format!("{f}:60: error: spec.resources[1].connectionDetails[0].value: Required value: connection detail of type FromValue needs value"),
            format!(r#"{f}:35: error: spec.resources[0].patches[2].toFieldPath: Invalid value: "spec.forProvider.autoCreateSubnetwork": field 'autoCreateSubnetwork' is not valid according to the schema; did you mean "autoCreateSubnetworks"?"#),
            format!("{f}:36: error: spec.resources[0].patches[3].transforms: Required value: the fromFieldPath does not have a type compatible with the toFieldPath according to their schemas and no transforms were provided: string != boolean (a convert transform with toType: bool would do)"),
            format!(r#"{f}:58: error: spec.resources[1].readinessChecks[0].fieldPath: Invalid value: "status.atProvider.state": field 'state' is not valid according to the schema"#),
            format!(r#"{f}: Composition "xnetworks-broken.gcp.platformref.upbound.io" (mode loose): denied (422 Invalid): 10 errors, 0 warnings"#),
            format!(r#"{r}:22: error: spec.resources[0].base.spec.forProvider.routingMod: Invalid value: "routingMod": unknown field: "routingMod", did you mean "routingMode"?"#),
            format!(r#"{r}:31: error: spec.resources[1].base.spec: Invalid value: "object": ipCidrRange is a required parameter"#),
            format!(r#"{r}: Composition "xnetworks-unrenderable.gcp.platformref.upbound.io" (mode loose): denied (422 Invalid): 2 errors, 0 warnings"#),
            "3 Compositions validated against 3 schemas and Crossplane v1.17.0's Composition API: 1 allowed, 2 denied".to_string(),
        ]
    );
}

#[test]
fn invalid_example_json_output() {
    let o = run_v1(&[
        "validate",
        "--output",
        "json",
        "--crds",
        "testdata/crds",
        INVALID,
    ]);
    assert_eq!(o.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&o.stdout).expect("one JSON object");
    // The line and column of the field's key (or of the item, for a list item).
    let finding = |ty: &str, field: &str, message: &str, (line, column): (u32, u32)| {
        json!({"severity": "error", "stage": "logical", "type": ty, "field": field,
               "message": format!("{field}: {message}"), "line": line, "column": column})
    };
    assert_eq!(
        v,
        json!({"compositionApi": "Crossplane v1.17.0's Composition API", "compositions": [{
            "file": INVALID,
            "name": "xnetworks-broken.gcp.platformref.upbound.io",
            "mode": "loose",
            "allowed": false, "code": 422,
            "findings": [
                finding("Invalid", "spec.resources[0].patches[0].patchSetName",
                    r#"Invalid value: "comon": patchSetName must be the name of a declared patchSet"#, (25, 11)),
                finding("Invalid", "spec.resources[0].patches[1].combine.string.fmt",
                    r#"Invalid value: "%s-%s": the format uses 2 values but combine.variables lists 1 variable: the value would contain %!s(MISSING)"#, (32, 15)),
                finding("Duplicate", "spec.resources[1].name", r#"Duplicate value: "network""#, (38, 7)),
                finding("Required", "spec.resources[1].patches[0].fromFieldPath",
                    "Required value: fromFieldPath must be set for patch type FromCompositeFieldPath", (47, 11)),
                finding("Invalid", "spec.resources[1].patches[1].transforms[0].string.regexp.match",
                    r#"Invalid value: "net-(.*": invalid regexp: missing closing )"#, (55, 19)),
                finding("Required", "spec.resources[1].readinessChecks[0].matchString",
                    "Required value: cannot be empty for type MatchString", (57, 11)),
                finding("Required", "spec.resources[1].connectionDetails[0].value",
                    "Required value: connection detail of type FromValue needs value", (60, 11)),
                // The XRD is not among the schemas given: a warning in loose mode; the checks
                // that need only the composed resources' schemas still run.
                json!({"severity": "warning", "stage": "crds", "type": "NotFound",
                    "field": "spec.compositeTypeRef",
                    "message": r#"spec.compositeTypeRef: Not found: "gcp.platformref.upbound.io/v1alpha1, Kind=XNetwork": no CRD, MRD or XRD defines XNetwork.gcp.platformref.upbound.io; checks that need the schema of the composite resource were skipped"#,
                    "line": 7, "column": 3}),
                json!({"severity": "error", "stage": "schema", "type": "Invalid",
                    "field": "spec.resources[0].patches[2].toFieldPath",
                    "message": r#"spec.resources[0].patches[2].toFieldPath: Invalid value: "spec.forProvider.autoCreateSubnetwork": field 'autoCreateSubnetwork' is not valid according to the schema; did you mean "autoCreateSubnetworks"?"#,
                    "line": 35, "column": 11}),
                json!({"severity": "error", "stage": "schema", "type": "Invalid",
                    "field": "spec.resources[1].readinessChecks[0].fieldPath",
                    "message": r#"spec.resources[1].readinessChecks[0].fieldPath: Invalid value: "status.atProvider.state": field 'state' is not valid according to the schema"#,
                    "line": 58, "column": 11}),
            ]
        }]})
    );
}

#[test]
fn modes_decide_missing_schemas() {
    let f = "testdata/cli/modes.yaml";
    let xr = r#"spec.compositeTypeRef: Not found: "example.org/v1alpha1, Kind=XThing": no CRD, MRD or XRD defines XThing.example.org; checks that need the schema of the composite resource were skipped"#;
    let thing = r#"spec.resources[0].base: Not found: "thing.example.org/v1beta1, Kind=Thing": no CRD, MRD or XRD defines Thing.thing.example.org; checks that need the schema of this resource were skipped"#;
    let o = run_v1(&["validate", f]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        lines(&o),
        [
            format!("{f}:7: warning: {xr}"),
            format!("{f}:12: warning: {thing}"),
            format!(
                r#"{f}: Composition "default-mode" (mode loose): allowed: 0 errors, 2 warnings"#
            ),
            format!("{f}:23: error: {xr}"),
            format!("{f}:28: error: {thing}"),
            format!(
                r#"{f}: Composition "strict-mode" (mode strict): denied (403 Forbidden): 2 errors, 0 warnings"#
            ),
            format!("{f}:39: error: {xr}"),
            // A built-in kind: validated with the embedded Kubernetes schema; whether it
            // needs a namespace depends on the XR's scope, unknown without its XRD, so
            // even strict mode only warns (issue 47: the missing XRD is the error).
            format!(
                r#"{f}:44: warning: spec.resources[0].base.metadata.namespace: Required value: this depends on the scope of the composite resource XThing.example.org, unknown without its XRD: a namespaced XR's resources are created in its namespace"#
            ),
            format!(
                r#"{f}: Composition "legacy-strict" (mode strict): denied (403 Forbidden): 1 error, 1 warning"#
            ),
            format!(
                r#"{f}:53: error: metadata.annotations[crossplane.io/composition-schema-aware-validation-mode]: Unsupported value: "Strict": supported values: "strict", "loose", "warn" (case-sensitive)"#
            ),
            format!("{f}:55: error: {xr}"),
            format!("{f}:60: error: {thing}"),
            format!(
                r#"{f}: Composition "bad-mode" (mode strict): denied (403 Forbidden): 3 errors, 0 warnings"#
            ),
            "4 Compositions validated against 0 schemas and Crossplane v1.17.0's Composition API: 1 allowed, 3 denied".to_string(),
        ]
    );
    // The flag sets the default only; annotations still win.
    let o = run_v1(&["validate", "--mode", "strict", "--output", "json", f]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let modes: Vec<(&str, bool)> = v["compositions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["mode"].as_str().unwrap(), c["allowed"].as_bool().unwrap()))
        .collect();
    assert_eq!(
        modes,
        [
            ("strict", false),
            ("strict", false),
            ("strict", false),
            ("strict", false)
        ]
    );
    let o = run_v1(&["validate", "--mode", "warn", "--output", "json", f]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["compositions"][0]["mode"], "warn");
    assert_eq!(v["compositions"][0]["allowed"], true);
    assert_eq!(v["compositions"][0]["findings"][0]["severity"], "warning");
    assert_eq!(v["compositions"][0]["findings"][0]["stage"], "crds");
    assert_eq!(v["compositions"][0]["findings"][0]["type"], "NotFound");
    assert_eq!(v["compositions"][1]["mode"], "strict");
}

#[test]
fn the_mode_can_come_from_the_environment() {
    let o = Command::new(env!("CARGO_BIN_EXE_composition-webhook"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["validate", "--output", "json", "testdata/cli/modes.yaml"])
        .env("COMPOSITION_WEBHOOK_MODE", "warn")
        .env("COMPOSITION_WEBHOOK_CROSSPLANE_VERSION", "1.20")
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["compositions"][0]["mode"], "warn");
    // A minor picks its own Composition API.
    assert_eq!(v["compositionApi"], "Crossplane v1.20.11's Composition API");
}

#[test]
fn conflicting_crds_deny_in_every_mode() {
    let o = run_v1(&[
        "validate",
        "--mode",
        "warn",
        "--crds",
        "testdata/cli/conflicting-crds",
        "--output",
        "json",
        "testdata/cli/modes.yaml",
    ]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let first = &v["compositions"][0];
    assert_eq!(first["allowed"], false);
    assert_eq!(
        first["findings"][1],
        json!({"severity": "error", "stage": "crds", "type": "Internal",
            "field": "spec.resources[0].base",
            "message": "spec.resources[0].base: Internal error: more than one CRD found for Thing.thing.example.org: things.thing.example.org from testdata/cli/conflicting-crds/a.yaml, things.thing.example.org from testdata/cli/conflicting-crds/b.yaml; checks that need the schema of this resource were skipped",
            "line": 12, "column": 7})
    );
}

#[test]
fn crd_without_schema_and_unknown_version() {
    let f = "testdata/cli/no-schema.yaml";
    let o = run_v1(&["validate", f]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        lines(&o),
        [
            format!(
                r#"{f}:50: warning: spec.resources[0].base: Not found: "thing.example.org/v1beta1, Kind=Thing": CRD things.thing.example.org has no schema for version v1beta1; checks that need the schema of this resource were skipped"#
            ),
            format!(
                r#"{f}:46: error: spec.compositeTypeRef.apiVersion: Invalid value: "example.org/v1alpha2": the CompositeResourceDefinition of xthings.example.org has no version v1alpha2; served versions: v1alpha1"#
            ),
            format!(
                r#"{f}: Composition "no-schema" (mode loose): denied (422 Invalid): 1 error, 1 warning"#
            ),
            "1 Composition validated against 2 schemas and Crossplane v1.17.0's Composition API: 0 allowed, 1 denied".to_string(),
        ]
    );
}

#[test]
fn wrong_types_are_a_finding_with_line() {
    let o = run_v1(&["validate", "testdata/cli/wrong-types.yaml"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        lines(&o)[0],
        r#"testdata/cli/wrong-types.yaml:19: error: spec.resources[0].patches[0].transforms[0].math.multiply: Invalid value: "string": spec.resources[0].patches[0].transforms[0].math.multiply in body must be of type integer: "string""#
    );
}

#[test]
fn yaml_syntax_error_names_file_line_and_column() {
    let o = run_v1(&[
        "validate",
        "testdata/cli/syntax-error.yaml",
        "testdata/example",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o),
        "error: testdata/cli/syntax-error.yaml:11:5: illegal placement of ':' indicator\n"
    );
    // What could be read is still validated.
    assert!(stdout(&o).contains(r#"Composition "xnetworks.gcp.platformref.upbound.io""#));
}

#[test]
fn a_document_that_is_not_an_object() {
    let o = run_v1(&["validate", "testdata/cli/not-an-object.yaml"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o),
        "error: testdata/cli/not-an-object.yaml:1: document 1 is an array, not a Kubernetes object\n"
    );
}

#[test]
fn unreadable_input_and_no_composition() {
    let o = run_v1(&["validate", "testdata/does-not-exist.yaml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).starts_with("error: testdata/does-not-exist.yaml: "),
        "{}",
        stderr(&o)
    );
    let o = run_v1(&["validate", "testdata/crds"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o),
        "error: no Composition (apiextensions.crossplane.io/v1) found in testdata/crds\n"
    );
    let o = run_v1(&["validate"]);
    assert_eq!(o.status.code(), Some(2), "a usage error");
    let o = run_v1(&["validate", "--mode", "Strict", "testdata/example"]);
    assert_eq!(o.status.code(), Some(2), "modes are case-sensitive");
}

#[test]
fn reads_standard_input() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_composition-webhook"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "validate",
            "--crossplane-version",
            "v1",
            "--crds",
            "testdata/crds",
            "--crds",
            "testdata/example",
            "-",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let text = std::fs::read(INVALID).unwrap();
    child.stdin.take().unwrap().write_all(&text).unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).starts_with("<stdin>:25: error: spec.resources[0].patches[0].patchSetName"));
}

#[test]
fn a_path_with_ten_thousand_segments() {
    let dir = scratch("long-path");
    let path = vec!["a"; 10_000].join(".");
    let text = std::fs::read_to_string("testdata/example/composition.yaml")
        .unwrap()
        .replace(
            "toFieldPath: metadata.name",
            &format!("toFieldPath: {path}"),
        );
    let o = validate_with_example_schemas(&dir.join("long.yaml"), &text, &[]);
    // It must not crash or hang; the first segment is not a field of the Network.
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("toFieldPath: Invalid value: \"a.a.a.a.")
            && stdout(&o).contains("\": field 'a' is not valid according to the schema\n"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn a_five_megabyte_file() {
    let dir = scratch("big");
    let mut text = String::from(
        "apiVersion: apiextensions.crossplane.io/v1\nkind: Composition\nmetadata:\n  name: big\nspec:\n  compositeTypeRef:\n    apiVersion: gcp.platformref.upbound.io/v1alpha1\n    kind: XNetwork\n  resources:\n",
    );
    let mut i = 0;
    while text.len() < 5 * 1024 * 1024 {
        text.push_str(&format!(
            "    - name: net-{i}\n      base:\n        apiVersion: compute.gcp.upbound.io/v1beta1\n        kind: Network\n        spec:\n          forProvider:\n            description: \"{}\"\n      patches:\n        - fromFieldPath: spec.id\n          toFieldPath: metadata.labels[id]\n",
            "x".repeat(200)
        ));
        i += 1;
    }
    // One mistake at the very end, to see its line.
    text.push_str("    - name: net-0\n      base:\n        apiVersion: compute.gcp.upbound.io/v1beta1\n        kind: Network\n");
    let lines_in_file = text.lines().count();
    let o = validate_with_example_schemas(&dir.join("big.yaml"), &text, &["--output", "json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let findings = v["compositions"][0]["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1);
    assert_eq!(
        findings[0]["message"],
        format!(r#"spec.resources[{i}].name: Duplicate value: "net-0""#)
    );
    assert_eq!(findings[0]["line"], lines_in_file as u64 - 3);
}

#[test]
fn deep_nesting_and_huge_inputs_are_clean_errors() {
    let dir = scratch("deep");
    let file = dir.join("deep.yaml");
    std::fs::write(&file, "[".repeat(100_000)).unwrap();
    let o = run_v1(&["validate", file.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("nesting is deeper than 256 levels"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn compositions_in_a_list_with_their_lines() {
    let f = "testdata/cli/list.yaml";
    let o = run_v1(&["validate", "--mode", "warn", "--output", "json", f]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        "warning: testdata/cli/list.yaml:20: skipped a Composition of apiextensions.crossplane.io/v1beta1: only apiextensions.crossplane.io/v1 is validated\n"
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let errors: Vec<(String, Value)> = v["compositions"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["findings"].as_array().unwrap().clone())
        .filter(|f| f["severity"] == "error")
        .map(|f| {
            (
                f["message"].as_str().unwrap().to_string(),
                f["line"].clone(),
            )
        })
        .collect();
    assert_eq!(
        errors,
        [
            ("spec.resources[0].patches[0].fromFieldPath: Required value: fromFieldPath must be set for patch type ToCompositeFieldPath".to_string(), json!(19)),
            (r#"metadata.name: Invalid value: "Second_Composition": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"#.to_string(), json!(27)),
        ]
    );
}

#[test]
fn the_mode_of_a_composition_that_cannot_be_read() {
    let dir = scratch("unreadable-model");
    let file = dir.join("c.yaml");
    let text = std::fs::read_to_string("testdata/cli/wrong-types.yaml")
        .unwrap()
        .replace(
            "  name: wrong-types\n",
            "  name: wrong-types\n  annotations:\n    crossplane.io/composition-schema-aware-validation-mode: warn\n",
        );
    std::fs::write(&file, text).unwrap();
    let o = run_v1(&["validate", "--output", "json", file.to_str().unwrap()]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["compositions"][0]["mode"], "warn");
    assert_eq!(
        v["compositions"][0]["allowed"], false,
        "a wrong type denies in every mode"
    );
    assert_eq!(v["compositions"][0]["findings"][0]["type"], "TypeInvalid");
    assert_eq!(v["compositions"][0]["findings"][0]["line"], 21);
}

#[test]
fn a_malformed_xrd_names_file_line_and_field() {
    let o = run_v1(&[
        "validate",
        "--crds",
        "testdata/cli/bad-xrd.yaml",
        "testdata/example",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o),
        "error: testdata/cli/bad-xrd.yaml:10: CompositeResourceDefinition \"xthings.example.org\": spec.versions: expected an array\n"
    );
}

/// `render` prints the mock XR and every composed resource as YAML documents, each headed by
/// its template, and exits 0 when every rendered resource is valid.
#[test]
fn render_prints_the_composed_resources() {
    let out = run_v1(&[
        "render",
        "testdata/example/composition.yaml",
        "--crds",
        "testdata/crds",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stderr(&out), "");
    let text = stdout(&out);
    let docs: Vec<&str> = text.split("---\n").filter(|d| !d.is_empty()).collect();
    assert_eq!(docs.len(), 3);
    assert!(docs[0].starts_with("# The mock composite resource\napiVersion: gcp.platformref.upbound.io/v1alpha1\nkind: XNetwork\nmetadata:\n  name: xnetwork-mock\n"));
    assert!(docs[1].starts_with("# spec.resources[0]\napiVersion: compute.gcp.upbound.io/v1beta1\nkind: Network\nmetadata:\n  generateName: xnetwork-mock-\n"));
    assert!(docs[2].contains("    region: us-west2\n"));
    // Every document is YAML a reader takes back.
    let parsed = composition_webhook::document::parse_documents("out.yaml", &text).expect("yaml");
    assert_eq!(parsed.len(), 3);
    assert_eq!(
        parsed[2].value["metadata"]["labels"]["crossplane.io/composite"],
        "xnetwork-mock"
    );
}

/// `render --xr` renders from a given XR, and a base the CRD refuses is reported on standard
/// error with exit status 1.
#[test]
fn render_from_a_given_xr_reports_invalid_resources() {
    let dir = scratch("render-xr");
    let xr = dir.join("xr.yaml");
    std::fs::write(
        &xr,
        "apiVersion: gcp.platformref.upbound.io/v1alpha1\nkind: XNetwork\nmetadata: {name: prod, uid: u-1}\nspec: {id: prod-net}\n",
    )
    .expect("write xr");
    let composition = std::fs::read_to_string("testdata/example/composition.yaml")
        .expect("example")
        .replace(
            "routingMode: REGIONAL",
            "routingMode: REGIONAL\n            routingMod: GLOBAL",
        );
    let file = dir.join("composition.yaml");
    std::fs::write(&file, composition).expect("write composition");
    let out = run_v1(&[
        "render",
        file.to_str().expect("path"),
        "--xr",
        xr.to_str().expect("path"),
        "--crds",
        "testdata/crds",
        "--crds",
        "testdata/example/definition.yaml",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(text.starts_with("---\n# The composite resource\n"));
    assert!(text.contains("  name: prod-net\n"), "{text}");
    assert!(text.contains("    networks.gcp.platformref.upbound.io/network-id: prod-net\n"));
    assert_eq!(
        stderr(&out),
        "error: spec.resources[0].base.spec.forProvider.routingMod: Invalid value: \"routingMod\": unknown field: \"routingMod\", did you mean \"routingMode\"?\n"
    );
}

/// Rendered validation runs in `validate` by default; `--no-render` turns it off.
#[test]
fn validate_renders_unless_told_not_to() {
    let dir = scratch("no-render");
    let file = dir.join("composition.yaml");
    let text = std::fs::read_to_string("testdata/example/composition.yaml")
        .expect("example")
        .replace(
            "routingMode: REGIONAL",
            "routingMode: REGIONAL\n            routingMod: GLOBAL",
        );
    let out = validate_with_example_schemas(&file, &text, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(lines(&out)[0].ends_with(
        ": error: spec.resources[0].base.spec.forProvider.routingMod: Invalid value: \"routingMod\": unknown field: \"routingMod\", did you mean \"routingMode\"?"
    ), "{}", stdout(&out));
    let out = validate_with_example_schemas(&file, &text, &["--no-render"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}

/// Offline, Crossplane v2.3.4's Composition API applies unless `--crossplane-version` picks
/// v1's; a Composition CRD among the schemas decides over both.
#[test]
fn the_composition_api_is_v2_unless_picked_or_given() {
    let example = ["--crds", "testdata/crds", "testdata/example"];
    let o = run(&[&["validate"][..], &example].concat());
    assert_eq!(o.status.code(), Some(1));
    // The missing pipeline in the API server's words: Crossplane v2's CRD refuses it by a CEL
    // rule on `spec` (`self.mode == 'Pipeline' && has(self.pipeline)`), which kube-apiserver
    // reports at `spec` with the rule's message; the logical check's `spec.pipeline: Required
    // value` with the same words is that problem again.
    assert_eq!(
        lines(&o),
        [
            "testdata/example/composition.yaml:7: error: spec: Invalid value: \"object\": an array of pipeline steps is required in Pipeline mode",
            "testdata/example/composition.yaml:12: error: spec.resources: Invalid value: \"resources\": unknown field: \"resources\": Crossplane v2 Compositions have no spec.resources: compose resources in a pipeline step of function-patch-and-transform (`crossplane beta convert pipeline-composition` converts a v1 Composition) (checked against Crossplane v2.3.4's Composition API; for Crossplane v1, validate with --crossplane-version v1)",
            "testdata/example/composition.yaml: Composition \"xnetworks.gcp.platformref.upbound.io\" (mode loose): denied (422 Invalid): 2 errors, 0 warnings",
            "1 Composition validated against 3 schemas and Crossplane v2.3.4's Composition API: 0 allowed, 1 denied",
        ]
    );
    // Crossplane v1.17.0's own CRD, given: the example is valid again.
    let v1_crd = "crds/upstream/apiextensions.crossplane.io_compositions.yaml";
    let o = run(&[&["validate", "--crds", v1_crd][..], &example].concat());
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert_eq!(
        lines(&o).last().map(String::as_str),
        Some(
            "1 Composition validated against 4 schemas and the Composition CRD in crds/upstream/apiextensions.crossplane.io_compositions.yaml: 1 allowed, 0 denied"
        )
    );
    // v2.3.4's CRD, given, decides over the flag.
    let o = run(&[
        &[
            "validate",
            "--crossplane-version",
            "v1",
            "--crds",
            "crds/upstream/v2.3.4",
        ][..],
        &example,
    ]
    .concat());
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("spec.resources: Invalid value: \"resources\": unknown field: \"resources\": Crossplane v2 Compositions have no spec.resources"),
        "{}",
        stdout(&o)
    );
}

/// A step's `requirements` (Crossplane v2.3.4's CRD) is valid with v2's API, and an unknown
/// field that says so with v1's.
#[test]
fn step_requirements_are_v2s() {
    let dir = scratch("requirements");
    let file = dir.join("composition.yaml");
    std::fs::write(
        &file,
        "apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: with-requirements
spec:
  compositeTypeRef:
    apiVersion: gcp.platformref.upbound.io/v1alpha1
    kind: XNetwork
  mode: Pipeline
  pipeline:
  - step: environment
    functionRef:
      name: function-extra-resources
    requirements:
      requiredResources:
      - requirementName: environment
        apiVersion: v1
        kind: ConfigMap
        name: environment
",
    )
    .expect("write");
    let f = file.to_str().expect("UTF-8");
    let o = run(&["validate", "--crds", "testdata/example", f]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    let o = run_v1(&["validate", "--crds", "testdata/example", f]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        lines(&o)[0],
        format!(
            "{f}:14: error: spec.pipeline[0].requirements: Invalid value: \"requirements\": unknown field: \"requirements\": step requirements are Crossplane v2's (checked against Crossplane v1.17.0's Composition API; for Crossplane v2, validate with --crossplane-version v2)"
        )
    );
}

/// A resource the runtime would not send (a `policy.fromFieldPath: Required` patch whose
/// source the composite resource lacks: Crossplane and function-patch-and-transform skip
/// the template) is printed commented out with why, and `--output json` says `sent: false`.
#[test]
fn render_marks_resources_the_runtime_would_not_send() {
    let dir = scratch("render-not-sent");
    let composition = std::fs::read_to_string("testdata/example/composition.yaml")
        .expect("example")
        .replacen(
            "        - fromFieldPath: spec.id\n          toFieldPath: metadata.labels[networks.gcp.platformref.upbound.io/network-id]\n",
            "        - fromFieldPath: spec.id\n          toFieldPath: metadata.labels[networks.gcp.platformref.upbound.io/network-id]\n        - fromFieldPath: metadata.annotations[example.org/description]\n          toFieldPath: spec.forProvider.description\n          policy:\n            fromFieldPath: Required\n",
            1,
        );
    assert!(composition.contains("fromFieldPath: Required"));
    let file = dir.join("composition.yaml");
    std::fs::write(&file, composition).expect("write composition");
    let args = [
        "render",
        file.to_str().expect("path"),
        "--crds",
        "testdata/crds",
        "--crds",
        "testdata/example/definition.yaml",
    ];
    let out = run_v1(&args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let docs: Vec<&str> = text.split("---\n").filter(|d| !d.is_empty()).collect();
    assert_eq!(docs.len(), 3);
    let note = "not sent: the runtime does not create or update this resource while spec.resources[0].patches[2] requires metadata.annotations[example.org/description] (policy.fromFieldPath: Required), which the composite resource does not have";
    assert!(
        docs[1].starts_with(&format!(
            "# spec.resources[0]: {note}\n# apiVersion: compute.gcp.upbound.io/v1beta1\n# kind: Network\n"
        )),
        "{}",
        docs[1]
    );
    assert!(docs[1].lines().all(|l| l.starts_with('#')), "{}", docs[1]);
    // The other resource is sent as it is.
    assert!(docs[2].starts_with("# spec.resources[1]\napiVersion: "));
    assert!(text.ends_with('\n'));

    let mut json_args = args.to_vec();
    json_args.extend(["--output", "json"]);
    let out = run_v1(&json_args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stderr(&out), "");
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["composite"]["metadata"]["name"], "xnetwork-mock");
    assert_eq!(
        v["resources"][0],
        json!({"template": "spec.resources[0]", "name": null, "sent": false,
               "notSent": note, "object": v["resources"][0]["object"]})
    );
    assert_eq!(v["resources"][0]["object"]["kind"], "Network");
    assert_eq!(v["resources"][1]["sent"], true);
    assert_eq!(v["resources"][1]["notSent"], Value::Null);
    assert_eq!(v["findings"], json!([]));
}

/// `run` with `--crossplane-version VERSION` after the subcommand.
fn run_at(version: &str, args: &[&str]) -> Output {
    let mut with = args.to_vec();
    with.splice(1..1, ["--crossplane-version", version]);
    run(&with)
}

/// The last line of the output: the summary.
fn summary(o: &Output) -> String {
    lines(o).last().cloned().unwrap_or_default()
}

/// A pipeline step's `requirements.requiredSchemas` (Crossplane v2.2's Composition CRD) is an
/// unknown field under v2.0's and v2.1's, which says which minor has it, and valid from v2.2.
#[test]
fn required_schemas_are_v2_2s() {
    let dir = scratch("required-schemas");
    let file = dir.join("composition.yaml");
    std::fs::write(
        &file,
        "apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: with-required-schemas
spec:
  compositeTypeRef:
    apiVersion: gcp.platformref.upbound.io/v1alpha1
    kind: XNetwork
  mode: Pipeline
  pipeline:
  - step: schemas
    functionRef:
      name: function-extra-resources
    requirements:
      requiredSchemas:
      - requirementName: network
        apiVersion: compute.gcp.upbound.io/v1beta1
        kind: Network
",
    )
    .expect("write");
    let f = file.to_str().expect("UTF-8");
    for (version, release) in [("v2.0", "v2.0.8"), ("v2.1", "v2.1.8"), ("2.1.3", "v2.1.8")] {
        let o = run_at(version, &["validate", "--crds", "testdata/example", f]);
        assert_eq!(o.status.code(), Some(1), "{version}: {}", stdout(&o));
        assert_eq!(
            lines(&o),
            [
                format!(
                    "{f}:15: error: spec.pipeline[0].requirements.requiredSchemas: Invalid value: \"requiredSchemas\": unknown field: \"requiredSchemas\": required schemas are Crossplane v2.2's (checked against Crossplane {release}'s Composition API; for Crossplane v2.2 or later, validate with --crossplane-version v2.2)"
                ),
                format!(
                    "{f}: Composition \"with-required-schemas\" (mode loose): denied (422 Invalid): 1 error, 0 warnings"
                ),
                format!(
                    "1 Composition validated against 1 schema and Crossplane {release}'s Composition API: 0 allowed, 1 denied"
                ),
            ],
            "{version}"
        );
        assert_eq!(stderr(&o), "", "{version}");
    }
    for (version, release) in [("v2.2", "v2.2.4"), ("v2.3", "v2.3.4"), ("v2", "v2.3.4")] {
        let o = run_at(version, &["validate", "--crds", "testdata/example", f]);
        assert_eq!(o.status.code(), Some(0), "{version}: {}", stdout(&o));
        assert_eq!(
            summary(&o),
            format!(
                "1 Composition validated against 1 schema and Crossplane {release}'s Composition API: 1 allowed, 0 denied"
            )
        );
        assert_eq!(stderr(&o), "", "{version}");
    }
    // Under v1's API the whole of `requirements` is unknown.
    let o = run_at("v1.20", &["validate", "--crds", "testdata/example", f]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        lines(&o)[0],
        format!(
            "{f}:14: error: spec.pipeline[0].requirements: Invalid value: \"requirements\": unknown field: \"requirements\": step requirements are Crossplane v2's (checked against Crossplane v1.20.11's Composition API; for Crossplane v2, validate with --crossplane-version v2)"
        )
    );
}

/// `spec.environment`, which Crossplane v1.18 removed, is valid up to v1.17 and refused from
/// v1.18, saying which minor still has it; the environment patch types go with it.
#[test]
fn environment_is_refused_from_v1_18() {
    let dir = scratch("environment-v1-18");
    let file = dir.join("composition.yaml");
    let text = std::fs::read_to_string("testdata/example/composition.yaml")
        .expect("example")
        .replacen(
            "  resources:\n",
            "  environment:\n    environmentConfigs:\n    - type: Reference\n      ref:\n        name: example-environment\n  resources:\n",
            1,
        );
    let f = file.to_str().expect("UTF-8");
    let schemas = [
        "validate",
        "--crds",
        "testdata/crds",
        "--crds",
        "testdata/example/definition.yaml",
    ];
    std::fs::write(&file, &text).expect("write");
    for (version, release) in [
        ("v1.14", "v1.14.9"),
        ("v1.16", "v1.16.5"),
        ("v1.17", "v1.17.0"),
        ("v1", "v1.17.0"),
    ] {
        let o = run_at(version, &[&schemas[..], &[f]].concat());
        assert_eq!(o.status.code(), Some(0), "{version}: {}", stdout(&o));
        assert_eq!(
            summary(&o),
            format!(
                "1 Composition validated against 3 schemas and Crossplane {release}'s Composition API: 1 allowed, 0 denied"
            )
        );
    }
    for (version, release) in [
        ("v1.18", "v1.18.5"),
        ("v1.19", "v1.19.3"),
        ("v1.20", "v1.20.11"),
    ] {
        let o = run_at(version, &[&schemas[..], &[f]].concat());
        assert_eq!(o.status.code(), Some(1), "{version}: {}", stdout(&o));
        assert_eq!(
            lines(&o),
            [
                format!(
                    "{f}:12: error: spec.environment: Invalid value: \"environment\": unknown field: \"environment\": Crossplane v1.18 removed spec.environment: select EnvironmentConfigs with a function-environment-configs step in a pipeline (checked against Crossplane {release}'s Composition API; for Crossplane v1.17 or earlier, validate with --crossplane-version v1.17)"
                ),
                format!(
                    "{f}: Composition \"xnetworks.gcp.platformref.upbound.io\" (mode loose): denied (422 Invalid): 1 error, 0 warnings"
                ),
                format!(
                    "1 Composition validated against 3 schemas and Crossplane {release}'s Composition API: 0 allowed, 1 denied"
                ),
            ],
            "{version}"
        );
    }
    // An environment patch: refused by v1.18's patch type enum.
    let text = std::fs::read_to_string("testdata/example/composition.yaml")
        .expect("example")
        .replacen(
            "      patches:\n",
            "      patches:\n        - type: FromEnvironmentFieldPath\n          fromFieldPath: region\n          toFieldPath: metadata.labels[region]\n",
            1,
        );
    std::fs::write(&file, &text).expect("write");
    let o = run_at("v1.17", &[&schemas[..], &[f]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    let o = run_at("v1.18", &[&schemas[..], &[f]].concat());
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert_eq!(
        lines(&o)[0],
        format!(
            "{f}:21: error: spec.resources[0].patches[0].type: Unsupported value: \"FromEnvironmentFieldPath\": supported values: \"FromCompositeFieldPath\", \"PatchSet\", \"ToCompositeFieldPath\", \"CombineFromComposite\", \"CombineToComposite\""
        )
    );
}

/// What v1 minors added: the `Join` string transform (v1.15) is refused under v1.14's API, a
/// step's `credentials` (v1.16) under v1.15's; both say which minor has them.
#[test]
fn join_and_credentials_are_refused_before_their_minors() {
    let dir = scratch("v1-minors");
    let xrd = dir.join("definition.yaml");
    std::fs::write(
        &xrd,
        "apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata:
  name: xzones.example.org
spec:
  group: example.org
  names:
    kind: XZones
    plural: xzones
  versions:
  - name: v1alpha1
    served: true
    referenceable: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              zones:
                type: array
                items:
                  type: string
              ns:
                type: string
                default: default
",
    )
    .expect("write XRD");
    let join = dir.join("join.yaml");
    std::fs::write(
        &join,
        "apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: xzones.example.org
spec:
  compositeTypeRef:
    apiVersion: example.org/v1alpha1
    kind: XZones
  resources:
  - name: zones
    base:
      apiVersion: v1
      kind: ConfigMap
      data:
        region: us
    patches:
    - fromFieldPath: spec.zones
      toFieldPath: data.zones
      transforms:
      - type: string
        string:
          type: Join
          join:
            separator: \",\"
    - fromFieldPath: spec.ns
      toFieldPath: metadata.namespace
",
    )
    .expect("write");
    let (x, j) = (xrd.to_str().expect("UTF-8"), join.to_str().expect("UTF-8"));
    let o = run_at("v1.14", &["validate", "--crds", x, j]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert_eq!(
        lines(&o),
        [
            format!(
                "{j}:22: error: spec.resources[0].patches[0].transforms[0].string.type: Unsupported value: \"Join\": supported values: \"Format\", \"Convert\", \"TrimPrefix\", \"TrimSuffix\", \"Regexp\""
            ),
            format!(
                "{j}:23: error: spec.resources[0].patches[0].transforms[0].string.join: Invalid value: \"join\": unknown field: \"join\": the Join string transform is Crossplane v1.15's (checked against Crossplane v1.14.9's Composition API; for Crossplane v1.15 or later, validate with --crossplane-version v1.15)"
            ),
            format!(
                "{j}: Composition \"xzones.example.org\" (mode loose): denied (422 Invalid): 2 errors, 0 warnings"
            ),
            "1 Composition validated against 1 schema and Crossplane v1.14.9's Composition API: 0 allowed, 1 denied".to_string(),
        ]
    );
    for version in ["v1.15", "1.20.11", "v1"] {
        let o = run_at(version, &["validate", "--crds", x, j]);
        assert_eq!(o.status.code(), Some(0), "{version}: {}", stdout(&o));
    }

    let credentials = dir.join("credentials.yaml");
    std::fs::write(
        &credentials,
        "apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: with-credentials
spec:
  compositeTypeRef:
    apiVersion: example.org/v1alpha1
    kind: XZones
  mode: Pipeline
  pipeline:
  - step: ready
    functionRef:
      name: function-auto-ready
    credentials:
    - name: token
      source: Secret
      secretRef:
        namespace: crossplane-system
        name: token
",
    )
    .expect("write");
    let c = credentials.to_str().expect("UTF-8");
    let o = run_at("v1.15", &["validate", "--crds", x, c]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert_eq!(
        lines(&o)[0],
        format!(
            "{c}:14: error: spec.pipeline[0].credentials: Invalid value: \"credentials\": unknown field: \"credentials\": step credentials are Crossplane v1.16's (checked against Crossplane v1.15.6's Composition API; for Crossplane v1.16 or later, validate with --crossplane-version v1.16)"
        )
    );
    for version in ["v1.16", "v1.20", "v2.0"] {
        let o = run_at(version, &["validate", "--crds", x, c]);
        assert_eq!(o.status.code(), Some(0), "{version}: {}", stdout(&o));
    }
}

/// A minor without an embedded Composition API is never an error: a note on standard error
/// names the one used (the nearest minor of its major), as the summary line does. A given
/// Composition CRD decides without a note; another major is a usage error.
#[test]
fn unknown_minors_say_which_api_they_use() {
    let example = ["--crds", "testdata/crds", "testdata/example"];
    for (version, release, which) in [
        ("v1.13", "v1.14.9", "oldest"),
        ("1.21.0", "v1.20.11", "newest"),
        ("v2.9", "v2.3.4", "newest"),
    ] {
        let o = run_at(version, &[&["validate"][..], &example].concat());
        let minor = version
            .trim_start_matches('v')
            .split('.')
            .take(2)
            .collect::<Vec<_>>()
            .join(".");
        let major = &minor[..1];
        assert_eq!(
            stderr(&o),
            format!(
                "note: Crossplane v{minor}'s Composition API is not embedded: validating against Crossplane {release}'s, the {which} v{major} one embedded (give the Composition CRD of the Crossplane you run with --crds to follow it instead)\n"
            ),
            "{version}"
        );
        assert!(
            summary(&o).starts_with(&format!(
                "1 Composition validated against 3 schemas and Crossplane {release}'s Composition API: "
            )),
            "{version}: {}",
            stdout(&o)
        );
        // The example is a v1 Resources-mode Composition: v2's API refuses it.
        assert_eq!(
            o.status.code(),
            Some(if major == "1" { 0 } else { 1 }),
            "{version}"
        );
    }
    // The same note from audit and render, which read files as validate does.
    let o = run_at("v2.9", &[&["audit"][..], &example].concat());
    assert!(stderr(&o).starts_with("note: Crossplane v2.9's Composition API is not embedded"));
    let o = run_at(
        "v2.9",
        &[
            "render",
            "testdata/example/composition.yaml",
            "--crds",
            "testdata/crds",
        ],
    );
    assert!(stderr(&o).starts_with("note: Crossplane v2.9's Composition API is not embedded"));

    // A given Composition CRD decides: no note.
    let v1_crd = "crds/upstream/apiextensions.crossplane.io_compositions.yaml";
    let o = run_at(
        "v2.9",
        &[&["validate", "--crds", v1_crd][..], &example].concat(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert_eq!(stderr(&o), "");
    for bad in ["v3.0", "v2.x", "v2.3.4.5"] {
        let o = run_at(bad, &[&["validate"][..], &example].concat());
        assert_eq!(o.status.code(), Some(2), "{bad}");
        assert!(
            stderr(&o).contains(&format!("{bad:?} is not a Crossplane version")),
            "{bad}: {}",
            stderr(&o)
        );
    }
}

/// Every embedded minor is named by its release in the summary line.
#[test]
fn each_minor_names_its_release() {
    let example = ["--crds", "testdata/crds", "testdata/example"];
    for (version, release) in [
        ("v1.14", "v1.14.9"),
        ("v1.15", "v1.15.6"),
        ("v1.16", "v1.16.5"),
        ("v1.17.6", "v1.17.0"),
        ("v1.18", "v1.18.5"),
        ("v1.19", "v1.19.3"),
        ("v1.20", "v1.20.11"),
        ("v2.0", "v2.0.8"),
        ("v2.1", "v2.1.8"),
        ("v2.2", "v2.2.4"),
        ("v2.3", "v2.3.4"),
    ] {
        let o = run_at(
            version,
            &[&["validate", "--output", "json"][..], &example].concat(),
        );
        let v: Value = serde_json::from_slice(&o.stdout).expect("JSON");
        assert_eq!(
            v["compositionApi"],
            json!(format!("Crossplane {release}'s Composition API")),
            "{version}"
        );
        assert_eq!(stderr(&o), "", "{version}");
    }
}

/// An Inactive MRD (`testdata/mrap/`): a ManagedResourceActivationPolicy that activates it by
/// its exact name or by a wildcard, among `--crds` or beside the Composition, makes its kind
/// served (strict allows, exit 0), and a typo under it is reported alone. Without a policy,
/// or with one that matches other MRDs, the kind is refused as Inactive (strict: 403, exit
/// 1), the message saying which entries would activate it and what the policies there do.
#[test]
fn a_policy_activates_an_inactive_mrd() {
    let c = "testdata/mrap/composition.yaml";
    let typo = "testdata/mrap/typo.composition.yaml";
    let strict = |schemas: &[&str], inputs: &[&str]| {
        let mut args = vec![
            "validate",
            "--mode",
            "strict",
            "--crds",
            "testdata/v2/basic-namespaced.definition.yaml",
            "--crds",
            "testdata/mrap/bucket.mrd.yaml",
        ];
        for s in schemas {
            args.extend(["--crds", s]);
        }
        args.extend_from_slice(inputs);
        run(&args)
    };
    let summary = |allowed: usize, denied: usize| {
        format!(
            "{} Composition{} validated against 2 schemas and Crossplane v2.3.4's Composition API: {allowed} allowed, {denied} denied",
            allowed + denied,
            if allowed + denied == 1 { "" } else { "s" }
        )
    };
    let allowed = format!(
        r#"{c}: Composition "bucket-of-an-mrd" (mode strict): allowed: 0 errors, 0 warnings"#
    );
    for (schemas, inputs) in [
        (&["testdata/mrap/exact"][..], &[c][..]),
        (&["testdata/mrap/wildcard/policy.yaml"][..], &[c][..]),
        (&[][..], &["testdata/mrap/wildcard", c][..]),
    ] {
        let o = strict(schemas, inputs);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{schemas:?} {inputs:?}: {}",
            stderr(&o)
        );
        assert_eq!(lines(&o), [allowed.clone(), summary(1, 0)], "{schemas:?}");
        assert_eq!(stderr(&o), "");
    }
    // Activated: the typo is the one finding.
    let o = strict(&["testdata/mrap/exact"], &[typo]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        lines(&o),
        [
            format!(
                r#"{typo}:25: error: spec.pipeline[0].input.resources[0].base.spec.forProvider.regin: Invalid value: "regin": unknown field: "regin", did you mean "region"?"#
            ),
            format!(
                r#"{typo}: Composition "bucket-of-an-mrd-with-a-typo" (mode strict): denied (422 Invalid): 1 error, 0 warnings"#
            ),
            summary(0, 1),
        ]
    );

    let inactive = "spec.pipeline[0].input.resources[0].base: Not found: \"s3.aws.m.upbound.io/v1beta1, Kind=Bucket\": MRD buckets.s3.aws.m.upbound.io is Inactive: Bucket has no CRD until a ManagedResourceActivationPolicy activates it";
    let denied = format!(
        r#"{c}: Composition "bucket-of-an-mrd" (mode strict): denied (403 Forbidden): 1 error, 0 warnings"#
    );
    let o = strict(&[], &[c]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        lines(&o),
        [
            format!(
                r#"{c}:21: error: {inactive} (spec.activate: its name or "*.aws.m.upbound.io")"#
            ),
            denied.clone(),
            summary(0, 1),
        ]
    );
    let o = strict(&["testdata/mrap/other"], &[c]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        lines(&o),
        [
            format!(
                r#"{c}:21: error: {inactive}, and none does (gcp: spec.activate "*.gcp.upbound.io", "buckets.s3.aws.upbound.io"); add its name or "*.aws.m.upbound.io" to one's spec.activate"#
            ),
            denied,
            summary(0, 1),
        ]
    );
}

/// A v1 `spec.environment` under v2's Composition API is reported as moved, and nothing
/// inside it is judged (v2 has no field to default its `environmentConfigs[].type`; issue 47
/// part 7 found a spurious `type: Invalid value: ""` beside the move).
#[test]
fn a_v1_environment_under_v2_is_reported_as_moved_only() {
    let dir = scratch("environment-moved");
    let c = dir.join("composition.yaml");
    std::fs::write(
        &c,
        "apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: with-environment
spec:
  compositeTypeRef:
    apiVersion: example.org/v1alpha1
    kind: Test
  mode: Pipeline
  environment:
    environmentConfigs:
    - ref:
        name: example-environment
  pipeline:
  - step: ready
    functionRef:
      name: function-auto-ready
",
    )
    .expect("write");
    let c = c.to_str().expect("UTF-8");
    let xrd = "testdata/v2/basic-namespaced.definition.yaml";
    let o = run(&["validate", "--crds", xrd, c]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        lines(&o),
        [
            format!(
                "{c}:10: error: spec.environment: Invalid value: \"environment\": unknown field: \"environment\": Crossplane v2 Compositions have no spec.environment: select EnvironmentConfigs with a function-environment-configs step in the pipeline (checked against Crossplane v2.3.4's Composition API; for Crossplane v1, validate with --crossplane-version v1)"
            ),
            format!(
                "{c}: Composition \"with-environment\" (mode loose): denied (422 Invalid): 1 error, 0 warnings"
            ),
            "1 Composition validated against 1 schema and Crossplane v2.3.4's Composition API: 0 allowed, 1 denied".to_string(),
        ]
    );
    // Under v1's API the same file is valid: the CRD defaults `type` to `Reference`.
    assert_eq!(
        run_v1(&["validate", "--crds", xrd, c]).status.code(),
        Some(0)
    );
}

/// `render --xr` of an XR that is not the Composition's `compositeTypeRef` says so and
/// renders nothing (Crossplane selects a Composition by it; issue 47 part 7).
#[test]
fn render_of_an_xr_of_another_kind_says_so() {
    let dir = scratch("render-other-kind");
    let xr = dir.join("xr.yaml");
    std::fs::write(
        &xr,
        "apiVersion: example.org/v1alpha1
kind: XTest
metadata:
  name: my-xr
  namespace: default
spec:
  coolField: cool
",
    )
    .expect("write");
    let xr = xr.to_str().expect("UTF-8");
    let o = run(&[
        "render",
        "testdata/v2/bucket-composition.yaml",
        "--xr",
        xr,
        "--crds",
        "testdata/v2",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(stdout(&o), "");
    assert_eq!(
        stderr(&o),
        format!(
            "error: {xr}: the composite resource is \"example.org/v1alpha1\" kind \"XTest\", but Composition \"basic-composition-namespaced\" composes \"example.org/v1alpha1\" kind \"Test\" (spec.compositeTypeRef): Crossplane never renders it for this XR\n"
        )
    );
}

/// provider-kubernetes' Object CRD at 5263ca4838a2 (in the corpus), whose v1alpha1 is
/// `deprecated: true`: a base of that version is allowed in strict mode with the API
/// server's own warning at its `apiVersion`, with and without rendering; v1alpha2 has none.
#[test]
fn a_deprecated_version_is_a_warning_in_the_api_servers_words() {
    let crd = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(
        "../shared/corpus/crds/kubernetes.crossplane.io/provider-kubernetes@5263ca4838a2/kubernetes.crossplane.io_objects.yaml",
    );
    if !crd.is_file() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{} is missing",
            crd.display()
        );
        eprintln!("note: {} is absent: skipped", crd.display());
        return;
    }
    let dir = scratch("deprecated-version");
    let xrd = dir.join("xrd.yaml");
    std::fs::write(
        &xrd,
        "apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata:
  name: xnamespaces.example.org
spec:
  group: example.org
  names: {kind: XNamespace, plural: xnamespaces}
  versions:
  - name: v1alpha1
    served: true
    referenceable: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              name: {type: string}
",
    )
    .expect("write XRD");
    let composition = |version: &str| {
        format!(
            "apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: namespaces
spec:
  compositeTypeRef:
    apiVersion: example.org/v1alpha1
    kind: XNamespace
  resources:
  - name: namespace
    base:
      apiVersion: kubernetes.crossplane.io/{version}
      kind: Object
      spec:
        forProvider:
          manifest: {{apiVersion: v1, kind: Namespace}}
    patches:
    - fromFieldPath: spec.name
      toFieldPath: spec.forProvider.manifest.metadata.name
"
        )
    };
    let file = dir.join("composition.yaml");
    let f = file.to_str().expect("UTF-8 path");
    let args = |extra: &'static [&'static str]| {
        let mut a = vec![
            "validate",
            "--mode",
            "strict",
            "--crds",
            crd.to_str().expect("UTF-8 path"),
            "--crds",
            xrd.to_str().expect("UTF-8 path"),
        ];
        a.extend_from_slice(extra);
        a.push(f);
        a
    };
    std::fs::write(&file, composition("v1alpha1")).expect("write Composition");
    for extra in [&[][..], &["--no-render"][..]] {
        let o = run_v1(&args(extra));
        assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
        assert_eq!(
            lines(&o),
            [
                format!(
                    r#"{f}:12: warning: spec.resources[0].base.apiVersion: Invalid value: "kubernetes.crossplane.io/v1alpha1": kubernetes.crossplane.io/v1alpha1 Object is deprecated; use kubernetes.crossplane.io/v1alpha2 Object"#
                ),
                format!(
                    r#"{f}: Composition "namespaces" (mode strict): allowed: 0 errors, 1 warning"#
                ),
                "1 Composition validated against 2 schemas and Crossplane v1.17.0's Composition API: 1 allowed, 0 denied".to_string(),
            ]
        );
    }
    std::fs::write(&file, composition("v1alpha2")).expect("write Composition");
    let o = run_v1(&args(&[]));
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert_eq!(
        lines(&o)[0],
        format!(r#"{f}: Composition "namespaces" (mode strict): allowed: 0 errors, 0 warnings"#)
    );
}

/// A v2 XRD with `claimNames` (only `LegacyCluster` XRs have claims: the XRD CRD's CEL rule
/// in Crossplane v2.3.4) is an input error in Crossplane's words, and a Composition of its XR
/// is told that the XRD is invalid, not that nothing defines the kind (issue 47 part 5).
#[test]
fn a_composition_of_an_invalid_xrds_xr_says_the_xrd_is_invalid() {
    let dir = scratch("invalid-xrd");
    let xrd = dir.join("definition.yaml");
    std::fs::write(
        &xrd,
        "apiVersion: apiextensions.crossplane.io/v2
kind: CompositeResourceDefinition
metadata:
  name: tests.example.org
spec:
  scope: Namespaced
  group: example.org
  names:
    kind: Test
    plural: tests
  claimNames:
    kind: TestClaim
    plural: testclaims
  versions:
  - name: v1alpha1
    served: true
    referenceable: true
    schema:
      openAPIV3Schema:
        type: object
",
    )
    .expect("write");
    let x = xrd.to_str().expect("UTF-8");
    let c = "testdata/v2/bucket-composition.yaml";
    let o = run(&["validate", "--crds", x, "--crds", "testdata/v2/crds", c]);
    assert_eq!(o.status.code(), Some(2));
    let refused = format!(
        "{x}:5: CompositeResourceDefinition \"tests.example.org\": spec: Claims aren't supported in apiextensions.crossplane.io/v2"
    );
    assert_eq!(stderr(&o), format!("error: {refused}\n"));
    assert_eq!(
        lines(&o)[0],
        format!(
            "{c}:9: warning: spec.compositeTypeRef: Not found: \"example.org/v1alpha1, Kind=Test\": the XRD that defines it is invalid: {}; checks that need the schema of the composite resource were skipped",
            refused.replacen(":5:", ":", 1)
        )
    );
}
