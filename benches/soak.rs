//! Soak: mixed valid, invalid, hostile and large AdmissionReviews at concurrency 8 against
//! the real binary, for ten minutes by default, with the deployment's settings (2 workers,
//! the default review and body memory, `--audit`), its schemas and Compositions from an
//! in-process API server (`tests/kubeapi`) whose definitions and Compositions keep changing.
//! It checks, and fails on, what a webhook in the API server's write path owes:
//!
//! - the server's RSS stays under the deployment's memory limit (640 MiB), sampled every
//!   100 ms and read from `VmHWM` at the end;
//! - after a warm-up (the first fifth), resident memory, open files and threads stay flat:
//!   the last third's highest is at most the middle third's plus 10 % and 16 MiB (memory),
//!   16 files, 4 threads;
//! - every answer comes within its review's timeout (`?timeout=`, 2 s or 10 s);
//! - a strict, invalid Composition is never admitted (valid ones always are, in every mode);
//! - the audit keeps up: it is never stuck, and it ends with every Composition audited or
//!   backing off (the hostile ones);
//! - the server is still up and answering at the end.
//!
//! The cluster: the example's XRD and CRDs, Policy Reporter's CRD, 100 copies of the example
//! Composition (composing their own copy of the Network CRD, in another group), 100 of an
//! invalid one, and the hostile Compositions below stored too (the audit runs them into
//! their deadline and backs off). Every 20 s that copy toggles between the example's schema
//! and one whose `routingMode` admits only `GLOBAL` (every valid copy then denied, and back:
//! 100 Events and a report each time); every 2 s a Composition is updated. Admission's
//! reviews use the example's CRDs, which do not change.
//!
//! The mix, each request picking the next of: the example Composition (valid) in the three
//! modes, a Composition with a typo in a patch path (invalid) in the three modes, and every
//! Composition of `tests/adversary/mod.rs` (a 2^32 array index, million-wide formats,
//! copied environments, a million patches through one patch set, 2,000 large regexps, a
//! 1.5-million-element array, a 10,002-level object, a regexp too large to compile here) in
//! strict and loose mode, and a large valid one (the example with 400 Network templates,
//! about 0.5 MB). A third of the requests carry `?timeout=2s`, the rest 10 s.
//!
//! Settings: `SOAK_SECONDS` (default 600), `SOAK_CONCURRENCY` (default 8). Run with
//! `cargo bench --bench soak` (release build); CI does not run it.

#[path = "../tests/adversary/mod.rs"]
mod adversary;
#[path = "../tests/kubeapi/mod.rs"]
mod kubeapi;
#[path = "../tests/webhook/mod.rs"]
mod webhook;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use kubeapi::{FakeApiServer, Resource};
use serde_json::{Value, json};
use tokio::sync::Mutex;
use webhook::{ScratchDir, Server, composition_review, project_dir, yaml_documents};

/// deploy/'s memory limit.
const MEMORY_LIMIT_KIB: u64 = 640 * 1024;

/// What the answer to a request must be.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Expect {
    /// Valid: allowed in every mode; in strict mode a 504 when the deadline came first
    /// (hostile reviews may hold both workers).
    Allowed { strict: bool },
    /// Invalid and strict: denied, whether validated or not.
    Denied,
    /// Invalid in loose or warn: denied when validated, admitted with a warning if the
    /// deadline came first.
    DeniedOrLate,
    /// Hostile: any well-formed answer in time; never an allow without warnings in strict
    /// mode unless validated clean.
    Any { strict: bool },
}

struct Case {
    name: String,
    body: Arc<Vec<u8>>,
    expect: Expect,
}

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn example() -> Value {
    yaml_documents(&project_dir().join("testdata/example/composition.yaml"))
        .into_iter()
        .find(|d| d["kind"] == "Composition")
        .expect("the example Composition")
}

/// The example with `n` Network templates (each its own name).
fn large(n: usize) -> Value {
    let mut c = example();
    let network = c["spec"]["resources"][0].clone();
    let mut resources = Vec::new();
    for i in 0..n {
        let mut r = network.clone();
        r["name"] = json!(format!("network-{i}"));
        resources.push(r);
    }
    let mut subnetwork = c["spec"]["resources"][1].clone();
    subnetwork["name"] = json!("subnetwork");
    resources.push(subnetwork);
    c["spec"]["resources"] = Value::Array(resources);
    c["metadata"]["name"] = json!("large");
    c
}

