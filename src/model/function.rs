//! Crossplane Function packages (`pkg.crossplane.io` Functions). A pipeline step names a
//! Function object (`functionRef.name`); the Function's `spec.package` says which function
//! runs. Well-known functions are recognised by the last path segment of the package's
//! repository, whatever the registry or organisation, so a Function named `render` that
//! installs function-auto-ready is function-auto-ready. Without the Functions (offline, or
//! before the cluster's are listed) a step is recognised by the Function's name instead.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

/// The API group of Functions.
pub const PKG_GROUP: &str = "pkg.crossplane.io";

/// Where the package manager usually pulls well-known functions from.
const USUAL_REPOSITORY: &str = "xpkg.crossplane.io/crossplane-contrib";

/// An OCI package reference: `registry/repository[:tag][@digest]`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PackageRef {
    /// `xpkg.crossplane.io`; `None` when the reference has no registry (Crossplane v1 used
    /// its default one then).
    pub registry: Option<String>,
    /// `crossplane-contrib/function-patch-and-transform`.
    pub repository: String,
    /// `v0.10.8`.
    pub tag: Option<String>,
    /// `sha256:…`.
    pub digest: Option<String>,
}

impl PackageRef {
    /// Reads a reference as the package manager does (Docker's rules: the first path
    /// segment is a registry when it has a `.` or a `:` or is `localhost`). Never fails: an
    /// odd reference keeps what it has as its repository.
    pub fn parse(reference: &str) -> PackageRef {
        let s = reference.trim();
        let (rest, digest) = match s.split_once('@') {
            Some((rest, digest)) => (rest, Some(digest)),
            None => (s, None),
        };
        // A tag is after the last `:` with no `/` after it (`localhost:5000/x` has none).
        let (name, tag) = match rest.rfind(':') {
            Some(i) if !rest[i + 1..].contains('/') => (&rest[..i], Some(&rest[i + 1..])),
            _ => (rest, None),
        };
        let (registry, repository) = match name.split_once('/') {
            Some((first, repository))
                if first.contains('.') || first.contains(':') || first == "localhost" =>
            {
                (Some(first), repository)
            }
            _ => (None, name),
        };
        let some = |s: Option<&str>| s.filter(|s| !s.is_empty()).map(str::to_string);
        PackageRef {
            registry: some(registry),
            repository: repository.to_string(),
            tag: some(tag),
            digest: some(digest),
        }
    }

    /// The repository's last path segment: the package's name (`function-auto-ready`).
    pub fn name(&self) -> &str {
        self.repository.rsplit('/').next().unwrap_or_default()
    }
}

impl fmt::Display for PackageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(r) = &self.registry {
            write!(f, "{r}/")?;
        }
        f.write_str(&self.repository)?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

/// The well-known functions, by their packages' names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KnownFunction {
    /// function-patch-and-transform.
    PatchAndTransform,
    /// function-auto-ready.
    AutoReady,
    /// function-go-templating.
    GoTemplating,
    /// function-kcl.
    Kcl,
    /// function-environment-configs.
    EnvironmentConfigs,
    /// function-extra-resources.
    ExtraResources,
    /// function-cel-filter.
    CelFilter,
    /// function-python.
    Python,
    /// function-sequencer.
    Sequencer,
    /// function-cue.
    Cue,
    /// function-shell.
    Shell,
    /// function-status-transformer.
    StatusTransformer,
    /// Any other package.
    Other,
}

impl KnownFunction {
    /// Every well-known function (not [`KnownFunction::Other`]).
    pub const ALL: [KnownFunction; 12] = [
        KnownFunction::PatchAndTransform,
        KnownFunction::AutoReady,
        KnownFunction::GoTemplating,
        KnownFunction::Kcl,
        KnownFunction::EnvironmentConfigs,
        KnownFunction::ExtraResources,
        KnownFunction::CelFilter,
        KnownFunction::Python,
        KnownFunction::Sequencer,
        KnownFunction::Cue,
        KnownFunction::Shell,
        KnownFunction::StatusTransformer,
    ];

