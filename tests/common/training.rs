//! The Compositions of `testdata/` the serve bench runs without the corpus
//! (`SERVE_BENCH_COMPOSITION=<file>`) and all of with `--train`: the training of the
//! profile-guided build (`scripts/pgo-build.sh`). Code the training does not run is
//! optimised as cold, so together they run every hot path: Resources and Pipeline, v1 and v2
//! XRDs, managed resources and built-in kinds, allowed, warned and denied
//! (`tests/image.rs` keeps them so).

/// A Composition of the training, with the schema files it is validated against.
pub struct TestdataCase {
    /// The file holding the Composition, from the project's root.
    pub file: &'static str,
    /// Its XRD and CRDs, from the project's root.
    pub schemas: &'static [&'static str],
    /// What it is, for the bench's report.
    pub what: &'static str,
}

/// The example's XRD and the provider CRDs its bases need.
const EXAMPLE_SCHEMAS: &[&str] = &[
    "testdata/crds/compute.gcp.upbound.io_networks.yaml",
    "testdata/crds/compute.gcp.upbound.io_subnetworks.yaml",
    "testdata/example/definition.yaml",
];

/// The cases, the bench's default without the corpus first.
pub const TESTDATA_CASES: &[TestdataCase] = &[
    TestdataCase {
        file: "testdata/example/composition.yaml",
        schemas: EXAMPLE_SCHEMAS,
        what: "platform-ref-gcp network: Resources mode, a v1 XRD, 2 managed resources",
    },
    TestdataCase {
        file: "testdata/v2/app/composition.yaml",
        schemas: &["testdata/v2/app/definition.yaml"],
        what: "Crossplane v2 App: Pipeline, a namespaced XR composing a Deployment and a Service",
    },
    TestdataCase {
        file: "testdata/v2/bucket-composition.yaml",
        schemas: &[
            "testdata/v2/basic-namespaced.definition.yaml",
            "testdata/v2/crds/s3.aws.m.upbound.io_buckets.yaml",
        ],
        what: "Crossplane v2: Pipeline, a namespaced XR composing a namespaced S3 Bucket",
    },
    TestdataCase {
        file: "testdata/patch-and-transform/composition.yaml",
        schemas: &["testdata/patch-and-transform/definition.yaml"],
        what: "function-patch-and-transform's example: Pipeline, transforms, composed kinds without schemas (warnings)",
    },
    TestdataCase {
        file: "testdata/invalid/composition.yaml",
        schemas: EXAMPLE_SCHEMAS,
        what: "the example with a mistake per check (denied)",
    },
];
