//! Patch checks (upstream `Patch.Validate`) and the combine format check upstream left out.

use crate::findings::{ErrorType, FieldError, Path};
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
    let verbs = match count_format_verbs(fmt) {
        Ok(v) => v,
        Err(detail) => return Some(FieldError::invalid(field, fmt.as_str(), detail)),
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

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// What a Go format string consumes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatVerbs {
    /// How many arguments the format needs (the highest argument it reads).
    pub needed: usize,
    /// Whether explicit argument indexes (`%[2]s`) are used; Go then reports no EXTRA.
    pub reordered: bool,
    /// Each verb with the (0-based) argument it reads.
    pub verbs: Vec<(usize, char)>,
}

/// Walks a Go format string as `fmt.Sprintf` does and counts the arguments it reads
/// (verbs and `*` widths, honouring `%[n]` indexes). `%%` reads nothing.
pub fn count_format_verbs(format: &str) -> Result<FormatVerbs, String> {
    const VERBS: &str = "bcdeEfFgGoOpqstTUvxX";
    let chars: Vec<char> = format.chars().collect();
    let mut i = 0;
    let mut arg = 0usize;
    let mut needed = 0usize;
    let mut reordered = false;
    let mut verbs = Vec::new();
    while i < chars.len() {
        if chars[i] != '%' {
            i += 1;
            continue;
        }
        i += 1;
        if i < chars.len() && chars[i] == '%' {
            i += 1;
            continue;
        }
        // Flags.
        while i < chars.len() && "+-# 0".contains(chars[i]) {
            i += 1;
        }
        let mut parse_index = |i: &mut usize, arg: &mut usize| -> Result<(), String> {
            if *i < chars.len() && chars[*i] == '[' {
                let close = chars[*i..]
                    .iter()
                    .position(|&c| c == ']')
                    .ok_or_else(|| "an argument index is missing its closing ']'".to_string())?;
                let digits: String = chars[*i + 1..*i + close].iter().collect();
                let n: usize = digits
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| format!("bad argument index [{digits}]"))?;
                *arg = n - 1;
                reordered = true;
                *i += close + 1;
            }
            Ok(())
        };
        // Width, then precision: digits, or '*' which reads an argument.
        let mut star_or_digits = |i: &mut usize, arg: &mut usize| {
            if *i < chars.len() && chars[*i] == '*' {
                *arg += 1;
                needed = needed.max(*arg);
                *i += 1;
            } else {
                while *i < chars.len() && chars[*i].is_ascii_digit() {
                    *i += 1;
                }
            }
        };
        parse_index(&mut i, &mut arg)?;
        star_or_digits(&mut i, &mut arg);
        if i < chars.len() && chars[i] == '.' {
            i += 1;
            parse_index(&mut i, &mut arg)?;
            star_or_digits(&mut i, &mut arg);
        }
        parse_index(&mut i, &mut arg)?;
        let Some(&verb) = chars.get(i) else {
            return Err("the format ends with a lone '%' (write %% for a percent sign)".into());
        };
        if !VERBS.contains(verb) {
            return Err(format!(
                "%{verb} is not a Go format verb (use %s for strings, %d for integers, %v for any value, %% for a percent sign)"
            ));
        }
        verbs.push((arg, verb));
        arg += 1;
        needed = needed.max(arg);
        i += 1;
    }
    Ok(FormatVerbs {
        needed,
        reordered,
        verbs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn needed(f: &str) -> usize {
        count_format_verbs(f).unwrap().needed
    }

    #[test]
    fn counts_go_verbs() {
        assert_eq!(needed("%s-%s"), 2);
        assert_eq!(needed("100%% %d"), 1);
        assert_eq!(needed("%-10s|%5.2f|%+d|%#x"), 4);
        assert_eq!(needed("%*d"), 2);
        assert_eq!(needed("%[2]s-%[1]s"), 2);
        assert_eq!(needed("%[3]s"), 3);
        assert!(count_format_verbs("%[2]s %[1]s").unwrap().reordered);
        assert_eq!(needed("no verbs"), 0);
        assert!(count_format_verbs("50%").is_err());
        assert!(count_format_verbs("%z").is_err());
        assert!(count_format_verbs("%[x]s").is_err());
    }
}
