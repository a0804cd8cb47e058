//! `composition-webhook render COMPOSITION [--xr FILE] [--crds PATH]...
//! [--functions PATH]...`: prints what a Composition composes, as YAML documents: the
//! composite resource (the mock one built from its schema, or the one given with `--xr`),
//! then every composed resource as Crossplane's runtime renders it. A resource the runtime
//! would not send (a patch from the XR failed, or a `policy.fromFieldPath: Required` source
//! is missing) is printed commented out, with why. Each rendered resource is also validated
//! as the API server would (its metadata always, the rest with its CRD); the findings go to
//! standard error. `--output json` prints all of it as one JSON object instead.

use std::io::{self, Write};
use std::path::PathBuf;

use serde_json::{Value, json};

use super::functions::FunctionFiles;
use super::{
    ApiArgs, CrdFiles, EXIT_ALLOWED, EXIT_DENIED, EXIT_INPUT_ERROR, build_catalog, compositions_in,
    load_all,
};
use crate::checks::functions::WithFunctions;
use crate::checks::patch_and_transform::read_steps;
use crate::checks::rendered::{self, Composite};
use crate::checks::schema_aware::lookup::SchemaSource;
use crate::document::DocumentError;
use crate::findings::Severity;
use crate::model::Composition;
use crate::render::Rendered;
use crate::render::function_steps::StepOutcome;
use crate::schema::split_api_version;

/// Arguments of `render`.
#[derive(Debug, clap::Args)]
pub struct RenderArgs {
    /// The file holding the Composition (the first one in it is rendered).
    #[arg(value_name = "COMPOSITION")]
    composition: PathBuf,
    /// A composite resource to render from, instead of the mock one built from its schema.
    #[arg(long, value_name = "FILE")]
    xr: Option<PathBuf>,
    #[command(flatten)]
    schemas: CrdFiles,
    #[command(flatten)]
    functions: FunctionFiles,
    #[command(flatten)]
    api: ApiArgs,
    /// `yaml` (documents on standard output, findings on standard error) or `json` (one
    /// object with the composite resource, the composed resources and the findings).
    #[arg(long, value_enum, default_value_t = RenderOutput::Yaml, env = "COMPOSITION_WEBHOOK_RENDER_OUTPUT")]
    output: RenderOutput,
    /// Also print what each function step that ran answered (its desired resources, composite resource and context, its results), before the composed resources.
    #[arg(long)]
    steps: bool,
}

/// How `render` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RenderOutput {
    /// YAML documents, findings on standard error.
    Yaml,
    /// One JSON object: `{"composite","resources":[{"template","name","sent","notSent","composedBy","object"}],"functions":[{"at","step","function","address","outcome","answer"}],"findings"}`.
    Json,
}

