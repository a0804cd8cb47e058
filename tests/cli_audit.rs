//! `composition-webhook audit` as a user runs it: on files (exact text and JSON, exit
//! statuses), and on a cluster, the in-process fake API server (`tests/kubeapi`): a CRD that
//! loses a field a Composition patches denies it, restoring the field allows it again,
//! Compositions are listed a page of 100 at a time, and a refused list is exit status 2 with
//! the API server's answer.

mod kubeapi;
mod webhook;

use std::process::{Command, Output};

use kubeapi::{FakeApiServer, Resource, Verb};
use serde_json::{Value, json};
use webhook::{ScratchDir, project_dir, yaml_documents};

/// The binary, its environment cleared of the variables that would change the answer.
fn command(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_composition-webhook"));
    c.current_dir(env!("CARGO_MANIFEST_DIR")).args(args);
    for var in [
        "COMPOSITION_WEBHOOK_MODE",
        "COMPOSITION_WEBHOOK_OUTPUT",
        "COMPOSITION_WEBHOOK_CROSSPLANE_VERSION",
        "COMPOSITION_WEBHOOK_CRDS",
        "COMPOSITION_WEBHOOK_FUNCTIONS",
        "COMPOSITION_WEBHOOK_KUBECONFIG",
        "COMPOSITION_WEBHOOK_NO_RENDER",
        "KUBECONFIG",
    ] {
        c.env_remove(var);
    }
    c
}

/// Runs the binary to its end; on a tokio worker, without blocking the fake API server.
fn run(args: &[&str]) -> Output {
    tokio::task::block_in_place(|| command(args).output().expect("run the binary"))
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

const EXAMPLE: &str = "testdata/example/composition.yaml";
const INVALID: &str = "testdata/invalid/composition.yaml";

// ---------------------------------------------------------------------------------------
// Files

fn audit_files(output: &str) -> Output {
    command(&[
        "audit",
        "--crossplane-version",
        "v1",
        "--crds",
        "testdata/crds",
        "--crds",
        "testdata/example/definition.yaml",
        "--output",
        output,
        EXAMPLE,
        INVALID,
    ])
    .output()
    .expect("run the binary")
}

#[test]
fn files_text() {
    let o = audit_files("text");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let f = INVALID;
    assert_eq!(
        lines(&o),
        [
            format!(r#"{EXAMPLE}: Composition "xnetworks.gcp.platformref.upbound.io" (mode loose): allowed: 0 errors, 0 warnings"#),
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
            "2 Compositions audited against files (3 schemas and Crossplane v1.17.0's Composition API): 1 allowed, 1 denied; 10 errors, 0 warnings in 1 Composition".to_string(),
        ]
    );
    assert_eq!(stderr(&o), "");
}

#[test]
fn files_json() {
    let o = audit_files("json");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).expect("one JSON object");
    let denied = &v["compositions"][1];
    assert_eq!(
        denied["findings"][0],
        json!({"severity": "error", "stage": "logical", "type": "Invalid",
               "field": "spec.resources[0].patches[0].patchSetName",
               "message": r#"spec.resources[0].patches[0].patchSetName: Invalid value: "comon": patchSetName must be the name of a declared patchSet"#,
               "line": 25, "column": 11})
    );
    let mut shape = v.clone();
    shape["compositions"][1]["findings"] = json!(denied["findings"].as_array().map(Vec::len));
    assert_eq!(
        shape,
        json!({
            "source": "files",
            "compositionApi": "Crossplane v1.17.0's Composition API",
            "compositions": [
                {"name": "xnetworks.gcp.platformref.upbound.io", "file": EXAMPLE,
                 "resourceVersion": null, "mode": "loose", "allowed": true, "code": null,
                 "errors": 0, "warnings": 0, "findings": []},
                {"name": "xnetworks-broken.gcp.platformref.upbound.io", "file": INVALID,
                 "resourceVersion": null, "mode": "loose", "allowed": false, "code": 422,
                 "errors": 10, "warnings": 0, "findings": 10},
            ],
            "summary": {"compositions": 2, "allowed": 1, "denied": 1, "errors": 10,
                        "warnings": 0, "withFindings": 1},
        })
    );
}

#[test]
fn files_allowed_and_input_errors() {
    let o = command(&[
        "audit",
        "--crossplane-version",
        "v1",
        "--crds",
        "testdata/crds",
        "testdata/example",
    ])
    .output()
    .expect("run");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        lines(&o).last().map(String::as_str),
        Some(
            "1 Composition audited against files (3 schemas and Crossplane v1.17.0's Composition API): 1 allowed, 0 denied; no findings"
        )
    );
    let o = command(&[
        "audit",
        "testdata/cli/syntax-error.yaml",
        "testdata/example",
    ])
    .output()
    .expect("run");
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o),
        "error: testdata/cli/syntax-error.yaml:11:5: illegal placement of ':' indicator\n"
    );
    let o = command(&["audit", "testdata/crds"]).output().expect("run");
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o),
        "error: no Composition (apiextensions.crossplane.io/v1) found in testdata/crds\n"
    );
}

