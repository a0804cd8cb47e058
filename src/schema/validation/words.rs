//! Words the validator's messages share: kube-openapi's name for a value's JSON type and the
//! "did you mean" suggestions of an unknown field (also used for field paths).

use serde_json::Value;

/// The JSON type name kube-openapi reports for a value (`1.0` is an integer).
pub fn json_type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n)
            if n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0) =>
        {
            "integer"
        }
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Up to two known names closest to `name` (case-insensitive edit distance), quoted.
pub fn closest<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Vec<String> {
    let lower = name.to_ascii_lowercase();
    let mut scored: Vec<(usize, &str)> = candidates
        .map(|c| (strsim::levenshtein(&lower, &c.to_ascii_lowercase()), c))
        .filter(|(d, c)| *d <= (c.len().max(name.len()) / 3).max(1))
        .collect();
    scored.sort();
    // Only the best matches: a far second guess is noise.
    let best = scored.first().map(|(d, _)| *d);
    scored
        .iter()
        .filter(|(d, _)| Some(*d) == best)
        .take(2)
        .map(|(_, c)| format!("\"{c}\""))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn type_names_as_kube_openapi() {
        assert_eq!(json_type_name(&json!(1.0)), "integer");
        assert_eq!(json_type_name(&json!(1.5)), "number");
        assert_eq!(json_type_name(&json!(u64::MAX)), "integer");
        assert_eq!(json_type_name(&json!(null)), "null");
    }

    #[test]
    fn suggestions() {
        let names = ["toFieldPath", "fromFieldPath", "transforms", "type"];
        assert_eq!(
            closest("toFieldpath", names.into_iter()),
            [r#""toFieldPath""#]
        );
        assert_eq!(closest("tranforms", names.into_iter()), [r#""transforms""#]);
        assert!(closest("zzzzzz", names.into_iter()).is_empty());
    }
}
