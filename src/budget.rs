//! The budget of one validation: memory, work and time, checked as the work goes.
//!
//! A Composition of a few kilobytes can ask the renderer for gigabytes (`toFieldPath:
//! a[4294967295]`, `%999999v` chained through Format transforms, one large patch set applied
//! a thousand times) or minutes of CPU. The webhook sits in the API server's write path, so
//! no such input may crash, starve or stall it: every review runs inside [`Budget::run`],
//! and the code that grows data or loops over input asks the budget first.
//!
//! - [`reserve`] before an allocation whose size the input decides (an array grown to an
//!   index, a format width): refused when it would pass the memory limit, so the allocation
//!   never happens;
//! - [`step`] in every loop over input: counts work, and stops the loop once the budget is
//!   spent, the deadline has passed or the review was cancelled (the server's deadline
//!   answer, shutdown), so a worker is never held past its review's time.
//!
//! Once spent, the budget stays spent: every later [`step`] and [`reserve`] fails, so the
//! work unwinds at the next check, and [`Budget::run`] returns why ([`Exceeded`]). The
//! engine turns that into a finding.
//!
//! Memory is what the review's thread holds: with [`CountingAllocator`] as the global
//! allocator (the binary's), bytes allocated minus bytes freed on this thread since the
//! review started; without it (the library used elsewhere), the sum of the reservations.
//! Outside [`Budget::run`] nothing is limited.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::{Cell, RefCell};
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// The limits of one validation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes the validation may hold at once.
    pub memory_bytes: usize,
    /// Steps of work (patches applied, transforms run, values walked, ...).
    pub steps: u64,
}

impl Limits {
    /// The webhook's default limits: 64 MiB and a million steps. Every Composition of the
    /// test corpus validates within 4 MiB and 5,000 steps (a step is a patch applied, a
    /// transform, a resource validated, ...); a Composition of the API server's largest size
    /// (3 MiB, 6,800 resources) takes about 100 MiB.
    pub const DEFAULT: Limits = Limits {
        memory_bytes: 64 * 1024 * 1024,
        steps: 1_000_000,
    };
}

/// The command line's default memory per Composition: files are not bounded by the API
/// server's 3 MiB, and the machine is the user's.
pub const CLI_MEMORY_BYTES: usize = 256 * 1024 * 1024;

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}

/// Why a validation stopped before its end.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Exceeded {
    /// More memory than the limit.
    #[error("exceeds the memory budget of {} per review", human_bytes(*limit))]
    Memory {
        /// The limit in bytes.
        limit: usize,
    },
    /// More work than the limit.
    #[error("exceeds the work budget of {limit} steps per review")]
    Work {
        /// The limit in steps.
        limit: u64,
    },
    /// The deadline passed.
    #[error("did not finish before the deadline")]
    Deadline,
    /// The review was cancelled (its answer was already given, or the server is stopping).
    #[error("was cancelled")]
    Cancelled,
}

impl Exceeded {
    /// Whether the input itself asked for too much (memory or work), as opposed to running
    /// out of time, which depends on the machine.
    pub fn is_input(&self) -> bool {
        matches!(self, Exceeded::Memory { .. } | Exceeded::Work { .. })
    }
}

/// A size as people read it: `64 MiB`, `1.5 KiB`, `100 bytes`.
pub fn human_bytes(n: usize) -> String {
    const UNITS: [&str; 3] = ["KiB", "MiB", "GiB"];
    let mut value = n as f64;
    let mut unit = None;
    for u in UNITS {
        if value < 1024.0 {
            break;
        }
        value /= 1024.0;
        unit = Some(u);
    }
    match unit {
        None => format!("{n} bytes"),
        Some(u) if value.fract() == 0.0 => format!("{value:.0} {u}"),
        Some(u) => format!("{value:.1} {u}"),
    }
}

/// Sets a [`Budget`]'s cancellation from another thread.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    /// A cancellation not yet given.
    pub fn new() -> Self {
        Cancel::default()
    }

    /// Stops the validation at its next check.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether [`Cancel::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// The budget of one validation: its limits, deadline and cancellation.
#[derive(Debug, Clone, Default)]
pub struct Budget {
    limits: Limits,
    deadline: Option<Instant>,
    cancel: Option<Cancel>,
}

impl Budget {
    /// A budget with `limits`, no deadline and no cancellation.
    pub fn new(limits: Limits) -> Self {
        Budget {
            limits,
            deadline: None,
            cancel: None,
        }
    }

