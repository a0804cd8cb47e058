//! Findings: Kubernetes field errors (`k8s.io/apimachinery/pkg/util/validation/field`) with the
//! stage that produced them and the severity the validation mode gives them.
//!
//! A message reads exactly as the API server prints one:
//! `<field>: <Type words>[: <value>][: <detail>]`, e.g.
//! `spec.resources[0].patches[1].toFieldPath: Invalid value: "spec.forProvider.engin": ...`,
//! except that structured values are printed as compact JSON instead of Go's `%#v` dump.

use std::fmt::{self, Write as _};

use serde::Serialize;

/// The kind of a field error, as `field.ErrorType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum ErrorType {
    /// `Not found`.
    NotFound,
    /// `Required value`.
    Required,
    /// `Duplicate value`.
    Duplicate,
    /// `Invalid value`.
    Invalid,
    /// `Unsupported value`.
    NotSupported,
    /// `Forbidden`.
    Forbidden,
    /// `Too long`.
    TooLong,
    /// `Too many`.
    TooMany,
    /// `Internal error`.
    Internal,
    /// `Invalid value` (a value of the wrong type).
    TypeInvalid,
    /// `Not rendered`: this tool could not render or check something Crossplane runs (a
    /// function it cannot run, a regexp too large to compile here); never an error.
    NotRendered,
}

impl ErrorType {
    /// The words Kubernetes prints for this type.
    pub fn words(self) -> &'static str {
        match self {
            ErrorType::NotFound => "Not found",
            ErrorType::Required => "Required value",
            ErrorType::Duplicate => "Duplicate value",
            ErrorType::Invalid | ErrorType::TypeInvalid => "Invalid value",
            ErrorType::NotSupported => "Unsupported value",
            ErrorType::Forbidden => "Forbidden",
            ErrorType::TooLong => "Too long",
            ErrorType::TooMany => "Too many",
            ErrorType::Internal => "Internal error",
            ErrorType::NotRendered => "Not rendered",
        }
    }

    /// The `metav1.CauseType` of this type (`FieldValueRequired`, ...), as the API server puts
    /// it in `details.causes[].reason`.
    pub fn cause_type(self) -> &'static str {
        match self {
            ErrorType::NotFound => "FieldValueNotFound",
            ErrorType::Required => "FieldValueRequired",
            ErrorType::Duplicate => "FieldValueDuplicate",
            ErrorType::Invalid => "FieldValueInvalid",
            ErrorType::NotSupported => "FieldValueNotSupported",
            ErrorType::Forbidden => "FieldValueForbidden",
            ErrorType::TooLong => "FieldValueTooLong",
            ErrorType::TooMany => "FieldValueTooMany",
            ErrorType::Internal => "InternalError",
            ErrorType::NotRendered => "FieldValueInvalid",
            ErrorType::TypeInvalid => "FieldValueTypeInvalid",
        }
    }

    /// The short name used in the CLI's JSON output (`Required`, `Invalid`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ErrorType::NotFound => "NotFound",
            ErrorType::Required => "Required",
            ErrorType::Duplicate => "Duplicate",
            ErrorType::Invalid => "Invalid",
            ErrorType::NotSupported => "NotSupported",
            ErrorType::Forbidden => "Forbidden",
            ErrorType::TooLong => "TooLong",
            ErrorType::TooMany => "TooMany",
            ErrorType::Internal => "Internal",
            ErrorType::NotRendered => "NotRendered",
            ErrorType::TypeInvalid => "TypeInvalid",
        }
    }

    /// Whether the API server prints the bad value for this type.
    fn prints_value(self) -> bool {
        !matches!(
            self,
            ErrorType::Required
                | ErrorType::Forbidden
                | ErrorType::TooLong
                | ErrorType::Internal
                | ErrorType::NotRendered
        )
    }
}

/// The offending value of a field error.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum BadValue {
    /// No value is printed.
    #[default]
    Omit,
    /// A string, printed quoted.
    Str(String),
    /// An integer.
    Int(i64),
    /// A floating point number, printed as Go's `%v` does.
    Float(f64),
    /// A boolean.
    Bool(bool),
    /// JSON null.
    Null,
    /// A structured value, printed as compact JSON.
    Json(serde_json::Value),
}

