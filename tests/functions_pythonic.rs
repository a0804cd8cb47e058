//! Pipeline steps run by a real third-party function: function-pythonic 0.6.3 (PyPI
//! `crossplane-function-pythonic`), installed by `scripts/function-pythonic.sh` and started
//! on loopback with `--insecure`, as `crossplane render` starts functions. What it composes
//! is validated by `validate`, `render` and `serve` as patch-and-transform's resources are,
//! each finding at the step's resource (`spec.pipeline[0].resources[deployment]`).
//!
//! The Compositions are in `testdata/functions/pythonic/`: the App of Crossplane v2's "Get
//! started with composition" (a Deployment and a Service, which the docs compose with
//! function-python) written for pythonic, and variants with one mistake each.

#[path = "functions/launch.rs"]
mod launch;
mod webhook;

use std::path::Path;
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::{Value, json};

const DIR: &str = "testdata/functions/pythonic";

/// The test process's function-pythonic (`host:port`). It is started by a thread that
/// never ends, since `PR_SET_PDEATHSIG` kills it when the thread that started it ends:
/// then it ends with the test process.
fn pythonic() -> String {
    static SHARED: OnceLock<String> = OnceLock::new();
    SHARED
        .get_or_init(|| {
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let function = launch::start_pythonic("function-pythonic", &["--insecure"]);
                let _ = tx.send(function.address.to_string());
                loop {
                    std::thread::park();
                }
            });
            rx.recv().expect("function-pythonic started")
        })
        .clone()
}

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_composition-webhook"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .env_remove("COMPOSITION_WEBHOOK_MODE")
        .env_remove("COMPOSITION_WEBHOOK_FUNCTION_ADDRESSES")
        .output()
        .expect("run the binary")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `validate` of `files` (in [`DIR`]) with both XRDs and the function at `address`.
