//! `x-kubernetes-validations` CEL rules, compiled and evaluated with `kube-cel`, reported as
//! apiextensions' CEL validator reports them.
//!
//! Each schema node with rules (its own and its `allOf` branches') gets one `kube-cel`
//! schema of its rules, compiled once. Values are converted to CEL here ([`value`]), as the
//! API server converts them, which is not quite as `kube-cel` does. The walk over the
//! object is ours, so that evaluations can be counted and
//! the clock checked between them; a node's rules run together, as one batch.
//!
//! Failures read as the API server's: message = `message`, the evaluated `messageExpression`
//! (trimmed; an empty, multi-line or over-long one falls back to the message), or
//! `failed rule: <rule>`; at the node's path plus the rule's `fieldPath`; `reason` picks
//! `Forbidden`, `Required`, `Duplicate` or `Invalid`. The value shown is the node's schema
//! type (`Invalid value: "object"`), as `fieldErrorForReason(fldPath, sts.Type, ...)` prints
//! it. Transition rules (using `oldSelf`) are not evaluated on
//! create, as on the API server.

use std::time::Instant;

use kube_cel::cel::common::ast::{EntryExpr, Expr, IdedExpr};
use kube_cel::{CompiledSchema as CelSchema, ErrorKind};
use serde_json::{Map, Value, json};

mod value;

use super::{CelLimits, ResourceValidation};
use crate::findings::{BadValue, ErrorType, FieldError, Path, PathAt, join_path};
use crate::schema::structural::{MAX_SCHEMA_DEPTH, join};
use crate::schema::{Schema, ValidationRule};

/// The API server's per-call cost limit, used here as the bound of one evaluation's
/// estimated cost.
const MAX_RULE_COST: u64 = 1_000_000;

/// How deep a rule's value is converted with its schema ([`value::Shape`]); deeper values
/// convert without it (as kube-cel, which refuses schemas nested deeper than 64 levels).
const MAX_CEL_SUBTREE_DEPTH: usize = 60;

/// cel-go's default `ExpressionSizeCodePointLimit`, which the API server's CEL environment
/// keeps: the most code points of a rule or message expression.
const MAX_EXPRESSION_CODE_POINTS: usize = 100_000;

/// How many rules a "not evaluated" note names before summarizing the rest.
const LISTED_RULES: usize = 10;

/// `messageExpression` results longer than this are not used (`MaxEvaluatedMessageExpressionSizeBytes`).
const MAX_MESSAGE_BYTES: usize = 5 * 1024;

/// The compiled CEL rules of a schema, laid out along the schema's structure.
pub(super) struct CelProgram {
    root: Option<Node>,
    rule_count: usize,
    /// Whether the schema has rules at all, evaluated on create or not.
    has_rules: bool,
    notes: Vec<String>,
}

/// A schema node on the way to rules.
struct Node {
    unit: Option<Unit>,
    properties: Vec<(String, Node)>,
    additional: Option<Box<Node>>,
    items: Option<Box<Node>>,
}

/// The rules of one schema node, compiled together.
struct Unit {
    compiled: CelSchema,
    rules: Vec<Rule>,
    /// The node's `type` (printed for evaluation errors).
    schema_type: String,
    /// Deepest nesting of comprehensions in the rules and message expressions.
    comprehension_depth: u32,
    /// What the rules and message expressions read of `self`: what is converted of the
    /// node's value.
    reads: Reads,
    /// How the node's value converts to CEL.
    shape: value::Shape,
}

/// What expressions read of `self` ([`collect_reads`]), so that only that is converted to
/// CEL: upjet's "is a required parameter" rules on `spec` read `managementPolicies` and a
/// field or two of `forProvider` and `initProvider`, and converting all of `spec` for each
/// evaluation was most of their cost.
#[derive(Debug, Clone, PartialEq)]
enum Reads {
    /// All of it: the value is used whole somewhere (`self`, `self.size()`, `self[k]`, a
    /// macro over it), or the end of a select chain (`self.a.b` reads all of `b`).
    Whole,
    /// Only these members, by the names CEL gives them, each with what is read of it.
    Members(Vec<(String, Reads)>),
}

impl Reads {
    /// Adds the select chain `path` below this value.
    fn add(&mut self, path: &[&str]) {
        let Reads::Members(members) = self else {
            return;
        };
        let Some((first, rest)) = path.split_first() else {
            *self = Reads::Whole;
            return;
        };
        let i = match members.iter().position(|(name, _)| name == first) {
            Some(i) => i,
            None => {
                members.push(((*first).to_string(), Reads::Members(Vec::new())));
                members.len() - 1
            }
        };
        members[i].1.add(rest);
    }
}

/// Adds to `reads` what `e` reads of `self`. Every form of expression is looked into, so
/// that any use of `self` other than a select chain reads it whole.
fn collect_reads(e: &IdedExpr, reads: &mut Reads, depth: usize) {
    if depth > MAX_SCHEMA_DEPTH {
        *reads = Reads::Whole;
        return;
    }
    match &e.expr {
        Expr::Select(s) => {
            if let Some(mut path) = self_path(&s.operand, 0) {
                path.push(&s.field);
                reads.add(&path);
                return;
            }
        }
        Expr::Ident(name) if name == "self" => {
            *reads = Reads::Whole;
            return;
        }
        _ => {}
    }
    for_each_child(e, |child| collect_reads(child, reads, depth + 1));
}

