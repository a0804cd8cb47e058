//! Starting a real function process on a loopback port for a test (tests/runner_hostile.rs,
//! tests/runner_pythonic.rs include this file).
//!
//! A port is picked by binding 127.0.0.1:0 and freeing it for the function, so another
//! process may take it first. The function then fails to bind and exits (gRPC's "Failed to
//! bind to address"), and [`start`] tries again on a new port. It waits for the port by
//! connecting (Python functions take about half a second to listen when idle, several on a
//! busy machine), and on Linux takes a connection for the function's only once the
//! listening socket is one of the function's own (`/proc`), not another process's that took
//! the port.

// Each test binary uses a part of it.
#![allow(dead_code)]

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long a function may take to listen on a loaded 2-core machine.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// Ports tried before giving up.
const ATTEMPTS: usize = 5;

/// A function process, killed when dropped.
pub struct Function {
    child: Child,
    /// Where it listens.
    pub address: SocketAddr,
    /// Its standard output and error.
    pub log: PathBuf,
    /// How long it took to listen.
    pub started_in: Duration,
}

impl Function {
    /// What the function wrote so far (for a failure's message).
    pub fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits up to `timeout` for the function to exit on its own.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if started.elapsed() > timeout {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Function {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Why one attempt did not give a listening function.
pub enum Failed {
    /// Another process had the port.
    Bind(String),
}

/// Starts the function `command(address)` makes, on a free loopback port (see the module's
/// comment), its output in a file under `logs` named after `name`.
pub fn start(name: &str, logs: &Path, command: impl Fn(&str) -> Command) -> Function {
    let mut last = String::new();
    for _ in 0..ATTEMPTS {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        match start_on(name, logs, port, &command) {
            Ok(function) => return function,
            Err(Failed::Bind(output)) => last = output,
        }
    }
    panic!("{name} could not bind a port in {ATTEMPTS} tries; the last said:\n{last}");
}

/// Starts the function on `port`; `Err` when it could not bind it. Any other exit before
/// it listens, or not listening within a minute, fails the test with its output.
pub fn start_on(
    name: &str,
    logs: &Path,
    port: u16,
    command: &impl Fn(&str) -> Command,
) -> Result<Function, Failed> {
    static STARTED: AtomicUsize = AtomicUsize::new(0);
    std::fs::create_dir_all(logs).expect("the log directory");
    let n = STARTED.fetch_add(1, Ordering::Relaxed);
    let log = logs.join(format!("{name}-{}-{n}.log", std::process::id()));
    let out = std::fs::File::create(&log).expect("a log file");
    let err = out.try_clone().expect("the log file again");
    let address = SocketAddr::from(([127, 0, 0, 1], port));
    let began = Instant::now();
    let child = command(&address.to_string())
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .unwrap_or_else(|e| panic!("start {name}: {e}"));
    let mut function = Function {
        child,
        address,
        log,
        started_in: Duration::ZERO,
    };
    loop {
        if let Ok(Some(status)) = function.child.try_wait() {
            let output = function.output();
            if output.contains("Failed to bind") || output.contains("Address already in use") {
                return Err(Failed::Bind(output));
            }
            panic!("{name} exited ({status}) before it listened on {address}:\n{output}");
        }
        if TcpStream::connect_timeout(&address, Duration::from_secs(1)).is_ok()
            && listens(function.child.id(), port) != Some(false)
        {
            function.started_in = began.elapsed();
            return Ok(function);
        }
        assert!(
            began.elapsed() < START_TIMEOUT,
            "{name} did not listen on {address} within {START_TIMEOUT:?}:\n{}",
            function.output()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether process `pid` holds a socket listening on loopback `port` (`None` without
/// `/proc`).
fn listens(pid: u32, port: u16) -> Option<bool> {
    // local_address is ADDR:PORT in hex: 127.0.0.1 is 0100007F, or in IPv6's table (gRPC's
    // dual-stack sockets) ::ffff:127.0.0.1; st 0A is LISTEN.
    let tables = [
        ("/proc/net/tcp", "0100007F"),
        ("/proc/net/tcp6", "0000000000000000FFFF00000100007F"),
    ];
    let mut inodes = Vec::new();
    for (table, loopback) in tables {
        let Ok(table) = std::fs::read_to_string(table) else {
            continue;
        };
        let local = format!("{loopback}:{port:04X}");
        for line in table.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.get(1) == Some(&local.as_str())
                && fields.get(3) == Some(&"0A")
                && let Some(inode) = fields.get(9)
            {
                inodes.push(format!("socket:[{inode}]"));
            }
        }
    }
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
    Some(fds.flatten().any(|fd| {
        std::fs::read_link(fd.path())
            .is_ok_and(|target| inodes.iter().any(|i| target.as_os_str() == i.as_str()))
    }))
}

/// The test binary's scratch directory.
pub fn tmp() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
}

/// Runs an install script of `scripts/` with `dir` (under [`tmp`]) and returns what it
/// printed: the path of the executable it installed.
fn install(script: &str, dir: &str) -> String {
    let out = Command::new(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("scripts")
            .join(script),
    )
    .arg(tmp().join(dir))
    .stderr(Stdio::inherit())
    .output()
    .unwrap_or_else(|e| panic!("run scripts/{script}: {e}"));
    assert!(out.status.success(), "scripts/{script} failed");
    String::from_utf8(out.stdout)
        .expect("UTF-8")
        .trim()
        .to_string()
}

/// function-pythonic 0.6.3's executable, installed once per target directory
/// (`scripts/function-pythonic.sh`).
pub fn pythonic_executable() -> String {
    install("function-pythonic.sh", "function-pythonic")
}

/// The Python of a virtual environment with crossplane-function-sdk-python 0.15.1
/// (`scripts/function-sdk.sh`).
pub fn sdk_python() -> String {
    install("function-sdk.sh", "function-sdk")
}

/// Makes `command`'s process die with the thread that starts it (`PR_SET_PDEATHSIG`): a
/// function started for a whole test binary, by a thread that never ends, ends with it.
pub fn dies_with_its_starter(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl in the child before exec; nothing allocated or locked.
    unsafe {
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
}

/// function-pythonic started with `grpc --address <address>` and `args`.
pub fn start_pythonic(name: &str, args: &[&str]) -> Function {
    let bin = pythonic_executable();
    start(name, &tmp().join("function-logs"), |address| {
        let mut command = Command::new(&bin);
        command.args(["grpc", "--address", address]).args(args);
        dies_with_its_starter(&mut command);
        command
    })
}
