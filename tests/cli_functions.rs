//! `validate --functions` and `render --functions` as a user runs them: pipeline steps
//! recognised by their Function's package, a step naming no Function (a warning in loose
//! mode, an error in strict), an input sent to the wrong function, and bad `--functions`
//! files.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_composition-webhook"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .env_remove("COMPOSITION_WEBHOOK_MODE")
        .env_remove("COMPOSITION_WEBHOOK_CROSSPLANE_VERSION")
        .env_remove("COMPOSITION_WEBHOOK_FUNCTIONS")
        .output()
        .expect("run the binary")
}

fn lines(o: &Output) -> Vec<String> {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A scratch directory under the target dir, unique per test.
fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    path.to_str().expect("UTF-8 path").to_string()
}

/// Function manifests: `pt` (function-patch-and-transform), `ready` (function-auto-ready,
/// under Upbound's registry), `templates` (function-go-templating, pinned by digest, an
/// older apiVersion).
const FUNCTIONS: &str = "\
apiVersion: pkg.crossplane.io/v1
kind: Function
metadata:
  name: pt
spec:
  package: xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform:v0.10.8
---
apiVersion: pkg.crossplane.io/v1
kind: Function
metadata:
  name: ready
spec:
  package: xpkg.upbound.io/upbound/function-auto-ready:v0.2.1
---
apiVersion: pkg.crossplane.io/v1beta1
kind: Function
metadata:
  name: templates
spec:
  package: xpkg.crossplane.io/crossplane-contrib/function-go-templating:v0.9.0@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
";

const GO_TEMPLATING: &str = "xpkg.crossplane.io/crossplane-contrib/function-go-templating:v0.9.0@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// testdata/v2/bucket-composition.yaml's pipeline, its step naming `function` and its base
/// with the unknown field `regio` (a rendered error), then `more` steps.
fn composition(function: &str, more: &str) -> String {
    format!(
        "\
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: buckets
spec:
  compositeTypeRef:
    apiVersion: example.org/v1alpha1
    kind: Test
  mode: Pipeline
  pipeline:
  - step: patch-and-transform
    functionRef:
      name: {function}
    input:
      apiVersion: pt.fn.crossplane.io/v1beta1
      kind: Resources
      resources:
      - name: bucket
        base:
          apiVersion: s3.aws.m.upbound.io/v1beta1
          kind: Bucket
          spec:
            forProvider:
              region: us-east-2
              regio: typo
{more}"
    )
}

const READY_STEP: &str = "  - step: ready\n    functionRef:\n      name: ready\n";

const TEMPLATES_STEP: &str = "  - step: templates\n    functionRef:\n      name: templates\n";

const REGIO: &str = "spec.pipeline[0].input.resources[0].base.spec.forProvider.regio: Invalid value: \"regio\": unknown field: \"regio\", did you mean \"region\"?";

/// Validates `composition` (in `dir`) against testdata/v2's schemas with `flags`.
fn validate(dir: &Path, composition: &str, flags: &[&str]) -> (Output, String) {
    let file = write(dir, "composition.yaml", composition);
    let mut args = vec!["validate", "--crds", "testdata/v2"];
    args.extend_from_slice(flags);
    args.push(&file);
    (run(&args), file)
}