impl BadValue {
    /// The bad value for a JSON value: scalars as themselves, structures as JSON.
    pub fn from_json(value: &serde_json::Value) -> BadValue {
        match value {
            serde_json::Value::Null => BadValue::Null,
            serde_json::Value::Bool(b) => BadValue::Bool(*b),
            serde_json::Value::Number(n) => match n.as_i64() {
                Some(i) => BadValue::Int(i),
                None => BadValue::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
            serde_json::Value::String(s) => BadValue::Str(s.clone()),
            other => BadValue::Json(other.clone()),
        }
    }
}

impl From<&str> for BadValue {
    fn from(s: &str) -> Self {
        BadValue::Str(s.to_string())
    }
}

impl From<String> for BadValue {
    fn from(s: String) -> Self {
        BadValue::Str(s)
    }
}

impl From<i64> for BadValue {
    fn from(i: i64) -> Self {
        BadValue::Int(i)
    }
}

impl fmt::Display for BadValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadValue::Omit => Ok(()),
            BadValue::Str(s) => f.write_str(&go_quote(s)),
            BadValue::Int(i) => write!(f, "{i}"),
            BadValue::Float(x) => f.write_str(&go_float(*x)),
            BadValue::Bool(b) => write!(f, "{b}"),
            BadValue::Null => f.write_str("null"),
            BadValue::Json(v) => f.write_str(&v.to_string()),
        }
    }
}

/// Quotes a string as Go's `%q` does, as field errors print string values.
pub use crate::go::strconv::quote as go_quote;

/// Formats a float as Go's `%v` does (`strconv.FormatFloat(x, 'g', -1, 64)`), as field
/// errors print one: shortest digits, exponent form when the decimal exponent is below -4
/// or at least 6 (so `1e+06`).
pub fn go_float(x: f64) -> String {
    crate::go::strconv::format_float(x, b'g', -1)
}

/// A Kubernetes field error: type, field path, bad value and detail.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// The kind of error.
    pub error_type: ErrorType,
    /// The field path, e.g. `spec.resources[0].patches[1].toFieldPath`.
    pub field: String,
    /// The offending value.
    pub bad_value: BadValue,
    /// What is wrong, in words.
    pub detail: String,
}

impl FieldError {
    /// A `Required value` error.
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Required, field, BadValue::Omit, detail)
    }

    /// An `Invalid value` error.
    pub fn invalid(
        field: impl Into<String>,
        value: impl Into<BadValue>,
        detail: impl Into<String>,
    ) -> Self {
        Self::new(ErrorType::Invalid, field, value.into(), detail)
    }

    /// A `Duplicate value` error.
    pub fn duplicate(field: impl Into<String>, value: impl Into<BadValue>) -> Self {
        Self::new(ErrorType::Duplicate, field, value.into(), String::new())
    }

    /// A `Forbidden` error.
    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Forbidden, field, BadValue::Omit, detail)
    }

    /// An `Internal error`.
    pub fn internal(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Internal, field, BadValue::Omit, detail)
    }

    /// A `Not found` error.
    pub fn not_found(
        field: impl Into<String>,
        value: impl Into<BadValue>,
        detail: impl Into<String>,
    ) -> Self {
        Self::new(ErrorType::NotFound, field, value.into(), detail)
    }

    /// Any error.
    pub fn new(
        error_type: ErrorType,
        field: impl Into<String>,
        bad_value: BadValue,
        detail: impl Into<String>,
    ) -> Self {
        FieldError {
            error_type,
            field: field.into(),
            bad_value,
            detail: detail.into(),
        }
    }

    /// The same error with its field path put under `prefix` (`transforms[0]` under
    /// `spec.resources[1].patches[2]` gives `spec.resources[1].patches[2].transforms[0]`).
    pub fn prefixed(mut self, prefix: &str) -> Self {
        self.field = join_path(prefix, &self.field);
        self
    }

    /// The message without the field: `<Type words>[: <value>][: <detail>]`
    /// (`field.Error.ErrorBody()`).
    pub fn body(&self) -> String {
        let mut s = self.error_type.words().to_string();
        if self.error_type.prints_value() && self.bad_value != BadValue::Omit {
            let _ = write!(s, ": {}", self.bad_value);
        }
        if !self.detail.is_empty() {
            let _ = write!(s, ": {}", self.detail);
        }
        s
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            f.write_str(&self.body())
        } else {
            write!(f, "{}: {}", self.field, self.body())
        }
    }
}

