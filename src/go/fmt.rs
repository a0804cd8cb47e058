//! Go's `fmt`: `Sprintf` and `%v` of the values Kubernetes decodes JSON into (see
//! [`super::value`]), following `fmt/print.go` and `fmt/format.go` step by step, so flags,
//! width, precision, argument indexes and the error forms (`%!d(string=x)`, `%!s(MISSING)`,
//! `%!(EXTRA int64=1)`, ...) come out as Go prints them; and [`arguments`], what a format
//! string reads, for the checks that compare it with the values it will be given.

use serde_json::Value;

use super::room;
use super::strconv::{can_backquote, format_float, is_print, quote_rune, quote_with};
use super::value::GoValue;

/// Go's `fmt.Sprintf(format, args...)`, each argument being the Go value Kubernetes decodes
/// the JSON value into (see [`super::value`]).
///
/// Supports every verb Go gives these types (`%v %s %d %f %F %e %E %g %G %t %q %x %X %o %O
/// %b %c %U %T %%`), the flags `+ - # 0` and space, width and precision (with `*`), explicit
/// argument indexes (`%[2]s`), `%#v`, and Go's error forms. `%p` prints the bad-verb form for
/// every value, as there is no pointer to show.
pub fn sprintf(format: &str, args: &[Value]) -> String {
    let args: Vec<GoValue<'_>> = args.iter().map(GoValue::of).collect();
    let mut p = Printer::default();
    p.do_printf(format, &args);
    p.buf
}

/// Go's `fmt.Sprintf("%v", v)`.
pub fn sprint_v(v: &Value) -> String {
    let mut p = Printer::default();
    p.print_arg(GoValue::of(v), 'v');
    p.buf
}

/// The flags, width and precision of one verb (Go's `fmtFlags` with `wid` and `prec`).
#[derive(Debug, Clone, Copy, Default)]
struct Flags {
    wid: usize,
    prec: usize,
    wid_present: bool,
    prec_present: bool,
    minus: bool,
    plus: bool,
    sharp: bool,
    space: bool,
    zero: bool,
    // %+v and %#v are flagless formats of their own: Go moves the flags here.
    plus_v: bool,
    sharp_v: bool,
}

/// Go's `pp` and `fmt` in one: the output buffer and the current verb's flags.
#[derive(Debug, Default)]
struct Printer {
    buf: String,
    f: Flags,
    reordered: bool,
    good_arg_num: bool,
    /// How much of `buf` the review's budget has been asked for.
    charged: usize,
}

/// Go's `tooLarge`: widths and precisions beyond a million are refused.
fn too_large(x: i64) -> bool {
    !(-1_000_000..=1_000_000).contains(&x)
}

/// Go's `parsenum`: the decimal number at `s[start..end]`, whether there was one, and the
/// index after it (`end` when the number is too large).
fn parsenum(s: &[u8], start: usize, end: usize) -> (i64, bool, usize) {
    if start >= end {
        return (0, false, end);
    }
    let mut num = 0i64;
    let mut isnum = false;
    let mut i = start;
    while i < end {
        let Some(&c) = s.get(i) else { break };
        if !c.is_ascii_digit() {
            break;
        }
        if too_large(num) {
            return (0, false, end);
        }
        num = num * 10 + i64::from(c - b'0');
        isnum = true;
        i += 1;
    }
    (num, isnum, i)
}

/// Go's `parseArgNumber` for `s` starting with `[`: the zero-based index, the bytes
/// consumed and whether it parsed.
fn parse_arg_number(s: &[u8]) -> (i64, usize, bool) {
    if s.len() < 3 {
        return (0, 1, false);
    }
    for i in 1..s.len() {
        if s.get(i) == Some(&b']') {
            let (width, ok, newi) = parsenum(s, 1, i);
            if !ok || newi != i {
                return (0, i + 1, false);
            }
            return (width - 1, i + 1, true);
        }
    }
    (0, 1, false)
}

