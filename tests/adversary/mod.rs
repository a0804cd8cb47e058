//! Hostile Compositions: small documents that ask the renderer and the validator for
//! gigabytes or minutes, each one a case an outside probe of the webhook found (issue
//! "Bounded by construction"). Every one is a Composition the API server accepts (under its
//! 3 MiB object limit and its 10,000 levels of JSON nesting), written against the example
//! XRD and CRDs of `testdata/` so that it is rendered and validated for real.
//!
//! Shared by `tests/bounded.rs` and `benches/soak.rs`.
#![allow(dead_code)]

use serde_json::{Value, json};

/// The mode annotation.
pub const MODE: &str = "crossplane.io/composition-schema-aware-validation-mode";

/// A Composition of the example XRD with `resources`, in `mode` (or the default).
pub fn composition(name: &str, mode: Option<&str>, resources: Value) -> Value {
    let mut c = json!({
        "apiVersion": "apiextensions.crossplane.io/v1",
        "kind": "Composition",
        "metadata": {"name": name},
        "spec": {
            "compositeTypeRef": {
                "apiVersion": "gcp.platformref.upbound.io/v1alpha1",
                "kind": "XNetwork"
            },
            "resources": resources
        }
    });
    if let Some(mode) = mode {
        c["metadata"]["annotations"] = json!({ MODE: mode });
    }
    c
}

/// The example's Network base.
pub fn network_base() -> Value {
    json!({
        "apiVersion": "compute.gcp.upbound.io/v1beta1",
        "kind": "Network",
        "spec": {"forProvider": {"autoCreateSubnetworks": false, "routingMode": "REGIONAL"}}
    })
}

/// One Network template with `patches`.
pub fn network(patches: Value) -> Value {
    json!([{"name": "network", "base": network_base(), "patches": patches}])
}

/// A Format transform.
pub fn format(fmt: &str) -> Value {
    json!({"type": "string", "string": {"type": "Format", "fmt": fmt}})
}

/// `toFieldPath: metadata.finalizers[4294967295]`: growing an array to that index is
/// 2^32 elements (309 GB when the probe found it).
pub fn huge_index(mode: Option<&str>) -> Value {
    composition(
        "huge-index",
        mode,
        network(json!([{
            "fromFieldPath": "spec.id",
            "toFieldPath": "metadata.finalizers[4294967295]"
        }])),
    )
}

/// Format widths of a million, chained: each transform pads every argument to a million
/// characters, and `%[1]v` repeats the argument.
pub fn format_widths(mode: Option<&str>) -> Value {
    let wide = "%999999[1]v".repeat(64);
    let transforms: Vec<Value> = (0..8).map(|_| format(&wide)).collect();
    composition(
        "format-widths",
        mode,
        network(json!([{
            "fromFieldPath": "spec.id",
            "toFieldPath": "metadata.annotations[wide]",
            "transforms": transforms
        }])),
    )
}

/// A Combine patch whose format pads each variable to a million characters, many times.
pub fn combine_widths(mode: Option<&str>) -> Value {
    composition(
        "combine-widths",
        mode,
        network(json!([{
            "type": "CombineFromComposite",
            "toFieldPath": "metadata.annotations[wide]",
            "combine": {
                "strategy": "string",
                "variables": [{"fromFieldPath": "spec.id"}, {"fromFieldPath": "metadata.name"}],
                "string": {"fmt": "%999999[1]v%999999[2]v".repeat(500)}
            }
        }])),
    )
}

/// Go allows a precision up to a million; Rust's formatter panics above 65,535.
pub fn float_precision(mode: Option<&str>) -> Value {
    composition(
        "float-precision",
        mode,
        network(json!([{
            "fromFieldPath": "spec.id",
            "toFieldPath": "metadata.annotations[precise]",
            "transforms": [
                {"type": "match", "match": {
                    "patterns": [{"type": "literal", "literal": "never", "result": 0}],
                    "fallbackValue": 1.5
                }},
                format("%.65536f"),
            ]
        }])),
    )
}

/// Environment `defaultData` of about 1 MiB, copied into the resource by thousands of
/// patches.
pub fn environment_copies(mode: Option<&str>) -> Value {
    let data: serde_json::Map<String, Value> = (0..1024)
        .map(|i| (format!("k{i}"), json!("x".repeat(1000))))
        .collect();
    let patches: Vec<Value> = (0..2000)
        .map(|i| {
            json!({
                "type": "FromEnvironmentFieldPath",
                "fromFieldPath": "data",
                "toFieldPath": format!("metadata.annotations[copy-{i}]")
            })
        })
        .collect();
    let mut c = composition("environment-copies", mode, network(json!(patches)));
    c["spec"]["environment"] = json!({"defaultData": {"data": data}});
    c
}

/// A patch set of 1,000 patches used by 1,000 templates: a million patches.
pub fn patch_set_fanout(mode: Option<&str>) -> Value {
    let patches: Vec<Value> = (0..1000)
        .map(|i| {
            json!({
                "fromFieldPath": "spec.id",
                "toFieldPath": format!("metadata.labels[l{i}]")
            })
        })
        .collect();
    let resources: Vec<Value> = (0..1000)
        .map(|i| {
            json!({
                "name": format!("n{i}"),
                "base": network_base(),
                "patches": [{"type": "PatchSet", "patchSetName": "common"}]
            })
        })
        .collect();
    let mut c = composition("patch-set-fanout", mode, json!(resources));
    c["spec"]["patchSets"] = json!([{"name": "common", "patches": patches}]);
    c
}

