//! A short string that matches a regular expression, for mock values of fields with a
//! `pattern`: built from the expression's syntax tree (first alternative, minimum repetitions,
//! a representative character of each class), then checked with the regex engine.

use regex_syntax::hir::{Class, Hir, HirKind};

/// Longest example built; a pattern demanding more (`.{1000}`) gets none.
const MAX_LEN: usize = 256;

/// A string `pattern` matches, if a short one is found.
pub fn example(pattern: &str) -> Option<String> {
    let hir = regex_syntax::Parser::new().parse(pattern).ok()?;
    let mut out = String::new();
    build(&hir, &mut out, 0)?;
    let re = regex::Regex::new(pattern).ok()?;
    re.is_match(&out).then_some(out)
}

fn build(hir: &Hir, out: &mut String, depth: usize) -> Option<()> {
    if depth > 64 || out.len() > MAX_LEN {
        return None;
    }
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => {}
        HirKind::Literal(lit) => out.push_str(std::str::from_utf8(&lit.0).ok()?),
        HirKind::Class(Class::Unicode(class)) => {
            let ranges = class.ranges();
            let preferred = ['a', '0', 'A'];
            let c = preferred
                .into_iter()
                .find(|c| ranges.iter().any(|r| r.start() <= *c && *c <= r.end()))
                .or_else(|| ranges.first().map(|r| r.start()))?;
            out.push(c);
        }
        HirKind::Class(Class::Bytes(class)) => {
            let b = class.ranges().first()?.start();
            out.push(char::from(b).is_ascii().then_some(char::from(b))?);
        }
        HirKind::Repetition(rep) => {
            for _ in 0..rep.min {
                build(&rep.sub, out, depth + 1)?;
            }
        }
        HirKind::Capture(cap) => build(&cap.sub, out, depth + 1)?,
        HirKind::Concat(parts) => {
            for part in parts {
                build(part, out, depth + 1)?;
            }
        }
        HirKind::Alternation(alts) => build(alts.first()?, out, depth + 1)?,
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::example;

    #[test]
    fn examples_match() {
        assert_eq!(example("^[a-z]+-[0-9]{2}$").as_deref(), Some("a-00"));
        assert_eq!(example("^(us|eu)-[a-z]+-\\d$").as_deref(), Some("us-a-0"));
        assert_eq!(example("^arn:aws:.*$").as_deref(), Some("arn:aws:"));
        assert_eq!(example("^[A-Z][A-Za-z0-9]*$").as_deref(), Some("A"));
        assert_eq!(example("(").as_deref(), None);
        assert_eq!(example("^x{300}$").as_deref(), None);
    }
}
