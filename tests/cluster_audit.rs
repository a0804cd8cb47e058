//! The background audit (`serve --audit`) end to end: the real binary against the fake API
//! server, which serves the Compositions and keeps the Events and the ClusterPolicyReport the
//! webhook writes. Each scenario asserts what a platform team sees: the Events on the
//! Composition, the `composition_webhook_audit_*` metrics, the report and `/debug/audit`.
//! Several replicas (each its own process, its own token) audit one at a time: the holder of
//! the Lease; the fake's write log says who wrote what, and when.

mod kubeapi;
mod webhook;

use std::path::PathBuf;
use std::time::Duration;

use kubeapi::{FakeApiServer, Resource, Verb, WriteCall};
use serde_json::{Value, json};
use webhook::{
    ScratchDir, Server, debug_audit, eventually, metric, project_dir, review_object, verdict,
    wait_metric, yaml_documents,
};

const NAME: &str = "xnetworks.gcp.platformref.upbound.io";
const REPORT: &str = "/apis/wgpolicyk8s.io/v1alpha2/clusterpolicyreports/composition-webhook-audit";
/// The finding once the Network CRD no longer has `spec.forProvider.description`.
const BROKEN: &str = "spec.resources[0].patches[2].toFieldPath: Invalid value: \"spec.forProvider.description\": field 'description' is not valid according to the schema";
/// Within this, a change shows.
const SOON: Duration = Duration::from_secs(15);

fn one(path: &str) -> Value {
    yaml_documents(&project_dir().join(path))
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("a document in {path}"))
}

fn network_crd() -> Value {
    one("testdata/crds/compute.gcp.upbound.io_networks.yaml")
}

/// The Network CRD without `spec.forProvider.description`, which the Composition patches.
fn network_crd_without_description() -> Value {
    let mut crd = network_crd();
    for v in crd["spec"]["versions"].as_array_mut().expect("versions") {
        let fields = v
            .pointer_mut(
                "/schema/openAPIV3Schema/properties/spec/properties/forProvider/properties",
            )
            .and_then(Value::as_object_mut)
            .expect("forProvider's properties");
        assert!(fields.remove("description").is_some());
    }
    crd
}

/// The example Composition, also patching the XR's `spec.id` into the Network's
/// `spec.forProvider.description` (`patches[2]`).
fn composition() -> Value {
    let mut c = one("testdata/example/composition.yaml");
    c["spec"]["resources"][0]["patches"]
        .as_array_mut()
        .expect("patches")
        .push(json!({"fromFieldPath": "spec.id", "toFieldPath": "spec.forProvider.description"}));
    c
}

/// A Composition of the example's XR that composes only a Subnetwork.
fn subnetworks_only() -> Value {
    let mut c = one("testdata/example/composition.yaml");
    c["metadata"]["name"] = json!("xnetworks-subnetworks-only.gcp.platformref.upbound.io");
    let subnetwork = c["spec"]["resources"][1].take();
    c["spec"]["resources"] = json!([subnetwork]);
    c
}

/// The fake API server with the example's XRD and CRDs, the Composition and a kubeconfig.
struct Cluster {
    api: FakeApiServer,
    dir: ScratchDir,
}

impl Cluster {
    async fn start(network: Value, report_crd: bool) -> Cluster {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let api = FakeApiServer::start().await;
        let dir = ScratchDir::new("cluster-audit");
        api.write_kubeconfig(&dir.path("kubeconfig"));
        api.apply(Resource::Xrds, one("testdata/example/definition.yaml"));
        api.apply(Resource::Crds, network);
        api.apply(
            Resource::Crds,
            one("testdata/crds/compute.gcp.upbound.io_subnetworks.yaml"),
        );
        if report_crd {
            api.apply(Resource::Crds, kubeapi::policy_report_crd());
        }
        api.apply(Resource::Compositions, composition());
        Cluster { api, dir }
    }

    fn kubeconfig(&self) -> PathBuf {
        self.dir.path("kubeconfig")
    }

    /// `serve --kubeconfig ... --audit` with `extra` arguments, once ready.
    async fn serving(&self, extra: &[&str]) -> Server {
        let kubeconfig = self.kubeconfig();
        let mut args = vec![
            "--kubeconfig",
            kubeconfig.to_str().expect("utf-8 path"),
            "--audit",
        ];
        args.extend_from_slice(extra);
        let server = tokio::task::block_in_place(|| Server::start(&[], &args));
        eventually("/readyz is 200", SOON, || async {
            server.ops_get("/readyz").await.0 == 200
        })
        .await;
        server
    }

