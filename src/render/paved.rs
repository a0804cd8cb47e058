//! Getting and setting values by field path in JSON objects, with crossplane-runtime's
//! semantics (`fieldpath.Paved`): missing objects and arrays are created on the way, arrays
//! are extended with nulls, `[*]` expands over existing elements and keys, and merge options
//! deep-merge objects and append arrays.

use serde_json::{Map, Value};

use crate::fieldpath::{AsSegment, Segment, SegmentRef, Segments, path_string};

/// Why a value could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GetError {
    /// The field or element does not exist (the runtime skips optional patches then).
    #[error("{0}: no such field")]
    NoField(String),
    /// The array is shorter than the index.
    #[error("{0}: no such element")]
    NoElement(String),
    /// A segment indexes a value of the wrong kind.
    #[error("{0}: not an {1}")]
    WrongKind(String, &'static str),
}

impl GetError {
    /// Whether the path does not exist (as opposed to crossing a value of the wrong kind).
    pub fn is_not_found(&self) -> bool {
        matches!(self, GetError::NoField(_) | GetError::NoElement(_))
    }
}

/// Why a value could not be set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SetError {
    /// A segment crosses a value of the wrong kind (`spec.a is not an object`).
    #[error("{0} is not an {1}")]
    WrongKind(String, &'static str),
    /// `[*]` crosses a value that is neither an array nor an object.
    #[error("{0:?}: unexpected wildcard usage")]
    Wildcard(String),
    /// Growing an array to the index, or copying the value, would spend the review's budget.
    #[error("{0} {1}")]
    Budget(String, crate::budget::Exceeded),
}

/// Makes room in `array` for `index`, within the review's budget: an index such as
/// `[4294967295]` would otherwise ask for hundreds of gigabytes at once.
fn grow(array: &mut Vec<Value>, index: usize, at: impl FnOnce() -> String) -> Result<(), SetError> {
    if array.len() <= index {
        let more = index + 1 - array.len();
        crate::budget::reserve(crate::budget::values(more)).map_err(|e| {
            let what = format!("growing {} to {} elements", at(), index.saturating_add(1));
            SetError::Budget(what, e)
        })?;
        array.resize(index + 1, Value::Null);
    }
    Ok(())
}

/// `before` followed by `segment`: the path of the child being made.
fn segments_to<S: AsSegment>(before: &[S], segment: &S) -> Vec<Segment> {
    before
        .iter()
        .chain(std::iter::once(segment))
        .map(|s| s.as_segment().to_owned_segment())
        .collect()
}

/// The value at `path` (owned segments, as [`crate::fieldpath::parse`] gives, or borrowed).
pub fn get<'a, S: AsSegment>(object: &'a Value, segments: &[S]) -> Result<&'a Value, GetError> {
    let mut it = object;
    for (i, segment) in segments.iter().enumerate() {
        it = match segment.as_segment() {
            SegmentRef::Index(index) => {
                let array = it
                    .as_array()
                    .ok_or_else(|| GetError::WrongKind(path_string(&segments[..i]), "array"))?;
                array
                    .get(index as usize)
                    .ok_or_else(|| GetError::NoElement(path_string(&segments[..=i])))?
            }
            SegmentRef::Field(name) => {
                let map = it
                    .as_object()
                    .ok_or_else(|| GetError::WrongKind(path_string(&segments[..i]), "object"))?;
                crate::json::member(map, name)
                    .ok_or_else(|| GetError::NoField(path_string(&segments[..=i])))?
            }
        };
    }
    Ok(it)
}

/// The value at `path`, `None` when it does not exist; an error only when a segment
/// crosses a value of the wrong kind. Builds no message for absent fields (the common case
/// when patching from a mock).
pub fn find<'a, S: AsSegment>(
    object: &'a Value,
    path: &[S],
) -> Result<Option<&'a Value>, GetError> {
    let mut it = object;
    for segment in path {
        let next = match (segment.as_segment(), it) {
            (SegmentRef::Index(index), Value::Array(array)) => array.get(index as usize),
            (SegmentRef::Field(name), Value::Object(map)) => crate::json::member(map, name),
            // The same errors as `get`.
            _ => return get(object, path).map(Some),
        };
        match next {
            Some(v) => it = v,
            None => return Ok(None),
        }
    }
    Ok(Some(it))
}

