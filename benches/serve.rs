//! Load generator for `composition-webhook serve`: AdmissionReviews over keep-alive HTTP/1.1
//! connections over TLS, at several concurrency levels, against the real binary.
//!
//! The binary (`CARGO_BIN_EXE_composition-webhook`, the bench-profile build under
//! `cargo bench`) is started with a self-signed certificate for `localhost` and the schema
//! files of one Composition, and is sent that Composition, wrapped in an
//! `admission.k8s.io/v1` AdmissionReview as the API server sends it for `kubectl apply`
//! (CREATE, `userInfo`, `options`, `?timeout=10s`, the object with the Composition CRD's
//! defaults, `uid`, `creationTimestamp`, `managedFields` and the last-applied-configuration
//! annotation), each request with its own uid.
//!
//! The Composition: `configuration-aws-network@v0.2.0` `apis/basic/composition.yaml` from
//! `../shared/corpus` (Upbound's reference AWS network configuration: 16 composed resources,
//! 84 patches through 5 patch sets, 10 schema files, all found, allowed without findings —
//! the happy path a webhook mostly sees). The corpus' median Composition has 3 resources and
//! its largest ~40, so this is the upper-middle a platform team writes. Without the corpus,
//! `testdata/example` (platform-ref-gcp network, 2 resources) is used instead.
//! `SERVE_BENCH_COMPOSITION=<file as in manifest.json>` picks another corpus Composition,
//! and `SERVE_BENCH_COMPOSITION=testdata/<file>` one of the bench's testdata cases (among
//! them `testdata/v2/app/composition.yaml`, a Crossplane v2 Pipeline), corpus or not; a
//! Composition under `testdata/bench/` is validated against the YAML files of its folder
//! that hold no Composition (`testdata/bench/pythonic-pt/composition.yaml`: a
//! function-patch-and-transform step and a function-pythonic step; `composition-pt.yaml`
//! beside it, the same without the pythonic step).
//!
//! The server keeps a verdict cache (a Composition reviewed before, with the same schemas,
//! gets the same answer without validation), so each level is measured twice: **cold**, every
//! request a distinct Composition (its `metadata.name` ends in a number counted across the
//! run, which validation reads and which changes no verdict, so the cache never hits), and
//! **warm**, the same Composition every time (what a GitOps re-apply sends: after the first,
//! every review is a hit). The cache's hit share per level, from the server's metrics, shows
//! which was measured. The targets are for cold.
//!
//! For each concurrency level (1, 8, 64), that many workers each open one TLS connection
//! and one hyper HTTP/1.1 client connection and send reviews back to back on it; after a
//! warm-up, several rounds are measured. Per level it prints throughput and p50/p99 latency
//! (medians across rounds, with the rounds' min and max), the server's and the generator's
//! CPU time per review, and the server's RSS after the level (and its peak). Every response
//! must be HTTP 200, JSON, echo the uid and carry the `allowed` value the library decides
//! in-process for the same review; any error fails the bench (after the table).
//!
//! The generator shares the machine with the server. With `SERVE_BENCH_PIN=1` the server
//! runs under `taskset -c 1` and the generator on core 0; `SERVE_BENCH_PIN=both` measures
//! unpinned, then pinned.
//!
//! Settings (environment, or the same names as flags after `--`, e.g.
//! `cargo bench --bench serve -- --seconds 1 --rounds 2`):
//!
//! - `SERVE_BENCH_SECONDS` (`--seconds`, default 3): length of a round;
//! - `SERVE_BENCH_ROUNDS` (`--rounds`, default 5): rounds per level;
//! - `SERVE_BENCH_WARMUP` (`--warmup`, default 1): warm-up seconds per level;
//! - `SERVE_BENCH_CONCURRENCY` (`--concurrency`, default `1,8,64`);
//! - `SERVE_BENCH_PIN` (`--pin`, `0`, `1` or `both`, default `0`);
//! - `SERVE_BENCH_WORKERS` (`--workers`): the server's `--workers` (default: its own);
//! - `SERVE_BENCH_CLIENT_THREADS` (`--client-threads`): the generator's runtime threads
//!   (default: one per core);
//! - `SERVE_BENCH_BIN`: another `composition-webhook` binary to measure (to compare builds);
//! - `SERVE_BENCH_SERVE_ARGS`: more arguments for `serve`, split at whitespace (e.g.
//!   `--function-calls off`, `--no-render`);
//! - `SERVE_BENCH_PYTHONIC=1`: also install (`scripts/function-pythonic.sh`, once per target
//!   directory) and start function-pythonic 0.6.3 on a loopback port, and start the server
//!   with `--function-address function-pythonic=<its address>`; each level then also prints
//!   the function's CPU time per review (a review whose pipeline called a function is not
//!   kept in the verdict cache, so warm levels call it too);
//! - `SERVE_BENCH_DUMP=<dir>`: also write every request of a level (warm-up included) to
//!   `<dir>/lat-<concurrency>-<cold|warm>.txt`, one line each: when it ended and how long it
//!   took, in µs since the level started (to see whether a tail is spread out or bunched);
//! - `SERVE_BENCH_IN_PROCESS` (`--in-process N`): only decode and decide the review N times
//!   in-process after one warm-up review, print the mean per review and exit, without the
//!   server (for profiles: `valgrind --tool=callgrind --toggle-collect='*serve::repeat*'`).
//! - `SERVE_BENCH_HANDLER` (`--handler N`) with `SERVE_BENCH_BODIES` (`--bodies warm|cold`,
//!   default warm): only send the review N times through the server's own handler
//!   (`handler::validate`, its verdict cache, review threads and metrics) in-process after one
//!   warm-up review, without TCP and TLS, print the mean per review and exit. Warm: the same
//!   body every time (verdict-cache hits); cold: distinct names (misses). The handler
//!   validates on a review thread, so for instruction counts run callgrind with
//!   collection on from the start at N and at 0, and subtract.
//! - `SERVE_BENCH_TRAIN` (`--train N`): the training of the profile-guided build
//!   (`scripts/pgo-build.sh`): every testdata case N times in-process, then through the
//!   server at the set levels, cold and warm. The server is stopped with SIGTERM, so that
//!   an instrumented server writes its profile; the bench fails if it does not exit cleanly.
//!
//! Run with `cargo bench --bench serve`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
#[path = "../tests/webhook/mod.rs"]
mod webhook;

#[path = "../tests/common/manifest.rs"]
mod manifest;
#[path = "common/pythonic.rs"]
mod pythonic;
#[path = "../tests/common/training.rs"]
mod training;
use training::{TESTDATA_CASES, TestdataCase};

