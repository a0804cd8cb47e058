//! The `composition-webhook` command line.
//!
//! `composition-webhook validate [--crds PATH]... [--functions PATH]...
//! [--crossplane-version VERSION] [--mode warn|loose|strict] [--no-render]
//! [--output text|json|sarif] FILE_OR_DIR...` validates every Composition found in the inputs
//! against the CRDs and XRDs given with `--crds` and those found in the inputs themselves,
//! and against the Composition API of the Crossplane chosen (a Composition CRD among the
//! schemas decides over the flag); pipeline steps are recognised by the packages of the
//! Functions given with `--functions`, else by their Functions' names.
//! Exit status: 0 when every Composition is allowed, 1 when any is denied, 2 for usage or
//! input errors (unreadable file, YAML syntax error, no Composition found).
//!
//! `composition-webhook audit [FILE_OR_DIR]...` does the same per Composition with a summary
//! for a whole estate: the files', or without files every Composition of a cluster against
//! the cluster's schemas (`src/cli/audit.rs`).
//!
//! `composition-webhook crds [--out DIR]` prints (or writes) the Composition and
//! CompositeResourceDefinition CRDs generated from the model.

mod audit;
mod crds;
mod functions;
mod output;
mod render;
mod sarif;
mod serve;

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use serde_json::Value;

use crate::budget::{self, Budget, Limits};
use crate::checks::functions::WithFunctions;
use crate::document::{self, Document, DocumentError};
use crate::mode::Mode;
use crate::model::APIEXTENSIONS_GROUP;
use crate::schema::{Catalog, CompositionApi, CrossplaneVersion};
use crate::validate::{Options, Report, Validator};

/// Exit status: every Composition allowed.
pub const EXIT_ALLOWED: u8 = 0;
/// Exit status: at least one Composition denied.
pub const EXIT_DENIED: u8 = 1;
/// Exit status: usage or input error.
pub const EXIT_INPUT_ERROR: u8 = 2;

#[derive(Debug, Parser)]
#[command(
    name = "composition-webhook",
    version,
    about = "Validates Crossplane Compositions: as an admission webhook, or offline on files"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Validate Compositions in files against CRD, MRD and XRD files.
    Validate(ValidateArgs),
    /// Validate every Composition of a cluster against the cluster's schemas (or of files, as validate does) and report per Composition.
    Audit(audit::AuditArgs),
    /// Print the resources a Composition composes (YAML), rendered from a mock or given composite resource.
    Render(render::RenderArgs),
    /// Serve the validating admission webhook (HTTPS) with schemas from CRD, MRD and XRD files.
    Serve(Box<serve::ServeArgs>),
    /// Print the Composition and CompositeResourceDefinition CRDs generated from this tool's model (YAML), or write them to a directory.
    Crds(crds::CrdsArgs),
}

#[derive(Debug, clap::Args)]
struct ValidateArgs {
    #[command(flatten)]
    check: CheckArgs,

    /// Files or directories holding Compositions (CRDs, MRDs and XRDs among them are used as schemas); `-` reads standard input.
    #[arg(value_name = "FILE_OR_DIR", required = true)]
    inputs: Vec<PathBuf>,
}

/// The flags `validate` and `audit` share: where schemas, Functions and the Composition API
/// of files come from, how Compositions are judged, and how results are printed.
#[derive(Debug, clap::Args)]
struct CheckArgs {
    #[command(flatten)]
    schemas: CrdFiles,

    #[command(flatten)]
    functions: functions::FunctionFiles,

    #[command(flatten)]
    api: ApiArgs,

    /// Mode of Compositions without the crossplane.io/composition-schema-aware-validation-mode annotation.
    #[arg(long, value_enum, default_value_t = ModeArg::Loose, env = "COMPOSITION_WEBHOOK_MODE")]
    mode: ModeArg,

