//! The README and the `docs/` pages kept true: links and anchors resolve, the README stays a
//! front door, its two commands are the ones CI runs, every flag, environment variable and
//! metric documented is the program's (and every one of the program's is documented), the
//! output shown is the output the program gives, and the files named exist.
//!
//! Cheap on purpose: `--help` of each subcommand, three `validate` runs on small files, two
//! admission decisions in-process, no server.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use composition_webhook::document;
use composition_webhook::schema::Catalog;
use composition_webhook::server::admission;
use composition_webhook::server::metrics::Metrics;
use composition_webhook::server::review::Request;
use serde_json::{Value, json};

/// The most the README may weigh: a page a new user reads.
const README_MAX_BYTES: usize = 12 * 1024;

const SUBCOMMANDS: [&str; 5] = ["validate", "audit", "render", "crds", "serve"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
}

/// README.md and every `docs/*.md` page, as (path relative to the root, text).
fn pages() -> Vec<(String, String)> {
    let mut out = vec![("README.md".to_string(), read("README.md"))];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .map(|e| e.expect("docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    for p in docs {
        let rel = p
            .strip_prefix(root())
            .expect("under the root")
            .to_string_lossy()
            .into_owned();
        out.push((rel.clone(), read(&rel)));
    }
    out
}

/// A page's text, its lines inside fenced code blocks blanked (line numbers kept).
fn prose(text: &str) -> String {
    let mut fenced = false;
    let mut out = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

/// The fenced code blocks of a page: (info string, lines).
fn code_blocks(text: &str) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    let mut current: Option<(String, Vec<String>)> = None;
    for line in text.lines() {
        let t = line.trim_start();
        match (&mut current, t.strip_prefix("```")) {
            (None, Some(info)) => current = Some((info.trim().to_string(), Vec::new())),
            (Some(_), Some(_)) => out.extend(current.take()),
            (Some((_, lines)), None) => lines.push(line.to_string()),
            (None, None) => {}
        }
    }
    out
}

/// The inline code spans of a page's prose (paired within each paragraph, as Markdown does).
fn code_spans(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for paragraph in prose(text).split("\n\n") {
        let mut parts = paragraph.split('`');
        parts.next();
        while let (Some(span), Some(_)) = (parts.next(), parts.next()) {
            out.push(span.split_whitespace().collect::<Vec<_>>().join(" "));
        }
    }
    out
}

/// `(level, title)` of each ATX heading outside code blocks.
fn headings(text: &str) -> Vec<(usize, String)> {
    prose(text)
        .lines()
        .filter_map(|l| {
            let level = l.chars().take_while(|&c| c == '#').count();
            let title = l[level..].strip_prefix(' ')?;
            (1..=6)
                .contains(&level)
                .then(|| (level, title.trim().to_string()))
        })
        .collect()
}

/// GitHub's anchor for a heading: link text kept, lowercase, punctuation dropped, spaces to
/// hyphens.
fn slug(title: &str) -> String {
    let mut text = String::new();
    let mut rest = title;
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find("](").map(|c| open + c) else {
            break;
        };
        let Some(end) = rest[close..].find(')').map(|e| close + e) else {
            break;
        };
        text.push_str(&rest[..open]);
        text.push_str(&rest[open + 1..close]);
        rest = &rest[end + 1..];
    }
    text.push_str(rest);
    text.to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Every anchor of a page, duplicates numbered as GitHub numbers them.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for (_, title) in headings(text) {
        let s = slug(&title);
        let n = seen.entry(s.clone()).or_insert(0);
        out.insert(if *n == 0 {
            s.clone()
        } else {
            format!("{s}-{n}")
        });
        *n += 1;
    }
    out
}

/// The text under a heading (`## Flags`), up to the next heading of the same or a higher
/// level.
fn section<'a>(text: &'a str, title: &str) -> &'a str {
    let mut start = None;
    let mut level = 0;
    let mut offset = 0;
    let mut fenced = false;
    for line in text.split_inclusive('\n') {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        let hashes = line.chars().take_while(|&c| c == '#').count();
        let heading = !fenced && (1..=6).contains(&hashes) && line[hashes..].starts_with(' ');
        match start {
            None if heading && line.trim_end() == title => {
                start = Some(offset);
                level = hashes;
            }
            Some(s) if heading && hashes <= level => return &text[s..offset],
            _ => {}
        }
        offset += line.len();
    }
    let s = start.unwrap_or_else(|| panic!("no heading {title:?}"));
    &text[s..]
}

