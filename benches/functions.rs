//! What a pipeline step that calls a function costs a validation, against the function's own
//! time: function-pythonic 0.6.3 (`benches/common/pythonic.rs`) and
//! `testdata/bench/pythonic-pt/`, a Composition whose pipeline is a
//! function-patch-and-transform step composing a ConfigMap (run by the webhook itself) and a
//! function-pythonic step composing a Deployment (`composition.yaml`), and the same without
//! the pythonic step (`composition-pt.yaml`).
//!
//! In rounds, interleaved, each on one thread and without HTTP or TLS:
//!
//! - **without**: `composition-pt.yaml` validated as the webhook validates an admitted
//!   Composition (loose mode, rendered validation, the calls of `serve --function-address`);
//! - **with**: `composition.yaml` the same way: the pythonic step called over insecure gRPC
//!   by [`FunctionCaller`] (as `serve` calls it), what it composes validated; and, inside it,
//!   the call alone (the caller's `run`: the request built by `runner::steps::to_proto`,
//!   sent, the answer read back into JSON);
//! - **direct**: the same `RunFunctionRequest` (recorded from the first validation, so byte
//!   for byte what the webhook sends) sent by a [`FunctionClient`] of its own, at each
//!   concurrency level: the function's own time plus a loopback gRPC round trip.
//!
//! It prints medians and p99s of each, the difference of the validations' medians (what a
//! call adds to a review) and the function's CPU time per call (from `/proc`). Through the
//! server, `SERVE_BENCH_PYTHONIC=1
//! SERVE_BENCH_COMPOSITION=testdata/bench/pythonic-pt/composition.yaml cargo bench --bench
//! serve` (and `composition-pt.yaml`) measures the same Compositions under load.
//!
//! Settings (environment): `FUNCTION_BENCH_ROUNDS` (default 5), `FUNCTION_BENCH_CALLS`
//! (calls or validations of each kind per round, default 300), `FUNCTION_BENCH_WARMUP`
//! (calls of each kind before the rounds, default 100), `FUNCTION_BENCH_CONCURRENCY`
//! (concurrency levels of the direct calls after the rounds, default `1,2,8`; the server
//! calls a function from at most `--workers` review threads at once, by default one per
//! core).
//!
//! Run with `cargo bench --bench functions`.

#[path = "common/pythonic.rs"]
mod pythonic;

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use composition_webhook::document;
use composition_webhook::findings::Severity;
use composition_webhook::mode::Mode;
use composition_webhook::render::Calls;
use composition_webhook::render::function_steps::{
    NothingRequired, StepAnswer, StepFailure, StepRequest, StepRunner,
};
use composition_webhook::runner::proto::RunFunctionRequest;
use composition_webhook::runner::steps::{self, Addresses, FunctionCaller};
use composition_webhook::runner::{Config, FunctionClient};
use composition_webhook::schema::Catalog;
use composition_webhook::validate::{Options, Report, Validator};
use serde_json::Value;

/// The server's allocator, as in the other benches.
#[global_allocator]
static GLOBAL: composition_webhook::budget::CountingAllocator<mimalloc::MiMalloc> =
    composition_webhook::budget::CountingAllocator(mimalloc::MiMalloc);

const CASE: &str = "testdata/bench/pythonic-pt";

fn project_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .map(|v| v.parse().unwrap_or_else(|_| panic!("invalid {name} {v:?}")))
        .unwrap_or(default)
}

/// The first document of `kind` in `file` (under [`CASE`]).
fn document_of(file: &str, kind: &str) -> Value {
    let path = project_dir().join(CASE).join(file);
    document::load_path(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .into_iter()
        .map(|d| d.value)
        .find(|v| v["kind"] == kind)
        .unwrap_or_else(|| panic!("{}: no {kind}", path.display()))
}

/// Calls through the webhook's caller, timing each call and recording the first request.
struct Timed {
    caller: FunctionCaller,
    record: Mutex<Option<RunFunctionRequest>>,
    recording: std::sync::atomic::AtomicBool,
    times: Mutex<Vec<Duration>>,
}

impl StepRunner for Timed {
    fn address(&self, function: &str) -> Result<String, Option<String>> {
        self.caller.address(function)
    }

    fn run(
        &self,
        function: &str,
        request: &StepRequest<'_>,
        deadline: Option<Instant>,
    ) -> Result<StepAnswer, StepFailure> {
        if self
            .recording
            .swap(false, std::sync::atomic::Ordering::Relaxed)
        {
            let proto = steps::to_proto(request).expect("the request encodes");
            *self.record.lock().expect("lock") = Some(proto);
        }
        let started = Instant::now();
        let answer = self.caller.run(function, request, deadline);
        self.times.lock().expect("lock").push(started.elapsed());
        answer
    }
}

fn validate(catalog: &Catalog, runner: &Timed, composition: &Value) -> Report {
    let calls = Calls {
        runner,
        required: &NothingRequired,
        observed: None,
        keep_answers: false,
        observed_resources: None,
    };
    Validator::new(catalog, Options::admitted(Mode::Loose, true))
        .with_calls(calls)
        .validate_value(composition)
}

/// Median and p99 (nearest rank) of `times`, in µs.
fn median_p99(times: &[Duration]) -> (f64, f64) {
    let mut v: Vec<f64> = times.iter().map(|d| d.as_secs_f64() * 1e6).collect();
    v.sort_by(f64::total_cmp);
    let rank = |p: f64| v[((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
    (rank(0.5), rank(0.99))
}

fn cpu_time(pid: u32) -> Duration {
    let ticks = Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .unwrap_or(100.0);
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, a)| a).unwrap_or_default();
    let fields: Vec<&str> = after.split_whitespace().collect();
    let used: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i).and_then(|f| f.parse::<u64>().ok()))
        .sum();
    Duration::from_secs_f64(used as f64 / ticks)
}

