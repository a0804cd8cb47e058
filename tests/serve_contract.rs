//! The admission contract, over real HTTPS against the real binary: AdmissionReview v1 and
//! v1beta1, allowed, denied, warned and malformed reviews, with exact answers.

mod webhook;

use std::path::Path;

use serde_json::{Value, json};
use webhook::{Server, composition_review, project_dir, yaml_documents};

fn example_crds() -> Vec<std::path::PathBuf> {
    vec![
        project_dir().join("testdata/crds"),
        project_dir().join("testdata/example/definition.yaml"),
    ]
}

fn composition(file: &str) -> Value {
    yaml_documents(&project_dir().join(file))
        .into_iter()
        .find(|d| d["kind"] == "Composition")
        .expect("a Composition")
}

fn start() -> Server {
    let crds = example_crds();
    let refs: Vec<&Path> = crds.iter().map(|p| p.as_path()).collect();
    Server::start(&refs, &[])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn valid_composition_is_allowed_in_both_versions() {
    let server = start();
    let client = server.client();
    for version in ["v1", "v1beta1"] {
        let review = composition_review(
            version,
            "uid-ok",
            "CREATE",
            composition("testdata/example/composition.yaml"),
        );
        let response = client.review(&review).await;
        assert_eq!(
            response,
            json!({"uid": "uid-ok", "allowed": true, "status": {}}),
            "{version}"
        );
    }
}
