//! The `composition-webhook` binary: see [`composition_webhook::cli`].

/// mimalloc: the server parses and drops a JSON tree per review on several threads, where
/// glibc's allocator spent about a third of the CPU (measured with `benches/serve.rs`).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (option 15 in its v2 and v3 headers; default 10 ms).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

fn main() -> std::process::ExitCode {
    // Purge freed memory at once: with a delay, mimalloc purges on a thread's later
    // allocations, so what a thread freed before idling (a runtime worker that parsed a list
    // of 1,000 CRDs) stayed resident. Measured with benches/cluster.rs: RSS after syncing
    // 1,000 CRDs 69 -> 40 MiB; benches/serve.rs throughput unchanged.
    // SAFETY: sets an option value; mimalloc reads options atomically.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0) };
    composition_webhook::cli::main()
}
