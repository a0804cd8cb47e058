//! The adversarial suite of issue "Bounded by construction": every hostile Composition of
//! `tests/adversary/mod.rs` through the real binary, as `validate` and as `serve`. None may
//! crash or panic it, take more memory than the deployment's limit (deploy/) or more time
//! than the review's deadline; each ends with a finding that says which budget it spent
//! (an error in strict mode, a warning in loose and warn), or with its ordinary verdict.

mod adversary;
use adversary as hostile;
mod webhook;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use webhook::{ScratchDir, Server, composition_review, project_dir};

/// The deployment's memory limit (deploy/base/deployment.yaml), in KiB.
fn memory_limit_kib() -> u64 {
    let deployment = webhook::yaml_documents(&project_dir().join("deploy/base/deployment.yaml"));
    let limit =
        deployment[0]["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"]
            .as_str()
            .expect("a memory limit")
            .to_string();
    let mib: u64 = limit
        .strip_suffix("Mi")
        .and_then(|n| n.parse().ok())
        .expect("a limit in Mi");
    mib * 1024
}

fn crds() -> Vec<PathBuf> {
    vec![
        project_dir().join("testdata/crds"),
        project_dir().join("testdata/example/definition.yaml"),
    ]
}

/// `validate --output json` of one Composition: exit code, the Composition's report, and
/// the peak RSS of the process in KiB.
fn validate(composition: &Value, extra: &[&str]) -> (i32, Value, u64) {
    let dir = ScratchDir::new("hostile");
    let file = dir.path("composition.json");
    std::fs::write(&file, serde_json::to_vec(composition).expect("json")).expect("write");
    let mut cmd = Command::new("/usr/bin/time");
    cmd.arg("-f").arg("peak-rss-kib=%M");
    cmd.arg(env!("CARGO_BIN_EXE_composition-webhook"));
    // The webhook's budget, not the command line's larger default.
    // The hostile Compositions are in Resources mode: Crossplane v1's API.
    cmd.arg("validate").args([
        "--output",
        "json",
        "--review-memory-bytes",
        "67108864",
        "--crossplane-version",
        "v1",
    ]);
    for c in crds() {
        cmd.arg("--crds").arg(c);
    }
    cmd.args(extra).arg(&file);
    let out = cmd.stdin(Stdio::null()).output().expect("run validate");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("panicked") && !stderr.contains("memory allocation"),
        "{stderr}"
    );
    let peak = stderr
        .lines()
        .find_map(|l| l.strip_prefix("peak-rss-kib="))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{stderr}", String::from_utf8_lossy(&out.stdout)));
    (
        out.status.code().unwrap_or(-1),
        report["compositions"][0].clone(),
        peak,
    )
}

