//! Soak: mixed valid, invalid and hostile AdmissionReviews at concurrency 8 against the real
//! binary, for ten minutes by default, with the deployment's settings (2 workers, the
//! default review and body memory). It checks, and fails on, what issue "Bounded by
//! construction" asks of a webhook in the API server's write path:
//!
//! - the server's RSS stays under the deployment's memory limit less the audit's share,
//!   which the soak does not run (640 − 2 × 64 = 512 MiB), sampled every 100 ms and read
//!   from `VmHWM` at the end;
//! - every answer comes within its review's timeout (`?timeout=`, 2 s or 10 s);
//! - a strict, invalid Composition is never admitted (valid ones always are, in every mode);
//! - the server is still up and answering at the end.
//!
//! The mix, each request picking the next of: the example Composition (valid) in the three
//! modes, a Composition with a typo in a patch path (invalid) in the three modes, and every
//! Composition of `tests/adversary/mod.rs` (a 2^32 array index, million-wide formats,
//! copied environments, a million patches through one patch set, 2,000 large regexps, a
//! 1.5-million-element array, a 10,002-level object, a regexp too large to compile here) in
//! strict and loose mode. A third of the requests carry `?timeout=2s`, the rest 10 s.
//!
//! Settings: `SOAK_SECONDS` (default 600), `SOAK_CONCURRENCY` (default 8). Run with
//! `cargo bench --bench soak` (release build); CI does not run it.

#[path = "../tests/adversary/mod.rs"]
mod adversary;
#[path = "../tests/webhook/mod.rs"]
mod webhook;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::Mutex;
use webhook::{Server, composition_review, project_dir, yaml_documents};

const MEMORY_LIMIT_KIB: u64 = 512 * 1024;

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

fn cases() -> Vec<Case> {
    let example = yaml_documents(&project_dir().join("testdata/example/composition.yaml"))
        .into_iter()
        .find(|d| d["kind"] == "Composition")
        .expect("the example Composition");
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
    cases
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
    let crds: Vec<PathBuf> = vec![
        project_dir().join("testdata/crds"),
        project_dir().join("testdata/example/definition.yaml"),
    ];
    let refs: Vec<&Path> = crds.iter().map(PathBuf::as_path).collect();
    let server = Server::start(&refs, &["--workers", "2"]);
    let pid = server.pid();
    let cases = Arc::new(cases());
    println!(
        "soak: {} cases, concurrency {concurrency}, {seconds} s, server pid {pid}",
        cases.len()
    );

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let tally = Arc::new(Mutex::new(Tally::default()));
    let peak_sampled = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    runtime.block_on(async {
        let sampler = {
            let peak = peak_sampled.clone();
            let stop = stop.clone();
            let rss = move || {
                std::fs::read_to_string(format!("/proc/{pid}/status"))
                    .ok()
                    .and_then(|s| {
                        s.lines()
                            .find_map(|l| l.strip_prefix("VmRSS:"))
                            .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
                    })
                    .unwrap_or(0u64)
            };
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    peak.fetch_max(rss(), Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(100)).await;
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
    // What the server keeps once the load is over (freed memory given back).
    std::thread::sleep(Duration::from_secs(3));
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
