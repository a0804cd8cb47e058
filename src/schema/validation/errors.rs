//! Schema validation errors worded as the API server words them.
//!
//! kube-openapi's `errors.Validation` messages (`<path> in body should match '<pattern>'`)
//! mapped to field errors by apiextensions' `kubeOpenAPIResultToFieldErrors`:
//! `Required value`, `Unsupported value` (enum), `Too long` (maxLength), `Too many`
//! (maxItems, maxProperties), `Invalid value` with the type as value for a type mismatch
//! (`TypeInvalid`, also used for formats), `Invalid value` for everything else.
//!
//! Paths in the detail are kube-openapi's: properties and map keys with dots, indexes in
//! brackets (`spec.tags.a.b/c`, `spec.items[0].name`); the error's field is the same path
//! under the caller's root. `anyOf`/`oneOf`/`allOf`/`not` failures add kube-openapi's
//! composite message (`"spec.x" must validate at least one schema (anyOf)`), which the API
//! server reports without a field: here it is reported at the root.

use std::collections::BTreeMap;

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::paths::LocationSegment;
use jsonschema::{Draft, PatternOptions, ValidationError};
use serde_json::Value;

use super::convert::{Converted, TYPE_NOTE};
use super::{CompileError, CompiledSchema, formats, json_type_name, under};
use crate::findings::{BadValue, ErrorType, FieldError, Path, go_float, go_quote};

/// Builds the Draft 7 validator for a converted schema, with the Kubernetes format checks.
pub(super) fn build_validator(
    converted: &Converted,
) -> Result<jsonschema::Validator, CompileError> {
    let mut options = jsonschema::options()
        .with_draft(Draft::Draft7)
        .should_validate_formats(true)
        .with_pattern_options(PatternOptions::regex());
    for name in &converted.formats {
        if let Some(check) = formats::checker(name) {
            options = options.with_format(name.clone(), check);
        }
    }
    options
        .build(&converted.json)
        .map_err(|e| CompileError::JsonSchema {
            message: e.to_string(),
        })
}

/// One mapped error with where it came from, for reordering and the `allOf` messages.
struct Mapped {
    error: FieldError,
    schema_path: Vec<String>,
    instance_path: Vec<Segment>,
}

impl Mapped {
    fn is_required(&self) -> bool {
        self.error.error_type == ErrorType::Required
    }
}

#[derive(Clone, PartialEq)]
enum Segment {
    Key(String),
    Index(usize),
}

/// Appends the schema errors of `value` to `out`.
pub(super) fn schema_errors(
    compiled: &CompiledSchema,
    value: &Value,
    root: &Path,
    out: &mut Vec<FieldError>,
) {
    // Most values are valid: `is_valid` tells without building error locations.
    if compiled.validator.is_valid(value) {
        return;
    }
    let mut errors = compiled.validator.iter_errors(value).peekable();
    if errors.peek().is_none() {
        return;
    }
    let json = compiled.json();
    let mut mapped = Vec::new();
    for error in errors {
        map_error(&error, json, root, &mut mapped);
    }
    required_last(&mut mapped);
    add_all_of_messages(&mut mapped, json, root);
    out.extend(mapped.into_iter().map(|m| m.error));
}

fn segments(error: &ValidationError<'_>) -> (Vec<String>, Vec<Segment>) {
    let schema_path = error
        .schema_path()
        .segments()
        .map(|s| s.to_string())
        .collect();
    let instance_path = error
        .instance_path()
        .segments()
        .map(|s| match s {
            LocationSegment::Property(p) => Segment::Key(p.into_owned()),
            LocationSegment::Index(i) => Segment::Index(i),
        })
        .collect();
    (schema_path, instance_path)
}

/// kube-openapi's path: `spec.tags.key`, `spec.items[0]`.
fn openapi_path(segments: &[Segment]) -> String {
    let mut path = String::new();
    for s in segments {
        match s {
            Segment::Key(k) => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(k);
            }
            Segment::Index(i) => path.push_str(&format!("[{i}]")),
        }
    }
    path
}

