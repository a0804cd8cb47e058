//! The threads that decode and validate reviews: a fixed set, one per worker, the most
//! recently idle one taking the next review.
//!
//! A review allocates thousands of blocks, each from its thread's own allocator heap. On
//! tokio's blocking pool (a thread per review in flight, woken in turn) every review ran on
//! a heap last touched several reviews before, out of cache: at concurrency 8 the same
//! instructions took twice the CPU they take in one thread (docs/performance.md). Here the
//! thread that finished last, whose memory is still in cache, takes the next review.
//!
//! The threads run at a lower scheduling priority than the server's own (a nice increment):
//! a request read or an answer written, a few microseconds of work each, then runs as soon
//! as its thread wakes instead of waiting out a validation's time slice. At concurrency 8
//! on two cores that cut the 99th percentile of a cold review by 12-18% at the same rate on
//! a busy machine; on an idle one it gave up 11-26% of the throughput at saturation for a
//! 99th percentile no lower (docs/performance.md). Where the server has a cgroup of its
//! own, as in a Kubernetes pod, this orders only its own threads; elsewhere the increment
//! is 0 by default, since a nice-19 thread loses to every busy process beside it.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::{self, Thread};

/// The stack of a review's thread: a review nested 10,002 levels deep needs between 32 and
/// 96 MiB in a debug build (tests/bounded.rs), much less in release. Address space, touched
/// only as deep as a review goes.
pub const REVIEW_STACK_BYTES: usize = 256 * 1024 * 1024;

/// How many nice levels below the server's own threads reviews run where the process has a
/// CPU cgroup of its own (`--review-nice auto`): the lowest priority of the normal
/// scheduling class.
pub const DEFAULT_REVIEW_NICE: i32 = 19;

/// A review's work, boxed to cross to a thread.
type Job = Box<dyn FnOnce() + Send>;

/// Why a review's work gave no result.
#[derive(Debug, thiserror::Error)]
pub enum ReviewThreadError {
    /// The work panicked (a bug); its thread goes on with the next review.
    #[error("validation panicked: {0}")]
    Panicked(String),
    /// The threads stopped before the work ran.
    #[error("the review threads have stopped")]
    Stopped,
}

/// A fixed set of threads running reviews' work; they stop when this is dropped (after the
/// work queued).
pub struct ReviewThreads {
    shared: Arc<Shared>,
}

struct Shared {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Work not started yet, oldest first.
    jobs: VecDeque<Job>,
    /// Threads waiting for work, the most recently idle last.
    idle: Vec<Thread>,
    /// Set when the owner is dropped: threads end once `jobs` is empty.
    stopped: bool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Work runs outside the lock and its panics are caught: a poisoned lock still holds
        // a consistent queue.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl ReviewThreads {
    /// Starts `threads` threads (at least one) named `review-<n>`, each with a stack of
    /// `stack_bytes`, `nice` levels below the calling thread's priority (at most down to
    /// nice 19; 0 leaves it). A priority that cannot be lowered is logged, not an error.
    pub fn start(threads: usize, stack_bytes: usize, nice: i32) -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
        });
        for n in 0..threads.max(1) {
            let shared = shared.clone();
            thread::Builder::new()
                .name(format!("review-{n}"))
                .stack_size(stack_bytes)
                .spawn(move || {
                    if let Err(e) = super::priority::lower_this_thread(nice) {
                        tracing::warn!(error = %e, nice, "cannot lower the review thread's priority");
                    }
                    work(&shared)
                })?;
        }
        Ok(ReviewThreads { shared })
    }

    /// Runs `work` on one of the threads; its result, or why there is none. Dropping the
    /// future does not stop the work (the work's own budget does).
    pub fn run<T, W>(
        &self,
        work: W,
    ) -> impl Future<Output = Result<T, ReviewThreadError>> + use<T, W>
    where
        T: Send + 'static,
        W: FnOnce() -> T + Send + 'static,
    {
        let (sender, receiver) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move || {
            let result = catch_unwind(AssertUnwindSafe(work))
                .map_err(|panic| ReviewThreadError::Panicked(panic_message(panic.as_ref())));
            // The caller may have gone (its deadline passed): the result is dropped.
            let _ = sender.send(result);
        });
        let waking = {
            let mut state = self.shared.lock();
            state.jobs.push_back(job);
            state.idle.pop()
        };
        if let Some(thread) = waking {
            thread.unpark();
        }
        async move { receiver.await.unwrap_or(Err(ReviewThreadError::Stopped)) }
    }
}

impl Drop for ReviewThreads {
    fn drop(&mut self) {
        let idle = {
            let mut state = self.shared.lock();
            state.stopped = true;
            std::mem::take(&mut state.idle)
        };
        for thread in idle {
            thread.unpark();
        }
    }
}