#[test]
fn schema_files_without_files_to_audit_are_a_usage_error() {
    let o = command(&["audit", "--crds", "testdata/crds"])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o),
        "error: --crds and --functions are for auditing files (FILE_OR_DIR): the cluster's Compositions are audited against the cluster's own schemas and Functions\n"
    );
}

// ---------------------------------------------------------------------------------------
// The cluster

fn one(path: &str) -> Value {
    yaml_documents(&project_dir().join(path))
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("a document in {path}"))
}

/// The namespaced S3 Bucket CRD of provider-upjet-aws v2.
fn bucket_crd() -> Value {
    one("testdata/v2/crds/s3.aws.m.upbound.io_buckets.yaml")
}

/// The same CRD without `spec.forProvider.tags`: a provider upgrade that removed it.
fn bucket_crd_without_tags() -> Value {
    let mut crd = bucket_crd();
    let for_provider = crd
        .pointer_mut("/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/forProvider/properties")
        .and_then(Value::as_object_mut)
        .expect("forProvider's properties");
    assert!(for_provider.remove("tags").is_some());
    crd
}

/// testdata/v2/bucket-composition.yaml named `name`, with `patches`.
fn composition(name: &str, patches: Value) -> Value {
    let mut c = one("testdata/v2/bucket-composition.yaml");
    c["metadata"]["name"] = json!(name);
    c["spec"]["pipeline"][0]["input"]["resources"][0]["patches"] = patches;
    c
}

/// A Composition that patches the XR's `spec.coolField` into the Bucket's tags.
fn tagging(name: &str) -> Value {
    composition(
        name,
        json!([{"fromFieldPath": "spec.coolField", "toFieldPath": "spec.forProvider.tags[cool]"}]),
    )
}

/// The fake API server with testdata/v2's XRD, the Bucket CRD, the patch-and-transform
/// Function and a kubeconfig for it.
struct Cluster {
    api: FakeApiServer,
    dir: ScratchDir,
}

impl Cluster {
    async fn start() -> Cluster {
        let api = FakeApiServer::start().await;
        let dir = ScratchDir::new("cli-audit");
        api.write_kubeconfig(&dir.path("kubeconfig"));
        let mut xrd = one("testdata/v2/basic-namespaced.definition.yaml");
        xrd["apiVersion"] = json!("apiextensions.crossplane.io/v1");
        api.apply(Resource::Xrds, xrd);
        api.apply(Resource::Crds, bucket_crd());
        api.apply(
            Resource::Functions,
            json!({"apiVersion": "pkg.crossplane.io/v1", "kind": "Function",
                   "metadata": {"name": "function-patch-and-transform"},
                   "spec": {"package": "xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform:v0.10.8"}}),
        );
        Cluster { api, dir }
    }

    fn audit(&self, extra: &[&str]) -> Output {
        let kubeconfig = self.dir.path("kubeconfig");
        let mut args = vec![
            "audit",
            "--kubeconfig",
            kubeconfig.to_str().expect("UTF-8 path"),
        ];
        args.extend_from_slice(extra);
        run(&args)
    }
}

