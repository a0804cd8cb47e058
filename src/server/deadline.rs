//! The time a review may take. The API server gives each call `timeoutSeconds` (1-30,
//! default 10) and passes what remains as `?timeout=<Go duration>`; an answer after that is a
//! failed call, which `failurePolicy: Fail` turns into a rejection that says only "context
//! deadline exceeded". So the webhook answers before it, keeping a margin for the way back.

use std::time::Duration;

/// The timeout when the API server sends none (its default `timeoutSeconds`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest timeout the API server allows.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(30);

/// How long validation may take for a call with `timeout`: a tenth is kept for the answer's
/// way back, at least 50 ms and at most one second.
pub fn budget(timeout: Duration) -> Duration {
    let timeout = timeout.min(MAX_TIMEOUT);
    timeout.saturating_sub(margin(timeout))
}

/// The time kept for the answer's way back: a tenth of `timeout`, at least 50 ms and at most
/// one second.
pub fn margin(timeout: Duration) -> Duration {
    (timeout.min(MAX_TIMEOUT) / 10).clamp(Duration::from_millis(50), Duration::from_secs(1))
}

/// The `timeout` parameter of a query string, if present and valid. The query is
/// percent-decoded first: Go's client escapes `µs` as `%C2%B5s`.
pub fn timeout_from_query(query: Option<&str>) -> Option<Duration> {
    form_urlencoded::parse(query?.as_bytes())
        .find(|(k, _)| k == "timeout")
        .and_then(|(_, v)| parse_go_duration(&v).ok())
}

/// A Go duration that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {0:?}: expected a number with a unit, as 10s, 500ms or 1m30s")]
pub struct InvalidDuration(pub String);

/// Parses a Go duration ([`crate::go::time::parse_duration`]): a sequence of decimal
/// numbers, each with a unit (`ns`, `us`, `µs`, `ms`, `s`, `m`, `h`), as `10s`, `1.5h` or
/// `2m30s`. Negative durations are refused: no timeout is in the past.
pub fn parse_go_duration(s: &str) -> Result<Duration, InvalidDuration> {
    let bad = || InvalidDuration(s.to_string());
    if s.starts_with('-') {
        return Err(bad());
    }
    crate::go::time::parse_duration(s)
        .ok()
        .and_then(|ns| u64::try_from(ns).ok())
        .map(Duration::from_nanos)
        .ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        let ms = Duration::from_millis;
        assert_eq!(parse_go_duration("10s"), Ok(ms(10_000)));
        assert_eq!(parse_go_duration("1m30s"), Ok(ms(90_000)));
        assert_eq!(parse_go_duration("1.5h"), Ok(ms(5_400_000)));
        assert_eq!(parse_go_duration("250ms"), Ok(ms(250)));
        assert_eq!(parse_go_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_go_duration("3us"), Ok(Duration::from_micros(3)));
        for bad in ["", "10", "s", "-1s", "1x", "1.2.3s", "."] {
            assert!(parse_go_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn query_and_budget() {
        assert_eq!(
            timeout_from_query(Some("dryRun=All&timeout=9s")),
            Some(Duration::from_secs(9))
        );
        assert_eq!(timeout_from_query(Some("timeout=soon")), None);
        // As Go's url.Values encodes it.
        assert_eq!(
            timeout_from_query(Some("timeout=500%C2%B5s")),
            Some(Duration::from_micros(500))
        );
        assert_eq!(
            timeout_from_query(Some("timeout=10s")),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            timeout_from_query(Some("timeout=1m30%73")),
            Some(Duration::from_secs(90))
        );
        assert_eq!(timeout_from_query(None), None);
        assert_eq!(budget(DEFAULT_TIMEOUT), Duration::from_secs(9));
        assert_eq!(budget(Duration::from_secs(1)), Duration::from_millis(900));
        assert_eq!(budget(Duration::from_secs(300)), Duration::from_secs(29));
        assert_eq!(budget(Duration::from_millis(20)), Duration::ZERO);
        assert_eq!(margin(Duration::ZERO), Duration::from_millis(50));
        assert_eq!(margin(DEFAULT_TIMEOUT), Duration::from_secs(1));
    }
}
