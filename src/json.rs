//! Lookups in JSON objects. Most objects in a Composition and what it renders have a
//! handful of members, which a scan finds faster than serde_json's map, which hashes every
//! key it looks up with SipHash.

use serde_json::{Map, Value};

/// Objects of at most this many members are scanned rather than hashed.
const SCANNED_MEMBERS: usize = 16;

/// The member `key` of `map`: what `map.get(key)` returns.
#[inline]
pub fn member<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    if map.len() <= SCANNED_MEMBERS {
        map.iter().find_map(|(k, v)| (k == key).then_some(v))
    } else {
        map.get(key)
    }
}

/// The member `key` of `map`, to change: what `map.get_mut(key)` returns.
#[inline]
pub fn member_mut<'a>(map: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Value> {
    if map.len() <= SCANNED_MEMBERS {
        map.iter_mut().find_map(|(k, v)| (k == key).then_some(v))
    } else {
        map.get_mut(key)
    }
}

/// Where `key` is among the members of a small `map` (scanned, not hashed); `None` when it
/// is not there or `map` is larger than that, so that the caller hashes it.
#[inline]
pub fn scanned_position(map: &Map<String, Value>, key: &str) -> Option<usize> {
    if map.len() <= SCANNED_MEMBERS {
        map.keys().position(|k| k == key)
    } else {
        None
    }
}

/// The member `key` of `value` when it is an object: what `value.get(key)` returns.
#[inline]
pub fn field<'a>(value: &'a Value, key: &str) -> Option<&'a Value> {
    value.as_object().and_then(|map| member(map, key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_member_is_what_the_map_gets() {
        for size in [0, 1, 2, SCANNED_MEMBERS, SCANNED_MEMBERS + 1, 100] {
            let map: Map<String, Value> = (0..size)
                .map(|i| (format!("k{i}"), Value::from(i)))
                .collect();
            assert_eq!(field(&Value::from(1), "k0"), None);
            for key in ["k0", "k1", "k16", "k17", "k99", "", "k", "k00"] {
                assert_eq!(member(&map, key), map.get(key), "{size} members, {key:?}");
                let value = Value::Object(map.clone());
                assert_eq!(field(&value, key), value.get(key));
                let (mut scanned, mut hashed) = (map.clone(), map.clone());
                assert_eq!(member_mut(&mut scanned, key), hashed.get_mut(key));
                let at = scanned_position(&map, key);
                match at {
                    Some(i) => assert_eq!(map.keys().nth(i).map(String::as_str), Some(key)),
                    None => assert!(size > SCANNED_MEMBERS || map.get(key).is_none()),
                }
            }
        }
    }
}
