//! The validation checks. Each takes parsed inputs and returns field errors; none does I/O.
//!
//! - [`logical`]: the Composition by itself;
//! - [`schema_aware`]: which schemas a Composition needs, and its patches, readiness checks
//!   and connection details against them;
//! - [`functions`]: the Functions pipeline steps name, when the installed ones are known.

pub mod functions;
pub mod logical;
pub mod patch_and_transform;
pub mod rendered;
pub mod schema_aware;