/// Runs `render`: 0 when every rendered resource is valid (or not checked), 1 when one is
/// not, 2 for input errors.
pub fn run(args: &RenderArgs) -> u8 {
    let mut stderr = io::stderr().lock();
    let mut errors: Vec<DocumentError> = Vec::new();
    let schema_docs = load_all(&args.schemas.crds, &mut errors);
    let (functions, addresses) = args.functions.load_with_addresses(&mut errors);
    let calls = args.functions.calls(addresses, &mut errors);
    let inputs = load_all(std::slice::from_ref(&args.composition), &mut errors);
    let xr_docs = args
        .xr
        .as_ref()
        .map(|p| load_all(std::slice::from_ref(p), &mut errors))
        .unwrap_or_default();
    let catalog = build_catalog(schema_docs.iter().chain(&inputs), &mut errors);
    for e in &errors {
        let _ = writeln!(stderr, "error: {e}");
    }
    if !errors.is_empty() {
        return EXIT_INPUT_ERROR;
    }
    let Some(value) = inputs
        .iter()
        .flat_map(|d| compositions_in(d, &mut io::sink()))
        .map(|(_, v)| v)
        .next()
    else {
        let _ = writeln!(
            stderr,
            "error: no Composition found in {}",
            args.composition.display()
        );
        return EXIT_INPUT_ERROR;
    };
    let api = args.api.choose(&catalog, &mut stderr);
    let runtime = crate::validate::runtime_of(&api);
    let mut composition = match Composition::from_value(value, &api) {
        Ok(c) => c,
        Err(e) => {
            let _ = writeln!(
                stderr,
                "error: {}: {}: {}",
                args.composition.display(),
                e.field,
                e.message
            );
            return EXIT_INPUT_ERROR;
        }
    };
    // Crossplane renders a Composition only for XRs of its compositeTypeRef.
    if let Some(doc) = xr_docs.first() {
        let text = |key: &str| {
            doc.value
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
        };
        let t = &composition.spec.composite_type_ref;
        if (text("apiVersion"), text("kind")) != (t.api_version.as_str(), t.kind.as_str()) {
            let _ = writeln!(
                stderr,
                "error: {}: the composite resource is {:?} kind {:?}, but Composition {:?} composes {:?} kind {:?} (spec.compositeTypeRef): Crossplane never renders it for this XR",
                doc.source,
                text("apiVersion"),
                text("kind"),
                composition.metadata.name,
                t.api_version,
                t.kind
            );
            return EXIT_INPUT_ERROR;
        }
    }
    let (steps, _) = read_steps(&mut composition);
    let xr_schema = {
        let t = &composition.spec.composite_type_ref;
        split_api_version(&t.api_version)
            .and_then(|(group, version)| catalog.resolve(group, &t.kind, version).ok())
            .and_then(|info| info.schema)
    };
    let composite = match xr_docs.first() {
        Some(doc) => Composite::Real(&doc.value),
        None => Composite::Mock(xr_schema.as_deref()),
    };
    let xr = rendered::composite_value(&composition, &steps, composite);
    let source = WithFunctions {
        schemas: &catalog,
        functions,
    };
    let prepared = rendered::CallContext::new(
        &composition,
        &steps,
        composite,
        &source,
        calls.as_ref().map(|k| crate::render::Calls {
            keep_answers: args.steps,
            ..k.calls()
        }),
    );
    let call = prepared.calls();
    let observed = prepared.observed();
    let output = crate::render::render_calling(
        &composition,
        &steps,
        &xr,
        source.functions.as_deref(),
        runtime,
        call,
    );
    // Printed before the validation takes the rendered resources.
    let mut printed = match args.output {
        RenderOutput::Yaml => yaml(&output, xr_docs.is_empty()),
        RenderOutput::Json => String::new(),
    };
    let json_resources = (args.output == RenderOutput::Json).then(|| json_resources(&output));
    let json_functions: Vec<Value> = output
        .function_runs
        .iter()
        .map(|run| {
            let outcome = match &run.outcome {
                StepOutcome::Answered { calls, .. } => json!({"answered": {"calls": calls}}),
                StepOutcome::Failed(f) => json!({"failed": f.message}),
                StepOutcome::Unsettled => json!("unsettled"),
            };
            json!({
                "at": run.at.as_str(),
                "step": run.step,
                "function": run.function,
                "address": run.address,
                "outcome": outcome,
                "answer": run.answer.as_ref().map(|a| answer_json(run, a)),
            })
        })
        .collect();
    let composite_xr = output.composite.clone();
    let mut findings = rendered::check_rendered(
        &composition,
        &steps,
        composite,
        &xr,
        output,
        &source,
        &[],
        runtime,
        observed,
    );
    crate::mode::apply_mode(crate::mode::Mode::Strict, &mut findings);
    match json_resources {
        None => {
            for f in &findings {
                let _ = writeln!(stderr, "{}: {}", f.severity.name(), f.message());
            }
        }
        Some(resources) => printed = json(composite_xr, resources, json_functions, &findings),
    }
    let text = printed;
    let mut stdout = io::stdout().lock();
    if let Err(e) = stdout.write_all(text.as_bytes())
        && e.kind() != io::ErrorKind::BrokenPipe
    {
        let _ = writeln!(stderr, "error: writing output: {e}");
        return EXIT_INPUT_ERROR;
    }
    if findings.iter().any(|f| f.severity == Severity::Error) {
        EXIT_DENIED
    } else {
        EXIT_ALLOWED
    }
}

