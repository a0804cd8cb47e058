//! SARIF 2.1.0 output of `validate` and `audit`, for CI systems that show findings inline
//! (GitHub code scanning, GitLab, Azure DevOps): one run, one result per finding with its
//! file, line and column, and the input errors as the invocation's notifications.
//!
//! A rule per kind of finding emitted, its id the finding's stage and type as the JSON output
//! names them (`schema/NotFound`, `logical/Invalid`). Files are named relative to the
//! current directory (`%SRCROOT%`), as a repository checkout's root; Compositions from the
//! cluster have logical locations only (`Composition/<name>/<field>`).

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Component, Path};

use serde_json::{Map, Value, json};

use super::{Origin, Validated};
use crate::document::{DocumentError, STDIN_NAME};
use crate::findings::{ErrorType, Finding, Severity, Stage};

/// Where the SARIF 2.1.0 schema is published (OASIS, errata 01).
const SCHEMA_URI: &str =
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json";

/// The project's home: the repository the image `ghcr.io/composition-webhook/composition-webhook`
/// is published from.
const INFORMATION_URI: &str = "https://github.com/composition-webhook/composition-webhook";

/// The base every relative file URI is resolved against: the directory the tool ran in.
const SRCROOT: &str = "%SRCROOT%";

/// Something the run itself has to say (an input that could not be read), with where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// What happened, in words.
    pub message: String,
    /// The file it is about, when there is one.
    pub file: Option<String>,
    /// The 1-based line and column in the file.
    pub position: Option<(u32, u32)>,
}

impl Notice {
    /// A notice about no file in particular.
    pub fn message(message: impl Into<String>) -> Self {
        Notice {
            message: message.into(),
            file: None,
            position: None,
        }
    }
}

impl From<&DocumentError> for Notice {
    fn from(e: &DocumentError) -> Self {
        // `Invalid` may name several paths (`--functions a, b`): its words say which.
        let file = match e {
            DocumentError::Invalid { .. } => None,
            other => Some(other.file().to_string()),
        };
        Notice {
            message: e.to_string(),
            file,
            position: e.position(),
        }
    }
}

/// Writes the SARIF log of `results` and `notices`, files named relative to the current
/// directory.
pub fn write(out: &mut impl Write, results: &[Validated], notices: &[Notice]) -> io::Result<()> {
    let cwd = std::env::current_dir().ok();
    serde_json::to_writer_pretty(&mut *out, &log(results, notices, cwd.as_deref()))?;
    writeln!(out)
}