    /// Skip rendered-resource validation (rendering each composed resource from a mock composite resource and validating it against its CRD).
    #[arg(long, env = "COMPOSITION_WEBHOOK_NO_RENDER")]
    no_render: bool,

    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text, env = "COMPOSITION_WEBHOOK_OUTPUT")]
    output: OutputFormat,

    /// Memory one Composition may take while it is rendered and validated; past it the
    /// Composition gets a finding instead of a result (an error in strict mode, a warning
    /// in loose and warn).
    #[arg(long, value_name = "BYTES", default_value_t = budget::CLI_MEMORY_BYTES, value_parser = review_memory, env = "COMPOSITION_WEBHOOK_REVIEW_MEMORY_BYTES")]
    review_memory_bytes: usize,
}

impl CheckArgs {
    /// The budget of one Composition.
    fn budget(&self) -> Budget {
        Budget::new(Limits {
            memory_bytes: self.review_memory_bytes,
            ..Limits::DEFAULT
        })
    }
}

/// A flag's whole number, from `min` to `max`.
pub(super) fn count(min: usize, max: usize) -> impl Fn(&str) -> Result<usize, String> + Clone {
    move |s| {
        let n: usize = s
            .parse()
            .map_err(|_| format!("expected a whole number from {min} to {max}"))?;
        if !(min..=max).contains(&n) {
            return Err(format!("must be from {min} to {max}"));
        }
        Ok(n)
    }
}

/// `--review-memory-bytes`: from 4 MiB (the largest corpus Composition takes under 4 MiB) to
/// 64 GiB.
pub(super) fn review_memory(s: &str) -> Result<usize, String> {
    count(4 << 20, 64 << 30)(s)
}

/// `--crds PATH...`: where schemas come from, for `validate`, `render` and `serve`.
#[derive(Debug, clap::Args)]
struct CrdFiles {
    /// A CRD, ManagedResourceDefinition (MRD) or XRD file or directory (recursive; YAML, JSON, multi-document, List); repeat the flag for more. `serve` without it, and `audit` without files, take schemas from the cluster.
    #[arg(
        long = "crds",
        value_name = "PATH",
        env = "COMPOSITION_WEBHOOK_CRDS",
        value_delimiter = ','
    )]
    crds: Vec<PathBuf>,
}

/// `--crossplane-version`: whose Composition API applies to Compositions read from files.
#[derive(Debug, clap::Args)]
struct ApiArgs {
    /// The Crossplane whose Composition API (its Composition CRD: defaults, fields, modes) applies to the files: v2 (v2.3's: Pipeline mode only) or v1 (v1.17's: Resources mode too), or a minor or patch release from v1.14 to v2.3 (v2.1, 1.20.11) for that minor's (another minor: the nearest embedded one of its major, with a note). A Composition CRD (compositions.apiextensions.crossplane.io) among the schemas decides instead.
    #[arg(
        long,
        value_name = "VERSION",
        default_value = "v2",
        value_parser = |s: &str| s.parse::<CrossplaneVersion>().map_err(|e| e.to_string()),
        env = "COMPOSITION_WEBHOOK_CROSSPLANE_VERSION"
    )]
    crossplane_version: CrossplaneVersion,
}

impl ApiArgs {
    /// The Composition API: the CRD among the schemas, else the embedded one of the flag's
    /// version. A minor without one of its own is said in `notes` (with the one used).
    fn choose(&self, catalog: &Catalog, notes: &mut impl Write) -> CompositionApi {
        if let Some(given) = CompositionApi::given(catalog) {
            return given;
        }
        if let Some(note) = self.crossplane_version.stand_in() {
            let _ = writeln!(notes, "note: {note}");
        }
        CompositionApi::embedded(self.crossplane_version)
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ModeArg {
    Strict,
    Loose,
    Warn,
}

impl From<ModeArg> for Mode {
    fn from(m: ModeArg) -> Mode {
        match m {
            ModeArg::Strict => Mode::Strict,
            ModeArg::Loose => Mode::Loose,
            ModeArg::Warn => Mode::Warn,
        }
    }
}

/// How results are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// One line per finding (`file:line: severity: field: message`) and a summary.
    Text,
    /// One JSON object.
    Json,
    /// SARIF 2.1.0 (one run, a result per finding, file, line and column), for code scanning in CI.
    Sarif,
}

/// Where a validated Composition came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// Read from this file (as named on the command line, or `<stdin>`).
    File(String),
    /// Listed from the cluster, at this resourceVersion.
    Cluster {
        /// `metadata.resourceVersion`.
        resource_version: Option<String>,
    },
}

