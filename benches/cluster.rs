//! Scale benchmark of the cluster schema source: the real `composition-webhook serve` binary
//! (the bench-profile build) against an in-process API server (`tests/kubeapi`, HTTPS,
//! driven by the real kube client) serving 1,000 CRDs of real provider size and the corpus'
//! XRDs.
//!
//! The CRDs: every distinct CRD of `../shared/corpus/crds` (by name; of several provider
//! versions, the largest), then copies of them
//! under generated API groups (`b<n>.<group>`, named `<plural>.b<n>.<group>`) up to 1,000;
//! the XRDs: every distinct XRD of `../shared/corpus/xrds`; the MRDs (Crossplane v2): the
//! same CRDs as Inactive ManagedResourceDefinitions under other generated groups
//! (`m<n>.<group>`), 1,000 of them; the built-in kinds' OpenAPI v3 documents of
//! `../shared/kube-openapi/v1.28.4` (fetched when a Composition needs one). For each run a
//! fresh webhook is started and measured:
//!
//! - time from start to `/readyz` 200 (CRDs, MRDs and XRDs listed), with each page the API
//!   server reads from etcd costing what a real one's did (25 ms plus 1 ms per object: pages
//!   of 50 CRDs took 25-285 ms on kube-apiserver 1.28), while its watch cache
//!   (`resourceVersion=0`) answers at no cost;
//! - resident memory (VmRSS) once ready, its peak (VmHWM) until then, and after validating
//!   every corpus Composition;
//! - validation latency with a warm cache: every corpus Composition reviewed again over one
//!   keep-alive HTTPS connection (client-side time per review, p50 and p99), and the API
//!   server's `GET`s during that pass, which must be 0 (no request-path call once cached).
//!
//! Medians across runs are printed with their min and max. Settings: `CLUSTER_BENCH_RUNS`
//! (default 5), `CLUSTER_BENCH_CRDS` (default 1000), `CLUSTER_BENCH_MRDS` (default 1000),
//! `CLUSTER_BENCH_SERVE_ARGS` (more
//! arguments for `serve`, e.g. `--no-render`), `CLUSTER_BENCH_PAGE_MS` and
//! `CLUSTER_BENCH_OBJECT_MS` (the cost of an etcd page: default 25 and 1),
//! `CLUSTER_BENCH_WATCH_CACHE=0` (an API server without a watch cache: every list read from
//! etcd at the page cost, `resourceVersion=0` included).
//!
//! Run with `cargo bench --bench cluster`.

#[path = "common/cluster_data.rs"]
mod cluster_data;
#[path = "../tests/kubeapi/mod.rs"]
mod kubeapi;
#[path = "../tests/webhook/mod.rs"]
mod webhook;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use cluster_data::{corpus_compositions, definitions, median, mib, renamed, setting};
use http_body_util::{BodyExt, Full};
use kubeapi::{FakeApiServer, PageCost, Resource, Verb};
use serde_json::{Value, json};
use webhook::{ScratchDir, Server, composition_review, project_dir};

struct Run {
    ready: Duration,
    rss_ready: u64,
    peak_ready: u64,
    rss_validated: u64,
    peak: u64,
    p50: Duration,
    p99: Duration,
    warm_gets: usize,
    states: String,
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

async fn ready(server: &Server) -> bool {
    server.ops_get("/readyz").await.0 == 200
}

/// Reviews every Composition once over one keep-alive connection; the time of each.
async fn review_all(server: &Server, comps: &[(String, Value)]) -> Vec<Duration> {
    let tls = server.client().connect().await.expect("connect");
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
            .await
            .expect("handshake");
    tokio::spawn(conn);
    let mut times = Vec::with_capacity(comps.len());
    for (i, (file, object)) in comps.iter().enumerate() {
        let body = composition_review(
            "v1",
            &format!("00000000-0000-4000-8000-{i:012}"),
            "CREATE",
            object.clone(),
        );
        let req = hyper::Request::post("/validate?timeout=10s")
            .header("host", "localhost")
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(
                serde_json::to_vec(&body).expect("json"),
            )))
            .expect("request");
        let started = Instant::now();
        sender.ready().await.expect("connection ready");
        let resp = sender.send_request(req).await.expect("response");
        let status = resp.status();
        let bytes = resp.into_body().collect().await.expect("body").to_bytes();
        times.push(started.elapsed());
        assert_eq!(status, 200, "{file}");
        let v: Value = serde_json::from_slice(&bytes).expect("review JSON");
        assert!(v["response"]["allowed"].is_boolean(), "{file}: {v}");
    }
    times
}

