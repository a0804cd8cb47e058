//! composition-webhook: validation of Crossplane Compositions.
//!
//! The crate is a pure validation core with thin shells around it. Data flows one way:
//! source document -> [`model::Composition`] -> [`schema`] lookups -> [`findings`] -> verdict.
//!
//! Core (no HTTP, no Kubernetes client, no async runtime; imports point down the layers,
//! from [`budget`] and [`go`] at the bottom to [`validate`] on top, as `tests/layers.rs`
//! checks):
//! - [`go`]: Go's semantics (`fmt`, `strconv`, `encoding/json`, `regexp`, `time`,
//!   quantities), wherever a verdict, a rendered value or a message must be Go's;
//! - [`document`]: YAML/JSON files and byte buffers as located documents (values + line numbers);
//! - [`model`]: the `apiextensions.crossplane.io/v1` Composition and the API server's defaults;
//! - [`fieldpath`]: Crossplane's field path grammar;
//! - [`schema`]: structural schemas, CRDs, XRD-generated CRDs and the schema catalog;
//! - [`checks`]: the validation checks (logical, schema lookups);
//! - [`findings`]: Kubernetes-style field errors, stages and severities;
//! - [`mode`]: the validation mode annotation and the verdict it implies;
//! - [`render`]: composed resources rendered from a (mock) composite resource, as the runtime does;
//! - [`validate`]: the engine that runs every check and produces a report;
//! - [`audit`]: Compositions validated again as the schemas under them change.
//!
//! Shells:
//! - [`cli`]: the `composition-webhook` command line (`validate`, `audit`, `render`, `serve`);
//! - [`server`]: the admission webhook server (HTTPS, AdmissionReview, metrics, probes);
//! - [`cluster`]: schemas from the API server (watched, fetched when needed, cached);
//! - [`runner`]: the RunFunction client, Crossplane's composition functions called over gRPC.
//!
//! # Example
//!
//! ```
//! use composition_webhook::{document, schema::Catalog, validate::{Options, Validator}};
//!
//! let xrd = r#"
//! apiVersion: apiextensions.crossplane.io/v1
//! kind: CompositeResourceDefinition
//! metadata: {name: xbuckets.example.org}
//! spec:
//!   group: example.org
//!   names: {kind: XBucket, plural: xbuckets}
//!   versions:
//!   - name: v1
//!     served: true
//!     referenceable: true
//!     schema: {openAPIV3Schema: {type: object, properties: {spec: {type: object}}}}
//! "#;
//! let composition = r#"
//! apiVersion: apiextensions.crossplane.io/v1
//! kind: Composition
//! metadata: {name: xbuckets}
//! spec:
//!   compositeTypeRef: {apiVersion: example.org/v1, kind: XBucket}
//!   pipeline:
//!   - step: patch-and-transform
//!     functionRef: {name: function-patch-and-transform}
//!     input:
//!       apiVersion: pt.fn.crossplane.io/v1beta1
//!       kind: Resources
//!       resources:
//!       - name: bucket
//!         base: {apiVersion: v1, kind: ConfigMap}
//!         patches:
//!         - type: FromCompositeFieldPath
//! "#;
//! let mut catalog = Catalog::new();
//! for doc in document::parse_documents("xrd.yaml", xrd).unwrap() {
//!     catalog.add_document(&doc.value, &doc.source).unwrap();
//! }
//! let doc = &document::parse_documents("composition.yaml", composition).unwrap()[0];
//! let report = Validator::new(&catalog, Options::default()).validate_value(&doc.value);
//!
//! assert!(!report.verdict.allowed);
//! assert_eq!(report.verdict.code, Some(422));
//! let first = &report.findings[0];
//! assert_eq!(
//!     first.message(),
//!     "spec.pipeline[0].input.resources[0].patches[0].fromFieldPath: Required value: \
//!      fromFieldPath must be set for patch type FromCompositeFieldPath"
//! );
//! // The patch that lacks fromFieldPath starts on line 17.
//! assert_eq!(doc.line_of(&first.error.field), Some(17));
//! ```

pub mod audit;
pub mod budget;
pub mod checks;
pub mod cli;
pub mod cluster;
pub mod document;
pub mod fieldpath;
pub mod findings;
pub mod go;
pub mod hashing;
pub mod json;
pub mod mode;
pub mod model;
pub mod render;
pub mod runner;
pub mod schema;
pub mod server;
pub mod validate;
