//! Generation counters of the schemas a validation reads: one per kind, one for the
//! Functions, and one bumped by every change. The server's verdict cache keeps, with each
//! answer, the generations of the schemas it used, and answers again only while they hold.
//!
//! They are bumped where [`super::SchemaChange`]s are sent, after the change is visible to
//! lookups, all under one lock: whoever reads a kind's new generation also reads the new
//! overall one.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::index::Key;

/// The counters (all 0 at start).
#[derive(Debug, Default)]
pub struct Generations {
    counters: Mutex<Counters>,
}

#[derive(Debug, Default)]
struct Counters {
    any: u64,
    /// Group, then kind: looked up by `&str` without building a key.
    kinds: HashMap<String, HashMap<String, u64>>,
    functions: u64,
}

impl Generations {
    fn lock(&self) -> MutexGuard<'_, Counters> {
        // Every update is a few increments: a poisoned lock still holds consistent data.
        self.counters.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The schemas of `kinds` changed.
    pub fn kinds_changed(&self, kinds: &BTreeSet<Key>) {
        let mut c = self.lock();
        c.any += 1;
        for (group, kind) in kinds {
            *c.kinds
                .entry(group.clone())
                .or_default()
                .entry(kind.clone())
                .or_default() += 1;
        }
    }

    /// The installed Functions changed.
    pub fn functions_changed(&self) {
        let mut c = self.lock();
        c.any += 1;
        c.functions += 1;
    }

    /// Changes so far, of anything.
    pub fn any(&self) -> u64 {
        self.lock().any
    }

    /// Changes so far to the schema of `group`, `kind`.
    pub fn kind(&self, group: &str, kind: &str) -> u64 {
        self.lock()
            .kinds
            .get(group)
            .and_then(|kinds| kinds.get(kind))
            .copied()
            .unwrap_or(0)
    }

    /// Changes so far to the installed Functions.
    pub fn functions(&self) -> u64 {
        self.lock().functions
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_change_bumps_its_own_counter_and_the_overall_one() {
        let g = Generations::default();
        assert_eq!(
            (g.any(), g.kind("example.org", "XDb"), g.functions()),
            (0, 0, 0)
        );
        g.kinds_changed(&BTreeSet::from([
            ("example.org".to_string(), "XDb".to_string()),
            (String::new(), "ConfigMap".to_string()),
        ]));
        assert_eq!(
            (
                g.any(),
                g.kind("example.org", "XDb"),
                g.kind("", "ConfigMap")
            ),
            (1, 1, 1)
        );
        assert_eq!((g.kind("example.org", "XQueue"), g.functions()), (0, 0));
        g.functions_changed();
        assert_eq!(
            (g.any(), g.kind("example.org", "XDb"), g.functions()),
            (2, 1, 1)
        );
    }
}
