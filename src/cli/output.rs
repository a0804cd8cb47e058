//! Printing validation results: text for people, JSON for tools.

use std::io::{self, Write};

use serde_json::{Value, json};

use super::Validated;
use crate::findings::Severity;
use crate::schema::CompositionApi;

/// One line per finding (`file:line: severity: field: message`), a line per Composition,
/// then a summary naming the schemas and the Composition API they were validated against.
pub fn write_text(
    out: &mut impl Write,
    results: &[Validated],
    schema_count: usize,
    api: &CompositionApi,
) -> io::Result<()> {
    let mut denied = 0;
    for r in results {
        for (f, line) in r.report.findings.iter().zip(&r.lines) {
            let at = match line {
                Some(l) => format!("{}:{l}", r.file),
                None => r.file.clone(),
            };
            if f.error.field.is_empty() {
                writeln!(out, "{at}: {}: {}", f.severity.name(), f.error.body())?;
            } else {
                writeln!(
                    out,
                    "{at}: {}: {}: {}",
                    f.severity.name(),
                    f.error.field,
                    f.error.body()
                )?;
            }
        }
        let report = &r.report;
        let verdict = match (report.verdict.code, report.verdict.reason()) {
            (Some(code), Some(reason)) => {
                denied += 1;
                format!("denied ({code} {reason})")
            }
            _ => "allowed".to_string(),
        };
        writeln!(
            out,
            "{}: Composition {} (mode {}): {verdict}: {}, {}",
            r.file,
            crate::findings::go_quote(&report.name),
            report.mode,
            count(report.count(Severity::Error), "error"),
            count(report.count(Severity::Warning), "warning"),
        )?;
    }
    writeln!(
        out,
        "{} validated against {} and {api}: {} allowed, {denied} denied",
        count(results.len(), "Composition"),
        count(schema_count, "schema"),
        results.len() - denied,
    )
}

fn count(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// The results as one JSON object:
/// `{"compositionApi","compositions":[{"file","name","mode","allowed","findings":[{"severity","stage","type","field","message","line"}]}]}`.
pub fn write_json(
    out: &mut impl Write,
    results: &[Validated],
    api: &CompositionApi,
) -> io::Result<()> {
    let compositions: Vec<Value> = results.iter().map(composition_json).collect();
    serde_json::to_writer_pretty(
        &mut *out,
        &json!({ "compositionApi": api.to_string(), "compositions": compositions }),
    )?;
    writeln!(out)
}

fn composition_json(r: &Validated) -> Value {
    let findings: Vec<Value> = r
        .report
        .findings
        .iter()
        .zip(&r.lines)
        .map(|(f, line)| {
            let mut v = finding_json(f);
            v["line"] = json!(line);
            v
        })
        .collect();
    json!({
        "file": r.file,
        "name": r.report.name,
        "mode": r.report.mode.name(),
        "allowed": r.report.verdict.allowed,
        "findings": findings,
    })
}

/// One finding as JSON: `{"severity","stage","type","field","message"}`.
pub fn finding_json(f: &crate::findings::Finding) -> Value {
    json!({
        "severity": f.severity.name(),
        "stage": f.stage.name(),
        "type": f.error.error_type.name(),
        "field": f.error.field,
        "message": f.message(),
    })
}
