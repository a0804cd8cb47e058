//! The hashers of the webhook's hash sets and maps, chosen by what their keys are; none is
//! std's SipHash, which costs several times as much on the short keys hashed per review.

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
