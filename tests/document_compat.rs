//! The document loader reads real manifests as kubectl's YAML reader does.

use composition_webhook::document;

/// A quoted description whose continuation lines sit at the key's indentation (seen in
/// upbound/platform-ref-aws and platform-ref-gcp XRDs): go-yaml reads it, and so must we,
/// with the same value and the same line numbers.
#[test]
fn quoted_scalar_continuation_at_key_indentation() {
    let text = "spec:\n  versions:\n    - name: v1\n      description: \"A reference to the ProviderConfig that services should\n      be deployed to.\"\n      properties:\n        name:\n          description: \"Name of the Kubernetes provider configuration.\n            This will typically be the name of the cluster with a\n          suffix.\"\n          type: string\n";
    let docs = document::parse_documents("xrd.yaml", text).expect("loads like go-yaml");
    let v = &docs[0].value["spec"]["versions"][0];
    assert_eq!(
        v["description"],
        "A reference to the ProviderConfig that services should be deployed to."
    );
    assert_eq!(
        v["properties"]["name"]["description"],
        "Name of the Kubernetes provider configuration. This will typically be the name of the cluster with a suffix."
    );
    assert_eq!(
        docs[0].line_of("spec.versions[0].properties.name.type"),
        Some(11)
    );
}

/// The fix is bounded: a quoted scalar that never ends is still a syntax error.
#[test]
fn unterminated_quoted_scalar_is_still_an_error() {
    let text = "a:\n  b: \"open\nc: 1\n";
    let err = document::parse_documents("bad.yaml", text).unwrap_err();
    assert!(err.to_string().starts_with("bad.yaml:"), "{err}");
}
