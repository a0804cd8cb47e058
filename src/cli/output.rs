//! Printing validation results of `validate` and `audit`: text for people, JSON for tools
//! (SARIF is [`super::sarif`]'s).

use std::io::{self, Write};

use serde_json::{Value, json};

use super::{Origin, Validated};
use crate::findings::Severity;
use crate::schema::CompositionApi;
use crate::validate::Report;

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
        write_findings(out, r)?;
        if !r.report.verdict.allowed {
            denied += 1;
        }
        writeln!(out, "{}: {}", r.place(None), composition_line(&r.report))?;
    }
    writeln!(
        out,
        "{} validated against {} and {api}: {} allowed, {denied} denied",
        count(results.len(), "Composition"),
        count(schema_count, "schema"),
        results.len() - denied,
    )
}

/// One line per finding of `r`: `<place>: <severity>: <field>: <message>`.
fn write_findings(out: &mut impl Write, r: &Validated) -> io::Result<()> {
    for (f, position) in r.report.findings.iter().zip(&r.positions) {
        let at = r.place(*position);
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
    Ok(())
}

/// `Composition "<name>" (mode <mode>): <verdict>: <n> errors, <n> warnings`.
fn composition_line(report: &Report) -> String {
    let verdict = match (report.verdict.code, report.verdict.reason()) {
        (Some(code), Some(reason)) => format!("denied ({code} {reason})"),
        _ => "allowed".to_string(),
    };
    format!(
        "Composition {} (mode {}): {verdict}: {}, {}",
        crate::findings::go_quote(&report.name),
        report.mode,
        count(report.count(Severity::Error), "error"),
        count(report.count(Severity::Warning), "warning"),
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
/// `{"compositionApi","compositions":[{"file","name","mode","allowed","code","findings":[{"severity","stage","type","field","message","line","column"}]}]}`.
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
    json!({
        "file": r.file(),
        "name": r.report.name,
        "mode": r.report.mode.name(),
        "allowed": r.report.verdict.allowed,
        "code": r.report.verdict.code,
        "findings": findings_json(r),
    })
}

/// The findings of `r`, each with its `line` and `column` in its file (`null` when unknown),
/// or without them from the cluster.
fn findings_json(r: &Validated) -> Vec<Value> {
    r.report
        .findings
        .iter()
        .zip(&r.positions)
        .map(|(f, position)| {
            let mut v = finding_json(f);
            if r.file().is_some() {
                v["line"] = json!(position.map(|(line, _)| line));
                v["column"] = json!(position.map(|(_, column)| column));
            }
            v
        })
        .collect()
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

/// What an audit ran against: the cluster at its URL, or files.
#[derive(Debug, Clone)]
pub enum AuditSource {
    /// The API server at this URL.
    Cluster(String),
    /// Files, with so many schemas and the Composition API chosen for them.
    Files {
        /// Kinds in the catalog.
        schemas: usize,
        /// The Composition API.
        api: CompositionApi,
    },
}

/// An audit's totals.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AuditSummary {
    /// Compositions audited.
    pub compositions: usize,
    /// Of them, denied.
    pub denied: usize,
    /// Error findings, in all.
    pub errors: usize,
    /// Warning findings, in all.
    pub warnings: usize,
    /// Compositions with at least one finding.
    pub with_findings: usize,
}

impl AuditSummary {
    /// Counts one more Composition.
    pub fn add(&mut self, report: &Report) {
        self.compositions += 1;
        self.denied += usize::from(!report.verdict.allowed);
        self.errors += report.count(Severity::Error);
        self.warnings += report.count(Severity::Warning);
        self.with_findings += usize::from(!report.findings.is_empty());
    }
}

/// An audit as text: per Composition its findings and its verdict line (`<file>: Composition
/// ...` for files, `Composition ...` for the cluster's), then the summary.
pub fn write_audit_text(
    out: &mut impl Write,
    results: &[Validated],
    source: &AuditSource,
) -> io::Result<()> {
    let mut summary = AuditSummary::default();
    for r in results {
        write_findings(out, r)?;
        match r.origin {
            Origin::File(_) => writeln!(out, "{}: {}", r.place(None), composition_line(&r.report))?,
            Origin::Cluster { .. } => writeln!(out, "{}", composition_line(&r.report))?,
        }
        summary.add(&r.report);
    }
    let against = match source {
        AuditSource::Cluster(server) => format!("the cluster at {server}"),
        AuditSource::Files { schemas, api } => {
            format!("files ({} and {api})", count(*schemas, "schema"))
        }
    };
    let findings = if summary.with_findings == 0 {
        "no findings".to_string()
    } else {
        format!(
            "{}, {} in {}",
            count(summary.errors, "error"),
            count(summary.warnings, "warning"),
            count(summary.with_findings, "Composition"),
        )
    };
    writeln!(
        out,
        "{} audited against {against}: {} allowed, {} denied; {findings}",
        count(summary.compositions, "Composition"),
        summary.compositions - summary.denied,
        summary.denied,
    )
}

/// An audit as one JSON object: `{"source","compositionApi","compositions":[{"name","file",
/// "resourceVersion","mode","allowed","code","errors","warnings","findings"}],"summary":
/// {"compositions","allowed","denied","errors","warnings","withFindings"}}`; `source` is the
/// API server's URL or `files`.
pub fn write_audit_json(
    out: &mut impl Write,
    results: &[Validated],
    source: &AuditSource,
) -> io::Result<()> {
    let mut summary = AuditSummary::default();
    let compositions: Vec<Value> = results
        .iter()
        .map(|r| {
            summary.add(&r.report);
            let resource_version = match &r.origin {
                Origin::Cluster { resource_version } => resource_version.as_deref(),
                Origin::File(_) => None,
            };
            json!({
                "name": r.report.name,
                "file": r.file(),
                "resourceVersion": resource_version,
                "mode": r.report.mode.name(),
                "allowed": r.report.verdict.allowed,
                "code": r.report.verdict.code,
                "errors": r.report.count(Severity::Error),
                "warnings": r.report.count(Severity::Warning),
                "findings": findings_json(r),
            })
        })
        .collect();
    let (source, api) = match source {
        AuditSource::Cluster(server) => (server.clone(), CLUSTER_API.to_string()),
        AuditSource::Files { api, .. } => ("files".to_string(), api.to_string()),
    };
    serde_json::to_writer_pretty(
        &mut *out,
        &json!({
            "source": source,
            "compositionApi": api,
            "compositions": compositions,
            "summary": {
                "compositions": summary.compositions,
                "allowed": summary.compositions - summary.denied,
                "denied": summary.denied,
                "errors": summary.errors,
                "warnings": summary.warnings,
                "withFindings": summary.with_findings,
            },
        }),
    )?;
    writeln!(out)
}

/// The Composition API of an audit of the cluster: Compositions as the API server stored
/// them (its Composition CRD's defaults applied, its refusals already made).
pub const CLUSTER_API: &str = "the API server's Composition API";
