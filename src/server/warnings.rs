//! Admission warnings as the API server and kubectl handle them well: single lines without
//! control characters (the API server drops those), short (aim 120 characters, never more
//! than 256), deduplicated, and within 4096 characters in all (past that the API server cuts
//! every warning to 256), ending with "and N more" when some had to be left out.

/// The length a warning aims for.
pub const AIM: usize = 120;
/// The length no warning exceeds.
pub const MAX_ONE: usize = 256;
/// The total length of all warnings.
pub const MAX_TOTAL: usize = 4096;

/// One warning to shape: the subject it is about (`Composition "x"`), the full text, and a
/// shorter form to use when the full one is longer than [`AIM`].
#[derive(Debug, Clone)]
pub struct Warning {
    /// The full text.
    pub text: String,
    /// A shorter text saying the same thing, if there is one.
    pub short: Option<String>,
}

impl Warning {
    /// A warning with no shorter form.
    pub fn new(text: impl Into<String>) -> Self {
        Warning {
            text: text.into(),
            short: None,
        }
    }
}

/// Shapes warnings for a response; each is prefixed with `subject: `. The API server counts
/// characters (runes), so the total, the closing "and N more" included, is counted so too.
pub fn shape(subject: &str, warnings: impl IntoIterator<Item = Warning>) -> Vec<String> {
    let mut texts: Vec<String> = Vec::new();
    for w in warnings {
        let mut text = single_line(&format!("{subject}: {}", w.text));
        if text.chars().count() > AIM
            && let Some(short) = &w.short
        {
            text = single_line(&format!("{subject}: {short}"));
        }
        let text = truncate(&text, MAX_ONE);
        if !texts.contains(&text) {
            texts.push(text);
        }
    }
    let lengths: Vec<usize> = texts.iter().map(|t| t.chars().count()).collect();
    if lengths.iter().sum::<usize>() <= MAX_TOTAL {
        return texts;
    }
    // The longest run of first warnings that fits beside the line counting the others.
    let mut kept = 0;
    let mut total = 0;
    while kept < texts.len()
        && total + lengths[kept] + and_more(subject, texts.len() - kept - 1).chars().count()
            <= MAX_TOTAL
    {
        total += lengths[kept];
        kept += 1;
    }
    let rest = and_more(subject, texts.len() - kept);
    texts.truncate(kept);
    texts.push(rest);
    texts
}

/// The closing warning for `left_out` warnings that did not fit; a long subject is cut so
/// that the count is whole.
fn and_more(subject: &str, left_out: usize) -> String {
    let rest = format!(
        ": and {left_out} more warning{}; run `composition-webhook validate` on the Composition to see all",
        if left_out == 1 { "" } else { "s" }
    );
    let subject = single_line(subject);
    let room = MAX_ONE.saturating_sub(rest.chars().count()).max(1);
    format!("{}{rest}", truncate(&subject, room))
}

/// Control characters (line breaks, tabs, escapes) become spaces; runs of spaces collapse.
fn single_line(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut space = false;
    for c in s.chars() {
        let c = if c.is_control() { ' ' } else { c };
        if c == ' ' {
            if space {
                continue;
            }
            space = true;
        } else {
            space = false;
        }
        out.push(c);
    }
    out.trim_end().to_string()
}

/// At most `max` characters. A longer text loses its middle, not its end: the end of a
/// finding says what is specific to it (`string != boolean`, a suggested fix), the start says
/// where it is.
pub(crate) fn truncate(s: &str, max: usize) -> String {
    let chars: Vec<char> = s.chars().collect();
    if chars.len() <= max {
        return s.to_string();
    }
    let tail = (max - 1) / 3;
    let head = max - 1 - tail;
    let mut out: String = chars[..head].iter().collect();
    out.push('…');
    out.extend(&chars[chars.len() - tail..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_short_and_unique() {
        let long = format!("spec.x: Invalid value: \"{}\": bad", "v".repeat(300));
        let out = shape(
            r#"Composition "c""#,
            [
                Warning::new("a\nb\tc\u{1b}[31m"),
                Warning::new("a\nb\tc\u{1b}[31m"),
                Warning {
                    text: long.clone(),
                    short: Some("spec.x: Invalid value: bad".into()),
                },
                Warning::new(long),
            ],
        );
        assert_eq!(out[0], r#"Composition "c": a b c [31m"#);
        assert_eq!(out[1], r#"Composition "c": spec.x: Invalid value: bad"#);
        assert_eq!(out[2].chars().count(), MAX_ONE);
        assert!(out[2].ends_with(r#"vvv": bad"#) && out[2].contains('…'));
        assert_eq!(out.len(), 3);
    }

    #[test]
    fn total_is_bounded_with_a_count_of_the_rest() {
        let many = (0..100).map(|i| Warning::new(format!("{i}: {}", "x".repeat(200))));
        let out = shape("C", many);
        let total: usize = out.iter().map(|w| w.chars().count()).sum();
        assert!(total < MAX_TOTAL, "{total}");
        let kept = out.len() - 1;
        assert_eq!(
            out.last().unwrap(),
            &format!(
                "C: and {} more warnings; run `composition-webhook validate` on the Composition to see all",
                100 - kept
            )
        );
        assert!(out.iter().all(|w| w.chars().count() <= MAX_ONE));
    }

    /// With a long subject and text of several bytes a character, the total (the closing
    /// line included) is still at most 4,096 characters, and every warning but the last
    /// fits whole before it.
    #[test]
    fn total_counts_characters_and_the_closing_line() {
        let subject = format!("Composition \"{}\"", "ü".repeat(200));
        for width in [1, 50, 120, 200, 300] {
            let many = (0..200).map(|i| Warning::new(format!("{}: {i}", "é".repeat(width))));
            let out = shape(&subject, many);
            let total: usize = out.iter().map(|w| w.chars().count()).sum();
            assert!(total <= MAX_TOTAL, "width {width}: {total}");
            assert!(total > MAX_TOTAL - 2 * MAX_ONE, "width {width}: {total}");
            let last = out.last().expect("a closing line");
            assert!(
                last.contains(&format!("and {} more", 201 - out.len())),
                "{last}"
            );
        }
        // Everything that fits is kept, with no closing line.
        let few = (0..3).map(|i| Warning::new(format!("{i}: ✓")));
        assert_eq!(shape("C", few), ["C: 0: ✓", "C: 1: ✓", "C: 2: ✓"]);
    }
}