    /// The package's name (`function-auto-ready`); `None` for [`KnownFunction::Other`].
    pub fn package_name(self) -> Option<&'static str> {
        Some(match self {
            KnownFunction::PatchAndTransform => "function-patch-and-transform",
            KnownFunction::AutoReady => "function-auto-ready",
            KnownFunction::GoTemplating => "function-go-templating",
            KnownFunction::Kcl => "function-kcl",
            KnownFunction::EnvironmentConfigs => "function-environment-configs",
            KnownFunction::ExtraResources => "function-extra-resources",
            KnownFunction::CelFilter => "function-cel-filter",
            KnownFunction::Python => "function-python",
            KnownFunction::Sequencer => "function-sequencer",
            KnownFunction::Cue => "function-cue",
            KnownFunction::Shell => "function-shell",
            KnownFunction::StatusTransformer => "function-status-transformer",
            KnownFunction::Other => return None,
        })
    }

    /// The group and kind of the input this function reads, where it has its own (each
    /// function's `input/` types at its latest release; function-kcl's is KRM's
    /// `krm.kcl.dev`). `None` for a function whose input is not known here.
    pub fn input_kind(self) -> Option<(&'static str, &'static str)> {
        Some(match self {
            KnownFunction::PatchAndTransform => ("pt.fn.crossplane.io", "Resources"),
            KnownFunction::AutoReady => ("autoready.fn.crossplane.io", "Input"),
            KnownFunction::GoTemplating => ("gotemplating.fn.crossplane.io", "GoTemplate"),
            KnownFunction::Kcl => ("krm.kcl.dev", "KCLInput"),
            KnownFunction::EnvironmentConfigs => ("environmentconfigs.fn.crossplane.io", "Input"),
            KnownFunction::ExtraResources => ("extra-resources.fn.crossplane.io", "Input"),
            KnownFunction::CelFilter => ("cel.fn.crossplane.io", "Filters"),
            KnownFunction::Python => ("python.fn.crossplane.io", "Script"),
            _ => return None,
        })
    }

    /// The well-known function whose input `group` and `kind` are.
    pub fn by_input(group: &str, kind: &str) -> Option<KnownFunction> {
        Self::ALL
            .into_iter()
            .find(|f| f.input_kind() == Some((group, kind)))
    }

    /// The function a package is: its repository's last path segment, exactly.
    pub fn of_package(package: &PackageRef) -> KnownFunction {
        let name = package.name();
        Self::ALL
            .into_iter()
            .find(|f| f.package_name() == Some(name))
            .unwrap_or(KnownFunction::Other)
    }

    /// The function a Function's name suggests: the longest package name it contains
    /// (`crossplane-contrib-function-auto-ready` is function-auto-ready, as the package
    /// manager names a dependency).
    pub fn from_name(function: &str) -> KnownFunction {
        Self::ALL
            .into_iter()
            .filter_map(|f| Some((f, f.package_name()?)))
            .filter(|(_, p)| function.contains(p))
            .max_by_key(|(_, p)| p.len())
            .map_or(KnownFunction::Other, |(f, _)| f)
    }

    /// As [`KnownFunction::from_name`], also taking a name without the `function-` prefix
    /// (`patch-and-transform`, `acme-auto-ready`): only to suggest a package, never to decide
    /// what a step does.
    pub fn suggested_by(function: &str) -> KnownFunction {
        match Self::from_name(function) {
            KnownFunction::Other => Self::ALL
                .into_iter()
                .filter_map(|f| Some((f, f.package_name()?.strip_prefix("function-")?)))
                .filter(|(_, short)| {
                    function == *short
                        || function
                            .strip_suffix(short)
                            .is_some_and(|rest| rest.ends_with('-'))
                })
                .max_by_key(|(_, short)| short.len())
                .map_or(KnownFunction::Other, |(f, _)| f),
            known => known,
        }
    }

    /// The package it usually is: `xpkg.crossplane.io/crossplane-contrib/function-kcl`.
    pub fn usual_package(self) -> Option<String> {
        Some(format!("{USUAL_REPOSITORY}/{}", self.package_name()?))
    }
}

impl fmt::Display for KnownFunction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.package_name().unwrap_or("another function"))
    }
}

/// A Function object: its name and the package it installs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionPackage {
    /// `metadata.name`, what `functionRef.name` refers to.
    pub name: String,
    /// `spec.package`.
    pub package: PackageRef,
    /// The function the package is.
    pub function: KnownFunction,
}

/// A Function manifest that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FunctionManifestError {
    /// The field at fault (`spec.package`).
    pub field: &'static str,
    /// What is wrong.
    pub message: String,
}

