//! The validation checks. Each takes parsed inputs and returns field errors; none does I/O.
//!
//! - [`logical`]: the Composition by itself;
//! - [`schemas`]: which schemas a Composition needs and which are missing;
//! - [`go_regexp`]: Go's regular expression syntax, as Crossplane compiles expressions.

pub mod go_regexp;
pub mod logical;
pub mod schemas;