/// A validated Composition with where it came from.
#[derive(Debug)]
pub struct Validated {
    /// Its file, or the cluster.
    pub origin: Origin,
    /// The result.
    pub report: Report,
    /// The line and column of each finding in the file, in the order of `report.findings`
    /// (`None` from the cluster).
    pub positions: Vec<Option<(u32, u32)>>,
}

impl Validated {
    /// The file it was read from; `None` from the cluster.
    pub fn file(&self) -> Option<&str> {
        match &self.origin {
            Origin::File(file) => Some(file),
            Origin::Cluster { .. } => None,
        }
    }

    /// What a finding's line starts with: `file:line` (or `file`), or
    /// `composition/<name>` for a Composition of the cluster.
    pub fn place(&self, position: Option<(u32, u32)>) -> String {
        match (&self.origin, position) {
            (Origin::File(file), Some((line, _))) => format!("{file}:{line}"),
            (Origin::File(file), None) => file.clone(),
            (Origin::Cluster { .. }, _) => format!("composition/{}", self.report.name),
        }
    }
}

/// What validating files gave: the Compositions' results, the input errors, and what they
/// were validated against.
#[derive(Debug)]
struct FilesRun {
    results: Vec<Validated>,
    errors: Vec<DocumentError>,
    schema_count: usize,
    api: CompositionApi,
}

/// The command line's definition: its subcommands, flags and environment variables (the
/// manifest tests check deploy/ against it).
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    Cli::command()
}

/// Runs the binary: parses the arguments, runs the command, returns the exit status.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { EXIT_INPUT_ERROR } else { 0 });
        }
    };
    match cli.command {
        Command::Validate(args) => ExitCode::from(run_validate(&args)),
        Command::Audit(args) => ExitCode::from(audit::run(&args)),
        Command::Render(args) => ExitCode::from(render::run(&args)),
        Command::Serve(args) => ExitCode::from(serve::run(&args)),
        Command::Crds(args) => ExitCode::from(crds::run(&args)),
    }
}

fn run_validate(args: &ValidateArgs) -> u8 {
    let mut stderr = io::stderr().lock();
    let run = validate_files(&args.check, &args.inputs, &mut stderr);
    for e in &run.errors {
        let _ = writeln!(stderr, "error: {e}");
    }
    if run.results.is_empty() && run.errors.is_empty() {
        let message = no_composition_found(&args.inputs);
        let _ = writeln!(stderr, "error: {message}");
        // CI uploads the SARIF file whatever happened: it says why there are no results.
        if args.check.output == OutputFormat::Sarif {
            let notices = [sarif::Notice::message(message)];
            print(&mut stderr, |out| sarif::write(out, &[], &notices));
        }
        return EXIT_INPUT_ERROR;
    }
    let FilesRun {
        results,
        errors,
        schema_count,
        api,
    } = &run;
    let printed = print(&mut stderr, |out| match args.check.output {
        OutputFormat::Text => output::write_text(out, results, *schema_count, api),
        OutputFormat::Json => output::write_json(out, results, api),
        OutputFormat::Sarif => {
            let notices: Vec<_> = errors.iter().map(sarif::Notice::from).collect();
            sarif::write(out, results, &notices)
        }
    });
    if !printed {
        EXIT_INPUT_ERROR
    } else {
        exit_status(results, errors.is_empty())
    }
}