/// Go's `intFromArg`: the argument at `arg_num` as a width or precision.
fn int_from_arg(args: &[GoValue<'_>], arg_num: usize) -> (i64, bool, usize) {
    let Some(arg) = args.get(arg_num) else {
        return (0, false, arg_num);
    };
    let (mut num, mut is_int) = match arg {
        GoValue::Int(n) => (*n, true),
        _ => (0, false),
    };
    if too_large(num) {
        num = 0;
        is_int = false;
    }
    (num, is_int, arg_num + 1)
}

const LDIGITS: &[u8; 17] = b"0123456789abcdefx";
const UDIGITS: &[u8; 17] = b"0123456789ABCDEFX";

impl Printer {
    /// Asks the review's budget for what `buf` grew by since the last call; false once it
    /// is spent. Called per verb and per element, so output repeated by `%[1]v` or wide
    /// elements stops within one argument of the limit.
    fn charge(&mut self) -> bool {
        let grown = self.buf.len().saturating_sub(self.charged);
        if grown > 4096 {
            self.charged = self.buf.len();
            return crate::budget::reserve(grown).is_ok();
        }
        !crate::budget::spent()
    }

    /// Whether `n` more bytes of output fit in the review's budget, counting the new
    /// buffer a growing `buf` is copied into (twice its capacity: the old one is freed only
    /// after the copy).
    fn room(&self, n: usize) -> bool {
        if n <= 1024 {
            return true;
        }
        let needed = self.buf.len().saturating_add(n);
        let grown = if needed > self.buf.capacity() {
            needed.max(self.buf.capacity().saturating_mul(2))
        } else {
            0
        };
        crate::budget::reserve(n.max(grown)).is_ok()
    }

    fn do_printf(&mut self, format: &str, args: &[GoValue<'_>]) {
        let fb = format.as_bytes();
        let end = fb.len();
        let mut arg_num = 0usize;
        self.reordered = false;
        let mut i = 0usize;
        while i < end && self.charge() {
            self.good_arg_num = true;
            let lasti = i;
            while i < end && fb.get(i) != Some(&b'%') {
                i += 1;
            }
            if i > lasti {
                self.buf.push_str(format.get(lasti..i).unwrap_or_default());
            }
            if i >= end {
                break;
            }
            // Skip the '%'.
            i += 1;

            self.f = Flags::default();
            while let Some(&c) = fb.get(i) {
                match c {
                    b'#' => self.f.sharp = true,
                    b'0' => self.f.zero = true,
                    b'+' => self.f.plus = true,
                    b'-' => self.f.minus = true,
                    b' ' => self.f.space = true,
                    _ => break,
                }
                i += 1;
            }

            // Argument index, width, precision: Go's slow path (its fast path for a bare
            // lower-case verb prints the same).
            let mut after_index;
            (arg_num, i, after_index) = self.arg_number(arg_num, fb, i, args.len());

            if fb.get(i) == Some(&b'*') {
                i += 1;
                let (wid, present, next) = int_from_arg(args, arg_num);
                arg_num = next;
                self.f.wid_present = present;
                if !present {
                    self.buf.push_str("%!(BADWIDTH)");
                }
                if wid < 0 {
                    // A negative width means left-justify, never with zeros.
                    self.f.minus = true;
                    self.f.zero = false;
                }
                self.f.wid = usize::try_from(wid.unsigned_abs()).unwrap_or(0);
                after_index = false;
            } else {
                let (wid, present, next) = parsenum(fb, i, end);
                i = next;
                self.f.wid = usize::try_from(wid).unwrap_or(0);
                self.f.wid_present = present;
                if after_index && present {
                    // "%[3]2d"
                    self.good_arg_num = false;
                }
            }

            if i + 1 < end && fb.get(i) == Some(&b'.') {
                i += 1;
                if after_index {
                    // "%[3].2d"
                    self.good_arg_num = false;
                }
                (arg_num, i, after_index) = self.arg_number(arg_num, fb, i, args.len());
                if fb.get(i) == Some(&b'*') {
                    i += 1;
                    let (prec, mut present, next) = int_from_arg(args, arg_num);
                    arg_num = next;
                    // A negative precision means none.
                    let prec = if prec < 0 {
                        present = false;
                        0
                    } else {
                        prec
                    };
                    self.f.prec = usize::try_from(prec).unwrap_or(0);
                    self.f.prec_present = present;
                    if !present {
                        self.buf.push_str("%!(BADPREC)");
                    }
                    after_index = false;
                } else {
                    let (prec, present, next) = parsenum(fb, i, end);
                    i = next;
                    // "%.d" is precision zero.
                    self.f.prec = if present {
                        usize::try_from(prec).unwrap_or(0)
                    } else {
                        0
                    };
                    self.f.prec_present = true;
                }
            }

            if !after_index {
                (arg_num, i, _) = self.arg_number(arg_num, fb, i, args.len());
            }

            let Some(verb) = format.get(i..).and_then(|rest| rest.chars().next()) else {
                self.buf.push_str("%!(NOVERB)");
                break;
            };
            i += verb.len_utf8();

            match verb {
                // Percent absorbs no operand and ignores width and precision.
                '%' => self.buf.push('%'),
                _ if !self.good_arg_num => {
                    self.buf.push_str("%!");
                    self.buf.push(verb);
                    self.buf.push_str("(BADINDEX)");
                }
                _ => match args.get(arg_num) {
                    None => {
                        self.buf.push_str("%!");
                        self.buf.push(verb);
                        self.buf.push_str("(MISSING)");
                    }
                    Some(&arg) => {
                        if verb == 'v' || verb == 'w' {
                            self.f.sharp_v = self.f.sharp;
                            self.f.sharp = false;
                            self.f.plus_v = self.f.plus;
                            self.f.plus = false;
                        }
                        self.print_arg(arg, verb);
                        arg_num += 1;
                    }
                },
            }
        }

        // Go reports unused arguments unless the format reordered them.
        if !self.reordered && arg_num < args.len() {
            self.f = Flags::default();
            self.buf.push_str("%!(EXTRA ");
            for (k, &arg) in args.iter().skip(arg_num).enumerate() {
                if k > 0 {
                    self.buf.push_str(", ");
                }
                if let GoValue::Nil = arg {
                    self.buf.push_str("<nil>");
                } else {
                    self.buf.push_str(arg.type_name());
                    self.buf.push('=');
                    self.print_arg(arg, 'v');
                }
            }
            self.buf.push(')');
        }
    }

    /// Go's `argNumber`: the argument index of a `[n]` at `s[i..]`, the index after it,
    /// and whether one was found.
    fn arg_number(
        &mut self,
        arg_num: usize,
        s: &[u8],
        i: usize,
        num_args: usize,
    ) -> (usize, usize, bool) {
        if s.get(i) != Some(&b'[') {
            return (arg_num, i, false);
        }
        self.reordered = true;
        let (index, wid, ok) = parse_arg_number(s.get(i..).unwrap_or_default());
        if ok
            && let Ok(index) = usize::try_from(index)
            && index < num_args
        {
            return (index, i + wid, true);
        }
        self.good_arg_num = false;
        (arg_num, i + wid, ok)
    }

    /// Go's `printArg`: one top-level argument.
    fn print_arg(&mut self, arg: GoValue<'_>, verb: char) {
        match arg {
            GoValue::Nil => match verb {
                'T' | 'v' => self.pad("<nil>"),
                _ => self.bad_verb(verb, None),
            },
            _ if verb == 'T' => self.fmt_s(arg.type_name()),
            // No pointers here: Go would print the address of a map or slice.
            _ if verb == 'p' => self.bad_verb(verb, Some(arg)),
            _ => self.print_value(arg, verb),
        }
    }

    /// Go's `printValue` for a value inside a slice or map (an interface holding it).
    fn print_elem(&mut self, elem: &Value, verb: char) {
        match GoValue::of(elem) {
            GoValue::Nil if self.f.sharp_v => self.buf.push_str("interface {}(nil)"),
            GoValue::Nil => self.buf.push_str("<nil>"),
            v => self.print_value(v, verb),
        }
    }

    /// Go's `printValue` (and the simple cases of `printArg`).
    fn print_value(&mut self, v: GoValue<'_>, verb: char) {
        match v {
            GoValue::Nil => self.print_arg(v, verb),
            GoValue::Bool(b) => self.fmt_bool(b, verb),
            GoValue::Int(i) => self.fmt_int(i, verb),
            GoValue::Float(x) => self.fmt_float_verb(x, verb),
            GoValue::Str(s) => self.fmt_string(s, verb),
            GoValue::Slice(items) => {
                if self.f.sharp_v {
                    self.buf.push_str("[]interface {}{");
                } else {
                    self.buf.push('[');
                }
                for (k, item) in items.iter().enumerate() {
                    if !self.charge() {
                        break;
                    }
                    if k > 0 {
                        self.buf.push_str(if self.f.sharp_v { ", " } else { " " });
                    }
                    self.print_elem(item, verb);
                }
                self.buf.push(if self.f.sharp_v { '}' } else { ']' });
            }
            GoValue::Map(m) => {
                if self.f.sharp_v {
                    self.buf.push_str("map[string]interface {}{");
                } else {
                    self.buf.push_str("map[");
                }
                // fmt prints map keys sorted.
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                for (k, key) in keys.into_iter().enumerate() {
                    if !self.charge() {
                        break;
                    }
                    if k > 0 {
                        self.buf.push_str(if self.f.sharp_v { ", " } else { " " });
                    }
                    self.fmt_string(key, verb);
                    self.buf.push(':');
                    if let Some(value) = m.get(key) {
                        self.print_elem(value, verb);
                    }
                }
                self.buf.push(if self.f.sharp_v { '}' } else { ']' });
            }
        }
    }

    /// Go's `badVerb`: `%!verb(type=value)`, the value printed with `%v` and the current flags.
    fn bad_verb(&mut self, verb: char, arg: Option<GoValue<'_>>) {
        self.buf.push_str("%!");
        self.buf.push(verb);
        self.buf.push('(');
        match arg {
            Some(v) if !matches!(v, GoValue::Nil) => {
                self.buf.push_str(v.type_name());
                self.buf.push('=');
                self.print_value(v, 'v');
            }
            _ => self.buf.push_str("<nil>"),
        }
        self.buf.push(')');
    }

    fn fmt_bool(&mut self, b: bool, verb: char) {
        match verb {
            't' | 'v' => self.pad(if b { "true" } else { "false" }),
            _ => self.bad_verb(verb, Some(GoValue::Bool(b))),
        }
    }

    fn fmt_int(&mut self, i: i64, verb: char) {
        // Go formats integers from their two's complement bits.
        let u = i as u64;
        match verb {
            'v' | 'd' => self.fmt_integer(u, 10, true, verb, LDIGITS),
            'b' => self.fmt_integer(u, 2, true, verb, LDIGITS),
            'o' | 'O' => self.fmt_integer(u, 8, true, verb, LDIGITS),
            'x' => self.fmt_integer(u, 16, true, verb, LDIGITS),
            'X' => self.fmt_integer(u, 16, true, verb, UDIGITS),
            'c' => self.fmt_c(u),
            'q' if u <= 0x10FFFF => self.fmt_qc(u),
            'U' => self.fmt_unicode(u),
            _ => self.bad_verb(verb, Some(GoValue::Int(i))),
        }
    }

    fn fmt_float_verb(&mut self, x: f64, verb: char) {
        match verb {
            'v' => self.fmt_float(x, b'g', -1),
            'b' | 'g' | 'G' | 'x' | 'X' => self.fmt_float(x, verb as u8, -1),
            'f' | 'e' | 'E' => self.fmt_float(x, verb as u8, 6),
            'F' => self.fmt_float(x, b'f', 6),
            _ => self.bad_verb(verb, Some(GoValue::Float(x))),
        }
    }

    fn fmt_string(&mut self, s: &str, verb: char) {
        match verb {
            'v' if self.f.sharp_v => self.fmt_q(s),
            'v' | 's' => self.fmt_s(s),
            'x' => self.fmt_sx(s, LDIGITS),
            'X' => self.fmt_sx(s, UDIGITS),
            'q' => self.fmt_q(s),
            _ => self.bad_verb(verb, Some(GoValue::Str(s))),
        }
    }

    /// Go's `writePadding`.
    fn write_padding(&mut self, n: usize) {
        // Zero padding is allowed only to the left.
        let c = if self.f.zero && !self.f.minus {
            '0'
        } else {
            ' '
        };
        if self.room(n) {
            self.buf.extend(std::iter::repeat_n(c, n));
        }
    }

    /// Go's `pad`/`padString`: width counts runes.
    fn pad(&mut self, s: &str) {
        if !self.room(s.len()) {
            return;
        }
        if !self.f.wid_present || self.f.wid == 0 {
            self.buf.push_str(s);
            return;
        }
        let width = self.f.wid.saturating_sub(s.chars().count());
        if self.f.minus {
            self.buf.push_str(s);
            self.write_padding(width);
        } else {
            self.write_padding(width);
            self.buf.push_str(s);
        }
    }

    /// Go's `fmtUnicode`: `U+0078`, or with `#` `U+0078 'x'`.
    fn fmt_unicode(&mut self, u: u64) {
        let prec = if self.f.prec_present && self.f.prec > 4 {
            self.f.prec
        } else {
            4
        };
        if !room(prec) {
            return;
        }
        let hex = format!("{u:X}");
        let mut s = String::from("U+");
        s.extend(std::iter::repeat_n('0', prec.saturating_sub(hex.len())));
        s.push_str(&hex);
        if self.f.sharp
            && let Some(c) = u32::try_from(u).ok().and_then(char::from_u32)
            && is_print(c)
        {
            s.push_str(" '");
            s.push(c);
            s.push('\'');
        }
        let old_zero = self.f.zero;
        self.f.zero = false;
        self.pad(&s);
        self.f.zero = old_zero;
    }

    /// Go's `fmtInteger`.
    fn fmt_integer(&mut self, u: u64, base: u64, signed: bool, verb: char, digits: &[u8; 17]) {
        let negative = signed && (u as i64) < 0;
        let mut u = if negative { u.wrapping_neg() } else { u };

        // Two ways to ask for leading zeros, %.3d and %03d; precision wins.
        let mut prec = 0usize;
        if self.f.prec_present {
            prec = self.f.prec;
            // Precision 0 and value 0 print nothing but the padding.
            if prec == 0 && u == 0 {
                let old_zero = self.f.zero;
                self.f.zero = false;
                self.write_padding(self.f.wid);
                self.f.zero = old_zero;
                return;
            }
        } else if self.f.zero && !self.f.minus && self.f.wid_present {
            prec = self.f.wid;
            if negative || self.f.plus || self.f.space {
                // Leave room for the sign.
                prec = prec.saturating_sub(1);
            }
        }

        if !room(prec) {
            return;
        }
        // Digits, right to left.
        let mut rev: Vec<u8> = Vec::with_capacity(prec.max(24));
        loop {
            rev.push(digits.get((u % base) as usize).copied().unwrap_or(b'0'));
            u /= base;
            if u == 0 {
                break;
            }
        }
        while rev.len() < prec {
            rev.push(b'0');
        }
        if self.f.sharp {
            match base {
                2 => rev.extend_from_slice(b"b0"),
                8 if rev.last() != Some(&b'0') => rev.push(b'0'),
                16 => {
                    rev.push(digits.get(16).copied().unwrap_or(b'x'));
                    rev.push(b'0');
                }
                _ => {}
            }
        }
        if verb == 'O' {
            rev.extend_from_slice(b"o0");
        }
        if negative {
            rev.push(b'-');
        } else if self.f.plus {
            rev.push(b'+');
        } else if self.f.space {
            rev.push(b' ');
        }
        rev.reverse();
        let s = String::from_utf8_lossy(&rev).into_owned();

        // Zero padding was done above, as precision.
        let old_zero = self.f.zero;
        self.f.zero = false;
        self.pad(&s);
        self.f.zero = old_zero;
    }

    /// Go's `truncateString`: at most `prec` runes.
    fn truncate<'s>(&self, s: &'s str) -> &'s str {
        if self.f.prec_present
            && let Some((i, _)) = s.char_indices().nth(self.f.prec)
        {
            return s.get(..i).unwrap_or(s);
        }
        s
    }

    fn fmt_s(&mut self, s: &str) {
        let s = self.truncate(s);
        self.pad(s);
    }

    /// Go's `fmtSbx`: the bytes of a string in hexadecimal.
    fn fmt_sx(&mut self, s: &str, digits: &[u8; 17]) {
        let bytes = s.as_bytes();
        let length = if self.f.prec_present {
            bytes.len().min(self.f.prec)
        } else {
            bytes.len()
        };
        let mut width = 2 * length;
        if width > 0 {
            if self.f.space {
                if self.f.sharp {
                    width *= 2;
                }
                width += length - 1;
            } else if self.f.sharp {
                width += 2;
            }
        } else {
            if self.f.wid_present {
                self.write_padding(self.f.wid);
            }
            return;
        }
        if self.f.wid_present && self.f.wid > width && !self.f.minus {
            self.write_padding(self.f.wid - width);
        }
        let x = char::from(digits.get(16).copied().unwrap_or(b'x'));
        if self.f.sharp {
            self.buf.push('0');
            self.buf.push(x);
        }
        for (k, &c) in bytes.iter().take(length).enumerate() {
            if self.f.space && k > 0 {
                self.buf.push(' ');
                if self.f.sharp {
                    self.buf.push('0');
                    self.buf.push(x);
                }
            }
            for nibble in [c >> 4, c & 0xF] {
                self.buf.push(char::from(
                    digits.get(usize::from(nibble)).copied().unwrap_or(b'0'),
                ));
            }
        }
        if self.f.wid_present && self.f.wid > width && self.f.minus {
            self.write_padding(self.f.wid - width);
        }
    }

    /// Go's `fmtQ`: a quoted string, or with `#` a raw one when it can be.
    fn fmt_q(&mut self, s: &str) {
        let s = self.truncate(s);
        if self.f.sharp && can_backquote(s) {
            self.pad(&format!("`{s}`"));
            return;
        }
        let quoted = quote_with(s, '"', self.f.plus);
        self.pad(&quoted);
    }

    /// The rune of an integer for `%c` and `%q`: invalid ones become U+FFFD.
    fn rune_of(u: u64) -> char {
        u32::try_from(u)
            .ok()
            .and_then(char::from_u32)
            .unwrap_or(char::REPLACEMENT_CHARACTER)
    }

    fn fmt_c(&mut self, u: u64) {
        let c = Self::rune_of(u);
        self.pad(c.encode_utf8(&mut [0u8; 4]));
    }

    fn fmt_qc(&mut self, u: u64) {
        let c = Self::rune_of(u);
        let quoted = quote_rune(c, self.f.plus);
        self.pad(&quoted);
    }

    /// Go's `fmt.fmtFloat`: `verb` is a `strconv.FormatFloat` format, `prec` its default
    /// precision.
    fn fmt_float(&mut self, v: f64, verb: u8, prec: i64) {
        let prec = if self.f.prec_present {
            i64::try_from(self.f.prec).unwrap_or(i64::MAX)
        } else {
            prec
        };
        // Format with room for a leading sign.
        let formatted = format_float(v, verb, prec);
        let mut num: Vec<u8> = if formatted.starts_with(['-', '+']) {
            formatted.into_bytes()
        } else {
            let mut n = vec![b'+'];
            n.extend_from_slice(formatted.as_bytes());
            n
        };
        if self.f.space && num.first() == Some(&b'+') && !self.f.plus {
            num[0] = b' ';
        }
        // Infinities and NaN are not numbers to pad with zeros.
        if matches!(num.get(1), Some(b'I' | b'N')) {
            let old_zero = self.f.zero;
            self.f.zero = false;
            let mut s = String::from_utf8_lossy(&num).into_owned();
            if num.get(1) == Some(&b'N') && !self.f.space && !self.f.plus {
                s.remove(0);
            }
            self.pad(&s);
            self.f.zero = old_zero;
            return;
        }
        // '#' forces a decimal point and keeps trailing zeros.
        if self.f.sharp && verb != b'b' {
            let mut digits: i64 = match verb {
                b'v' | b'g' | b'G' | b'x' => {
                    if prec == -1 {
                        6
                    } else {
                        prec
                    }
                }
                _ => 0,
            };
            let mut tail: Vec<u8> = Vec::new();
            let mut has_decimal_point = false;
            let mut saw_nonzero_digit = false;
            let mut i = 1;
            while i < num.len() {
                let c = num[i];
                match c {
                    b'.' => has_decimal_point = true,
                    b'p' | b'P' => {
                        tail = num.split_off(i);
                    }
                    b'e' | b'E' if verb != b'x' && verb != b'X' => {
                        tail = num.split_off(i);
                    }
                    _ => {
                        if c != b'0' {
                            saw_nonzero_digit = true;
                        }
                        // Significant digits count from the first non-zero one.
                        if saw_nonzero_digit {
                            digits -= 1;
                        }
                    }
                }
                i += 1;
            }
            if !has_decimal_point {
                // A leading 0 counts once.
                if num.len() == 2 && num.get(1) == Some(&b'0') {
                    digits -= 1;
                }
                num.push(b'.');
            }
            while digits > 0 {
                num.push(b'0');
                digits -= 1;
            }
            num.extend_from_slice(&tail);
        }
        let s = String::from_utf8_lossy(&num).into_owned();
        if self.f.plus || num.first() != Some(&b'+') {
            // Zero padding goes between the sign and the digits.
            if self.f.zero && !self.f.minus && self.f.wid_present && self.f.wid > num.len() {
                self.buf.push_str(s.get(..1).unwrap_or_default());
                self.write_padding(self.f.wid - num.len());
                self.buf.push_str(s.get(1..).unwrap_or_default());
                return;
            }
            self.pad(&s);
            return;
        }
        self.pad(s.get(1..).unwrap_or_default());
    }
}

