//! ManagedResourceActivationPolicies (MRAPs, Crossplane v2.0+): each lists MRD names to
//! activate in `spec.activate`, with Go's `filepath.Match` wildcards (`*.aws.m.upbound.io`,
//! `*`: Crossplane's Helm chart installs a default MRAP activating `*`). Crossplane's
//! activation controller (`internal/controller/apiextensions/activationpolicy`) sets every
//! MRD a policy's entry matches to `Active`, skipping a paused policy or one being deleted;
//! a malformed pattern matches nothing (the controller drops `ErrBadPattern`).

use serde::Serialize;
use serde_json::Value;

use super::mrd::MRD_GROUP;
use super::structural::SchemaError;
use crate::go::filepath::{self, BadPattern};

/// The annotation that pauses a Crossplane object's reconciliation (crossplane-runtime's
/// `meta.IsPaused`: exactly `"true"`).
pub const PAUSED_ANNOTATION: &str = "crossplane.io/paused";

/// Whether a document is a ManagedResourceActivationPolicy.
pub fn is_mrap(api_version: &str, kind: &str) -> bool {
    kind == "ManagedResourceActivationPolicy"
        && api_version.strip_prefix(MRD_GROUP) == Some("/v1alpha1")
}

/// Why Crossplane's controller does not act on a policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Inert {
    /// `crossplane.io/paused: "true"`.
    Paused,
    /// It has a `deletionTimestamp`.
    Deleting,
}

impl Inert {
    /// In words, after "is".
    pub fn words(self) -> &'static str {
        match self {
            Inert::Paused => "paused (crossplane.io/paused: \"true\")",
            Inert::Deleting => "being deleted",
        }
    }
}

/// One policy: its name, its `spec.activate` entries, and whether Crossplane ignores it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ActivationPolicy {
    /// `metadata.name`.
    pub name: String,
    /// `spec.activate`, in order.
    pub activate: Vec<String>,
    /// Why Crossplane's controller skips it, if it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inert: Option<Inert>,
}

impl ActivationPolicy {
    /// Reads a policy document. `spec.activate` must be a non-empty list of strings, as the
    /// v2.3.4 CRD requires (`minItems: 1`).
    pub fn from_value(value: &Value) -> Result<ActivationPolicy, SchemaError> {
        let name = match value.pointer("/metadata/name") {
            Some(Value::String(n)) if !n.is_empty() => n.clone(),
            Some(Value::String(_)) | None | Some(Value::Null) => {
                return Err(SchemaError::Missing {
                    path: "metadata.name".into(),
                });
            }
            Some(_) => {
                return Err(SchemaError::WrongType {
                    path: "metadata.name".into(),
                    expected: "a string",
                });
            }
        };
        let entries = match value.pointer("/spec/activate") {
            Some(Value::Array(entries)) => entries,
            None | Some(Value::Null) => {
                return Err(SchemaError::Missing {
                    path: "spec.activate".into(),
                });
            }
            Some(_) => {
                return Err(SchemaError::WrongType {
                    path: "spec.activate".into(),
                    expected: "an array",
                });
            }
        };
        if entries.is_empty() {
            return Err(SchemaError::Invalid {
                path: "spec.activate".into(),
                message: "should have at least 1 items".into(),
            });
        }
        let activate = entries
            .iter()
            .enumerate()
            .map(|(i, e)| {
                e.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| SchemaError::WrongType {
                        path: format!("spec.activate[{i}]"),
                        expected: "a string",
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let paused = value
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(PAUSED_ANNOTATION))
            .and_then(Value::as_str)
            == Some("true");
        let deleting = value
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|t| !t.is_null());
        Ok(ActivationPolicy {
            name,
            activate,
            inert: inert(paused, deleting),
        })
    }

    /// The first `spec.activate` entry that matches the MRD `name`, whether or not
    /// Crossplane acts on the policy.
    pub fn matching(&self, name: &str) -> Option<&str> {
        self.activate
            .iter()
            .map(String::as_str)
            .find(|p| filepath::matches(p, name).unwrap_or(false))
    }
}

/// Why a policy is inert: deleting first (the controller checks it first), else paused.
pub fn inert(paused: bool, deleting: bool) -> Option<Inert> {
    if deleting {
        Some(Inert::Deleting)
    } else if paused {
        Some(Inert::Paused)
    } else {
        None
    }
}

/// The policies a schema source knows, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ActivationPolicies {
    /// Sorted; an identical policy read twice counts once.
    policies: Vec<ActivationPolicy>,
}

/// What the policies do to one MRD.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation<'a> {
    /// `policy` activates it: its entry `pattern` matches the name.
    By {
        /// The first such policy by name.
        policy: &'a ActivationPolicy,
        /// Its first matching entry.
        pattern: &'a str,
    },
    /// No policy Crossplane acts on matches; `held` is the first inert one that does.
    None {
        /// A paused or deleting policy whose entry matches, if any.
        held: Option<(&'a ActivationPolicy, &'a str)>,
    },
}

impl ActivationPolicies {
    /// The policies, sorted by name.
    pub fn new(policies: impl IntoIterator<Item = ActivationPolicy>) -> Self {
        let mut policies: Vec<ActivationPolicy> = policies.into_iter().collect();
        policies.sort();
        policies.dedup();
        ActivationPolicies { policies }
    }

    /// Adds a policy (once, if identical to one already there).
    pub fn insert(&mut self, policy: ActivationPolicy) {
        if let Err(at) = self.policies.binary_search(&policy) {
            self.policies.insert(at, policy);
        }
    }

    /// How many.
    pub fn len(&self) -> usize {
        self.policies.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.policies.is_empty()
    }