/// Calls `f` on each expression directly below `e`: every form of expression is looked
/// into.
fn for_each_child(e: &IdedExpr, mut f: impl FnMut(&IdedExpr)) {
    let entry = |entry: &EntryExpr, f: &mut dyn FnMut(&IdedExpr)| match entry {
        EntryExpr::StructField(field) => f(&field.value),
        EntryExpr::MapEntry(m) => {
            f(&m.key);
            f(&m.value);
        }
    };
    match &e.expr {
        Expr::Select(s) => f(&s.operand),
        Expr::Call(call) => {
            if let Some(target) = &call.target {
                f(target);
            }
            call.args.iter().for_each(&mut f);
        }
        Expr::Comprehension(c) => {
            for part in [
                &c.iter_range,
                &c.accu_init,
                &c.loop_cond,
                &c.loop_step,
                &c.result,
            ] {
                f(part);
            }
        }
        Expr::List(list) => list.elements.iter().for_each(&mut f),
        Expr::Map(map) => map.entries.iter().for_each(|e| entry(&e.expr, &mut f)),
        Expr::Struct(s) => s.entries.iter().for_each(|e| entry(&e.expr, &mut f)),
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
}

/// What the API server needs of a rule to report its failure.
struct Rule {
    rule: String,
    message: Option<String>,
    message_expression: bool,
    reason: Option<String>,
    /// The `fieldPath`, normalized to a field path (`spec.x`, `labels[a]`).
    field_path: Option<String>,
    /// The fields the rule is about, relative to its node ([`rule_fields`]).
    fields: Vec<String>,
}

impl CelProgram {
    /// Compiles every rule of `schema` that runs on create.
    pub(super) fn compile(schema: &Schema) -> CelProgram {
        let mut program = CelProgram {
            root: None,
            rule_count: 0,
            has_rules: false,
            notes: Vec::new(),
        };
        program.root = program.node(schema, "", 0);
        program
    }

    /// How many rules are evaluated on create.
    pub(super) fn rule_count(&self) -> usize {
        self.rule_count
    }

    /// Whether the schema has `x-kubernetes-validations` (the API server then has a CEL
    /// validator, even if every rule is a transition rule).
    pub(super) fn has_rules(&self) -> bool {
        self.has_rules
    }

    /// Rules that could not be compiled, and similar.
    pub(super) fn notes(&self) -> &[String] {
        &self.notes
    }

    fn node(&mut self, schema: &Schema, at: &str, depth: usize) -> Option<Node> {
        if depth > MAX_SCHEMA_DEPTH {
            return None;
        }
        let rules: Vec<&ValidationRule> = schema
            .validations
            .iter()
            .chain(schema.all_of.iter().flat_map(|branch| &branch.validations))
            .collect();
        let has_rules = !rules.is_empty();
        let rules: Vec<&ValidationRule> = rules
            .into_iter()
            .filter(|r| self.within_size_limit(r, at))
            .collect();
        if has_rules {
            self.has_rules = true;
        }
        let unit = if rules.is_empty() {
            None
        } else {
            self.unit(schema, &rules, at)
        };
        let base = join(at, "properties");
        let properties: Vec<(String, Node)> = schema
            .properties
            .iter()
            .filter_map(|(name, prop)| {
                self.node(prop, &join(&base, name), depth + 1)
                    .map(|n| (name.clone(), n))
            })
            .collect();
        let additional = schema
            .additional_properties_schema()
            .and_then(|s| self.node(s, &join(at, "additionalProperties"), depth + 1))
            .map(Box::new);
        let items = schema
            .items_schema()
            .and_then(|s| self.node(s, &join(at, "items"), depth + 1))
            .map(Box::new);
        if unit.is_none() && properties.is_empty() && additional.is_none() && items.is_none() {
            return None;
        }
        Some(Node {
            unit,
            properties,
            additional,
            items,
        })
    }

    /// Whether the rule and its message expression are within cel-go's
    /// `ExpressionSizeCodePointLimit` (the API server refuses a CRD with a longer one); a
    /// longer one is noted and not compiled: the parser's recursion grows with the text.
    fn within_size_limit(&mut self, rule: &ValidationRule, at: &str) -> bool {
        let too_long = |text: &str| {
            text.len() > MAX_EXPRESSION_CODE_POINTS
                && text.chars().count() > MAX_EXPRESSION_CODE_POINTS
        };
        let long = if too_long(&rule.rule) {
            "it is"
        } else if rule.message_expression.as_deref().is_some_and(too_long) {
            "its messageExpression is"
        } else {
            return true;
        };
        let shown: String = rule.rule.chars().take(40).collect();
        self.notes.push(format!(
            "rule {}... at {} is not checked: {long} longer than {MAX_EXPRESSION_CODE_POINTS} code points, which the API server refuses",
            quote(&shown),
            display(at)
        ));
        false
    }

    fn unit(&mut self, schema: &Schema, rules: &[&ValidationRule], at: &str) -> Option<Unit> {
        // Only the rules: values are converted here (`value::Shape`), not by kube-cel.
        let list: Vec<Value> = rules
            .iter()
            .map(|r| {
                let mut rule = Map::new();
                rule.insert("rule".into(), json!(r.rule));
                if let Some(m) = &r.message {
                    rule.insert("message".into(), json!(m));
                }
                if let Some(m) = &r.message_expression {
                    rule.insert("messageExpression".into(), json!(m));
                }
                Value::Object(rule)
            })
            .collect();
        let json = json!({ "x-kubernetes-validations": list });
        let mut compiled = kube_cel::compile_schema(&json);
        let mut keep = Vec::with_capacity(rules.len());
        let mut kept = Vec::new();
        let mut depth = 0;
        for (rule, result) in rules.iter().zip(&compiled.validations) {
            match result {
                Ok(c) if c.is_transition_rule => {
                    if rule.optional_old_self == Some(true) {
                        self.notes.push(format!(
                            "rule {} at {} uses oldSelf with optionalOldSelf and is not checked on create",
                            quote(&rule.rule),
                            display(at)
                        ));
                    }
                    keep.push(false);
                }
                Ok(c) => {
                    depth = depth.max(comprehension_depth(c.program.expression()));
                    if let Some(m) = &c.message_program {
                        depth = depth.max(comprehension_depth(m.expression()));
                    }
                    let field_path = rule.field_path.as_deref().and_then(|fp| {
                        normalize_field_path(fp, schema).or_else(|| {
                            self.notes.push(format!(
                                "rule {} at {}: fieldPath {} is not a valid path; errors are reported at the rule's node",
                                quote(&rule.rule),
                                display(at),
                                quote(fp)
                            ));
                            None
                        })
                    });
                    kept.push(Rule {
                        rule: rule.rule.clone(),
                        message: rule.message.clone(),
                        message_expression: rule.message_expression.is_some(),
                        reason: rule.reason.clone(),
                        field_path,
                        fields: rule_fields(c.program.expression()),
                    });
                    keep.push(true);
                }
                Err(e) => {
                    self.notes.push(format!(
                        "rule {} at {} is not checked: {}",
                        quote(&rule.rule),
                        display(at),
                        first_line(&e.to_string())
                    ));
                    keep.push(false);
                }
            }
        }
        let mut flags = keep.into_iter();
        compiled
            .validations
            .retain(|_| flags.next().unwrap_or(false));
        if kept.is_empty() {
            return None;
        }
        self.rule_count += kept.len();
        let mut reads = Reads::Members(Vec::new());
        for c in compiled.validations.iter().flatten() {
            collect_reads(c.program.expression(), &mut reads, 0);
            if let Some(m) = &c.message_program {
                collect_reads(m.expression(), &mut reads, 0);
            }
        }
        Some(Unit {
            reads,
            shape: value::Shape::of(schema),
            compiled,
            rules: kept,
            schema_type: if schema.int_or_string {
                String::new()
            } else {
                schema.type_.clone().unwrap_or_default()
            },
            comprehension_depth: depth,
        })
    }

    /// Evaluates the rules on `object` (pruned and defaulted), within `limits`.
    pub(super) fn validate(
        &self,
        object: &Value,
        root: &Path,
        limits: &CelLimits,
        result: &mut ResourceValidation,
    ) {
        let Some(node) = &self.root else {
            return;
        };
        let mut run = Run {
            limits,
            start: Instant::now(),
            evaluations: 0,
            stopped: None,
            not_evaluated: Vec::new(),
            result,
        };
        run.walk(node, object, &PathAt::Root(root));
        if let Some(reason) = run.stopped.take() {
            let total = run.not_evaluated.len();
            let mut listed: Vec<String> = run
                .not_evaluated
                .iter()
                .take(LISTED_RULES)
                .cloned()
                .collect();
            if total > LISTED_RULES {
                listed.push(format!("and {} more", total - LISTED_RULES));
            }
            run.result.notes.push(format!(
                "CEL validation stopped after {} rule evaluations because {reason}; not evaluated: {}",
                run.evaluations,
                listed.join(", ")
            ));
        }
    }
}

/// One evaluation pass.
struct Run<'a> {
    limits: &'a CelLimits,
    start: Instant,
    evaluations: usize,
    stopped: Option<String>,
    not_evaluated: Vec<String>,
    result: &'a mut ResourceValidation,
}