/// The SARIF log: one run of this tool.
pub fn log(results: &[Validated], notices: &[Notice], cwd: Option<&Path>) -> Value {
    let mut rules: BTreeMap<(Stage, ErrorType), usize> = BTreeMap::new();
    for r in results {
        for f in &r.report.findings {
            rules.insert((f.stage, f.error.error_type), 0);
        }
    }
    for (index, slot) in rules.values_mut().enumerate() {
        *slot = index;
    }
    let results: Vec<Value> = results
        .iter()
        .flat_map(|r| {
            r.report
                .findings
                .iter()
                .zip(&r.positions)
                .map(|(f, position)| {
                    let index = rules.get(&(f.stage, f.error.error_type)).copied();
                    result(r, f, *position, index.unwrap_or_default(), cwd)
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let mut invocation = json!({
        "executionSuccessful": notices.is_empty(),
    });
    if !notices.is_empty() {
        invocation["toolExecutionNotifications"] =
            notices.iter().map(|n| notification(n, cwd)).collect();
    }
    let mut run = json!({
        "tool": {"driver": {
            "name": "composition-webhook",
            "version": env!("CARGO_PKG_VERSION"),
            "informationUri": INFORMATION_URI,
            "rules": rules.keys().map(|&(stage, ty)| rule(stage, ty)).collect::<Vec<_>>(),
        }},
        "invocations": [invocation],
        // Columns count characters, as the YAML reader does.
        "columnKind": "unicodeCodePoints",
        "results": results,
    });
    if let Some(cwd) = cwd {
        run["originalUriBaseIds"] = json!({SRCROOT: {"uri": directory_uri(cwd)}});
    }
    json!({"$schema": SCHEMA_URI, "version": "2.1.0", "runs": [run]})
}

/// The rule id of a finding: `<stage>/<type>`.
pub fn rule_id(stage: Stage, error_type: ErrorType) -> String {
    format!("{}/{}", stage.name(), error_type.name())
}

fn rule(stage: Stage, error_type: ErrorType) -> Value {
    let (title, about) = stage_words(stage);
    let words = match error_type {
        ErrorType::TypeInvalid => "Invalid value (wrong type)",
        other => other.words(),
    };
    json!({
        "id": rule_id(stage, error_type),
        "shortDescription": {"text": format!("{title}: {words}")},
        "fullDescription": {"text": about},
        "properties": {"stage": stage.name(), "type": error_type.name()},
    })
}

/// A stage's title and what it checks.
fn stage_words(stage: Stage) -> (&'static str, &'static str) {
    match stage {
        Stage::Logical => (
            "Logical checks",
            "The Composition by itself, without schemas: patches, transforms, patch sets, readiness checks, connection details, and what the API server would refuse.",
        ),
        Stage::Mode => (
            "Validation mode",
            "The crossplane.io/composition-schema-aware-validation-mode annotation.",
        ),
        Stage::Crds => (
            "Schema lookups",
            "The CRDs, MRDs and XRDs of the composite resource and of each composed resource.",
        ),
        Stage::Schema => (
            "Schema-aware checks",
            "Patch paths and types, readiness checks and connection details against the schemas.",
        ),
        Stage::Rendered => (
            "Rendered resources",
            "Composed resources rendered from a mock composite resource and validated against their CRDs.",
        ),
        Stage::Limits => (
            "Limits",
            "The validation's memory, work or time budget ran out before the checks were done.",
        ),
    }
}

fn result(
    r: &Validated,
    f: &Finding,
    position: Option<(u32, u32)>,
    rule_index: usize,
    cwd: Option<&Path>,
) -> Value {
    let name = &r.report.name;
    let field = &f.error.field;
    let qualified = if field.is_empty() {
        format!("Composition/{name}")
    } else {
        format!("Composition/{name}/{field}")
    };
    let mut location = Map::new();
    if let Some(physical) = r.file().and_then(|file| physical(file, position, cwd)) {
        location.insert("physicalLocation".into(), physical);
    }
    location.insert(
        "logicalLocations".into(),
        json!([{
            "name": if field.is_empty() { name } else { field },
            "fullyQualifiedName": qualified,
        }]),
    );
    let mut properties = json!({
        "composition": name,
        "mode": r.report.mode.name(),
        "verdict": if r.report.verdict.allowed { "allowed" } else { "denied" },
        "stage": f.stage.name(),
        "type": f.error.error_type.name(),
        "field": field,
    });
    if let Origin::Cluster {
        resource_version: Some(rv),
    } = &r.origin
    {
        properties["resourceVersion"] = json!(rv);
    }
    json!({
        "ruleId": rule_id(f.stage, f.error.error_type),
        "ruleIndex": rule_index,
        "level": match f.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        },
        "message": {"text": f.message()},
        "locations": [Value::Object(location)],
        "properties": properties,
    })
}

fn notification(n: &Notice, cwd: Option<&Path>) -> Value {
    let mut v = json!({"level": "error", "message": {"text": n.message}});
    if let Some(physical) = n.file.as_deref().and_then(|f| physical(f, n.position, cwd)) {
        v["locations"] = json!([{"physicalLocation": physical}]);
    }
    v
}

/// A file's physical location, with a region when the position is known; `None` for
/// standard input, which has no URI.
fn physical(file: &str, position: Option<(u32, u32)>, cwd: Option<&Path>) -> Option<Value> {
    let mut v = json!({"artifactLocation": artifact_location(file, cwd)?});
    if let Some((line, column)) = position.filter(|&(line, _)| line > 0) {
        let mut region = Map::new();
        region.insert("startLine".into(), json!(line));
        if column > 0 {
            region.insert("startColumn".into(), json!(column));
        }
        v["region"] = Value::Object(region);
    }
    Some(v)
}

/// `{"uri","uriBaseId"}` for a file under the current directory (its path relative to it,
/// percent-encoded), else `{"uri"}` with an absolute `file:` URI.
fn artifact_location(file: &str, cwd: Option<&Path>) -> Option<Value> {
    if file == STDIN_NAME || file.is_empty() {
        return None;
    }
    let path = Path::new(file);
    let relative = if path.is_absolute() {
        cwd.and_then(|c| path.strip_prefix(c).ok())
    } else {
        Some(path)
    };
    Some(match relative {
        Some(rel) => json!({"uri": relative_uri(rel), "uriBaseId": SRCROOT}),
        None => json!({"uri": file_uri(path)}),
    })
}

/// `a/b c/d.yaml` -> `a/b%20c/d.yaml`.
fn relative_uri(path: &Path) -> String {
    let mut segments = Vec::new();
    for c in path.components() {
        match c {
            Component::Normal(s) => segments.push(encode(&s.to_string_lossy())),
            Component::ParentDir => segments.push("..".to_string()),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    segments.join("/")
}

/// `file:///abs/path`.
fn file_uri(path: &Path) -> String {
    let mut uri = "file://".to_string();
    for c in path.components() {
        if let Component::Normal(s) = c {
            uri.push('/');
            uri.push_str(&encode(&s.to_string_lossy()));
        }
    }
    if uri == "file://" {
        uri.push('/');
    }
    uri
}

/// A directory's `file:` URI, ending with `/` as a base URI must.
fn directory_uri(dir: &Path) -> String {
    let mut uri = file_uri(dir);
    if !uri.ends_with('/') {
        uri.push('/');
    }
    uri
}

/// Percent-encodes a path segment: every byte but URI's unreserved characters.
fn encode(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::FieldError;
    use crate::mode::{self, Mode};
    use crate::validate::Report;

    fn validated(
        origin: Origin,
        findings: Vec<Finding>,
        positions: Vec<Option<(u32, u32)>>,
    ) -> Validated {
        let mut findings = findings;
        mode::apply_mode(Mode::Loose, &mut findings);
        Validated {
            origin,
            report: Report {
                name: "xnets.example.org".into(),
                mode: Mode::Loose,
                mode_source: None,
                verdict: mode::verdict(&findings),
                findings,
                stopped: None,
                function_calls: 0,
            },
            positions,
        }
    }

    #[test]
    fn uris_are_relative_to_the_current_directory_and_percent_encoded() {
        let cwd = Path::new("/work/repo");
        let at = |file: &str| artifact_location(file, Some(cwd));
        assert_eq!(
            at("testdata/my compositions/ä.yaml"),
            Some(
                json!({"uri": "testdata/my%20compositions/%C3%A4.yaml", "uriBaseId": "%SRCROOT%"})
            )
        );
        assert_eq!(
            at("./a/../b:c.yaml"),
            Some(json!({"uri": "a/../b%3Ac.yaml", "uriBaseId": "%SRCROOT%"}))
        );
        assert_eq!(
            at("/work/repo/x/y.yaml"),
            Some(json!({"uri": "x/y.yaml", "uriBaseId": "%SRCROOT%"}))
        );
        assert_eq!(
            at("/tmp/y#1.yaml"),
            Some(json!({"uri": "file:///tmp/y%231.yaml"}))
        );
        assert_eq!(at("<stdin>"), None);
        assert_eq!(directory_uri(cwd), "file:///work/repo/");
        assert_eq!(directory_uri(Path::new("/")), "file:///");
    }

    #[test]
    fn one_rule_per_kind_and_results_point_at_them() {
        let missing = Finding::new(
            Stage::Crds,
            FieldError::not_found("spec.resources[0].base", "Bucket", "no CRD"),
        );
        let typo = Finding::new(
            Stage::Schema,
            FieldError::invalid("spec.resources[0].patches[0].toFieldPath", "spec.x", "no x"),
        );
        let file = validated(
            Origin::File("a.yaml".into()),
            vec![missing.clone(), typo.clone(), typo],
            vec![Some((3, 5)), Some((9, 11)), None],
        );
        let cluster = validated(
            Origin::Cluster {
                resource_version: Some("42".into()),
            },
            vec![missing],
            vec![None],
        );
        let log = log(&[file, cluster], &[], Some(Path::new("/r")));
        let run = &log["runs"][0];
        let ids: Vec<&Value> = run["tool"]["driver"]["rules"]
            .as_array()
            .map(|r| r.iter().map(|r| &r["id"]).collect())
            .unwrap_or_default();
        assert_eq!(ids, [&json!("crds/NotFound"), &json!("schema/Invalid")]);
        let results = run["results"].as_array().cloned().unwrap_or_default();
        let summary: Vec<_> = results
            .iter()
            .map(|r| {
                (
                    r["ruleId"].clone(),
                    r["ruleIndex"].clone(),
                    r["level"].clone(),
                    r["locations"][0]["physicalLocation"].clone(),
                    r["locations"][0]["logicalLocations"][0]["fullyQualifiedName"].clone(),
                )
            })
            .collect();
        let physical = |line: u32, column: u32| {
            json!({"artifactLocation": {"uri": "a.yaml", "uriBaseId": "%SRCROOT%"},
                   "region": {"startLine": line, "startColumn": column}})
        };
        assert_eq!(
            summary,
            [
                (
                    json!("crds/NotFound"),
                    json!(0),
                    json!("warning"),
                    physical(3, 5),
                    json!("Composition/xnets.example.org/spec.resources[0].base")
                ),
                (
                    json!("schema/Invalid"),
                    json!(1),
                    json!("error"),
                    physical(9, 11),
                    json!("Composition/xnets.example.org/spec.resources[0].patches[0].toFieldPath")
                ),
                (
                    json!("schema/Invalid"),
                    json!(1),
                    json!("error"),
                    json!({"artifactLocation": {"uri": "a.yaml", "uriBaseId": "%SRCROOT%"}}),
                    json!("Composition/xnets.example.org/spec.resources[0].patches[0].toFieldPath")
                ),
                // From the cluster: no physical location.
                (
                    json!("crds/NotFound"),
                    json!(0),
                    json!("warning"),
                    Value::Null,
                    json!("Composition/xnets.example.org/spec.resources[0].base")
                ),
            ]
        );
        assert_eq!(
            results[1]["message"]["text"],
            "spec.resources[0].patches[0].toFieldPath: Invalid value: \"spec.x\": no x"
        );
        assert_eq!(results[3]["properties"]["resourceVersion"], "42");
        assert_eq!(results[3]["properties"]["verdict"], "allowed");
        assert_eq!(results[1]["properties"]["verdict"], "denied");
        assert_eq!(run["invocations"], json!([{"executionSuccessful": true}]));
        assert_eq!(
            run["originalUriBaseIds"],
            json!({"%SRCROOT%": {"uri": "file:///r/"}})
        );
    }

    #[test]
    fn input_errors_are_notifications_and_fail_the_execution() {
        let syntax = DocumentError::Syntax {
            file: "bad.yaml".into(),
            line: 3,
            column: 7,
            message: "mapping values are not allowed in this context".into(),
            snippet: String::new(),
        };
        let listed = DocumentError::Invalid {
            file: "a.yaml, b.yaml".into(),
            message: "no Function found".into(),
        };
        let notices: Vec<Notice> = [&syntax, &listed].into_iter().map(Notice::from).collect();
        let log = log(&[], &notices, None);
        assert_eq!(
            log["runs"][0]["invocations"],
            json!([{"executionSuccessful": false, "toolExecutionNotifications": [
                {"level": "error",
                 "message": {"text": "bad.yaml:3:7: mapping values are not allowed in this context"},
                 "locations": [{"physicalLocation": {
                     "artifactLocation": {"uri": "bad.yaml", "uriBaseId": "%SRCROOT%"},
                     "region": {"startLine": 3, "startColumn": 7}}}]},
                {"level": "error", "message": {"text": "a.yaml, b.yaml: no Function found"}},
            ]}])
        );
        assert_eq!(log["runs"][0]["results"], json!([]));
        assert!(log["runs"][0].get("originalUriBaseIds").is_none());
    }
}