/// 2,000 patches, each with a large regexp (slow to compile): minutes of CPU in all.
pub fn large_regexps(mode: Option<&str>) -> Value {
    let patches: Vec<Value> = (0..2000)
        .map(|i| {
            json!({
                "fromFieldPath": "spec.id",
                "toFieldPath": format!("metadata.annotations[r{i}]"),
                "transforms": [{"type": "string", "string": {
                    "type": "Regexp",
                    "regexp": {"match": format!("(\\w+\\s*){{1,500}}x{i}|(\\pL+){{100,200}}")}
                }}]
            })
        })
        .collect();
    composition("large-regexps", mode, network(json!(patches)))
}

/// A Regexp transform whose pattern (30 alternatives of `[ab]*a[ab]{300}`, a program of
/// 640 KiB) keeps a lazy DFA rebuilding its states over a 100,000-byte input that a Format
/// transform writes: 20 s of one search in a release build, which no deadline interrupts
/// (the outside probe held a review thread for 41-163 s past its answer with such one).
pub fn regexp_search(mode: Option<&str>) -> Value {
    // The input: pseudo-random a and b (xorshift), then the mock's spec.id.
    let mut seed = 1u64;
    let text: String = (0..100_000)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            if seed.is_multiple_of(2) { 'a' } else { 'b' }
        })
        .collect();
    let pattern: Vec<String> = (0..30).map(|i| format!("[ab]*a[ab]{{300}}x{i}")).collect();
    composition(
        "regexp-search",
        mode,
        network(json!([{
            "fromFieldPath": "spec.id",
            "toFieldPath": "metadata.annotations[searched]",
            "transforms": [
                format(&format!("{text}%v")),
                {"type": "string", "string": {
                    "type": "Regexp",
                    "regexp": {"match": pattern.join("|")}
                }}
            ]
        }])),
    )
}

/// A base whose labels hold an array of `n` zeros: the API server takes it (`n` of 1.5
/// million is 3 MiB of JSON).
pub fn long_array(mode: Option<&str>, n: usize) -> Value {
    let mut base = network_base();
    base["spec"]["forProvider"]["description"] = json!(vec![0; n]);
    composition(
        "long-array",
        mode,
        json!([{"name": "network", "base": base}]),
    )
}

/// An AdmissionReview (v1 CREATE, as JSON text) of a Composition whose base holds an object
/// nested so that the body nests `depth` levels (the API server accepts objects of 10,000,
/// so reviews of 10,002). Built as text: a JSON value that deep would overflow the stack of
/// a test thread.
pub fn deep_review(uid: &str, mode: Option<&str>, depth: usize) -> Vec<u8> {
    let mut base = network_base();
    base["spec"]["forProvider"]["deep"] = json!("DEEP");
    let c = composition(
        "deep-base",
        mode,
        json!([{"name": "network", "base": base}]),
    );
    let review = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "apiextensions.crossplane.io", "version": "v1", "kind": "Composition"},
            "resource": {"group": "apiextensions.crossplane.io", "version": "v1", "resource": "compositions"},
            "name": "deep-base",
            "operation": "CREATE",
            "userInfo": {"username": "kubernetes-admin"},
            "object": c,
        }
    });
    let text = serde_json::to_string(&review).expect("json");
    // review > request > object > spec > resources > [0] > base > spec > forProvider: 9.
    let levels = depth.saturating_sub(9);
    let deep = format!(
        "{}\"bottom\"{}",
        "{\"d\":".repeat(levels),
        "}".repeat(levels)
    );
    text.replace("\"DEEP\"", &deep).into_bytes()
}

/// A regexp Go accepts whose compiled program in the regex crate is larger than a review's
/// memory (Unicode letters a thousand times; Go's program is small): not an invalid pattern.
pub fn big_program(mode: Option<&str>) -> Value {
    composition(
        "big-program",
        mode,
        network(json!([{
            "fromFieldPath": "spec.id",
            "toFieldPath": "metadata.annotations[big]",
            "transforms": [{"type": "string", "string": {
                "type": "Regexp",
                "regexp": {"match": "\\pL{1000}|.*"}
            }}]
        }])),
    )
}

/// An invalid Composition (a typo in a patch path), for the strict-mode checks: denied
/// whenever it is validated, and never admitted in strict mode.
pub fn invalid(mode: Option<&str>) -> Value {
    composition(
        "invalid",
        mode,
        network(json!([{
            "fromFieldPath": "spec.id",
            "toFieldPath": "spec.forProvider.routingModee"
        }])),
    )
}

/// Every hostile Composition, named.
pub fn all(mode: Option<&str>) -> Vec<(&'static str, Value)> {
    vec![
        ("huge_index", huge_index(mode)),
        ("format_widths", format_widths(mode)),
        ("combine_widths", combine_widths(mode)),
        ("float_precision", float_precision(mode)),
        ("environment_copies", environment_copies(mode)),
        ("patch_set_fanout", patch_set_fanout(mode)),
        ("large_regexps", large_regexps(mode)),
        ("long_array", long_array(mode, 1_500_000)),
        ("big_program", big_program(mode)),
        ("regexp_search", regexp_search(mode)),
    ]
}
