//! Functions from the cluster, end to end: the real `composition-webhook serve` binary
//! watching `functions.pkg.crossplane.io` on the in-process fake API server. A step naming
//! a Function that exists is allowed; deleted, the mode decides within seconds; renamed,
//! the Composition naming the new name passes. Without Crossplane's Functions (404) steps
//! are recognised by name; a refused list keeps the webhook unready and says why.

mod kubeapi;
mod webhook;

use std::time::Duration;

use kubeapi::{FakeApiServer, Resource, Verb};
use serde_json::{Value, json};
use webhook::{
    ScratchDir, Server, debug, eventually, metric, project_dir, verdict, yaml_documents,
};

const PT_PACKAGE: &str =
    "xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform:v0.10.8";

fn one(path: &str) -> Value {
    yaml_documents(&project_dir().join(path))
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("a document in {path}"))
}

fn function(name: &str, package: &str) -> Value {
    json!({
        "apiVersion": "pkg.crossplane.io/v1", "kind": "Function",
        "metadata": {"name": name},
        "spec": {"package": package},
    })
}

/// testdata/v2/bucket-composition.yaml, its step naming `name`, in `mode`.
fn composition(name: &str, mode: &str) -> Value {
    let mut c = one("testdata/v2/bucket-composition.yaml");
    c["spec"]["pipeline"][0]["functionRef"]["name"] = json!(name);
    c["metadata"]["annotations"] =
        json!({"crossplane.io/composition-schema-aware-validation-mode": mode});
    c
}

/// The fake API server with testdata/v2's XRD and namespaced Bucket CRD.
struct Cluster {
    api: FakeApiServer,
    dir: ScratchDir,
}

impl Cluster {
    async fn start() -> Cluster {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let api = FakeApiServer::start().await;
        let dir = ScratchDir::new("cluster-functions");
        api.write_kubeconfig(&dir.path("kubeconfig"));
        let mut xrd = one("testdata/v2/basic-namespaced.definition.yaml");
        xrd["apiVersion"] = json!("apiextensions.crossplane.io/v1");
        api.apply(Resource::Xrds, xrd);
        api.apply(
            Resource::Crds,
            one("testdata/v2/crds/s3.aws.m.upbound.io_buckets.yaml"),
        );
        Cluster { api, dir }
    }

    fn webhook(&self) -> Server {
        let kubeconfig = self.dir.path("kubeconfig");
        let args = ["--kubeconfig", kubeconfig.to_str().expect("utf-8 path")];
        tokio::task::block_in_place(|| Server::start(&[], &args))
    }

    async fn serving(&self) -> Server {
        let server = self.webhook();
        eventually("/readyz is 200", Duration::from_secs(20), || async {
            server.ops_get("/readyz").await.0 == 200
        })
        .await;
        server
    }
}

/// What a user sees: allowed, the denial's code and message, the warnings.
async fn review(server: &Server, object: &Value) -> (bool, u64, String, Vec<String>) {
    verdict(&webhook::review_object(server, object, "10s").await)
}

/// The Function names `/debug/schemas` lists.
async fn listed(server: &Server) -> Vec<String> {
    debug(server).await["functions"]["functions"]
        .as_array()
        .expect("functions")
        .iter()
        .filter_map(|f| f["name"].as_str().map(str::to_string))
        .collect()
}

async fn wait_listed(server: &Server, names: &[&str]) {
    eventually(
        &format!("Functions {names:?} listed"),
        Duration::from_secs(5),
        || async { listed(server).await == names },
    )
    .await;
}

const SUBJECT: &str = "Composition \"basic-composition-namespaced\"";