fn cases() -> Vec<Case> {
    let example = example();
    let mut cases = Vec::new();
    let mut add = |name: String, body: Vec<u8>, expect: Expect| {
        cases.push(Case {
            name,
            body: Arc::new(body),
            expect,
        })
    };
    let review = |c: Value| serde_json::to_vec(&composition_review("v1", "u", "CREATE", c));
    for mode in ["strict", "loose", "warn"] {
        let mut valid = example.clone();
        valid["metadata"]["annotations"] = serde_json::json!({ adversary::MODE: mode });
        let strict = mode == "strict";
        add(
            format!("valid-{mode}"),
            review(valid).expect("json"),
            Expect::Allowed { strict },
        );
        let expect = if mode == "strict" {
            Expect::Denied
        } else {
            Expect::DeniedOrLate
        };
        let invalid = adversary::invalid(Some(mode));
        add(
            format!("invalid-{mode}"),
            review(invalid).expect("json"),
            expect,
        );
    }
    for mode in ["strict", "loose"] {
        let strict = mode == "strict";
        for (name, c) in adversary::all(Some(mode)) {
            add(
                format!("{name}-{mode}"),
                review(c).expect("json"),
                Expect::Any { strict },
            );
        }
        add(
            format!("deep-{mode}"),
            adversary::deep_review("u", Some(mode), 10_002),
            Expect::Any { strict },
        );
    }
    add(
        "large-loose".to_string(),
        review(large(400)).expect("json"),
        Expect::Allowed { strict: false },
    );
    cases
}

fn one(path: &str) -> Value {
    yaml_documents(&project_dir().join(path))
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("a document in {path}"))
}

/// The group of the stored Compositions' own copy of the Network CRD, the one that changes
/// (so the reviews' verdicts do not).
const AUDITED_GROUP: &str = "soak.example.org";

/// The Network CRD under [`AUDITED_GROUP`].
fn audited_network() -> Value {
    let mut crd = one("testdata/crds/compute.gcp.upbound.io_networks.yaml");
    crd["metadata"]["name"] = json!(format!("networks.{AUDITED_GROUP}"));
    crd["spec"]["group"] = json!(AUDITED_GROUP);
    crd
}

/// The example composing [`audited_network`]'s Network.
fn audited_example(name: String) -> Value {
    let mut c = named(example(), name);
    let base = &mut c["spec"]["resources"][0]["base"];
    let version = base["apiVersion"]
        .as_str()
        .and_then(|v| v.rsplit('/').next())
        .unwrap_or("v1beta1")
        .to_string();
    base["apiVersion"] = json!(format!("{AUDITED_GROUP}/{version}"));
    c
}

/// A Network CRD whose `routingMode` admits only `GLOBAL`: the example denied.
fn network_global_only(mut crd: Value) -> Value {
    for v in crd["spec"]["versions"].as_array_mut().expect("versions") {
        v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["forProvider"]["properties"]
            ["routingMode"]["enum"] = json!(["GLOBAL"]);
    }
    crd
}

/// `c` named `name`.
fn named(mut c: Value, name: String) -> Value {
    c["metadata"] = json!({"name": name});
    c
}

/// The in-process API server with the cluster the soak audits.
fn cluster(api: &FakeApiServer) -> usize {
    api.apply(Resource::Xrds, one("testdata/example/definition.yaml"));
    api.apply(
        Resource::Crds,
        one("testdata/crds/compute.gcp.upbound.io_networks.yaml"),
    );
    api.apply(
        Resource::Crds,
        one("testdata/crds/compute.gcp.upbound.io_subnetworks.yaml"),
    );
    api.apply(Resource::Crds, audited_network());
    api.apply(Resource::Crds, kubeapi::policy_report_crd());
    let mut compositions = Vec::new();
    for i in 0..100 {
        compositions.push(audited_example(format!("valid-{i}")));
        compositions.push(named(adversary::invalid(None), format!("invalid-{i}")));
    }
    for (name, c) in adversary::all(None) {
        compositions.push(named(c, format!("hostile-{}", name.replace('_', "-"))));
    }
    let n = compositions.len();
    api.apply_all(Resource::Compositions, compositions);
    n
}

/// One sample of the server's resources.
#[derive(Clone, Copy, Debug, Default)]
struct Sample {
    at: Duration,
    rss_kib: u64,
    fds: u64,
    threads: u64,
}

fn sample(pid: u32, at: Duration) -> Sample {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
            .unwrap_or(0u64)
    };
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count() as u64);
    Sample {
        at,
        rss_kib: field("VmRSS:"),
        fds,
        threads: field("Threads:"),
    }
}

/// The highest of each resource over `samples`.
fn highest(samples: &[Sample]) -> Sample {
    samples.iter().fold(Sample::default(), |m, s| Sample {
        at: s.at,
        rss_kib: m.rss_kib.max(s.rss_kib),
        fds: m.fds.max(s.fds),
        threads: m.threads.max(s.threads),
    })
}

