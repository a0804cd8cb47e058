//! Every Composition of ../shared/corpus (real Compositions written by others), validated with
//! the XRDs and CRDs its manifest.json lists. Any finding must be a reviewed real defect listed
//! in testdata/corpus-expectations.yaml; any listed defect must still be found.

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use composition_webhook::document;
use composition_webhook::schema::Catalog;
use composition_webhook::validate::{Options, Validator};
use serde_json::Value;

/// One finding or load error, as listed in the expectations file.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Seen {
    file: String,
    composition: String,
    severity: String,
    message: String,
}

fn expectations() -> BTreeSet<Seen> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/corpus-expectations.yaml");
    let entries = common::read_yaml(&path);
    entries
        .as_array()
        .expect("a list")
        .iter()
        .map(|e| {
            assert!(
                e["why"].as_str().is_some_and(|w| w.len() > 20),
                "every entry says why: {e}"
            );
            let s = |k: &str| e[k].as_str().unwrap_or_default().to_string();
            match e.get("load_error") {
                Some(msg) => Seen {
                    file: s("file"),
                    composition: String::new(),
                    severity: "load_error".into(),
                    message: msg.as_str().unwrap_or_default().to_string(),
                },
                None => Seen {
                    file: s("file"),
                    composition: s("composition"),
                    severity: s("severity"),
                    message: s("message"),
                },
            }
        })
        .collect()
}

#[test]
fn corpus_findings_are_all_reviewed_defects() {
    let Some(corpus) = common::shared_subdir("corpus") else {
        return;
    };
    let manifest = common::read_json(&corpus.join("manifest.json"));
    let compositions = manifest["compositions"].as_array().expect("compositions");
    let mut seen = BTreeSet::new();
    let mut validated = 0;
    let mut pipelines = 0;
    let mut rereads = 0;
    for entry in compositions {
        let rel = entry["file"].as_str().unwrap_or_default();
        let name = entry["composition_name"].as_str().unwrap_or_default();
        let schema_files = common::manifest::schema_files(entry);
        let mut catalog = Catalog::new();
        for f in &schema_files {
            let docs = document::load_path(&corpus.join(f))
                .unwrap_or_else(|e| panic!("schema file {f} of {rel}: {e}"));
            for d in docs {
                catalog
                    .add_document(&d.value, f)
                    .unwrap_or_else(|e| panic!("schema file {f} of {rel}: {e}"));
            }
        }
        let docs = match document::load_path(&corpus.join(rel)) {
            Ok(docs) => docs,
            Err(e) => {
                let msg = e.to_string();
                let short = msg.rsplit(": ").next().unwrap_or_default().to_string();
                seen.insert(Seen {
                    file: rel.into(),
                    composition: String::new(),
                    severity: "load_error".into(),
                    message: short,
                });
                continue;
            }
        };
        let validator = Validator::new(&catalog, common::v1_options());
        let doc = docs
            .iter()
            .find(|d| d.value.pointer("/metadata/name").and_then(Value::as_str) == Some(name))
            .unwrap_or_else(|| panic!("{rel}: no Composition named {name}"));
        let report = validator.validate_value(&doc.value);
        validated += 1;
        // The webhook's way (bases rendered into the resources, not copied; the Composition
        // read again only for a finding that needs them): the same report.
        let taking = validator.validate_owned_rereading(doc.value.clone(), || {
            rereads += 1;
            Some(doc.value.clone())
        });
        assert_eq!(
            format!("{:?}", (&taking.findings, &taking.verdict, &taking.stopped)),
            format!("{:?}", (&report.findings, &report.verdict, &report.stopped)),
            "{rel}: bases taken"
        );
        // A Pipeline Composition means the same to Crossplane v2's Composition API: the
        // same findings (none of these uses a field v2 removed).
        if doc.value.pointer("/spec/mode").and_then(Value::as_str) == Some("Pipeline") {
            let v2 = Validator::new(&catalog, Options::default()).validate_value(&doc.value);
            let messages = |r: &composition_webhook::validate::Report| -> Vec<String> {
                r.findings.iter().map(|f| f.message()).collect()
            };
            assert_eq!(messages(&v2), messages(&report), "{rel} with v2's API");
            pipelines += 1;
        }
        for f in &report.findings {
            seen.insert(Seen {
                file: rel.into(),
                composition: name.into(),
                severity: f.severity.name().into(),
                message: f.message(),
            });
        }
    }
    let expected = expectations();
    let unexpected: Vec<_> = seen.difference(&expected).collect();
    let missing: Vec<_> = expected.difference(&seen).collect();
    eprintln!(
        "validated {validated} of {} corpus Compositions; {} findings, all reviewed; {rereads} read again for their bases",
        compositions.len(),
        seen.len()
    );
    assert!(validated >= 100, "only {validated} Compositions validated");
    assert!(
        pipelines >= 13,
        "only {pipelines} Pipeline Compositions compared"
    );
    assert!(
        unexpected.is_empty() && missing.is_empty(),
        "unexpected findings (fix the validator if false positives):\n{unexpected:#?}\nexpected but not found:\n{missing:#?}"
    );
}