fn map_error(error: &ValidationError<'_>, json: &Value, root: &Path, out: &mut Vec<Mapped>) {
    let (schema_path, instance_path) = segments(error);
    let at = openapi_path(&instance_path);
    let instance: &Value = error.instance();
    let field = under(root, &at);
    let push = |out: &mut Vec<Mapped>, error: FieldError| {
        out.push(Mapped {
            error,
            schema_path: schema_path.clone(),
            instance_path: instance_path.clone(),
        });
    };
    let invalid =
        |detail: String| FieldError::invalid(field.clone(), BadValue::from_json(instance), detail);
    // A composite error, then the errors of the branch kube-openapi would show.
    let composite_and_best =
        |out: &mut Vec<Mapped>, detail: String, context: &[Vec<ValidationError<'static>>]| {
            push(out, composite(root, detail));
            if let Some(best) = best_branch(context) {
                for e in best {
                    map_error(e, json, root, out);
                }
            }
        };
    let mapped = match error.kind() {
        ValidationErrorKind::Required { property } => {
            let name = property
                .as_str()
                .map_or_else(|| property.to_string(), str::to_string);
            let child = if at.is_empty() {
                name
            } else {
                format!("{at}.{name}")
            };
            FieldError::required(under(root, &child), "")
        }
        ValidationErrorKind::Type { kind } => {
            let node = schema_path
                .split_last()
                .and_then(|(_, parent)| node_at(json, parent));
            let declared = node
                .and_then(|n| n.get(TYPE_NOTE))
                .and_then(Value::as_str)
                .map_or_else(|| type_names(kind), str::to_string);
            let format = node.and_then(|n| n.get("format")).and_then(Value::as_str);
            // kube-openapi checks a non-null value of a string with a format against the
            // format's name and the Go format of the value (`int64`, `float64`, or none).
            let (expected, actual) = match format {
                Some(f)
                    if !instance.is_null()
                        && !declared.contains("integer")
                        && !declared.contains("number") =>
                {
                    let go_format = match json_type_name(instance) {
                        "integer" => "int64",
                        "number" => "float64",
                        _ => "",
                    };
                    (f.to_string(), go_format)
                }
                _ => (declared, json_type_name(instance)),
            };
            FieldError::new(
                ErrorType::TypeInvalid,
                field,
                BadValue::from(actual),
                format!("{at} in body must be of type {expected}: \"{actual}\""),
            )
        }
        ValidationErrorKind::Enum { options } => {
            let supported: Vec<String> = options
                .as_array()
                .map(|values| values.iter().map(quoted_enum_value).collect())
                .unwrap_or_default();
            FieldError::new(
                ErrorType::NotSupported,
                field,
                BadValue::from_json(instance),
                format!("supported values: {}", supported.join(", ")),
            )
        }
        ValidationErrorKind::Format { format } => {
            let text = instance.as_str().unwrap_or_default();
            FieldError::new(
                ErrorType::TypeInvalid,
                field,
                BadValue::from_json(instance),
                format!("{at} in body must be of type {format}: {}", go_quote(text)),
            )
        }
        ValidationErrorKind::Pattern { pattern } => {
            invalid(format!("{at} in body should match '{pattern}'"))
        }
        ValidationErrorKind::MaxLength { limit } => FieldError::new(
            ErrorType::TooLong,
            field,
            BadValue::Omit,
            format!(
                "may not be more than {limit} {}",
                plural(*limit, "byte", "bytes")
            ),
        ),
        ValidationErrorKind::MinLength { limit } => invalid(format!(
            "{at} in body should be at least {limit} chars long"
        )),
        ValidationErrorKind::Maximum { limit } => invalid(format!(
            "{at} in body should be less than or equal to {}",
            bound(limit, instance)
        )),
        ValidationErrorKind::ExclusiveMaximum { limit } => invalid(format!(
            "{at} in body should be less than {}",
            bound(limit, instance)
        )),
        ValidationErrorKind::Minimum { limit } => invalid(format!(
            "{at} in body should be greater than or equal to {}",
            bound(limit, instance)
        )),
        ValidationErrorKind::ExclusiveMinimum { limit } => invalid(format!(
            "{at} in body should be greater than {}",
            bound(limit, instance)
        )),
        ValidationErrorKind::MultipleOf { multiple_of } => invalid(format!(
            "{at} in body should be a multiple of {}",
            bound(&Value::from(*multiple_of), instance)
        )),
        // apiextensions words maxProperties like maxItems.
        ValidationErrorKind::MaxItems { limit } | ValidationErrorKind::MaxProperties { limit } => {
            FieldError::new(
                ErrorType::TooMany,
                field,
                BadValue::Int(count(instance)),
                format!(
                    "must have at most {limit} {}",
                    plural(*limit, "item", "items")
                ),
            )
        }
        ValidationErrorKind::MinItems { limit } => FieldError::invalid(
            field,
            BadValue::Int(count(instance)),
            format!("{at} in body should have at least {limit} items"),
        ),
        ValidationErrorKind::UniqueItems => FieldError::invalid(
            field,
            BadValue::from(""),
            format!("{at} in body shouldn't contain duplicates"),
        ),
        ValidationErrorKind::MinProperties { limit } => FieldError::invalid(
            field,
            BadValue::Int(count(instance)),
            format!("{at} in body should have at least {limit} properties"),
        ),
        ValidationErrorKind::AnyOf { context } => {
            let detail = format!(
                "{} must validate at least one schema (anyOf)",
                go_quote(&at)
            );
            return composite_and_best(out, detail, context);
        }
        ValidationErrorKind::OneOfNotValid { context } => {
            let detail = format!(
                "{} must validate one and only one schema (oneOf). Found none valid",
                go_quote(&at)
            );
            return composite_and_best(out, detail, context);
        }
        ValidationErrorKind::OneOfMultipleValid { context } => {
            let valid = context.iter().filter(|branch| branch.is_empty()).count();
            composite(
                root,
                format!(
                    "{} must validate one and only one schema (oneOf). Found {valid} valid alternatives",
                    go_quote(&at)
                ),
            )
        }
        ValidationErrorKind::Not { .. } => composite(
            root,
            format!("{} must not validate the schema (not)", go_quote(&at)),
        ),
        // Not produced by the converted schemas; worded generically just in case.
        _ => invalid(format!("{at} in body is invalid: {error}")),
    };
    push(out, mapped);
}

