//! A circuit breaker per function: after [`BreakerConfig::failures`] failures in a row
//! the function is not called for [`BreakerConfig::cool_down`], so a function that is down
//! or hangs costs each review nothing instead of its whole deadline.
//!
//! States: closed (calls pass, failures in a row counted), open (calls refused until the
//! cool-down ends), half-open (one trial call; its success closes the breaker, its failure
//! opens it for another cool-down). A trial whose caller gave up without an outcome (its
//! future dropped) does not hold the breaker half-open forever: another trial is let
//! through once a cool-down has passed since.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// When the breaker opens and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerConfig {
    /// Failures in a row (unreachable, deadline, an error status, a bad or oversized
    /// answer) that open the breaker; 0 never opens it. A call whose deadline passed while
    /// it waited for a place among the calls in flight never reached the function, and is
    /// none.
    pub failures: u32,
    /// How long an open breaker refuses calls before it lets one trial through.
    pub cool_down: Duration,
}

impl BreakerConfig {
    /// 5 failures in a row, 30 s of cool-down: a function that fails five reviews running
    /// is left alone for 30 s, then tried by one review. Five, so that one slow answer or a
    /// restarting pod does not open it; 30 s, the order of a function pod's restart.
    pub const DEFAULT: BreakerConfig = BreakerConfig {
        failures: 5,
        cool_down: Duration::from_secs(30),
    };
}

impl Default for BreakerConfig {
    fn default() -> Self {
        BreakerConfig::DEFAULT
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Closed { failures: u32 },
    Open { until: Instant },
    HalfOpen { since: Instant },
}

/// The breaker of one function.
#[derive(Debug)]
pub struct Breaker {
    config: BreakerConfig,
    state: Mutex<State>,
}

impl Breaker {
    /// A closed breaker.
    pub fn new(config: BreakerConfig) -> Self {
        Breaker {
            config,
            state: Mutex::new(State::Closed { failures: 0 }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // The state is a plain value, valid whatever a panicking holder did.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether a call may go now; `Err` holds how long until the breaker lets one through.
    pub fn admit(&self, now: Instant) -> Result<(), Duration> {
        let mut state = self.state();
        match *state {
            State::Closed { .. } => Ok(()),
            State::Open { until } | State::HalfOpen { since: until } if now < until => {
                Err(until - now)
            }
            State::Open { .. } | State::HalfOpen { .. } => {
                // This call is the trial; others wait for its outcome, or for a cool-down.
                *state = State::HalfOpen {
                    since: now + self.config.cool_down,
                };
                Ok(())
            }
        }
    }

    /// The outcome of an admitted call.
    pub fn record(&self, success: bool, now: Instant) {
        let mut state = self.state();
        if success {
            *state = State::Closed { failures: 0 };
            return;
        }
        let failures = match *state {
            State::Closed { failures } => failures.saturating_add(1),
            // A failed trial, or a late failure of a call admitted before the breaker
            // opened: open again.
            State::Open { .. } | State::HalfOpen { .. } => self.config.failures,
        };
        *state = if self.config.failures > 0 && failures >= self.config.failures {
            State::Open {
                until: now + self.config.cool_down,
            }
        } else {
            State::Closed { failures }
        };
    }

    /// Whether calls are refused now (open, or half-open with its trial under way).
    pub fn is_open(&self, now: Instant) -> bool {
        self.retry_in(now).is_some()
    }

    /// How long until a call is let through, if calls are refused now; unlike
    /// [`Breaker::admit`] it changes nothing, so a call may ask before it waits for a place
    /// and be admitted once it has one.
    pub fn retry_in(&self, now: Instant) -> Option<Duration> {
        match *self.state() {
            State::Closed { .. } => None,
            State::Open { until } | State::HalfOpen { since: until } => {
                (now < until).then(|| until - now)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: BreakerConfig = BreakerConfig {
        failures: 3,
        cool_down: Duration::from_secs(10),
    };

    #[test]
    fn opens_after_failures_in_a_row_and_closes_after_a_good_trial() {
        let breaker = Breaker::new(CONFIG);
        let t0 = Instant::now();
        for _ in 0..2 {
            assert_eq!(breaker.admit(t0), Ok(()));
            breaker.record(false, t0);
        }
        // A success resets the count.
        breaker.record(true, t0);
        for _ in 0..2 {
            breaker.record(false, t0);
        }
        assert_eq!(breaker.admit(t0), Ok(()));
        breaker.record(false, t0);
        assert!(breaker.is_open(t0));
        assert_eq!(breaker.admit(t0), Err(Duration::from_secs(10)));
        let t1 = t0 + Duration::from_secs(4);
        assert_eq!(breaker.retry_in(t1), Some(Duration::from_secs(6)));
        assert_eq!(breaker.admit(t1), Err(Duration::from_secs(6)));

        // After the cool-down one trial goes; others are refused while it runs.
        let t2 = t0 + Duration::from_secs(10);
        // Asking changes nothing: the trial is still to come.
        assert_eq!(breaker.retry_in(t2), None);
        assert_eq!(breaker.retry_in(t2), None);
        assert_eq!(breaker.admit(t2), Ok(()));
        assert_eq!(breaker.retry_in(t2), Some(Duration::from_secs(10)));
        assert!(breaker.admit(t2).is_err());
        breaker.record(true, t2);
        assert!(!breaker.is_open(t2));
        assert_eq!(breaker.admit(t2), Ok(()));
    }

    #[test]
    fn a_failed_trial_opens_it_again() {
        let breaker = Breaker::new(CONFIG);
        let t0 = Instant::now();
        for _ in 0..3 {
            breaker.record(false, t0);
        }
        let t1 = t0 + Duration::from_secs(10);
        assert_eq!(breaker.admit(t1), Ok(()));
        breaker.record(false, t1);
        assert_eq!(breaker.admit(t1), Err(Duration::from_secs(10)));
    }

    #[test]
    fn an_abandoned_trial_does_not_hold_it_half_open() {
        let breaker = Breaker::new(CONFIG);
        let t0 = Instant::now();
        for _ in 0..3 {
            breaker.record(false, t0);
        }
        let t1 = t0 + Duration::from_secs(10);
        assert_eq!(breaker.admit(t1), Ok(()));
        // No outcome recorded: the next trial waits a cool-down, then goes.
        assert!(breaker.admit(t1 + Duration::from_secs(9)).is_err());
        assert_eq!(breaker.admit(t1 + Duration::from_secs(10)), Ok(()));
    }

    #[test]
    fn zero_failures_never_opens() {
        let breaker = Breaker::new(BreakerConfig {
            failures: 0,
            ..CONFIG
        });
        let t0 = Instant::now();
        for _ in 0..100 {
            breaker.record(false, t0);
        }
        assert_eq!(breaker.admit(t0), Ok(()));
    }
}
