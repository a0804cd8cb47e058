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
//! - [`impact`]: what changed between two reports of one Composition, and what a change to
//!   a definition would break ([`overlay`]: the schemas as they would be after it).

pub mod dependencies;
pub mod impact;
pub mod inventory;
pub mod overlay;

pub use dependencies::{Dependencies, Kind, Recording, validate_recorded};
pub use impact::{Assessment, Broken, Change, assess, compare};
pub use inventory::{Audited, Inventory, Job, Reason, Summary, Transition};
pub use overlay::Overlay;