/// A page's prose with code blocks and code spans blanked, line breaks kept (backticks pair
/// within a paragraph, as Markdown pairs them).
fn without_code(text: &str) -> String {
    prose(text)
        .split("\n\n")
        .map(|paragraph| {
            let mut code = false;
            paragraph
                .chars()
                .map(|c| {
                    if c == '`' {
                        code = !code;
                        ' '
                    } else if code && c != '\n' {
                        ' '
                    } else {
                        c
                    }
                })
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// The relative links of a page's prose, as (line, target).
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in without_code(text).lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            let target = &rest[at + 2..];
            let end = target.find(')').unwrap_or(target.len());
            let target = &target[..end];
            if !target.contains("://") && !target.starts_with("mailto:") {
                out.push((i + 1, target.to_string()));
            }
            rest = &rest[at + 2 + end..];
        }
    }
    out
}

/// The `--flag` names in a piece of text (`[--crds`, `--out=DIR`, `--mode strict|loose`).
fn flags_in(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("--") {
        let before = rest[..at].chars().next_back();
        let name: String = rest[at + 2..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-')
            .collect();
        if !before.is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '_')
            && name.starts_with(|c: char| c.is_ascii_lowercase())
        {
            out.insert(name.clone());
        }
        rest = &rest[at + 2 + name.len()..];
    }
    out
}

/// The `COMPOSITION_WEBHOOK_*` names in a piece of text; `..._X` stands for
/// `COMPOSITION_WEBHOOK_X`, as the flags table abbreviates them.
fn env_vars_in(text: &str) -> BTreeSet<String> {
    const PREFIX: &str = "COMPOSITION_WEBHOOK_";
    let text = text.replace("..._", PREFIX);
    let mut out = BTreeSet::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find(PREFIX) {
        let name: String = rest[at + PREFIX.len()..]
            .chars()
            .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        let name = name.trim_end_matches('_');
        if !name.is_empty() {
            out.insert(format!("{PREFIX}{name}"));
        }
        rest = &rest[at + PREFIX.len() + name.len()..];
    }
    out
}

// ---------------------------------------------------------------------------------------
// The binary's own word: `--help`

#[derive(Debug, Default, Clone)]
struct HelpFlag {
    env: Option<String>,
    default: Option<String>,
}

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_composition-webhook"))
        .current_dir(root())
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run composition-webhook {args:?}: {e}"))
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The flags of a subcommand as `--help` lists them (`--help` itself left out), with their
/// environment variable and default.
fn help(sub: &str) -> BTreeMap<String, HelpFlag> {
    let o = run(&[sub, "--help"]);
    assert_eq!(o.status.code(), Some(0), "{sub} --help");
    let mut out: BTreeMap<String, HelpFlag> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in stdout(&o).lines() {
        let t = line.trim_start();
        let indent = line.len() - t.len();
        let t = t.strip_prefix("-h, ").unwrap_or(t);
        if indent <= 6 && t.starts_with("--") {
            let name = flags_in(t.split_whitespace().next().unwrap_or(""));
            current = name.into_iter().next();
            if let Some(name) = &current {
                out.insert(name.clone(), HelpFlag::default());
            }
        } else if let (Some(name), Some(env)) = (&current, t.strip_prefix("[env: ")) {
            let env = env.split(['=', ']']).next().unwrap_or("").to_string();
            out.get_mut(name).expect("current flag").env = Some(env);
        } else if let (Some(name), Some(default)) = (&current, t.strip_prefix("[default: ")) {
            let default = default.strip_suffix(']').unwrap_or(default).to_string();
            out.get_mut(name).expect("current flag").default = Some(default);
        }
    }
    out.remove("help");
    out.remove("version");
    assert!(
        !out.is_empty() || sub == "crds",
        "{sub} --help lists no flags"
    );
    out
}