/// This process's CPU time (every thread), to the nanosecond.
fn own_cpu() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec to write to.
    let ok = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) } == 0;
    if !ok {
        return Duration::ZERO;
    }
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// Findings of a report, one a line.
fn findings(report: &Report) -> String {
    report
        .findings
        .iter()
        .map(|f| format!("\n      {:?}: {}", f.severity, f.error))
        .collect()
}

fn main() {
    let rounds = setting("FUNCTION_BENCH_ROUNDS", 5).max(1);
    let per_round = setting("FUNCTION_BENCH_CALLS", 300).max(1);
    let warmup = setting("FUNCTION_BENCH_WARMUP", 100);
    let levels: Vec<usize> = std::env::var("FUNCTION_BENCH_CONCURRENCY")
        .unwrap_or_else(|_| "1,2,8".into())
        .split(',')
        .map(|n| n.trim().parse().expect("a concurrency level"))
        .collect();

    let load_before = loadavg();
    let function = pythonic::start();
    let function_pid = function.pid;

    let mut catalog = Catalog::new();
    let xrd = document_of("xrd.yaml", "CompositeResourceDefinition");
    catalog.add_document(&xrd, "xrd.yaml").expect("the XRD");
    let with = document_of("composition.yaml", "Composition");
    let without = document_of("composition-pt.yaml", "Composition");

    let mut addresses = Addresses::new();
    addresses.insert(pythonic::NAME, &function.address());
    let runner = Timed {
        caller: FunctionCaller::with_own_runtime(Arc::new(addresses)).expect("a runtime"),
        record: Mutex::new(None),
        recording: std::sync::atomic::AtomicBool::new(true),
        times: Mutex::new(Vec::new()),
    };

    // The answers, once: the pythonic step called once, nothing denied.
    let report = validate(&catalog, &runner, &with);
    assert_eq!(
        report.function_calls,
        1,
        "composition.yaml calls function-pythonic once{}",
        findings(&report)
    );
    assert!(
        report.verdict.allowed && report.count(Severity::Error) == 0,
        "composition.yaml is allowed without errors{}",
        findings(&report)
    );
    let plain = validate(&catalog, &runner, &without);
    assert_eq!(plain.function_calls, 0, "composition-pt.yaml calls nothing");
    assert!(plain.verdict.allowed, "composition-pt.yaml is allowed");
    let request = runner
        .record
        .lock()
        .expect("lock")
        .take()
        .expect("the request was recorded");
    let request_bytes = prost::Message::encoded_len(&request);

    println!("function calls: function-pythonic 0.6.3 over insecure gRPC on loopback");
    println!(
        "   {CASE}/composition.yaml: allowed with {} warnings, {} function call; composition-pt.yaml: allowed with {} warnings",
        report.count(Severity::Warning),
        report.function_calls,
        plain.count(Severity::Warning)
    );
    println!(
        "   the request the webhook sends: {request_bytes} bytes of protobuf; {rounds} rounds of {per_round} of each kind after {warmup}; load average before: {load_before}"
    );

    // The direct client, on a runtime of its own.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let client = {
        let _entered = runtime.enter();
        Arc::new(
            FunctionClient::new(
                pythonic::NAME,
                Config::insecure(format!("http://{}", function.address())),
            )
            .expect("a client"),
        )
    };
    let direct = |n: usize, concurrency: usize| -> Vec<Duration> {
        runtime.block_on(async {
            let tasks: Vec<_> = (0..concurrency)
                .map(|i| {
                    let client = client.clone();
                    let request = request.clone();
                    let calls = n / concurrency + usize::from(i < n % concurrency);
                    tokio::spawn(async move {
                        let mut times = Vec::with_capacity(calls);
                        for _ in 0..calls {
                            let started = Instant::now();
                            client
                                .run(request.clone(), Duration::from_secs(30))
                                .await
                                .expect("function-pythonic answers");
                            times.push(started.elapsed());
                        }
                        times
                    })
                })
                .collect();
            let mut all = Vec::with_capacity(n);
            for t in tasks {
                all.extend(t.await.expect("a task"));
            }
            all
        })
    };
    let validations = |composition: &Value, n: usize| -> Vec<Duration> {
        (0..n)
            .map(|_| {
                let started = Instant::now();
                std::hint::black_box(validate(&catalog, &runner, composition));
                started.elapsed()
            })
            .collect()
    };

    // Warm-up of each kind.
    validations(&without, warmup);
    validations(&with, warmup);
    direct(warmup, 1);
    runner.times.lock().expect("lock").clear();

    // Per kind: every time, each round's median, and the CPU time of this process (the
    // validation, or the client and its runtime threads) and of the function.
    struct Kind {
        name: &'static str,
        times: Vec<Duration>,
        medians: Vec<f64>,
        own_cpu: Option<Duration>,
        function_cpu: Option<Duration>,
    }
    let kind = |name, measured_cpu: bool| Kind {
        name,
        times: Vec::new(),
        medians: Vec::new(),
        own_cpu: measured_cpu.then_some(Duration::ZERO),
        function_cpu: (measured_cpu && function_pid.is_some()).then_some(Duration::ZERO),
    };
    let mut kinds = [
        kind("without (P&T step only)", true),
        kind("with (P&T + pythonic step)", true),
        kind("  the call inside it (FunctionCaller::run)", false),
        kind("direct call, same request (FunctionClient::run)", true),
    ];
    let measure = |k: &mut Kind, run: &mut dyn FnMut() -> Vec<Duration>| {
        let (own0, function0) = (own_cpu(), function_pid.map(cpu_time));
        let times = run();
        let (own1, function1) = (own_cpu(), function_pid.map(cpu_time));
        if let Some(cpu) = &mut k.own_cpu {
            *cpu += own1.saturating_sub(own0);
        }
        if let (Some(cpu), Some(a), Some(b)) = (&mut k.function_cpu, function0, function1) {
            *cpu += b.saturating_sub(a);
        }
        k.medians.push(median_p99(&times).0);
        k.times.extend(times);
    };
    for _ in 0..rounds {
        measure(&mut kinds[0], &mut || validations(&without, per_round));
        measure(&mut kinds[1], &mut || validations(&with, per_round));
        let calls: Vec<Duration> = std::mem::take(&mut *runner.times.lock().expect("lock"));
        measure(&mut kinds[2], &mut || calls.clone());
        measure(&mut kinds[3], &mut || direct(per_round, 1));
    }

    println!(
        "   {:<48} | {:>9} | {:>8} | {:>17} | {:>12} | {:>12}",
        "one at a time, one thread",
        "median µs",
        "p99 µs",
        "round medians µs",
        "own CPU µs",
        "function CPU µs"
    );
    let per = |cpu: Option<Duration>, n: usize| {
        cpu.map_or(String::new(), |c| {
            format!("{:.0}", c.as_secs_f64() * 1e6 / n.max(1) as f64)
        })
    };
    for k in &kinds {
        let (median, p99) = median_p99(&k.times);
        let lo = k.medians.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = k.medians.iter().copied().fold(0.0, f64::max);
        println!(
            "   {:<48} | {median:>9.0} | {p99:>8.0} | {:>17} | {:>12} | {:>15}",
            k.name,
            format!("{lo:.0}-{hi:.0}"),
            per(k.own_cpu, k.times.len()),
            per(k.function_cpu, k.times.len()),
        );
    }
    let difference = median_p99(&kinds[1].times).0 - median_p99(&kinds[0].times).0;
    println!(
        "   with - without (medians): {difference:.0} µs per review; direct call median {:.0} µs",
        median_p99(&kinds[3].times).0
    );

    println!(
        "   {:>4} | {:>8} | {:>9} | {:>8} | {:>12} | {:>15}",
        "conc", "calls/s", "median µs", "p99 µs", "own CPU µs", "function CPU µs"
    );
    let n = rounds * per_round;
    for &concurrency in &levels {
        let (own0, function0) = (own_cpu(), function_pid.map(cpu_time));
        let started = Instant::now();
        let t = direct(n.max(concurrency), concurrency);
        let elapsed = started.elapsed();
        let own = own_cpu().saturating_sub(own0);
        let function = function_pid
            .zip(function0)
            .map(|(pid, c0)| cpu_time(pid).saturating_sub(c0));
        let (median, p99) = median_p99(&t);
        println!(
            "   {concurrency:>4} | {:>8.0} | {median:>9.0} | {p99:>8.0} | {:>12} | {:>15}",
            t.len() as f64 / elapsed.as_secs_f64(),
            per(Some(own), t.len()),
            per(function, t.len()),
        );
    }
    println!("   load average after: {}", loadavg());
    drop(function);
}