    /// The Events of `reason` on the Composition `name`.
    fn events(&self, name: &str, reason: &str) -> Vec<Value> {
        self.api
            .events()
            .into_iter()
            .filter(|e| e["reason"] == reason && e["regarding"]["name"] == name)
            .collect()
    }

    /// The ClusterPolicyReport, once written.
    fn report(&self) -> Option<Value> {
        self.api.written_object(REPORT)
    }

    fn report_calls(&self) -> usize {
        self.api
            .write_calls()
            .iter()
            .filter(|(_, path, _, _)| path.starts_with("/apis/wgpolicyk8s.io/"))
            .count()
    }
}

// ---------------------------------------------------------------------------------------
// One audit across replicas

/// The Lease the replicas take in turn (the kubeconfig's namespace is `default`).
const LEASE: &str =
    "/apis/coordination.k8s.io/v1/namespaces/default/leases/composition-webhook-audit";

impl Cluster {
    /// A replica: `serve --audit` with its own token (so its calls can be told apart), its
    /// own host name and a Lease of `lease_duration`, once ready.
    async fn replica(&self, name: &str, lease_duration: &str) -> Server {
        self.api.add_token(name);
        let kubeconfig = self.dir.path(&format!("kubeconfig-{name}"));
        std::fs::write(&kubeconfig, self.api.kubeconfig_yaml_with_token(name)).expect("kubeconfig");
        let mut cmd = webhook::serve_command(&[]);
        cmd.env("HOSTNAME", name);
        let args = [
            "--kubeconfig",
            kubeconfig.to_str().expect("utf-8 path"),
            "--audit",
            "--audit-lease-duration",
            lease_duration,
        ];
        let server = tokio::task::block_in_place(|| Server::start_self_signed(cmd, &args));
        eventually("/readyz is 200", SOON, || async {
            server.ops_get("/readyz").await.0 == 200
        })
        .await;
        server
    }

    /// The Lease's holder, as stored.
    fn holder(&self) -> Option<String> {
        self.api.written_object(LEASE)?["spec"]["holderIdentity"]
            .as_str()
            .map(str::to_owned)
    }

    /// The calls that wrote Events or the report (not the Lease), answered with success.
    fn audit_writes(&self) -> Vec<WriteCall> {
        self.api
            .write_log()
            .into_iter()
            .filter(|c| {
                c.method != hyper::Method::GET
                    && c.status < 300
                    && (c.path.starts_with("/apis/events.k8s.io/")
                        || c.path.starts_with("/apis/wgpolicyk8s.io/"))
            })
            .collect()
    }

    /// Who made the audit's writes, in order, each writer once per run of writes.
    fn writers(&self) -> Vec<String> {
        let mut writers: Vec<String> = Vec::new();
        for call in self.audit_writes() {
            let token = call.token.unwrap_or_default();
            if writers.last() != Some(&token) {
                writers.push(token);
            }
        }
        writers
    }
}

/// The cluster (its Composition denied from the start) with `replica-a` holding a Lease of
/// `lease_duration` and `replica-b` following, once the report holds the denial.
async fn holder_and_follower(lease_duration: &str) -> (Cluster, Server, Server) {
    let cluster = Cluster::start(network_crd_without_description(), true).await;
    let a = cluster.replica("replica-a", lease_duration).await;
    eventually("replica-a audits", SOON, || async { auditing(&a).await }).await;
    let b = cluster.replica("replica-b", lease_duration).await;
    eventually("the report's fail result", SOON, || async {
        cluster.report().is_some_and(|r| r["summary"]["fail"] == 1)
    })
    .await;
    (cluster, a, b)
}

/// Waits until `b` audits and has written the report.
async fn takes_over(cluster: &Cluster, b: &Server) {
    eventually("replica-b audits", Duration::from_secs(30), || async {
        auditing(b).await
    })
    .await;
    eventually("replica-b writes the report", SOON, || async {
        cluster.writers().last().map(String::as_str) == Some("replica-b")
    })
    .await;
}

/// Whether the replica says it audits.
async fn auditing(server: &Server) -> bool {
    debug_audit(server).await["auditing"] == true
}

