//! The `composition-webhook` binary: see [`composition_webhook::cli`].

fn main() -> std::process::ExitCode {
    composition_webhook::cli::main()
}