/// What a format string reads from its arguments, as `Sprintf` walks it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arguments {
    /// How many arguments the format needs (the highest argument it reads).
    pub needed: usize,
    /// Whether explicit argument indexes (`%[2]s`) are used; Go then reports no EXTRA.
    pub reordered: bool,
    /// Each verb with the (0-based) argument it reads.
    pub verbs: Vec<(usize, char)>,
}

/// A format that makes `Sprintf` print an error form whatever the values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FormatError {
    /// `%[` without `]`: Go prints `%!v(BADINDEX)`.
    UnclosedIndex,
    /// An index that is not a number from 1 (`%[x]`, `%[0]`): `%!v(BADINDEX)`.
    BadIndex(String),
    /// A `%` ending the format: `%!(NOVERB)`.
    NoVerb,
    /// A verb that prints no value of a decoded type, or `%w` (for `Errorf` only):
    /// `%!z(int64=1)`.
    UnknownVerb(char),
}

/// Walks a format string as `Sprintf` does and counts the arguments it reads (verbs and `*`
/// widths, honouring `%[n]` indexes); `%%` reads nothing.
pub fn arguments(format: &str) -> Result<Arguments, FormatError> {
    const VERBS: &str = "bcdeEfFgGoOpqstTUvxX";
    let chars: Vec<char> = format.chars().collect();
    let mut i = 0;
    let mut arg = 0usize;
    let mut needed = 0usize;
    let mut reordered = false;
    let mut verbs = Vec::new();
    while i < chars.len() {
        if chars[i] != '%' {
            i += 1;
            continue;
        }
        i += 1;
        if i < chars.len() && chars[i] == '%' {
            i += 1;
            continue;
        }
        // Flags.
        while i < chars.len() && "+-# 0".contains(chars[i]) {
            i += 1;
        }
        let mut parse_index = |i: &mut usize, arg: &mut usize| -> Result<(), FormatError> {
            if *i < chars.len() && chars[*i] == '[' {
                let close = chars[*i..]
                    .iter()
                    .position(|&c| c == ']')
                    .ok_or(FormatError::UnclosedIndex)?;
                let digits: String = chars[*i + 1..*i + close].iter().collect();
                let n: usize = digits
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| FormatError::BadIndex(digits.clone()))?;
                *arg = n - 1;
                reordered = true;
                *i += close + 1;
            }
            Ok(())
        };
        // Width, then precision: digits, or '*' which reads an argument.
        let mut star_or_digits = |i: &mut usize, arg: &mut usize| {
            if *i < chars.len() && chars[*i] == '*' {
                *arg += 1;
                needed = needed.max(*arg);
                *i += 1;
            } else {
                while *i < chars.len() && chars[*i].is_ascii_digit() {
                    *i += 1;
                }
            }
        };
        parse_index(&mut i, &mut arg)?;
        star_or_digits(&mut i, &mut arg);
        if i < chars.len() && chars[i] == '.' {
            i += 1;
            parse_index(&mut i, &mut arg)?;
            star_or_digits(&mut i, &mut arg);
        }
        parse_index(&mut i, &mut arg)?;
        let Some(&verb) = chars.get(i) else {
            return Err(FormatError::NoVerb);
        };
        if !VERBS.contains(verb) {
            return Err(FormatError::UnknownVerb(verb));
        }
        verbs.push((arg, verb));
        arg += 1;
        needed = needed.max(arg);
        i += 1;
    }
    Ok(Arguments {
        needed,
        reordered,
        verbs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Go's `Sprintf(format, args...)` with JSON arguments.
    fn f(format: &str, args: &[Value]) -> String {
        sprintf(format, args)
    }

    #[test]
    fn verbs_of_kubernetes_types() {
        assert_eq!(f("%s", &[json!("hello")]), "hello");
        assert_eq!(f("%v", &[json!(5)]), "5");
        assert_eq!(f("%d", &[json!(-12345)]), "-12345");
        assert_eq!(f("%t", &[json!(true)]), "true");
        assert_eq!(f("%v", &[json!(null)]), "<nil>");
        assert_eq!(f("%T", &[json!(null)]), "<nil>");
        assert_eq!(
            f("%T %T %T", &[json!(1), json!(1.5), json!("s")]),
            "int64 float64 string"
        );
        assert_eq!(f("%T", &[json!(["a"])]), "[]interface {}");
        assert_eq!(f("%T", &[json!({"a": 1})]), "map[string]interface {}");
        assert_eq!(f("%6T|", &[json!(true)]), "  bool|");
        assert_eq!(f("%c", &[json!(0x65e5)]), "日");
        assert_eq!(f("%c", &[json!(-1)]), "\u{FFFD}");
        assert_eq!(f("%U", &[json!(0x263a)]), "U+263A");
        assert_eq!(f("%#U", &[json!(0x263a)]), "U+263A '☺'");
        assert_eq!(f("%#14.6U", &[json!(0x2318)]), "  U+002318 '⌘'");
        assert_eq!(f("%U", &[json!(-1)]), "U+FFFFFFFFFFFFFFFF");
        assert_eq!(f("%q", &[json!(0x263a)]), "'☺'");
        assert_eq!(f("%+q", &[json!(0x263a)]), "'\\u263a'");
        assert_eq!(f("%q", &[json!(-1)]), "%!q(int64=-1)");
        assert_eq!(f("%%", &[]), "%");
        assert_eq!(f("100%% %s", &[json!("x")]), "100% x");
    }

    #[test]
    fn floats_print_like_go() {
        // %v of a float64 is the shortest %g.
        assert_eq!(f("%v", &[json!(1.5)]), "1.5");
        assert_eq!(f("%v", &[json!(1e21)]), "1e+21");
        assert_eq!(f("%v", &[json!(100000.0)]), "100000");
        assert_eq!(f("%v", &[json!(1000000.0)]), "1e+06");
        assert_eq!(f("%v", &[json!(0.00001)]), "1e-05");
        assert_eq!(f("%v", &[json!(0.0001)]), "0.0001");
        assert_eq!(f("%v", &[json!(2.0)]), "2");
        assert_eq!(f("%v", &[json!(-0.0)]), "-0");
        assert_eq!(f("%v", &[json!(1.2345678)]), "1.2345678");
        assert_eq!(f("%f", &[json!(1.5)]), "1.500000");
        assert_eq!(f("%F", &[json!(-7.0)]), "-7.000000");
        assert_eq!(f("%.2f", &[json!(2.675)]), "2.67");
        assert_eq!(f("%.0f", &[json!(2.5)]), "2");
        assert_eq!(f("%e", &[json!(1234.5678e3)]), "1.234568e+06");
        assert_eq!(f("%E", &[json!(1234.5678e-8)]), "1.234568E-05");
        assert_eq!(f("%g", &[json!(1234.5678e3)]), "1.2345678e+06");
        assert_eq!(f("%G", &[json!(-1e-9)]), "-1E-09");
        assert_eq!(f("%g", &[json!(1.23456789e-3)]), "0.00123456789");
        assert_eq!(f("%.3g", &[json!(1234.0)]), "1.23e+03");
        assert_eq!(f("%.3g", &[json!(1.0)]), "1");
        assert_eq!(f("%20.8f", &[json!(1.23456789e3)]), "       1234.56789000");
        assert_eq!(f("%-20f|", &[json!(1.23456789e3)]), "1234.567890         |");
        assert_eq!(f("%+.3e", &[json!(0.0)]), "+0.000e+00");
        assert_eq!(f("%+07.2f", &[json!(-1.0)]), "-001.00");
        assert_eq!(f("% .2f", &[json!(1.0)]), " 1.00");
        assert_eq!(f("%07.2f", &[json!(1.0)]), "0001.00");
        assert_eq!(f("%-05.1f|", &[json!(1.0)]), "1.0  |");
        assert_eq!(f("%#g", &[json!(1.1)]), "1.10000");
        assert_eq!(f("%#g", &[json!(123456.0)]), "123456.");
        assert_eq!(f("%#g", &[json!(1234567.0)]), "1.234567e+06");
        assert_eq!(f("%#.0f", &[json!(1.0)]), "1.");
        assert_eq!(f("%#.4g", &[json!(0.012)]), "0.01200");
        assert_eq!(f("%x", &[json!(1.0)]), "0x1p+00");
        assert_eq!(f("%+.3x", &[json!(1.0)]), "+0x1.000p+00");
        assert_eq!(f("%#.0x", &[json!(1.0)]), "0x1.p+00");
        assert_eq!(f("%#.4x", &[json!(123.0)]), "0x1.ec00p+06");
        assert_eq!(f("% .3X", &[json!(-1.0)]), "-0X1.000P+00");
        assert_eq!(f("%b", &[json!(1.0)]), "4503599627370496p-52");
        assert_eq!(f("%d", &[json!(1.5)]), "%!d(float64=1.5)");
        assert_eq!(f("%#v", &[json!(1.0)]), "1");
        assert_eq!(f("%#v", &[json!(1000000.0)]), "1e+06");
        assert_eq!(
            f("%v|%e|%g", &[json!(1e100), json!(0.0), json!(0.0)]),
            "1e+100|0.000000e+00|0"
        );
        assert_eq!(f("%5%|%-5.1%", &[]), "%|%");
        assert_eq!(
            f("%c|%U", &[json!(1.5), json!("x")]),
            "%!c(float64=1.5)|%!U(string=x)"
        );
    }

    #[test]
    fn integers_print_like_go() {
        assert_eq!(
            f("%5d|%-5d|%05d", &[json!(42), json!(42), json!(-42)]),
            "   42|42   |-0042"
        );
        assert_eq!(f("%+d % d", &[json!(5), json!(5)]), "+5  5");
        assert_eq!(
            f(
                "%x %X %#x %o %#o %O %b %#b",
                &[
                    json!(255),
                    json!(255),
                    json!(255),
                    json!(8),
                    json!(8),
                    json!(8),
                    json!(5),
                    json!(5)
                ]
            ),
            "ff FF 0xff 10 010 0o10 101 0b101"
        );
        assert_eq!(f("%x", &[json!(-255)]), "-ff");
        assert_eq!(
            f("%.d|%6.0d|%06.0d", &[json!(0), json!(0), json!(0)]),
            "|      |      "
        );
        assert_eq!(f("%20.8d", &[json!(-1234)]), "           -00001234");
        assert_eq!(f("%-#20.8x|", &[json!(0x1234abc)]), "0x01234abc          |");
        assert_eq!(
            f("%d", &[json!(-9223372036854775808i64)]),
            "-9223372036854775808"
        );
        assert_eq!(f("%s", &[json!(5)]), "%!s(int64=5)");
        // A number above i64::MAX is a float64.
        assert_eq!(
            f("%v", &[json!(18446744073709551615u64)]),
            "1.8446744073709552e+19"
        );
    }

    #[test]
    fn strings_print_like_go() {
        assert_eq!(
            f("%5s|%-5s|%05s", &[json!("abc"), json!("abc"), json!("abc")]),
            "  abc|abc  |00abc"
        );
        assert_eq!(f("%.2s|%.5s", &[json!("日本語"), json!("ab")]), "日本|ab");
        assert_eq!(f("%2s|", &[json!("☺")]), " ☺|");
        assert_eq!(
            f(
                "%x|% X|%#x|%# x",
                &[json!("xyz"), json!("xyz"), json!("xyz"), json!("xyz")]
            ),
            "78797a|78 79 7A|0x78797a|0x78 0x79 0x7a"
        );
        assert_eq!(
            f("%.1x|%08x", &[json!("日本語"), json!("\u{ab}")]),
            "e6|0000c2ab"
        );
        assert_eq!(f("%q", &[json!("a\"b\\c\n")]), r#""a\"b\\c\n""#);
        assert_eq!(
            f(
                "%q|%+q|%#q",
                &[json!("日本語"), json!("日本語"), json!("日本語")]
            ),
            "\"日本語\"|\"\\u65e5\\u672c\\u8a9e\"|`日本語`"
        );
        assert_eq!(f("%#q", &[json!("\n")]), r#""\n""#);
        assert_eq!(
            f("%q", &[json!("\u{7}\u{1}\u{7f}\u{a0}\u{10ffff}")]),
            r#""\a\x01\x7f\u00a0\U0010ffff""#
        );
        assert_eq!(f("%010q", &[json!("⌘")]), "0000000\"⌘\"");
        assert_eq!(f("%#v", &[json!("foo")]), "\"foo\"");
        assert_eq!(f("%d", &[json!("hello")]), "%!d(string=hello)");
        assert_eq!(f("%5d", &[json!("hi")]), "%!d(string=   hi)");
        assert_eq!(f("%t", &[json!("x")]), "%!t(string=x)");
        assert_eq!(f("%s", &[json!(true)]), "%!s(bool=true)");
        assert_eq!(f("%s", &[json!(null)]), "%!s(<nil>)");
        assert_eq!(f("%d", &[json!(null)]), "%!d(<nil>)");
        assert_eq!(
            f("%10v|%-10v|", &[json!(null), json!(null)]),
            "     <nil>|<nil>     |"
        );
        assert_eq!(f("%p", &[json!("x")]), "%!p(string=x)");
        assert_eq!(f("%w", &[json!("x")]), "%!w(string=x)");
        assert_eq!(f("%☠", &[json!(1.2345678)]), "%!☠(float64=1.2345678)");
    }

    #[test]
    fn slices_and_maps_print_like_go() {
        assert_eq!(f("%v", &[json!(["a", "b", "c"])]), "[a b c]");
        assert_eq!(
            f("%v", &[json!([1, "hello", 2.5, null])]),
            "[1 hello 2.5 <nil>]"
        );
        assert_eq!(
            f("%v", &[json!({"b": 2, "a": 1, "c": [true]})]),
            "map[a:1 b:2 c:[true]]"
        );
        assert_eq!(f("%s", &[json!(["a", 1])]), "[a %!s(int64=1)]");
        assert_eq!(f("%d", &[json!({"a": 1})]), "map[%!d(string=a):1]");
        assert_eq!(f("%d", &[json!([null])]), "[<nil>]");
        assert_eq!(f("%q", &[json!(["a", "b"])]), r#"["a" "b"]"#);
        assert_eq!(f("%x", &[json!([1, 2, 15])]), "[1 2 f]");
        assert_eq!(f("%06v", &[json!([10.0, 10])]), "[000010 000010]");
        assert_eq!(f("%06v", &[json!([-10.0, 10])]), "[-00010 000010]");
        assert_eq!(f("%03.6v", &[json!([1, 2.0, "x"])]), "[000001 002 00x]");
        assert_eq!(f("%03.0v", &[json!([0, 2.0, "x"])]), "[    002 000]");
        assert_eq!(f("%v", &[json!([])]), "[]");
        assert_eq!(f("%v", &[json!({})]), "map[]");
        assert_eq!(
            f("%#v", &[json!([1, "a", null, {"k": 1.5}])]),
            r#"[]interface {}{1, "a", interface {}(nil), map[string]interface {}{"k":1.5}}"#
        );
    }

    #[test]
    fn error_forms_are_gos() {
        assert_eq!(f("", &[json!(null)]), "%!(EXTRA <nil>)");
        assert_eq!(
            f("no args", &[json!("hello")]),
            "no args%!(EXTRA string=hello)"
        );
        assert_eq!(
            f("%s", &[json!("a"), json!(["x", 1]), json!(2)]),
            "a%!(EXTRA []interface {}=[x 1], int64=2)"
        );
        assert_eq!(f("%s %s", &[json!("a")]), "a %!s(MISSING)");
        assert_eq!(f("%s %", &[json!("hello")]), "hello %!(NOVERB)");
        assert_eq!(f("%s %.2", &[json!("hello")]), "hello %!(NOVERB)");
        assert_eq!(
            f("%010.2", &[json!("12345")]),
            "%!(NOVERB)%!(EXTRA string=12345)"
        );
        assert_eq!(f("%.", &[json!(3)]), "%!.(int64=3)");
        assert_eq!(f("%*d", &[json!("x"), json!(5)]), "%!(BADWIDTH)5");
        assert_eq!(f("%.*d", &[json!(1.5), json!(5)]), "%!(BADPREC)5");
        assert_eq!(f("%.*d", &[json!(-1), json!(5)]), "%!(BADPREC)5");
        assert_eq!(
            f("%2147483648d", &[json!(42)]),
            "%!(NOVERB)%!(EXTRA int64=42)"
        );
        assert_eq!(
            f("%184467440737095516170v", &[json!(0)]),
            "%!(NOVERB)%!(EXTRA int64=0)"
        );
    }

    #[test]
    fn width_precision_and_indexes() {
        assert_eq!(f("%*d", &[json!(5), json!(42)]), "   42");
        assert_eq!(f("%-*d|", &[json!(5), json!(42)]), "42   |");
        assert_eq!(f("%*d|", &[json!(-5), json!(42)]), "42   |");
        assert_eq!(f("%.*f", &[json!(2), json!(5.4321)]), "5.43");
        assert_eq!(f("%[1]s-%[1]s", &[json!("x")]), "x-x");
        assert_eq!(f("%[2]d %[1]d", &[json!(1), json!(2)]), "2 1");
        assert_eq!(f("%[2]*[1]d", &[json!(2), json!(5)]), "    2");
        assert_eq!(
            f("%[3]*.[2]*[1]f", &[json!(12.0), json!(2), json!(6)]),
            " 12.00"
        );
        assert_eq!(
            f(
                "%d %d %d %#[1]o %#o %#o",
                &[json!(11), json!(12), json!(13)]
            ),
            "11 12 13 013 014 015"
        );
        assert_eq!(f("%[d", &[json!(2), json!(1)]), "%!d(BADINDEX)");
        assert_eq!(
            f("%]d", &[json!(2), json!(1)]),
            "%!](int64=2)d%!(EXTRA int64=1)"
        );
        assert_eq!(f("%[]d", &[json!(2), json!(1)]), "%!d(BADINDEX)");
        assert_eq!(f("%[-3]d", &[json!(2), json!(1)]), "%!d(BADINDEX)");
        assert_eq!(f("%[99]d", &[json!(2), json!(1)]), "%!d(BADINDEX)");
        assert_eq!(f("%[3]", &[json!(2), json!(1)]), "%!(NOVERB)");
        assert_eq!(f("%[1].2d", &[json!(5), json!(6)]), "%!d(BADINDEX)");
        assert_eq!(f("%[1]2d", &[json!(2), json!(1)]), "%!d(BADINDEX)");
        assert_eq!(f("%.[2]d", &[json!(7)]), "%!d(BADINDEX)");
        assert_eq!(
            f("%[5]d %[2]d %d", &[json!(1), json!(2), json!(3)]),
            "%!d(BADINDEX) 2 3"
        );
        assert_eq!(f("%d %[3]d %d", &[json!(1), json!(2)]), "1 %!d(BADINDEX) 2");
        assert_eq!(f("%.[]", &[]), "%!](BADINDEX)");
        assert_eq!(f("%.-3d", &[json!(42)]), "%!-(int64=42)3d");
    }

    #[test]
    fn sprint_v_is_percent_v() {
        assert_eq!(
            sprint_v(&json!({"z": null, "a": [1.5]})),
            "map[a:[1.5] z:<nil>]"
        );
        assert_eq!(sprint_v(&json!(1e21)), "1e+21");
        assert_eq!(sprint_v(&json!("s")), "s");
    }

    /// What `Sprintf` reads, against what it prints: `needed` is the arguments after
    /// which it prints neither `%!v(MISSING)` nor, unreordered, `%!(EXTRA ...)`.
    /// A format, and the arguments it needs and whether it reorders them.
    type Row = (&'static str, Result<(usize, bool), FormatError>);

    fn arguments_table() -> Vec<Row> {
        vec![
            ("%s-%s", Ok((2, false))),
            ("100%% %d", Ok((1, false))),
            ("%-10s|%5.2f|%+d|%#x", Ok((4, false))),
            ("%*d", Ok((2, false))),
            ("%-*.*f", Ok((3, false))),
            ("%[2]s-%[1]s", Ok((2, true))),
            ("%[3]s", Ok((3, true))),
            ("%[2]*[1]d", Ok((2, true))),
            ("%d %d %#[1]o %#o", Ok((2, true))),
            ("no verbs", Ok((0, false))),
            ("", Ok((0, false))),
            ("50%", Err(FormatError::NoVerb)),
            ("%-", Err(FormatError::NoVerb)),
            ("%z", Err(FormatError::UnknownVerb('z'))),
            ("%w", Err(FormatError::UnknownVerb('w'))),
            ("%[x]s", Err(FormatError::BadIndex("x".to_string()))),
            ("%[0]s", Err(FormatError::BadIndex("0".to_string()))),
            ("%[2s", Err(FormatError::UnclosedIndex)),
        ]
    }

    #[test]
    fn arguments_are_what_sprintf_reads() {
        for (format, want) in &arguments_table() {
            let got = arguments(format).map(|a| (a.needed, a.reordered));
            assert_eq!(&got, want, "{format:?}");
            // Sprintf agrees: with `needed` values nothing is missing or left over.
            if let Ok((needed, _)) = want {
                let values: Vec<Value> = (0..*needed).map(|i| json!(i)).collect();
                let printed = sprintf(format, &values);
                assert!(
                    !printed.contains("(MISSING)") && !printed.contains("EXTRA"),
                    "{format:?} printed {printed:?}"
                );
            }
        }
        assert_eq!(
            arguments("%[2]d %s %d").map(|a| a.verbs),
            Ok(vec![(1, 'd'), (2, 's'), (3, 'd')])
        );
    }
}
