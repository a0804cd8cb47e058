//! Where the server's schemas come from: files (`--crds`) or the cluster. Both answer
//! lookups for a request (a cluster source waits for the API server no later than the
//! request allows), readiness, and what the operations port shows about them.

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

use super::operations::Readiness;
use crate::checks::functions::WithFunctions;
use crate::checks::schema_aware::lookup::SchemaSource;
use crate::cluster::{ClusterSchemas, UntilDeadline};
use crate::model::function::FunctionSet;
use crate::schema::Catalog;

/// A schema source as the server uses it.
pub trait ServedSchemas: Send + Sync {
    /// The source for one request; waiting for the API server stops at `until`.
    fn for_request(&self, until: Instant) -> Box<dyn SchemaSource + '_>;
    /// Whether reviews can be validated, and what the source holds or waits for.
    fn readiness(&self) -> Readiness;
    /// Kinds (files) or definitions (cluster) known, for the metrics.
    fn kinds(&self) -> usize;
    /// Cache entries per source and state label, for the metrics (empty for files).
    fn entries_by_state(&self) -> Vec<(&'static str, &'static str, i64)> {
        Vec::new()
    }
    /// Each watched source: its name, state and objects, for the metrics (empty for files).
    fn sources(&self) -> Vec<(&'static str, &'static str, i64)> {
        Vec::new()
    }
    /// `/debug/schemas`, if the source has a cache to show.
    fn debug(&self) -> Option<Value> {
        None
    }
    /// The served versions of the CRD `name`, if the cluster has it (`None` for files).
    fn crd_versions(&self, _name: &str) -> Option<Vec<String>> {
        None
    }
    /// How many times `of` has changed so far, for the verdict cache (always 0 for files,
    /// which never change).
    fn generation(&self, _of: Generation<'_>) -> u64 {
        0
    }
    /// Whether lookups of the built-in kinds of `group`, `version` may answer from a failure
    /// that only a later lookup retries (never for files): such answers are not cached.
    fn retried_on_lookup(&self, _group: &str, _version: &str) -> bool {
        false
    }
}

/// What a schema generation is counted for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Generation<'a> {
    /// Any schema or the Functions: bumped with each of the others.
    Any,
    /// The schema of a kind (group, kind).
    Kind(&'a str, &'a str),
    /// The installed Functions.
    Functions,
}

/// Schemas from `--crds` files, loaded once.
pub struct FileSchemas {
    /// The catalog.
    pub catalog: Catalog,
    /// The Functions of `--functions` files, if given.
    pub functions: Option<Arc<FunctionSet>>,
    /// What it holds (`12 kinds from --crds files`).
    pub description: String,
}

impl ServedSchemas for FileSchemas {
    fn for_request(&self, _until: Instant) -> Box<dyn SchemaSource + '_> {
        Box::new(WithFunctions {
            schemas: &self.catalog,
            functions: self.functions.clone(),
        })
    }

    fn readiness(&self) -> Readiness {
        Readiness::ready(self.description.clone())
    }

    fn kinds(&self) -> usize {
        self.catalog.len()
    }
}

impl ServedSchemas for ClusterSchemas {
    fn for_request(&self, until: Instant) -> Box<dyn SchemaSource + '_> {
        Box::new(UntilDeadline {
            schemas: self,
            until,
        })
    }

    fn readiness(&self) -> Readiness {
        match self.readiness() {
            (true, detail) => Readiness::ready(detail),
            (false, detail) => Readiness::not_ready(detail),
        }
    }

    fn kinds(&self) -> usize {
        self.definitions()
    }

    fn entries_by_state(&self) -> Vec<(&'static str, &'static str, i64)> {
        ClusterSchemas::entries_by_state(self)
    }

    fn sources(&self) -> Vec<(&'static str, &'static str, i64)> {
        ClusterSchemas::sources(self)
    }

    fn debug(&self) -> Option<Value> {
        serde_json::to_value(self.snapshot()).ok()
    }

    fn crd_versions(&self, name: &str) -> Option<Vec<String>> {
        ClusterSchemas::crd_versions(self, name)
    }

    fn generation(&self, of: Generation<'_>) -> u64 {
        let g = self.generations();
        match of {
            Generation::Any => g.any(),
            Generation::Kind(group, kind) => g.kind(group, kind),
            Generation::Functions => g.functions(),
        }
    }

    fn retried_on_lookup(&self, group: &str, version: &str) -> bool {
        self.openapi_failing(group, version)
    }
}