    /// The same budget, stopping at `deadline`.
    pub fn with_deadline(mut self, deadline: Instant) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// The same budget, stopped by `cancel`.
    pub fn with_cancel(mut self, cancel: Cancel) -> Self {
        self.cancel = Some(cancel);
        self
    }

    /// The limits.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Runs `f` within this budget on the current thread; returns its result and, when the
    /// budget was spent on the way, why. Nested runs use the outer budget.
    pub fn run<R>(&self, f: impl FnOnce() -> R) -> (R, Option<Exceeded>) {
        if ACTIVE.with(|a| a.borrow().is_some()) {
            return (f(), None);
        }
        let state = State {
            limits: self.limits,
            deadline: self.deadline,
            cancel: self.cancel.clone(),
            start_net: net_allocated(),
            reserved: 0,
            steps: 0,
            exceeded: None,
            at: None,
        };
        ACTIVE.with(|a| *a.borrow_mut() = Some(state));
        // Cleared however `f` ends, so a panic does not leave a spent budget on a pooled
        // thread.
        struct Clear;
        impl Drop for Clear {
            fn drop(&mut self) {
                ACTIVE.with(|a| a.borrow_mut().take());
            }
        }
        let clear = Clear;
        let out = f();
        let exceeded = ACTIVE.with(|a| a.borrow().as_ref().and_then(|s| s.exceeded.clone()));
        drop(clear);
        (out, exceeded)
    }
}

/// What the running budget has used.
struct State {
    limits: Limits,
    deadline: Option<Instant>,
    cancel: Option<Cancel>,
    /// Net bytes allocated on this thread when the run started.
    start_net: isize,
    /// Bytes reserved, counted when no [`CountingAllocator`] measures them.
    reserved: usize,
    steps: u64,
    exceeded: Option<Exceeded>,
    /// Where the work was when the budget was spent.
    at: Option<String>,
}

impl State {
    fn held(&self) -> usize {
        if COUNTING.load(Ordering::Relaxed) {
            usize::try_from(net_allocated().saturating_sub(self.start_net)).unwrap_or(0)
        } else {
            self.reserved
        }
    }

    /// The cancellation; with `full`, the deadline and the memory held too.
    fn check(&mut self, full: bool) -> Result<(), Exceeded> {
        if self.cancel.as_ref().is_some_and(Cancel::is_cancelled) {
            return Err(self.fail(Exceeded::Cancelled));
        }
        if full {
            if self.deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(self.fail(Exceeded::Deadline));
            }
            if self.held() > self.limits.memory_bytes {
                let limit = self.limits.memory_bytes;
                return Err(self.fail(Exceeded::Memory { limit }));
            }
        }
        Ok(())
    }

    fn fail(&mut self, e: Exceeded) -> Exceeded {
        if self.exceeded.is_none() {
            self.exceeded = Some(e.clone());
        }
        self.exceeded.clone().unwrap_or(e)
    }
}

thread_local! {
    static ACTIVE: RefCell<Option<State>> = const { RefCell::new(None) };
}

/// How many steps pass between two looks at the clock.
const CLOCK_EVERY: u64 = 64;

/// One step of work. Fails once the budget is spent (now or before), the deadline has
/// passed or the validation was cancelled; loops over input stop on the first failure.
pub fn step() -> Result<(), Exceeded> {
    steps(1)
}

/// `n` steps of work at once (a walk over `n` values), as [`step`].
pub fn steps(n: u64) -> Result<(), Exceeded> {
    with_active(|s| {
        let before = s.steps;
        s.steps = s.steps.saturating_add(n);
        if s.steps > s.limits.steps {
            let limit = s.limits.steps;
            return Err(s.fail(Exceeded::Work { limit }));
        }
        // The clock and the memory every CLOCK_EVERY steps; the cancellation every step.
        let full = before / CLOCK_EVERY != s.steps / CLOCK_EVERY || n > 1;
        s.check(full)
    })
}

/// Checks the memory held, the deadline and the cancellation without counting a step: at
/// the boundaries of work that allocates without steps (decoding, copying a document).
pub fn check() -> Result<(), Exceeded> {
    with_active(|s| s.check(true))
}

/// Runs `f` on the running budget's state, unless it is spent (or there is none).
fn with_active(f: impl FnOnce(&mut State) -> Result<(), Exceeded>) -> Result<(), Exceeded> {
    ACTIVE.with(|a| {
        let mut a = a.borrow_mut();
        let Some(s) = a.as_mut() else {
            return Ok(());
        };
        if let Some(e) = &s.exceeded {
            return Err(e.clone());
        }
        f(s)
    })
}