use composition_webhook::mode::Mode;
use composition_webhook::schema::{Catalog, CompositionApi, CrossplaneVersion};
use composition_webhook::server::{admission, review};
use composition_webhook::validate::{Options, Validator};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use kube_core::DynamicObject;
use kube_core::admission::AdmissionReview;
use serde_json::{Value, json};

/// The server's allocator, so that the in-process figures are the server's (and budgets count).
#[global_allocator]
static GLOBAL: composition_webhook::budget::CountingAllocator<mimalloc::MiMalloc> =
    composition_webhook::budget::CountingAllocator(mimalloc::MiMalloc);

/// The corpus and the example are Crossplane v1 Compositions (Resources mode): v1.17.0's
/// Composition API, as the webhook's defaults are.
fn v1_options() -> Options {
    Options {
        composition_api: CompositionApi::embedded(CrossplaneVersion::V1),
        ..Options::default()
    }
}

/// The corpus Composition benchmarked unless `SERVE_BENCH_COMPOSITION` names another.
const CORPUS_FILE: &str =
    "compositions/configuration-aws-network@v0.2.0/apis__basic__composition.yaml";

/// The uid in the review template, overwritten in place per request (same length).
const UID_PLACEHOLDER: &str = "00000000-0000-4000-8000-000000000000";

/// The end of the Composition's name in the review template, overwritten in place per
/// request (same length): a number for cold requests, zeros for warm ones.
const NAME_PLACEHOLDER: &str = "zzzzzzzzzzzz";

/// The next cold request's name number: never the same twice in a run.
static COLD_NAMES: AtomicU64 = AtomicU64::new(1);

/// How long one request may take before it counts as an error.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

fn project_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

// ---------------------------------------------------------------------------------------
// Settings

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pin {
    Off,
    On,
    Both,
}

#[derive(Debug, Clone)]
struct Settings {
    seconds: f64,
    rounds: usize,
    warmup: f64,
    levels: Vec<usize>,
    pin: Pin,
    workers: Option<usize>,
    /// The generator's runtime threads (default: one per core).
    client_threads: Option<usize>,
    /// Only decode and decide the review this many times in-process.
    in_process: Option<usize>,
    /// Only send the review this many times through the server's handler, in-process.
    handler: Option<usize>,
    /// Which bodies the handler is sent.
    bodies: Bodies,
    /// Train the profile-guided build: every testdata case this many times in-process,
    /// then through the server at the set levels.
    train: Option<usize>,
}

impl Settings {
    /// Environment variables, overridden by flags; unknown flags (`--bench`) are ignored.
    fn load() -> Settings {
        let mut values: Vec<(String, String)> = [
            "seconds",
            "rounds",
            "warmup",
            "concurrency",
            "pin",
            "workers",
            "client_threads",
            "in_process",
            "handler",
            "bodies",
            "train",
        ]
        .iter()
        .filter_map(|k| {
            let var = format!("SERVE_BENCH_{}", k.to_uppercase());
            std::env::var(var).ok().map(|v| (k.to_string(), v))
        })
        .collect();
        let args: Vec<String> = std::env::args().skip(1).collect();
        let mut i = 0;
        while i < args.len() {
            let arg = &args[i];
            if let Some(flag) = arg.strip_prefix("--") {
                let (key, value) = match flag.split_once('=') {
                    Some((k, v)) => (k.replace('-', "_"), Some(v.to_string())),
                    None => (flag.replace('-', "_"), args.get(i + 1).cloned()),
                };
                let known = matches!(
                    key.as_str(),
                    "seconds"
                        | "rounds"
                        | "warmup"
                        | "concurrency"
                        | "pin"
                        | "workers"
                        | "client_threads"
                        | "in_process"
                        | "handler"
                        | "bodies"
                        | "train"
                );
                if known && let Some(value) = value {
                    if !flag.contains('=') {
                        i += 1;
                    }
                    values.push((key, value));
                }
            }
            i += 1;
        }
        let mut s = Settings {
            seconds: 3.0,
            rounds: 5,
            warmup: 1.0,
            levels: vec![1, 8, 64],
            pin: Pin::Off,
            workers: None,
            client_threads: None,
            in_process: None,
            handler: None,
            bodies: Bodies::Warm,
            train: None,
        };
        let bad = |k: &str, v: &str| -> ! { panic!("invalid {k} {v:?}") };
        for (k, v) in values {
            match k.as_str() {
                "seconds" => s.seconds = v.parse().unwrap_or_else(|_| bad(&k, &v)),
                "rounds" => s.rounds = v.parse().unwrap_or_else(|_| bad(&k, &v)),
                "warmup" => s.warmup = v.parse().unwrap_or_else(|_| bad(&k, &v)),
                "concurrency" => {
                    s.levels = v
                        .split(',')
                        .map(|n| n.trim().parse().unwrap_or_else(|_| bad(&k, &v)))
                        .collect()
                }
                "pin" => {
                    s.pin = match v.as_str() {
                        "0" | "off" | "false" | "" => Pin::Off,
                        "1" | "on" | "true" => Pin::On,
                        "both" => Pin::Both,
                        _ => bad(&k, &v),
                    }
                }
                "workers" => s.workers = Some(v.parse().unwrap_or_else(|_| bad(&k, &v))),
                "client_threads" => {
                    s.client_threads = Some(v.parse().unwrap_or_else(|_| bad(&k, &v)))
                }
                "in_process" => s.in_process = Some(v.parse().unwrap_or_else(|_| bad(&k, &v))),
                "handler" => s.handler = Some(v.parse().unwrap_or_else(|_| bad(&k, &v))),
                "train" => s.train = Some(v.parse().unwrap_or_else(|_| bad(&k, &v))),
                "bodies" => {
                    s.bodies = match v.as_str() {
                        "warm" => Bodies::Warm,
                        "cold" => Bodies::Cold,
                        _ => bad(&k, &v),
                    }
                }
                _ => {}
            }
        }
        assert!(
            s.seconds > 0.0 && s.rounds > 0 && s.warmup >= 0.0,
            "seconds and rounds must be positive"
        );
        assert!(
            !s.levels.is_empty() && s.levels.iter().all(|&c| c > 0),
            "concurrency levels must be positive"
        );
        assert!(
            s.client_threads != Some(0),
            "the generator needs at least one thread"
        );
        s
    }
}

// ---------------------------------------------------------------------------------------
// The Composition and its review

struct Case {
    /// What it is, for the report.
    label: String,
    composition: Value,
    schema_files: Vec<PathBuf>,
}