/// Joins two field paths: a relative path starting with `[` attaches without a dot.
pub fn join_path(prefix: &str, rest: &str) -> String {
    if prefix.is_empty() {
        rest.to_string()
    } else if rest.is_empty() {
        prefix.to_string()
    } else {
        // Pushed, not `format!`ed: paths are built for every field a review walks.
        let mut joined = String::with_capacity(prefix.len() + 1 + rest.len());
        joined.push_str(prefix);
        if !rest.starts_with('[') {
            joined.push('.');
        }
        joined.push_str(rest);
        joined
    }
}

/// `path` followed by `[<inner>]`.
fn bracketed(path: &str, inner: &str) -> String {
    let mut out = String::with_capacity(path.len() + inner.len() + 2);
    out.push_str(path);
    out.push('[');
    out.push_str(inner);
    out.push(']');
    out
}

/// The decimal digits of `i`, without the formatting machinery.
fn decimal(mut i: usize, buf: &mut [u8; 20]) -> &str {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (i % 10) as u8;
        i /= 10;
        if i == 0 {
            break;
        }
    }
    // Only ASCII digits were written.
    std::str::from_utf8(&buf[at..]).unwrap_or_default()
}

/// Builds Kubernetes-style field paths (`field.Path`): `spec.resources[0].patches[1]`,
/// map keys in brackets.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Path(String);

impl Path {
    /// A root path, e.g. `spec`.
    pub fn new(root: &str) -> Self {
        Path(root.to_string())
    }

    /// `<self>.<name>`.
    pub fn child(&self, name: &str) -> Self {
        Path(join_path(&self.0, name))
    }

    /// `<self>[<i>]`.
    pub fn index(&self, i: usize) -> Self {
        Path(bracketed(&self.0, decimal(i, &mut [0; 20])))
    }

    /// `<self>[<key>]`.
    pub fn key(&self, key: &str) -> Self {
        Path(bracketed(&self.0, key))
    }

    /// The path as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<Path> for String {
    fn from(p: Path) -> String {
        p.0
    }
}

impl From<&Path> for String {
    fn from(p: &Path) -> String {
        p.0.clone()
    }
}

/// Where a walk is, as the steps from a [`Path`]: the path itself is built only for a
/// finding ([`PathAt::path`]). A walk that finds nothing, as most do, allocates no path
/// for the values it passes.
#[derive(Debug, Clone, Copy)]
pub enum PathAt<'a> {
    /// The walk's root.
    Root(&'a Path),
    /// A property: `<parent>.<name>`.
    Child(&'a PathAt<'a>, &'a str),
    /// A map key: `<parent>[<key>]`.
    Key(&'a PathAt<'a>, &'a str),
    /// A list item: `<parent>[<i>]`.
    Index(&'a PathAt<'a>, usize),
}

impl PathAt<'_> {
    /// The path, as [`Path::child`], [`Path::key`] and [`Path::index`] chained from the root
    /// build it.
    pub fn path(&self) -> Path {
        match self {
            PathAt::Root(p) => (*p).clone(),
            PathAt::Child(parent, name) => parent.path().child(name),
            PathAt::Key(parent, key) => parent.path().key(key),
            PathAt::Index(parent, i) => parent.path().index(*i),
        }
    }
}

/// Where a patch is written in a Composition (`spec.resources[0].patches[1]`,
/// `spec.pipeline[2].input.patchSets[0].patches[3]`), as numbers: a render records one for
/// every patch it applies and shows few, so the text is built only when shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PatchAt {
    /// The pipeline step whose function-patch-and-transform input holds the patch; `None`
    /// for the Composition's own `spec` (Resources mode).
    pub step: Option<usize>,
    /// The template or patch set holding it.
    pub holder: PatchHolder,
    /// Its index in the holder's `patches`.
    pub index: usize,
}

