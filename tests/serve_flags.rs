//! `composition-webhook serve` refuses numbers and durations it cannot serve with at start
//! (exit 2, a message with the allowed range) rather than failing every request later.

use std::process::{Command, Output};

/// Runs `serve` with the example's CRDs, loopback ports and `args`.
fn serve(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_composition-webhook"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["serve", "--crds", "testdata/crds", "--self-signed"])
        .args([
            "--address",
            "127.0.0.1:0",
            "--operations-address",
            "127.0.0.1:0",
        ])
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run the binary")
}

/// Asserts exit 2 and that standard error has `message`.
fn refused(o: &Output, message: &str) {
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(message), "{stderr}");
}

#[test]
fn numbers_out_of_range_are_refused_at_start() {
    for (flag, value, message) in [
        (
            "--max-body-bytes",
            "0",
            "invalid value '0' for '--max-body-bytes <BYTES>': must be from 4096 to 1073741824",
        ),
        (
            "--max-body-bytes",
            "lots",
            "invalid value 'lots' for '--max-body-bytes <BYTES>': expected a whole number from 4096 to 1073741824",
        ),
        (
            "--body-memory-bytes",
            "100",
            "invalid value '100' for '--body-memory-bytes <BYTES>': must be from 4096 to 68719476736",
        ),
        (
            "--workers",
            "0",
            "invalid value '0' for '--workers <N>': must be from 1 to 1024",
        ),
        (
            "--review-nice",
            "20",
            "invalid value '20' for '--review-nice <N>': must be auto or a whole number from 0 to 19",
        ),
        (
            "--max-connections",
            "0",
            "invalid value '0' for '--max-connections <N>': must be from 1 to 1000000",
        ),
        (
            "--max-reviews-in-flight",
            "0",
            "invalid value '0' for '--max-reviews-in-flight <N>': must be from 1 to 1000000",
        ),
        (
            "--max-reviews-in-flight-per-client",
            "0",
            "invalid value '0' for '--max-reviews-in-flight-per-client <N>': must be from 1 to 1000000",
        ),
        (
            "--operations-max-connections",
            "0",
            "invalid value '0' for '--operations-max-connections <N>': must be from 1 to 65536",
        ),
        (
            "--list-page-size",
            "0",
            "invalid value '0' for '--list-page-size <N>': 0 is not in 1..=10000",
        ),
        (
            "--audit-cpu",
            "0",
            "invalid value '0' for '--audit-cpu <SHARE>': must be a share of one core, more than 0 and at most 1 (0.25)",
        ),
        (
            "--audit-cpu",
            "1.5",
            "invalid value '1.5' for '--audit-cpu <SHARE>': must be a share of one core, more than 0 and at most 1 (0.25)",
        ),
        (
            "--audit-cpu",
            "NaN",
            "invalid value 'NaN' for '--audit-cpu <SHARE>': must be a share of one core, more than 0 and at most 1 (0.25)",
        ),
    ] {
        refused(&serve(&[flag, value], &[]), message);
    }
}

#[test]
fn durations_must_be_positive_and_at_most_a_day() {
    for flag in [
        "--handshake-timeout",
        "--header-read-timeout",
        "--idle-timeout",
        "--drain-timeout",
        "--tls-reload-interval",
        "--api-timeout",
    ] {
        for value in ["0s", "0", "25h"] {
            refused(
                &serve(&[flag, value], &[]),
                &format!(
                    "invalid value '{value}' for '{flag} <DURATION>': must be more than 0s and at most 24h"
                ),
            );
        }
    }
    refused(
        &serve(&["--idle-timeout", "soon"], &[]),
        "invalid value 'soon' for '--idle-timeout <DURATION>': invalid duration \"soon\"",
    );
}

#[test]
fn flags_that_do_not_fit_together_are_refused() {
    let o = serve(
        &[
            "--max-body-bytes",
            "1048576",
            "--body-memory-bytes",
            "65536",
        ],
        &[],
    );
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "error: --body-memory-bytes (65536) must be at least --max-body-bytes (1048576): a body of the largest size must fit\n"
    );
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn environment_variables_are_checked_as_flags() {
    refused(
        &serve(&[], &[("COMPOSITION_WEBHOOK_MAX_BODY_BYTES", "0")]),
        "invalid value '0' for '--max-body-bytes <BYTES>': must be from 4096 to 1073741824",
    );
    refused(
        &serve(&[], &[("COMPOSITION_WEBHOOK_HANDSHAKE_TIMEOUT", "0s")]),
        "invalid value '0s' for '--handshake-timeout <DURATION>': must be more than 0s and at most 24h",
    );
}