    /// What the policies do to the MRD `name`.
    pub fn activation(&self, name: &str) -> Activation<'_> {
        let mut held = None;
        for policy in &self.policies {
            if let Some(pattern) = policy.matching(name) {
                if policy.inert.is_none() {
                    return Activation::By { policy, pattern };
                }
                held.get_or_insert((policy, pattern));
            }
        }
        Activation::None { held }
    }

    /// The policies in words, for a message saying none matches: each name with its
    /// entries (a malformed one says so), at most [`SHOWN`] of them.
    pub fn describe(&self) -> String {
        let mut words: Vec<String> = self
            .policies
            .iter()
            .take(SHOWN)
            .map(|p| {
                let entries: Vec<String> = p
                    .activate
                    .iter()
                    .take(SHOWN)
                    .map(|e| {
                        // An entry as long as a policy may hold would swamp the message.
                        let shown: String = e.chars().take(SHOWN_ENTRY).collect();
                        let cut = if shown.len() < e.len() { "..." } else { "" };
                        match filepath::matches(e, "") {
                            Err(BadPattern) => format!("\"{shown}{cut}\" ({BadPattern})"),
                            Ok(_) => format!("\"{shown}{cut}\""),
                        }
                    })
                    .collect();
                let more = p.activate.len().saturating_sub(SHOWN);
                let more = if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                };
                let inert = p
                    .inert
                    .map(|i| format!(", {}", i.words()))
                    .unwrap_or_default();
                format!(
                    "{}: spec.activate {}{more}{inert}",
                    p.name,
                    entries.join(", ")
                )
            })
            .collect();
        let more = self.policies.len().saturating_sub(SHOWN);
        if more > 0 {
            words.push(format!("and {more} more"));
        }
        words.join("; ")
    }
}

/// The characters of a `spec.activate` entry a message shows.
const SHOWN_ENTRY: usize = 80;
/// How many policies (and entries of each) a message names.
pub const SHOWN: usize = 3;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy(name: &str, activate: &[&str]) -> ActivationPolicy {
        ActivationPolicy {
            name: name.into(),
            activate: activate.iter().map(|s| s.to_string()).collect(),
            inert: None,
        }
    }

    #[test]
    fn a_policy_reads_its_name_entries_and_pause() {
        let v = json!({
            "apiVersion": "apiextensions.crossplane.io/v1alpha1",
            "kind": "ManagedResourceActivationPolicy",
            "metadata": {"name": "aws", "annotations": {"crossplane.io/paused": "true"}},
            "spec": {"activate": ["buckets.s3.aws.m.upbound.io", "*.ec2.aws.m.upbound.io"]}
        });
        assert!(is_mrap(
            "apiextensions.crossplane.io/v1alpha1",
            "ManagedResourceActivationPolicy"
        ));
        assert!(!is_mrap(
            "apiextensions.crossplane.io/v1",
            "ManagedResourceActivationPolicy"
        ));
        let p = ActivationPolicy::from_value(&v).expect("reads");
        assert_eq!(p.name, "aws");
        assert_eq!(p.inert, Some(Inert::Paused));
        assert_eq!(
            p.matching("instances.ec2.aws.m.upbound.io"),
            Some("*.ec2.aws.m.upbound.io")
        );
        assert_eq!(p.matching("buckets.s3.aws.upbound.io"), None);
        let err = |v: Value| {
            ActivationPolicy::from_value(&v)
                .expect_err("invalid")
                .to_string()
        };
        assert_eq!(
            err(json!({"metadata": {"name": "x"}, "spec": {}})),
            "spec.activate: required value is missing"
        );
        assert_eq!(
            err(json!({"metadata": {"name": "x"}, "spec": {"activate": []}})),
            "spec.activate: should have at least 1 items"
        );
        assert_eq!(
            err(json!({"metadata": {"name": "x"}, "spec": {"activate": ["a", 1]}})),
            "spec.activate[1]: expected a string"
        );
        assert_eq!(
            err(json!({"spec": {"activate": ["*"]}})),
            "metadata.name: required value is missing"
        );
    }

    #[test]
    fn the_first_policy_crossplane_acts_on_activates() {
        let mut paused = policy("a-paused", &["*"]);
        paused.inert = Some(Inert::Paused);
        let set = ActivationPolicies::new([
            policy("gcp", &["*.gcp.upbound.io", "["]),
            paused.clone(),
            policy("aws", &["buckets.s3.aws.m.upbound.io"]),
        ]);
        assert_eq!(set.len(), 3);
        let by = |name: &str| match set.activation(name) {
            Activation::By { policy, pattern } => Some((policy.name.as_str(), pattern)),
            Activation::None { .. } => None,
        };
        assert_eq!(
            by("buckets.s3.aws.m.upbound.io"),
            Some(("aws", "buckets.s3.aws.m.upbound.io"))
        );
        assert_eq!(
            by("networks.compute.gcp.upbound.io"),
            Some(("gcp", "*.gcp.upbound.io"))
        );
        assert_eq!(
            set.activation("queues.sqs.aws.m.upbound.io"),
            Activation::None {
                held: Some((&paused, "*"))
            }
        );
        assert_eq!(
            set.describe(),
            "a-paused: spec.activate \"*\", paused (crossplane.io/paused: \"true\"); aws: spec.activate \"buckets.s3.aws.m.upbound.io\"; gcp: spec.activate \"*.gcp.upbound.io\", \"[\" (syntax error in pattern)"
        );
        let mut again = set.clone();
        again.insert(policy("aws", &["buckets.s3.aws.m.upbound.io"]));
        assert_eq!(again, set);
    }
}