fn all_help() -> BTreeMap<&'static str, BTreeMap<String, HelpFlag>> {
    SUBCOMMANDS.iter().map(|&s| (s, help(s))).collect()
}

// ---------------------------------------------------------------------------------------
// The README is a front door

#[test]
fn readme_is_at_most_12_kib() {
    let size = read("README.md").len();
    assert!(
        size <= README_MAX_BYTES,
        "README.md is {size} bytes, more than {README_MAX_BYTES}: move detail to a docs/ page"
    );
}

#[test]
fn readme_links_every_docs_page() {
    let readme = read("README.md");
    let linked: BTreeSet<String> = links(&readme).into_iter().map(|(_, t)| t).collect();
    for (page, _) in pages().into_iter().skip(1) {
        assert!(
            linked.contains(&page),
            "README.md does not link {page} (its Documentation table should)"
        );
    }
}

#[test]
fn links_point_to_existing_files_and_headings() {
    let mut checked = 0;
    let mut broken = Vec::new();
    let extra = ["deploy/README.md", "testdata/README.md"];
    let all: Vec<(String, String)> = pages()
        .into_iter()
        .chain(extra.iter().map(|p| (p.to_string(), read(p))))
        .collect();
    for (page, text) in &all {
        let dir = Path::new(page).parent().unwrap_or(Path::new(""));
        for (line, target) in links(text) {
            checked += 1;
            let (file, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let path = if file.is_empty() {
                root().join(page)
            } else {
                root().join(dir).join(file)
            };
            if !path.exists() {
                broken.push(format!("{page}:{line}: {target}: no such file"));
                continue;
            }
            if anchor.is_empty() {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            if !anchors(&text).contains(anchor) {
                broken.push(format!("{page}:{line}: {target}: no such heading"));
            }
        }
    }
    assert!(
        checked > 40,
        "only {checked} links found: is the parser broken?"
    );
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn slugs_are_githubs() {
    assert_eq!(
        slug("The contract, to the letter"),
        "the-contract-to-the-letter"
    );
    assert_eq!(slug("/debug/schemas"), "debugschemas");
    assert_eq!(slug("`render`: [the CLI](cli.md)"), "render-the-cli");
    assert_eq!(
        anchors("# A\n## B\n```\n# not a heading\n```\n## B\n"),
        BTreeSet::from(["a".into(), "b".into(), "b-1".into()])
    );
}

#[test]
fn the_two_commands_are_the_ones_ci_runs() {
    let readme = read("README.md");
    let block = code_blocks(section(&readme, "## The two commands"))
        .into_iter()
        .next()
        .expect("a code block under The two commands")
        .1;
    let commands: Vec<&str> = block
        .iter()
        .map(|l| l.trim())
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let [main_job, tests] = commands[..] else {
        panic!("The two commands are {commands:?}");
    };
    // CI runs formatting, lints and docs, then exactly the README's test command, last.
    let ci = read(".ci/run");
    let ci: Vec<&str> = ci
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    assert_eq!(ci.last(), Some(&tests), ".ci/run must end with {tests:?}");
    for step in ["cargo fmt", "cargo clippy", "cargo doc"] {
        assert!(
            ci.iter().any(|l| l.contains(step)),
            ".ci/run does not run {step}, which the README says it does"
        );
    }
    assert!(tests.starts_with("cargo test"), "{tests}");
    // The main job is the binary's `validate`, and does what the README says: exit 1, the
    // example allowed and the broken Compositions denied.
    let args = main_job
        .strip_prefix("cargo run --release -- ")
        .unwrap_or_else(|| panic!("the main job runs the binary: {main_job}"));
    let args: Vec<&str> = args.split_whitespace().collect();
    assert_eq!(args.first(), Some(&"validate"));
    let o = run(&args);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let out = stdout(&o);
    assert!(out.contains("(mode loose): allowed: 0 errors"), "{out}");
    assert!(out.contains("(mode loose): denied (422 Invalid)"), "{out}");
}

#[test]
fn validate_commands_in_the_readme_exit_as_it_says() {
    // The README's prose states each command's result; a change to either fails here.
    let readme = read("README.md")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let claims = [
        (
            "cargo run --release -- validate --crds testdata/v2 testdata/v2/bucket-composition.yaml testdata/patch-and-transform",
            "(exit 0, six warnings",
            0,
            6,
        ),
        (
            "cargo run --release -- validate --crossplane-version v1 --crds testdata/crds testdata/example testdata/invalid",
            "exits 1",
            1,
            0,
        ),
    ];
    for (command, words, code, warnings) in claims {
        assert!(
            readme.contains(command) && readme.contains(words),
            "the README no longer says {command:?} {words:?}: update this test with it"
        );
        let args: Vec<&str> = command.split_whitespace().skip(4).collect();
        let o = run(&args);
        assert_eq!(o.status.code(), Some(code), "{command}\n{}", stdout(&o));
        let warned = stdout(&o)
            .lines()
            .filter(|l| l.contains(": warning: "))
            .count();
        assert_eq!(warned, warnings, "{command}\n{}", stdout(&o));
    }
}

// ---------------------------------------------------------------------------------------
// What users see

/// Text blocks that show a `validate` run (`$ composition-webhook validate ...`): every line
/// shown is printed, in that order (`...` stands for lines left out).
#[test]
fn validate_output_shown_is_the_output() {
    let mut shown = 0;
    for (page, text) in pages() {
        for (_, lines) in code_blocks(&text) {
            let Some(command) = lines.first().and_then(|l| l.strip_prefix("$ ")) else {
                continue;
            };
            let args = command
                .strip_prefix("composition-webhook ")
                .or_else(|| command.strip_prefix("cargo run --release -- "));
            let Some(args) = args.filter(|a| a.starts_with("validate ")) else {
                continue;
            };
            shown += 1;
            let o = run(&args.split_whitespace().collect::<Vec<_>>());
            let out = stdout(&o);
            let mut printed = out.lines();
            for expected in lines[1..].iter().filter(|l| l.trim() != "...") {
                assert!(
                    printed.any(|l| l == expected),
                    "{page}: `{command}` does not print, or not in this order:\n{expected}\n\nit prints:\n{out}"
                );
            }
        }
    }
    assert!(shown >= 2, "only {shown} validate runs shown");
}

/// The schemas `deploy/local-test.sh` installs: the example's CRDs and XRD.
fn local_test_catalog() -> Catalog {
    let mut docs = Vec::new();
    for path in ["testdata/crds", "testdata/example/definition.yaml"] {
        for file in document::collect_files(&root().join(path)).expect("schema files") {
            docs.extend(document::load_path(&file).expect("schema file"));
        }
    }
    Catalog::from_documents(docs.iter().map(|d| (&d.value, d.source.as_str()))).expect("catalog")
}

/// What the webhook answers to a CREATE of `file`'s Composition, with `deploy/`'s settings.
fn admit(catalog: &Catalog, file: &str, default_mode: composition_webhook::mode::Mode) -> Value {
    let object = document::load_path(&root().join(file))
        .expect("Composition file")
        .remove(0)
        .value;
    let request: Request = serde_json::from_value(json!({
        "uid": "docs",
        "kind": {"group": "apiextensions.crossplane.io", "version": "v1", "kind": "Composition"},
        "name": object["metadata"]["name"],
        "operation": "CREATE",
        "object": object,
    }))
    .expect("request");
    let decision = admission::decide(
        request,
        catalog,
        default_mode,
        true,
        Duration::from_secs(10),
        |_, _| None,
    );
    let answer = decision.answer;
    json!({
        "allowed": answer.allowed,
        "warnings": answer.warnings,
        "status": answer.status.map(|s| json!({
            "code": s.code,
            "reason": s.reason,
            "message": s.message,
            "causes": s.details.map(|d| d.causes.iter()
                .map(|c| format!("* {}: {}", c.field, c.message))
                .collect::<Vec<_>>()).unwrap_or_default(),
        })),
    })
}

/// Text blocks that show `kubectl apply -f deploy/local-test/...` show the webhook's answer:
/// its causes as kubectl prints them, its warnings, and whether it was created.
#[test]
fn kubectl_output_shown_is_the_webhooks_answer() {
    use composition_webhook::mode::Mode;
    let catalog = local_test_catalog();
    let mut shown = 0;
    for (page, text) in pages() {
        for (_, lines) in code_blocks(&text) {
            let Some(file) = lines
                .first()
                .and_then(|l| l.strip_prefix("$ kubectl apply -f "))
                .filter(|f| f.starts_with("deploy/local-test/"))
            else {
                continue;
            };
            shown += 1;
            // deploy/ validates in loose mode by default.
            let answer = admit(&catalog, file, Mode::Loose);
            let causes: Vec<&str> = lines
                .iter()
                .filter(|l| l.starts_with("* "))
                .map(String::as_str)
                .collect();
            let warnings: Vec<&str> = lines
                .iter()
                .filter_map(|l| l.strip_prefix("Warning: "))
                .collect();
            assert_eq!(answer["warnings"], json!(warnings), "{page}: {file}");
            if causes.is_empty() {
                assert_eq!(answer["allowed"], true, "{page}: {file}: {answer:#}");
                assert!(
                    lines.iter().any(|l| l.ends_with(" created")),
                    "{page}: {file}"
                );
            } else {
                assert_eq!(answer["allowed"], false, "{page}: {file}");
                assert_eq!(answer["status"]["code"], 422, "{page}: {file}");
                assert_eq!(answer["status"]["causes"], json!(causes), "{page}: {file}");
                let object = document::load_path(&root().join(file))
                    .expect("file")
                    .remove(0);
                let name = object.value["metadata"]["name"].as_str().unwrap_or("");
                let heading = format!("The Composition \"{name}\" is invalid:");
                assert_eq!(lines.get(1), Some(&heading), "{page}: {file}");
            }
        }
    }
    assert!(shown >= 2, "only {shown} kubectl examples shown");

    // "In strict mode the same Composition is denied: ... cannot get the needed CRDs: [...]"
    let readme = read("README.md")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(readme.contains(
        "error when creating \"deploy/local-test/missing-schema.yaml\": admission webhook \"compositions.composition-webhook.crossplane.io\" denied the request: cannot get the needed CRDs: [...]"
    ));
    let strict = admit(
        &catalog,
        "deploy/local-test/missing-schema.yaml",
        Mode::Strict,
    );
    assert_eq!(strict["status"]["code"], 403, "{strict:#}");
    assert_eq!(strict["status"]["reason"], "Forbidden");
    let message = strict["status"]["message"].as_str().unwrap_or("");
    assert!(
        message.starts_with("cannot get the needed CRDs: ["),
        "{message}"
    );
}

// ---------------------------------------------------------------------------------------
// Flags and environment variables

/// `docs/cli.md`'s synopsis names every flag of `validate`, `audit`, `render` and `crds`, and
/// only those; each subcommand's section names each of its flags and environment variables.
#[test]
fn cli_page_documents_every_flag() {
    let help = all_help();
    let cli = read("docs/cli.md");
    let synopsis = code_blocks(&cli).into_iter().next().expect("a synopsis").1;
    for sub in ["validate", "audit", "render", "crds"] {
        let usage = synopsis
            .iter()
            .find(|l| l.starts_with(&format!("composition-webhook {sub} ")))
            .unwrap_or_else(|| panic!("docs/cli.md's synopsis has no line for {sub}"));
        let documented = flags_in(usage);
        let actual: BTreeSet<String> = help[sub].keys().cloned().collect();
        assert_eq!(documented, actual, "docs/cli.md's synopsis of {sub}");

        let text = section(&cli, &format!("## {sub}"));
        for (flag, h) in &help[sub] {
            assert!(
                text.contains(&format!("`--{flag}")),
                "docs/cli.md's {sub} section does not describe --{flag}"
            );
            if let Some(env) = &h.env {
                assert!(
                    text.contains(env.as_str()),
                    "docs/cli.md's {sub} section does not name {env} (--{flag})"
                );
            }
        }
    }
}

/// The cells of a table row (`\|` is a `|` inside a cell).
fn cells(row: &str) -> Vec<String> {
    row.replace("\\|", "\u{1}")
        .trim()
        .trim_matches('|')
        .split('|')
        .map(|c| c.trim().replace('\u{1}', "|"))
        .collect()
}

/// `docs/operations.md`'s flags table has a row for every flag of `serve` and only those,
/// with its environment variable and its default.
#[test]
fn serve_flags_table_is_serves_help() {
    flags_table_is_help("serve", "docs/operations.md", "## Flags", 20);
}

/// `docs/cli.md`'s `audit` flags table likewise.
#[test]
fn audit_flags_table_is_audits_help() {
    flags_table_is_help("audit", "docs/cli.md", "## audit", 9);
}

/// The flags table under `heading` of `page` has a row for every flag of `sub` and only
/// those (at least `min_rows`), with its environment variable and its default.
fn flags_table_is_help(sub: &str, page: &str, heading: &str, min_rows: usize) {
    let help = help(sub);
    let text = read(page);
    let table = section(&text, heading);
    let mut documented = BTreeSet::new();
    let mut rows = 0;
    for row in table.lines().filter(|l| l.starts_with("| `--")) {
        rows += 1;
        let cells = cells(row);
        let [first, default, _] = &cells[..] else {
            panic!("a flags row of three cells: {row}");
        };
        let flags = flags_in(first);
        let envs = env_vars_in(first);
        let default = default.as_str();
        let mut expected_envs = BTreeSet::new();
        for flag in &flags {
            let h = help
                .get(flag)
                .unwrap_or_else(|| panic!("{page} documents --{flag}, which {sub} does not have"));
            expected_envs.extend(h.env.clone());
            if let Some(d) = &h.default {
                assert_eq!(default.replace('`', ""), *d, "{page}'s default of --{flag}");
            }
        }
        assert_eq!(envs, expected_envs, "{page}'s variables of {first}");
        documented.extend(flags);
    }
    assert!(rows > min_rows, "only {rows} rows in {page}'s flags table");
    let actual: BTreeSet<String> = help.keys().cloned().collect();
    assert_eq!(
        documented, actual,
        "{page}'s flags table against {sub} --help"
    );
}

/// Every command shown (`composition-webhook <sub> ...`, `cargo run -- <sub> ...`) uses
/// flags its subcommand has, and every `COMPOSITION_WEBHOOK_*` variable named is one.
#[test]
fn commands_and_variables_shown_exist() {
    let help = all_help();
    let envs: BTreeSet<String> = help
        .values()
        .flat_map(|flags| flags.values().filter_map(|f| f.env.clone()))
        .collect();
    let mut commands = 0;
    for (page, text) in pages() {
        let mut snippets = code_spans(&text);
        for (_, lines) in code_blocks(&text) {
            snippets.push(lines.join("\n").replace("\\\n", " "));
        }
        for snippet in snippets.iter().flat_map(|s| s.lines()) {
            let tokens: Vec<&str> = snippet.split_whitespace().collect();
            for (i, token) in tokens.iter().enumerate() {
                // `composition-webhook <sub>`, `cargo run [--release] -- <sub>`; not
                // `kubectl -n composition-webhook ...`.
                let sub_at = match *token {
                    "composition-webhook" => i + 1,
                    "--" if tokens[..i].ends_with(&["cargo", "run"])
                        || tokens[..i].ends_with(&["cargo", "run", "--release"]) =>
                    {
                        i + 1
                    }
                    _ => continue,
                };
                let Some(flags) = tokens.get(sub_at).and_then(|sub| help.get(sub)) else {
                    continue;
                };
                commands += 1;
                let command: Vec<&str> = tokens[sub_at..]
                    .iter()
                    .take_while(|t| !t.starts_with(['|', '#', ';', '&', '>']))
                    .copied()
                    .collect();
                for flag in flags_in(&command.join(" ")) {
                    assert!(
                        flags.contains_key(&flag) || flag == "help",
                        "{page}: `{}` uses --{flag}, which {} does not have",
                        command.join(" "),
                        command[0]
                    );
                }
            }
        }
        for env in env_vars_in(&text) {
            assert!(
                envs.contains(&env),
                "{page} names {env}, which no subcommand reads"
            );
        }
    }
    assert!(commands > 8, "only {commands} commands found");
}

// ---------------------------------------------------------------------------------------
// Metrics

/// The metrics the server registers, as Prometheus names them: their type and labels, read
/// from the exposition once every metric has a sample.
fn registered_metrics() -> BTreeMap<String, (String, BTreeSet<String>)> {
    use composition_webhook::findings::{FieldError, Finding, Stage};
    use composition_webhook::server::metrics::{
        ApiCall, ApiCallLabels, ApiCallRecorder, Outcome, ReviewLabels,
    };
    let metrics = std::sync::Arc::new(Metrics::new());
    metrics.review(
        ReviewLabels {
            operation: "CREATE",
            mode: "loose",
            verdict: Outcome::Denied,
        },
        Duration::from_millis(3),
        &[Finding::new(
            Stage::Schema,
            FieldError::required("spec.x", ""),
        )],
    );
    metrics.in_flight().set(0);
    metrics.review_refused("in_flight");
    metrics.set_schema_kinds(1);
    metrics.set_schema_entries(&[("crd", "acked", 1)]);
    metrics.set_schema_sources(&[("crd", "listed", 1)]);
    metrics.certificate(Some(0));
    metrics.set_audit_findings("c", 1, 0);
    metrics.set_audit_queue(0);
    metrics.set_audit_leader(true);
    metrics.audit_validated("new");
    metrics.verdict_cache_lookup("hit");
    metrics.set_verdict_cache(1, 1);
    let (recorder, task) = ApiCallRecorder::new(metrics.clone());
    recorder.record(ApiCall {
        labels: ApiCallLabels {
            verb: "list",
            resource: "customresourcedefinitions",
        },
        duration: Duration::from_millis(4),
        error: Some("http_403".into()),
    });
    drop(recorder);
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
        .block_on(task);

    let text = metrics.encode();
    let mut out: BTreeMap<String, (String, BTreeSet<String>)> = BTreeMap::new();
    let mut kinds = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut parts = rest.split_whitespace();
            if let (Some(name), Some(kind)) = (parts.next(), parts.next()) {
                kinds.insert(name.to_string(), kind.to_string());
            }
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let (sample, labels) = match line.split_once('{') {
            Some((name, rest)) => (name, rest.split('}').next().unwrap_or("")),
            None => (line.split_whitespace().next().unwrap_or(""), ""),
        };
        // A sample belongs to the family whose TYPE line names its longest prefix.
        let Some((family, kind)) = kinds
            .iter()
            .filter(|(name, _)| sample.starts_with(name.as_str()))
            .max_by_key(|(name, _)| name.len())
        else {
            panic!("sample {sample} of no family in\n{text}");
        };
        let name = if kind == "counter" {
            format!("{family}_total")
        } else {
            family.clone()
        };
        let entry = out
            .entry(name)
            .or_insert_with(|| (kind.clone(), BTreeSet::new()));
        for pair in labels.split(',').filter(|p| !p.is_empty()) {
            let label = pair.split('=').next().unwrap_or("");
            if label != "le" {
                entry.1.insert(label.to_string());
            }
        }
    }
    assert_eq!(
        out.len(),
        kinds.len(),
        "a metric without a sample: record one above\n{text}"
    );
    out
}

/// `docs/operations.md`'s metrics table lists every metric the server registers, with its
/// type and labels, and nothing else; other pages name only registered metrics.
#[test]
fn metrics_table_is_the_registry() {
    let registered = registered_metrics();
    let ops = read("docs/operations.md");
    let mut documented = BTreeMap::new();
    for row in section(&ops, "## Metrics")
        .lines()
        .filter(|l| l.starts_with("| `"))
    {
        let cells = cells(row);
        let [name, kind, labels, _] = &cells[..] else {
            panic!("a metrics row of four cells: {row}");
        };
        let labels: BTreeSet<String> = labels
            .split(',')
            .map(|l| l.trim().trim_matches('`').to_string())
            .filter(|l| !l.is_empty())
            .collect();
        documented.insert(name.trim_matches('`').to_string(), (kind.clone(), labels));
    }
    assert_eq!(documented, registered, "docs/operations.md's metrics table");

    for (page, text) in pages() {
        for span in code_spans(&text) {
            if !span.starts_with("composition_webhook_") {
                continue;
            }
            let name = span.split('{').next().unwrap_or("");
            let base = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s))
                .unwrap_or(name);
            assert!(
                registered.contains_key(name) || registered.contains_key(base),
                "{page} names the metric {span}, which the server does not register"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// Files named

/// Paths in code spans (`src/...`, `tests/...`, `deploy/...`, `vendor/...`) exist; a `*`
/// matches within its folder.
#[test]
fn files_named_exist() {
    let prefixes = [
        "src/",
        "tests/",
        "testdata/",
        "deploy/",
        "crds/",
        "benches/",
        "docs/",
        ".ci/",
        "vendor/",
    ];
    let mut checked = 0;
    for (page, text) in pages() {
        for span in code_spans(&text) {
            if span.contains(' ') || !prefixes.iter().any(|p| span.starts_with(p)) {
                continue;
            }
            checked += 1;
            assert!(exists(&span), "{page} names {span}, which does not exist");
        }
    }
    assert!(checked > 50, "only {checked} paths found");
}

fn exists(rel: &str) -> bool {
    let Some((prefix, suffix)) = rel.split_once('*') else {
        return root().join(rel).exists();
    };
    let (dir, start) = prefix.rsplit_once('/').unwrap_or(("", prefix));
    std::fs::read_dir(root().join(dir)).is_ok_and(|entries| {
        entries.filter_map(Result::ok).any(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with(start) && name.ends_with(suffix)
        })
    })
}

/// Every file `docs/layout.md` names in a `src/` entry is in that folder.
#[test]
fn layout_names_files_that_exist() {
    let layout = read("docs/layout.md");
    let mut checked = 0;
    for entry in layout.split("\n- ").skip(1) {
        let Some(dir) = entry.strip_prefix('`').and_then(|e| e.split('`').next()) else {
            continue;
        };
        if !dir.starts_with("src/") {
            continue;
        }
        let files = all_files(&root().join(dir));
        for span in code_spans(entry) {
            if !(span.ends_with(".rs") || span.ends_with('/')) || span.contains(' ') || span == dir
            {
                continue;
            }
            checked += 1;
            let name = span.trim_end_matches('/');
            let found = files.iter().any(|f| {
                f.ends_with(name)
                    && f.to_string_lossy()
                        .strip_suffix(name)
                        .is_some_and(|p| p.ends_with('/'))
            });
            assert!(
                found,
                "docs/layout.md names {span} under {dir}, which is not there"
            );
        }
    }
    assert!(checked > 40, "only {checked} files found in docs/layout.md");
}

/// Every file and folder under `dir`.
fn all_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p.clone());
            }
            out.push(p);
        }
    }
    out
}

/// `docs/tests.md` names every integration test file (`tests/schema_*.rs` names several).
#[test]
fn tests_page_names_every_test_file() {
    let page = read("docs/tests.md");
    let named: Vec<String> = code_spans(&page)
        .into_iter()
        .filter(|s| s.starts_with("tests/") && s.ends_with(".rs"))
        .collect();
    let mut missing = Vec::new();
    for e in std::fs::read_dir(root().join("tests")).expect("tests/") {
        let name = e.expect("entry").file_name().to_string_lossy().into_owned();
        if !name.ends_with(".rs") {
            continue;
        }
        let rel = format!("tests/{name}");
        let covered = named.iter().any(|n| match n.split_once('*') {
            Some((pre, suf)) => rel.starts_with(pre) && rel.ends_with(suf),
            None => *n == rel,
        });
        if !covered {
            missing.push(rel);
        }
    }
    assert!(
        missing.is_empty(),
        "docs/tests.md does not describe {missing:?}"
    );
}