/// What holds a patch: a template (`resources[i]`) or a patch set (`patchSets[i]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PatchHolder {
    /// `resources[i]`.
    Resource(usize),
    /// `patchSets[i]`.
    PatchSet(usize),
}

impl PatchAt {
    /// The path to the patch, built as every other path is.
    pub fn path(&self) -> Path {
        let root = Path::new("spec");
        let set = match self.step {
            Some(step) => root.child("pipeline").index(step).child("input"),
            None => root,
        };
        let holder = match self.holder {
            PatchHolder::Resource(i) => set.child("resources").index(i),
            PatchHolder::PatchSet(i) => set.child("patchSets").index(i),
        };
        holder.child("patches").index(self.index)
    }
}

impl fmt::Display for PatchAt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.path().as_str())
    }
}

/// Which level of validation produced a finding. The order is the order checks run in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    /// The Composition by itself (no schema needed). Errors reject in every mode.
    Logical,
    /// The validation mode annotation.
    Mode,
    /// Looking up the schemas a Composition needs (CRDs of the XR and composed resources).
    Crds,
    /// Patch paths, types, readiness checks and connection details against schemas.
    Schema,
    /// Composed resources rendered from a mock XR, validated against their CRDs.
    Rendered,
    /// The review's budget (memory, work, time) ran out before the checks were done.
    Limits,
}

impl Stage {
    /// The lowercase name used in output.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Logical => "logical",
            Stage::Mode => "mode",
            Stage::Crds => "crds",
            Stage::Schema => "schema",
            Stage::Rendered => "rendered",
            Stage::Limits => "limits",
        }
    }
}

/// How a finding counts for the verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Denies the Composition.
    Error,
    /// Reported, but the Composition is admitted.
    Warning,
}

impl Severity {
    /// The lowercase name used in output.
    pub fn name(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

/// Something a finding may depend on that the inputs leave open: such a finding is at most
/// a warning ([`Finding::depending`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unknown {
    /// The composite resource's scope, its XRD (named by the kind) not among the schemas.
    CompositeScope(String),
    /// Whether Crossplane v1 or v2 runs the pipeline (no Composition API given says).
    CrossplaneMajor,
}

impl fmt::Display for Unknown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unknown::CompositeScope(kind) => write!(
                f,
                "the scope of the composite resource {kind}, unknown without its XRD: a namespaced XR's resources are created in its namespace"
            ),
            Unknown::CrossplaneMajor => f.write_str(
                "whether Crossplane v1 or v2 runs the pipeline: v1 replaces a resource's generateName, v2 keeps it",
            ),
        }
    }
}

/// A field error found by a check, with its stage and (once the mode is applied) severity.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// Which validation level found it.
    pub stage: Stage,
    /// Whether it denies.
    pub severity: Severity,
    /// The error itself.
    pub error: FieldError,
    /// Never more than a warning, in any mode: a problem that may not happen with a real
    /// composite resource (rendered validation works on a mock one).
    pub advisory: bool,
}

impl Finding {
    /// A finding of `stage`; its severity is set by [`crate::mode`] rules.
    pub fn new(stage: Stage, error: FieldError) -> Self {
        Finding {
            stage,
            severity: Severity::Error,
            error,
            advisory: false,
        }
    }

    /// A finding that is a warning in every mode (see [`Finding::advisory`]).
    pub fn advisory(stage: Stage, error: FieldError) -> Self {
        Finding {
            advisory: true,
            ..Finding::new(stage, error)
        }
    }

    /// A finding that depends on what the inputs do not determine: a warning in every mode
    /// (never a denial), its detail saying what it depends on.
    pub fn depending(stage: Stage, mut error: FieldError, on: &Unknown) -> Self {
        let note = format!("this depends on {on}");
        error.detail = if error.detail.is_empty() {
            note
        } else {
            format!("{} ({note})", error.detail)
        };
        Finding::advisory(stage, error)
    }