/// A thread's loop: the oldest work first; when there is none, wait at the top of the idle
/// stack.
fn work(shared: &Shared) {
    let me = thread::current();
    loop {
        let job = {
            let mut state = shared.lock();
            loop {
                // Woken spuriously, a thread may still be listed idle: it is not any more.
                state.idle.retain(|t| t.id() != me.id());
                if let Some(job) = state.jobs.pop_front() {
                    break job;
                }
                if state.stopped {
                    return;
                }
                state.idle.push(me.clone());
                drop(state);
                // An unpark between the unlock and here is kept: `park` returns at once.
                thread::park();
                state = shared.lock();
            }
        };
        job();
    }
}

/// The message of a panic's payload.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[tokio::test]
    async fn runs_work_and_returns_its_result() {
        let threads = ReviewThreads::start(2, 1 << 20, 0).expect("threads");
        let name = threads
            .run(|| thread::current().name().map(str::to_string))
            .await
            .expect("a result");
        assert!(
            name.is_some_and(|n| n.starts_with("review-")),
            "on a review thread"
        );
        assert_eq!(threads.run(|| 6 * 7).await.expect("a result"), 42);
    }

    #[tokio::test]
    async fn a_panic_is_an_error_and_the_thread_goes_on() {
        let threads = ReviewThreads::start(1, 1 << 20, 0).expect("threads");
        let panicked = threads.run(|| -> u8 { panic!("a bug") }).await;
        assert_eq!(
            panicked.expect_err("the panic").to_string(),
            "validation panicked: a bug"
        );
        assert_eq!(threads.run(|| 1).await.expect("the same thread, again"), 1);
    }

    #[tokio::test]
    async fn more_work_than_threads_all_runs_with_at_most_that_many_at_once() {
        let threads = ReviewThreads::start(2, 1 << 20, 0).expect("threads");
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let results = futures::future::join_all((0..16).map(|i| {
            let (running, most) = (running.clone(), most.clone());
            threads.run(move || {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                thread::sleep(Duration::from_millis(2));
                running.fetch_sub(1, Ordering::SeqCst);
                i
            })
        }))
        .await;
        let results: Vec<usize> = results.into_iter().map(|r| r.expect("ran")).collect();
        assert_eq!(results, (0..16).collect::<Vec<_>>());
        assert_eq!(most.load(Ordering::SeqCst), 2, "two threads, both used");
    }

    #[tokio::test]
    async fn the_most_recently_idle_thread_takes_the_next_work() {
        let threads = ReviewThreads::start(4, 1 << 20, 0).expect("threads");
        let all_idle = || async {
            let until = std::time::Instant::now() + Duration::from_secs(5);
            while threads.shared.lock().idle.len() < 4 && std::time::Instant::now() < until {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        };
        // One at a time, each once all four are parked: the same thread every time.
        let mut names = Vec::new();
        for _ in 0..8 {
            all_idle().await;
            let name = threads
                .run(|| thread::current().name().map(str::to_string))
                .await
                .expect("a result");
            names.push(name);
        }
        assert!(names.windows(2).all(|w| w[0] == w[1]), "{names:?}");
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn reviews_run_the_given_nice_levels_below_the_caller() {
        use crate::server::priority::this_thread_nice;
        let base = this_thread_nice();
        let threads = ReviewThreads::start(2, 1 << 20, 3).expect("threads");
        for _ in 0..4 {
            let nice = threads.run(this_thread_nice).await.expect("a result");
            assert_eq!(nice, (base + 3).min(19));
        }
        assert_eq!(this_thread_nice(), base, "the caller's own is left");
        let threads = ReviewThreads::start(1, 1 << 20, 0).expect("threads");
        assert_eq!(threads.run(this_thread_nice).await.expect("a result"), base);
        let threads = ReviewThreads::start(1, 1 << 20, 19).expect("threads");
        assert_eq!(
            threads.run(this_thread_nice).await.expect("a result"),
            (base + 19).min(19),
            "at most 19"
        );
    }

    #[tokio::test]
    async fn dropped_threads_end_and_queued_work_still_runs() {
        let threads = ReviewThreads::start(1, 1 << 20, 0).expect("threads");
        let pending = threads.run(|| {
            thread::sleep(Duration::from_millis(20));
            1
        });
        let queued = threads.run(|| 2);
        let shared = Arc::downgrade(&threads.shared);
        drop(threads);
        assert_eq!(pending.await.expect("ran"), 1);
        assert_eq!(queued.await.expect("ran"), 2);
        // Each thread holds the queue until it ends.
        let until = std::time::Instant::now() + Duration::from_secs(5);
        while shared.strong_count() > 0 && std::time::Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert_eq!(shared.strong_count(), 0, "the thread ended");
    }
}