/// The `TESTDATA_CASES` entry of `file`, or a Composition under `testdata/bench/` with the
/// YAML files of its folder that hold no Composition as its schemas.
fn testdata_case(file: &str) -> Case {
    if file.starts_with("testdata/bench/") {
        return bench_case(file);
    }
    let case = TESTDATA_CASES
        .iter()
        .find(|c| c.file == file)
        .unwrap_or_else(|| panic!("{file} is not one of the bench's testdata cases"));
    let composition = webhook::yaml_documents(&project_dir().join(file))
        .into_iter()
        .find(|v| v["kind"] == "Composition")
        .unwrap_or_else(|| panic!("{file}: no Composition"));
    Case {
        label: format!("{file} ({})", case.what),
        composition,
        schema_files: case.schemas.iter().map(|f| project_dir().join(f)).collect(),
    }
}

/// A Composition under `testdata/bench/`: its schemas the folder's other YAML files.
fn bench_case(file: &str) -> Case {
    let path = project_dir().join(file);
    let composition = webhook::yaml_documents(&path)
        .into_iter()
        .find(|v| v["kind"] == "Composition")
        .unwrap_or_else(|| panic!("{file}: no Composition"));
    let dir = path.parent().expect("a folder");
    let mut schema_files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .filter(|p| {
            !webhook::yaml_documents(p)
                .iter()
                .any(|v| v["kind"] == "Composition")
        })
        .collect();
    schema_files.sort();
    let names: Vec<String> = schema_files
        .iter()
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    let steps: Vec<&str> = composition["spec"]["pipeline"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["functionRef"]["name"].as_str())
        .collect();
    Case {
        label: format!(
            "{file} (steps: {}; schemas: {})",
            steps.join(", "),
            names.join(", ")
        ),
        composition,
        schema_files,
    }
}

