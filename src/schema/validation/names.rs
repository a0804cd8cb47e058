//! apimachinery's name and label rules (`k8s.io/apimachinery/pkg/util/validation` and
//! `pkg/api/validation/path`, Kubernetes v1.28), with their messages byte for byte: what the
//! API server says of a `metadata.name`, a label, an annotation key, a namespace.

/// `DNS1123SubdomainMaxLength`.
const DNS1123_SUBDOMAIN_MAX: usize = 253;
/// `DNS1123LabelMaxLength`, `DNS1035LabelMaxLength`, `LabelValueMaxLength`,
/// `qualifiedNameMaxLength`.
const LABEL_MAX: usize = 63;

const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_ERR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_ERR: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_ERR: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const DNS1035_LABEL_ERR: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character";

/// How a kind's `metadata.name` is validated (the `ValidateNameFunc` its strategy passes to
/// `ValidateObjectMeta`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// `NameIsDNSSubdomain`: custom resources and most built-in kinds.
    DnsSubdomain,
    /// `NameIsDNSLabel`: Namespaces, StatefulSets.
    DnsLabel,
    /// `NameIsDNS1035Label`: Services.
    Dns1035Label,
    /// `path.ValidatePathSegmentName`, which the API server applies to every name: RBAC
    /// roles and bindings, PodDisruptionBudgets, core/v1 Events, CertificateSigningRequests,
    /// and built-in kinds this tool does not know the rule of (the loosest rule: no false
    /// denial).
    PathSegment,
    /// [`NameRule::DnsSubdomain`] and at most 52 characters (`ValidateCronJobCreate`).
    CronJob,
}

impl NameRule {
    /// The rule of a built-in kind (`group` is empty for the core group), as Kubernetes
    /// v1.28's `pkg/apis/*/validation` choose it. Custom resources are
    /// [`NameRule::DnsSubdomain`] whatever their group: ask only for kinds no CRD defines.
    pub fn of(group: &str, kind: &str) -> NameRule {
        match (group, kind) {
            ("", "Service") => NameRule::Dns1035Label,
            ("", "Namespace") | ("apps", "StatefulSet") => NameRule::DnsLabel,
            ("batch", "CronJob") => NameRule::CronJob,
            (
                "",
                "Pod"
                | "ConfigMap"
                | "Secret"
                | "ServiceAccount"
                | "ReplicationController"
                | "LimitRange"
                | "ResourceQuota"
                | "Endpoints"
                | "Node"
                | "PersistentVolume"
                | "PersistentVolumeClaim",
            )
            | ("apps", "Deployment" | "DaemonSet" | "ReplicaSet" | "ControllerRevision")
            | ("batch", "Job")
            | ("autoscaling", "HorizontalPodAutoscaler")
            | ("networking.k8s.io", "Ingress" | "IngressClass" | "NetworkPolicy")
            | ("discovery.k8s.io", "EndpointSlice")
            | ("coordination.k8s.io", "Lease")
            | ("storage.k8s.io", "StorageClass" | "CSIDriver" | "VolumeAttachment")
            | ("scheduling.k8s.io", "PriorityClass")
            | ("node.k8s.io", "RuntimeClass")
            | (
                "admissionregistration.k8s.io",
                "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration",
            )
            | ("flowcontrol.apiserver.k8s.io", "FlowSchema" | "PriorityLevelConfiguration") => {
                NameRule::DnsSubdomain
            }
            _ => NameRule::PathSegment,
        }
    }

    /// The problems of `name` (`prefix`: a `generateName`, which may end in `-`).
    pub fn check(self, name: &str, prefix: bool) -> Vec<String> {
        match self {
            NameRule::DnsSubdomain => with_mask(name, prefix, dns1123_subdomain),
            NameRule::DnsLabel => with_mask(name, prefix, dns1123_label),
            NameRule::Dns1035Label => with_mask(name, prefix, dns1035_label),
            NameRule::PathSegment => path_segment(name, prefix),
            NameRule::CronJob => {
                let mut errs = with_mask(name, prefix, dns1123_subdomain);
                if !prefix && name.len() > 52 {
                    errs.push("must be no more than 52 characters".to_string());
                }
                errs
            }
        }
    }
}

/// `maskTrailingDash` for a prefix: Go's replaces the last two bytes with `a`. `f` gets the
/// name masked, or as it is when nothing is masked (every name but a `generateName`). Every
/// rendered resource has a `generateName`: a short one is masked on the stack.
fn with_mask<R>(name: &str, prefix: bool, f: impl FnOnce(&str) -> R) -> R {
    if !(prefix && name.len() > 1 && name.ends_with('-')) {
        return f(name);
    }
    // The byte before the dash may start a multi-byte character: Go cuts bytes. Such a cut
    // followed by `a` is not UTF-8, and is formatted as Go's string prints.
    let cut = &name.as_bytes()[..name.len() - 2];
    let mut buf = [0u8; MASKED_ON_STACK];
    if let Some(masked) = buf.get_mut(..=cut.len()) {
        masked[..cut.len()].copy_from_slice(cut);
        masked[cut.len()] = b'a';
        if let Ok(masked) = std::str::from_utf8(masked) {
            return f(masked);
        }
    }
    f(&format!("{}a", String::from_utf8_lossy(cut)))
}