impl Run<'_> {
    /// The API server's order: the node's rules, then list items or map values, then
    /// properties. Nulls are not validated.
    fn walk(&mut self, node: &Node, value: &Value, path: &PathAt<'_>) {
        if value.is_null() {
            return;
        }
        if let Some(unit) = &node.unit {
            self.evaluate(unit, value, path);
        }
        match value {
            Value::Array(items) => {
                if let Some(item) = &node.items {
                    for (i, child) in items.iter().enumerate() {
                        self.walk(item, child, &PathAt::Index(path, i));
                    }
                }
            }
            Value::Object(map) => {
                if let Some(add) = &node.additional {
                    for (key, child) in map {
                        self.walk(add, child, &PathAt::Key(path, key));
                    }
                }
                for (key, child) in map {
                    if let Some((_, prop)) = node.properties.iter().find(|(name, _)| name == key) {
                        self.walk(prop, child, &PathAt::Child(path, key));
                    }
                }
            }
            _ => {}
        }
    }

    /// Evaluates `unit`'s rules on `value`; its path (`at`) is built only for what is
    /// reported.
    fn evaluate(&mut self, unit: &Unit, value: &Value, at: &PathAt<'_>) {
        if self.stopped.is_none() {
            if self.evaluations + unit.rules.len() > self.limits.max_evaluations {
                self.stopped = Some(format!(
                    "the limit of {} evaluations was reached",
                    self.limits.max_evaluations
                ));
            } else if self.start.elapsed() >= self.limits.deadline {
                self.stopped = Some(format!(
                    "the deadline of {} ms passed",
                    self.limits.deadline.as_millis()
                ));
            } else if let Err(e) = crate::budget::step() {
                // The review's own deadline or cancellation stops the rules too.
                self.stopped = Some(format!("the review {e}"));
            }
        }
        if self.stopped.is_some() {
            let path = at.path();
            for rule in &unit.rules {
                self.not_evaluated.push(format!(
                    "{} at {}",
                    quote(&rule.rule),
                    display(path.as_str())
                ));
            }
            return;
        }
        let cost = estimated_cost(value, unit.comprehension_depth);
        if cost > MAX_RULE_COST {
            let path = at.path();
            for rule in &unit.rules {
                self.result.notes.push(format!(
                    "rule {} at {} is not evaluated: its estimated cost exceeds {MAX_RULE_COST}",
                    quote(&rule.rule),
                    display(path.as_str())
                ));
            }
            return;
        }
        self.evaluations += unit.rules.len();
        let errors = evaluate(unit, value);
        if errors.is_empty() {
            return;
        }
        let path = &at.path();
        for error in errors {
            let Some(rule) = unit.rules.iter().find(|r| r.rule == error.rule) else {
                self.result.notes.push(format!(
                    "CEL evaluation at {}: {}",
                    display(path.as_str()),
                    first_line(&error.message)
                ));
                continue;
            };
            match error.kind {
                // A result that is not a boolean is not `true`: a failure, as on the API
                // server (where the type checker would have refused the rule).
                ErrorKind::ValidationFailure => {
                    let failure = failure(rule, Some(&error.message), unit, path);
                    self.push(failure, rule, path);
                }
                ErrorKind::InvalidResult => {
                    let failure = failure(rule, None, unit, path);
                    self.push(failure, rule, path);
                }
                ErrorKind::EvaluationError => {
                    let cause = error.go_wording;
                    let detail = if cause.starts_with("no such overload") {
                        format!(
                            "'{cause}': call arguments did not match a supported operator, function or macro signature for rule: {}",
                            rule_error_string(rule)
                        )
                    } else {
                        format!("{cause} evaluating rule: {}", rule_error_string(rule))
                    };
                    let error =
                        FieldError::invalid(path.as_str(), unit.schema_type.as_str(), detail);
                    self.push(error, rule, path);
                }
                _ => self.result.notes.push(format!(
                    "rule {} at {} could not be evaluated: {}",
                    quote(&rule.rule),
                    display(path.as_str()),
                    first_line(&error.message)
                )),
            }
        }
    }
}

