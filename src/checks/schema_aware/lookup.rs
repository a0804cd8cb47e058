//! The schemas a Composition needs: its composite resource's (XR) and each composed
//! resource's. Each missing or unusable schema is one finding at the field that needs it;
//! everything else is still validated.

use std::sync::Arc;

use crate::findings::{BadValue, ErrorType, FieldError, Finding, Path, Stage};
use crate::model::function::FunctionSet;
use crate::model::{ComposedTemplate, Composition};
use crate::schema::builtin::{BuiltIns, KUBERNETES_VERSION};
use crate::schema::mrd::activation_entries;
use crate::schema::{
    Activation, ActivationPolicies, Catalog, LookupError, MrdState, Origin, Schema, Scope,
    split_api_version,
};

/// A schema found for a kind, owned so that any schema source can hand it out.
#[derive(Debug, Clone)]
pub struct SchemaInfo {
    /// Name of the CRD (or of the CRD generated from an XRD).
    pub crd_name: String,
    /// The schema of the requested version; `None` when the CRD has none for it.
    pub schema: Option<Arc<Schema>>,
    /// Why the schema of the requested version is unusable, if it is.
    pub schema_error: Option<String>,
    /// Whether the CRD has the requested version at all.
    pub version_found: bool,
    /// The versions the CRD serves.
    pub served_versions: Vec<String>,
    /// Whether the CRD was generated from a CompositeResourceDefinition.
    pub from_xrd: bool,
    /// The CRD's `spec.scope`.
    pub scope: Scope,
    /// For a built-in kind (no CRD): where its schema comes from.
    pub built_in: Option<BuiltInOrigin>,
    /// For a kind whose schema comes from a ManagedResourceDefinition (no CRD): the MRD.
    pub mrd: Option<MrdInfo>,
    /// Why this is the last good schema rather than the current one (in a cluster: the
    /// definition was deleted, became unusable, or the API server refuses it), if so.
    pub stale: Option<String>,
    /// The warning the API server sends with every create and update of the requested
    /// version, when its definition marks it deprecated ([`crate::schema::Crd::deprecation_warning`]).
    pub deprecation: Option<String>,
}

/// Where a built-in kind's schema comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuiltInOrigin {
    /// In words: `Kubernetes v1.28.4's OpenAPI, embedded`, `the API server's OpenAPI v3
    /// (apis/apps/v1)`.
    pub source: String,
    /// Whether it is the schema of the API server the Composition's resources go to: then
    /// a field it does not know is an error. An embedded schema of one Kubernetes version
    /// may not know a later version's fields.
    pub exact: bool,
}

impl SchemaInfo {
    /// A built-in kind's schema from the embedded Kubernetes OpenAPI documents (`None` for
    /// a kind they lack); `why` says why they stand in for the API server's, if they do.
    pub fn embedded_built_in(
        group: &str,
        kind: &str,
        version: &str,
        why: Option<&str>,
    ) -> Option<SchemaInfo> {
        let b = BuiltIns::embedded().resolve(group, kind, version)?;
        let why = why.map(|w| format!(" ({w})")).unwrap_or_default();
        Some(SchemaInfo {
            crd_name: if group.is_empty() {
                kind.to_string()
            } else {
                format!("{kind}.{group}")
            },
            schema: Some(b.schema),
            schema_error: None,
            version_found: true,
            served_versions: b.versions,
            from_xrd: false,
            scope: b.scope,
            built_in: Some(BuiltInOrigin {
                source: format!("Kubernetes {KUBERNETES_VERSION}'s OpenAPI, embedded{why}"),
                exact: false,
            }),
            mrd: None,
            stale: None,
            deprecation: None,
        })
    }
}

/// The ManagedResourceDefinition a kind's schema comes from, when no CRD defines it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MrdInfo {
    /// Its name (`<plural>.<group>`).
    pub name: String,
    /// Its `spec.state`.
    pub state: MrdState,
    /// Whether its CRD is established, when known (its `Established` condition; in a
    /// cluster, an Active MRD without a CRD has none yet).
    pub established: Option<bool>,
}

/// Where schemas come from: files (the [`Catalog`]) or, in a cluster, the API server.
pub trait SchemaSource {
    /// The schema of `group`, `kind` at `version`.
    fn resolve(&self, group: &str, kind: &str, version: &str) -> Result<SchemaInfo, LookupError>;