/// The YAML documents: the composite resource, then each composed resource headed by its
/// template; one the runtime would not send is commented out.
fn yaml(output: &Rendered, mock: bool) -> String {
    let mut text = String::new();
    let what = if mock {
        "mock composite resource"
    } else {
        "composite resource"
    };
    push_document(
        &mut text,
        &format!("# The {what}"),
        &output.composite,
        false,
    );
    for run in &output.function_runs {
        if let Some(answer) = &run.answer {
            push_document(
                &mut text,
                &format!(
                    "# {}: what function {:?} (step {:?}, at {}) answered",
                    run.at, run.function, run.step, run.address
                ),
                &answer_json(run, answer),
                false,
            );
        }
    }
    for r in &output.resources {
        let mut title = match (&r.name, &r.made_by) {
            (Some(n), Some(by)) => format!(
                "# {} ({n}), composed by function {:?} in step {:?}",
                r.at.as_str(),
                by.function,
                by.step
            ),
            (Some(n), None) => format!("# {} ({n})", r.at.as_str()),
            (None, _) => format!("# {}", r.at.as_str()),
        };
        let not_sent = r.not_sent.as_ref().filter(|n| !n.earlier_kept);
        if let Some(n) = &r.not_sent {
            title.push_str(&format!(": {}", n.describe()));
        }
        match &r.object {
            Some(o) => push_document(&mut text, &title, o, not_sent.is_some()),
            None => text.push_str(&format!("---\n{title}: not rendered (no base)\n")),
        }
    }
    text
}

/// One step's answer as `render --steps` prints it.
fn answer_json(
    run: &crate::render::FunctionRun,
    answer: &crate::render::function_steps::StepAnswer,
) -> Value {
    use crate::render::function_steps::ResultSeverity;
    let results: Vec<Value> = answer
        .results
        .iter()
        .map(|r| {
            json!({
                "severity": match r.severity {
                    ResultSeverity::Fatal => "Fatal",
                    ResultSeverity::Warning => "Warning",
                    ResultSeverity::Normal => "Normal",
                },
                "message": r.message,
                "reason": r.reason,
            })
        })
        .collect();
    json!({
        "step": run.step,
        "function": run.function,
        "address": run.address,
        "desired": {
            "composite": answer.desired_composite,
            "resources": answer.desired_resources,
        },
        "context": answer.context,
        "results": results,
    })
}

/// The composed resources as `render --output json` lists them.
fn json_resources(output: &Rendered) -> Vec<Value> {
    output
        .resources
        .iter()
        .map(|r| {
            let mut entry = json!({
                "template": r.at.as_str(),
                "name": r.name,
                "sent": r.not_sent.as_ref().is_none_or(|n| n.earlier_kept),
                "notSent": r.not_sent.as_ref().map(|n| n.describe()),
                "object": r.object,
            });
            // Only for what a function composed.
            if let (Some(by), Some(o)) = (&r.made_by, entry.as_object_mut()) {
                o.shift_insert(
                    4,
                    "composedBy".into(),
                    json!({"step": by.step, "function": by.function}),
                );
            }
            entry
        })
        .collect()
}

/// Everything as one JSON object.
fn json(
    composite: Value,
    resources: Vec<Value>,
    functions: Vec<Value>,
    findings: &[crate::findings::Finding],
) -> String {
    let findings: Vec<Value> = findings.iter().map(super::output::finding_json).collect();
    let mut text = serde_json::to_string_pretty(&json!({
        "composite": composite,
        "resources": resources,
        "functions": functions,
        "findings": findings,
    }))
    .unwrap_or_default();
    text.push('\n');
    text
}

fn push_document(out: &mut String, title: &str, value: &Value, commented: bool) {
    out.push_str("---\n");
    out.push_str(title);
    out.push('\n');
    let yaml = match serde_saphyr::to_string(value) {
        Ok(yaml) => yaml,
        Err(e) => format!("# cannot print: {e}"),
    };
    for line in yaml.lines() {
        if commented {
            out.push_str("# ");
        }
        out.push_str(line);
        out.push('\n');
    }
}
