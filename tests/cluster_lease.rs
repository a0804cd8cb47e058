//! The audit's leader election ([`composition_webhook::cluster::lease`]) in process, against
//! the fake API server through kube's client: replicas racing for a Lease that does not exist
//! yet, and one whose update comes at a resourceVersion another replica moved on. The real
//! binaries' takeovers are in `cluster_audit.rs`.

mod kubeapi;

use std::time::{Duration, Instant};

use composition_webhook::cluster::lease::{Leadership, LeaseOptions};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::PostParams;
use kubeapi::FakeApiServer;

fn options(identity: &str) -> LeaseOptions {
    LeaseOptions {
        name: "composition-webhook-audit".into(),
        namespace: "default".into(),
        identity: identity.into(),
        duration: Duration::from_secs(3),
    }
}

async fn until(what: &str, check: impl Fn() -> bool) {
    let end = Instant::now() + Duration::from_secs(30);
    while !check() {
        assert!(Instant::now() < end, "not within 30 s: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_replicas_racing_for_a_new_lease_exactly_one_leads() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let api = FakeApiServer::start().await;
    let mut replicas = Vec::new();
    for id in ["a", "b", "c"] {
        replicas.push(Leadership::start(api.client().await, options(id)).0);
    }
    until("one leads", || replicas.iter().any(Leadership::is_leading)).await;
    // Past several renewals: still exactly one, and the one the Lease names.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let leading: Vec<&str> = replicas
        .iter()
        .filter(|l| l.is_leading())
        .map(|l| l.options().identity.as_str())
        .collect();
    assert_eq!(leading.len(), 1, "{leading:?}");
    let leases: kube::Api<Lease> = kube::Api::namespaced(api.client().await, "default");
    let lease = leases
        .get("composition-webhook-audit")
        .await
        .expect("the Lease");
    let spec = lease.spec.expect("spec");
    assert_eq!(spec.holder_identity.as_deref(), Some(leading[0]));
    assert_eq!(
        (spec.lease_duration_seconds, spec.lease_transitions),
        (Some(3), Some(0))
    );
    for other in replicas.iter().filter(|l| !l.is_leading()) {
        assert_eq!(other.view().holder.as_deref(), Some(leading[0]));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_at_a_stale_resource_version_is_a_conflict_and_the_holder_stays() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let api = FakeApiServer::start().await;
    let (holder, _) = Leadership::start(api.client().await, options("holder"));
    until("the holder leads", || holder.is_leading()).await;
    let leases: kube::Api<Lease> = kube::Api::namespaced(api.client().await, "default");
    let read = leases
        .get("composition-webhook-audit")
        .await
        .expect("the Lease");
    // The holder renews meanwhile: what was read is stale.
    until("a renewal", || {
        api.written_object(
            "/apis/coordination.k8s.io/v1/namespaces/default/leases/composition-webhook-audit",
        )
        .is_some_and(|l| {
            l["metadata"]["resourceVersion"]
                != read
                    .metadata
                    .resource_version
                    .as_deref()
                    .unwrap_or_default()
        })
    })
    .await;
    let mut taken = read.clone();
    taken.spec.as_mut().expect("spec").holder_identity = Some("usurper".into());
    match leases
        .replace("composition-webhook-audit", &PostParams::default(), &taken)
        .await
    {
        Err(kube::Error::Api(s)) => assert_eq!((s.code, s.reason.as_str()), (409, "Conflict")),
        other => panic!("not a conflict: {other:?}"),
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(holder.is_leading());
    assert_eq!(holder.view().holder.as_deref(), Some("holder"));
}
