//! `resource.Quantity` fields of built-in kinds ([`Schema::quantity`]), as the API server
//! decodes them (`Quantity.UnmarshalJSON`): `null` and a number are taken, a string is
//! `resource.ParseQuantity`'s once trimmed, anything else is parsed as its JSON text, which
//! never is a quantity. The error is `ParseQuantity`'s
//! (`quantities must match the regular expression '...'`); the API server puts it in a decode
//! error without a field, here it is at the field.

use serde_json::Value;

use super::Subtrees;
use crate::findings::{BadValue, FieldError, Path};
use crate::go::quantity::{self, QuantityError};
use crate::schema::Schema;

/// Appends the quantity errors of `value` to `out`.
pub(super) fn validate(
    value: &Value,
    schema: &Schema,
    relevant: &Subtrees,
    root: &Path,
    out: &mut Vec<FieldError>,
) {
    relevant.walk(value, schema, root, &mut |value, schema, path| {
        if !schema.quantity {
            return;
        }
        let error = match value {
            Value::Null | Value::Number(_) => None,
            // `UnmarshalJSON` trims the text between the quotes.
            Value::String(s) => quantity::parse(s.trim()).err(),
            // `true`, `{...}`, `[...]`: their JSON text has no leading digit.
            _ => Some(QuantityError::FormatWrong),
        };
        if let Some(e) = error {
            out.push(FieldError::invalid(
                path.path(),
                BadValue::from_json(value),
                e.to_string(),
            ));
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::validation::shown_errors;
    use serde_json::json;

    fn errors(value: Value) -> Vec<String> {
        let mut schema = Schema::from_value(&json!({"type": "object", "properties": {
            "limits": {"type": "object", "additionalProperties": {}}}}))
        .expect("schema");
        if let Some(limits) = schema.properties.get_mut("limits")
            && let Some(crate::schema::AdditionalProperties::Schema(v)) =
                limits.additional_properties.as_mut()
        {
            v.quantity = true;
        }
        shown_errors(&schema, json!({"limits": value}), "spec")
    }

    #[test]
    fn quantities_are_decoded_as_the_api_server_decodes_them() {
        let ok =
            json!({"a": "500m", "b": "1Gi", "c": 2, "d": 0.5, "e": " 1e3 ", "f": null, "g": "-1"});
        assert_eq!(errors(ok), Vec::<String>::new());
        let regexp = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
        assert_eq!(
            errors(json!({"cpu": "lots", "gpu": "1ki", "mem": true})),
            [
                format!("spec.limits[cpu]: Invalid value: \"lots\": {regexp}"),
                "spec.limits[gpu]: Invalid value: \"1ki\": unable to parse quantity's suffix"
                    .to_string(),
                format!("spec.limits[mem]: Invalid value: true: {regexp}"),
            ]
        );
    }
}
