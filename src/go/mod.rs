//! Go's semantics: what the Go programs that judge a Composition do, reproduced exactly.
//!
//! Crossplane and its functions (function-patch-and-transform above all) and the Kubernetes
//! API server are Go programs: a transform formats with Go's `fmt`, parses numbers with
//! `strconv`, compiles regular expressions with `regexp`; the API server decodes quantities
//! with apimachinery and reads its webhook timeout with `time.ParseDuration`. Wherever this
//! crate must agree with them byte for byte (a verdict, a rendered value, an error message),
//! it calls this module, and nothing else in the crate re-implements Go.
//!
//! Each submodule names the Go package it mirrors and has a conformance table: inputs with
//! Go's outputs, taken from the Go package's own tests where it has them. The Go is 1.22 to
//! 1.25, whose packages agree on everything here but where a submodule says otherwise
//! (the `\p` names of [`regexp::syntax`] are Go 1.25's).
//!
//! - [`value`]: the Go values Kubernetes decodes JSON into (`int64`, `float64`, ...), their
//!   `%T` names and Go's `int64(f)`;
//! - [`fmt`]: `fmt.Sprintf` and `%v`, and what a format string reads;
//! - [`strconv`]: `ParseInt`, `ParseUint`, `ParseBool`, `ParseFloat`, `FormatFloat`, `Quote`;
//! - [`json`]: `encoding/json`'s `Marshal` and `Unmarshal` with their errors;
//! - [`strings`]: `strings.ToUpper`, `ToLower` and `ReplaceAll`;
//! - [`base64`]: `encoding/base64`'s `StdEncoding`;
//! - [`regexp`]: `regexp.Compile` (its [`regexp::syntax`] a port of Go 1.25's parser);
//! - [`time`]: Go's `time.ParseDuration`;
//! - [`quantity`]: apimachinery's `resource.ParseQuantity` and `AsApproximateFloat64`;
//! - [`filepath`]: `path/filepath.Match`, how ManagedResourceActivationPolicies match MRD
//!   names;
//! - [`version`]: apimachinery's `CompareKubeAwareVersionStrings`, the priority of API
//!   versions the API server's deprecation warnings suggest by.
//!
//! This module is the bottom layer of the core: it uses nothing of the crate but
//! [`crate::budget`], as Go allows outputs (a width of a million for every element of a
//! list) that only the review's budget bounds.

pub mod base64;
pub mod filepath;
pub mod fmt;
pub mod json;
pub mod quantity;
pub mod regexp;
pub mod strconv;
pub mod strings;
pub mod time;
pub mod value;
pub mod version;

/// Whether `n` more bytes of output fit in the review's budget. Go allows widths and
/// precisions up to a million, for every element of a slice or map: the budget decides how
/// much of that is written (a spent budget discards the result anyway).
fn room(n: usize) -> bool {
    n <= 1024 || crate::budget::reserve(n).is_ok()
}