/// The corpus Composition, a testdata one (`SERVE_BENCH_COMPOSITION=testdata/...`), or
/// `testdata/example` without the corpus.
fn case() -> Case {
    let corpus = project_dir().join("../shared/corpus");
    let manifest_path = corpus.join("manifest.json");
    let wanted = std::env::var("SERVE_BENCH_COMPOSITION").unwrap_or_else(|_| CORPUS_FILE.into());
    if wanted.starts_with("testdata/") {
        return testdata_case(&wanted);
    }
    if manifest_path.is_file() {
        let manifest: Value = serde_json::from_str(
            &std::fs::read_to_string(&manifest_path).expect("read manifest.json"),
        )
        .expect("manifest.json is JSON");
        let entry = manifest["compositions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|e| e["file"] == wanted.as_str())
            .unwrap_or_else(|| panic!("{wanted} is not in {}", manifest_path.display()));
        let name = entry["composition_name"].as_str().unwrap_or_default();
        let files = manifest::schema_files(entry);
        let composition = webhook::yaml_documents(&corpus.join(&wanted))
            .into_iter()
            .find(|v| v.pointer("/metadata/name").and_then(Value::as_str) == Some(name))
            .unwrap_or_else(|| panic!("{wanted}: no Composition named {name}"));
        return Case {
            label: format!(
                "{} ({} resources, {} patches, {} schema files)",
                wanted.strip_prefix("compositions/").unwrap_or(&wanted),
                entry["n_resources"],
                entry["n_patches"],
                files.len()
            ),
            composition,
            schema_files: files.iter().map(|f| corpus.join(f)).collect(),
        };
    }
    eprintln!(
        "note: {} not found; using testdata/example",
        manifest_path.display()
    );
    testdata_case(TESTDATA_CASES[0].file)
}

/// The `fieldsV1` a client-side `kubectl apply` records: every field it set (lists of the
/// Composition CRD are atomic, so they are leaves).
fn fields_v1(value: &Value, top: bool) -> Value {
    match value {
        Value::Object(map) => {
            let mut out = serde_json::Map::new();
            if !top {
                out.insert(".".into(), json!({}));
            }
            for (k, v) in map {
                if top && matches!(k.as_str(), "apiVersion" | "kind") {
                    continue;
                }
                if top && k == "metadata" {
                    let mut meta = serde_json::Map::new();
                    for (mk, mv) in v.as_object().into_iter().flatten() {
                        if matches!(mk.as_str(), "annotations" | "labels") {
                            meta.insert(format!("f:{mk}"), fields_v1(mv, false));
                        }
                    }
                    out.insert("f:metadata".into(), Value::Object(meta));
                    continue;
                }
                out.insert(format!("f:{k}"), fields_v1(v, false));
            }
            Value::Object(out)
        }
        _ => json!({}),
    }
}

/// The Composition as the API server has it when it calls the webhook on a `kubectl apply`
/// CREATE: its Composition CRD's defaults applied (the API server defaults a custom resource
/// as it decodes the request, before admission), the last-applied annotation (what kubectl
/// sent, undefaulted), uid, creationTimestamp, generation, managedFields.
fn as_created(manifest: &Value) -> Value {
    let mut object =
        composition_webhook::model::with_api_defaults(manifest, &v1_options().composition_api);
    let last_applied = format!("{}\n", serde_json::to_string(manifest).expect("JSON"));
    let meta = object["metadata"]
        .as_object_mut()
        .expect("the Composition has metadata");
    let mut annotations = meta
        .get("annotations")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    annotations.insert(
        "kubectl.kubernetes.io/last-applied-configuration".into(),
        Value::String(last_applied),
    );
    meta.insert("annotations".into(), Value::Object(annotations));
    meta.insert("uid".into(), json!("3f1c2a9e-8b7d-4e6f-9a0b-1c2d3e4f5a6b"));
    meta.insert("creationTimestamp".into(), json!("2025-11-20T10:00:00Z"));
    meta.insert("generation".into(), json!(1));
    let fields = fields_v1(&object, true);
    object["metadata"]["managedFields"] = json!([{
        "manager": "kubectl-client-side-apply",
        "operation": "Update",
        "apiVersion": object["apiVersion"].clone(),
        "time": "2025-11-20T10:00:00Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    }]);
    object
}

/// An `admission.k8s.io/v1` CREATE review of `object`, with [`UID_PLACEHOLDER`] as uid.
fn review_of(object: &Value) -> Vec<u8> {
    let review = json!({
        "kind": "AdmissionReview",
        "apiVersion": "admission.k8s.io/v1",
        "request": {
            "uid": UID_PLACEHOLDER,
            "kind": {"group": "apiextensions.crossplane.io", "version": "v1", "kind": "Composition"},
            "resource": {"group": "apiextensions.crossplane.io", "version": "v1", "resource": "compositions"},
            "requestKind": {"group": "apiextensions.crossplane.io", "version": "v1", "kind": "Composition"},
            "requestResource": {"group": "apiextensions.crossplane.io", "version": "v1", "resource": "compositions"},
            "name": object["metadata"]["name"].clone(),
            "operation": "CREATE",
            "userInfo": {
                "username": "kubernetes-admin",
                "uid": "aws-iam-authenticator:123456789012:AROAEXAMPLE",
                "groups": ["system:masters", "system:authenticated"],
                "extra": {"accessKeyId": ["AKIAEXAMPLE"], "arn": ["arn:aws:sts::123456789012:assumed-role/admin/session"]}
            },
            "object": object,
            "oldObject": null,
            "dryRun": false,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1", "fieldManager": "kubectl-client-side-apply", "fieldValidation": "Strict"}
        }
    });
    serde_json::to_vec(&review).expect("JSON")
}

/// The review with its uid placeholder's offset and the name placeholder's offsets.
struct Template {
    body: Vec<u8>,
    uid_at: usize,
    name_at: Vec<usize>,
    expected_allowed: bool,
}

/// Which bodies a level sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bodies {
    /// Each request a Composition of its own: the verdict cache never hits.
    Cold,
    /// The same Composition every time: all hits after the first.
    Warm,
}

impl Bodies {
    fn name(self) -> &'static str {
        match self {
            Bodies::Cold => "cold",
            Bodies::Warm => "warm",
        }
    }
}

impl Template {
    fn new(body: Vec<u8>, expected_allowed: bool) -> Template {
        let needle = UID_PLACEHOLDER.as_bytes();
        let hits: Vec<usize> = body
            .windows(needle.len())
            .enumerate()
            .filter(|(_, w)| *w == needle)
            .map(|(i, _)| i)
            .collect();
        assert_eq!(hits.len(), 1, "the uid placeholder occurs once");
        let needle = NAME_PLACEHOLDER.as_bytes();
        let name_at: Vec<usize> = body
            .windows(needle.len())
            .enumerate()
            .filter(|(_, w)| *w == needle)
            .map(|(i, _)| i)
            .collect();
        assert!(!name_at.is_empty(), "the name placeholder occurs");
        Template {
            body,
            uid_at: hits[0],
            name_at,
            expected_allowed,
        }
    }

    /// The body with `uid` (36 bytes) in place of the uid placeholder, and the name's
    /// number: the next cold one, or zeros.
    fn body(&self, uid: &str, bodies: Bodies) -> Bytes {
        debug_assert_eq!(uid.len(), UID_PLACEHOLDER.len());
        let mut body = self.body.clone();
        body[self.uid_at..self.uid_at + uid.len()].copy_from_slice(uid.as_bytes());
        let number = match bodies {
            Bodies::Cold => COLD_NAMES.fetch_add(1, Ordering::Relaxed),
            Bodies::Warm => 0,
        };
        let suffix = format!("{number:012}");
        for &at in &self.name_at {
            body[at..at + suffix.len()].copy_from_slice(suffix.as_bytes());
        }
        Bytes::from(body)
    }
}

fn uid(worker: usize, seq: u64) -> String {
    format!(
        "00000000-0000-4000-8000-{:04}{:08}",
        worker % 10_000,
        seq % 100_000_000
    )
}

/// The in-process figures: the answer the library decides for the review, and how long
/// the server's own work takes on one thread, without HTTP and TLS.
struct InProcess {
    allowed: bool,
    warnings: usize,
    /// Median of scan, decode, decide and encode, as the handler runs them on a miss.
    total: Duration,
    /// Medians of the stages, in order.
    stages: Vec<(&'static str, Duration)>,
    /// Median of decode and to_value through kube-core's DynamicObject, for reference.
    kube_core: Duration,
}

/// The warm schemas of the case, as the server holds them.
fn catalog_of(case: &Case) -> Catalog {
    let mut catalog = Catalog::new();
    for file in &case.schema_files {
        let source = file.display().to_string();
        for value in webhook::yaml_documents(file) {
            catalog
                .add_document(&value, &source)
                .unwrap_or_else(|e| panic!("{source}: {e}"));
        }
    }
    catalog
}

/// The server's work on one review that misses the verdict cache, as the handler does it:
/// scan (the echo and the cache key; salvage if the body is not plain), decode, decide,
/// encode. Returns whether it was allowed and how many warnings it had.
fn review_in_process(catalog: &Catalog, body: &[u8]) -> (bool, usize) {
    let json = Some("application/json");
    let limits = composition_webhook::budget::Limits::DEFAULT;
    // As the handler does: UTF-8 checked once, the text the scan cut decoded (and read again
    // only should a finding need the bases).
    let text = std::str::from_utf8(body).ok();
    let scanned = text.and_then(|text| review::scan_text(json, text, limits.memory_bytes));
    let shape = scanned.as_ref().and_then(|s| s.shape);
    let (echo, request, text) = match (scanned, text) {
        (Some(s), Some(text)) => {
            let cut = review::cut_unread(text, &s.unread);
            let request =
                review::decode_with_shape(json, cut.as_str(), limits.memory_bytes, shape, s.sizes);
            (s.echo, request, cut.into_bytes())
        }
        _ => (
            review::salvage(body),
            review::decode(json, body, limits.memory_bytes),
            body.to_vec(),
        ),
    };
    let request = request.expect("the review decodes");
    let uid = request.uid.clone();
    let reread = || review::object_again(json, &text, limits.memory_bytes, shape);
    let decision = admission::decide_rereading(
        request,
        catalog,
        Mode::Loose,
        true,
        Duration::from_secs(9),
        None,
        |_, _| None,
        Some(reread),
    );
    let allowed = decision.answer.allowed;
    let warnings = decision.answer.warnings.len();
    let out = review::encode(echo.answer_version(), &uid, decision.answer);
    std::hint::black_box(out);
    (allowed, warnings)
}

/// `review_in_process` `n` times (not inlined, so that a profiler can collect it alone).
#[inline(never)]
fn repeat(catalog: &Catalog, body: &[u8], n: usize) {
    for _ in 0..n {
        std::hint::black_box(review_in_process(catalog, body));
    }
}

/// `--in-process N`: the review decoded and decided N times after a warm-up, no server.
fn in_process_only(case: &Case, body: &[u8], n: usize) {
    let catalog = catalog_of(case);
    let (allowed, warnings) = review_in_process(&catalog, body);
    // The most a review holds at once (the server's allocator counts on this thread).
    let (_, peak) = composition_webhook::budget::peak_during(|| review_in_process(&catalog, body));
    let started = Instant::now();
    repeat(&catalog, body, n);
    let elapsed = started.elapsed();
    println!(
        "{}: allowed={allowed} with {warnings} warnings; {n} reviews in-process (scan+decode+decide+encode): {:.1} µs each; at most {:.0} KiB held at once",
        case.label,
        elapsed.as_secs_f64() * 1e6 / n.max(1) as f64,
        peak as f64 / 1024.0
    );
}

/// `--handler N`: the review sent N times through the server's handler after a warm-up
/// (which fills the verdict cache for warm bodies), no TCP or TLS.
fn handler_only(case: &Case, template: &Template, n: usize, bodies: Bodies) {
    use axum::extract::{RawQuery, State};
    use axum::http::{HeaderMap, HeaderValue, header};
    use composition_webhook::server::handler::{self, ReviewState};
    use composition_webhook::server::metrics::Metrics;
    use composition_webhook::server::schemas::FileSchemas;
    use composition_webhook::server::verdicts::{self, Verdicts};

    let metrics = Arc::new(Metrics::new());
    let state = Arc::new(ReviewState {
        schemas: Arc::new(FileSchemas {
            catalog: catalog_of(case),
            functions: None,
            description: "bench".into(),
        }),
        default_mode: Mode::Loose,
        rendered: true,
        max_body_bytes: 3 << 20,
        body_memory: Arc::new(tokio::sync::Semaphore::new(64 << 20)),
        review_threads: Arc::new(
            composition_webhook::server::review_threads::ReviewThreads::start(
                2,
                composition_webhook::server::review_threads::REVIEW_STACK_BYTES,
                composition_webhook::server::review_threads::DEFAULT_REVIEW_NICE,
            )
            .expect("the review threads"),
        ),
        limits: composition_webhook::budget::Limits::DEFAULT,
        verdicts: Verdicts::new(verdicts::DEFAULT_BYTES, metrics.clone()),
        release_memory: None,
        metrics,
        change_impact: None,
        audit: None,
        function_calls: None,
        in_flight: composition_webhook::server::in_flight::InFlightLimit::new(
            composition_webhook::server::in_flight::DEFAULT_MAX_TOTAL,
            composition_webhook::server::in_flight::DEFAULT_MAX_PER_CLIENT,
            16 << 20,
        ),
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let send = |seq: u64| {
        let body = template.body(&uid(0, seq), bodies);
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
        let state = state.clone();
        runtime.block_on(async move {
            let response = handler::validate(
                State(state),
                None,
                RawQuery(Some("timeout=10s".into())),
                headers,
                axum::body::Body::from(body),
            )
            .await;
            let bytes = response
                .into_body()
                .collect()
                .await
                .expect("the answer")
                .to_bytes();
            let answer: Value = serde_json::from_slice(&bytes).expect("JSON");
            answer["response"]["allowed"] == json!(template.expected_allowed)
        })
    };
    assert!(send(0), "the handler's answer is the library's");
    let started = Instant::now();
    let right = repeat_handler(&send, n);
    let elapsed = started.elapsed();
    assert_eq!(right, n, "every answer is the library's");
    println!(
        "{}: {n} {} reviews through the handler in-process (no TCP/TLS): {:.1} µs each",
        case.label,
        bodies.name(),
        elapsed.as_secs_f64() * 1e6 / n.max(1) as f64
    );
}

/// `send` `n` times; how many answers were right (not inlined, for profilers).
#[inline(never)]
fn repeat_handler(send: &dyn Fn(u64) -> bool, n: usize) -> usize {
    (1..=n as u64).filter(|&seq| send(seq)).count()
}

/// What the server should answer, decided by the library in-process, and how long that
/// takes on one thread (scan, decode, decide, encode: the server's work minus HTTP and
/// TLS), with a breakdown by stage.
fn in_process(case: &Case, body: &[u8]) -> InProcess {
    let catalog = catalog_of(case);
    let once = || review_in_process(&catalog, body);
    let (allowed, warnings) = once();
    let median = |f: &mut dyn FnMut()| {
        let mut times = Vec::new();
        let end = Instant::now() + Duration::from_millis(500);
        while Instant::now() < end || times.len() < 20 {
            let t = Instant::now();
            f();
            times.push(t.elapsed());
        }
        times.sort();
        times[times.len() / 2]
    };
    let total = median(&mut || {
        once();
    });
    let request =
        review::decode(Some("application/json"), body, usize::MAX).expect("the review decodes");
    let value = Value::Object(request.object.expect("an object"));
    let validator = Validator::new(&catalog, v1_options());
    let stages = vec![
        (
            "scan",
            median(&mut || {
                std::hint::black_box(review::scan(Some("application/json"), body, 64 << 20));
            }),
        ),
        (
            "decode",
            median(&mut || {
                std::hint::black_box(
                    review::decode(Some("application/json"), body, usize::MAX).ok(),
                );
            }),
        ),
        (
            "validate",
            median(&mut || {
                std::hint::black_box(validator.validate_owned(value.clone()));
            }),
        ),
    ];
    // What reading the object cost through kube-core's DynamicObject (serde's buffered
    // flatten) and `to_value`, the server's path before it read objects directly.
    let kube_core = median(&mut || {
        let review: Option<AdmissionReview<DynamicObject>> = serde_json::from_slice(body).ok();
        let object = review.and_then(|r| r.request).and_then(|r| r.object);
        std::hint::black_box(object.map(|o| serde_json::to_value(o).ok()));
    });
    InProcess {
        allowed,
        warnings,
        total,
        stages,
        kube_core,
    }
}

// ---------------------------------------------------------------------------------------
// The server process

/// Starts the server (the test harness's), under `taskset -c <core>` when pinned.
fn start_server(
    schema_files: &[PathBuf],
    pin_core: Option<usize>,
    workers: Option<usize>,
    extra: &[String],
) -> webhook::Server {
    let bin = server_binary();
    let program = match pin_core {
        Some(core) => {
            let mut c = Command::new("taskset");
            c.args(["-c", &core.to_string(), &bin]);
            c
        }
        None => Command::new(&bin),
    };
    let crds: Vec<&Path> = schema_files.iter().map(PathBuf::as_path).collect();
    let mut cmd = webhook::serve_command_of(program, &crds);
    if let Some(w) = workers {
        cmd.args(["--workers", &w.to_string()]);
    }
    cmd.args(extra);
    webhook::Server::start_self_signed(cmd, &[])
}

/// Prints the server's warnings and errors.
fn print_server_problems(server: &webhook::Server) {
    for v in server.logs() {
        if matches!(v["level"].as_str(), Some("WARN" | "ERROR")) {
            eprintln!("server: {v}");
        }
    }
}

/// The binary measured: `SERVE_BENCH_BIN`, or the one cargo built for this bench.
fn server_binary() -> String {
    std::env::var("SERVE_BENCH_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_composition-webhook").to_string())
}

/// User plus system CPU time of a process (`self` or a pid), from `/proc/<pid>/stat`.
fn cpu_time(pid: &str, ticks_per_second: f64) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, a)| a).unwrap_or_default();
    let fields: Vec<&str> = after.split_whitespace().collect();
    // Fields 14 and 15 (utime, stime) are the 12th and 13th after the command name.
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i).and_then(|f| f.parse::<u64>().ok()))
        .sum();
    Duration::from_secs_f64(ticks as f64 / ticks_per_second)
}

fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// Pins this process's main thread (and so every thread it starts later) to `core`.
fn pin_self(core: usize) -> bool {
    Command::new("taskset")
        .args([
            "-c",
            "-p",
            &core.to_string(),
            &std::process::id().to_string(),
        ])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn taskset_available() -> bool {
    Command::new("taskset")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

// ---------------------------------------------------------------------------------------
// The load

/// A keep-alive HTTP/1.1 connection over TLS.
async fn connect(client: &webhook::Client) -> Result<SendRequest<Full<Bytes>>, String> {
    let tls = client
        .connect()
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| format!("HTTP handshake: {e}"))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
}

/// One review on `sender`: checks the answer.
async fn review_once(
    sender: &mut SendRequest<Full<Bytes>>,
    template: &Template,
    bodies: Bodies,
    uid: &str,
) -> Result<(), String> {
    sender
        .ready()
        .await
        .map_err(|e| format!("connection: {e}"))?;
    let request = hyper::Request::builder()
        .method("POST")
        .uri("/validate?timeout=10s")
        .header("host", "localhost")
        .header("content-type", "application/json")
        .header("accept", "application/json, */*")
        .header("user-agent", "kube-apiserver-admission")
        .body(Full::new(template.body(uid, bodies)))
        .expect("request");
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| format!("request: {e}"))?;
    let status = response.status();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("body: {e}"))?
        .to_bytes();
    if status != 200 || content_type != "application/json" {
        return Err(format!(
            "HTTP {status} ({content_type}): {}",
            String::from_utf8_lossy(&body)
        ));
    }
    let v: Value = serde_json::from_slice(&body).map_err(|e| format!("not JSON: {e}"))?;
    let r = &v["response"];
    if v["apiVersion"] != "admission.k8s.io/v1"
        || v["kind"] != "AdmissionReview"
        || r["uid"] != uid
        || r["allowed"] != template.expected_allowed
    {
        return Err(format!(
            "unexpected answer (expected uid {uid}, allowed {}): {v}",
            template.expected_allowed
        ));
    }
    Ok(())
}

