//! Where a Composition holds resources: `spec` of a Resources-mode Composition, and the
//! input of each function-patch-and-transform step of a Pipeline-mode one.

use super::{ComposedTemplate, EnvironmentConfiguration, Patch, PatchSet};
use crate::findings::Path;

/// Resources with their patch sets and environment patches, where they live: `spec` of a
/// Resources-mode Composition, `spec.pipeline[i].input` of a patch-and-transform step.
#[derive(Debug, Clone, Copy)]
pub struct ResourceSet<'a> {
    /// The composed resource templates.
    pub resources: &'a [ComposedTemplate],
    /// The patch sets they may reference.
    pub patch_sets: &'a [PatchSet],
    /// The environment configuration (default data and patches between the XR and the
    /// environment).
    pub environment: Option<&'a EnvironmentConfiguration>,
    /// The path of the object holding `resources`, `patchSets` and `environment`.
    pub at: &'a Path,
}

impl<'a> ResourceSet<'a> {
    /// The patches between the XR and the environment.
    pub fn environment_patches(&self) -> &'a [Patch] {
        self.environment.map_or(&[], |e| e.patches.as_slice())
    }

    /// The resources, patch sets and environment patches held at `at`.
    pub fn new(
        resources: &'a [ComposedTemplate],
        patch_sets: &'a [PatchSet],
        environment: Option<&'a EnvironmentConfiguration>,
        at: &'a Path,
    ) -> Self {
        ResourceSet {
            resources,
            patch_sets,
            environment,
            at,
        }
    }
}
