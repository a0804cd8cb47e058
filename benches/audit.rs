//! Scale benchmark of `composition-webhook audit` on a cluster: the real binary (the
//! bench-profile build) against an in-process API server (`tests/kubeapi`, HTTPS, driven by
//! the real kube client) holding 1,000 Compositions.
//!
//! The Compositions: every Composition of `../shared/corpus` (its `manifest.json`), copied
//! under distinct names (`a<n>-<name>`) up to 1,000; their schemas: every distinct CRD of
//! `../shared/corpus/crds` (by name; of several provider versions, the largest) and copies of
//! them under generated API groups up to 1,000 CRDs, as `benches/cluster.rs` serves them,
//! every distinct XRD of `../shared/corpus/xrds`, the built-in kinds' OpenAPI v3 documents of
//! `../shared/kube-openapi/v1.28.4`, and a Function for every pipeline step's `functionRef`.
//! Each run audits the whole cluster once (`--output json`, to check the count) and measures:
//!
//! - wall time from start to exit, and Compositions per second;
//! - peak resident memory (VmHWM of `/proc/<pid>/status`, read every 5 ms until exit);
//! - the API server's calls: lists of Compositions, and GETs of definitions (each needed
//!   kind fetched once per run).
//!
//! Then the same cluster under `serve --audit` (the background audit), once per
//! `--audit-cpu` share (`AUDIT_BENCH_SERVE_CPU`, default `1 0.25`): the time from start until
//! `/debug/audit` has every Composition audited and nothing queued, resident memory then and
//! its peak, and the Compositions each verdict went to.
//!
//! Medians across runs are printed with their min and max. Settings: `AUDIT_BENCH_RUNS`
//! (default 5), `AUDIT_BENCH_COMPOSITIONS` (default 1000), `AUDIT_BENCH_CRDS` (default 1000),
//! `AUDIT_BENCH_ARGS` (more arguments for `audit`, e.g. `--no-render`).
//!
//! Run with `cargo bench --bench audit`.

#[path = "common/cluster_data.rs"]
mod cluster_data;
#[path = "../tests/kubeapi/mod.rs"]
mod kubeapi;
#[path = "../tests/webhook/mod.rs"]
mod webhook;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cluster_data::{corpus_compositions, definitions, median, mib, renamed, setting};
use kubeapi::{FakeApiServer, Resource, Verb};
use serde_json::{Value, json};

fn project_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A Function for each `functionRef.name` of the Compositions' pipelines.
fn functions(compositions: &[Value]) -> Vec<Value> {
    let names: BTreeSet<&str> = compositions
        .iter()
        .flat_map(|c| c["spec"]["pipeline"].as_array().into_iter().flatten())
        .filter_map(|step| step["functionRef"]["name"].as_str())
        .collect();
    names
        .into_iter()
        .map(|name| {
            let package = if name.contains("patch-and-transform") {
                "xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform:v0.10.8"
                    .to_string()
            } else {
                format!("xpkg.crossplane.io/crossplane-contrib/{name}:v0.1.0")
            };
            json!({"apiVersion": "pkg.crossplane.io/v1", "kind": "Function",
                   "metadata": {"name": name}, "spec": {"package": package}})
        })
        .collect()
}

/// VmHWM of a process, in KiB; `None` once it is gone.
fn peak_kib(pid: u32) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

struct Run {
    wall: Duration,
    peak_kib: u64,
    summary: Value,
    lists: usize,
    gets: usize,
}

fn one_run(api: &FakeApiServer, kubeconfig: &Path, extra: &[&str]) -> Run {
    api.clear_requests();
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_composition-webhook"))
        .args(["audit", "--output", "json", "--kubeconfig"])
        .arg(kubeconfig)
        .args(extra)
        .env_remove("KUBECONFIG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the binary");
    let pid = child.id();
    // The output is read on its own thread, so that a full pipe never stalls the audit.
    let mut stdout = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = std::io::Read::read_to_end(&mut stdout, &mut bytes);
        bytes
    });
    let mut peak = 0;
    let status = loop {
        if let Some(kib) = peak_kib(pid) {
            peak = peak.max(kib);
        }
        match child.try_wait().expect("wait") {
            Some(status) => break status,
            None => std::thread::sleep(Duration::from_millis(5)),
        }
    };
    let wall = started.elapsed();
    let out = reader.join().expect("the reader");
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut err);
    }
    assert!(
        matches!(status.code(), Some(0 | 1)),
        "audit failed ({status}): {err}"
    );
    let v: Value = serde_json::from_slice(&out).expect("the audit's JSON");
    let gets = [Resource::Crds, Resource::Xrds]
        .into_iter()
        .map(|r| api.count(Verb::Get, r))
        .sum();
    Run {
        wall,
        peak_kib: peak,
        summary: v["summary"].clone(),
        lists: api.count(Verb::List, Resource::Compositions),
        gets,
    }
}

