//! Structural schemas, CRDs, XRD-generated CRDs and the schema catalog.
//!
//! This is the part of the pure validation core that knows what Kubernetes types look like:
//!
//! - [`structural`]: [`Schema`], a structural OpenAPI v3 schema node parsed from a CRD's
//!   `openAPIV3Schema` (tolerant of unknown keys, typed errors, depth-capped);
//! - [`crd`]: [`Crd`], a CustomResourceDefinition with the API server's schema selection
//!   rule (identical per-version schemas serve any version);
//! - [`xrd`]: the XR and claim CRDs Crossplane generates from a CompositeResourceDefinition;
//! - [`mrd`]: Crossplane v2's ManagedResourceDefinitions, read as the CRDs they stand for;
//! - [`mrap`]: the ManagedResourceActivationPolicies that activate them, by name pattern;
//! - [`catalog`]: [`Catalog`], every known CRD indexed by group and kind, with upstream's
//!   NotFound and "more than one CRD" errors;
//! - [`defaults`]: [`apply_defaults`], the API server's structural defaulting;
//! - [`embedded`]: Crossplane's own Composition CRDs (v1.17.0, v2.3.4) and P&T's input CRD;
//! - [`composition_api`]: which Composition CRD applies to Compositions read from files;
//! - [`openapi`]: built-in kinds' schemas from kube-apiserver's OpenAPI v3 documents;
//! - [`builtin`]: those of Kubernetes v1.28.4, embedded, for validation without a cluster;
//! - [`validation`]: validating a value against a schema as the API server validates a
//!   custom resource (pruning, defaults, JSON Schema, embedded resources, list types, CEL)
//!   with compiled, cached schemas: Compositions from files, function-patch-and-transform
//!   inputs and rendered resources alike.
//!
//! Nothing here performs I/O: documents come in as `serde_json::Value`s.

pub mod builtin;
pub mod catalog;
pub mod composition_api;
pub mod crd;
pub mod defaults;
pub mod embedded;
pub mod mrap;
pub mod mrd;
pub mod openapi;
pub mod resolve;
pub mod structural;
pub mod validation;
pub mod xrd;

pub use catalog::{
    Added, Candidate, Catalog, CatalogEntry, LookupError, Origin, Resolved, split_api_version,
};
pub use composition_api::{
    ApiOrigin, ApiRelease, Change, CompositionApi, CrossplaneVersion, VersionError,
};
pub use crd::{Crd, CrdNames, CrdVersion, SchemaSelection, Scope, is_crd};
pub use defaults::apply_defaults;
pub use embedded::{
    COMPOSITION_CRD_V2_YAML, COMPOSITION_CRD_YAML, PATCH_AND_TRANSFORM_CRD_YAML, composition_crd,
    composition_crd_schema_of, composition_crd_yaml, patch_and_transform_input_schema,
    patch_and_transform_input_validator,
};
pub use mrap::{Activation, ActivationPolicies, ActivationPolicy, Inert, is_mrap};
pub use mrd::{Mrd, MrdState, is_mrd};
pub use structural::{
    AdditionalProperties, Items, MAX_SCHEMA_DEPTH, Schema, SchemaError, ValidationRule,
};
pub use validation::{
    CelLimits, CompileError, CompiledSchema, ResourceValidation, compiled, validate_resource,
};
pub use xrd::{GeneratedCrd, GeneratedCrds, generate_crds, is_xrd};