/// Sets `value` at `path`, creating objects and arrays on the way.
pub fn set<S: AsSegment>(object: &mut Value, segments: &[S], value: Value) -> Result<(), SetError> {
    let Some((last, parents)) = segments.split_last() else {
        *object = value;
        return Ok(());
    };
    let mut it = object;
    for (i, segment) in parents.iter().enumerate() {
        let next = &segments[i + 1];
        it = child_mut(it, segment, next, &segments[..i])?;
    }
    match last.as_segment() {
        SegmentRef::Field(name) => {
            let map = it
                .as_object_mut()
                .ok_or_else(|| SetError::WrongKind(path_string(parents), "object"))?;
            // A member that is there is replaced in place, as `insert` would, without
            // hashing or copying its name.
            match crate::json::member_mut(map, name) {
                Some(member) => *member = value,
                None => {
                    map.insert(name.to_string(), value);
                }
            }
        }
        SegmentRef::Index(index) => {
            let array = it
                .as_array_mut()
                .ok_or_else(|| SetError::WrongKind(path_string(parents), "array"))?;
            let index = index as usize;
            grow(array, index, || path_string(parents))?;
            array[index] = value;
        }
    }
    Ok(())
}

/// The child `segment` of `it`, created (as an object or array, for `next`) when missing.
fn child_mut<'a, S: AsSegment>(
    it: &'a mut Value,
    segment: &S,
    next: &S,
    before: &[S],
) -> Result<&'a mut Value, SetError> {
    let at = || path_string(&segments_to(before, segment));
    let next = next.as_segment();
    let empty = || -> Result<Value, SetError> {
        Ok(match next {
            SegmentRef::Index(i) => {
                let mut array = Vec::new();
                grow(&mut array, i as usize, at)?;
                Value::Array(array)
            }
            SegmentRef::Field(_) => Value::Object(Map::new()),
        })
    };
    let child = match segment.as_segment() {
        SegmentRef::Field(name) => {
            let map = it
                .as_object_mut()
                .ok_or_else(|| SetError::WrongKind(path_string(before), "object"))?;
            // Most are there already: found without hashing or copying the name.
            match crate::json::scanned_position(map, name) {
                Some(i) => match map.values_mut().nth(i) {
                    Some(member) => member,
                    // Cannot be: the member was just found at `i`.
                    None => return Err(SetError::WrongKind(path_string(before), "object")),
                },
                None => map.entry(name.to_string()).or_insert(Value::Null),
            }
        }
        SegmentRef::Index(index) => {
            let array = it
                .as_array_mut()
                .ok_or_else(|| SetError::WrongKind(path_string(before), "array"))?;
            let index = index as usize;
            grow(array, index, || path_string(before))?;
            &mut array[index]
        }
    };
    if child.is_null() {
        *child = empty()?;
    } else if let (SegmentRef::Index(i), Some(array)) = (next, child.as_array_mut()) {
        // An existing array is extended so that the next index exists.
        grow(array, i as usize, at)?;
    }
    Ok(child)
}

/// How a value is merged into an existing one (crossplane-runtime `MergeOptions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Merge {
    /// Keep existing values of object keys instead of overwriting them.
    pub keep_map_values: bool,
    /// Append arrays to existing arrays (skipping elements already present).
    pub append_slice: bool,
}

/// Sets `value` at `path`, merged into the existing value when `merge` is given
/// (`Paved.MergeValue`): objects are merged key by key, arrays replaced or appended.
pub fn merge_value<S: AsSegment>(
    object: &mut Value,
    path: &[S],
    value: Value,
    merge: Option<Merge>,
) -> Result<(), SetError> {
    // Looked up only to merge, with `find`: a missing field (the common case) builds no
    // error message.
    let existing = match merge {
        Some(_) => find(object, path).ok().flatten(),
        None => None,
    };
    let merged = match (merge, existing) {
        (Some(m), Some(existing)) if !existing.is_null() && !value.is_null() => {
            crate::budget::reserve_copy(existing)
                .map_err(|e| SetError::Budget(format!("merging into {}", path_string(path)), e))?;
            let mut dst = existing.clone();
            merge_into(&mut dst, value, m);
            dst
        }
        _ => value,
    };
    set(object, path, merged)
}