/// A finished review: when it completed (µs since the level's start) and how long it took.
#[derive(Clone, Copy)]
struct Sample {
    done_us: u64,
    latency_us: u32,
}

struct WorkerResult {
    samples: Vec<Sample>,
    errors: Vec<String>,
    error_count: usize,
}

async fn worker(
    id: usize,
    client: webhook::Client,
    mut sender: SendRequest<Full<Bytes>>,
    template: Arc<Template>,
    bodies: Bodies,
    epoch: Instant,
    stop: Arc<AtomicBool>,
) -> WorkerResult {
    let mut out = WorkerResult {
        samples: Vec::with_capacity(16 * 1024),
        errors: Vec::new(),
        error_count: 0,
    };
    let mut seq = 0u64;
    while !stop.load(Ordering::Relaxed) {
        seq += 1;
        let uid = uid(id, seq);
        let started = Instant::now();
        let result = match tokio::time::timeout(
            REQUEST_TIMEOUT,
            review_once(&mut sender, &template, bodies, &uid),
        )
        .await
        {
            Ok(r) => r,
            Err(_) => Err(format!("no answer within {REQUEST_TIMEOUT:?}")),
        };
        let done = Instant::now();
        match result {
            Ok(()) => out.samples.push(Sample {
                done_us: done.duration_since(epoch).as_micros() as u64,
                latency_us: done
                    .duration_since(started)
                    .as_micros()
                    .min(u32::MAX as u128) as u32,
            }),
            Err(e) => {
                out.error_count += 1;
                if out.errors.len() < 3 {
                    out.errors.push(format!("worker {id}: {e}"));
                }
                if sender.is_closed() {
                    match connect(&client).await {
                        Ok(s) => sender = s,
                        Err(e) => {
                            out.error_count += 1;
                            out.errors.push(format!("worker {id}: reconnect: {e}"));
                            return out;
                        }
                    }
                }
            }
        }
    }
    out
}

/// Figures of one measured round.
#[derive(Clone, Copy)]
struct Round {
    throughput: f64,
    p50_ms: f64,
    p99_ms: f64,
}

/// Figures of one level.
struct Level {
    concurrency: usize,
    bodies: Bodies,
    /// The verdict cache's hits and lookups during the level.
    cache: (f64, f64),
    rounds: Vec<Round>,
    reviews: usize,
    errors: usize,
    first_errors: Vec<String>,
    server_cpu_per_review: Duration,
    client_cpu_per_review: Duration,
    /// The function's (`SERVE_BENCH_PYTHONIC`), when one runs.
    function_cpu_per_review: Option<Duration>,
    rss_kib: u64,
    hwm_kib: u64,
}

/// The nearest-rank percentile of sorted values.
fn percentile(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    f64::from(sorted[rank - 1])
}