/// The longest `generateName` masked without allocating, and more: a longer one masks to a
/// name longer than a subdomain's 253 bytes, invalid anyway.
const MASKED_ON_STACK: usize = DNS1123_SUBDOMAIN_MAX + 3;

/// `EmptyError`.
fn empty_error() -> String {
    "must be non-empty".to_string()
}

/// `MaxLenError`.
fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

/// `RegexError`, double space and all.
pub fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{fmt}')");
    }
    let mut s = format!("{msg} (e.g. ");
    for (i, example) in examples.iter().enumerate() {
        if i > 0 {
            s.push_str(" or ");
        }
        s.push_str(&format!("'{example}', "));
    }
    s.push_str(&format!("regex used for validation is '{fmt}')"));
    s
}

// The classes of a byte in apimachinery's name patterns, found by one table lookup per
// byte: the names checked are every label and annotation key of every rendered resource.

/// `[A-Za-z0-9]`.
const ALNUM: u8 = 1;
/// `[a-z0-9]`.
const LOWER_ALNUM: u8 = 2;
/// `[-A-Za-z0-9_.]`: the inside of a qualified name's name part, or a label value.
const NAME_PART: u8 = 4;
/// `[-a-z0-9]`: the inside of a DNS-1123 label.
const LABEL: u8 = 8;
/// `[-a-z0-9.]`: the inside of a DNS-1123 subdomain.
const SUBDOMAIN: u8 = 16;

/// Each byte's classes.
static CLASSES: [u8; 256] = classes();

const fn classes() -> [u8; 256] {
    let mut table = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        let c = i as u8;
        let mut class = 0;
        if c.is_ascii_alphanumeric() {
            class |= ALNUM | NAME_PART;
        }
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            class |= LOWER_ALNUM | LABEL | SUBDOMAIN;
        }
        match c {
            b'-' => class |= NAME_PART | LABEL | SUBDOMAIN,
            b'_' => class |= NAME_PART,
            b'.' => class |= NAME_PART | SUBDOMAIN,
            _ => {}
        }
        table[i] = class;
        i += 1;
    }
    table
}

fn is(c: u8, class: u8) -> bool {
    CLASSES[usize::from(c)] & class != 0
}

/// Whether every byte of `b` is of `class` (one class), without a branch per byte.
fn all_of(b: &[u8], class: u8) -> bool {
    b.iter()
        .fold(class, |seen, &c| seen & CLASSES[usize::from(c)])
        == class
}

fn alnum(c: u8) -> bool {
    is(c, ALNUM)
}

fn lower_alnum(c: u8) -> bool {
    is(c, LOWER_ALNUM)
}

/// `qualifiedNameRegexp` (anchored).
fn is_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    b.first().copied().is_some_and(alnum)
        && b.last().copied().is_some_and(alnum)
        && all_of(b, NAME_PART)
}

/// `dns1123SubdomainRegexp` (anchored): dot-separated DNS-1123 labels. Every label starts
/// and ends with a lower case letter or digit: the first and last bytes are one, and so
/// are the bytes on both sides of every dot.
fn is_dns1123_subdomain(s: &str) -> bool {
    let b = s.as_bytes();
    b.first().copied().is_some_and(lower_alnum)
        && b.last().copied().is_some_and(lower_alnum)
        && all_of(b, SUBDOMAIN)
        // Neither end is a dot, so every dot has a byte on both sides.
        && memchr::memchr_iter(b'.', b).all(|i| lower_alnum(b[i - 1]) && lower_alnum(b[i + 1]))
}

/// `dns1123LabelRegexp` (anchored).
fn is_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    b.first().copied().is_some_and(lower_alnum)
        && b.last().copied().is_some_and(lower_alnum)
        && all_of(b, LABEL)
}

/// Whether [`qualified_name`] finds nothing wrong: the common case (every label and
/// annotation key of every rendered resource), in one pass over the bytes.
fn is_qualified_name(value: &str) -> bool {
    let (prefix, name) = match memchr::memchr(b'/', value.as_bytes()) {
        None => (None, value),
        Some(i) => (value.get(..i), value.get(i + 1..).unwrap_or_default()),
    };
    prefix.is_none_or(|p| p.len() <= DNS1123_SUBDOMAIN_MAX && is_dns1123_subdomain(p))
        && name.len() <= LABEL_MAX
        && is_qualified_name_part(name)
}

