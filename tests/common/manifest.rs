//! Reading `../shared/corpus/manifest.json` entries; shared by the corpus test and the benches
//! (which include this file by path).

use std::collections::BTreeSet;

use serde_json::Value;

/// The schema files (relative to the corpus) a manifest entry needs: its XRD, its listed
/// schema files and each composed resource's CRD, each once, sorted.
pub fn schema_files(entry: &Value) -> BTreeSet<&str> {
    let mut files: BTreeSet<&str> = BTreeSet::new();
    files.extend(entry["xrd_file"].as_str());
    for f in entry["schema_files"].as_array().into_iter().flatten() {
        files.extend(f.as_str());
    }
    for r in entry["resources"].as_array().into_iter().flatten() {
        files.extend(r["schema_file"].as_str());
    }
    files
}
