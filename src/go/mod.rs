//! Go's semantics, where the tools that judge a Composition run on Go.
pub mod fmt;
pub mod json;
pub mod quantity;
pub mod regexp;