    /// The Functions installed, when the source knows them (`--functions` files, a cluster
    /// whose Functions are listed); `None`, the default, recognises pipeline steps by their
    /// Function's name and reports no missing Function.
    fn functions(&self) -> Option<Arc<FunctionSet>> {
        None
    }

    /// The ManagedResourceActivationPolicies, when the source knows them (files: those
    /// among them; a cluster: once listed); `None`, the default, says nothing of policies
    /// and judges an MRD by its `spec.state` alone.
    fn activation_policies(&self) -> Option<Arc<ActivationPolicies>> {
        None
    }
}

impl<T: SchemaSource + ?Sized> SchemaSource for &T {
    fn resolve(&self, group: &str, kind: &str, version: &str) -> Result<SchemaInfo, LookupError> {
        (**self).resolve(group, kind, version)
    }

    fn functions(&self) -> Option<Arc<FunctionSet>> {
        (**self).functions()
    }

    fn activation_policies(&self) -> Option<Arc<ActivationPolicies>> {
        (**self).activation_policies()
    }
}

impl SchemaSource for Catalog {
    /// A CRD or XRD among the files, else a built-in kind of the embedded Kubernetes
    /// OpenAPI documents.
    fn resolve(&self, group: &str, kind: &str, version: &str) -> Result<SchemaInfo, LookupError> {
        let r = match self.lookup(group, kind, version) {
            Ok(r) => r,
            Err(e @ LookupError::NotFound { .. }) => {
                return SchemaInfo::embedded_built_in(group, kind, version, None).ok_or(e);
            }
            Err(e) => return Err(e),
        };
        Ok(SchemaInfo {
            crd_name: r.name().to_string(),
            schema: r.schema.cloned(),
            schema_error: r.schema_error.map(|e| e.to_string()),
            version_found: r.version_found,
            served_versions: r.served_versions.iter().map(|v| v.to_string()).collect(),
            from_xrd: r.origin().is_generated(),
            scope: r.crd().scope.clone(),
            built_in: None,
            mrd: match r.origin() {
                Origin::Mrd { state, established } => Some(MrdInfo {
                    name: r.name().to_string(),
                    state: *state,
                    established: *established,
                }),
                _ => None,
            },
            stale: None,
            deprecation: r.crd().deprecation_warning(version),
        })
    }

    /// The policies among the files (none is a known answer: no MRD is activated).
    fn activation_policies(&self) -> Option<Arc<ActivationPolicies>> {
        Some(self.policies().clone())
    }
}

/// The schemas of a Composition's XR and of each of its resources (`None` where missing).
#[derive(Debug, Clone, Default)]
pub struct NeededSchemas {
    /// The composite resource's schema.
    pub composite: Option<Arc<Schema>>,
    /// Each `spec.resources[i]` base's schema.
    pub resources: Vec<Option<Arc<Schema>>>,
}

/// Looks up the schemas of the Composition's XR and of its `spec.resources`, and reports
/// the ones that are missing or unusable, and references to versions a CRD does not have.
pub fn resolve(c: &Composition, source: &dyn SchemaSource) -> (NeededSchemas, Vec<Finding>) {
    let mut findings = Vec::new();
    let composite = resolve_composite(c, source, &mut findings);
    let resources = resolve_bases(&c.spec.resources, &Path::new("spec"), source, &mut findings);
    (
        NeededSchemas {
            composite,
            resources,
        },
        findings,
    )
}

/// The schema of the Composition's composite resource (`spec.compositeTypeRef`).
pub fn resolve_composite(
    c: &Composition,
    source: &dyn SchemaSource,
    findings: &mut Vec<Finding>,
) -> Option<Arc<Schema>> {
    let type_ref = &c.spec.composite_type_ref;
    if type_ref.api_version.is_empty() || type_ref.kind.is_empty() {
        return None; // Reported by the logical checks.
    }
    lookup(
        source,
        &type_ref.api_version,
        &type_ref.kind,
        &Path::new("spec").child("compositeTypeRef"),
        "the composite resource",
        findings,
    )
}

/// The schema of each template's base; `at` holds the `resources` list.
pub fn resolve_bases(
    templates: &[ComposedTemplate],
    at: &Path,
    source: &dyn SchemaSource,
    findings: &mut Vec<Finding>,
) -> Vec<Option<Arc<Schema>>> {
    templates
        .iter()
        .enumerate()
        .map(|(i, res)| {
            let (Some(api_version), Some(kind)) = (res.base_api_version(), res.base_kind()) else {
                return None; // Reported by the logical checks.
            };
            if api_version.is_empty() || kind.is_empty() {
                return None;
            }
            let base = at.child("resources").index(i).child("base");
            lookup(source, api_version, kind, &base, "this resource", findings)
        })
        .collect()
}