/// 2 on input errors, else 1 when a Composition is denied, else 0.
fn exit_status(results: &[Validated], inputs_ok: bool) -> u8 {
    if !inputs_ok {
        EXIT_INPUT_ERROR
    } else if results.iter().any(|r| !r.report.verdict.allowed) {
        EXIT_DENIED
    } else {
        EXIT_ALLOWED
    }
}

/// The input error of files without a single Composition.
fn no_composition_found(inputs: &[PathBuf]) -> String {
    format!(
        "no Composition ({COMPOSITION_API_VERSION}) found in {}",
        inputs
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// Writes to standard output with `write`; `false` (after saying why on `stderr`) when that
/// failed for another reason than a reader gone away (`| head`: nothing left to tell it).
fn print(
    stderr: &mut impl Write,
    write: impl FnOnce(&mut io::StdoutLock) -> io::Result<()>,
) -> bool {
    let mut stdout = io::stdout().lock();
    match write(&mut stdout).and_then(|()| stdout.flush()) {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => true,
        Err(e) => {
            let _ = writeln!(stderr, "error: writing output: {e}");
            false
        }
        Ok(()) => true,
    }
}

/// Reads the `inputs` and the schema files of `check`, and validates every Composition
/// found, as for files: what the API server would refuse included. Notes (Compositions of
/// other API versions skipped) go to `notes`.
fn validate_files(check: &CheckArgs, inputs: &[PathBuf], notes: &mut impl Write) -> FilesRun {
    let mut errors: Vec<DocumentError> = Vec::new();
    let schema_docs = load_all(&check.schemas.crds, &mut errors);
    let (functions, addresses) = check.functions.load_with_addresses(&mut errors);
    let calls = check.functions.calls(addresses, &mut errors);
    let input_docs = load_all(inputs, &mut errors);

    let catalog = build_catalog(schema_docs.iter().chain(&input_docs), &mut errors);
    let api = check.api.choose(&catalog, notes);

    let source = WithFunctions {
        schemas: &catalog,
        functions,
    };
    let validator = Validator::new(
        &source,
        Options {
            default_mode: check.mode.into(),
            as_api_server: true,
            rendered: !check.no_render,
            composition_api: api.clone(),
        },
    )
    .with_budget(check.budget());
    let validator = match &calls {
        Some(calls) => validator.with_calls(calls.calls()),
        None => validator,
    };
    let mut results = Vec::new();
    for document in &input_docs {
        for (prefix, value) in compositions_in(document, notes) {
            let mut report = validator.validate_value(value);
            let position =
                |field: &str| document.position_of(&crate::findings::join_path(&prefix, field));
            // People read findings top to bottom in their editor: by stage, then by line.
            report.findings.sort_by_key(|f| {
                (
                    f.stage,
                    position(&f.error.field).map_or(u32::MAX, |(line, _)| line),
                )
            });
            let positions = report
                .findings
                .iter()
                .map(|f| position(&f.error.field))
                .collect();
            results.push(Validated {
                origin: Origin::File(document.source.clone()),
                report,
                positions,
            });
        }
    }
    FilesRun {
        results,
        errors,
        schema_count: catalog.len(),
        api,
    }
}

/// A catalog of the CRDs, MRDs and XRDs among `docs`; documents that are not usable schemas or
/// not objects at all are reported in `errors` (other kinds are skipped silently).
fn build_catalog<'a>(
    docs: impl Iterator<Item = &'a Document> + Clone,
    errors: &mut Vec<DocumentError>,
) -> Catalog {
    let mut catalog = Catalog::new();
    for doc in docs.clone() {
        if !doc.value.is_object() {
            continue; // Reported below.
        }
        if let Err(e) = catalog.add_document(&doc.value, &doc.source) {
            // Point at the offending field of the document, and name the file once.
            let message = match &e {
                crate::schema::SchemaError::Document { what, error, .. } => {
                    format!("{what}: {error}")
                }
                other => other.to_string(),
            };
            errors.push(invalid_at(doc, doc.position_of(e.path()), message));
        }
    }
    for doc in docs {
        if !doc.value.is_object() {
            errors.push(invalid_at(
                doc,
                doc.position_of(""),
                format!(
                    "document {} is {}, not a Kubernetes object",
                    doc.index + 1,
                    match crate::schema::validation::json_type_name(&doc.value) {
                        t @ ("array" | "integer") => format!("an {t}"),
                        t => format!("a {t}"),
                    }
                ),
            ));
        }
    }
    catalog
}

/// An input error at `position` of a document, or naming only its file when the position is
/// not known.
fn invalid_at(doc: &Document, position: Option<(u32, u32)>, message: String) -> DocumentError {
    match position {
        Some((line, column)) if line > 0 => DocumentError::InvalidAt {
            file: doc.source.clone(),
            line,
            column,
            message,
        },
        _ => DocumentError::Invalid {
            file: doc.source.clone(),
            message,
        },
    }
}

/// `file:line` (or `file` when there is no line).
fn location(doc: &Document, line: Option<u32>) -> String {
    match line {
        Some(l) if l > 0 => format!("{}:{l}", doc.source),
        _ => doc.source.clone(),
    }
}

/// The Compositions of a document with the path prefix of each: the document itself, or
/// the items of a `List` (what `kubectl get compositions -o yaml` prints). Compositions of
/// another API version are skipped with a note.
fn compositions_in<'a>(doc: &'a Document, notes: &mut impl Write) -> Vec<(String, &'a Value)> {
    let mut found = Vec::new();
    let mut consider = |prefix: String, value: &'a Value| {
        if value.get("kind").and_then(Value::as_str) != Some("Composition") {
            return;
        }
        let api_version = value
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if api_version == COMPOSITION_API_VERSION {
            found.push((prefix, value));
        } else if api_version.starts_with(APIEXTENSIONS_GROUP) {
            let line = doc.line_of(&crate::findings::join_path(&prefix, "apiVersion"));
            let _ = writeln!(
                notes,
                "warning: {}: skipped a Composition of {api_version}: only {COMPOSITION_API_VERSION} is validated",
                location(doc, line)
            );
        }
    };
    match doc.value.get("items").and_then(Value::as_array) {
        Some(items) if is_list(&doc.value) => {
            for (i, item) in items.iter().enumerate() {
                consider(format!("items[{i}]"), item);
            }
        }
        _ => consider(String::new(), &doc.value),
    }
    found
}

/// The apiVersion of the Compositions this tool validates.
pub const COMPOSITION_API_VERSION: &str = "apiextensions.crossplane.io/v1";

/// Whether a value is a Kubernetes `List` (`v1/List`, or `<Kind>List`) with items.
fn is_list(value: &Value) -> bool {
    value
        .get("kind")
        .and_then(Value::as_str)
        .is_some_and(|k| k.ends_with("List"))
        && value.get("items").is_some_and(Value::is_array)
}

/// Loads every document of every path (files, directories, `-` for stdin), collecting
/// errors instead of stopping at the first.
fn load_all(paths: &[PathBuf], errors: &mut Vec<DocumentError>) -> Vec<Document> {
    let mut docs = Vec::new();
    for path in paths {
        if path == Path::new("-") {
            match document::load_reader(document::STDIN_NAME, io::stdin().lock()) {
                Ok(d) => docs.extend(d),
                Err(e) => errors.push(e),
            }
            continue;
        }
        let files = match document::collect_files(path) {
            Ok(files) => files,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        for file in files {
            match document::load_path(&file) {
                Ok(d) => docs.extend(d),
                Err(e) => errors.push(e),
            }
        }
    }
    docs
}