/// Why a step naming no Function is reported, with the installed Function it may mean.
fn missing(meant: Option<&str>) -> String {
    let base = "Crossplane cannot run the pipeline until a Function of this name is installed";
    match meant {
        Some(meant) => format!("{base}; did you mean {meant:?}?"),
        None => format!(
            "{base} (usually xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform)"
        ),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_step_is_allowed_while_its_function_exists_and_denied_in_strict_once_deleted_or_renamed()
{
    let cluster = Cluster::start().await;
    cluster.api.apply(
        Resource::Functions,
        function("patch-and-transform", PT_PACKAGE),
    );
    let server = cluster.serving().await;

    // The Function exists: allowed in every mode, without a warning.
    for mode in ["strict", "loose"] {
        let (allowed, _, message, warnings) =
            review(&server, &composition("patch-and-transform", mode)).await;
        assert!(allowed, "{mode}: {message}");
        assert_eq!(warnings, Vec::<String>::new(), "{mode}");
    }
    let d = debug(&server).await;
    let functions = &d["functions"];
    assert_eq!(functions["resource"], "functions");
    assert_eq!(functions["synced"], true);
    assert_eq!(functions["absent"], false);
    assert_eq!(functions["objects"], 1);
    let rv = cluster
        .api
        .object(Resource::Functions, "patch-and-transform")
        .expect("stored")["metadata"]["resourceVersion"]
        .clone();
    assert_eq!(
        functions["functions"],
        json!([{"name": "patch-and-transform", "package": PT_PACKAGE,
                "function": "function-patch-and-transform", "resourceVersion": rv}])
    );
    assert!(
        metric(
            &server,
            "composition_webhook_apiserver_calls_total{verb=\"list\",resource=\"functions\"}"
        )
        .await
        .unwrap_or(0.0)
            >= 1.0
    );
    assert!(
        metric(
            &server,
            "composition_webhook_apiserver_calls_total{verb=\"watch\",resource=\"functions\"}"
        )
        .await
        .unwrap_or(0.0)
            >= 1.0
    );

    // Deleted: strict denies, loose admits with a warning, within seconds.
    assert!(
        cluster
            .api
            .delete(Resource::Functions, "patch-and-transform")
    );
    wait_listed(&server, &[]).await;
    let field = "spec.pipeline[0].functionRef.name";
    let (allowed, code, message, _) =
        review(&server, &composition("patch-and-transform", "strict")).await;
    assert_eq!((allowed, code), (false, 403), "{message}");
    let cause = format!(
        "{field}: Not found: \"patch-and-transform\": {}",
        missing(None)
    );
    assert!(message.contains(&cause), "{cause}\nnot in\n{message}");
    let (allowed, _, _, warnings) =
        review(&server, &composition("patch-and-transform", "loose")).await;
    assert!(allowed);
    assert_eq!(
        warnings,
        [format!("{SUBJECT}: {field}: Not found: {}", missing(None))]
    );

    // Renamed (created under another name): the old name is still missing, and the
    // message names the new one; the Composition naming the new name passes.
    cluster.api.apply(
        Resource::Functions,
        function("function-patch-and-transform", PT_PACKAGE),
    );
    wait_listed(&server, &["function-patch-and-transform"]).await;
    let (allowed, code, message, _) =
        review(&server, &composition("patch-and-transform", "strict")).await;
    assert_eq!((allowed, code), (false, 403), "{message}");
    let cause = format!(
        "{field}: Not found: \"patch-and-transform\": {}",
        missing(Some("function-patch-and-transform"))
    );
    assert!(message.contains(&cause), "{cause}\nnot in\n{message}");
    let (allowed, _, message, warnings) = review(
        &server,
        &composition("function-patch-and-transform", "strict"),
    )
    .await;
    assert!(allowed, "{message}");
    assert_eq!(warnings, Vec::<String>::new());
}

/// A Function that is another function's package gets the input of
/// function-patch-and-transform: denied, naming both.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_patch_and_transform_input_for_another_function_is_denied() {
    let cluster = Cluster::start().await;
    let templating = "xpkg.crossplane.io/crossplane-contrib/function-go-templating:v0.9.0";
    cluster.api.apply(
        Resource::Functions,
        function("function-patch-and-transform", templating),
    );
    let server = cluster.serving().await;
    let (allowed, code, message, warnings) = review(
        &server,
        &composition("function-patch-and-transform", "strict"),
    )
    .await;
    assert!(!allowed);
    assert_eq!(code, 422, "{message}");
    assert!(
        message.contains("spec.pipeline[0].functionRef.name: Invalid value: \"function-patch-and-transform\": the input is function-patch-and-transform's (pt.fn.crossplane.io Resources), but this Function's package is function-go-templating, which does not read it"),
        "{message}"
    );
    assert_eq!(warnings, Vec::<String>::new());
}

/// Without Crossplane's package API (404) the webhook is ready, and steps are recognised by
/// name: nothing is missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_functions_served_steps_are_recognised_by_name() {
    let cluster = Cluster::start().await;
    cluster.api.fail(Resource::Functions, Verb::List, Some(404));
    let server = cluster.serving().await;
    let (allowed, _, message, warnings) = review(&server, &composition("anything", "strict")).await;
    assert!(allowed, "{message}");
    assert_eq!(warnings, Vec::<String>::new());
    let functions = debug(&server).await["functions"].clone();
    assert_eq!(functions["absent"], true, "{functions:#}");
    assert_eq!(functions["synced"], false);
    assert_eq!(
        functions["lastError"]["message"],
        "the API server answered 404 NotFound to listing Functions"
    );
}

/// A refused list of Functions keeps the webhook unready, saying what RBAC must allow;
/// allowed, it becomes ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_forbidden_list_of_functions_keeps_the_webhook_unready_until_allowed() {
    let cluster = Cluster::start().await;
    cluster.api.fail(Resource::Functions, Verb::List, Some(403));
    let server = cluster.webhook();
    let why = "not ready: the webhook has not listed Functions from the API server yet: the API server refused to list Functions: 403 Forbidden (RBAC must allow get, list, watch)\n";
    eventually(
        &format!("/readyz says {why}"),
        Duration::from_secs(10),
        || async { server.ops_get("/readyz").await == (503, why.to_owned()) },
    )
    .await;
    cluster.api.fail(Resource::Functions, Verb::List, None);
    eventually("/readyz is 200", Duration::from_secs(40), || async {
        server.ops_get("/readyz").await.0 == 200
    })
    .await;
}
