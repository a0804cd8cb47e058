//! Transform checks (upstream `Transform.Validate` and its per-type validators), with regular
//! expressions checked against Go's syntax, which is what Crossplane compiles them with.

use crate::findings::{ErrorType, FieldError};
use crate::go::regexp::syntax::{self, GoRegexpError};
use crate::model::{
    CONVERT_FORMATS, MATCH_LITERAL, MATCH_REGEXP, MATH_CLAMP_MAX, MATH_CLAMP_MIN, MATH_MULTIPLY,
    MatchTransform, MathTransform, Runtime, STRING_CONVERSIONS, StringTransform, Transform,
    TransformIoType, kinds, string_kinds,
};

/// The first problem of a transform, with a path relative to the transform. A
/// function-patch-and-transform transform is checked as its `validate.go` does.
pub fn validate_transform(t: &Transform) -> Option<FieldError> {
    let pt = t.runtime == Runtime::PatchAndTransform;
    let required = |name: &str| {
        FieldError::required(
            name,
            format!("given transform type {name} requires configuration"),
        )
    };
    match t.r#type.as_str() {
        kinds::MATH => match &t.math {
            None => Some(required(kinds::MATH)),
            Some(m) => validate_math(m, pt).map(|e| e.prefixed(kinds::MATH)),
        },
        kinds::MAP => match &t.map {
            None => Some(required(kinds::MAP)),
            Some(m) if m.pairs.is_empty() => Some(FieldError::required(
                "map.pairs",
                "at least one pair must be specified if a map transform is specified",
            )),
            Some(_) => None,
        },
        kinds::MATCH => match &t.r#match {
            None => Some(required(kinds::MATCH)),
            Some(m) => validate_match(m).map(|e| e.prefixed(kinds::MATCH)),
        },
        kinds::STRING => match &t.string {
            None => Some(required(kinds::STRING)),
            Some(s) => validate_string(s, pt).map(|e| e.prefixed(kinds::STRING)),
        },
        kinds::CONVERT => match &t.convert {
            None => Some(required(kinds::CONVERT)),
            Some(c) => {
                if !CONVERT_FORMATS.contains(&c.effective_format()) {
                    let raw = c.format.clone().unwrap_or_default();
                    return Some(FieldError::invalid("convert.format", raw, "invalid format"));
                }
                if TransformIoType::parse(&c.to_type).is_none() {
                    return Some(FieldError::invalid(
                        "convert.toType",
                        c.to_type.as_str(),
                        "invalid type",
                    ));
                }
                None
            }
        },
        other => Some(FieldError::invalid("type", other, "unknown transform type")),
    }
}

/// `pt`: P&T reads its input without the CRD's default, and requires the type.
fn validate_math(m: &MathTransform, pt: bool) -> Option<FieldError> {
    match m.r#type.as_str() {
        "" if pt => Some(FieldError::required(
            "type",
            "math transform type is required",
        )),
        MATH_MULTIPLY | "" => m.multiply.is_none().then(|| {
            FieldError::required(
                "multiply",
                "must specify a value if a multiply math transform is specified",
            )
        }),
        MATH_CLAMP_MIN => m.clamp_min.is_none().then(|| {
            FieldError::required(
                "clampMin",
                "must specify a value if a clamp min math transform is specified",
            )
        }),
        MATH_CLAMP_MAX => m.clamp_max.is_none().then(|| {
            FieldError::required(
                "clampMax",
                "must specify a value if a clamp max math transform is specified",
            )
        }),
        other => Some(FieldError::invalid(
            "type",
            other,
            "unknown math transform type",
        )),
    }
}

fn validate_match(m: &MatchTransform) -> Option<FieldError> {
    if m.patterns.is_empty() {
        return Some(FieldError::required(
            "patterns",
            "at least one pattern must be specified if a match transform is specified",
        ));
    }
    for (i, p) in m.patterns.iter().enumerate() {
        let err = match p.r#type.as_str() {
            MATCH_LITERAL | "" => p.literal.is_none().then(|| {
                FieldError::required("literal", "literal pattern type requires a literal")
            }),
            MATCH_REGEXP => match &p.regexp {
                None => Some(FieldError::required(
                    "regexp",
                    "regexp pattern type requires a regexp",
                )),
                Some(re) => syntax::check(re)
                    .err()
                    .map(|e| FieldError::invalid("regexp", re.as_str(), invalid_regexp(&e))),
            },
            other => Some(FieldError::invalid("type", other, "unknown pattern type")),
        };
        if let Some(e) = err {
            return Some(e.prefixed(&format!("patterns[{i}]")));
        }
    }
    None
}

/// `pt`: P&T requires the type (it has no default there) and also has `Replace`.
fn validate_string(s: &StringTransform, pt: bool) -> Option<FieldError> {
    match s.r#type.as_str() {
        "" if pt => Some(FieldError::required(
            "type",
            "string transform type is required",
        )),
        string_kinds::REPLACE if pt => match &s.replace {
            None => Some(FieldError::required(
                "replace",
                "replace transform requires a replace",
            )),
            // strings.ReplaceAll with an empty search would insert between every rune.
            Some(r) if r.search.is_empty() => Some(FieldError::required(
                "replace.search",
                "replace transform requires a search",
            )),
            Some(_) => None,
        },
        string_kinds::FORMAT | "" => s
            .fmt
            .is_none()
            .then(|| FieldError::required("fmt", "format transform requires a format")),
        string_kinds::CONVERT => match s.convert.as_deref() {
            None => Some(FieldError::required(
                "convert",
                "convert transform requires a conversion type",
            )),
            Some(c) if !STRING_CONVERSIONS.contains(&c) => Some(FieldError::new(
                ErrorType::NotSupported,
                "convert",
                c.into(),
                format!("supported values: {}", quoted_list(&STRING_CONVERSIONS)),
            )),
            Some(_) => None,
        },
        string_kinds::TRIM_PREFIX | string_kinds::TRIM_SUFFIX => s
            .trim
            .is_none()
            .then(|| FieldError::required("trim", "trim transform requires a trim value")),
        string_kinds::REGEXP => {
            let Some(re) = &s.regexp else {
                return Some(FieldError::required(
                    "regexp",
                    "regexp transform requires a regexp",
                ));
            };
            if re.r#match.is_empty() {
                return Some(FieldError::required(
                    "regexp.match",
                    "regexp transform requires a match",
                ));
            }
            let groups = match syntax::capture_groups(&re.r#match) {
                Ok(n) => n,
                Err(e) => {
                    return Some(FieldError::invalid(
                        "regexp.match",
                        re.r#match.as_str(),
                        invalid_regexp(&e),
                    ));
                }
            };
            // Beyond upstream: the runtime fails on a group the expression does not have.
            match re.group {
                Some(group) if group < 0 || group as usize > groups => Some(FieldError::invalid(
                    "regexp.group",
                    group,
                    format!(
                        "the expression has {groups} capture group(s); group must be between 0 (the whole match) and {groups}"
                    ),
                )),
                _ => None,
            }
        }
        string_kinds::JOIN => s
            .join
            .is_none()
            .then(|| FieldError::required("join", "join transform requires a join")),
        other => Some(FieldError::invalid(
            "type",
            other,
            "unknown string transform type",
        )),
    }
}

/// `"a", "b"` as the API server lists supported values.
pub(crate) fn quoted_list(values: &[&str]) -> String {
    values
        .iter()
        .map(|v| format!("\"{v}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Upstream's "invalid regexp", with Go's reason.
fn invalid_regexp(e: &GoRegexpError) -> String {
    format!("invalid regexp: {e}")
}
