//! Audit: Compositions validated again when the schemas under them change.
//!
//! Admission sees a Composition once, when it is written; the CRDs, MRDs, XRDs and Functions
//! it uses keep changing. This module is the pure part of keeping every Composition's verdict
//! current (the `audit` command, the background audit of `serve` and change impact at
//! admission are the shells around it):
//!
//! - [`dependencies`]: which kinds (and whether the Functions) one validation looked up,
//!   recorded by a [`SchemaSource`](crate::checks::schema_aware::lookup::SchemaSource)
//!   wrapper, so that a changed kind re-validates only the Compositions that use it;
//! - [`inventory`]: the Compositions known, each with its last report and dependencies, and
//!   a queue of those to validate again;
//! - [`impact`]: what changed between two reports of one Composition.

pub mod dependencies;
pub mod impact;
pub mod inventory;

pub use dependencies::{Dependencies, Kind, Recording, validate_recorded};
pub use impact::{Change, compare};
pub use inventory::{Audited, Inventory, Job, Reason, Summary, Transition};
