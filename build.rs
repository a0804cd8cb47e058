//! Compiles Crossplane's `run_function.proto` (proto/fn/) with protox, a pure-Rust `.proto`
//! compiler, so no machine needs `protoc`.
//!
//! The library gets the v1 messages only (its client calls the method paths itself): the
//! v1beta1 service's messages are the same, field for field, so the fallback sends v1
//! messages on v1beta1's path.
//! `tests/runner.rs` gets servers for both packages, generated apart into `test_server/`,
//! so that the test's function servers share no code with the client under test.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    let out = PathBuf::from(std::env::var("OUT_DIR")?);

    let v1 = protox::compile(["fn/v1/run_function.proto"], ["proto"])?;
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(false)
        // Maps in name order: resources are read, and errors found, in the same order
        // every time.
        .btree_map(".")
        .out_dir(&out)
        .compile_fds(v1)?;

    let both = protox::compile(
        ["fn/v1/run_function.proto", "fn/v1beta1/run_function.proto"],
        ["proto"],
    )?;
    let servers = out.join("test_server");
    std::fs::create_dir_all(&servers)?;
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(true)
        .build_transport(false)
        .out_dir(&servers)
        .compile_fds(both)?;
    Ok(())
}
