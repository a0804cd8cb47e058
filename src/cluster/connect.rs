//! The kube client: from `--kubeconfig`, else as kubectl finds a cluster (`KUBECONFIG`, then
//! `~/.kube/config`), else the pod's service account (in-cluster).

use std::path::Path;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use super::calls::{CallObserver, CallsLayer};

/// Why no client could be made.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The kubeconfig file could not be read or used.
    #[error("cannot use kubeconfig {path}: {source}")]
    Kubeconfig {
        /// The file.
        path: String,
        /// Why.
        source: kube::config::KubeconfigError,
    },
    /// Neither a kubeconfig nor the in-cluster service account was found.
    #[error(
        "cannot find a cluster: no --kubeconfig, no KUBECONFIG or ~/.kube/config, and not in a pod ({0})"
    )]
    Infer(#[from] kube::config::InferConfigError),
    /// The client could not be built (TLS configuration).
    #[error("cannot build the Kubernetes client: {0}")]
    Client(#[from] kube::Error),
}

/// A client for the cluster, its calls reported to `observer`.
pub async fn client(
    kubeconfig: Option<&Path>,
    observer: CallObserver,
) -> Result<(Client, String), ConnectError> {
    let config = match kubeconfig {
        Some(path) => {
            let error = |source| ConnectError::Kubeconfig {
                path: path.display().to_string(),
                source,
            };
            let file = Kubeconfig::read_from(path).map_err(error)?;
            Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
                .await
                .map_err(error)?
        }
        None => Config::infer().await?,
    };
    let mut config = config;
    // Retries are each caller's, with its own backoff and deadline: kube's built-in retry
    // of 429, 503 and 504 (15 tries, backing off to minutes) would keep a schema fetch past
    // its deadline with the API server's answers unsaid, and resend an Event or the report
    // after this replica lost the audit's Lease.
    config.default_retry = false;
    let server = config.cluster_url.to_string();
    let client = kube::client::ClientBuilder::try_from(config)?
        .with_layer(&CallsLayer::new(observer))
        .build();
    Ok((client, server))
}
