//! function-pythonic 0.6.3 (PyPI `crossplane-function-pythonic`, a real third-party
//! composition function), installed once per target directory by
//! `scripts/function-pythonic.sh` and started on loopback with `--insecure`, as `crossplane
//! render` starts functions. One server per test process, shared by its tests; it dies
//! with the process (`PR_SET_PDEATHSIG`).

#![allow(dead_code)]

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// A running function-pythonic.
pub struct Pythonic {
    child: Mutex<Child>,
    /// `127.0.0.1:PORT`.
    pub address: String,
}

/// The `function-pythonic` executable, installed if need be.
pub fn executable() -> PathBuf {
    let venv = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("function-pythonic");
    let out = Command::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/scripts/function-pythonic.sh"
    ))
    .arg(&venv)
    .stderr(Stdio::inherit())
    .output()
    .expect("run scripts/function-pythonic.sh");
    assert!(out.status.success(), "installing function-pythonic failed");
    PathBuf::from(String::from_utf8(out.stdout).expect("UTF-8").trim())
}

/// Starts function-pythonic with `args` (after `grpc --address`) on a free loopback port,
/// and waits until it accepts connections; a start that lost its port to another process
/// is tried again on another.
pub fn start(args: &[&str]) -> Pythonic {
    let bin = executable();
    for _ in 0..3 {
        // A port the system picked, freed for the function to take.
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let address = format!("127.0.0.1:{port}");
        let mut cmd = Command::new(&bin);
        cmd.args(["grpc", "--address", &address])
            .args(args)
            .stdout(Stdio::null())
            // Shown with the test's output when it fails: why the function did not come up.
            .stderr(Stdio::inherit());
        // SAFETY: prctl in the child before exec; no allocation, no lock.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = cmd.spawn().expect("start function-pythonic");
        let socket: SocketAddr = address.parse().expect("an address");
        let until = Instant::now() + Duration::from_secs(120);
        loop {
            if TcpStream::connect_timeout(&socket, Duration::from_millis(200)).is_ok() {
                return Pythonic {
                    child: Mutex::new(child),
                    address,
                };
            }
            if child.try_wait().ok().flatten().is_some() {
                break;
            }
            assert!(
                Instant::now() < until,
                "function-pythonic did not listen on {address} within 120 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    panic!("function-pythonic exited three times before listening");
}

/// The test process's insecure function-pythonic.
pub fn shared() -> &'static Pythonic {
    static SHARED: OnceLock<Pythonic> = OnceLock::new();
    SHARED.get_or_init(|| start(&["--insecure"]))
}

impl Pythonic {
    /// Stops it.
    pub fn stop(&self) {
        let mut child = self.child.lock().unwrap_or_else(|e| e.into_inner());
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for Pythonic {
    fn drop(&mut self) {
        self.stop();
    }
}