/// SIGKILL or SIGSTOP/SIGCONT, by the system call.
fn signal(server: &Server, signal: libc::c_int) {
    let pid = libc::pid_t::try_from(server.pid()).expect("pid fits pid_t");
    // SAFETY: kill(2) reads only its two integer arguments.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0, "kill({signal})");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_replicas_audit_once_and_the_survivor_takes_over_when_the_holder_dies() {
    // Denied from the start: its first audit is a Warning Event.
    let (cluster, mut a, b) = holder_and_follower("6s").await;
    eventually("the Warning event", SOON, || async {
        !cluster.events(NAME, "CompositionInvalid").is_empty()
    })
    .await;
    // Past several lease durations and report intervals, replica-b has done nothing.
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert_eq!(
        cluster.writers(),
        ["replica-a"],
        "{:#?}",
        cluster.audit_writes()
    );
    assert_eq!(cluster.events(NAME, "CompositionInvalid").len(), 1);
    let view = debug_audit(&b).await;
    assert_eq!(view["auditing"], false, "{view:#}");
    let holder = cluster.holder().expect("a holder");
    assert!(holder.starts_with("replica-a_"), "{holder}");
    assert_eq!(view["lease"]["holder"], holder.as_str(), "{view:#}");
    assert_eq!(view["lease"]["lease"], "default/composition-webhook-audit");
    assert_eq!(view["audited"], 0, "{view:#}");
    assert_eq!(validations(&b, "new").await, 0.0);
    assert_eq!(
        metric(&a, "composition_webhook_audit_leader").await,
        Some(1.0)
    );
    assert_eq!(
        metric(&b, "composition_webhook_audit_leader").await,
        Some(0.0)
    );
    assert_eq!(metric(&b, &findings_metric(NAME, "error")).await, None);
    // Admission stays on every replica.
    for replica in [&a, &b] {
        let (allowed, code, _, _) = verdict(&review_object(replica, &composition(), "10s").await);
        assert_eq!((allowed, code), (false, 422));
    }

    // The holder dies without a word: replica-b takes over once the Lease is not renewed.
    signal(&a, libc::SIGKILL);
    let _ = a.wait_exit(Duration::from_secs(10));
    eventually("replica-b audits", Duration::from_secs(30), || async {
        auditing(&b).await
    })
    .await;
    assert!(
        cluster
            .holder()
            .expect("a holder")
            .starts_with("replica-b_")
    );
    wait_metric(&b, &findings_metric(NAME, "error"), 1.0, SOON).await;
    eventually("replica-b writes the report", SOON, || async {
        cluster.writers().last().map(String::as_str) == Some("replica-b")
    })
    .await;
    let (rows, _) = results(&cluster.report().expect("report"));
    assert_eq!(rows, vec![row("fail", "Invalid", BROKEN)]);
    // The verdict the report told is the one it finds: not announced again.
    assert_eq!(cluster.events(NAME, "CompositionInvalid").len(), 1);
    assert_eq!(
        cluster.api.written_object(LEASE).expect("the Lease")["spec"]["leaseTransitions"],
        1
    );

    // It goes on: a fix of the CRD is its news.
    cluster.api.apply(Resource::Crds, network_crd());
    eventually("the Normal event", SOON, || async {
        !cluster.events(NAME, "CompositionValid").is_empty()
    })
    .await;
    assert_eq!(cluster.writers(), ["replica-a", "replica-b"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_paused_holder_stops_writing_before_another_starts() {
    let (cluster, a, b) = holder_and_follower("6s").await;

    // Paused (a long GC, a frozen node, a partition): replica-b takes over.
    signal(&a, libc::SIGSTOP);
    let paused = std::time::Instant::now();
    takes_over(&cluster, &b).await;
    let took_over = paused.elapsed();
    // Resumed while the verdict changes: whatever it had queued, replica-a writes nothing.
    signal(&a, libc::SIGCONT);
    cluster.api.apply(Resource::Crds, network_crd());
    eventually("the Normal event", SOON, || async {
        !cluster.events(NAME, "CompositionValid").is_empty()
    })
    .await;
    eventually("replica-a sees replica-b hold the Lease", SOON, || async {
        let view = debug_audit(&a).await;
        view["auditing"] == false
            && view["lease"]["holder"]
                .as_str()
                .is_some_and(|h| h.starts_with("replica-b_"))
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        cluster.writers(),
        ["replica-a", "replica-b"],
        "took over after {took_over:?}: {:#?}",
        cluster.audit_writes()
    );
    assert_eq!(
        metric(&a, "composition_webhook_audit_leader").await,
        Some(0.0)
    );
    assert_eq!(metric(&a, &findings_metric(NAME, "error")).await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_holder_shut_down_gives_the_lease_up_at_once() {
    // A long Lease: a takeover well within it is the holder's giving it up.
    let (cluster, mut a, b) = holder_and_follower("60s").await;
    a.sigterm();
    assert!(
        a.wait_exit(Duration::from_secs(60)).is_some(),
        "replica-a exits"
    );
    assert!(
        a.logs()
            .iter()
            .any(|l| l["message"] == "gave the audit's Lease up"),
        "{:#?}",
        a.logs()
    );
    takes_over(&cluster, &b).await;
    assert_eq!(cluster.events(NAME, "CompositionInvalid").len(), 1);
}

/// The Composition `name` in `/debug/audit`.
async fn audited(server: &Server, name: &str) -> Value {
    let view = debug_audit(server).await;
    view["compositions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == name).cloned())
        .unwrap_or(Value::Null)
}

fn findings_metric(name: &str, severity: &str) -> String {
    format!("composition_webhook_audit_findings{{composition=\"{name}\",severity=\"{severity}\"}}")
}

async fn validations(server: &Server, reason: &str) -> f64 {
    metric(
        server,
        &format!("composition_webhook_audit_validations_total{{reason=\"{reason}\"}}"),
    )
    .await
    .unwrap_or(0.0)
}

/// The results of the report: (result, rule, message, Composition), and its summary.
fn results(report: &Value) -> (Vec<(String, String, String, String)>, Value) {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let rows = report["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            (
                text(&r["result"]),
                text(&r["rule"]),
                text(&r["message"]),
                text(&r["resources"][0]["name"]),
            )
        })
        .collect();
    (rows, report["summary"].clone())
}

fn row(result: &str, rule: &str, message: &str) -> (String, String, String, String) {
    (result.into(), rule.into(), message.into(), NAME.into())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_crd_update_that_breaks_a_composition_shows_and_restoring_it_clears_it() {
    let cluster = Cluster::start(network_crd(), true).await;
    let server = cluster.serving(&[]).await;
    eventually("the Composition audited", SOON, || async {
        audited(&server, NAME).await["allowed"] == true
    })
    .await;
    wait_metric(&server, &findings_metric(NAME, "error"), 0.0, SOON).await;
    // A report written before the audit's first verdict holds no result yet.
    eventually("the report's pass result", SOON, || async {
        cluster.report().is_some_and(|r| r["summary"]["pass"] == 1)
    })
    .await;
    let report = cluster.report().expect("report");
    assert_eq!(
        report["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "composition-webhook"
    );
    assert_eq!(
        results(&report),
        (
            vec![row("pass", "valid", "no findings")],
            json!({"pass": 1, "fail": 0, "warn": 0, "error": 0, "skip": 0})
        )
    );
    // The first audit of an allowed Composition is no news.
    assert_eq!(cluster.api.events(), Vec::<Value>::new());

    // The Network CRD loses the field the Composition patches.
    cluster
        .api
        .apply(Resource::Crds, network_crd_without_description());
    eventually("the Warning event", SOON, || async {
        !cluster.events(NAME, "CompositionInvalid").is_empty()
    })
    .await;
    let event = cluster.events(NAME, "CompositionInvalid").remove(0);
    assert_eq!(event["type"], "Warning");
    assert_eq!(
        event["note"],
        format!("Would now be denied (422): 1 error, 0 warnings: {BROKEN}")
    );
    assert_eq!(event["action"], "Audit");
    assert_eq!(event["reportingController"], "composition-webhook");
    assert_eq!(event["metadata"]["namespace"], "default");
    let uid = cluster
        .api
        .object(Resource::Compositions, NAME)
        .expect("the Composition")["metadata"]["uid"]
        .clone();
    assert_eq!(
        event["regarding"],
        json!({"apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition", "name": NAME, "uid": uid})
    );
    wait_metric(&server, &findings_metric(NAME, "error"), 1.0, SOON).await;
    eventually("the report's fail result", SOON, || async {
        cluster.report().is_some_and(|r| r["summary"]["fail"] == 1)
    })
    .await;
    let report = cluster.report().expect("report");
    assert_eq!(
        results(&report),
        (
            vec![row("fail", "Invalid", BROKEN)],
            json!({"pass": 0, "fail": 1, "warn": 0, "error": 0, "skip": 0})
        )
    );
    assert_eq!(report["results"][0]["severity"], "high");
    assert_eq!(
        report["results"][0]["properties"],
        json!({"mode": "loose", "admitted": "false", "code": "422", "field": "spec.resources[0].patches[2].toFieldPath", "stage": "schema"})
    );
    let view = audited(&server, NAME).await;
    assert_eq!(
        (&view["allowed"], &view["code"]),
        (&json!(false), &json!(422))
    );
    assert_eq!(view["findings"][0]["message"], BROKEN);
    assert_eq!(
        view["dependencies"],
        json!({"kinds": [
            "Network.compute.gcp.upbound.io",
            "Subnetwork.compute.gcp.upbound.io",
            "XNetwork.gcp.platformref.upbound.io",
        ], "functions": true})
    );
    // Admission says the same of the same Composition now.
    let (allowed, code, message, _) = verdict(&review_object(&server, &composition(), "10s").await);
    assert_eq!((allowed, code), (false, 422));
    assert!(message.contains(BROKEN), "{message}");

    // Restored: the Normal event, the gauge back to 0, the report passing.
    cluster.api.apply(Resource::Crds, network_crd());
    eventually("the Normal event", SOON, || async {
        !cluster.events(NAME, "CompositionValid").is_empty()
    })
    .await;
    let event = cluster.events(NAME, "CompositionValid").remove(0);
    assert_eq!(event["type"], "Normal");
    assert_eq!(event["note"], "Would now be admitted: 0 errors, 0 warnings");
    wait_metric(&server, &findings_metric(NAME, "error"), 0.0, SOON).await;
    eventually("the report passing again", SOON, || async {
        cluster.report().is_some_and(|r| r["summary"]["pass"] == 1)
    })
    .await;
    assert_eq!(
        results(&cluster.report().expect("report")).0,
        vec![row("pass", "valid", "no findings")]
    );
    // One validation when it appeared, one per change of its CRD; one Event each.
    assert_eq!(validations(&server, "new").await, 1.0);
    assert_eq!(validations(&server, "schemas").await, 2.0);
    assert_eq!(cluster.events(NAME, "CompositionInvalid").len(), 1);
    let view = debug_audit(&server).await;
    assert_eq!(view["events"]["recorded"], 2, "{view:#}");
    // At the lowest priority there is.
    let priority = view["priority"].as_str().unwrap_or_default();
    // The tests share their CPU cgroup with the server: SCHED_IDLE would starve the audit.
    assert_eq!(
        priority, "nice +10 (the process shares its CPU cgroup)",
        "{view:#}"
    );
    assert_eq!(view["policyReport"]["crd"], true, "{view:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn only_the_compositions_that_use_a_changed_kind_are_validated_again() {
    let cluster = Cluster::start(network_crd(), false).await;
    let other = subnetworks_only();
    let other_name = other["metadata"]["name"]
        .as_str()
        .expect("name")
        .to_string();
    cluster.api.apply(Resource::Compositions, other);
    let server = cluster.serving(&[]).await;
    eventually("both audited", SOON, || async {
        debug_audit(&server).await["audited"] == 2
    })
    .await;
    assert_eq!(validations(&server, "new").await, 2.0);
    // A CRD no Composition uses, then a new version of the Network CRD, which only the first
    // Composition uses.
    cluster.api.apply(
        Resource::Crds,
        kubeapi::crd(
            "example.org",
            "Widget",
            "widgets",
            &[("v1", true, true, json!({"type": "object"}))],
        ),
    );
    let mut labelled = network_crd();
    labelled["metadata"]["labels"] = json!({"audit-test": "touched"});
    cluster.api.apply(Resource::Crds, labelled);
    wait_metric(
        &server,
        "composition_webhook_audit_validations_total{reason=\"schemas\"}",
        1.0,
        SOON,
    )
    .await;
    eventually("nothing queued", SOON, || async {
        debug_audit(&server).await["queued"] == 0
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(validations(&server, "schemas").await, 1.0);
    let first = audited(&server, NAME).await;
    let second = audited(&server, &other_name).await;
    assert_eq!(
        second["dependencies"]["kinds"],
        json!([
            "Subnetwork.compute.gcp.upbound.io",
            "XNetwork.gcp.platformref.upbound.io"
        ])
    );
    assert_ne!(first["auditedAt"], Value::Null);
    assert_eq!(
        (&first["pending"], &second["pending"]),
        (&Value::Null, &Value::Null)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_deleted_composition_leaves_the_metrics_and_the_report() {
    // Denied from the start: its first audit is news.
    let cluster = Cluster::start(network_crd_without_description(), true).await;
    let server = cluster.serving(&[]).await;
    eventually("the Warning event", SOON, || async {
        !cluster.events(NAME, "CompositionInvalid").is_empty()
    })
    .await;
    wait_metric(&server, &findings_metric(NAME, "error"), 1.0, SOON).await;
    eventually("the report's fail result", SOON, || async {
        cluster.report().is_some_and(|r| r["summary"]["fail"] == 1)
    })
    .await;

    assert!(cluster.api.delete(Resource::Compositions, NAME));
    eventually("its series gone", SOON, || async {
        metric(&server, &findings_metric(NAME, "error"))
            .await
            .is_none()
            && metric(&server, &findings_metric(NAME, "warning"))
                .await
                .is_none()
    })
    .await;
    eventually("its results gone", SOON, || async {
        cluster
            .report()
            .is_some_and(|r| r["results"] == json!([]) && r["summary"]["fail"] == 0)
    })
    .await;
    let view = debug_audit(&server).await;
    assert_eq!(view["compositions"], json!([]), "{view:#}");
    assert_eq!(view["watch"]["objects"], 0, "{view:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_the_policy_report_crd_nothing_is_written_until_it_comes() {
    let cluster = Cluster::start(network_crd_without_description(), false).await;
    let server = cluster.serving(&[]).await;
    eventually("the Warning event", SOON, || async {
        !cluster.events(NAME, "CompositionInvalid").is_empty()
    })
    .await;
    // Longer than the report's interval: not one call.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(cluster.report_calls(), 0, "{:?}", cluster.api.write_calls());
    assert_eq!(debug_audit(&server).await["policyReport"]["crd"], false);

    // Installed: the report follows.
    cluster
        .api
        .apply(Resource::Crds, kubeapi::policy_report_crd());
    eventually("the report written", SOON, || async {
        cluster.report().is_some_and(|r| r["summary"]["fail"] == 1)
    })
    .await;
    let (rows, _) = results(&cluster.report().expect("report"));
    assert_eq!(rows, vec![row("fail", "Invalid", BROKEN)]);
    let calls = cluster.api.write_calls();
    let (method, _, content_type, status) = calls
        .iter()
        .find(|(_, path, _, _)| path == REPORT)
        .expect("the report's call");
    assert_eq!(
        (method.as_str(), content_type.as_str(), *status),
        ("PATCH", "application/apply-patch+yaml", 201)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refused_list_of_compositions_leaves_admission_alone() {
    let cluster = Cluster::start(network_crd(), false).await;
    cluster
        .api
        .fail(Resource::Compositions, Verb::List, Some(403));
    let server = cluster.serving(&[]).await;
    let (allowed, _, _, warnings) = verdict(&review_object(&server, &composition(), "10s").await);
    assert!(allowed);
    assert_eq!(warnings, Vec::<String>::new());
    eventually("/debug/audit says why", SOON, || async {
        debug_audit(&server).await["watch"]["lastError"]["message"]
            == "the API server refused to list Compositions: 403 Forbidden (RBAC must allow get, list, watch)"
    })
    .await;
    let view = debug_audit(&server).await;
    assert_eq!(
        (&view["watch"]["synced"], &view["audited"]),
        (&json!(false), &json!(0))
    );
    wait_metric(
        &server,
        "composition_webhook_schema_source_objects{source=\"composition\",state=\"failing\"}",
        0.0,
        SOON,
    )
    .await;

    // Allowed again: the watch recovers on its own.
    cluster.api.fail(Resource::Compositions, Verb::List, None);
    eventually(
        "the Composition audited",
        Duration::from_secs(60),
        || async { audited(&server, NAME).await["allowed"] == true },
    )
    .await;
    let view = debug_audit(&server).await;
    assert_eq!(view["watch"]["lastError"], Value::Null, "{view:#}");
}

#[test]
fn audit_needs_the_cluster() {
    let dir = ScratchDir::new("audit-crds");
    let crds = project_dir().join("testdata/crds");
    let out = webhook::serve_command(&[crds.as_path()])
        .args(["--audit", "--self-signed", "--ca-bundle-out"])
        .arg(dir.path("ca.pem"))
        .output()
        .expect("run serve");
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: --audit needs schemas from the cluster (it audits the cluster's Compositions): leave out --crds\n"
    );
}
