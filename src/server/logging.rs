//! Structured logs (tracing) on standard error, as text for people or JSON for collectors.
//!
//! Levels: every denial at info, every request the webhook could not validate at warn,
//! request details at debug, request and response bodies only at trace.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// The log format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One human-readable line per event.
    Text,
    /// One JSON object per event.
    Json,
}

/// Why logging could not start.
#[derive(Debug, thiserror::Error)]
pub enum LoggingError {
    /// The level is not a valid filter.
    #[error("invalid log level {level:?}: {source}")]
    Level {
        /// The level given.
        level: String,
        /// Why.
        source: tracing_subscriber::filter::ParseError,
    },
}

/// Installs the global subscriber. `level` is a level (`debug`) or a filter
/// (`info,composition_webhook=debug`). A bare `debug` or `trace` applies to this program
/// only: the HTTP/2 and TLS libraries would otherwise log every frame.
pub fn init(format: LogFormat, level: &str) -> Result<(), LoggingError> {
    let directives = match level.trim() {
        l @ ("debug" | "trace" | "DEBUG" | "TRACE") => format!("info,composition_webhook={l}"),
        other => other.to_string(),
    };
    let filter = EnvFilter::builder()
        .parse(&directives)
        .map_err(|source| LoggingError::Level {
            level: level.to_string(),
            source,
        })?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false);
    // A second subscriber (tests that start two servers) keeps the first one.
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    Ok(())
}