impl Run<'_> {
    /// Records a rule's error with the fields the rule is about, under its node's `path`.
    fn push(&mut self, error: FieldError, rule: &Rule, path: &Path) {
        self.result.errors.push(error);
        self.result.rule_fields.push(
            rule.fields
                .iter()
                .map(|f| join_path(path.as_str(), f))
                .collect(),
        );
    }
}

/// The fields a rule is about, relative to its node: the ones it tests with
/// `has(self.a.b)`, else the ones it reads (`self.a.b`); only the deepest of a chain
/// (`has(self.a) && has(self.a.b)` is about `a.b`). Upjet's "spec.forProvider.policy is a
/// required parameter" rule on `spec` is about `forProvider.policy` and
/// `initProvider.policy`, not about every field of `spec`. Empty for a rule about the
/// node's own value (`self.size() > 0`). Read from the parsed rule, so a string literal
/// that mentions `self.x` is not a field.
fn rule_fields(rule: &IdedExpr) -> Vec<String> {
    let (mut tested, mut read) = (Vec::new(), Vec::new());
    collect_fields(rule, &mut tested, &mut read, 0);
    let mut fields = if tested.is_empty() { read } else { tested };
    fields.sort();
    fields.dedup();
    let deepest: Vec<String> = fields
        .iter()
        .filter(|f| {
            !fields.iter().any(|g| {
                g.len() > f.len() && g.starts_with(f.as_str()) && g[f.len()..].starts_with('.')
            })
        })
        .cloned()
        .collect();
    deepest
}

/// The field names of a select chain rooted at `self` (`self.a.b`: `a`, `b`).
fn self_path(e: &IdedExpr, depth: usize) -> Option<Vec<&str>> {
    match &e.expr {
        Expr::Ident(name) if name == "self" => Some(Vec::new()),
        Expr::Select(s) if !s.test && depth < MAX_SCHEMA_DEPTH => {
            let mut path = self_path(&s.operand, depth + 1)?;
            path.push(&s.field);
            Some(path)
        }
        _ => None,
    }
}

/// Collects the `self` paths a rule tests (`has()`) and reads.
fn collect_fields(e: &IdedExpr, tested: &mut Vec<String>, read: &mut Vec<String>, depth: usize) {
    if depth > MAX_SCHEMA_DEPTH {
        return;
    }
    if let Expr::Select(s) = &e.expr
        && let Some(mut path) = self_path(&s.operand, 0)
    {
        path.push(&s.field);
        let path = path.join(".");
        if s.test {
            tested.push(path);
        } else {
            read.push(path);
        }
        return;
    }
    for_each_child(e, |child| collect_fields(child, tested, read, depth + 1));
}

/// A rule's failure as `kube_cel` reports it ([`evaluate`]).
struct CelError {
    rule: String,
    message: String,
    kind: ErrorKind,
    /// For an evaluation error, the cause in cel-go's words ([`cel_go_wording`]).
    go_wording: String,
}

// What the tests compare the evaluation with.
#[cfg(test)]
impl From<kube_cel::ValidationError> for CelError {
    fn from(error: kube_cel::ValidationError) -> Self {
        let cause = std::error::Error::source(&error)
            .and_then(|s| s.downcast_ref::<kube_cel::cel::ExecutionError>());
        let go_wording = if error.kind == ErrorKind::EvaluationError {
            cel_go_wording(cause, &error.message)
        } else {
            String::new()
        };
        CelError {
            rule: error.rule,
            message: error.message,
            kind: error.kind,
            go_wording,
        }
    }
}

/// A runtime error in cel-go's words where they are known (`no such key: x`,
/// `division by zero`), else in cel-rust's.
fn cel_go_wording(cause: Option<&kube_cel::cel::ExecutionError>, message: &str) -> String {
    use kube_cel::cel::ExecutionError as E;
    match cause {
        Some(E::NoSuchKey(key)) => format!("no such key: {key}"),
        Some(E::NoSuchOverload) => "no such overload".to_string(),
        Some(E::DivisionByZero(_)) => "division by zero".to_string(),
        Some(E::RemainderByZero(_)) => "modulus by zero".to_string(),
        Some(E::Overflow(..)) => "integer overflow".to_string(),
        _ => message
            .strip_prefix("rule evaluation error: ")
            .unwrap_or(message)
            .to_string(),
    }
}

thread_local! {
    /// The root context with the Kubernetes CEL functions, as `kube_cel`'s thread-local
    /// validator has it.
    static BASE_CONTEXT: kube_cel::cel::Context<'static> = {
        use kube_cel::KubeCelExt;
        let mut ctx = kube_cel::cel::Context::default();
        ctx.register_all();
        ctx
    };
}