async fn run_level(
    server: &webhook::Server,
    template: Arc<Template>,
    concurrency: usize,
    bodies: Bodies,
    settings: &Settings,
    ticks: f64,
    function_pid: Option<u32>,
) -> Level {
    let client = server.client();
    let cache_before = cache_lookups(server).await;
    let mut senders = Vec::with_capacity(concurrency);
    for _ in 0..concurrency {
        senders.push(
            connect(&client)
                .await
                .unwrap_or_else(|e| panic!("cannot connect to the server: {e}")),
        );
    }
    let stop = Arc::new(AtomicBool::new(false));
    let epoch = Instant::now();
    let tasks: Vec<_> = senders
        .into_iter()
        .enumerate()
        .map(|(id, sender)| {
            tokio::spawn(worker(
                id,
                client.clone(),
                sender,
                template.clone(),
                bodies,
                epoch,
                stop.clone(),
            ))
        })
        .collect();

    let warmup = Duration::from_secs_f64(settings.warmup);
    let round = Duration::from_secs_f64(settings.seconds);
    tokio::time::sleep_until((epoch + warmup).into()).await;
    let server_pid = server.pid().to_string();
    let function_pid = function_pid.map(|p| p.to_string());
    let function_cpu = || function_pid.as_deref().map(|p| cpu_time(p, ticks));
    let (server_cpu0, client_cpu0) = (cpu_time(&server_pid, ticks), cpu_time("self", ticks));
    let function_cpu0 = function_cpu();
    let measured_end = epoch + warmup + round * settings.rounds as u32;
    tokio::time::sleep_until(measured_end.into()).await;
    let (server_cpu1, client_cpu1) = (cpu_time(&server_pid, ticks), cpu_time("self", ticks));
    let function_cpu1 = function_cpu();
    stop.store(true, Ordering::Relaxed);

    let mut samples = Vec::new();
    let mut errors = 0;
    let mut first_errors = Vec::new();
    for t in tasks {
        let r = t.await.expect("worker task");
        samples.extend(r.samples);
        errors += r.error_count;
        first_errors.extend(r.errors);
    }
    first_errors.truncate(5);

    if let Ok(dir) = std::env::var("SERVE_BENCH_DUMP") {
        let text: String = samples
            .iter()
            .map(|s| format!("{} {}\n", s.done_us, s.latency_us))
            .collect();
        let file = format!("{dir}/lat-{concurrency}-{}.txt", bodies.name());
        if let Err(e) = std::fs::write(&file, text) {
            eprintln!("cannot write {file}: {e}");
        }
    }
    let mut rounds = Vec::new();
    let mut reviews = 0;
    for i in 0..settings.rounds {
        let from = (warmup + round * i as u32).as_micros() as u64;
        let to = (warmup + round * (i as u32 + 1)).as_micros() as u64;
        let mut latencies: Vec<u32> = samples
            .iter()
            .filter(|s| (from..to).contains(&s.done_us))
            .map(|s| s.latency_us)
            .collect();
        latencies.sort_unstable();
        reviews += latencies.len();
        rounds.push(Round {
            throughput: latencies.len() as f64 / round.as_secs_f64(),
            p50_ms: percentile(&latencies, 0.50) / 1000.0,
            p99_ms: percentile(&latencies, 0.99) / 1000.0,
        });
    }
    let per_review = |d: Duration| d.checked_div(reviews.max(1) as u32).unwrap_or_default();
    let (rss_kib, hwm_kib) = (server.rss_kib(), server.peak_rss_kib());
    let cache_after = cache_lookups(server).await;
    Level {
        concurrency,
        bodies,
        cache: (
            cache_after.0 - cache_before.0,
            cache_after.1 - cache_before.1,
        ),
        rounds,
        reviews,
        errors,
        first_errors,
        server_cpu_per_review: per_review(server_cpu1.saturating_sub(server_cpu0)),
        client_cpu_per_review: per_review(client_cpu1.saturating_sub(client_cpu0)),
        function_cpu_per_review: function_cpu0
            .zip(function_cpu1)
            .map(|(a, b)| per_review(b.saturating_sub(a))),
        rss_kib,
        hwm_kib,
    }
}

/// The verdict cache's hits and lookups so far, from the server's metrics.
async fn cache_lookups(server: &webhook::Server) -> (f64, f64) {
    let mut hits = 0.0;
    let mut all = 0.0;
    for result in ["hit", "miss", "stale"] {
        let sample =
            format!("composition_webhook_verdict_cache_lookups_total{{result=\"{result}\"}}");
        let n = webhook::metric(server, &sample).await.unwrap_or(0.0);
        all += n;
        if result == "hit" {
            hits = n;
        }
    }
    (hits, all)
}

