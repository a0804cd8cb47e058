//! The image's build (`Dockerfile`, `scripts/pgo-build.sh`) as it relies on the repository:
//!
//! - the build stage copies every file the profile-guided build reads: the serve bench's
//!   harness (its `#[path]` modules) and the testdata its training runs;
//! - the training (`tests/common/training.rs`, which the bench includes) runs what users send: Resources
//!   and Pipeline Compositions, v1 and v2 XRDs, managed resources and built-in kinds, and a
//!   Composition that is denied (code the training does not run is optimised as cold);
//! - the script stops with a clear message before building when it has no llvm-profdata.

mod common;
mod webhook;

use std::path::PathBuf;
use std::process::Command;

use common::training::TESTDATA_CASES;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The sources the Dockerfile's build stage copies into `/src` (`COPY <src> ./<src>`).
fn copied() -> Vec<String> {
    let dockerfile = read("Dockerfile");
    let build = dockerfile
        .split("\nFROM ")
        .find(|stage| stage.contains(" AS build"))
        .expect("a build stage");
    build
        .lines()
        .filter_map(|l| l.strip_prefix("COPY "))
        .filter(|l| !l.starts_with("--"))
        .flat_map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            words[..words.len() - 1]
                .iter()
                .map(|w| w.to_string())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Whether `path` (relative to the root) is in the build stage.
fn is_copied(path: &str, copied: &[String]) -> bool {
    copied
        .iter()
        .any(|c| path == c || path.starts_with(&format!("{c}/")))
}

/// Every file the training reads: each case's Composition and schemas.
fn training_files() -> Vec<&'static str> {
    TESTDATA_CASES
        .iter()
        .flat_map(|c| std::iter::once(c.file).chain(c.schemas.iter().copied()))
        .collect()
}

#[test]
fn the_build_stage_copies_what_the_profiled_build_reads() {
    let copied = copied();
    for needed in [
        "Cargo.toml",
        "Cargo.lock",
        "build.rs",
        "proto/fn/v1/run_function.proto",
        "src",
        "benches",
        "scripts",
    ] {
        assert!(
            is_copied(needed, &copied),
            "{needed} not copied: {copied:?}"
        );
    }
    // The bench's modules from the test harness, resolved as rustc does, from benches/.
    let bench = read("benches/serve.rs");
    let modules: Vec<String> = bench
        .lines()
        .filter_map(|l| l.trim().strip_prefix("#[path = \"../"))
        .map(|l| l.trim_end_matches("\"]").to_string())
        .collect();
    assert_eq!(
        modules,
        [
            "tests/webhook/mod.rs",
            "tests/common/manifest.rs",
            "tests/common/training.rs"
        ]
    );
    let files = training_files();
    assert!(files.len() >= 5, "{files:?}");
    for file in modules.iter().map(String::as_str).chain(files) {
        assert!(root().join(file).is_file(), "{file} does not exist");
        assert!(is_copied(file, &copied), "{file} not copied: {copied:?}");
    }
    let script = read("scripts/pgo-build.sh");
    assert!(
        script.contains("--bench serve") && script.contains("--train "),
        "the script trains with the serve bench"
    );
}

#[test]
fn the_training_runs_what_users_send() {
    let mut modes = Vec::new();
    let mut xrd_versions = Vec::new();
    let mut composed = Vec::new();
    for file in training_files() {
        for doc in webhook::yaml_documents(&root().join(file)) {
            let api_version = doc["apiVersion"].as_str().unwrap_or_default().to_string();
            match doc["kind"].as_str() {
                Some("Composition") => {
                    let spec = &doc["spec"];
                    // Crossplane v2's Compositions have no mode: a pipeline is all they have.
                    let mode = match spec["mode"].as_str() {
                        Some(mode) => mode,
                        None if spec["pipeline"].is_array() => "Pipeline",
                        None => "Resources",
                    };
                    modes.push(mode.to_string());
                    let bases = spec["resources"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|r| &r["base"])
                        .chain(
                            spec["pipeline"]
                                .as_array()
                                .into_iter()
                                .flatten()
                                .flat_map(|s| s["input"]["resources"].as_array())
                                .flatten()
                                .map(|r| &r["base"]),
                        );
                    composed.extend(bases.map(|b| {
                        format!(
                            "{} {}",
                            b["apiVersion"].as_str().unwrap_or_default(),
                            b["kind"].as_str().unwrap_or_default()
                        )
                    }));
                }
                Some("CompositeResourceDefinition") => xrd_versions.push(api_version),
                _ => {}
            }
        }
    }
    assert!(modes.iter().any(|m| m == "Resources"), "{modes:?}");
    assert!(modes.iter().any(|m| m == "Pipeline"), "{modes:?}");
    for version in [
        "apiextensions.crossplane.io/v1",
        "apiextensions.crossplane.io/v2",
    ] {
        assert!(
            xrd_versions.iter().any(|v| v == version),
            "{xrd_versions:?}"
        );
    }
    // A managed resource of each scope's provider, and built-in kinds.
    for kind in [
        "compute.gcp.upbound.io/v1beta1 Network",
        "s3.aws.m.upbound.io/v1beta1 Bucket",
        "apps/v1 Deployment",
        "v1 Service",
    ] {
        assert!(composed.iter().any(|c| c == kind), "{kind}: {composed:?}");
    }
    // The denied case: the example with a mistake per check.
    assert!(
        training_files().contains(&"testdata/invalid/composition.yaml"),
        "a denied Composition"
    );
}

#[test]
fn the_script_needs_llvm_profdata_before_it_builds() {
    let out = Command::new("bash")
        .arg(root().join("scripts/pgo-build.sh"))
        .env("LLVM_PROFDATA", "/nonexistent/llvm-profdata")
        .env(
            "CARGO_TARGET_DIR",
            std::env::temp_dir().join("cw-pgo-refused"),
        )
        .output()
        .expect("run bash");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with(
            "error: no llvm-profdata at /nonexistent/llvm-profdata: run 'rustup component add llvm-tools', or set LLVM_PROFDATA"
        ),
        "{stderr}"
    );
    assert!(!stderr.contains("instrumented build"), "{stderr}");

    let out = Command::new("bash")
        .arg(root().join("scripts/pgo-build.sh"))
        .arg("--bogus")
        .output()
        .expect("run bash");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("usage: "),
        "{out:?}"
    );
}