/// Asks for `bytes` more memory before allocating them: fails when the validation would
/// then hold more than its limit (or the budget is already spent).
pub fn reserve(bytes: usize) -> Result<(), Exceeded> {
    with_active(|s| {
        let limit = s.limits.memory_bytes;
        if s.held().saturating_add(bytes) > limit {
            return Err(s.fail(Exceeded::Memory { limit }));
        }
        if !COUNTING.load(Ordering::Relaxed) {
            s.reserved = s.reserved.saturating_add(bytes);
        }
        Ok(())
    })
}

/// Why the running budget is spent, if it is (no further work should start then).
pub fn exceeded() -> Option<Exceeded> {
    ACTIVE.with(|a| a.borrow().as_ref().and_then(|s| s.exceeded.clone()))
}

/// The bytes the running validation may still take, if it runs within a budget.
pub fn remaining() -> Option<usize> {
    ACTIVE.with(|a| {
        a.borrow()
            .as_ref()
            .map(|s| s.limits.memory_bytes.saturating_sub(s.held()))
    })
}

/// The running budget's deadline, if it has one: what a wait outside this thread (a
/// function called) must end by.
pub fn deadline() -> Option<Instant> {
    ACTIVE.with(|a| a.borrow().as_ref().and_then(|s| s.deadline))
}

/// Whether the running budget is spent (no further work should start).
pub fn spent() -> bool {
    ACTIVE.with(|a| a.borrow().as_ref().is_some_and(|s| s.exceeded.is_some()))
}

/// The place the work was at when the budget was spent, if it was noted with [`spent_in`].
pub fn spent_at() -> Option<String> {
    ACTIVE.with(|a| a.borrow().as_ref().and_then(|s| s.at.clone()))
}

/// Notes `place` (a patch's path) as where the budget was spent, if it is spent and no
/// place is noted yet. The renderer calls it after each patch, and stops before the next
/// once the budget is spent, so the place is the patch that spent it; its path is written
/// out only then.
pub fn spent_in(place: impl FnOnce() -> String) {
    ACTIVE.with(|a| {
        if let Some(s) = a.borrow_mut().as_mut()
            && s.exceeded.is_some()
            && s.at.is_none()
        {
            s.at = Some(place());
        }
    })
}

/// The size in bytes of `n` JSON values in an array, for [`reserve`].
pub const fn values(n: usize) -> usize {
    n.saturating_mul(size_of::<serde_json::Value>())
}

/// Bytes a JSON value holds, roughly (its nodes and strings), counting one [`step`] per
/// node: what a copy of it costs.
pub fn size_of_value(v: &serde_json::Value) -> usize {
    use serde_json::Value;
    // A scalar (what most patches copy) needs no stack.
    match v {
        Value::String(s) => return size_of::<Value>().saturating_add(s.len()),
        Value::Array(_) | Value::Object(_) => {}
        _ => return size_of::<Value>(),
    }
    // Only objects and arrays go on the stack: most nodes are scalars, counted where they
    // are met.
    let mut total = 0usize;
    let mut stack = vec![v];
    fn meet<'a>(v: &'a Value, total: &mut usize, stack: &mut Vec<&'a Value>) {
        *total = total.saturating_add(size_of::<Value>());
        match v {
            Value::String(s) => *total = total.saturating_add(s.len()),
            Value::Array(_) | Value::Object(_) => stack.push(v),
            _ => {}
        }
    }
    total = total.saturating_add(size_of::<Value>());
    while let Some(v) = stack.pop() {
        match v {
            Value::Array(a) => {
                for v in a {
                    meet(v, &mut total, &mut stack);
                }
            }
            Value::Object(m) => {
                for (k, v) in m {
                    // Key, index entry and hash.
                    total = total.saturating_add(k.len() + 48);
                    meet(v, &mut total, &mut stack);
                }
            }
            _ => {}
        }
    }
    total
}

/// Reserves what a copy of `v` costs (see [`size_of_value`]) and counts its nodes as steps.
pub fn reserve_copy(v: &serde_json::Value) -> Result<(), Exceeded> {
    if !ACTIVE.with(|a| a.borrow().is_some()) {
        return Ok(());
    }
    let size = size_of_value(v);
    steps((size / size_of::<serde_json::Value>()) as u64 / 8 + 1)?;
    reserve(size)
}

impl fmt::Display for Limits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} and {} steps",
            human_bytes(self.memory_bytes),
            self.steps
        )
    }
}

// The allocator that measures each thread's memory.