#[test]
fn a_function_named_by_its_package_is_recognised_by_it_and_keeps_errors_errors() {
    let dir = scratch("functions-renamed");
    let functions = write(&dir, "functions.yaml", FUNCTIONS);
    let c = composition("pt", READY_STEP);
    // By name, `ready` is a function whose effect is not known: the error is a warning.
    let (o, f) = validate(&dir, &c, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        lines(&o),
        [
            format!("{f}:25: warning: {REGIO}"),
            format!("{f}:26: warning: spec.pipeline[1]: Not rendered: function \"ready\" (step \"ready\"): recognised by its name as none whose effect is known, what it does to composed resources cannot be known without running it, so only the patch-and-transform steps were rendered, and rendered findings of the steps before it are warnings"),
            format!("{f}: Composition \"buckets\" (mode loose): allowed: 0 errors, 2 warnings"),
            "1 Composition validated against 8 schemas and Crossplane v2.3.4's Composition API: 1 allowed, 0 denied".to_string(),
        ]
    );
    // By its package, `ready` is function-auto-ready: it changes no composed resource.
    let (o, f) = validate(&dir, &c, &["--functions", &functions]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(
        lines(&o),
        [
            format!("{f}:25: error: {REGIO}"),
            format!("{f}: Composition \"buckets\" (mode loose): denied (422 Invalid): 1 error, 0 warnings"),
            "1 Composition validated against 8 schemas and Crossplane v2.3.4's Composition API: 0 allowed, 1 denied".to_string(),
        ]
    );
    assert_eq!(stderr(&o), "");
}

#[test]
fn a_step_naming_no_function_is_a_warning_in_loose_mode_and_an_error_in_strict() {
    let dir = scratch("functions-missing");
    let functions = write(&dir, "functions.yaml", FUNCTIONS);
    let c = composition("function-patch-and-transform", "");
    let missing = "spec.pipeline[0].functionRef.name: Not found: \"function-patch-and-transform\": Crossplane cannot run the pipeline until a Function of this name is installed; did you mean \"pt\"?";
    let summary =
        "1 Composition validated against 8 schemas and Crossplane v2.3.4's Composition API";
    let (o, f) = validate(&dir, &c, &["--functions", &functions, "--mode", "warn"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        lines(&o),
        [
            format!("{f}:13: warning: {missing}"),
            format!("{f}:25: warning: {REGIO}"),
            format!("{f}: Composition \"buckets\" (mode warn): allowed: 0 errors, 2 warnings"),
            format!("{summary}: 1 allowed, 0 denied"),
        ]
    );
    let (o, f) = validate(&dir, &c, &["--functions", &functions, "--mode", "loose"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(
        lines(&o),
        [
            format!("{f}:13: warning: {missing}"),
            format!("{f}:25: error: {REGIO}"),
            format!(
                "{f}: Composition \"buckets\" (mode loose): denied (422 Invalid): 1 error, 1 warning"
            ),
            format!("{summary}: 0 allowed, 1 denied"),
        ]
    );
    let (o, f) = validate(&dir, &c, &["--functions", &functions, "--mode", "strict"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(
        lines(&o),
        [
            format!("{f}:13: error: {missing}"),
            format!("{f}:25: error: {REGIO}"),
            format!(
                "{f}: Composition \"buckets\" (mode strict): denied (403 Forbidden): 2 errors, 0 warnings"
            ),
            format!("{summary}: 0 allowed, 1 denied"),
        ]
    );
    // Without --functions nothing is known to be missing.
    let (o, f) = validate(&dir, &c, &["--mode", "strict"]);
    assert_eq!(
        lines(&o),
        [
            format!("{f}:25: error: {REGIO}"),
            format!(
                "{f}: Composition \"buckets\" (mode strict): denied (422 Invalid): 1 error, 0 warnings"
            ),
            format!("{summary}: 0 allowed, 1 denied"),
        ]
    );
}

#[test]
fn a_function_recognised_by_its_package_is_named_with_it_in_the_note() {
    let dir = scratch("functions-note");
    let functions = write(&dir, "functions.yaml", FUNCTIONS);
    let c = composition("pt", TEMPLATES_STEP);
    let (o, f) = validate(&dir, &c, &["--functions", &functions]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        lines(&o),
        [
            format!("{f}:25: warning: {REGIO}"),
            format!("{f}:26: warning: spec.pipeline[1]: Not rendered: function \"templates\" (step \"templates\", function-go-templating from package {GO_TEMPLATING}): none whose effect is known, what it does to composed resources cannot be known without running it, so only the patch-and-transform steps were rendered, and rendered findings of the steps before it are warnings"),
            format!("{f}: Composition \"buckets\" (mode loose): allowed: 0 errors, 2 warnings"),
            "1 Composition validated against 8 schemas and Crossplane v2.3.4's Composition API: 1 allowed, 0 denied".to_string(),
        ]
    );
}

/// The Functions' packages decide: function-patch-and-transform's input sent to
/// function-go-templating is never composed (the function fails, "source is required"): an
/// error in strict and loose, a warning in warn.
#[test]
fn a_patch_and_transform_input_sent_to_another_function_is_an_error() {
    let dir = scratch("functions-wrong");
    let functions = write(&dir, "functions.yaml", FUNCTIONS);
    let c = composition("templates", "").replace("regio: typo", "tags: {}");
    let finding = "spec.pipeline[0].functionRef.name: Invalid value: \"templates\": the input is function-patch-and-transform's (pt.fn.crossplane.io Resources), but this Function's package is function-go-templating, which does not read it";
    for (mode, code, severity, verdict) in [
        (
            "strict",
            1,
            "error",
            "denied (422 Invalid): 1 error, 0 warnings",
        ),
        (
            "loose",
            1,
            "error",
            "denied (422 Invalid): 1 error, 0 warnings",
        ),
        ("warn", 0, "warning", "allowed: 0 errors, 1 warning"),
    ] {
        let (o, f) = validate(&dir, &c, &["--functions", &functions, "--mode", mode]);
        assert_eq!(o.status.code(), Some(code), "{mode}: {}", stderr(&o));
        let (allowed, denied) = if code == 0 { (1, 0) } else { (0, 1) };
        assert_eq!(
            lines(&o),
            [
                format!("{f}:13: {severity}: {finding}"),
                format!("{f}: Composition \"buckets\" (mode {mode}): {verdict}"),
                format!(
                    "1 Composition validated against 8 schemas and Crossplane v2.3.4's Composition API: {allowed} allowed, {denied} denied"
                ),
            ],
            "{mode}"
        );
    }
}

#[test]
fn functions_come_from_directories_and_lists_and_bad_files_are_input_errors() {
    let dir = scratch("functions-files");
    let fns = dir.join("fns");
    std::fs::create_dir_all(&fns).expect("dir");
    // `kubectl get functions -o yaml` prints a List; other kinds are skipped.
    write(
        &fns,
        "list.yaml",
        "apiVersion: v1
kind: List
items:
- apiVersion: pkg.crossplane.io/v1
  kind: Function
  metadata: {name: pt}
  spec: {package: xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform:v0.10.8}
- apiVersion: pkg.crossplane.io/v1
  kind: Provider
  metadata: {name: provider-aws-s3}
  spec: {package: xpkg.upbound.io/upbound/provider-aws-s3:v2.0.0}
",
    );
    let c = composition("pt", "").replace("regio: typo", "tags: {}");
    let (o, _) = validate(&dir, &c, &["--functions", fns.to_str().expect("UTF-8")]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));

    let empty = write(
        &dir,
        "providers.yaml",
        "apiVersion: pkg.crossplane.io/v1\nkind: Provider\nmetadata: {name: p}\nspec: {package: x.io/p:v1}\n",
    );
    let (o, _) = validate(&dir, &c, &["--functions", &empty]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o),
        format!("error: {empty}: no Function (pkg.crossplane.io) found in the --functions files\n")
    );

    let bad = write(
        &dir,
        "bad.yaml",
        "apiVersion: pkg.crossplane.io/v1\nkind: Function\nmetadata:\n  name: pt\nspec:\n  package: \"\"\n",
    );
    let (o, _) = validate(&dir, &c, &["--functions", &bad]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o),
        format!(
            "error: {bad}:6: Function: spec.package: a Function needs it (a non-empty string)\n"
        )
    );
}

#[test]
fn render_recognises_steps_by_their_functions_packages() {
    let dir = scratch("functions-render");
    let functions = write(&dir, "functions.yaml", FUNCTIONS);
    let file = write(&dir, "composition.yaml", &composition("pt", READY_STEP));
    let args = ["render", "--crds", "testdata/v2", &file];
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("function \"ready\" (step \"ready\"): recognised by its name"),
        "{}",
        stderr(&o)
    );
    let o = run(&[&args[..], &["--functions", &functions]].concat());
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(stderr(&o), format!("error: {REGIO}\n"));
}

#[test]
fn serve_takes_functions_only_with_crds() {
    let o = run(&[
        "serve",
        "--functions",
        "functions.yaml",
        "--self-signed",
        "--address",
        "127.0.0.1:0",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o),
        "error: --functions needs --crds: without --crds the Functions come from the cluster\n"
    );
}
