//! Connection detail checks: the rules the XR reconciler applies at run time (upstream left
//! these as a TODO of the webhook), checked statically.

use crate::findings::{BadValue, ErrorType, FieldError};
use crate::model::{
    CONNECTION_FROM_FIELD_PATH, CONNECTION_FROM_SECRET_KEY, CONNECTION_FROM_VALUE, ConnectionDetail,
};

use super::transform::quoted_list;

/// The name the runtime gives a detail: its `name`, or for FromConnectionSecretKey the key.
fn effective_name(d: &ConnectionDetail) -> Option<&str> {
    match d.name.as_deref() {
        Some(n) if !n.is_empty() => Some(n),
        _ if d.effective_type() == CONNECTION_FROM_SECRET_KEY => d
            .from_connection_secret_key
            .as_deref()
            .filter(|k| !k.is_empty()),
        _ => None,
    }
}

/// The first problem of a connection detail, with a path relative to the detail.
pub fn validate_connection_detail(d: &ConnectionDetail) -> Option<FieldError> {
    let t = d.effective_type();
    let (field, present) = match t {
        CONNECTION_FROM_VALUE => ("value", d.value.is_some()),
        CONNECTION_FROM_SECRET_KEY => (
            "fromConnectionSecretKey",
            d.from_connection_secret_key
                .as_deref()
                .is_some_and(|k| !k.is_empty()),
        ),
        CONNECTION_FROM_FIELD_PATH => (
            "fromFieldPath",
            d.from_field_path.as_deref().is_some_and(|p| !p.is_empty()),
        ),
        other => {
            return Some(FieldError::new(
                ErrorType::NotSupported,
                "type",
                BadValue::from(other),
                format!(
                    "supported values: {}",
                    quoted_list(&[
                        CONNECTION_FROM_SECRET_KEY,
                        CONNECTION_FROM_FIELD_PATH,
                        CONNECTION_FROM_VALUE
                    ])
                ),
            ));
        }
    };
    if !present {
        return Some(FieldError::required(
            field,
            format!("connection detail of type {t} needs {field}"),
        ));
    }
    if effective_name(d).is_none() {
        return Some(FieldError::required(
            "name",
            format!(
                "connection detail of type {t} needs a name: the key it gets in the composite resource's connection secret"
            ),
        ));
    }
    None
}
