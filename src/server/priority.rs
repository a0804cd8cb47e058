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
