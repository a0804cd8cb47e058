//! The `composition-webhook` binary: see [`composition_webhook::cli`].

/// mimalloc: the server parses and drops a JSON tree per review on several threads, where
/// glibc's allocator spent about a third of the CPU (measured with `benches/serve.rs`).
/// Counted per thread, so that each review's budget knows the memory it holds.
#[global_allocator]
static GLOBAL: composition_webhook::budget::CountingAllocator<mimalloc::MiMalloc> =
    composition_webhook::budget::CountingAllocator(mimalloc::MiMalloc);

fn main() -> std::process::ExitCode {
    composition_webhook::cli::main()
}