/// One background audit of the whole cluster by `serve --audit --audit-cpu share`: the time
/// until every Composition is audited, RSS then, peak RSS, and `/debug/audit`'s counts.
async fn serve_run(kubeconfig: &Path, total: usize, share: &str) -> (Duration, u64, u64, Value) {
    let started = Instant::now();
    let server = tokio::task::block_in_place(|| {
        webhook::Server::start(
            &[],
            &[
                "--kubeconfig",
                kubeconfig.to_str().expect("path"),
                "--audit",
                "--audit-cpu",
                share,
            ],
        )
    });
    loop {
        let (status, body) = server.ops_get("/debug/audit").await;
        if status == 200
            && let Ok(v) = serde_json::from_str::<Value>(&body)
            && v["audited"].as_u64() == Some(total as u64)
            && v["queued"] == 0
        {
            let took = started.elapsed();
            let counts = json!({
                "allowed": v["allowed"], "denied": v["denied"], "retrying": v["retrying"],
                "validations": v["validations"],
            });
            return (took, server.rss_kib(), server.peak_rss_kib(), counts);
        }
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "the background audit did not finish in 600 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is read from the arguments.
    let runs = setting("AUDIT_BENCH_RUNS", 5).max(1);
    let total = setting("AUDIT_BENCH_COMPOSITIONS", 1000).max(1);
    let crd_total = setting("AUDIT_BENCH_CRDS", 1000);
    let extra_args = std::env::var("AUDIT_BENCH_ARGS").unwrap_or_default();
    let extra: Vec<&str> = extra_args.split_whitespace().collect();
    let corpus = project_dir().join("../shared/corpus");
    if !corpus.join("manifest.json").exists() {
        eprintln!("note: {} not found; nothing to measure", corpus.display());
        return;
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let originals: Vec<Value> = definitions(&corpus.join("crds"), "CustomResourceDefinition")
        .into_values()
        .collect();
    let mut crds = originals.clone();
    let mut n = 0;
    while crds.len() < crd_total {
        crds.push(renamed(
            &originals[n % originals.len()],
            "b",
            n / originals.len(),
        ));
        n += 1;
    }
    let xrds = definitions(&corpus.join("xrds"), "CompositeResourceDefinition");
    let sources: Vec<Value> = corpus_compositions(&corpus)
        .into_iter()
        .map(|(_, c)| c)
        .collect();
    let fns = functions(&sources);
    let compositions: Vec<Value> = (0..total)
        .map(|i| {
            let mut c = sources[i % sources.len()].clone();
            let name = c["metadata"]["name"].as_str().unwrap_or("composition");
            c["metadata"]["name"] = json!(format!("a{i:04}-{name}"));
            c
        })
        .collect();
    let composition_bytes: usize = compositions
        .iter()
        .map(|c| serde_json::to_vec(c).map_or(0, |v| v.len()))
        .sum();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let api = runtime.block_on(FakeApiServer::start());
    let crd_count = crds.len();
    api.apply_all(Resource::Crds, crds);
    let xrd_count = xrds.len();
    api.apply_all(Resource::Xrds, xrds.into_values().collect());
    let fn_count = fns.len();
    api.apply_all(Resource::Functions, fns);
    api.apply_all(Resource::Compositions, compositions);
    api.serve_openapi(&project_dir().join("../shared/kube-openapi/v1.28.4"));
    let dir = std::env::temp_dir().join(format!("cw-audit-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let kubeconfig = dir.join("kubeconfig");
    api.write_kubeconfig(&kubeconfig);
    println!(
        "API server: {total} Compositions ({} distinct corpus ones, {:.1} MiB of JSON), {crd_count} CRDs ({} of them the corpus' own), {xrd_count} XRDs, {fn_count} Functions; {runs} runs{}",
        sources.len(),
        composition_bytes as f64 / 1_048_576.0,
        originals.len(),
        if extra.is_empty() {
            String::new()
        } else {
            format!(", audit {}", extra.join(" "))
        }
    );
    let mut results = Vec::new();
    for r in 0..runs {
        let run = one_run(&api, &kubeconfig, &extra);
        println!(
            "run {}: {:.2} s, {:.0} Compositions/s, peak RSS {}; {} lists of Compositions, {} GETs of definitions; summary {}",
            r + 1,
            run.wall.as_secs_f64(),
            total as f64 / run.wall.as_secs_f64(),
            mib(run.peak_kib),
            run.lists,
            run.gets,
            run.summary,
        );
        assert_eq!(
            run.summary["compositions"], total,
            "every Composition audited"
        );
        results.push(run);
    }
    let s = |d: Duration| format!("{:.2} s", d.as_secs_f64());
    let (a, lo, hi) = median(results.iter().map(|r| r.wall).collect());
    println!(
        "wall time:          median {} (min {}, max {})",
        s(a),
        s(lo),
        s(hi)
    );
    let rate = |d: Duration| total as f64 / d.as_secs_f64();
    println!(
        "Compositions/s:     median {:.0} (min {:.0}, max {:.0})",
        rate(a),
        rate(hi),
        rate(lo)
    );
    let (a, lo, hi) = median(results.iter().map(|r| r.peak_kib).collect());
    println!(
        "peak RSS:           median {} (min {}, max {})",
        mib(a),
        mib(lo),
        mib(hi)
    );

    let shares = std::env::var("AUDIT_BENCH_SERVE_CPU").unwrap_or_else(|_| "1 0.25".to_string());
    for share in shares.split_whitespace() {
        let mut took = Vec::new();
        let mut rss = Vec::new();
        let mut peaks = Vec::new();
        for r in 0..runs {
            let (t, now, peak, counts) = runtime.block_on(serve_run(&kubeconfig, total, share));
            println!(
                "serve --audit --audit-cpu {share}, run {}: every Composition audited after {:.2} s ({:.0}/s), RSS then {}, peak {}; {counts}",
                r + 1,
                t.as_secs_f64(),
                total as f64 / t.as_secs_f64(),
                mib(now),
                mib(peak),
            );
            took.push(t);
            rss.push(now);
            peaks.push(peak);
        }
        let (a, lo, hi) = median(took);
        println!(
            "serve --audit --audit-cpu {share}: all audited after median {} (min {}, max {}); RSS then median {}; peak median {}",
            s(a),
            s(lo),
            s(hi),
            mib(median(rss).0),
            mib(median(peaks).0),
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    drop(api);
    runtime.shutdown_background();
}