#[derive(Default)]
struct Tally {
    by_case: std::collections::BTreeMap<String, Vec<Duration>>,
    failures: Vec<String>,
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn main() {
    let seconds = env("SOAK_SECONDS", 600);
    let concurrency = env("SOAK_CONCURRENCY", 8) as usize;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let _ = rustls::crypto::ring::default_provider().install_default();
    let api = runtime.block_on(FakeApiServer::start());
    let stored = cluster(&api);
    let dir = ScratchDir::new("soak");
    let kubeconfig = dir.path("kubeconfig");
    api.write_kubeconfig(&kubeconfig);
    let server = Server::start(
        &[],
        &[
            "--kubeconfig",
            kubeconfig.to_str().expect("utf-8 path"),
            "--audit",
            "--workers",
            "2",
        ],
    );
    let pid = server.pid();
    let cases = Arc::new(cases());
    println!(
        "soak: {} cases, concurrency {concurrency}, {seconds} s, {stored} Compositions audited, server pid {pid}",
        cases.len()
    );
    let samples: Arc<std::sync::Mutex<Vec<Sample>>> = Arc::default();
    let tally = Arc::new(Mutex::new(Tally::default()));
    let peak_sampled = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let api = Arc::new(api);
    runtime.block_on(async {
        let sampler = {
            let peak = peak_sampled.clone();
            let stop = stop.clone();
            let samples = samples.clone();
            tokio::spawn(async move {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let s = sample(pid, started.elapsed());
                    peak.fetch_max(s.rss_kib, Ordering::Relaxed);
                    if n.is_multiple_of(10) {
                        samples.lock().expect("samples").push(s);
                    }
                    n += 1;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            })
        };
        // The cluster changing under the audit.
        let churn = {
            let api = api.clone();
            let stop = stop.clone();
            tokio::spawn(async move {
                let network = audited_network();
                let global = network_global_only(network.clone());
                let mut tick = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    tick += 1;
                    let mut c = audited_example(format!("valid-{}", tick % 100));
                    c["metadata"]["labels"] = json!({"tick": tick.to_string()});
                    api.apply(Resource::Compositions, c);
                    if tick.is_multiple_of(10) {
                        let crd = if tick.is_multiple_of(20) {
                            &network
                        } else {
                            &global
                        };
                        api.apply(Resource::Crds, crd.clone());
                    }
                }
            })
        };
        let mut workers = Vec::new();
        for _ in 0..concurrency {
            let client = server.client();
            let cases = cases.clone();
            let tally = tally.clone();
            let next = next.clone();
            workers.push(tokio::spawn(async move {
                while started.elapsed() < Duration::from_secs(seconds) {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    let case = &cases[(n as usize) % cases.len()];
                    let timeout = if n.is_multiple_of(3) { 2 } else { 10 };
                    let path = format!("/validate?timeout={timeout}s");
                    let sent = Instant::now();
                    let reply = client
                        .request("POST", &path, Some("application/json"), case.body.to_vec())
                        .await;
                    let took = sent.elapsed();
                    let failure = judge(case, &reply, took, Duration::from_secs(timeout));
                    let mut t = tally.lock().await;
                    t.by_case.entry(case.name.clone()).or_default().push(took);
                    if let Some(f) = failure {
                        t.failures.push(f);
                    }
                }
            }));
        }
        for w in workers {
            let _ = w.await;
        }
        stop.store(true, Ordering::Relaxed);
        let _ = sampler.await;
        let _ = churn.await;
        // Still up and answering.
        let client = server.client();
        let last = client
            .request(
                "POST",
                "/validate?timeout=10s",
                Some("application/json"),
                cases[0].body.to_vec(),
            )
            .await;
        if last.status != 200 {
            tally
                .lock()
                .await
                .failures
                .push(format!("final review: HTTP {}", last.status));
        }
    });
    // The audit, its last CRD toggle worked through.
    std::thread::sleep(Duration::from_secs(3));
    let audit: Value = runtime.block_on(async {
        let (_, body) = server.ops_get("/debug/audit").await;
        serde_json::from_str(&body).unwrap_or(Value::Null)
    });
    let events = api.events().len();
    let after = server.rss_kib();
    let hwm = server.peak_rss_kib();
    let sampled = peak_sampled.load(Ordering::Relaxed);
    let tally = runtime.block_on(async { std::mem::take(&mut *tally.lock().await) });
    let total: usize = tally.by_case.values().map(Vec::len).sum();
    println!(
        "{total} reviews in {:.0} s ({:.1}/s)",
        started.elapsed().as_secs_f64(),
        total as f64 / started.elapsed().as_secs_f64()
    );
    println!(
        "{:<28} {:>7} {:>10} {:>10} {:>10}",
        "case", "n", "p50", "p99", "max"
    );
    for (name, mut times) in tally.by_case {
        times.sort();
        println!(
            "{:<28} {:>7} {:>10.1?} {:>10.1?} {:>10.1?}",
            name,
            times.len(),
            percentile(&times, 0.5),
            percentile(&times, 0.99),
            times.last().copied().unwrap_or_default()
        );
    }
    println!(
        "server RSS: peak {} MiB (VmHWM), highest sample {} MiB, {} MiB 3 s after the load; limit {} MiB",
        hwm / 1024,
        sampled / 1024,
        after / 1024,
        MEMORY_LIMIT_KIB / 1024
    );
    let mut failures = tally.failures;
    if hwm >= MEMORY_LIMIT_KIB {
        failures.push(format!("peak RSS {hwm} KiB over the limit"));
    }
    // Flat after the warm-up: the last third against the middle one.
    let samples = samples.lock().expect("samples").clone();
    println!(
        "{:>6} {:>8} {:>6} {:>8}   (server, every {} s)",
        "t",
        "RSS MiB",
        "files",
        "threads",
        (seconds / 20).max(1)
    );
    let every = (seconds / 20).max(1) as usize;
    for s in samples.iter().step_by(every) {
        println!(
            "{:>5}s {:>8} {:>6} {:>8}",
            s.at.as_secs(),
            s.rss_kib / 1024,
            s.fds,
            s.threads
        );
    }
    let warm = samples.len() / 5;
    let rest = &samples[warm.min(samples.len())..];
    let (middle, last) = rest.split_at(rest.len() / 2);
    let (m, l) = (highest(middle), highest(last));
    println!(
        "after the warm-up ({} s): highest in the middle {} MiB, {} files, {} threads; in the last third {} MiB, {} files, {} threads",
        samples.get(warm).map_or(0, |s| s.at.as_secs()),
        m.rss_kib / 1024,
        m.fds,
        m.threads,
        l.rss_kib / 1024,
        l.fds,
        l.threads
    );
    if !middle.is_empty() && !last.is_empty() {
        if l.rss_kib > m.rss_kib + m.rss_kib / 10 + 16 * 1024 {
            failures.push(format!("RSS grew: {} -> {} KiB", m.rss_kib, l.rss_kib));
        }
        if l.fds > m.fds + 16 {
            failures.push(format!("open files grew: {} -> {}", m.fds, l.fds));
        }
        if l.threads > m.threads + 4 {
            failures.push(format!("threads grew: {} -> {}", m.threads, l.threads));
        }
    }
    let audited = audit["audited"].as_u64().unwrap_or(0);
    let retrying = audit["retrying"].as_u64().unwrap_or(0);
    println!(
        "audit: {audited} audited ({} allowed, {} denied), {retrying} backing off, {} queued, validations {}; {events} Events, report written {} times",
        audit["allowed"],
        audit["denied"],
        audit["queued"],
        audit["validations"],
        audit["policyReport"]["writes"]
    );
    if audited + retrying < stored as u64 {
        failures.push(format!(
            "the audit did not keep up: {audited} audited and {retrying} backing off of {stored}"
        ));
    }
    println!("failures: {}", failures.len());
    for f in failures.iter().take(20) {
        println!("  {f}");
    }
    if !failures.is_empty() {
        std::process::exit(1);
    }
}