fn budget_findings(report: &Value) -> Vec<Value> {
    report["findings"]
        .as_array()
        .map(|f| {
            f.iter()
                .filter(|f| f["stage"] == "limits")
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

/// A hostile Composition in a mode.
type Make = fn(Option<&str>) -> Value;

/// Cases that spend the memory or work budget: in loose mode a warning naming it (the
/// Composition is admitted: nothing wrong was found in what was checked), in strict mode an
/// error. Each within the deployment's memory limit.
#[test]
fn budget_spenders_end_with_a_finding_in_every_mode() {
    let spenders: [(&str, Make, &str); 5] = [
        (
            "huge_index",
            hostile::huge_index,
            "spec.resources[0].patches[0]",
        ),
        (
            "format_widths",
            hostile::format_widths,
            "spec.resources[0].patches[0]",
        ),
        (
            "combine_widths",
            hostile::combine_widths,
            "spec.resources[0].patches[0]",
        ),
        ("environment_copies", hostile::environment_copies, ""),
        ("patch_set_fanout", hostile::patch_set_fanout, ""),
    ];
    for (name, make, at) in spenders {
        let started = Instant::now();
        let (code, report, peak) = validate(&make(None), &[]);
        let elapsed = started.elapsed();
        let spent = budget_findings(&report);
        assert_eq!(spent.len(), 1, "{name}: {report:#}");
        let f = &spent[0];
        assert_eq!(f["severity"], "warning", "{name}: {f}");
        assert!(
            f["message"].as_str().is_some_and(|m| m
                .contains("exceeds the memory budget of 64 MiB per review")
                || m.contains("exceeds the work budget")),
            "{name}: {f}"
        );
        if !at.is_empty() {
            assert_eq!(f["field"], at, "{name}: {f}");
        }
        assert_eq!(
            (code, report["allowed"].as_bool()),
            (0, Some(true)),
            "{name}: {report:#}"
        );
        assert!(peak < memory_limit_kib(), "{name}: peak RSS {peak} KiB");
        eprintln!("{name}: {elapsed:?}, peak RSS {} MiB", peak / 1024);

        let (code, report, _) = validate(&make(Some("strict")), &[]);
        let spent = budget_findings(&report);
        assert_eq!(spent.len(), 1, "{name}: {report:#}");
        assert_eq!(spent[0]["severity"], "error", "{name}");
        assert_eq!(
            (code, report["allowed"].as_bool()),
            (1, Some(false)),
            "{name}"
        );
    }
}

/// `%.65536f`: Go prints 65,536 digits; Rust's formatter used to panic.
#[test]
fn precisions_past_rusts_formatter_render_as_go() {
    let (code, report, _) = validate(&hostile::float_precision(Some("strict")), &[]);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["findings"], json!([]), "{report:#}");
    let sprintf = composition_webhook::go::fmt::sprintf;
    let s = sprintf("%.65536f", &[json!(1.5)]);
    assert_eq!(s.len(), 2 + 65_536);
    assert!(s.starts_with("1.5000") && s.ends_with("000"));
    let e = sprintf("%.70000e", &[json!(0.1)]);
    assert!(e.starts_with("1.000000000000000055511151231257827021181583404541015625000"));
    assert!(e.ends_with("e-01") && e.len() == 70_006, "{}", e.len());
}

/// A regexp Go accepts but whose program here is larger than a review's memory: not an
/// invalid pattern, and no denial in strict mode; a warning says what was not validated.
#[test]
fn large_programs_are_no_invalid_patterns() {
    let (code, report, peak) = validate(&hostile::big_program(Some("strict")), &[]);
    let messages: Vec<&str> = report["findings"]
        .as_array()
        .map(|f| f.iter().filter_map(|f| f["message"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert!(
        messages[0].starts_with(
            r#"spec.resources[0].patches[0]: Not rendered: the compiled regexp `\pL{1000}|.*` would take more than"#
        ) && messages[0].ends_with("what it writes is not validated"),
        "{messages:?}"
    );
    assert!(peak < memory_limit_kib(), "peak RSS {peak} KiB");
}

/// A search too costly to run within a review is not run: a warning says so in every mode
/// (nothing wrong was found), where it ran for minutes and held its thread past the deadline.
#[test]
fn regexp_searches_past_the_review_are_not_run() {
    for mode in ["strict", "loose"] {
        let (code, report, peak) = validate(&hostile::regexp_search(Some(mode)), &[]);
        let findings = report["findings"].as_array().cloned().unwrap_or_default();
        assert_eq!(findings.len(), 1, "{mode}: {report:#}");
        let f = &findings[0];
        assert_eq!(
            (f["severity"].as_str(), f["field"].as_str()),
            (Some("warning"), Some("spec.resources[0].patches[0]")),
            "{mode}: {f}"
        );
        let message = f["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with(
                "spec.resources[0].patches[0]: Not rendered: the regexp `[ab]*a[ab]{300}x0|"
            ) && message.contains(
                "is too large to search 97.7 KiB of input here: one search may take at most \
                 2147483648 units of work (its compiled size times the input's length), and a \
                 search is not interrupted at the deadline"
            ) && message.ends_with("what it writes is not validated"),
            "{mode}: {message}"
        );
        assert_eq!(
            (code, report["allowed"].as_bool()),
            (0, Some(true)),
            "{mode}"
        );
        assert!(peak < memory_limit_kib(), "peak RSS {peak} KiB");
    }
}

/// An array of 1.5 million elements (3 MiB of JSON) with rendering off, then on.
#[test]
fn long_arrays_stay_within_the_memory_limit() {
    for extra in [&["--no-render"][..], &[]] {
        let (code, report, peak) = validate(&hostile::long_array(None, 1_500_000), extra);
        assert!(peak < memory_limit_kib(), "{extra:?}: peak RSS {peak} KiB");
        assert!(code == 0 || code == 1, "{report:#}");
        eprintln!("long array {extra:?}: peak RSS {} MiB", peak / 1024);
    }
}

fn start() -> Server {
    let crds = crds();
    let refs: Vec<&Path> = crds.iter().map(PathBuf::as_path).collect();
    Server::start(&refs, &["--workers", "1"])
}

fn review_of(uid: &str, composition: Value) -> Value {
    composition_review("v1", uid, "CREATE", composition)
}

/// Every hostile Composition through `serve`, in strict and loose mode: answered within
/// the deadline, never admitted in strict mode unless validated clean, and the server's
/// memory stays under the deployment's limit. A normal review after each is validated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_answers_every_hostile_review_in_time() {
    let server = start();
    let client = server.client();
    for mode in ["strict", "loose"] {
        for (name, composition) in hostile::all(Some(mode)) {
            let started = Instant::now();
            let response = client
                .review(&review_of(&format!("{name}-{mode}"), composition))
                .await;
            let elapsed = started.elapsed();
            assert!(
                elapsed < Duration::from_secs(10),
                "{name} {mode}: {elapsed:?}"
            );
            let allowed = response["allowed"].as_bool();
            if mode == "strict" {
                // Nothing strict is admitted without being validated to the end (a part
                // this tool cannot render is a warning in every mode).
                let unvalidated = response["warnings"].as_array().is_some_and(|w| {
                    w.iter().any(|w| {
                        let w = w.as_str().unwrap_or_default();
                        w.contains("was not validated") || w.contains("without validation")
                    })
                });
                assert!(
                    allowed == Some(false) || !unvalidated,
                    "{name} {mode}: {response:#}"
                );
            }
            eprintln!(
                "{name} {mode}: {elapsed:?}, peak RSS {} MiB, allowed {allowed:?}, {}",
                server.peak_rss_kib() / 1024,
                response["status"]["message"]
                    .as_str()
                    .or(response["warnings"][0].as_str())
                    .unwrap_or_default()
                    .chars()
                    .take(200)
                    .collect::<String>()
            );
            // The worker is free again: a normal invalid review is validated, not answered
            // by the deadline.
            let after = client
                .review(&review_of("after", hostile::invalid(Some("strict"))))
                .await;
            assert_validated(&after, name);
        }
    }
    let peak = server.peak_rss_kib();
    assert!(peak < memory_limit_kib(), "peak RSS {peak} KiB");
    eprintln!("serve: peak RSS {} MiB", peak / 1024);
}

/// `hostile::invalid`'s review was validated: denied for its typo, not answered by the
/// deadline (which a worker still held by the review before it would give).
fn assert_validated(answer: &Value, after: &str) {
    assert_eq!(answer["status"]["code"], 422, "after {after}: {answer:#}");
    assert_eq!(
        answer["status"]["details"]["causes"][0]["field"],
        "spec.resources[0].patches[0].toFieldPath",
        "after {after}: {answer:#}"
    );
}

/// The deadline stops the work in progress: with one worker, a review of 2,000 large
/// regexps given a 5 s timeout is answered by its mode before then, and the next review is
/// validated (the worker was not held: it would be answered by its deadline). SIGTERM then
/// exits promptly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deadline_frees_the_worker() {
    let mut server = start();
    let client = server.client();
    let body = serde_json::to_vec(&review_of("slow", hostile::large_regexps(Some("strict"))))
        .expect("json");
    let started = Instant::now();
    let reply = client
        .request(
            "POST",
            "/validate?timeout=5s",
            Some("application/json"),
            body,
        )
        .await;
    let elapsed = started.elapsed();
    let v = reply.json();
    // The promise: an answer within the API server's timeout (validation stops at 4.5 s).
    assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");
    assert_eq!(v["response"]["status"]["code"], 504, "{v:#}");
    let after = client
        .review(&review_of("after", hostile::invalid(Some("strict"))))
        .await;
    assert_validated(&after, "large_regexps");

    // A slow review in flight (its deadline 9 s away), then SIGTERM: the process exits once
    // that review is answered, well within the drain timeout (25 s).
    let slow = review_of("slow-2", hostile::large_regexps(Some("loose")));
    let in_flight = tokio::spawn(async move { client.post_json(&slow).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    server.sigterm();
    let status = server.wait_exit(Duration::from_secs(60));
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    let _ = in_flight.await;
}

/// Nesting as deep as the API server allows is read and validated, not refused; one level
/// more is refused with a message that says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nesting_the_api_server_accepts_is_validated() {
    let server = start();
    let client = server.client();
    for (uid, mode) in [("deep-strict", "strict"), ("deep-loose", "loose")] {
        let body = hostile::deep_review(uid, Some(mode), 10_002);
        assert_eq!(
            composition_webhook::document::json_shape(&body, 20_000).depth,
            10_002
        );
        // The longest timeout the API server allows: this is a test of depth, and a debug
        // build on a loaded machine takes seconds for it.
        let v = client
            .request(
                "POST",
                "/validate?timeout=30s",
                Some("application/json"),
                body,
            )
            .await
            .json();
        let response = &v["response"];
        assert_eq!(response["uid"], uid);
        // Validated: the unknown field is reported like any other, in either mode.
        let message = response["status"]["message"].as_str().unwrap_or_default();
        assert_eq!(response["status"]["code"], 422, "{mode}: {message}");
        assert!(
            message.contains("spec.resources[0].base.spec.forProvider.deep: Unsupported value")
                || message.contains("forProvider.deep"),
            "{mode}: {}",
            message.chars().take(400).collect::<String>()
        );
    }
    let body = hostile::deep_review("too-deep", None, 10_003);
    let v = client
        .request(
            "POST",
            "/validate?timeout=10s",
            Some("application/json"),
            body,
        )
        .await
        .json();
    assert_eq!(v["response"]["uid"], "too-deep");
    assert_eq!(v["response"]["status"]["code"], 400);
    assert_eq!(
        v["response"]["status"]["message"],
        "the request body nests more than 10002 levels deep: the API server accepts objects of at most 10000 levels, 10002 in an AdmissionReview"
    );
    let mut out = std::io::stderr();
    let _ = writeln!(out, "deep: peak RSS {} MiB", server.peak_rss_kib() / 1024);
}

/// An environment patch whose path is deeper than rendering follows is said to be not
/// rendered, a warning in every mode, not dropped in silence.
#[test]
fn environment_paths_too_deep_to_render_are_reported() {
    let path = vec!["a"; 200].join(".");
    let mut c = hostile::composition(
        "deep-environment",
        Some("strict"),
        hostile::network(json!([])),
    );
    c["spec"]["environment"] = json!({"patches": [{
        "type": "FromCompositeFieldPath", "fromFieldPath": "spec.id", "toFieldPath": path
    }]});
    let (code, report, _) = validate(&c, &[]);
    assert_eq!(code, 0, "{report:#}");
    let findings = report["findings"].as_array().cloned().unwrap_or_default();
    assert_eq!(findings.len(), 1, "{report:#}");
    assert_eq!(findings[0]["severity"], "warning");
    assert_eq!(
        findings[0]["message"],
        "spec.environment.patches[0]: Not rendered: ToFieldPath has 200 segments, more than the 128 rendering follows; what it writes is not validated"
    );
}