/// Whether a [`CountingAllocator`] is the global allocator.
static COUNTING: AtomicBool = AtomicBool::new(false);

/// What the allocator counts on one thread: one const-initialised thread-local without a
/// destructor, so every access is a plain thread-local load with no lazy-init check.
struct Counter {
    /// Bytes allocated minus bytes freed on this thread (negative when it frees what
    /// another thread allocated).
    net: Cell<isize>,
    /// The highest `net` since [`peak_during`] started.
    peak: Cell<isize>,
}

thread_local! {
    static COUNTER: Counter = const {
        Counter {
            net: Cell::new(0),
            peak: Cell::new(0),
        }
    };
}

/// Runs `f` and returns, with its result, the most bytes this thread held at once during it
/// above what it held before (0 without [`CountingAllocator`]): for tests that check a
/// validation kept to its budget.
pub fn peak_during<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let start = net_allocated();
    let _ = COUNTER.try_with(|c| c.peak.set(start));
    let out = f();
    let peak = COUNTER.try_with(|c| c.peak.get()).unwrap_or(start);
    (
        out,
        usize::try_from(peak.saturating_sub(start)).unwrap_or(0),
    )
}

fn net_allocated() -> isize {
    COUNTER.try_with(|c| c.net.get()).unwrap_or(0)
}

/// Counts `bytes` allocated (or grown by): the net and, when it rises above it, the peak.
#[inline(always)]
fn count_alloc(bytes: isize) {
    // A const thread-local without a destructor is never torn down: `try_with` cannot
    // fail and compiles to the bare access.
    let _ = COUNTER.try_with(|c| {
        let now = c.net.get().wrapping_add(bytes);
        c.net.set(now);
        if now > c.peak.get() {
            c.peak.set(now);
        }
    });
}

/// Counts `bytes` freed (or shrunk by): a free never raises the peak.
#[inline(always)]
fn count_free(bytes: isize) {
    let _ = COUNTER.try_with(|c| c.net.set(c.net.get().wrapping_sub(bytes)));
}

/// A global allocator that counts, per thread, the bytes allocated and freed through it, so
/// that a [`Budget`] knows what its validation holds. Wraps another allocator:
///
/// ```ignore
/// #[global_allocator]
/// static GLOBAL: CountingAllocator<mimalloc::MiMalloc> = CountingAllocator(mimalloc::MiMalloc);
/// ```
pub struct CountingAllocator<A>(pub A);

/// The alignment `mi_malloc` gives every block at least as large as it (mimalloc's
/// `MI_MAX_ALIGN_SIZE`; the `mimalloc` crate's own `MIN_ALIGN` before it called
/// `mi_malloc_aligned` for every allocation).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
const MI_MIN_ALIGN: usize = 16;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const MI_MIN_ALIGN: usize = 8;

/// Whether the inner allocator is mimalloc (known at compile time).
#[inline(always)]
fn is_mimalloc<A: 'static>() -> bool {
    std::any::TypeId::of::<A>() == std::any::TypeId::of::<mimalloc::MiMalloc>()
}

