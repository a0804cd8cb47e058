//! apimachinery's `pkg/version/helpers.go`: `CompareKubeAwareVersionStrings`, the priority
//! of Kubernetes API versions (`v2` > `v1` > `v1beta2` > `v1beta1` > `v1alpha1` > anything
//! not of that form). The API server sorts a CRD's versions by it, and suggests the
//! highest-priority served version when another one is deprecated.
//!
//! The rules, as the Go has them:
//!
//! - a kube-like version matches `^v([\d]+)(?:(alpha|beta)([\d]+))?$` (ASCII digits, each
//!   number an `int` `strconv.Atoi` accepts, so none beyond `i64`);
//! - between two kube-like versions, GA beats beta beats alpha, then the higher major
//!   version wins, then the higher minor;
//! - a kube-like version beats any other string; two other strings compare reversed
//!   (`strings.Compare(v2, v1)`: `bar` is above `foo`, `version1` above `version10`).

use std::cmp::Ordering;

/// Stability, lowest first (Go's `versionType`: the bigger, the higher priority).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Stability {
    Alpha,
    Beta,
    Ga,
}

/// A kube-like version: `(major, stability, minor)`; the minor of a GA version is 0.
type KubeVersion = (i64, Stability, i64);

/// Go's `parseKubeVersion`: `None` when `v` is not kube-like.
fn parse_kube_version(v: &str) -> Option<KubeVersion> {
    let rest = v.strip_prefix('v')?;
    let digits = |s: &str| s.bytes().take_while(u8::is_ascii_digit).count();
    let n = digits(rest);
    if n == 0 {
        return None;
    }
    // `strconv.Atoi` of ASCII digits fails only when out of range.
    let major: i64 = rest[..n].parse().ok()?;
    let rest = &rest[n..];
    if rest.is_empty() {
        return Some((major, Stability::Ga, 0));
    }
    let (stability, rest) = if let Some(r) = rest.strip_prefix("alpha") {
        (Stability::Alpha, r)
    } else if let Some(r) = rest.strip_prefix("beta") {
        (Stability::Beta, r)
    } else {
        return None;
    };
    let m = digits(rest);
    if m == 0 || m != rest.len() {
        return None;
    }
    let minor: i64 = rest.parse().ok()?;
    Some((major, stability, minor))
}

/// Go's `version.CompareKubeAwareVersionStrings(v1, v2)`: `Greater` when `v1` has the
/// higher priority.
pub fn compare_kube_aware_version_strings(v1: &str, v2: &str) -> Ordering {
    if v1 == v2 {
        return Ordering::Equal;
    }
    match (parse_kube_version(v1), parse_kube_version(v2)) {
        (None, None) => v2.cmp(v1),
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some((major1, type1, minor1)), Some((major2, type2, minor2))) => type1
            .cmp(&type2)
            .then(major1.cmp(&major2))
            .then(minor1.cmp(&minor2)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// apimachinery's `pkg/version/helpers_test.go`, `TestCompareKubeAwareVersionStrings`:
    /// `(v1, v2, expectedGreater)`, the whole table.
    #[test]
    fn go_compare_kube_aware_version_strings_table() {
        let table = [
            ("v1", "v2", false),
            ("v2", "v1", true),
            ("v10", "v2", true),
            ("v1", "v2alpha1", true),
            ("v1", "v2beta1", true),
            ("v1alpha2", "v1alpha1", true),
            ("v1beta1", "v2alpha3", true),
            ("v1alpha10", "v1alpha2", true),
            ("v1beta10", "v1beta2", true),
            ("foo", "v1beta2", false),
            ("bar", "foo", true),
            // Non kube-like versions are sorted alphabetically.
            ("version1", "version2", true),
            ("version1", "version10", true),
        ];
        for (v1, v2, greater) in table {
            assert_eq!(
                compare_kube_aware_version_strings(v1, v2) == Ordering::Greater,
                greater,
                "{v1} vs {v2}"
            );
        }
    }

    /// The same file's `Test_parseKubeVersion` table.
    #[test]
    fn go_parse_kube_version_table() {
        assert_eq!(parse_kube_version("v1.1"), None);
        assert_eq!(parse_kube_version("v1alpha1.1"), None);
        assert_eq!(
            parse_kube_version("v1alpha1"),
            Some((1, Stability::Alpha, 1))
        );
        assert_eq!(
            parse_kube_version("v2beta10"),
            Some((2, Stability::Beta, 10))
        );
        assert_eq!(parse_kube_version("v3"), Some((3, Stability::Ga, 0)));
    }

    /// What the regular expression and `strconv.Atoi` refuse besides.
    #[test]
    fn edges_of_the_grammar() {
        for v in [
            "",
            "v",
            "1",
            "V1",
            "valpha1",
            "v1alpha",
            "v1gamma1",
            "v1\n",
            "v１",
            "v1beta1x",
            // Beyond Go's int: Atoi fails, so the version is not kube-like.
            "v9223372036854775808",
        ] {
            assert_eq!(parse_kube_version(v), None, "{v:?}");
        }
        assert_eq!(
            parse_kube_version("v9223372036854775807"),
            Some((i64::MAX, Stability::Ga, 0))
        );
        assert_eq!(
            parse_kube_version("v01beta02"),
            Some((1, Stability::Beta, 2))
        );
        // Equal priority without being equal strings, as Go's subtraction gives.
        assert_eq!(
            compare_kube_aware_version_strings("v01", "v1"),
            Ordering::Equal
        );
        assert_eq!(
            compare_kube_aware_version_strings("v1", "v1"),
            Ordering::Equal
        );
        assert_eq!(
            compare_kube_aware_version_strings("v1alpha1", "zzz"),
            Ordering::Greater
        );
    }
}