/// Median, min and max.
fn summary(values: impl Iterator<Item = f64>) -> (f64, f64, f64) {
    let mut v: Vec<f64> = values.collect();
    v.sort_by(f64::total_cmp);
    let median = if v.len() % 2 == 1 {
        v[v.len() / 2]
    } else {
        (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
    };
    (median, v[0], v[v.len() - 1])
}

/// Runs every level against a fresh server; prints the table; returns the errors.
fn measure(
    case: &Case,
    template: &Arc<Template>,
    settings: &Settings,
    pinned: bool,
    ticks: f64,
    serve: &ServeExtras,
) -> usize {
    if pinned && !pin_self(0) {
        eprintln!("note: taskset -p failed; the generator is not pinned");
    }
    let threads = settings
        .client_threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .expect("runtime");
    let mut server = start_server(
        &case.schema_files,
        pinned.then_some(1),
        settings.workers,
        &serve.args,
    );
    let rss_start = server.rss_kib();
    let load_before = loadavg();
    let what = if pinned {
        "pinned: server on core 1 (taskset -c 1), generator on core 0"
    } else {
        "unpinned: server and generator share all cores"
    };
    println!();
    println!(
        "== {what}; generator threads: {threads}; server --workers: {}",
        settings
            .workers
            .map_or("default (CPUs)".to_string(), |w| w.to_string())
    );
    println!(
        "   load average before: {load_before}; server RSS at start: {:.1} MiB",
        rss_start as f64 / 1024.0
    );
    let mut levels = Vec::new();
    for &c in &settings.levels {
        for bodies in [Bodies::Cold, Bodies::Warm] {
            let level = runtime.block_on(run_level(
                &server,
                template.clone(),
                c,
                bodies,
                settings,
                ticks,
                serve.function_pid,
            ));
            levels.push(level);
        }
    }
    let load_after = loadavg();
    print_server_problems(&server);
    // The generator's connections close with its runtime, so SIGTERM stops the server at
    // once: a clean exit, not the harness's SIGKILL, is when a server built with
    // `-Cprofile-generate` writes its profile.
    drop(runtime);
    server.sigterm();
    let stopped = server.wait_exit(Duration::from_secs(30));
    let unclean = !stopped.is_some_and(|status| status.success());
    if unclean {
        eprintln!("error: the server did not exit cleanly after SIGTERM: {stopped:?}");
    }
    drop(server);

    println!(
        "   {:>4} | {:>4} | {:>5} | {:>26} | {:>22} | {:>22} | {:>7} | {:>6} | {:>11} | {:>11} | {:>14}",
        "conc",
        "body",
        "hits",
        "reviews/s med [min-max]",
        "p50 ms med [min-max]",
        "p99 ms med [min-max]",
        "reviews",
        "errors",
        "srv CPU/rev",
        "gen CPU/rev",
        "RSS (peak) MiB"
    );
    let mut errors = usize::from(unclean);
    for l in &levels {
        let (t, t0, t1) = summary(l.rounds.iter().map(|r| r.throughput));
        let (p50, p50a, p50b) = summary(l.rounds.iter().map(|r| r.p50_ms));
        let (p99, p99a, p99b) = summary(l.rounds.iter().map(|r| r.p99_ms));
        println!(
            "   {:>4} | {:>4} | {:>4.0}% | {:>7.0} [{:>7.0}-{:>7.0}] | {:>6.2} [{:>5.2}-{:>5.2}] | {:>6.2} [{:>5.2}-{:>5.2}] | {:>7} | {:>6} | {:>8.0} µs | {:>8.0} µs | {:>6.1} ({:>5.1})",
            l.concurrency,
            l.bodies.name(),
            100.0 * l.cache.0 / l.cache.1.max(1.0),
            t,
            t0,
            t1,
            p50,
            p50a,
            p50b,
            p99,
            p99a,
            p99b,
            l.reviews,
            l.errors,
            l.server_cpu_per_review.as_secs_f64() * 1e6,
            l.client_cpu_per_review.as_secs_f64() * 1e6,
            l.rss_kib as f64 / 1024.0,
            l.hwm_kib as f64 / 1024.0,
        );
        if let Some(cpu) = l.function_cpu_per_review {
            println!(
                "   {:>4} | {:>4} | function-pythonic CPU per review: {:.0} µs",
                l.concurrency,
                l.bodies.name(),
                cpu.as_secs_f64() * 1e6
            );
        }
        errors += l.errors;
        for e in &l.first_errors {
            println!("        error: {e}");
        }
    }
    println!("   load average after: {load_after}");
    // The targets (issue 20) are for cold bodies: every review validated.
    let met = |ok: bool| if ok { "met" } else { "MISSED" };
    let cold = |c: usize| {
        levels
            .iter()
            .find(|l| l.concurrency == c && l.bodies == Bodies::Cold)
    };
    if let Some(l) = cold(8) {
        let (t, _, _) = summary(l.rounds.iter().map(|r| r.throughput));
        let (p99, _, _) = summary(l.rounds.iter().map(|r| r.p99_ms));
        println!(
            "   target cold, concurrency 8: >= 3000 reviews/s: {t:.0}/s, {}; p99 < 4 ms: {p99:.2} ms, {}",
            met(t >= 3000.0),
            met(p99 < 4.0)
        );
    }
    if let Some(l) = cold(1) {
        let (p99, _, _) = summary(l.rounds.iter().map(|r| r.p99_ms));
        println!(
            "   target cold, concurrency 1: p99 < 1 ms: {p99:.2} ms, {}",
            met(p99 < 1.0)
        );
    }
    errors
}

fn main() {
    let settings = Settings::load();
    if let Some(n) = settings.train {
        // Every case in-process, then through the server: the profile's hot paths.
        let mut errors = 0;
        for TestdataCase { file, .. } in TESTDATA_CASES {
            let case = testdata_case(file);
            in_process_only(&case, &review_body(&case), n);
            errors += bench(&case, &settings);
        }
        exit_on(errors);
        return;
    }
    let case = case();
    let body = review_body(&case);
    if let Some(n) = settings.in_process {
        in_process_only(&case, &body, n);
        return;
    }
    if let Some(n) = settings.handler {
        let catalog = catalog_of(&case);
        let (allowed, _) = review_in_process(&catalog, &body);
        handler_only(&case, &Template::new(body, allowed), n, settings.bodies);
        return;
    }
    exit_on(bench(&case, &settings));
}

/// Fails the bench if there were errors.
fn exit_on(errors: usize) {
    if errors > 0 {
        eprintln!("FAILED: {errors} errors");
        std::process::exit(1);
    }
}

/// The review template of the case: a create of its Composition, whose name ends in the
/// placeholder where cold requests differ.
fn review_body(case: &Case) -> Vec<u8> {
    let mut manifest = case.composition.clone();
    let name = manifest["metadata"]["name"]
        .as_str()
        .unwrap_or("c")
        .to_string();
    manifest["metadata"]["name"] = json!(format!("{name}-{NAME_PLACEHOLDER}"));
    review_of(&as_created(&manifest))
}

/// The in-process figures and the server's table for the case; returns the errors.
fn bench(case: &Case, settings: &Settings) -> usize {
    let body = review_body(case);
    let measured = in_process(case, &body);
    let (allowed, warnings) = (measured.allowed, measured.warnings);
    let template = Arc::new(Template::new(body, allowed));
    let ticks = clock_ticks();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());

    println!(
        "composition-webhook serve: AdmissionReview v1 CREATE over keep-alive HTTP/1.1 + TLS (rustls)"
    );
    println!("   binary: {}", server_binary());
    println!("   Composition: {}", case.label);
    println!(
        "   review body: {:.1} KiB; expected answer: allowed={allowed} with {warnings} warnings",
        template.body.len() as f64 / 1024.0
    );
    let stages: Vec<String> = measured
        .stages
        .iter()
        .map(|(name, d)| format!("{name} {:.0}", d.as_secs_f64() * 1e6))
        .collect();
    println!(
        "   in-process (one thread, no HTTP/TLS): scan+decode+decide+encode {:.0} µs median (~{:.0} reviews/s per core); stages µs: {}",
        measured.total.as_secs_f64() * 1e6,
        1.0 / measured.total.as_secs_f64(),
        stages.join(", ")
    );
    println!(
        "   for reference, decode + to_value through kube-core's DynamicObject: {:.0} µs",
        measured.kube_core.as_secs_f64() * 1e6
    );
    println!(
        "   {} CPUs; rounds: {} x {} s after {} s warm-up per level; levels: {:?}",
        cpus, settings.rounds, settings.seconds, settings.warmup, settings.levels
    );

    let mut modes = Vec::new();
    match settings.pin {
        Pin::Off => modes.push(false),
        Pin::On => modes.push(true),
        Pin::Both => modes.extend([false, true]),
    }
    if modes.contains(&true) && (cpus < 2 || !taskset_available()) {
        println!("note: pinning needs taskset and 2 CPUs; measuring unpinned only");
        modes = vec![false];
    }
    let (serve, _function) = serve_extras();
    if !serve.args.is_empty() {
        println!("   more serve arguments: {}", serve.args.join(" "));
    }
    let mut errors = 0;
    for pinned in modes {
        errors += measure(case, &template, settings, pinned, ticks, &serve);
    }
    errors
}

/// What the server is started with beyond the schemas: `SERVE_BENCH_SERVE_ARGS`, and the
/// function `SERVE_BENCH_PYTHONIC` starts.
struct ServeExtras {
    args: Vec<String>,
    function_pid: Option<u32>,
}

/// The extras, and the function process they name (kept running while it is held).
fn serve_extras() -> (ServeExtras, Option<pythonic::Pythonic>) {
    let mut args: Vec<String> = std::env::var("SERVE_BENCH_SERVE_ARGS")
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect();
    let wanted = std::env::var("SERVE_BENCH_PYTHONIC")
        .is_ok_and(|v| !matches!(v.as_str(), "" | "0" | "false" | "off"));
    let function = wanted.then(pythonic::start);
    if let Some(f) = &function {
        args.push("--function-address".into());
        args.push(format!("{}={}", pythonic::NAME, f.address()));
    }
    let function_pid = function.as_ref().and_then(|f| f.pid);
    (ServeExtras { args, function_pid }, function)
}