/// A unit's rules evaluated as `kube_cel::validate_compiled` evaluates them, failures in its
/// words (`Validator::evaluate_rule`, `resolve_message`), but with `self` converted as the API
/// server converts it ([`value::to_cel_compiled`]: field names escaped, nulls of an object's
/// properties absent), and without what changes nothing here: copying the value to apply
/// defaults (it was defaulted before) and converting every node below again to evaluate their
/// rules (each node's rules are a unit of their own). What the rules read of the value
/// (`reads`) is converted once, and the rules run in order against it.
fn evaluate(unit: &Unit, value: &Value) -> Vec<CelError> {
    use kube_cel::cel::{ExecutionError, Value as CelValue};
    let this = value::to_cel_compiled(value, &unit.shape, &unit.reads);
    BASE_CONTEXT.with(|base| {
        let mut node = base.new_inner_scope();
        node.add_variable_from_value("self", this);
        let mut errors = Vec::new();
        for result in &unit.compiled.validations {
            // Rules that failed to compile and transition rules (`oldSelf`, not evaluated on
            // create) were removed at compile.
            let Ok(cr) = result else { continue };
            let ctx = &node;
            let rule = || cr.rule.rule.clone();
            match cr.program.execute(ctx) {
                Ok(CelValue::Bool(true)) => {}
                Ok(CelValue::Bool(false)) => {
                    let message = match cr.message_program.as_ref().map(|m| m.execute(ctx)) {
                        Some(Ok(CelValue::String(s))) => (*s).clone(),
                        _ => cr
                            .rule
                            .message
                            .clone()
                            .unwrap_or_else(|| format!("failed rule: {}", cr.rule.rule)),
                    };
                    errors.push(CelError {
                        rule: rule(),
                        message,
                        kind: ErrorKind::ValidationFailure,
                        go_wording: String::new(),
                    });
                }
                Ok(_) => errors.push(CelError {
                    rule: rule(),
                    message: format!("rule \"{}\" did not evaluate to bool", cr.rule.rule),
                    kind: ErrorKind::InvalidResult,
                    go_wording: String::new(),
                }),
                Err(ExecutionError::UndeclaredReference(name)) => errors.push(CelError {
                    rule: rule(),
                    message: format!(
                        "rule references '{name}', which this kube-cel build does not support \
                         (an unsupported CEL macro, or a feature disabled at compile time); \
                         it cannot be evaluated client-side"
                    ),
                    kind: ErrorKind::UnsupportedReference,
                    go_wording: String::new(),
                }),
                Err(e) => {
                    let message = format!("rule evaluation error: {e}");
                    errors.push(CelError {
                        rule: rule(),
                        go_wording: cel_go_wording(Some(&e), &message),
                        message,
                        kind: ErrorKind::EvaluationError,
                    });
                }
            }
        }
        errors
    })
}

/// The field error of a rule that evaluated to false; `evaluated` is kube-cel's message
/// (the `messageExpression` result when it gave a string).
fn failure(rule: &Rule, evaluated: Option<&str>, unit: &Unit, path: &Path) -> FieldError {
    let fallback = rule_message_or_default(rule);
    let detail = if let (true, Some(evaluated)) = (rule.message_expression, evaluated) {
        // kube-cel falls back to the raw message (or `failed rule: <rule>`) when the
        // expression does not give a string; the API server also refuses empty, multi-line
        // and over-long messages.
        let raw_fallback = rule
            .message
            .clone()
            .unwrap_or_else(|| format!("failed rule: {}", rule.rule));
        let trimmed = evaluated.trim();
        if evaluated == raw_fallback
            || trimmed.is_empty()
            || trimmed.contains('\n')
            || trimmed.len() > MAX_MESSAGE_BYTES
        {
            fallback
        } else {
            trimmed.to_string()
        }
    } else {
        fallback
    };
    let field = match &rule.field_path {
        Some(fp) => join_path(path.as_str(), fp),
        None => path.as_str().to_string(),
    };
    // `fieldErrorForReason(fldPath, sts.Type, ...)`: the bad value printed is the schema's
    // type name, as crossplane beta validate and kubectl show it.
    let shown = if unit.schema_type.is_empty() {
        BadValue::Omit
    } else {
        BadValue::Str(unit.schema_type.clone())
    };
    match rule.reason.as_deref() {
        Some("FieldValueForbidden") => FieldError::forbidden(field, detail),
        Some("FieldValueRequired") => FieldError::required(field, detail),
        Some("FieldValueDuplicate") => FieldError::new(ErrorType::Duplicate, field, shown, ""),
        _ => FieldError::new(ErrorType::Invalid, field, shown, detail),
    }
}

/// `ruleMessageOrDefault`.
fn rule_message_or_default(rule: &Rule) -> String {
    match rule.message.as_deref() {
        Some(m) if !m.is_empty() => m.trim().to_string(),
        _ => format!("failed rule: {}", rule_error_string(rule)),
    }
}

/// `ruleErrorString`.
fn rule_error_string(rule: &Rule) -> String {
    match rule.message.as_deref() {
        Some(m) if !m.is_empty() => m.trim().to_string(),
        _ => rule.rule.trim().to_string(),
    }
}

/// `ValidFieldPath`: `.a.b`, `.a['x.y']`; named steps need `properties`, key steps
/// `additionalProperties`. The result is a field path relative to the rule's node.
fn normalize_field_path(field_path: &str, schema: &Schema) -> Option<String> {
    let mut out = String::new();
    let mut node = schema;
    let mut rest = field_path;
    while !rest.is_empty() {
        let (name, after) = if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            (r[..end].to_string(), &r[end..])
        } else if let Some(r) = rest.strip_prefix("['") {
            let (name, after) = quoted_step(r)?;
            (name, after)
        } else {
            return None;
        };
        if name.is_empty() {
            return None;
        }
        if !node.properties.is_empty() {
            node = node.properties.get(&name)?;
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&name);
        } else if let Some(add) = node.additional_properties_schema() {
            node = add;
            out.push_str(&format!("[{name}]"));
        } else {
            return None;
        }
        rest = after;
    }
    (!out.is_empty()).then_some(out)
}

/// A single-quoted step's unescaped text and what follows its `']`.
fn quoted_step(r: &str) -> Option<(String, &str)> {
    let mut name = String::new();
    let mut chars = r.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                let (_, escaped) = chars.next()?;
                name.push(match escaped {
                    'n' => '\n',
                    't' => '\t',
                    'r' => '\r',
                    '\'' | '\\' => escaped,
                    _ => return None,
                });
            }
            '\'' => return r[i + 1..].strip_prefix(']').map(|after| (name, after)),
            other => name.push(other),
        }
    }
    None
}

/// How deeply comprehensions (`all`, `exists`, `map`, `filter`, ...) nest: each level
/// multiplies the work by the size of the list it walks.
fn comprehension_depth(e: &IdedExpr) -> u32 {
    if let Expr::Comprehension(c) = &e.expr {
        let body = [&c.loop_cond, &c.loop_step, &c.result]
            .into_iter()
            .map(comprehension_depth)
            .max()
            .unwrap_or(0);
        return comprehension_depth(&c.iter_range)
            .max(comprehension_depth(&c.accu_init))
            .max(body + 1);
    }
    let mut deepest = 0;
    for_each_child(e, |child| deepest = deepest.max(comprehension_depth(child)));
    deepest
}