    /// The full Kubernetes-style message: `<field>: <Type words>[: <value>][: <detail>]`.
    pub fn message(&self) -> String {
        self.error.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_patch_address_reads_as_the_path_to_the_patch() {
        let at = |step, holder, index| {
            PatchAt {
                step,
                holder,
                index,
            }
            .to_string()
        };
        assert_eq!(
            at(None, PatchHolder::Resource(3), 1),
            "spec.resources[3].patches[1]"
        );
        assert_eq!(
            at(None, PatchHolder::PatchSet(0), 12),
            "spec.patchSets[0].patches[12]"
        );
        assert_eq!(
            at(Some(2), PatchHolder::Resource(0), 0),
            "spec.pipeline[2].input.resources[0].patches[0]"
        );
        // The same text as the paths built with `Path` elsewhere.
        let built = Path::new("spec")
            .child("pipeline")
            .index(10)
            .child("input")
            .child("patchSets")
            .index(1)
            .child("patches")
            .index(7);
        assert_eq!(at(Some(10), PatchHolder::PatchSet(1), 7), built.as_str());
    }

    #[test]
    fn messages_match_apimachinery() {
        let e = FieldError::duplicate("spec.resources[2].name", "foo");
        assert_eq!(
            e.to_string(),
            r#"spec.resources[2].name: Duplicate value: "foo""#
        );
        let e = FieldError::required("spec.resources", "an array of resources is required");
        assert_eq!(
            e.to_string(),
            "spec.resources: Required value: an array of resources is required"
        );
        let e = FieldError::new(ErrorType::Required, "x", BadValue::from("v"), "");
        assert_eq!(e.to_string(), "x: Required value");
        let e = FieldError::invalid("m", BadValue::Int(0), "must not be 0");
        assert_eq!(e.to_string(), "m: Invalid value: 0: must not be 0");
        let e = FieldError::invalid(
            "t",
            BadValue::Json(serde_json::json!({"type": "math"})),
            "bad",
        );
        assert_eq!(e.to_string(), r#"t: Invalid value: {"type":"math"}: bad"#);
    }

    /// Values print as the API server's `field.Error` prints them: strings with `%q` (so
    /// runes Go does not print, such as a no-break space or a soft hyphen, are escaped),
    /// floats with `%v`.
    #[test]
    fn values_print_as_go() {
        let invalid = |v: BadValue| FieldError::invalid("f", v, "bad").to_string();
        for (value, want) in [
            (
                BadValue::from("a\"b\n\u{1}é"),
                r#"f: Invalid value: "a\"b\n\x01é": bad"#,
            ),
            (
                BadValue::from("no\u{a0}break"),
                r#"f: Invalid value: "no\u00a0break": bad"#,
            ),
            (
                BadValue::from("soft\u{ad}hyphen"),
                r#"f: Invalid value: "soft\u00adhyphen": bad"#,
            ),
            (
                BadValue::from("a\u{2028}b"),
                r#"f: Invalid value: "a\u2028b": bad"#,
            ),
            (BadValue::Float(1.5), "f: Invalid value: 1.5: bad"),
            (BadValue::Float(1e21), "f: Invalid value: 1e+21: bad"),
            (BadValue::Float(0.00001), "f: Invalid value: 1e-05: bad"),
            (
                BadValue::Float(123456789.0),
                "f: Invalid value: 1.23456789e+08: bad",
            ),
            (BadValue::Float(123456.0), "f: Invalid value: 123456: bad"),
        ] {
            assert_eq!(invalid(value), want);
        }
    }

    #[test]
    fn paths() {
        let p = Path::new("spec").child("resources").index(0).key("a.b/c");
        assert_eq!(p.as_str(), "spec.resources[0][a.b/c]");
        assert_eq!(join_path("a", "[1].b"), "a[1].b");
        assert_eq!(join_path("", "b"), "b");
        assert_eq!(join_path("a", ""), "a");
        assert_eq!(Path::new("s").index(10).index(907).as_str(), "s[10][907]");
        assert_eq!(
            Path::default().index(usize::MAX).as_str(),
            format!("[{}]", usize::MAX)
        );
    }
}
