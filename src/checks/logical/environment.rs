//! `spec.environment` checks (Crossplane v1.13-v1.17).

use crate::findings::{BadValue, ErrorType, FieldError, Path};
use crate::model::{
    COMBINE_FROM_COMPOSITE, COMBINE_TO_COMPOSITE, Composition, ENV_MATCHER_FROM_COMPOSITE,
    ENV_MATCHER_VALUE, ENV_SELECTOR_SINGLE, ENV_SOURCE_REFERENCE, ENV_SOURCE_SELECTOR,
    EnvironmentSource, EnvironmentSourceSelector, FROM_COMPOSITE_FIELD_PATH, Patch,
    TO_COMPOSITE_FIELD_PATH,
};

use super::transform::quoted_list;
use super::validate_patch;

/// The patch types an environment patch may have.
pub const ENVIRONMENT_PATCH_TYPES: [&str; 4] = [
    FROM_COMPOSITE_FIELD_PATH,
    TO_COMPOSITE_FIELD_PATH,
    COMBINE_FROM_COMPOSITE,
    COMBINE_TO_COMPOSITE,
];

/// Every error of `spec.environment`: its patches, then its sources.
pub fn validate_environment(c: &Composition) -> Vec<FieldError> {
    let Some(env) = &c.spec.environment else {
        return Vec::new();
    };
    let root = Path::new("spec").child("environment");
    let mut errs = Vec::new();
    for (i, p) in env.patches.iter().enumerate() {
        if let Some(e) = validate_environment_patch(p) {
            errs.push(e.prefixed(root.child("patches").index(i).as_str()));
        }
    }
    for (i, source) in env.environment_configs.iter().enumerate() {
        if let Some(e) = validate_source(source) {
            errs.push(e.prefixed(root.child("environmentConfigs").index(i).as_str()));
        }
    }
    errs
}

/// The first problem of an environment patch, relative to the patch.
pub fn validate_environment_patch(p: &Patch) -> Option<FieldError> {
    if let Some(e) = validate_patch(p) {
        return Some(e);
    }
    let t = p.r#type.as_str();
    if !t.is_empty() && !ENVIRONMENT_PATCH_TYPES.contains(&t) {
        return Some(FieldError::new(
            ErrorType::NotSupported,
            "type",
            BadValue::from(t),
            format!(
                "supported values: {}",
                quoted_list(&ENVIRONMENT_PATCH_TYPES)
            ),
        ));
    }
    None
}

fn validate_source(s: &EnvironmentSource) -> Option<FieldError> {
    match s.r#type.as_str() {
        ENV_SOURCE_REFERENCE => match &s.r#ref {
            None => Some(FieldError::required("ref", "ref is required")),
            Some(r) if r.name.is_empty() => {
                Some(FieldError::required("ref.name", "name is required"))
            }
            Some(_) => None,
        },
        ENV_SOURCE_SELECTOR => match &s.selector {
            None => Some(FieldError::required("selector", "selector is required")),
            Some(sel) => validate_selector(sel).map(|e| e.prefixed("selector")),
        },
        other => Some(FieldError::invalid("type", other, "invalid type")),
    }
}

/// The first problem of an environment source selector, relative to the selector.
pub fn validate_selector(s: &EnvironmentSourceSelector) -> Option<FieldError> {
    if s.mode == ENV_SELECTOR_SINGLE && s.max_match.is_some() {
        return Some(FieldError::forbidden(
            "maxMatch",
            "maxMatch is not supported in Single mode",
        ));
    }
    if s.mode == ENV_SELECTOR_SINGLE && s.min_match.is_some() {
        return Some(FieldError::forbidden(
            "minMatch",
            "minMatch is not supported in Single mode",
        ));
    }
    if s.match_labels.is_empty() {
        return Some(FieldError::required(
            "matchLabels",
            "selector must have at least one match label",
        ));
    }
    for (i, m) in s.match_labels.iter().enumerate() {
        let err = if m.key.is_empty() {
            Some(FieldError::required("key", "key is required"))
        } else {
            match m.r#type.as_str() {
                ENV_MATCHER_FROM_COMPOSITE => match m.value_from_field_path.as_deref() {
                    None => Some(FieldError::required(
                        "valueFromFieldPath",
                        "valueFromFieldPath is required",
                    )),
                    Some("") => Some(FieldError::required(
                        "valueFromFieldPath",
                        "valueFromFieldPath must not be empty",
                    )),
                    Some(_) => None,
                },
                ENV_MATCHER_VALUE => match m.value.as_deref() {
                    None => Some(FieldError::required("value", "value is required")),
                    Some("") => Some(FieldError::required("value", "value must not be empty")),
                    Some(_) => None,
                },
                other => Some(FieldError::invalid("type", other, "invalid type")),
            }
        };
        if let Some(e) = err {
            return Some(e.prefixed(&format!("matchLabels[{i}]")));
        }
    }
    None
}