impl FunctionPackage {
    /// The Function `name` installing `package`.
    pub fn new(name: impl Into<String>, package: &str) -> Self {
        let package = PackageRef::parse(package);
        FunctionPackage {
            name: name.into(),
            function: KnownFunction::of_package(&package),
            package,
        }
    }

    /// Whether `value` is a Function (`pkg.crossplane.io`, any version).
    pub fn is_manifest(value: &Value) -> bool {
        value.get("kind").and_then(Value::as_str) == Some("Function")
            && value
                .get("apiVersion")
                .and_then(Value::as_str)
                .and_then(|v| v.split_once('/'))
                .is_some_and(|(group, _)| group == PKG_GROUP)
    }

    /// Reads a Function manifest (see [`FunctionPackage::is_manifest`]): it needs a name
    /// and a package.
    pub fn from_manifest(value: &Value) -> Result<Self, FunctionManifestError> {
        let text = |pointer: &str, field: &'static str| match value
            .pointer(pointer)
            .and_then(Value::as_str)
        {
            Some(s) if !s.trim().is_empty() => Ok(s.trim()),
            _ => Err(FunctionManifestError {
                field,
                message: "a Function needs it (a non-empty string)".to_string(),
            }),
        };
        let name = text("/metadata/name", "metadata.name")?;
        let package = text("/spec/package", "spec.package")?;
        Ok(FunctionPackage::new(name, package))
    }

    /// `function-go-templating from package xpkg.crossplane.io/…:v0.9.0`, or `package
    /// registry.example.com/acme/function-x:v1` for another function.
    pub fn describe(&self) -> String {
        match self.function {
            KnownFunction::Other => format!("package {}", self.package),
            known => format!("{known} from package {}", self.package),
        }
    }
}

/// The Functions a source knows, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FunctionSet {
    functions: BTreeMap<String, FunctionPackage>,
}

impl FunctionSet {
    /// An empty set.
    pub fn new() -> Self {
        FunctionSet::default()
    }

    /// Adds `f`, replacing a Function of the same name (as applying it again would).
    pub fn insert(&mut self, f: FunctionPackage) {
        self.functions.insert(f.name.clone(), f);
    }

    /// The Function `name`.
    pub fn get(&self, name: &str) -> Option<&FunctionPackage> {
        self.functions.get(name)
    }

    /// Every Function, by name.
    pub fn iter(&self) -> impl Iterator<Item = &FunctionPackage> {
        self.functions.values()
    }

    /// How many Functions.
    pub fn len(&self) -> usize {
        self.functions.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.functions.is_empty()
    }
}

/// What a step's `functionRef.name` is known to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recognition {
    /// The function.
    pub function: KnownFunction,
    /// The Function object it was recognised by; `None` when recognised by its name (the
    /// Functions are not known, or none has that name).
    pub package: Option<FunctionPackage>,
}

