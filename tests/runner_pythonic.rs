//! The RunFunction client (`src/runner/`) against a real third-party function:
//! function-pythonic 0.6.3 from PyPI, installed into a virtual environment by
//! `scripts/function-pythonic.sh` (once per target directory) and started on loopback with
//! `--insecure`, as `crossplane render` starts functions. The Composition input is the
//! example of function-pythonic's README (an MR `vpc` from the XR's `spec.region` and
//! `spec.cidr`).

#[path = "functions/launch.rs"]
mod launch;

use std::time::Duration;

use composition_webhook::render::structpb;
use composition_webhook::runner::proto::{self, RequestMeta};
use composition_webhook::runner::{self, AnswerLimits, Config, FunctionClient};
use serde_json::{Value, json};

/// Installs (once) and starts function-pythonic on a free loopback port, trying another
/// should the port be taken before the function binds it (`tests/functions/launch.rs`).
fn start() -> launch::Function {
    let function = launch::start_pythonic("function-pythonic", &["--insecure"]);
    eprintln!(
        "function-pythonic listening after {:?}",
        function.started_in
    );
    function
}

fn object(value: Value) -> prost_types::Struct {
    structpb::to_struct(
        value.as_object().expect("an object"),
        structpb::Limits::DEFAULT,
    )
    .expect("a struct")
}

/// The README example's request: the XR and the inline script.
fn request() -> proto::RunFunctionRequest {
    let xr = json!({
        "apiVersion": "example.crossplane.io/v1", "kind": "XR",
        "metadata": {"name": "demo"},
        "spec": {"region": "us-east-1", "cidr": "10.0.0.0/16"},
    });
    let input = json!({
        "apiVersion": "pythonic.fn.crossplane.io/v1alpha1", "kind": "Composite",
        "composite": "class VpcComposite(BaseComposite):\n  def compose(self):\n    vpc = self.resources.vpc('VPC', 'ec2.aws.crossplane.io/v1beta1')\n    vpc.spec.forProvider.region = self.spec.region\n    vpc.spec.forProvider.cidrBlock = self.spec.cidr\n    vpc.spec.forProvider.tags.count = 3\n    self.status.vpcId = vpc.status.atProvider.vpcId\n",
    });
    proto::RunFunctionRequest {
        meta: Some(RequestMeta {
            tag: "runner-pythonic".to_string(),
            capabilities: Vec::new(),
        }),
        observed: Some(proto::State {
            composite: Some(proto::Resource {
                resource: Some(object(xr)),
                ..proto::Resource::default()
            }),
            resources: Default::default(),
        }),
        input: Some(object(input)),
        ..proto::RunFunctionRequest::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn function_pythonic_composes_what_its_script_says() {
    let function = start();
    let client = FunctionClient::new(
        "function-pythonic",
        Config::insecure(format!("http://{}", function.address)),
    )
    .expect("a client");
    let response = client
        .run(request(), Duration::from_secs(20))
        .await
        .unwrap_or_else(|e| {
            panic!(
                "function-pythonic did not answer: {e}\n{}",
                function.output()
            )
        });
    assert_eq!(
        response.meta.as_ref().map(|m| m.tag.as_str()),
        Some("runner-pythonic")
    );
    let desired = runner::desired(&response, AnswerLimits::DEFAULT).expect("desired");
    assert_eq!(desired.resources.keys().collect::<Vec<_>>(), ["vpc"]);
    assert_eq!(
        Value::Object(desired.resources["vpc"].clone()),
        json!({
            "apiVersion": "ec2.aws.crossplane.io/v1beta1",
            "kind": "VPC",
            "spec": {"forProvider": {"region": "us-east-1", "cidrBlock": "10.0.0.0/16",
                "tags": {"count": 3}}},
        })
    );
    // 3 went out of Python as a protobuf double and came back an integer.
    assert!(desired.resources["vpc"]["spec"]["forProvider"]["tags"]["count"].is_i64());
}
