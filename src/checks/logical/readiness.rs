//! Readiness check checks (upstream `ReadinessCheck.Validate`).

use crate::findings::FieldError;
use crate::model::{READINESS_TYPES, ReadinessCheck};

/// The first problem of a readiness check, with a path relative to the check.
pub fn validate_readiness_check(r: &ReadinessCheck) -> Option<FieldError> {
    let t = r.r#type.as_str();
    if !READINESS_TYPES.contains(&t) {
        return Some(FieldError::invalid(
            "type",
            t,
            "unknown readiness check type",
        ));
    }
    match t {
        "None" => return None,
        "MatchString" if r.match_string.is_empty() => {
            return Some(FieldError::required(
                "matchString",
                "cannot be empty for type MatchString",
            ));
        }
        "MatchInteger" if r.match_integer == 0 => {
            return Some(FieldError::required(
                "matchInteger",
                "cannot be 0 for type MatchInteger",
            ));
        }
        "MatchCondition" => {
            if let Some(mc) = &r.match_condition {
                if mc.r#type.is_empty() {
                    return Some(FieldError::required(
                        "matchCondition.type",
                        "cannot be empty for type MatchCondition",
                    ));
                }
                if mc.status.is_empty() {
                    return Some(FieldError::required(
                        "matchCondition.status",
                        "cannot be empty for type MatchCondition",
                    ));
                }
            }
            return None;
        }
        _ => {}
    }
    if r.field_path.is_empty() {
        return Some(FieldError::required("fieldPath", "cannot be empty"));
    }
    None
}
