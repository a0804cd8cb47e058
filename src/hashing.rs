//! The hashers of the webhook's hash sets and maps, chosen by what their keys are; none on a
//! review's path is std's SipHash, which costs several times as much on the short keys hashed
//! per review (the `cel` crate's own maps aside).
//!
//! The members of every JSON object (`serde_json::Map`, an `IndexMap` with serde_json's
//! `preserve_order`) are keys an input chose too: the build takes serde_json from
//! `vendor/serde_json`, whose maps hash with [`ByInput`]'s hasher (upstream's use SipHash;
//! `vendor/README.md` says why and how to update it).

/// For keys an input chose (the names a Composition declares, the keys of a list map in a
/// rendered object): foldhash's quality hasher, seeded per process, so that an input cannot
/// aim at collisions of a hash it knows.
pub type ByInput = foldhash::quality::RandomState;

/// For keys that are addresses of what the webhook itself holds: foldhash's fast hasher,
/// unseeded (no input chooses an address).
pub type ByAddress = foldhash::fast::FixedState;

/// For the property names of a schema, which a definition's author chose: foldhash's fast
/// hasher, seeded per process; looked up for every member of every object validated.
pub type BySchema = foldhash::fast::RandomState;

#[cfg(test)]
mod tests {
    use serde_json::{Map, Value};

    /// The vendored serde_json is the one built: its maps hash with foldhash's quality
    /// hasher (eight bytes of state), not std's SipHash (sixteen).
    #[test]
    fn json_maps_hash_keys_as_input() {
        type WithFoldhash = indexmap::IndexMap<String, Value, super::ByInput>;
        type WithSipHash = indexmap::IndexMap<String, Value, std::hash::RandomState>;
        assert_ne!(size_of::<WithFoldhash>(), size_of::<WithSipHash>());
        assert_eq!(size_of::<Map<String, Value>>(), size_of::<WithFoldhash>());
    }
}
