//! One compilation per schema: compiled schemas keyed by the address of the caller's
//! `Arc<Schema>`.
//!
//! An entry holds a `Weak` to the schema: while it exists the allocation cannot be reused
//! by another schema, and once the schema is dropped the entry is dead (`upgrade` fails) and
//! is purged at the next insertion. The compiled schema owns a copy of the structural
//! schema, so caching it does not keep the caller's `Arc` alive.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, PoisonError, Weak};

use super::{CompileError, CompiledSchema};
use crate::schema::Schema;

struct Entry {
    schema: Weak<Schema>,
    compiled: Arc<CompiledSchema>,
}

/// Compiled schemas by the address of their `Arc<Schema>`.
type Entries = HashMap<usize, Entry, crate::hashing::ByAddress>;

static CACHE: LazyLock<Mutex<Entries>> = LazyLock::new(Mutex::default);

/// The compiled form of `schema`, compiled on first use and cached as long as the
/// `Arc<Schema>` lives (keyed by the Arc's address, holding a `Weak` to detect reuse; dead
/// entries purged on insert).
///
/// Compilation happens outside the cache lock, so a slow compilation does not hold up other
/// lookups; two threads asking for the same new schema at once may both compile it, and the
/// first result is kept. Failures are not cached.
///
/// # Errors
///
/// The [`CompileError`] of [`CompiledSchema::compile`].
pub fn compiled(schema: &Arc<Schema>) -> Result<Arc<CompiledSchema>, CompileError> {
    let key = Arc::as_ptr(schema) as usize;
    if let Some(hit) = lookup(&lock(), key, schema) {
        return Ok(hit);
    }
    let fresh = Arc::new(CompiledSchema::compile(schema)?);
    let mut cache = lock();
    if let Some(hit) = lookup(&cache, key, schema) {
        return Ok(hit);
    }
    cache.retain(|_, entry| entry.schema.strong_count() > 0);
    cache.insert(
        key,
        Entry {
            schema: Arc::downgrade(schema),
            compiled: Arc::clone(&fresh),
        },
    );
    Ok(fresh)
}

fn lock() -> std::sync::MutexGuard<'static, Entries> {
    // A panic while holding the lock leaves the map consistent (every change is one call).
    CACHE.lock().unwrap_or_else(PoisonError::into_inner)
}

fn lookup(cache: &Entries, key: usize, schema: &Arc<Schema>) -> Option<Arc<CompiledSchema>> {
    let entry = cache.get(&key)?;
    let live = entry.schema.upgrade()?;
    Arc::ptr_eq(&live, schema).then(|| Arc::clone(&entry.compiled))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Arc<Schema> {
        Arc::new(
            Schema::from_value(&json!({"type": "object", "properties": {"a": {"type": "string"}}}))
                .expect("schema"),
        )
    }

    #[test]
    fn compiled_once_per_arc_and_purged_after_drop() {
        let a = schema();
        let first = compiled(&a).expect("compiles");
        let again = compiled(&a).expect("compiles");
        assert!(Arc::ptr_eq(&first, &again));
        let b = schema();
        let other = compiled(&b).expect("compiles");
        assert!(!Arc::ptr_eq(&first, &other));
        let key = Arc::as_ptr(&a) as usize;
        drop(a);
        // The dead entry goes at the next insertion.
        let c = schema();
        compiled(&c).expect("compiles");
        let cache = lock();
        let dead = cache
            .get(&key)
            .is_some_and(|e| e.schema.strong_count() == 0);
        assert!(!dead, "dead entries are purged on insert");
    }
}
