//! What the cluster benches (`audit`, `cluster`) build their fake clusters from: the corpus'
//! definitions and Compositions, renamed copies of CRDs, and the small helpers both print with.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::{Value, json};

/// A numeric setting from the environment, or `default`.
pub fn setting(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Every YAML document under `dir` (recursively) whose kind is `kind`, by `metadata.name`
/// (of several provider versions of one CRD, the largest).
pub fn definitions(dir: &Path, kind: &str) -> BTreeMap<String, Value> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(read) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in read.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "yaml" || x == "yml") {
                files.push(p);
            }
        }
    }
    files.sort();
    let mut out = BTreeMap::new();
    for f in files {
        let Ok(docs) = composition_webhook::document::load_path(&f) else {
            continue;
        };
        for d in docs {
            if d.value["kind"] == kind
                && let Some(name) = d.value["metadata"]["name"].as_str()
            {
                let size = |v: &Value| serde_json::to_vec(v).map_or(0, |b| b.len());
                if out.get(name).is_none_or(|old| size(old) < size(&d.value)) {
                    out.insert(name.to_string(), d.value);
                }
            }
        }
    }
    out
}

/// `crd` under the API group `<prefix><n>.<group>`.
pub fn renamed(crd: &Value, prefix: &str, n: usize) -> Value {
    let mut c = crd.clone();
    let group = format!(
        "{prefix}{n}.{}",
        crd["spec"]["group"].as_str().unwrap_or_default()
    );
    let plural = crd["spec"]["names"]["plural"].as_str().unwrap_or_default();
    c["metadata"] = json!({"name": format!("{plural}.{group}")});
    c["spec"]["group"] = json!(group);
    c
}

/// The corpus' Compositions with the file each came from (each file once, as listed in
/// `manifest.json`).
pub fn corpus_compositions(corpus: &Path) -> Vec<(String, Value)> {
    let manifest: Value = serde_json::from_slice(
        &std::fs::read(corpus.join("manifest.json")).expect("corpus manifest.json"),
    )
    .expect("manifest JSON");
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for entry in manifest["compositions"].as_array().into_iter().flatten() {
        let Some(file) = entry["file"].as_str() else {
            continue;
        };
        if !seen.insert(file.to_string()) {
            continue;
        }
        let Ok(docs) = composition_webhook::document::load_path(&corpus.join(file)) else {
            continue;
        };
        for d in docs {
            if d.value["kind"] == "Composition" {
                out.push((file.to_string(), d.value));
            }
        }
    }
    out
}

/// KiB as MiB with one decimal.
pub fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// The median, minimum and maximum of `v` (not empty).
pub fn median<T: PartialOrd + Copy>(mut v: Vec<T>) -> (T, T, T) {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    (v[v.len() / 2], v[0], v[v.len() - 1])
}