/// The schema of `kind` at `api_version` for the resource at `at` (`what` names it in the
/// findings), its lookup's findings (missing, unusable, deprecated, inactive) added to
/// `findings`.
pub fn lookup(
    source: &dyn SchemaSource,
    api_version: &str,
    kind: &str,
    at: &Path,
    what: &str,
    findings: &mut Vec<Finding>,
) -> Option<Arc<Schema>> {
    // A malformed apiVersion is reported by the logical checks.
    let (group, version) = split_api_version(api_version)?;
    // The words of findings, written only for one.
    let gvk = || BadValue::from(format!("{api_version}, Kind={kind}"));
    let skipped = || format!("checks that need the schema of {what} were skipped");
    let info = match source.resolve(group, kind, version) {
        Ok(info) => info,
        Err(LookupError::NotFound { .. }) => {
            let why = if group.is_empty() {
                "the core API group has no CRDs: its kinds are built into Kubernetes".to_string()
            } else if is_builtin_group(group) {
                format!("the API group {group} has no CRDs: its kinds are built into Kubernetes")
            } else {
                format!("no CRD, MRD or XRD defines {kind}.{group}")
            };
            findings.push(Finding::new(
                Stage::Crds,
                FieldError::not_found(at, gvk(), format!("{why}; {}", skipped())),
            ));
            return None;
        }
        Err(LookupError::Unavailable { reason, .. }) => {
            // Treated as a missing schema: strict denies, loose and warn admit with a warning.
            findings.push(Finding::new(
                Stage::Crds,
                FieldError::not_found(at, gvk(), format!("{reason}; {}", skipped())),
            ));
            return None;
        }
        Err(e) => {
            let detail = match &e {
                LookupError::Ambiguous {
                    group,
                    kind,
                    candidates,
                } => format!(
                    "more than one CRD found for {kind}.{group}: {}",
                    candidates
                        .iter()
                        .map(|c| format!("{} from {}", c.name, c.source))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                other => other.to_string(),
            };
            findings.push(Finding::new(
                Stage::Crds,
                FieldError::internal(at.as_str(), format!("{detail}; {}", skipped())),
            ));
            return None;
        }
    };
    if let Some(why) = &info.stale {
        // A schema is used, so nothing is skipped: a warning in every mode.
        findings.push(Finding::advisory(
            Stage::Crds,
            FieldError::not_found(
                at,
                gvk(),
                format!("{why}; validated with the last schema received"),
            ),
        ));
    }
    // Active by its own state and established: nothing to say, no policy to match.
    if let Some(mrd) = &info.mrd
        && !(mrd.state == MrdState::Active && mrd.established != Some(false))
    {
        let policies = source.activation_policies();
        findings.extend(mrd_finding(
            mrd,
            policies.as_deref(),
            group,
            kind,
            at,
            gvk(),
        ));
    }
    let definition = || {
        if let Some(origin) = &info.built_in {
            format!("the built-in kind {} ({})", info.crd_name, origin.source)
        } else if let Some(mrd) = &info.mrd {
            format!("MRD {}", mrd.name)
        } else if info.from_xrd {
            format!("the CompositeResourceDefinition of {}", info.crd_name)
        } else {
            format!("CRD {}", info.crd_name)
        }
    };
    if !info.version_found || !info.served_versions.iter().any(|v| v == version) {
        let problem = if info.version_found {
            "does not serve"
        } else {
            "has no"
        };
        findings.push(Finding::new(
            Stage::Schema,
            FieldError::invalid(
                at.child("apiVersion"),
                api_version,
                format!(
                    "{} {problem} version {version}; served versions: {}",
                    definition(),
                    if info.served_versions.is_empty() {
                        "none".to_string()
                    } else {
                        info.served_versions.join(", ")
                    }
                ),
            ),
        ));
    }
    let unusable = match (&info.schema_error, &info.schema) {
        (Some(err), _) => Some(format!(
            "the schema of version {version} in {} cannot be used: {err}",
            definition()
        )),
        (None, None) if info.version_found => Some(format!(
            "{} has no schema for version {version}",
            definition()
        )),
        _ => None,
    };
    if let Some(why) = unusable {
        findings.push(Finding::new(
            Stage::Crds,
            FieldError::new(
                ErrorType::NotFound,
                at.as_str(),
                gvk(),
                format!("{why}; {}", skipped()),
            ),
        ));
        return None;
    }
    if let Some(warning) = info.deprecation {
        // The API server answers each of Crossplane's creates and updates of this version
        // with this warning, which nobody reads there: said here, in the API server's words.
        findings.push(deprecation(at, api_version, warning));
    }
    info.schema
}

/// The warning for a template (or `spec.compositeTypeRef`) at `at` of a deprecated
/// `api_version`: at its `apiVersion`, the API server's `warning` after the value.
fn deprecation(at: &Path, api_version: &str, warning: String) -> Finding {
    Finding::advisory(
        Stage::Crds,
        FieldError::invalid(at.child("apiVersion"), api_version, warning),
    )
}

/// Whether a finding is a deprecated version's warning (the only advisory `Invalid value`
/// of the lookups at an `apiVersion`): its text after the value is the API server's.
pub fn is_deprecation(f: &Finding) -> bool {
    f.stage == Stage::Crds
        && f.advisory
        && f.error.error_type == ErrorType::Invalid
        && f.error.field.ends_with(".apiVersion")
}

/// What a kind defined only by an MRD needs. An MRD no policy activates and not `Active`
/// by its own `spec.state` has no CRD, so the API server refuses the kind (a missing schema:
/// strict denies, loose and warn warn); the message says which `spec.activate` entries would
/// activate it, and why the policies there do not. An active one whose CRD is not
/// established yet is a warning in every mode (it comes by itself). `policies` is `None`
/// when the source does not know them.
fn mrd_finding(
    mrd: &MrdInfo,
    policies: Option<&ActivationPolicies>,
    group: &str,
    kind: &str,
    at: &Path,
    gvk: BadValue,
) -> Option<Finding> {
    let activation = policies.map(|p| p.activation(&mrd.name));
    if let (MrdState::Inactive, None | Some(Activation::None { .. })) = (mrd.state, activation) {
        let entries = activation_entries(group);
        let until = format!(
            "MRD {} is Inactive: {kind} has no CRD until a ManagedResourceActivationPolicy \
             activates it",
            mrd.name
        );
        // Short: a warning in loose mode (the kind's own findings follow it).
        let message = match (activation, policies) {
            (
                Some(Activation::None {
                    held: Some((p, pattern)),
                }),
                _,
            ) => format!(
                "{until}, and ManagedResourceActivationPolicy {}, whose spec.activate \
                 \"{pattern}\" matches it, is {}",
                p.name,
                p.inert.map_or("inert", |i| i.words())
            ),
            (_, Some(p)) if !p.is_empty() => format!(
                "{until}, and none does ({}); add {} to one's spec.activate",
                p.describe(),
                entries
            ),
            _ => format!("{until} (spec.activate: {entries})"),
        };
        return Some(Finding::new(
            Stage::Crds,
            FieldError::not_found(at, gvk, message),
        ));
    }
    if mrd.established != Some(false) {
        return None;
    }
    let how = match (mrd.state, activation) {
        (MrdState::Active, _) | (_, None | Some(Activation::None { .. })) => {
            "is Active".to_string()
        }
        // Short (a warning, within the API server's 256 characters): the policy is enough.
        (_, Some(Activation::By { policy, .. })) => {
            format!(
                "is activated by ManagedResourceActivationPolicy {}",
                policy.name
            )
        }
    };
    Some(Finding::advisory(
        Stage::Crds,
        FieldError::not_found(
            at,
            gvk,
            format!(
                "MRD {} {how} but Crossplane has not established the CRD of {kind} yet",
                mrd.name
            ),
        ),
    ))
}

/// API groups served by Kubernetes itself, whose kinds never have a CRD.
pub fn is_builtin_group(group: &str) -> bool {
    matches!(
        group,
        "" | "apps"
            | "batch"
            | "autoscaling"
            | "policy"
            | "networking.k8s.io"
            | "rbac.authorization.k8s.io"
            | "storage.k8s.io"
            | "scheduling.k8s.io"
            | "coordination.k8s.io"
            | "discovery.k8s.io"
            | "node.k8s.io"
            | "certificates.k8s.io"
            | "admissionregistration.k8s.io"
            | "apiextensions.k8s.io"
            | "apiregistration.k8s.io"
            | "events.k8s.io"
            | "flowcontrol.apiserver.k8s.io"
            | "resource.k8s.io"
    )
}
