//! The webhook in front of hostile functions written with the real Python SDK
//! (`tests/functions/hostile.py`, crossplane-function-sdk-python 0.15.1 installed by
//! `scripts/function-sdk.sh`): one that sleeps past the deadline, one that answers 5 MiB of
//! resources, one that answers too many values, one that answers Fatal, one that closes the
//! connection. `serve` answers every review within its deadline, never denies one in loose
//! mode for what a function did, and still answers normally afterwards.

#[path = "functions/launch.rs"]
mod launch;
mod webhook;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// A loaded 2-core machine: timing assertions allow this much past a deadline.
const MARGIN: Duration = Duration::from_secs(3);

/// `hostile.py --behaviour <behaviour>` with `flags` on a port of its own.
fn start(python: &str, behaviour: &str, flags: &[&str]) -> launch::Function {
    launch::start(
        &format!("serve-hostile-{behaviour}"),
        &launch::tmp().join("function-logs"),
        |address| {
            let mut command = Command::new(python);
            command
                .arg(concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/tests/functions/hostile.py"
                ))
                .args(["--insecure", "--address", address, "--behaviour", behaviour])
                .args(flags);
            launch::dies_with_its_starter(&mut command);
            command
        },
    )
}

/// A Composition of the cluster scoped `Settings` XR whose one step runs `function` with
/// `behaviour`.
fn composition(name: &str, function: &str, behaviour: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.crossplane.io/v1",
        "kind": "Composition",
        "metadata": {"name": name},
        "spec": {
            "compositeTypeRef": {"apiVersion": "example.crossplane.io/v1", "kind": "Settings"},
            "mode": "Pipeline",
            "pipeline": [{
                "step": behaviour,
                "functionRef": {"name": function},
                "input": {"apiVersion": "hostile.example.org/v1", "kind": "Input", "behaviour": behaviour},
            }],
        },
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_functions_never_keep_a_review_past_its_deadline_nor_deny_it() {
    let python = launch::sdk_python();
    // 5 MiB answers need the SDK's send limit raised; the client's 4 MiB still refuses them.
    let hostile = start(&python, "ok", &["--max-send-message-size", "16"]);
    let crash = start(&python, "crash", &[]);
    let xrd =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/functions/pythonic/cluster-xrd.yaml");
    let addresses = format!(
        "function-hostile={},function-crash={}",
        hostile.address, crash.address
    );
    let server = webhook::Server::start(&[&xrd], &["--function-address", &addresses]);

    // Each review gets 2 s; the answer comes within it, allowed with the step's warning.
    // Warnings are cut in the middle past their length: the words are from either end.
    let cases = [
        ("sleep", "function-hostile", "did not answer within"),
        ("huge", "function-hostile", "the limit is: 4194304 bytes"),
        ("many", "function-hostile", "more than 262144 values"),
        (
            "crash",
            "function-crash",
            "(step \"crash\") could not be run",
        ),
    ];
    for (behaviour, function, said) in cases {
        let object = composition(&format!("hostile-{behaviour}"), function, behaviour);
        let started = Instant::now();
        let response = webhook::review_object(&server, &object, "2s").await;
        let took = started.elapsed();
        assert!(
            took < Duration::from_secs(2) + MARGIN,
            "{behaviour}: answered after {took:?}"
        );
        let (allowed, _, _, warnings) = webhook::verdict(&response);
        assert!(allowed, "{behaviour}: {response}");
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("spec.pipeline[0]") && w.contains(said)),
            "{behaviour}: {warnings:?}"
        );
    }

    // Fatal: Crossplane stops the pipeline; from the mock XR a warning, not a denial.
    let fatal = webhook::review_object(
        &server,
        &composition("hostile-fatal", "function-hostile", "fatal"),
        "10s",
    )
    .await;
    let (allowed, _, _, warnings) = webhook::verdict(&fatal);
    assert!(allowed, "{fatal}");
    assert!(
        warnings.iter().any(|w| w.contains(
            "spec.pipeline[0]: Invalid value: pipeline step \"fatal\" returned a fatal result: the input is wrong: behaviour fatal (Crossplane stops the pip"
        ) && w.ends_with("on the mock composite resource, which a real one differs from, so this is a warning)")),
        "{warnings:?}"
    );

    // The same function, asked normally, composes; the server is healthy.
    let ok = webhook::review_object(
        &server,
        &composition("hostile-ok", "function-hostile", "ok"),
        "10s",
    )
    .await;
    let (allowed, _, _, warnings) = webhook::verdict(&ok);
    assert!(allowed, "{ok}");
    assert!(
        !warnings.iter().any(|w| w.contains("could not be run")),
        "{warnings:?}"
    );
    // What it composed was validated: its Bucket has no CRD, which the lookup says.
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("spec.pipeline[0].resources[bucket]") || w.contains("Bucket")),
        "{warnings:?}"
    );
    let mut server = server;
    webhook::assert_healthy(&mut server).await;
}