fn server_of(api: &FakeApiServer) -> String {
    format!("{}/", api.url().trim_end_matches('/'))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crd_losing_a_patched_field_denies_the_composition_until_it_is_back() {
    let cluster = Cluster::start().await;
    let api = &cluster.api;
    api.apply(
        Resource::Compositions,
        composition("annotating", json!([{"fromFieldPath": "spec.coolField", "toFieldPath": "metadata.annotations[cool]"}])),
    );
    api.apply(Resource::Compositions, tagging("tagging"));
    let server = server_of(api);

    // Every field there: both allowed.
    let o = cluster.audit(&[]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(
        lines(&o),
        [
            r#"Composition "annotating" (mode loose): allowed: 0 errors, 0 warnings"#.to_string(),
            r#"Composition "tagging" (mode loose): allowed: 0 errors, 0 warnings"#.to_string(),
            format!(
                "2 Compositions audited against the cluster at {server}: 2 allowed, 0 denied; no findings"
            ),
        ]
    );
    assert_eq!(stderr(&o), "");

    // A provider upgrade drops `tags`: the Composition patching it is denied.
    api.apply(Resource::Crds, bucket_crd_without_tags());
    let o = cluster.audit(&[]);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    let field = "spec.pipeline[0].input.resources[0].patches[0].toFieldPath";
    let message = format!(
        r#"{field}: Invalid value: "spec.forProvider.tags[cool]": field 'tags' is not valid according to the schema"#
    );
    assert_eq!(
        lines(&o),
        [
            r#"Composition "annotating" (mode loose): allowed: 0 errors, 0 warnings"#.to_string(),
            format!("composition/tagging: error: {message}"),
            r#"Composition "tagging" (mode loose): denied (422 Invalid): 1 error, 0 warnings"#
                .to_string(),
            format!(
                "2 Compositions audited against the cluster at {server}: 1 allowed, 1 denied; 1 error, 0 warnings in 1 Composition"
            ),
        ]
    );

    // JSON: the same, with each Composition's resourceVersion.
    let o = cluster.audit(&["--output", "json"]);
    assert_eq!(o.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&o.stdout).expect("one JSON object");
    let rv = |name: &str| {
        api.object(Resource::Compositions, name).expect("stored")["metadata"]["resourceVersion"]
            .clone()
    };
    assert_eq!(
        v,
        json!({
            "source": server,
            "compositionApi": "the API server's Composition API",
            "compositions": [
                {"name": "annotating", "file": null, "resourceVersion": rv("annotating"),
                 "mode": "loose", "allowed": true, "code": null, "errors": 0, "warnings": 0,
                 "findings": []},
                {"name": "tagging", "file": null, "resourceVersion": rv("tagging"),
                 "mode": "loose", "allowed": false, "code": 422, "errors": 1, "warnings": 0,
                 "findings": [{"severity": "error", "stage": "schema", "type": "Invalid",
                               "field": field, "message": message}]},
            ],
            "summary": {"compositions": 2, "allowed": 1, "denied": 1, "errors": 1,
                        "warnings": 0, "withFindings": 1},
        })
    );

    // SARIF: logical locations only.
    let o = cluster.audit(&["--output", "sarif"]);
    assert_eq!(o.status.code(), Some(1));
    let log: Value = serde_json::from_slice(&o.stdout).expect("one JSON object");
    let result = &log["runs"][0]["results"][0];
    assert_eq!(result["ruleId"], "schema/Invalid");
    assert_eq!(result["message"]["text"], message);
    assert_eq!(
        result["locations"],
        json!([{"logicalLocations": [{"name": field,
            "fullyQualifiedName": format!("Composition/tagging/{field}")}]}])
    );
    assert_eq!(result["properties"]["resourceVersion"], rv("tagging"));

    // The field is back: allowed again.
    api.apply(Resource::Crds, bucket_crd());
    let o = cluster.audit(&[]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(
        lines(&o).last().map(String::as_str),
        Some(format!("2 Compositions audited against the cluster at {server}: 2 allowed, 0 denied; no findings").as_str())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compositions_are_listed_a_page_of_100_at_a_time() {
    let cluster = Cluster::start().await;
    let api = &cluster.api;
    api.apply_all(
        Resource::Compositions,
        (0..205).map(|i| tagging(&format!("c{i:03}"))).collect(),
    );
    api.clear_requests();
    let o = cluster.audit(&["--no-render"]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(
        lines(&o).last().map(String::as_str),
        Some(
            format!(
                "205 Compositions audited against the cluster at {}: 205 allowed, 0 denied; no findings",
                server_of(api)
            )
            .as_str()
        )
    );
    let lists: Vec<String> = api
        .requests()
        .into_iter()
        .filter(|r| r.verb == Verb::List && r.resource == Resource::Compositions)
        .map(|r| r.query)
        .collect();
    assert_eq!(lists.len(), 3, "{lists:?}");
    assert!(lists.iter().all(|q| q.contains("limit=100")), "{lists:?}");
    assert!(
        !lists[0].contains("continue=") && lists[1..].iter().all(|q| q.contains("continue=")),
        "{lists:?}"
    );
    // Never watched: an audit is one pass.
    assert_eq!(api.count(Verb::Watch, Resource::Compositions), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_list_is_exit_status_2_with_the_api_servers_answer() {
    let cluster = Cluster::start().await;
    let api = &cluster.api;
    api.apply(Resource::Compositions, tagging("tagging"));
    api.fail(Resource::Compositions, Verb::List, Some(403));
    let o = cluster.audit(&[]);
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    assert_eq!(stdout(&o), "");
    let server = server_of(api);
    assert_eq!(
        stderr(&o),
        format!(
            "error: the API server at {server} refused to list Compositions: 403 Forbidden (RBAC must allow list on compositions.apiextensions.crossplane.io): compositions.apiextensions.crossplane.io is forbidden: User \"{}\" cannot list resource \"compositions\" in API group \"apiextensions.crossplane.io\" at the cluster scope\n",
            kubeapi::FORBIDDEN_USER
        )
    );
    // Not served (no Crossplane): 404.
    api.fail(Resource::Compositions, Verb::List, Some(404));
    let o = cluster.audit(&[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).starts_with(&format!("error: the API server at {server} does not serve compositions.apiextensions.crossplane.io/v1 (is Crossplane installed?): 404 NotFound")),
        "{}",
        stderr(&o)
    );
    // With SARIF, the log says it too.
    api.fail(Resource::Compositions, Verb::List, Some(403));
    let o = cluster.audit(&["--output", "sarif"]);
    assert_eq!(o.status.code(), Some(2));
    let log: Value = serde_json::from_slice(&o.stdout).expect("a SARIF log");
    let invocation = &log["runs"][0]["invocations"][0];
    assert_eq!(invocation["executionSuccessful"], false);
    assert!(
        invocation["toolExecutionNotifications"][0]["message"]["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("the API server at ")),
        "{invocation}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_cluster_and_schemas_not_listed_in_time() {
    let cluster = Cluster::start().await;
    let api = &cluster.api;
    // CRDs refused: the schemas are never listed.
    api.fail(Resource::Crds, Verb::List, Some(403));
    let o = cluster.audit(&["--wait", "1s"]);
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    let err = stderr(&o);
    assert!(
        err.starts_with("error: the cluster's schemas were not listed within 1s: "),
        "{err}"
    );
    assert!(err.contains("403 Forbidden"), "{err}");
    // Down.
    api.set_down(true);
    let o = cluster.audit(&[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).starts_with(&format!(
            "error: cannot list Compositions: the API server at {} could not be reached: ",
            server_of(api)
        )),
        "{}",
        stderr(&o)
    );
    // No kubeconfig at all.
    let missing = cluster.dir.path("missing");
    let o = run(&["audit", "--kubeconfig", missing.to_str().expect("UTF-8")]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).starts_with(&format!(
            "error: cannot use kubeconfig {}: ",
            missing.display()
        )),
        "{}",
        stderr(&o)
    );
}