/// `IsQualifiedName`: label keys, annotation keys (lowercased), finalizers.
pub fn qualified_name(value: &str) -> Vec<String> {
    if is_qualified_name(value) {
        return Vec::new();
    }
    qualified_name_errors(value)
}

/// What `IsQualifiedName` says of `value`, found part by part.
fn qualified_name_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    // `strings.Split(value, "/")`: one part, two, or more (an error), without collecting.
    let parts = match value.split_once('/') {
        None => Some((None, value)),
        Some((prefix, name)) if !name.contains('/') => Some((Some(prefix), name)),
        Some(_) => None,
    };
    let name = match parts {
        Some((None, name)) => name,
        Some((Some(prefix), name)) => {
            if prefix.is_empty() {
                errs.push(format!("prefix part {}", empty_error()));
            } else {
                errs.extend(
                    dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            name
        }
        None => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(
                    QUALIFIED_NAME_ERR,
                    QUALIFIED_NAME_FMT,
                    &["MyName", "my.name", "123-abc"]
                )
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push(format!("name part {}", empty_error()));
    } else if name.len() > LABEL_MAX {
        errs.push(format!("name part {}", max_len_error(LABEL_MAX)));
    }
    if !is_qualified_name_part(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_ERR,
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// `IsValidLabelValue`.
pub fn label_value(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > LABEL_MAX {
        errs.push(max_len_error(LABEL_MAX));
    }
    if !value.is_empty() && !is_qualified_name_part(value) {
        errs.push(regex_error(
            LABEL_VALUE_ERR,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// `IsDNS1123Subdomain`.
pub fn dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX));
    }
    if !is_dns1123_subdomain(value) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_ERR,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

/// `IsDNS1123Label`.
pub fn dns1123_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > LABEL_MAX {
        errs.push(max_len_error(LABEL_MAX));
    }
    if !is_dns1123_label(value) {
        // A valid subdomain that is not a valid label has dots.
        if value.split('.').all(is_dns1123_label) {
            errs.push("must not contain dots".to_string());
            return errs;
        }
        errs.push(regex_error(
            DNS1123_LABEL_ERR,
            DNS1123_LABEL_FMT,
            &["my-name", "123-abc"],
        ));
    }
    errs
}

/// `IsDNS1035Label`.
pub fn dns1035_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > LABEL_MAX {
        errs.push(max_len_error(LABEL_MAX));
    }
    let b = value.as_bytes();
    let ok = b.first().is_some_and(u8::is_ascii_lowercase)
        && b.last().copied().is_some_and(lower_alnum)
        && all_of(b, LABEL);
    if !ok {
        errs.push(regex_error(
            DNS1035_LABEL_ERR,
            DNS1035_LABEL_FMT,
            &["my-name", "abc-123"],
        ));
    }
    errs
}

/// `IsDNS1035Label` of `value` lowercased, as an embedded resource's kind is checked. An
/// ASCII value that is a label in any case (every real kind) is not lowercased (an
/// allocation) to find that it has no error.
pub fn dns1035_label_lowercased(value: &str) -> Vec<String> {
    let b = value.as_bytes();
    let label_in_any_case = b.len() <= LABEL_MAX
        && b.first().is_some_and(u8::is_ascii_alphabetic)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-');
    if label_in_any_case {
        Vec::new()
    } else {
        dns1035_label(&value.to_lowercase())
    }
}

/// `IsValidPathSegmentName` (`prefix`: `IsValidPathSegmentPrefix`).
pub fn path_segment(name: &str, prefix: bool) -> Vec<String> {
    if !prefix {
        for illegal in [".", ".."] {
            if name == illegal {
                return vec![format!("may not be '{illegal}'")];
            }
        }
    }
    ["/", "%"]
        .into_iter()
        .filter(|illegal| name.contains(illegal))
        .map(|illegal| format!("may not contain '{illegal}'"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// apimachinery's regexps, as `IsQualifiedName` and `IsDNS1123Subdomain` apply them.
    fn upstream_qualified_name(value: &str) -> bool {
        let name = regex::Regex::new("^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$").unwrap();
        let (prefix, rest) = match value.split('/').collect::<Vec<_>>()[..] {
            [name] => (None, name),
            [prefix, name] => (Some(prefix), name),
            _ => return false,
        };
        prefix.is_none_or(|p| !p.is_empty() && upstream_subdomain(p))
            && !rest.is_empty()
            && rest.len() <= 63
            && name.is_match(rest)
    }

    fn upstream_subdomain(value: &str) -> bool {
        let label = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
        let re = regex::Regex::new(&format!("^{label}(\\.{label})*$")).unwrap();
        value.len() <= 253 && re.is_match(value)
    }

    proptest! {
        /// A kind's check gives the errors of its lowercased text, with or without the
        /// shortcut that spares an ASCII label the lowercasing.
        #[test]
        fn a_kind_is_checked_as_its_lowercased_text(
            kind in prop_oneof![
                "[A-Za-z0-9_.-]{0,70}",
                "[A-Za-z][A-Za-z0-9-]{0,66}[A-Za-z0-9]",
                "\\PC{0,8}",
            ]
        ) {
            prop_assert_eq!(dns1035_label_lowercased(&kind), dns1035_label(&kind.to_lowercase()));
        }
    }

    proptest! {
        /// The one-pass check and the part-by-part errors agree with apimachinery's regexps
        /// on names near the rules' edges: dots, dashes, slashes, case, lengths.
        #[test]
        fn qualified_names_are_checked_as_apimachinery_checks_them(
            value in "([a-zA-Z0-9._/-]{0,12}|[a-z0-9.-]{0,8}/[a-zA-Z0-9._-]{0,8}|[a-z0-9.-]{250,256}/[a-z]{1,3}|[a-z]{60,66}|[a-z.-]{0,6}[A-Z_/@ ]?[a-z.-]{0,6})"
        ) {
            let expected = upstream_qualified_name(&value);
            prop_assert_eq!(is_qualified_name(&value), expected, "{}", value);
            prop_assert_eq!(qualified_name_errors(&value).is_empty(), expected, "{}", value);
            prop_assert_eq!(qualified_name(&value).is_empty(), expected, "{}", value);
        }

        #[test]
        fn subdomains_are_checked_as_apimachinery_checks_them(value in "[a-z0-9.-]{0,12}|[a-zA-Z0-9._é -]{0,8}") {
            prop_assert_eq!(dns1123_subdomain(&value).is_empty(), upstream_subdomain(&value));
        }

        /// The byte classes (one table) agree with apimachinery's patterns, non-ASCII bytes
        /// included.
        #[test]
        fn labels_and_name_parts_are_checked_as_apimachinery_checks_them(
            value in "[a-z0-9.-]{0,10}|[a-zA-Z0-9._é/ -]{0,8}"
        ) {
            let label = regex::Regex::new("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$").unwrap();
            let part = regex::Regex::new("^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$").unwrap();
            prop_assert_eq!(is_dns1123_label(&value), label.is_match(&value), "{}", value);
            prop_assert_eq!(is_qualified_name_part(&value), part.is_match(&value), "{}", value);
        }
    }

    #[test]
    fn messages_match_apimachinery() {
        assert_eq!(
            dns1035_label("1abc"),
            [
                "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
            ]
        );
        assert!(dns1035_label("bucket").is_empty());
        assert_eq!(path_segment("..", false), ["may not be '..'"]);
        assert_eq!(
            path_segment("a/b%", true),
            ["may not contain '/'", "may not contain '%'"]
        );
        assert_eq!(
            qualified_name("app/"),
            [
                "name part must be non-empty",
                "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
            ]
        );
        assert!(qualified_name("crossplane.io/composite").is_empty());
        assert_eq!(
            qualified_name("a/b/c"),
            [
                "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            ]
        );
        assert!(label_value("").is_empty());
        assert_eq!(label_value("-x").len(), 1);
        assert_eq!(
            NameRule::DnsSubdomain.check("-controlplane", false),
            [
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
            ]
        );
        // A generateName may end in a dash.
        assert!(NameRule::DnsSubdomain.check("xnet-mock-", true).is_empty());
    }

    /// Go's `maskTrailingDash`: the last two bytes replaced by `a`, as one string.
    fn go_mask(name: &str) -> String {
        format!(
            "{}a",
            String::from_utf8_lossy(&name.as_bytes()[..name.len() - 2])
        )
    }

    #[test]
    fn a_generate_name_is_masked_as_go_masks_it() {
        let long = format!("{}-", "a".repeat(300));
        let at_edge = format!("{}-", "b".repeat(MASKED_ON_STACK));
        let below = format!("{}-", "c".repeat(MASKED_ON_STACK - 1));
        for name in [
            "xnet-mock-",
            "a-",
            "-",
            "ab",
            "Upper-",
            "é-",
            "xé-",
            "x-é-",
            &long,
            &at_edge,
            &below,
        ] {
            let masked = with_mask(name, true, str::to_string);
            let expected = if name.len() > 1 && name.ends_with('-') {
                go_mask(name)
            } else {
                name.to_string()
            };
            assert_eq!(masked, expected, "{name}");
            assert_eq!(with_mask(name, false, str::to_string), name);
            assert_eq!(
                NameRule::DnsSubdomain.check(name, true),
                dns1123_subdomain(&expected),
                "{name}"
            );
        }
        assert!(
            NameRule::PathSegment
                .check("system:admin", false)
                .is_empty()
        );
        assert_eq!(dns1123_label("a.b"), ["must not contain dots"]);
    }
}