/// `n^d` for a value of `n` JSON nodes (`n` when there is no comprehension: converting the
/// value), saturating.
fn estimated_cost(value: &Value, comprehension_depth: u32) -> u64 {
    let n = count_nodes(value, MAX_RULE_COST + 1);
    n.saturating_pow(comprehension_depth.max(1))
}

/// JSON nodes in `value`, counting stopped at `cap`.
fn count_nodes(value: &Value, cap: u64) -> u64 {
    let mut count = 0u64;
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        count += 1;
        if count >= cap {
            return cap;
        }
        match v {
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.values()),
            _ => {}
        }
    }
    count
}

fn quote(s: &str) -> String {
    crate::findings::go_quote(s.trim())
}

fn display(path: &str) -> &str {
    if path.is_empty() { "the root" } else { path }
}

fn first_line(s: &str) -> &str {
    s.lines().find(|l| !l.trim().is_empty()).unwrap_or(s).trim()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::AdditionalProperties;

    /// The schema `kube-cel`'s own evaluation converts a node's value by: types, formats and
    /// the extensions that change conversion, without rules or defaults.
    fn subtree(schema: &Schema, depth: usize) -> Value {
        let mut m = Map::new();
        if let Some(t) = &schema.type_ {
            m.insert("type".into(), json!(t));
        }
        if let Some(f) = &schema.format {
            m.insert("format".into(), json!(f));
        }
        for (key, set) in [
            ("x-kubernetes-int-or-string", schema.int_or_string),
            ("x-kubernetes-embedded-resource", schema.embedded_resource),
            (
                "x-kubernetes-preserve-unknown-fields",
                schema.preserve_unknown_fields,
            ),
        ] {
            if set {
                m.insert(key.into(), json!(true));
            }
        }
        if depth < MAX_CEL_SUBTREE_DEPTH {
            if !schema.properties.is_empty() {
                let props: Map<String, Value> = schema
                    .properties
                    .iter()
                    .map(|(name, p)| (name.clone(), subtree(p, depth + 1)))
                    .collect();
                m.insert("properties".into(), Value::Object(props));
            }
            match &schema.additional_properties {
                Some(AdditionalProperties::Schema(s)) => {
                    m.insert("additionalProperties".into(), subtree(s, depth + 1));
                }
                Some(AdditionalProperties::Bool(b)) => {
                    m.insert("additionalProperties".into(), json!(b));
                }
                None => {}
            }
            if let Some(item) = schema.items_schema() {
                m.insert("items".into(), subtree(item, depth + 1));
            }
        }
        Value::Object(m)
    }

    fn schema(v: Value) -> Schema {
        Schema::from_value(&v).expect("schema")
    }

    /// The evaluation reports what `kube_cel::validate_compiled` reports, error for error,
    /// where the two convert values alike (no property with `_`, no null property, no
    /// `number`: [`rules_see_values_as_the_api_server_converts_them`]): failures with
    /// messages and message expressions, non-boolean results, runtime errors, escaped field
    /// names, map keys, embedded resources, `optionalOldSelf`; with what each rule reads of
    /// `self` converted, alone and with the others.
    #[test]
    fn evaluation_matches_kube_cel() {
        let rules = [
            json!({"rule": "self.size > 2", "message": "too small"}),
            json!({"rule": "self.size < 10", "messageExpression": "'size ' + string(self.size)"}),
            json!({"rule": "self.size < 11", "messageExpression": "'zero ' + string(self.zero)"}),
            json!({"rule": "self.size", "message": "not a bool"}),
            json!({"rule": "self.missing == 1"}),
            json!({"rule": "self.size / self.zero == 1"}),
            json!({"rule": "has(self.x__dash__y) && self.x__dash__y == 'a'"}),
            json!({"rule": "self.__namespace__ == 'n'"}),
            json!({"rule": "self.tags['a.b'] == 'c'"}),
            json!({"rule": "self.tags.a == 'c'"}),
            json!({"rule": "self.inner.apiVersion == ''"}),
            json!({"rule": "self.inner.metadata.name == 'x'"}),
            json!({"rule": "self.list.all(i, i.a__dot__b > 0)"}),
            json!({"rule": "oldSelf == null || self.size == oldSelf.size", "optionalOldSelf": true}),
            json!({"rule": "self.size == 1 || self.size == 2"}),
            json!({"rule": "size(self) > 3"}),
            json!({"rule": "self.free.k__dash__1[0] > 1.0"}),
            json!({"rule": "[self.size, self.zero].all(x, x > 0)"}),
            json!({"rule": "{'s': self.x__dash__y}.s == 'a'"}),
            json!({"rule": "self.list.exists(i, i.a__dot__b == self.size)"}),
            json!({"rule": "!has(self.free.k__dash__1) || self.free.k__dash__1.size() == 3"}),
        ];
        let schema_of = |rules: &[Value]| {
            schema(json!({"type": "object", "properties": {
                "spec": {"type": "object",
                    "x-kubernetes-validations": rules,
                    "properties": {
                        "size": {"type": "integer"},
                        "zero": {"type": "integer"},
                        "x-y": {"type": "string"},
                        "namespace": {"type": "string"},
                        "tags": {"type": "object", "additionalProperties": {"type": "string"}},
                        "inner": {"type": "object", "x-kubernetes-embedded-resource": true,
                            "x-kubernetes-preserve-unknown-fields": true},
                        "list": {"type": "array", "items": {"type": "object",
                            "properties": {"a.b": {"type": "integer"}}}},
                        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                    }}
            }}))
        };
        let values = [
            json!({"size": 1, "zero": 0, "x-y": "b", "namespace": "m", "tags": {"a.b": "d", "a": "c"},
                   "inner": {"kind": "K"}, "list": [{"a.b": 0}], "free": {"k-1": [1.5, null, true]}}),
            json!({"size": 5, "zero": 1, "x-y": "a", "namespace": "n", "tags": {"a.b": "c"},
                   "inner": {"metadata": {"name": "x"}}, "list": [{"a.b": 1}], "free": {}}),
            json!({"size": 12, "list": []}),
            json!({"size": 18446744073709551615u64}),
            json!({}),
        ];
        let mut sets: Vec<Vec<Value>> = rules.iter().map(|r| vec![r.clone()]).collect();
        sets.push(rules.to_vec());
        let mut projected = 0;
        for set in sets {
            let whole = schema_of(&set);
            let program = CelProgram::compile(&whole);
            // kube-cel's own evaluation, converting by the node's schema.
            let mut reference = subtree(whole.property("spec").expect("spec"), 0);
            reference["x-kubernetes-validations"] = Value::Array(set.clone());
            let reference = kube_cel::compile_schema(&reference);
            let unit = program
                .root
                .as_ref()
                .and_then(|r| r.properties.first())
                .and_then(|(_, n)| n.unit.as_ref());
            // The transition rule alone is not evaluated on create: no unit.
            let Some(unit) = unit else {
                assert!(set[0].get("optionalOldSelf").is_some(), "{set:?}");
                continue;
            };
            if unit.reads != Reads::Whole {
                projected += 1;
            }
            for value in &values {
                let ours: Vec<(String, String, String, String)> = evaluate(unit, value)
                    .into_iter()
                    .map(|e| (e.rule, e.message, format!("{:?}", e.kind), e.go_wording))
                    .collect();
                let kube: Vec<(String, String, String, String)> =
                    match kube_cel::validate_compiled(&reference, value, None) {
                        Ok(()) => Vec::new(),
                        Err(errors) => errors
                            .into_vec()
                            .into_iter()
                            .map(CelError::from)
                            .map(|e| (e.rule, e.message, format!("{:?}", e.kind), e.go_wording))
                            .collect(),
                    };
                assert_eq!(ours, kube, "{value} with {set:?}");
            }
        }
        assert!(projected >= 15, "{projected}");
    }

    /// What a rule reads of `self`: its select chains, each read whole at its end; all of it
    /// when `self` is used otherwise.
    #[test]
    fn rules_read_the_members_they_select() {
        let reads = |rules: &[&str]| {
            let mut reads = Reads::Members(Vec::new());
            for rule in rules {
                let p = kube_cel::cel::Program::compile(rule).expect("parses");
                collect_reads(p.expression(), &mut reads, 0);
            }
            reads
        };
        let members = |m: &[(&str, Reads)]| {
            Reads::Members(m.iter().map(|(n, r)| (n.to_string(), r.clone())).collect())
        };
        // Upjet's rule on `spec`.
        let upjet = "!('*' in self.managementPolicies || 'Create' in self.managementPolicies || 'Update' in self.managementPolicies) || has(self.forProvider.fromPort) || (has(self.initProvider) && has(self.initProvider.fromPort))";
        assert_eq!(
            reads(&[upjet]),
            members(&[
                ("managementPolicies", Reads::Whole),
                ("forProvider", members(&[("fromPort", Reads::Whole)])),
                ("initProvider", Reads::Whole),
            ])
        );
        assert_eq!(
            reads(&[
                "self.a.b == 1",
                "has(self.a.c.d)",
                "self.e.exists(x, x == self.f)"
            ]),
            members(&[
                (
                    "a",
                    members(&[("b", Reads::Whole), ("c", members(&[("d", Reads::Whole)]))])
                ),
                ("e", Reads::Whole),
                ("f", Reads::Whole),
            ])
        );
        assert_eq!(reads(&["true", "1 == 1"]), members(&[]));
        for whole in [
            "self.size() > 0",
            "size(self) > 0",
            "self['a'] == 1",
            "self.all(k, k != '')",
            "self == {}",
            "[self].size() == 1",
            "{'a': self}.a.b == 1",
            "self.a == 1 && self != null",
        ] {
            assert_eq!(reads(&[whole]), Reads::Whole, "{whole}");
        }
    }

    /// What fails of `rules` on `spec` (with `properties`) for `value`.
    fn failing(rules: &[&str], properties: Value, value: Value) -> Vec<String> {
        let rules: Vec<Value> = rules.iter().map(|r| json!({"rule": r})).collect();
        let program = CelProgram::compile(&schema(json!({"type": "object", "properties": {
            "spec": {"type": "object", "x-kubernetes-validations": rules,
                "properties": properties}}})));
        let unit = program
            .root
            .as_ref()
            .and_then(|r| r.properties.first())
            .and_then(|(_, n)| n.unit.as_ref())
            .expect("a unit on spec");
        evaluate(unit, &value)
            .into_iter()
            .map(|e| format!("{}: {}", e.rule, e.go_wording))
            .collect()
    }

    /// `self` as the API server converts it (`UnstructuredToVal`, `cel.Escape`), where
    /// kube-cel 0.8 converts otherwise and would deny what the API server accepts.
    #[test]
    fn rules_see_values_as_the_api_server_converts_them() {
        let properties = json!({
            "x_y": {"type": "string"},
            "a__b": {"type": "integer"},
            "a.b_c": {"type": "integer"},
            "n": {"type": "string", "nullable": true},
            "ratio": {"type": "number"},
            "count": {"type": "integer"},
            "at": {"type": "string", "format": "date-time"},
            "day": {"type": "string", "format": "date"},
            "ttl": {"type": "string", "format": "duration"},
            "long": {"type": "string", "format": "duration"},
            "data": {"type": "string", "format": "byte"},
            "tags": {"type": "object", "additionalProperties": {"type": "string"}},
            "list": {"type": "array", "items": {"type": "object",
                "properties": {"k_v": {"type": "integer"}}}}
        });
        let value = json!({"x_y": "a", "a__b": 1, "a.b_c": 2, "n": null, "ratio": 1,
            "count": 3, "at": "2024-05-01T10:00:00.5+02:00", "day": "2024-05-01",
            "ttl": "1m30s", "long": "2 days", "data": "aGVsbG8=", "tags": {"a_b": "c"},
            "list": [{"k_v": 1}]});
        // Each holds on the API server for `value`; the ones marked fail with kube-cel's own
        // conversion.
        let hold = [
            "self.x_y == 'a'",             // kube-cel: `x__y`
            "has(self.x_y)",               // kube-cel: `x__y`
            "self.a__underscores__b == 1", // kube-cel: `a____b`
            "self.a__dot__b_c == 2",       // kube-cel: `a__dot__b__c`
            "!has(self.n)",                // kube-cel: null is there
            "self.ratio * 0.5 == 0.5",     // kube-cel: an int
            "self.count * 2 == 6",
            "self.at == timestamp('2024-05-01T08:00:00.5Z')",
            "self.day == timestamp('2024-05-01T00:00:00Z')", // kube-cel: a string
            "self.ttl == duration('90s')",
            "self.long == duration('48h')", // kube-cel: a string
            "size(self.data) == 5",
            "self.tags.a_b == 'c' && self.tags['a_b'] == 'c'",
            "self.list.all(i, i.k_v == 1)", // kube-cel: `k__v`
        ];
        assert_eq!(
            failing(&hold, properties.clone(), value.clone()),
            Vec::<String>::new()
        );
        // And the same rules see the values they compare, not any value.
        let mut other = value.clone();
        for (k, v) in [
            ("x_y", json!("b")),
            ("a__b", json!(2)),
            ("a.b_c", json!(3)),
            ("n", json!("set")),
            ("ratio", json!(3)),
            ("count", json!(4)),
            ("at", json!("2024-05-01T10:00:00.5Z")),
            ("day", json!("2024-05-02")),
            ("ttl", json!("91s")),
            ("long", json!("3 days")),
            ("data", json!("aGk=")),
            ("tags", json!({"a_b": "d"})),
            ("list", json!([{"k_v": 2}])),
        ] {
            other[k] = v;
        }
        assert_eq!(
            failing(&hold, properties.clone(), other),
            [
                "self.x_y == 'a': ",
                "self.a__underscores__b == 1: ",
                "self.a__dot__b_c == 2: ",
                "!has(self.n): ",
                "self.ratio * 0.5 == 0.5: ",
                "self.count * 2 == 6: ",
                "self.at == timestamp('2024-05-01T08:00:00.5Z'): ",
                "self.day == timestamp('2024-05-01T00:00:00Z'): ",
                "self.ttl == duration('90s'): ",
                "self.long == duration('48h'): ",
                "size(self.data) == 5: ",
                "self.tags.a_b == 'c' && self.tags['a_b'] == 'c': ",
                "self.list.all(i, i.k_v == 1): ",
            ]
        );
        // A name kube-cel gives but the API server does not is not there.
        assert_eq!(
            failing(&["self.x__y == 'a'"], properties, value),
            ["self.x__y == 'a': no such key: x__y"]
        );
    }

    /// A rule or message expression over cel-go's 100,000 code points is not compiled (its
    /// parse would recurse as deep as the text is long): noted, and the node still has rules.
    #[test]
    fn rules_over_the_size_limit_are_noted_not_compiled() {
        // Over 100,000 bytes, but 50,009 code points.
        let at_limit = format!("'{}' != ''", "é".repeat(MAX_EXPRESSION_CODE_POINTS / 2 + 1));
        let over = format!("self{}", ".a".repeat(MAX_EXPRESSION_CODE_POINTS / 2));
        let long_message = format!("'{}'", "x".repeat(MAX_EXPRESSION_CODE_POINTS));
        let program = CelProgram::compile(&schema(json!({"type": "object",
            "x-kubernetes-validations": [
                {"rule": at_limit},
                {"rule": over},
                {"rule": "true", "messageExpression": long_message}]})));
        assert_eq!(program.rule_count(), 1);
        assert!(program.has_rules());
        assert_eq!(
            program.notes(),
            [
                format!(
                    "rule \"self{}\"... at the root is not checked: it is longer than 100000 code points, which the API server refuses",
                    ".a".repeat(18)
                ),
                "rule \"true\"... at the root is not checked: its messageExpression is longer than 100000 code points, which the API server refuses".to_string(),
            ]
        );
    }

    #[test]
    fn field_paths_normalize_like_valid_field_path() {
        let s = schema(json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "a.b": {"type": "string"}}}}}));
        assert_eq!(normalize_field_path(".spec", &s).as_deref(), Some("spec"));
        assert_eq!(
            normalize_field_path(".spec.labels['x.y']", &s).as_deref(),
            Some("spec.labels[x.y]")
        );
        assert_eq!(
            normalize_field_path(".spec['a.b']", &s).as_deref(),
            Some("spec.a.b")
        );
        assert_eq!(normalize_field_path(".nope", &s), None);
        assert_eq!(normalize_field_path("spec", &s), None);
    }

    #[test]
    fn comprehension_nesting_is_measured() {
        let depth = |rule: &str| {
            let p = kube_cel::cel::Program::compile(rule).expect("parses");
            comprehension_depth(p.expression())
        };
        assert_eq!(depth("self.a == 1"), 0);
        assert_eq!(depth("self.l.all(x, x > 0)"), 1);
        assert_eq!(depth("self.l.all(x, self.l.exists(y, y == x))"), 2);
        assert_eq!(depth("self.l.map(x, x).all(y, y > 0)"), 1);
    }

    #[test]
    fn rules_are_about_the_fields_they_test() {
        let rule_fields = |rule: &str| {
            let p = kube_cel::cel::Program::compile(rule).expect("parses");
            super::rule_fields(p.expression())
        };
        // Upjet's required-parameter rule (provider-upjet-aws v1.6.0).
        let upjet = "!('*' in self.managementPolicies || 'Create' in self.managementPolicies || 'Update' in self.managementPolicies) || has(self.forProvider.policy) || (has(self.initProvider) && has(self.initProvider.policy))";
        assert_eq!(
            rule_fields(upjet),
            ["forProvider.policy", "initProvider.policy"]
        );
        assert_eq!(
            rule_fields(
                "self.managementPolicy == 'ObserveOnly' || has(self.forProvider.ipCidrRange)"
            ),
            ["forProvider.ipCidrRange"]
        );
        assert_eq!(
            rule_fields("self.name.startsWith('a') && oldSelf.x == self.size"),
            ["name", "size"]
        );
        assert!(rule_fields("self.size() > 0").is_empty());
    }
}