/// mergo's semantics on JSON values: objects merge recursively; arrays are appended with
/// `append_slice`, otherwise replaced unless `keep_map_values`; scalars are overwritten
/// unless `keep_map_values` and the existing value is not empty.
fn merge_into(dst: &mut Value, src: Value, m: Merge) {
    match (dst, src) {
        (Value::Object(d), Value::Object(s)) => {
            for (k, v) in s {
                match d.get_mut(&k) {
                    Some(existing) if !existing.is_null() => merge_into(existing, v, m),
                    _ => {
                        d.insert(k, v);
                    }
                }
            }
        }
        (Value::Array(d), Value::Array(s)) if m.append_slice => {
            for item in s {
                if !d.contains(&item) {
                    d.push(item);
                }
            }
        }
        (d, s) => {
            if !m.keep_map_values || is_empty(d) {
                *d = s;
            }
        }
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

/// Every concrete path `path` stands for in `object`: each `[*]` replaced by the indexes of
/// the array (or the keys of the object, sorted) found there. As upstream, a concrete path
/// is kept only when it exists in full: `rules[*].port` skips rules without a port.
pub fn expand_wildcards<S: AsSegment>(
    object: &Value,
    path: &[S],
) -> Result<Vec<Segments>, SetError> {
    let mut out = Vec::new();
    expand(object, path, Vec::new(), &mut out)?;
    Ok(out)
}

fn expand<S: AsSegment>(
    it: &Value,
    rest: &[S],
    mut done: Vec<Segment>,
    out: &mut Vec<Segments>,
) -> Result<(), SetError> {
    let Some((segment, tail)) = rest.split_first() else {
        out.push(Segments(done));
        return Ok(());
    };
    match segment.as_segment() {
        SegmentRef::Field("*") => match it {
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    let mut next = done.clone();
                    next.push(Segment::Index(i as u32));
                    expand(item, tail, next, out)?;
                }
            }
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                for key in keys {
                    let mut next = done.clone();
                    next.push(Segment::Field(key.clone()));
                    expand(&map[key.as_str()], tail, next, out)?;
                }
            }
            _ => return Err(SetError::Wildcard(path_string(&done))),
        },
        SegmentRef::Field(name) => {
            if let Some(child) = it.as_object().and_then(|m| crate::json::member(m, name)) {
                done.push(Segment::Field(name.to_string()));
                expand(child, tail, done, out)?;
            }
        }
        SegmentRef::Index(index) => {
            if let Some(child) = it.as_array().and_then(|a| a.get(index as usize)) {
                done.push(Segment::Index(index));
                expand(child, tail, done, out)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fieldpath::parse;
    use serde_json::json;

    fn p(s: &str) -> Vec<Segment> {
        parse(s).expect("path").0
    }

    #[test]
    fn get_reports_like_the_runtime() {
        let v = json!({"spec": {"a": [1, {"b": "x"}], "s": "str"}});
        assert_eq!(get(&v, &p("spec.a[1].b")), Ok(&json!("x")));
        assert_eq!(
            get(&v, &p("spec.missing.x")).map_err(|e| e.to_string()),
            Err("spec.missing: no such field".to_string())
        );
        assert_eq!(
            get(&v, &p("spec.a[5]")).map_err(|e| e.to_string()),
            Err("spec.a[5]: no such element".to_string())
        );
        assert_eq!(
            get(&v, &p("spec.s.x")).map_err(|e| e.to_string()),
            Err("spec.s: not an object".to_string())
        );
        assert!(get(&v, &p("spec.nope")).unwrap_err().is_not_found());
        assert_eq!(find(&v, &p("spec.a[1].b")), Ok(Some(&json!("x"))));
        assert_eq!(find(&v, &p("spec.a[7].b")), Ok(None));
        assert_eq!(
            find(&v, &p("spec.s.x")).map_err(|e| e.to_string()),
            Err("spec.s: not an object".to_string())
        );
    }

    /// A path borrowed from its text (as a render's patches are parsed) reads, writes and
    /// fails as the same path parsed into owned segments.
    #[test]
    fn borrowed_paths_walk_as_owned_ones() {
        let v = json!({"spec": {"a": [1, {"b": "x"}], "s": "str", "m": {"k.x": {"y": 1}}}});
        let paths = [
            "spec.a[1].b",
            "spec.missing.x",
            "spec.a[5]",
            "spec.s.x",
            "spec.m[k.x].y",
            "spec.s[0]",
            "spec.a[*].b",
            "spec.m[*].y",
            "spec.s[*]",
        ];
        for path in paths {
            let owned = p(path);
            let borrowed = crate::fieldpath::parse_borrowed(path).expect("path");
            fn shown(r: Result<Option<&Value>, GetError>) -> Result<Option<Value>, String> {
                r.map(|v| v.cloned()).map_err(|e| e.to_string())
            }
            assert_eq!(
                shown(get(&v, &owned).map(Some)),
                shown(get(&v, &borrowed).map(Some)),
                "{path}"
            );
            assert_eq!(
                shown(find(&v, &owned)),
                shown(find(&v, &borrowed)),
                "{path}"
            );
            let expanded = |r: Result<Vec<Segments>, SetError>| {
                r.map(|t| t.iter().map(ToString::to_string).collect::<Vec<_>>())
                    .map_err(|e| e.to_string())
            };
            assert_eq!(
                expanded(expand_wildcards(&v, &owned)),
                expanded(expand_wildcards(&v, &borrowed)),
                "{path}"
            );
            let (mut a, mut b) = (v.clone(), v.clone());
            let written = |r: Result<(), SetError>| r.map_err(|e| e.to_string());
            assert_eq!(
                written(set(&mut a, &owned, json!(7))),
                written(set(&mut b, &borrowed, json!(7))),
                "{path}"
            );
            assert_eq!(a, b, "{path}");
        }
        // The words of an error name the path in either form.
        let borrowed = crate::fieldpath::parse_borrowed("spec.s.x").expect("path");
        assert_eq!(
            set(&mut v.clone(), &borrowed, json!(1)).map_err(|e| e.to_string()),
            Err("spec.s is not an object".to_string())
        );
    }

    #[test]
    fn set_creates_the_way() {
        let mut v = json!({});
        set(&mut v, &p("spec.list[2].name"), json!("n")).expect("set");
        set(&mut v, &p("metadata.labels[app.io/name]"), json!("a")).expect("set");
        assert_eq!(
            v,
            json!({"spec": {"list": [null, null, {"name": "n"}]},
                   "metadata": {"labels": {"app.io/name": "a"}}})
        );
        set(&mut v, &p("spec.list[4]"), json!(1)).expect("set");
        assert_eq!(v["spec"]["list"].as_array().map(Vec::len), Some(5));
        assert_eq!(
            set(&mut v, &p("spec.list.x"), json!(1)).map_err(|e| e.to_string()),
            Err("spec.list is not an object".to_string())
        );
    }

    #[test]
    fn merges() {
        let mut v = json!({"spec": {"tags": {"a": "1", "b": "2"}, "l": ["x"]}});
        let keep = Merge {
            keep_map_values: true,
            append_slice: true,
        };
        merge_value(
            &mut v,
            &p("spec.tags"),
            json!({"b": "3", "c": "4"}),
            Some(keep),
        )
        .expect("merge");
        merge_value(&mut v, &p("spec.l"), json!(["x", "y"]), Some(keep)).expect("merge");
        assert_eq!(
            v,
            json!({"spec": {"tags": {"a": "1", "b": "2", "c": "4"}, "l": ["x", "y"]}})
        );
        merge_value(
            &mut v,
            &p("spec.tags"),
            json!({"b": "9"}),
            Some(Merge::default()),
        )
        .expect("merge");
        assert_eq!(v["spec"]["tags"], json!({"a": "1", "b": "9", "c": "4"}));
        merge_value(&mut v, &p("spec.tags"), json!({"z": "1"}), None).expect("replace");
        assert_eq!(v["spec"]["tags"], json!({"z": "1"}));
    }

    #[test]
    fn wildcards_expand_over_what_exists() {
        let v = json!({"spec": {"rules": [{"p": 1}, {"p": 2}], "m": {"b": {"x": 1}, "a": {"x": 2}, "c": {}}}});
        let strs = |path: &str| -> Vec<String> {
            expand_wildcards(&v, &p(path))
                .expect("expand")
                .iter()
                .map(ToString::to_string)
                .collect()
        };
        assert_eq!(
            strs("spec.rules[*].p"),
            ["spec.rules[0].p", "spec.rules[1].p"]
        );
        assert_eq!(strs("spec.m[*].x"), ["spec.m.a.x", "spec.m.b.x"]);
        assert!(strs("spec.none[*].x").is_empty());
        assert!(expand_wildcards(&json!({"s": "x"}), &p("s[*]")).is_err());
    }
}