/// What is wrong with an answer, if anything.
fn judge(case: &Case, reply: &webhook::Reply, took: Duration, timeout: Duration) -> Option<String> {
    let name = &case.name;
    if reply.status != 200 {
        return Some(format!("{name}: HTTP {}", reply.status));
    }
    if took > timeout {
        return Some(format!(
            "{name}: answered after {took:?}, past its {timeout:?}"
        ));
    }
    let v: Value = match serde_json::from_slice(&reply.body) {
        Ok(v) => v,
        Err(e) => return Some(format!("{name}: {e}")),
    };
    let response = &v["response"];
    if response["uid"] != "u" {
        return Some(format!("{name}: uid {}", response["uid"]));
    }
    let allowed = response["allowed"].as_bool();
    let code = response["status"]["code"].as_i64();
    let warnings = response["warnings"].as_array().map_or(0, Vec::len);
    let ok = match case.expect {
        Expect::Allowed { strict } => allowed == Some(true) || (strict && code == Some(504)),
        Expect::Denied => allowed == Some(false),
        Expect::DeniedOrLate => allowed == Some(false) || warnings > 0,
        Expect::Any { strict } => {
            let unvalidated = response["warnings"].as_array().is_some_and(|w| {
                w.iter().any(|w| {
                    let w = w.as_str().unwrap_or_default();
                    w.contains("was not validated") || w.contains("without validation")
                })
            });
            code != Some(500) && (!strict || allowed == Some(false) || !unvalidated)
        }
    };
    (!ok).then(|| {
        format!(
            "{name}: allowed {allowed:?}, code {code:?}, {warnings} warnings: {}",
            response["status"]["message"]
                .as_str()
                .unwrap_or_default()
                .chars()
                .take(200)
                .collect::<String>()
        )
    })
}
