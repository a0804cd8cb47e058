//! function-pythonic 0.6.3 (PyPI `crossplane-function-pythonic`, a real third-party
//! function) for the benches: installed by `scripts/function-pythonic.sh` once per target
//! directory and started on a free loopback port with `--insecure` by
//! `tests/functions/launch.rs`.

// Relative to this file's folder, as rustc resolves a `#[path]` in a module's own file.
#[path = "../../tests/functions/launch.rs"]
pub mod launch;

use std::path::PathBuf;
use std::process::{Command, Stdio};

/// The function's name in the bench's Compositions (`functionRef.name`).
pub const NAME: &str = "function-pythonic";

/// A running function-pythonic, killed on drop.
pub struct Pythonic {
    /// The process and where it listens.
    pub function: launch::Function,
    /// Its pid (for its CPU time), found among this process's children.
    pub pid: Option<u32>,
}

impl Pythonic {
    /// `host:port`.
    pub fn address(&self) -> String {
        self.function.address.to_string()
    }
}

/// Installs (once) and starts function-pythonic.
pub fn start() -> Pythonic {
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let out = Command::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/scripts/function-pythonic.sh"
    ))
    .arg(tmp.join("function-pythonic"))
    .stderr(Stdio::inherit())
    .output()
    .expect("run scripts/function-pythonic.sh");
    assert!(out.status.success(), "installing function-pythonic failed");
    let bin = String::from_utf8(out.stdout)
        .expect("UTF-8")
        .trim()
        .to_string();
    let function = launch::start(NAME, &tmp.join("function-logs"), |address| {
        let mut command = Command::new(&bin);
        command.args(["grpc", "--insecure", "--address", address]);
        command
    });
    let pid = child_pid(&function.address.to_string());
    eprintln!(
        "function-pythonic listening on {} after {:?} (pid {})",
        function.address,
        function.started_in,
        pid.map_or("unknown".to_string(), |p| p.to_string())
    );
    Pythonic { function, pid }
}

/// The pid of this process's child whose command line holds `address`.
fn child_pid(address: &str) -> Option<u32> {
    let me = std::process::id();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // The parent's pid is the second field after the command's name.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, after)| after.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid != Some(me) {
            continue;
        }
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(address) {
            return Some(pid);
        }
    }
    None
}