fn validate_at(address: &str, files: &[&str], extra: &[&str]) -> Output {
    let mut args = vec![
        "validate".to_string(),
        "--crds".into(),
        format!("{DIR}/xrd.yaml"),
        "--crds".into(),
        format!("{DIR}/cluster-xrd.yaml"),
        "--function-address".into(),
        format!("function-pythonic={address}"),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    args.extend(files.iter().map(|f| format!("{DIR}/{f}")));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run(&args)
}

fn validate(files: &[&str]) -> Output {
    validate_at(&pythonic(), files, &[])
}

#[test]
fn the_getting_started_app_composes_a_valid_deployment_and_service() {
    let out = validate(&["app.yaml"]);
    assert_eq!(
        stdout(&out),
        format!(
            "{DIR}/app.yaml: Composition \"app-pythonic\" (mode loose): allowed: 0 errors, 0 warnings\n\
             1 Composition validated against 2 schemas and Crossplane v2.3.4's Composition API: 1 allowed, 0 denied\n"
        )
    );
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn a_typo_a_wrong_type_a_missing_field_and_a_missing_namespace_are_errors_of_the_step() {
    let step =
        "composed by function \"function-pythonic\" in step \"create-deployment-and-service\"";
    let cases = [
        (
            "invalid/app-typo.yaml",
            "app-typo",
            format!(
                "12: error: spec.pipeline[0].resources[deployment].spec.replica: Invalid value: \"replica\": unknown field: \"replica\", did you mean \"replicas\"? ({step})"
            ),
        ),
        (
            "invalid/app-wrong-type.yaml",
            "app-wrong-type",
            format!(
                "12: error: spec.pipeline[0].resources[deployment].spec.template.spec.containers[0].ports[0].containerPort: Invalid value: \"string\": spec.template.spec.containers[0].ports[0].containerPort in body must be of type integer: \"string\" ({step})"
            ),
        ),
        (
            "invalid/app-missing-name.yaml",
            "app-missing-name",
            format!(
                "12: error: spec.pipeline[0].resources[deployment].spec.template.spec.containers[0].name: Required value: {step}"
            ),
        ),
        (
            "invalid/settings-no-namespace.yaml",
            "settings-no-namespace",
            "13: error: spec.pipeline[0].resources[config].metadata.namespace: Required value: composed by function \"function-pythonic\" in step \"config\"".to_string(),
        ),
    ];
    for (file, name, finding) in cases {
        let out = validate(&[file]);
        assert_eq!(
            stdout(&out),
            format!(
                "{DIR}/{file}:{finding}\n\
                 {DIR}/{file}: Composition \"{name}\" (mode loose): denied (422 Invalid): 1 error, 0 warnings\n\
                 1 Composition validated against 2 schemas and Crossplane v2.3.4's Composition API: 0 allowed, 1 denied\n"
            ),
            "{file}"
        );
        assert_eq!(out.status.code(), Some(1), "{file}");
    }
}

#[test]
fn a_value_only_the_mock_holds_is_a_warning_and_one_the_function_writes_an_error() {
    let out = validate(&["settings-service-type.yaml"]);
    let step = "composed by function \"function-pythonic\" in step \"service\"";
    let file = format!("{DIR}/settings-service-type.yaml");
    assert_eq!(
        stdout(&out),
        format!(
            "{file}:14: error: spec.pipeline[0].resources[service].spec.ports[0].protocol: Unsupported value: \"HTTP\": supported values: \"SCTP\", \"TCP\", \"UDP\" ({step})\n\
             {file}:14: warning: spec.pipeline[0].resources[service].spec.type: Unsupported value: \"color\": supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\" (the value is the mock composite resource's spec.color: a real one may hold another) ({step})\n\
             {file}: Composition \"settings-service-type\" (mode loose): denied (422 Invalid): 1 error, 1 warning\n\
             1 Composition validated against 2 schemas and Crossplane v2.3.4's Composition API: 0 allowed, 1 denied\n"
        )
    );
}

#[test]
fn a_development_annotation_calls_the_function_as_the_flag_does() {
    let dir = webhook::ScratchDir::new("functions-development");
    let manifest = dir.path("functions.yaml");
    std::fs::write(
        &manifest,
        format!(
            "apiVersion: pkg.crossplane.io/v1\nkind: Function\nmetadata:\n  name: function-pythonic\n  annotations:\n    render.crossplane.io/runtime: Development\n    render.crossplane.io/runtime-development-target: {}\nspec:\n  package: xpkg.upbound.io/crossplane-contrib/function-pythonic:v0.6.3\n",
            pythonic()
        ),
    )
    .expect("write the manifest");
    let out = run(&[
        "validate",
        "--crds",
        &format!("{DIR}/xrd.yaml"),
        "--functions",
        &manifest.display().to_string(),
        &format!("{DIR}/invalid/app-typo.yaml"),
    ]);
    let text = stdout(&out);
    assert!(
        text.contains("spec.pipeline[0].resources[deployment].spec.replica: Invalid value: \"replica\": unknown field"),
        "{text}"
    );
    assert_eq!(out.status.code(), Some(1), "{text}");
}

#[test]
fn a_function_that_cannot_be_reached_is_a_warning_in_loose_mode_and_an_error_in_strict() {
    // Nothing listens on port 1 of loopback: connection refused.
    let unreachable = "127.0.0.1:1";
    let detail = "spec.pipeline[0]: Not found: function \"function-pythonic\" (step \"create-deployment-and-service\") could not be run at 127.0.0.1:1: function function-pythonic is unreachable: tcp connect error: transport error: Connection refused (os error 111); what it composes is not validated";
    let file = format!("{DIR}/invalid/app-typo.yaml");
    let loose = validate_at(unreachable, &["invalid/app-typo.yaml"], &[]);
    assert_eq!(
        stdout(&loose).lines().take(2).collect::<Vec<_>>(),
        [
            format!("{file}:12: warning: {detail}"),
            format!("{file}: Composition \"app-typo\" (mode loose): allowed: 0 errors, 1 warning"),
        ]
    );
    assert_eq!(loose.status.code(), Some(0));
    let strict = validate_at(
        unreachable,
        &["invalid/app-typo.yaml"],
        &["--mode", "strict"],
    );
    assert_eq!(
        stdout(&strict).lines().take(2).collect::<Vec<_>>(),
        [
            format!("{file}:12: error: {detail}"),
            format!(
                "{file}: Composition \"app-typo\" (mode strict): denied (403 Forbidden): 1 error, 0 warnings"
            ),
        ]
    );
    assert_eq!(strict.status.code(), Some(1));
}

#[test]
fn render_prints_what_the_function_answered_and_composed() {
    let address = pythonic();
    let out = run(&[
        "render",
        "--crds",
        &format!("{DIR}/xrd.yaml"),
        "--function-address",
        &format!("function-pythonic={address}"),
        "--steps",
        "--output",
        "json",
        &format!("{DIR}/app.yaml"),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let resources = v["resources"].as_array().expect("resources");
    let names: Vec<&str> = resources
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert_eq!(names, ["deployment", "service"]);
    let deployment = &resources[0];
    assert_eq!(
        deployment["composedBy"],
        json!({"step": "create-deployment-and-service", "function": "function-pythonic"})
    );
    // Crossplane's metadata on what the function composed, in the XR's namespace.
    let meta = &deployment["object"]["metadata"];
    assert_eq!(meta["namespace"], "default");
    assert_eq!(meta["generateName"], "app-mock-");
    assert_eq!(
        meta["annotations"]["crossplane.io/composition-resource-name"],
        "deployment"
    );
    assert_eq!(meta["labels"]["example.crossplane.io/app"], "app-mock");
    assert_eq!(deployment["object"]["spec"]["replicas"], 2);
    let steps = v["functions"].as_array().expect("function steps");
    assert_eq!(steps.len(), 1);
    assert_eq!(steps[0]["step"], "create-deployment-and-service");
    assert_eq!(steps[0]["address"], address.as_str());
    assert_eq!(
        steps[0]["answer"]["desired"]["resources"]["service"]["spec"]["ports"][0]["port"],
        8080
    );
    assert_eq!(v["findings"], json!([]));
}

fn composition(file: &str) -> Value {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(DIR).join(file))
        .expect("read the Composition");
    serde_saphyr::from_str(&text).expect("YAML")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_validates_what_the_function_composes_and_can_be_told_not_to_call_it() {
    let address = pythonic();
    let xrd = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(DIR)
        .join("xrd.yaml");
    let flag = format!("function-pythonic={address}");
    let server = webhook::Server::start(&[&xrd], &["--function-address", &flag]);
    let client = server.client();
    let review =
        |uid: &str, file: &str| webhook::composition_review("v1", uid, "CREATE", composition(file));
    let good = client.review(&review("uid-good", "app.yaml")).await;
    assert_eq!(good["allowed"], true, "{good}");
    let bad = client
        .review(&review("uid-typo", "invalid/app-typo.yaml"))
        .await;
    assert_eq!(bad["allowed"], false, "{bad}");
    let message = bad["status"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("spec.pipeline[0].resources[deployment].spec.replica: Invalid value: \"replica\": unknown field: \"replica\", did you mean \"replicas\"? (composed by function \"function-pythonic\" in step \"create-deployment-and-service\")"),
        "{message}"
    );
    // Asked again, the function is called again (no verdict of a function is kept).
    let again = client
        .review(&review("uid-typo-2", "invalid/app-typo.yaml"))
        .await;
    assert_eq!(again["allowed"], false, "{again}");

    let off = webhook::Server::start(
        &[&xrd],
        &["--function-address", &flag, "--function-calls", "off"],
    );
    let unrendered = off
        .client()
        .review(&review("uid-off", "invalid/app-typo.yaml"))
        .await;
    assert_eq!(unrendered["allowed"], true, "{unrendered}");
    let warnings = unrendered["warnings"].to_string();
    assert!(
        warnings.contains("no composed resource was validated"),
        "{warnings}"
    );
}

#[test]
fn a_step_requiring_an_environment_config_gets_it_from_the_files_given() {
    let file = format!("{DIR}/settings-environment.yaml");
    let env = format!("{DIR}/environment.yaml");
    let given = validate_at(
        &pythonic(),
        &["settings-environment.yaml"],
        &["--required-resources", &env],
    );
    assert_eq!(
        stdout(&given).lines().next(),
        Some(format!(
            "{file}:14: error: spec.pipeline[0].resources[config].data.replicas: Invalid value: \"integer\": data.replicas in body must be of type string: \"integer\" (composed by function \"function-pythonic\" in step \"environment\")"
        ).as_str()),
        "{}",
        stdout(&given)
    );
    // Without it the step composes nothing it can be judged by, and says what it lacked.
    let missing = validate(&["settings-environment.yaml"]);
    assert_eq!(
        stdout(&missing).lines().take(2).collect::<Vec<_>>(),
        [
            format!(
                "{file}:14: warning: spec.pipeline[0]: Not rendered: function \"function-pythonic\" (step \"environment\") asked for what this tool could not answer (env (apiextensions.crossplane.io/v1beta1 EnvironmentConfig): no apiextensions.crossplane.io/v1beta1 EnvironmentConfig was given with --required-resources): what it composed may depend on it, so its findings are warnings"
            ),
            format!(
                "{file}: Composition \"settings-environment\" (mode loose): allowed: 0 errors, 1 warning"
            ),
        ]
    );
}

#[test]
fn a_step_requiring_a_schema_gets_the_one_the_validation_uses() {
    let out = run(&[
        "render",
        "--crds",
        &format!("{DIR}/cluster-xrd.yaml"),
        "--function-address",
        &format!("function-pythonic={}", pythonic()),
        "--output",
        "json",
        &format!("{DIR}/settings-schema.yaml"),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    // Kubernetes v1.28.4's Deployment, embedded: its spec.replicas is an integer.
    assert_eq!(
        v["resources"][0]["object"]["data"],
        json!({"replicas": "integer"})
    );
    assert_eq!(
        v["functions"][0]["outcome"],
        json!({"answered": {"calls": 2}})
    );
    assert_eq!(v["findings"], json!([]));
}

#[test]
fn an_observed_resource_keeps_its_name_and_an_unnamed_one_is_refused() {
    let render = |observed: &str| {
        run(&[
            "render",
            "--crds",
            &format!("{DIR}/xrd.yaml"),
            "--function-address",
            &format!("function-pythonic={}", pythonic()),
            "--observed-resources",
            observed,
            "--output",
            "json",
            &format!("{DIR}/app.yaml"),
        ])
    };
    let out = render(&format!("{DIR}/observed.yaml"));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let meta = |i: usize| v["resources"][i]["object"]["metadata"].clone();
    assert_eq!(meta(0)["name"], "app-mock-7f3a1");
    assert_eq!(meta(1)["name"], Value::Null);
    assert_eq!(meta(1)["generateName"], "app-mock-");
    // Crossplane refuses a composed resource without its name annotation.
    let out = render(&format!("{DIR}/xrd.yaml"));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("an observed resource needs the annotation crossplane.io/composition-resource-name naming it"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