// SAFETY: every call is passed to the inner allocator unchanged (for mimalloc, an
// allocation whose alignment every mimalloc block has goes to `mi_malloc`, which `MiMalloc`
// frees and reallocates like its own); counting touches only a thread-local integer.
unsafe impl<A: GlobalAlloc + 'static> GlobalAlloc for CountingAllocator<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // Read first: a store on every allocation would bounce the line between cores.
        if !COUNTING.load(Ordering::Relaxed) {
            COUNTING.store(true, Ordering::Relaxed);
        }
        count_alloc(layout.size() as isize);
        // `MiMalloc::alloc` always takes the aligned path (`mi_malloc_aligned`), a third
        // of mimalloc's instructions per allocation; the plain one serves the usual
        // layouts with the same alignment.
        if is_mimalloc::<A>() && layout.align() <= MI_MIN_ALIGN && layout.align() <= layout.size() {
            // SAFETY: a non-zero size (the alignment is at least 1 and at most the size);
            // the block is aligned to `MI_MIN_ALIGN` or to its size, at least
            // `layout.align()` either way.
            return unsafe { libmimalloc_sys::mi_malloc(layout.size()).cast() };
        }
        // SAFETY: the caller's contract is passed on.
        unsafe { self.0.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count_alloc(layout.size() as isize);
        // SAFETY: the caller's contract is passed on.
        unsafe { self.0.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count_free(layout.size() as isize);
        // SAFETY: the caller's contract is passed on.
        unsafe { self.0.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old = layout.size();
        if new_size >= old {
            count_alloc((new_size - old) as isize);
        } else {
            count_free((old - new_size) as isize);
        }
        // SAFETY: the caller's contract is passed on.
        unsafe { self.0.realloc(ptr, layout, new_size) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_limited_outside_a_run() {
        assert_eq!(reserve(usize::MAX), Ok(()));
        assert_eq!(steps(u64::MAX), Ok(()));
        assert!(!spent());
    }

    #[test]
    fn memory_is_refused_before_it_is_taken_and_stays_spent() {
        let budget = Budget::new(Limits {
            memory_bytes: 1000,
            steps: 100,
        });
        let ((first, second, after), exceeded) = budget.run(|| {
            let first = reserve(600);
            let second = reserve(600);
            (first, second, step())
        });
        let spent = Exceeded::Memory { limit: 1000 };
        assert_eq!(first, Ok(()));
        assert_eq!(second, Err(spent.clone()));
        assert_eq!(after, Err(spent.clone()));
        assert_eq!(exceeded, Some(spent));
        // The next run starts afresh.
        assert_eq!(budget.run(|| reserve(600)), (Ok(()), None));
    }

    #[test]
    fn work_deadline_and_cancellation_stop_loops() {
        let budget = Budget::new(Limits {
            memory_bytes: 1 << 20,
            steps: 10,
        });
        let (done, exceeded) = budget.run(|| (0..100).take_while(|_| step().is_ok()).count());
        assert_eq!(done, 10);
        assert_eq!(exceeded, Some(Exceeded::Work { limit: 10 }));

        let past = Budget::default().with_deadline(Instant::now());
        let (done, exceeded) = past.run(|| (0..1000).take_while(|_| step().is_ok()).count());
        assert!(done < CLOCK_EVERY as usize, "{done}");
        assert_eq!(exceeded, Some(Exceeded::Deadline));

        let cancel = Cancel::new();
        let budget = Budget::default().with_cancel(cancel.clone());
        let (done, exceeded) = budget.run(|| {
            (0..1000)
                .take_while(|i| {
                    if *i == 5 {
                        cancel.cancel();
                    }
                    step().is_ok()
                })
                .count()
        });
        assert_eq!(done, 5);
        assert_eq!(exceeded, Some(Exceeded::Cancelled));
    }

    #[test]
    fn the_place_is_kept_for_the_finding() {
        let budget = Budget::new(Limits {
            memory_bytes: 10,
            steps: 10,
        });
        let (at, exceeded) = budget.run(|| {
            // Not spent yet: nothing noted.
            spent_in(|| "spec.resources[0].patches[0]".into());
            let _ = reserve(11);
            spent_in(|| "spec.resources[0].patches[1]".into());
            // The first place noted stays.
            spent_in(|| "spec.resources[0].patches[2]".into());
            spent_at()
        });
        assert_eq!(at.as_deref(), Some("spec.resources[0].patches[1]"));
        assert!(exceeded.is_some_and(|e| e.is_input()));
    }

    #[test]
    fn messages_name_the_limits() {
        assert_eq!(
            Exceeded::Memory { limit: 64 << 20 }.to_string(),
            "exceeds the memory budget of 64 MiB per review"
        );
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(100), "100 bytes");
        assert_eq!(
            size_of_value(&serde_json::json!([1, "ab"])),
            3 * size_of::<serde_json::Value>() + 2
        );
    }

    /// What [`size_of_value`] counts, said recursively: a node each, a string's bytes, and
    /// each member's key with its index entry and hash.
    fn size_by_recursion(v: &serde_json::Value) -> usize {
        use serde_json::Value;
        size_of::<Value>()
            + match v {
                Value::String(s) => s.len(),
                Value::Array(a) => a.iter().map(size_by_recursion).sum(),
                Value::Object(m) => m
                    .iter()
                    .map(|(k, v)| k.len() + 48 + size_by_recursion(v))
                    .sum(),
                _ => 0,
            }
    }

    fn json_values() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
        use proptest::prelude::*;
        use serde_json::{Value, json};
        let leaf = prop_oneof![
            Just(Value::Null),
            Just(json!(true)),
            Just(json!(-1.5)),
            "[a-zé]{0,12}".prop_map(Value::String),
        ];
        leaf.prop_recursive(5, 64, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::btree_map("[a-z]{0,6}", inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        #[test]
        fn a_value_is_sized_as_its_nodes_strings_and_keys(v in json_values()) {
            proptest::prop_assert_eq!(size_of_value(&v), size_by_recursion(&v));
        }
    }
}