async fn one_run(api: &FakeApiServer, kubeconfig: &Path, comps: &[(String, Value)]) -> Run {
    let extra_args = std::env::var("CLUSTER_BENCH_SERVE_ARGS").unwrap_or_default();
    let extra: Vec<&str> = extra_args.split_whitespace().collect();
    let started = Instant::now();
    let server = tokio::task::block_in_place(|| {
        Server::start(
            &[],
            &[
                &["--kubeconfig", kubeconfig.to_str().expect("path")],
                extra.as_slice(),
            ]
            .concat(),
        )
    });
    while !ready(&server).await {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "not ready in 60 s"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let ready_after = started.elapsed();
    let rss_ready = server.rss_kib();
    let peak_ready = server.peak_rss_kib();
    review_all(&server, comps).await;
    let rss_validated = server.rss_kib();
    let definition_gets = || {
        [Resource::Crds, Resource::Mrds, Resource::Xrds]
            .into_iter()
            .map(|r| api.count(Verb::Get, r))
            .sum::<usize>()
    };
    let gets = definition_gets();
    let mut times = review_all(&server, comps).await;
    let warm_gets = definition_gets() - gets;
    times.sort();
    let (_, metrics) = server.ops_get("/metrics").await;
    let states = metrics
        .lines()
        .filter(|l| {
            l.starts_with("composition_webhook_schema_cache_entries{") && !l.ends_with(" 0")
        })
        .map(|l| l.trim_start_matches("composition_webhook_schema_cache_entries"))
        .collect::<Vec<_>>()
        .join(" ");
    Run {
        ready: ready_after,
        rss_ready,
        peak_ready,
        rss_validated,
        peak: server.peak_rss_kib(),
        p50: percentile(&times, 0.5),
        p99: percentile(&times, 0.99),
        warm_gets,
        states,
    }
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is read from the arguments.
    let runs = setting("CLUSTER_BENCH_RUNS", 5).max(1);
    let total = setting("CLUSTER_BENCH_CRDS", 1000);
    let corpus: PathBuf = project_dir().join("../shared/corpus");
    if !corpus.join("manifest.json").exists() {
        eprintln!("note: {} not found; nothing to measure", corpus.display());
        return;
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let crds = definitions(&corpus.join("crds"), "CustomResourceDefinition");
    let xrds = definitions(&corpus.join("xrds"), "CompositeResourceDefinition");
    let originals: Vec<Value> = crds.into_values().collect();
    let mut all = originals.clone();
    let mut n = 0;
    while all.len() < total {
        all.push(renamed(
            &originals[n % originals.len()],
            "b",
            n / originals.len(),
        ));
        n += 1;
    }
    all.truncate(total.max(originals.len()));
    let crd_bytes: usize = all
        .iter()
        .map(|c| serde_json::to_vec(c).map_or(0, |v| v.len()))
        .sum();
    let mut comps = corpus_compositions(&corpus);
    // What Crossplane v2 makes of a provider's CRDs: Inactive MRDs with the CRDs' specs.
    let mrds: Vec<Value> = (0..setting("CLUSTER_BENCH_MRDS", 1000))
        .map(|i| {
            let c = renamed(&originals[i % originals.len()], "m", i / originals.len());
            let mut spec = c["spec"].clone();
            spec["state"] = json!("Inactive");
            json!({"apiVersion": "apiextensions.crossplane.io/v1alpha1",
                   "kind": "ManagedResourceDefinition", "metadata": c["metadata"], "spec": spec})
        })
        .collect();
    let mrd_bytes: usize = mrds
        .iter()
        .map(|c| serde_json::to_vec(c).map_or(0, |v| v.len()))
        .sum();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let api = FakeApiServer::start().await;
        let cost = PageCost {
            per_page: Duration::from_millis(setting("CLUSTER_BENCH_PAGE_MS", 25) as u64),
            per_object: Duration::from_millis(setting("CLUSTER_BENCH_OBJECT_MS", 1) as u64),
        };
        api.set_etcd_page_cost(cost);
        let watch_cache = setting("CLUSTER_BENCH_WATCH_CACHE", 1) != 0;
        api.set_watch_cache(watch_cache);
        let crd_count = all.len();
        api.apply_all(Resource::Crds, all);
        let xrd_count = xrds.len();
        api.apply_all(Resource::Xrds, xrds.into_values().collect());
        let mrd_count = mrds.len();
        api.apply_all(Resource::Mrds, mrds);
        // Built-in kinds (the corpus composes ConfigMaps, Deployments, RBAC, Ingresses)
        // from what a v1.28.4 API server serves at /openapi/v3.
        let openapi = project_dir().join("../shared/kube-openapi/v1.28.4");
        api.serve_openapi(&openapi);
        // Crossplane v2's getting-started App composes a Deployment and a Service: their
        // schemas come from those documents; its step's Function is installed.
        let app = |f: &str| {
            composition_webhook::document::load_path(&project_dir().join("testdata/v2/app").join(f))
                .expect("testdata/v2/app")
                .remove(0)
                .value
        };
        api.apply(Resource::Xrds, app("definition.yaml"));
        api.apply(
            Resource::Functions,
            json!({"apiVersion": "pkg.crossplane.io/v1", "kind": "Function",
                   "metadata": {"name": "function-patch-and-transform"},
                   "spec": {"package": "xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform:v0.10.8"}}),
        );
        comps.push(("testdata/v2/app/composition.yaml".to_string(), app("composition.yaml")));
        let dir = ScratchDir::new("cluster-bench");
        let kubeconfig = dir.path("kubeconfig");
        api.write_kubeconfig(&kubeconfig);
        println!(
            "API server: {crd_count} CRDs ({} of them the corpus' own, {:.1} MiB of JSON), {mrd_count} MRDs ({:.1} MiB), {xrd_count} XRDs; {} corpus Compositions; {runs} runs",
            originals.len(),
            crd_bytes as f64 / 1_048_576.0,
            mrd_bytes as f64 / 1_048_576.0,
            comps.len()
        );
        println!(
            "etcd pages cost {:?} plus {:?} per object; watch cache {}",
            cost.per_page,
            cost.per_object,
            if watch_cache { "on" } else { "off" }
        );
        let mut results = Vec::new();
        for r in 0..runs {
            let run = one_run(&api, &kubeconfig, &comps).await;
            println!(
                "run {}: ready {:.0} ms, RSS {} ready (peak {}), {} after validating, peak {}; warm review p50 {:.2} ms p99 {:.2} ms; GETs during the warm pass: {}; entries: {}",
                r + 1,
                run.ready.as_secs_f64() * 1000.0,
                mib(run.rss_ready),
                mib(run.peak_ready),
                mib(run.rss_validated),
                mib(run.peak),
                run.p50.as_secs_f64() * 1000.0,
                run.p99.as_secs_f64() * 1000.0,
                run.warm_gets,
                run.states,
            );
            results.push(run);
        }
        let ms = |d: Duration| format!("{:.0} ms", d.as_secs_f64() * 1000.0);
        let ms2 = |d: Duration| format!("{:.2} ms", d.as_secs_f64() * 1000.0);
        let (a, lo, hi) = median(results.iter().map(|r| r.ready).collect());
        println!("time to ready:                 median {} (min {}, max {})", ms(a), ms(lo), ms(hi));
        let (a, lo, hi) = median(results.iter().map(|r| r.rss_ready).collect());
        println!("RSS after sync:                median {} (min {}, max {})", mib(a), mib(lo), mib(hi));
        let (a, lo, hi) = median(results.iter().map(|r| r.peak_ready).collect());
        println!("peak RSS until ready:          median {} (min {}, max {})", mib(a), mib(lo), mib(hi));
        let (a, lo, hi) = median(results.iter().map(|r| r.rss_validated).collect());
        println!("RSS after every Composition:   median {} (min {}, max {})", mib(a), mib(lo), mib(hi));
        let (a, lo, hi) = median(results.iter().map(|r| r.peak).collect());
        println!("peak RSS:                      median {} (min {}, max {})", mib(a), mib(lo), mib(hi));
        let (a, lo, hi) = median(results.iter().map(|r| r.p50).collect());
        println!("warm review p50:               median {} (min {}, max {})", ms2(a), ms2(lo), ms2(hi));
        let (a, lo, hi) = median(results.iter().map(|r| r.p99).collect());
        println!("warm review p99:               median {} (min {}, max {})", ms2(a), ms2(lo), ms2(hi));
        let gets: usize = results.iter().map(|r| r.warm_gets).sum();
        println!("API server GETs during warm passes: {gets}");
        assert_eq!(gets, 0, "a cached kind was fetched again on the request path");
    });
}
