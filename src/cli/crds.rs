//! `composition-webhook crds [--out DIR]`: the Composition and CompositeResourceDefinition
//! CRDs generated from the model ([`crate::model::crds`]), for a cluster without
//! Crossplane. Without `--out` both are printed as one multi-document YAML stream; with
//! `--out DIR` each is written to its file in DIR (`crds/` in the repository holds them).
//! Exit status: 0, or 2 when the output cannot be written.

use std::io::{self, Write};
use std::path::PathBuf;

use super::{EXIT_ALLOWED, EXIT_INPUT_ERROR};
use crate::model::crds::generated_crds_yaml;

/// Arguments of `crds`.
#[derive(Debug, clap::Args)]
pub struct CrdsArgs {
    /// Write each CRD to its file in this directory (created if missing) instead of printing them.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

/// Runs `crds`: 0 when everything was written, 2 otherwise.
pub fn run(args: &CrdsArgs) -> u8 {
    let files = generated_crds_yaml();
    let mut stderr = io::stderr().lock();
    let Some(dir) = &args.out else {
        let stream: String = files.iter().map(|(_, text)| text.as_str()).collect();
        return match io::stdout().lock().write_all(stream.as_bytes()) {
            Ok(()) => EXIT_ALLOWED,
            // The reader went away (`| head`): nothing left to tell it.
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => EXIT_ALLOWED,
            Err(e) => {
                let _ = writeln!(stderr, "error: writing output: {e}");
                EXIT_INPUT_ERROR
            }
        };
    };
    if let Err(e) = std::fs::create_dir_all(dir) {
        let _ = writeln!(stderr, "error: creating {}: {e}", dir.display());
        return EXIT_INPUT_ERROR;
    }
    let mut stdout = io::stdout().lock();
    for (name, text) in &files {
        let path = dir.join(name);
        if let Err(e) = std::fs::write(&path, text) {
            let _ = writeln!(stderr, "error: writing {}: {e}", path.display());
            return EXIT_INPUT_ERROR;
        }
        let _ = writeln!(stdout, "wrote {}", path.display());
    }
    EXIT_ALLOWED
}
