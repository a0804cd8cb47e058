//! A thread's own scheduling priority: the review threads run a set number of nice levels
//! below the server's threads, and the audit's thread at the lowest nice value when it
//! cannot have `SCHED_IDLE`. Linux keeps a nice value per thread (`setpriority` with
//! `PRIO_PROCESS` and 0 is the calling thread); elsewhere it is the whole process's, which
//! is left alone.

/// An increment that reaches nice 19, the lowest, from any nice value (-20 to 19).
pub const TO_LOWEST: i32 = 39;

/// Lowers the calling thread's priority by `increment` nice levels, down to nice 19 (0 or
/// less leaves it). Does nothing outside Linux.
pub fn lower_this_thread(increment: i32) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    if increment > 0 {
        let lowered = this_thread_nice().saturating_add(increment).min(19);
        // SAFETY: sets the calling thread's (0) nice value; plain integer arguments.
        if unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, lowered) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = increment;
    Ok(())
}

/// The calling thread's nice value (Linux). `getpriority` cannot fail for the calling
/// thread, so its -1 is nice -1, not an error.
#[cfg(target_os = "linux")]
pub fn this_thread_nice() -> i32 {
    // SAFETY: reads the calling thread's (0) nice value; plain integer arguments.
    unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }
}

/// How many nice levels below the server's threads reviews run: 19 where the process has
/// a CPU cgroup of its own (a container in a pod), where nice orders only the server's own
/// threads; 0 elsewhere, where nice 19 would lose every time slice to any busy process
/// beside it (a shared host, a CI machine) and reviews would miss their deadlines. The
/// reason is for the start-up log.
pub fn review_nice_for_this_process() -> (i32, String) {
    match cgroup_of_its_own() {
        (true, why) => (super::review_threads::DEFAULT_REVIEW_NICE, why),
        (false, why) => (0, why),
    }
}

/// Whether the process has a CPU cgroup of its own (its `cgroup.procs` lists no other
/// process), and what was found, in words.
pub fn cgroup_of_its_own() -> (bool, String) {
    match own_cpu_cgroup() {
        Some((dir, true)) => (
            true,
            format!(
                "the process has a CPU cgroup of its own ({})",
                dir.display()
            ),
        ),
        Some((dir, false)) => (
            false,
            format!(
                "the process shares its CPU cgroup ({}) with other processes",
                dir.display()
            ),
        ),
        None => (
            false,
            "the process's CPU cgroup could not be read".to_string(),
        ),
    }
}

/// The process's CPU cgroup directory, and whether it holds no other process.
fn own_cpu_cgroup() -> Option<(std::path::PathBuf, bool)> {
    let membership = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let pid = std::process::id();
    cpu_cgroup_dirs(&membership).into_iter().find_map(|dir| {
        let procs = std::fs::read_to_string(dir.join("cgroup.procs")).ok()?;
        Some((dir, holds_only(&procs, pid)))
    })
}

/// Where the CPU cgroup of `/proc/self/cgroup`'s text may be mounted: cgroup v1's `cpu`
/// controller (alone or joined with `cpuacct`), else cgroup v2's unified hierarchy.
fn cpu_cgroup_dirs(membership: &str) -> Vec<std::path::PathBuf> {
    let root = std::path::Path::new("/sys/fs/cgroup");
    let (mut v1, mut v2) = (Vec::new(), Vec::new());
    for line in membership.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let relative = path.trim_start_matches('/');
        if controllers.split(',').any(|c| c == "cpu") {
            for mount in [controllers, "cpu", "cpu,cpuacct", "cpuacct,cpu"] {
                v1.push(root.join(mount).join(relative));
            }
        } else if controllers.is_empty() {
            v2.push(root.join(relative));
            v2.push(root.join("unified").join(relative));
        }
    }
    let mut dirs = Vec::new();
    for dir in v1.into_iter().chain(v2) {
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    dirs
}

/// Whether a `cgroup.procs` text lists `pid` and no other process.
fn holds_only(procs: &str, pid: u32) -> bool {
    let mut listed = procs.split_whitespace().peekable();
    listed.peek().is_some() && listed.all(|p| p.parse() == Ok(pid))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn the_cpu_cgroup_is_found_in_v1_and_v2() {
        // cgroup v1 beside a v2 hierarchy (this project's CI machines).
        let hybrid = "9:name=systemd:/\n4:memory:/a/b\n2:cpuacct:/\n1:cpu:/pod/x\n0::/\n";
        assert_eq!(
            cpu_cgroup_dirs(hybrid),
            [
                "/sys/fs/cgroup/cpu/pod/x",
                "/sys/fs/cgroup/cpu,cpuacct/pod/x",
                "/sys/fs/cgroup/cpuacct,cpu/pod/x",
                "/sys/fs/cgroup/",
                "/sys/fs/cgroup/unified/",
            ]
            .map(PathBuf::from)
        );
        // cgroup v2 only, inside a container's cgroup namespace.
        let v2 = "0::/\n";
        assert_eq!(
            cpu_cgroup_dirs(v2),
            [
                PathBuf::from("/sys/fs/cgroup/"),
                PathBuf::from("/sys/fs/cgroup/unified/")
            ]
        );
        let joined = "3:cpu,cpuacct:/kubepods/burstable/pod1/c1\n";
        assert_eq!(
            cpu_cgroup_dirs(joined)[0],
            PathBuf::from("/sys/fs/cgroup/cpu,cpuacct/kubepods/burstable/pod1/c1")
        );
    }

    #[test]
    fn a_cgroup_is_the_process_own_when_it_lists_only_it() {
        assert!(holds_only("42\n", 42));
        assert!(!holds_only("1\n42\n", 42));
        assert!(!holds_only("", 42));
        assert!(!holds_only("7\n", 42));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_test_shares_its_cgroup() {
        // The test harness runs its tests beside other processes (cargo at least).
        let (nice, why) = review_nice_for_this_process();
        assert_eq!(nice, 0, "{why}");
    }
}
