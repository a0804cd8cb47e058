//! composition-webhook: validation of Crossplane Compositions.
//!
//! The crate is a pure validation core with thin shells around it. Data flows one way:
//! source document -> [`model::Composition`] -> [`schema`] lookups -> [`findings`] -> verdict.
//!
//! Core (no HTTP, no Kubernetes client, no async runtime):
//! - [`document`]: YAML/JSON files and byte buffers as located documents (values + line numbers);
//! - [`model`]: the `apiextensions.crossplane.io/v1` Composition and the API server's defaults;
//! - [`fieldpath`]: Crossplane's field path grammar;
//! - [`schema`]: structural schemas, CRDs, XRD-generated CRDs and the schema catalog;
//! - [`checks`]: the validation checks (logical, schema lookups);
//! - [`findings`]: Kubernetes-style field errors, stages and severities;
//! - [`mode`]: the validation mode annotation and the verdict it implies;
//! - [`validate`]: the engine that runs every check and produces a report.
//!
//! Shells:
//! - [`cli`]: the `composition-webhook` command line.

pub mod checks;
pub mod cli;
pub mod document;
pub mod fieldpath;
pub mod findings;
pub mod mode;
pub mod model;
pub mod schema;
pub mod validate;
