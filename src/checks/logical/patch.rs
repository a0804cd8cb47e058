//! Patch checks (upstream `Patch.Validate`) and the combine format check upstream left out.

use crate::findings::{ErrorType, FieldError, Path};
use crate::go::{self, fmt::FormatError};
use crate::model::{
    COMBINE_FROM_COMPOSITE, COMBINE_FROM_ENVIRONMENT, COMBINE_STRATEGY_STRING,
    COMBINE_TO_COMPOSITE, COMBINE_TO_ENVIRONMENT, FROM_COMPOSITE_FIELD_PATH,
    FROM_ENVIRONMENT_FIELD_PATH, PATCH_SET, Patch, TO_COMPOSITE_FIELD_PATH,
    TO_ENVIRONMENT_FIELD_PATH,
};

use super::validate_transform;

/// The first problem of a patch, with a path relative to the patch: the fields its type
/// needs, then each transform, then the combine format against the variables.
pub fn validate_patch(p: &Patch) -> Option<FieldError> {
    let t = p.r#type.as_str();
    match t {
        FROM_COMPOSITE_FIELD_PATH
        | TO_COMPOSITE_FIELD_PATH
        | FROM_ENVIRONMENT_FIELD_PATH
        | TO_ENVIRONMENT_FIELD_PATH
        | "" => {
            if p.from_field_path.is_none() {
                return Some(FieldError::required(
                    "fromFieldPath",
                    format!("fromFieldPath must be set for patch type {t}"),
                ));
            }
        }
        PATCH_SET => {
            if p.patch_set_name.is_none() {
                return Some(FieldError::required(
                    "patchSetName",
                    format!("patchSetName must be set for patch type {t}"),
                ));
            }
        }
        COMBINE_FROM_COMPOSITE
        | COMBINE_TO_COMPOSITE
        | COMBINE_FROM_ENVIRONMENT
        | COMBINE_TO_ENVIRONMENT => {
            if p.combine.is_none() {
                return Some(FieldError::required(
                    "combine",
                    format!("combine must be set for patch type {t}"),
                ));
            }
            if p.to_field_path.is_none() {
                return Some(FieldError::required(
                    "toFieldPath",
                    format!("toFieldPath must be set for patch type {t}"),
                ));
            }
        }
        _ => return Some(FieldError::invalid("type", t, "unknown patch type")),
    }
    for (i, transform) in p.transforms.iter().enumerate() {
        if let Some(e) = validate_transform(transform) {
            return Some(e.prefixed(&format!("transforms[{i}]")));
        }
    }
    validate_combine_format(p)
}

/// Checks a combine: at least one variable, the `string` strategy's configuration, and its
/// format against the variables: Crossplane formats them with
/// Go's `fmt.Sprintf`, which writes `%!s(MISSING)` or `%!(EXTRA ...)` into the value when
/// the counts disagree, and `%!z(...)` for an unknown verb.
fn validate_combine_format(p: &Patch) -> Option<FieldError> {
    let combine = p.combine.as_ref()?;
    if combine.variables.is_empty() {
        return Some(FieldError::required(
            "combine.variables",
            "a combine needs at least one variable",
        ));
    }
    if combine.strategy != COMBINE_STRATEGY_STRING {
        return None;
    }
    let Some(string) = combine.string.as_ref() else {
        // Upstream reports this in its schema-aware stage; it needs no schema.
        return Some(FieldError::required(
            "combine.string",
            "string combine strategy requires configuration",
        ));
    };
    let fmt = &string.fmt;
    let field = Path::new("combine").child("string").child("fmt");
    let n = combine.variables.len();
    let verbs = match go::fmt::arguments(fmt) {
        Ok(v) => v,
        Err(e) => return Some(FieldError::invalid(field, fmt.as_str(), format_error(&e))),
    };
    if verbs.needed > n {
        // What Go writes for the first verb without a value.
        let verb = verbs
            .verbs
            .iter()
            .find(|(arg, _)| *arg >= n)
            .map_or('v', |(_, v)| *v);
        let marker = if verbs.reordered {
            "BADINDEX"
        } else {
            "MISSING"
        };
        return Some(FieldError::invalid(
            field,
            fmt.as_str(),
            format!(
                "the format uses {} but combine.variables lists {}: the value would contain %!{verb}({marker})",
                plural(verbs.needed, "value"),
                plural(n, "variable")
            ),
        ));
    }
    if !verbs.reordered && verbs.needed < n {
        return Some(FieldError::new(
            ErrorType::Invalid,
            field,
            fmt.as_str().into(),
            format!(
                "the format uses {} but combine.variables lists {}: the value would end in %!(EXTRA ...)",
                plural(verbs.needed, "value"),
                plural(n, "variable")
            ),
        ));
    }
    None
}

/// What a format that prints an error form whatever its values needs.
fn format_error(e: &FormatError) -> String {
    match e {
        FormatError::UnclosedIndex => "an argument index is missing its closing ']'".into(),
        FormatError::BadIndex(digits) => format!("bad argument index [{digits}]"),
        FormatError::NoVerb => {
            "the format ends with a lone '%' (write %% for a percent sign)".into()
        }
        FormatError::UnknownVerb(verb) => format!(
            "%{verb} is not a Go format verb (use %s for strings, %d for integers, %v for any value, %% for a percent sign)"
        ),
    }
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The message of a combine of `n` variables formatted with `fmt`.
    fn combine(fmt: &str, n: usize) -> Option<String> {
        let variables: Vec<_> = (0..n)
            .map(|i| json!({"fromFieldPath": format!("spec.v{i}")}))
            .collect();
        let p: Patch = serde_json::from_value(json!({
            "type": "CombineFromComposite",
            "toFieldPath": "spec.out",
            "combine": {"variables": variables, "strategy": "string", "string": {"fmt": fmt}},
        }))
        .ok()?;
        validate_patch(&p).map(|e| e.to_string())
    }

    #[test]
    fn formats_that_print_error_forms() {
        let at = "combine.string.fmt: Invalid value";
        for (fmt, n, want) in [
            ("%s-%s", 2, None),
            ("%[2]s-%[1]s", 2, None),
            (
                "%[3]s",
                2,
                Some(format!(
                    r#"{at}: "%[3]s": the format uses 3 values but combine.variables lists 2 variables: the value would contain %!s(BADINDEX)"#
                )),
            ),
            (
                "%[2s",
                2,
                Some(format!(
                    r#"{at}: "%[2s": an argument index is missing its closing ']'"#
                )),
            ),
            (
                "%[0]s",
                1,
                Some(format!(r#"{at}: "%[0]s": bad argument index [0]"#)),
            ),
            (
                "a%",
                1,
                Some(format!(
                    r#"{at}: "a%": the format ends with a lone '%' (write %% for a percent sign)"#
                )),
            ),
            (
                "%w",
                1,
                Some(format!(
                    r#"{at}: "%w": %w is not a Go format verb (use %s for strings, %d for integers, %v for any value, %% for a percent sign)"#
                )),
            ),
        ] {
            assert_eq!(combine(fmt, n), want, "{fmt:?}");
        }
    }
}
