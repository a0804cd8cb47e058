//! The index the watches maintain: every CRD and XRD in the cluster by name, and which one
//! defines each (group, kind). A real CRD wins over an XRD: Crossplane generates the XR's CRD
//! from the XRD, and until it has (a Configuration package installs XRDs and Compositions
//! together) the XRD stands in for it.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::definitions::{Source, Summary};

/// (group, kind).
pub type Key = (String, String);

/// Every definition the watches have seen, by name and by (group, kind).
#[derive(Debug, Default)]
pub struct Index {
    by_name: HashMap<(Source, String), Summary>,
    by_kind: BTreeMap<Key, BTreeSet<(Source, String)>>,
}

impl Index {
    /// The definition of `key`: the first CRD by name, else the first XRD.
    pub fn definition(&self, key: &Key) -> Option<&Summary> {
        let first = self.by_kind.get(key)?.iter().next()?;
        self.by_name.get(first)
    }

    /// Whether a definition defines some kind of `group`.
    pub fn has_group(&self, group: &str) -> bool {
        let start = (group.to_string(), String::new());
        self.by_kind
            .range(start..)
            .next()
            .is_some_and(|((g, _), _)| g == group)
    }

    /// The definition of `source` named `name`.
    pub fn get(&self, source: Source, name: &str) -> Option<&Summary> {
        self.by_name.get(&(source, name.to_string()))
    }

    /// Every definition of `source`.
    pub fn of(&self, source: Source) -> impl Iterator<Item = &Summary> {
        self.by_name
            .iter()
            .filter(move |((s, _), _)| *s == source)
            .map(|(_, d)| d)
    }

    /// How many definitions of `source` it holds.
    pub fn count(&self, source: Source) -> usize {
        self.by_name.keys().filter(|(s, _)| *s == source).count()
    }

    /// Adds or replaces a definition; returns the keys whose definition may have changed.
    pub fn apply(&mut self, summary: Summary) -> Vec<Key> {
        let id = (summary.source, summary.name.clone());
        let mut touched = self.remove(&id).into_iter().collect::<Vec<_>>();
        let key = (summary.group.clone(), summary.kind.clone());
        self.by_kind
            .entry(key.clone())
            .or_default()
            .insert(id.clone());
        self.by_name.insert(id, summary);
        if !touched.contains(&key) {
            touched.push(key);
        }
        touched
    }

    /// Removes a definition; returns its key if it was there.
    pub fn delete(&mut self, source: Source, name: &str) -> Option<Key> {
        self.remove(&(source, name.to_string()))
    }

    /// Replaces every definition of `source` with a fresh list (after a list or relist);
    /// returns the keys whose definition may have changed.
    pub fn replace(&mut self, source: Source, list: Vec<Summary>) -> Vec<Key> {
        let old: Vec<(Source, String)> = self
            .by_name
            .keys()
            .filter(|(s, _)| *s == source)
            .cloned()
            .collect();
        let mut touched: BTreeSet<Key> = BTreeSet::new();
        let fresh: HashMap<(Source, String), Summary> = list
            .into_iter()
            .map(|s| ((s.source, s.name.clone()), s))
            .collect();
        for id in old {
            match fresh.get(&id) {
                Some(new) if self.by_name.get(&id) == Some(new) => {}
                _ => touched.extend(self.remove(&id)),
            }
        }
        for (id, summary) in fresh {
            if !self.by_name.contains_key(&id) {
                touched.extend(self.apply(summary));
            }
        }
        touched.into_iter().collect()
    }

    fn remove(&mut self, id: &(Source, String)) -> Option<Key> {
        let old = self.by_name.remove(id)?;
        let key = (old.group, old.kind);
        if let Some(set) = self.by_kind.get_mut(&key) {
            set.remove(id);
            if set.is_empty() {
                self.by_kind.remove(&key);
            }
        }
        Some(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(source: Source, name: &str, rv: &str, kind: &str) -> Summary {
        Summary {
            source,
            name: name.into(),
            resource_version: rv.into(),
            group: "example.org".into(),
            kind: kind.into(),
            served: vec!["v1".into()],
            state: None,
        }
    }

    fn key(kind: &str) -> Key {
        ("example.org".into(), kind.into())
    }

    #[test]
    fn a_crd_shadows_the_xrd_of_its_kind_and_the_xrd_stands_in_until_then() {
        let mut index = Index::default();
        index.apply(summary(Source::Xrd, "xdbs.example.org", "1", "XDB"));
        assert_eq!(
            index.definition(&key("XDB")).map(|s| s.source),
            Some(Source::Xrd)
        );
        index.apply(summary(Source::Crd, "xdbs.example.org", "2", "XDB"));
        assert_eq!(
            index.definition(&key("XDB")).map(|s| s.source),
            Some(Source::Crd)
        );
        assert_eq!(
            index.delete(Source::Crd, "xdbs.example.org"),
            Some(key("XDB"))
        );
        assert_eq!(
            index.definition(&key("XDB")).map(|s| s.source),
            Some(Source::Xrd)
        );
    }

    #[test]
    fn a_relist_touches_only_what_changed() {
        let mut index = Index::default();
        index.replace(
            Source::Crd,
            vec![
                summary(Source::Crd, "as.example.org", "1", "A"),
                summary(Source::Crd, "bs.example.org", "2", "B"),
            ],
        );
        let touched = index.replace(
            Source::Crd,
            vec![
                summary(Source::Crd, "as.example.org", "1", "A"),
                summary(Source::Crd, "bs.example.org", "3", "B"),
                summary(Source::Crd, "cs.example.org", "4", "C"),
            ],
        );
        assert_eq!(touched, vec![key("B"), key("C")]);
        let touched = index.replace(Source::Crd, vec![]);
        assert_eq!(touched, vec![key("A"), key("B"), key("C")]);
        assert_eq!(index.count(Source::Crd), 0);
    }

    #[test]
    fn a_kind_renamed_in_place_touches_the_old_and_the_new_kind() {
        let mut index = Index::default();
        index.apply(summary(Source::Crd, "as.example.org", "1", "A"));
        let touched = index.apply(summary(Source::Crd, "as.example.org", "2", "Renamed"));
        assert_eq!(touched, vec![key("A"), key("Renamed")]);
        assert!(index.definition(&key("A")).is_none());
    }
}