impl Recognition {
    /// The function `name` runs: by its Function's package when `functions` has it, by
    /// the name otherwise.
    pub fn of(name: &str, functions: Option<&FunctionSet>) -> Recognition {
        match functions.and_then(|s| s.get(name)) {
            Some(p) => Recognition {
                function: p.function,
                package: Some(p.clone()),
            },
            None => Recognition {
                function: KnownFunction::from_name(name),
                package: None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parts(r: &PackageRef) -> (Option<&str>, &str, Option<&str>, Option<&str>) {
        (
            r.registry.as_deref(),
            r.repository.as_str(),
            r.tag.as_deref(),
            r.digest.as_deref(),
        )
    }

    #[test]
    fn references_split_into_registry_repository_tag_and_digest() {
        let digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        let by_digest = format!("xpkg.upbound.io/upbound/function-auto-ready@{digest}");
        let both = format!("registry.example.com/a/b/function-kcl:v1@{digest}");
        let cases = [
            (
                "xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform:v0.10.8",
                (
                    Some("xpkg.crossplane.io"),
                    "crossplane-contrib/function-patch-and-transform",
                    Some("v0.10.8"),
                    None,
                ),
            ),
            (
                by_digest.as_str(),
                (
                    Some("xpkg.upbound.io"),
                    "upbound/function-auto-ready",
                    None,
                    Some(digest),
                ),
            ),
            (
                both.as_str(),
                (
                    Some("registry.example.com"),
                    "a/b/function-kcl",
                    Some("v1"),
                    Some(digest),
                ),
            ),
            (
                "localhost:5000/function-cue",
                (Some("localhost:5000"), "function-cue", None, None),
            ),
            (
                "crossplane-contrib/function-auto-ready:v0.2.1",
                (
                    None,
                    "crossplane-contrib/function-auto-ready",
                    Some("v0.2.1"),
                    None,
                ),
            ),
            ("", (None, "", None, None)),
        ];
        for (text, want) in cases {
            let r = PackageRef::parse(text);
            assert_eq!(parts(&r), want, "{text}");
            assert_eq!(r.to_string(), text);
        }
        assert_eq!(
            PackageRef::parse("index.docker.io/acme/function-auto-ready").name(),
            "function-auto-ready"
        );
    }

    #[test]
    fn packages_are_recognised_by_their_repositorys_last_segment() {
        let of = |p: &str| KnownFunction::of_package(&PackageRef::parse(p));
        assert_eq!(
            of("xpkg.upbound.io/upbound/function-auto-ready:v0.2.1"),
            KnownFunction::AutoReady
        );
        assert_eq!(
            of("index.docker.io/acme/function-auto-ready"),
            KnownFunction::AutoReady
        );
        assert_eq!(
            of("xpkg.crossplane.io/crossplane-contrib/function-go-templating:v0.9.0"),
            KnownFunction::GoTemplating
        );
        // Another function that only starts like a known one.
        assert_eq!(
            of("xpkg.crossplane.io/acme/function-auto-ready-plus:v1"),
            KnownFunction::Other
        );
        assert_eq!(
            of("xpkg.crossplane.io/function-kcl/other:v1"),
            KnownFunction::Other
        );
        for f in KnownFunction::ALL {
            let usual = f.usual_package().expect("a package");
            assert_eq!(of(&usual), f, "{usual}");
        }
    }

    #[test]
    fn names_are_recognised_by_the_package_name_they_contain() {
        assert_eq!(
            KnownFunction::from_name("crossplane-contrib-function-auto-ready"),
            KnownFunction::AutoReady
        );
        assert_eq!(
            KnownFunction::from_name("upbound-function-patch-and-transform"),
            KnownFunction::PatchAndTransform
        );
        assert_eq!(
            KnownFunction::from_name("patch-and-transform"),
            KnownFunction::Other
        );
        assert_eq!(KnownFunction::from_name("render"), KnownFunction::Other);
        assert_eq!(
            KnownFunction::suggested_by("patch-and-transform"),
            KnownFunction::PatchAndTransform
        );
        assert_eq!(
            KnownFunction::suggested_by("acme-auto-ready"),
            KnownFunction::AutoReady
        );
        assert_eq!(
            KnownFunction::suggested_by("autoready"),
            KnownFunction::Other
        );
    }

    #[test]
    fn manifests_and_recognition() {
        let f = FunctionPackage::from_manifest(&json!({
            "apiVersion": "pkg.crossplane.io/v1", "kind": "Function",
            "metadata": {"name": "render"},
            "spec": {"package": "xpkg.crossplane.io/crossplane-contrib/function-auto-ready:v0.5.0"}
        }))
        .expect("a Function");
        assert_eq!(f.function, KnownFunction::AutoReady);
        assert_eq!(
            f.describe(),
            "function-auto-ready from package xpkg.crossplane.io/crossplane-contrib/function-auto-ready:v0.5.0"
        );
        let missing = FunctionPackage::from_manifest(&json!({
            "apiVersion": "pkg.crossplane.io/v1beta1", "kind": "Function",
            "metadata": {"name": "x"}, "spec": {}
        }));
        assert_eq!(
            missing.expect_err("no package").to_string(),
            "spec.package: a Function needs it (a non-empty string)"
        );
        assert!(FunctionPackage::is_manifest(
            &json!({"apiVersion": "pkg.crossplane.io/v1beta1", "kind": "Function"})
        ));
        assert!(!FunctionPackage::is_manifest(
            &json!({"apiVersion": "pkg.crossplane.io/v1", "kind": "Provider"})
        ));

        let mut set = FunctionSet::new();
        set.insert(f);
        let by_package = Recognition::of("render", Some(&set));
        assert_eq!(by_package.function, KnownFunction::AutoReady);
        assert!(by_package.package.is_some());
        let by_name = Recognition::of("function-auto-ready", Some(&set));
        assert_eq!(
            (by_name.function, by_name.package),
            (KnownFunction::AutoReady, None)
        );
        assert_eq!(
            Recognition::of("render", None).function,
            KnownFunction::Other
        );
    }
}