/// kube-openapi's composite errors are not field errors; apiextensions reports them without
/// a field and with an empty value.
fn composite(root: &Path, detail: String) -> FieldError {
    FieldError::invalid(root.as_str(), BadValue::from(""), detail)
}

/// The failing branch whose errors kube-openapi shows: it picks the one with the most
/// successful checks; the one with the fewest errors (the first on a tie) approximates that.
fn best_branch<'a>(
    context: &'a [Vec<ValidationError<'static>>],
) -> Option<&'a Vec<ValidationError<'static>>> {
    context
        .iter()
        .filter(|branch| !branch.is_empty())
        .min_by_key(|branch| branch.len())
}

/// The converted schema node at a keyword location.
fn node_at<'a>(json: &'a Value, location: &[String]) -> Option<&'a Value> {
    let mut node = json;
    for segment in location {
        node = match node {
            Value::Object(map) => map.get(segment)?,
            Value::Array(items) => items.get(segment.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(node)
}

fn type_names(kind: &TypeKind) -> String {
    let mut names: Vec<String> = match kind {
        TypeKind::Single(t) => vec![t.to_string()],
        TypeKind::Multiple(set) => set.iter().map(|t| t.to_string()).collect(),
    };
    names.retain(|n| n != "null");
    names.sort();
    names.join(",")
}

/// A bound as kube-openapi prints it: truncated to an integer when the value is an integer
/// (it compares `int64`s then), Go's `%v` of a float otherwise.
fn bound(limit: &Value, instance: &Value) -> String {
    let limit = limit.as_f64().unwrap_or(f64::NAN);
    let integer_value = instance.as_i64().is_some() || instance.as_u64().is_some();
    if integer_value && limit.is_finite() && limit.abs() < 9.2e18 {
        format!("{}", limit.trunc() as i64)
    } else {
        go_float(limit)
    }
}

fn count(instance: &Value) -> i64 {
    let n = match instance {
        Value::Array(items) => items.len(),
        Value::Object(map) => map.len(),
        _ => 0,
    };
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn plural(n: u64, one: &'static str, many: &'static str) -> &'static str {
    if n == 1 { one } else { many }
}

/// An enum value as `field.NotSupported` prints it: strings quoted, others as Go's JSON,
/// quoted.
fn quoted_enum_value(v: &Value) -> String {
    match v {
        Value::String(s) => go_quote(s),
        other => go_quote(&crate::go::json::marshal(other)),
    }
}

/// Moves the `Required` errors of each object after the errors found inside it: the
/// validator checks `required` first, kube-openapi's object validator last.
fn required_last(mapped: &mut [Mapped]) {
    let mut i = 0;
    while i < mapped.len() {
        if !mapped[i].is_required() {
            i += 1;
            continue;
        }
        let object = mapped[i].instance_path.clone();
        let mut run_end = i;
        while run_end < mapped.len()
            && mapped[run_end].is_required()
            && mapped[run_end].instance_path == object
        {
            run_end += 1;
        }
        let mut block_end = run_end;
        while block_end < mapped.len() && mapped[block_end].instance_path.starts_with(&object) {
            block_end += 1;
        }
        if block_end == run_end {
            i = run_end;
        } else {
            // Nested objects' errors now start at `i` and are looked at next; the moved run
            // ends its block and is passed over later.
            mapped[i..block_end].rotate_left(run_end - i);
        }
    }
}

/// Adds kube-openapi's `allOf` message after the errors of each failed `allOf`:
/// `"spec.x" must validate all the schemas (allOf)`, with `. None validated` when every
/// branch failed.
fn add_all_of_messages(mapped: &mut Vec<Mapped>, json: &Value, root: &Path) {
    // (schema location of the allOf, instance path) -> (failed branches, last error index)
    let mut groups: BTreeMap<(Vec<String>, String), (Vec<usize>, usize)> = BTreeMap::new();
    for (position, m) in mapped.iter().enumerate() {
        let mut consumed = 0;
        let mut i = 0;
        while i < m.schema_path.len() {
            let keyword = m.schema_path[i].as_str();
            match keyword {
                "properties" => {
                    consumed += 1;
                    i += 2;
                }
                "additionalProperties" => {
                    consumed += 1;
                    i += 1;
                }
                "items" => {
                    consumed += 1;
                    let tuple = m
                        .schema_path
                        .get(i + 1)
                        .is_some_and(|s| s.parse::<usize>().is_ok());
                    i += if tuple { 2 } else { 1 };
                }
                "allOf" | "anyOf" | "oneOf" => {
                    let branch = m
                        .schema_path
                        .get(i + 1)
                        .and_then(|s| s.parse::<usize>().ok());
                    if let (Some(branch), "allOf") = (branch, keyword) {
                        let location = m.schema_path[..i].to_vec();
                        let at =
                            openapi_path(&m.instance_path[..consumed.min(m.instance_path.len())]);
                        let entry = groups.entry((location, at)).or_default();
                        if !entry.0.contains(&branch) {
                            entry.0.push(branch);
                        }
                        entry.1 = position;
                    }
                    i += 2;
                }
                "not" | "then" => i += 1,
                _ => break,
            }
        }
    }
    let mut inserts: Vec<(usize, FieldError)> = groups
        .into_iter()
        .map(|((location, at), (failed, last))| {
            let total = node_at(json, &location)
                .and_then(|node| node.get("allOf"))
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            let suffix = if failed.len() == total {
                ". None validated"
            } else {
                ""
            };
            let error = composite(
                root,
                format!(
                    "{} must validate all the schemas (allOf){suffix}",
                    go_quote(&at)
                ),
            );
            (last, error)
        })
        .collect();
    inserts.sort_by_key(|(last, _)| std::cmp::Reverse(*last));
    for (last, error) in inserts {
        mapped.insert(
            last + 1,
            Mapped {
                error,
                schema_path: Vec::new(),
                instance_path: Vec::new(),
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bounds_print_as_kube_openapi() {
        assert_eq!(bound(&json!(1.5), &json!(1)), "1");
        assert_eq!(bound(&json!(1.5), &json!(0.5)), "1.5");
        assert_eq!(bound(&json!(1000000.0), &json!(0.5)), "1e+06");
    }
}
