//! Kubernetes' `resource.ParseQuantity(s)` (`k8s.io/apimachinery/pkg/api/resource`): what the
//! API server decodes a `resource.Quantity` field of a built-in kind with (`cpu: 500m`), and,
//! followed by `AsApproximateFloat64()`, what the `convert` transform's `quantity` format
//! uses.
//!
//! A quantity is kept the way `ParseQuantity` keeps it: an `int64` with a decimal scale when
//! it fits, otherwise an arbitrary-precision decimal rounded up to nano units (binary
//! quantities capped at 2^63-1). The float is then `base * math.Pow10(exponent)`, with Go's
//! `Pow10` tables, so the rounding is Go's too.

/// Why `resource.ParseQuantity` refused a string, in its words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// `ErrFormatWrong`.
    #[error(
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )]
    FormatWrong,
    /// `ErrNumeric`.
    #[error("unable to parse numeric part of quantity")]
    Numeric,
    /// `ErrSuffix`.
    #[error("unable to parse quantity's suffix")]
    Suffix,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    DecimalExponent,
    BinarySi,
    DecimalSi,
}

/// The parts `parseQuantityString` finds.
struct Parts<'a> {
    positive: bool,
    value: &'a str,
    num: &'a str,
    denom: &'a str,
    suffix: &'a str,
}

/// Go's `parseQuantityString`, byte for byte.
fn parse_quantity_string(s: &str) -> Result<Parts<'_>, QuantityError> {
    let b = s.as_bytes();
    let end = b.len();
    let sub = |from: usize, to: usize| s.get(from..to).unwrap_or_default();
    let mut parts = Parts {
        positive: true,
        value: "",
        num: "",
        denom: "",
        suffix: "",
    };
    let mut pos = 0;
    match b.first() {
        Some(b'-') => {
            parts.positive = false;
            pos += 1;
        }
        Some(b'+') => pos += 1,
        _ => {}
    }
    // Strip leading zeros.
    loop {
        match b.get(pos) {
            None => {
                parts.num = "0";
                parts.value = "0";
                return Ok(parts);
            }
            Some(b'0') => pos += 1,
            Some(_) => break,
        }
    }
    let digit = |c: u8| c.is_ascii_digit();
    // The numerator.
    let i = run_end(b, pos, digit);
    parts.num = sub(pos, i);
    if i == end {
        parts.value = sub(0, end);
        return Ok(parts);
    }
    pos = i;
    if parts.num.is_empty() {
        parts.num = "0";
    }
    // The denominator.
    if b.get(pos) == Some(&b'.') {
        pos += 1;
        let i = run_end(b, pos, digit);
        parts.denom = sub(pos, i);
        if i == end {
            parts.value = sub(0, end);
            return Ok(parts);
        }
        pos = i;
    }
    parts.value = sub(0, pos);
    // The suffix: letters, then an optional sign and digits.
    let suffix_start = pos;
    pos = run_end(b, pos, |c| b"eEinumkKMGTP".contains(&c));
    if pos < end && matches!(b[pos], b'-' | b'+') {
        pos += 1;
    }
    // `pos == end` right after the letters is a suffix of letters only, as in Go.
    if run_end(b, pos, digit) == end {
        parts.suffix = sub(suffix_start, end);
        Ok(parts)
    } else {
        Err(QuantityError::FormatWrong)
    }
}

/// The end of the run of bytes from `from` that `accept` takes.
fn run_end(b: &[u8], from: usize, accept: impl Fn(u8) -> bool) -> usize {
    b.get(from..)
        .and_then(|rest| rest.iter().position(|&c| !accept(c)))
        .map_or(b.len(), |n| from + n)
}

/// Go's `suffixHandler.interpret`: base, exponent and format of a suffix.
fn interpret(suffix: &str) -> Option<(u32, i32, Format)> {
    let decimal = match suffix {
        "n" => Some(-9),
        "u" => Some(-6),
        "m" => Some(-3),
        "" => Some(0),
        "k" => Some(3),
        "M" => Some(6),
        "G" => Some(9),
        "T" => Some(12),
        "P" => Some(15),
        "E" => Some(18),
        _ => None,
    };
    if let Some(e) = decimal {
        return Some((10, e, Format::DecimalSi));
    }
    let binary = match suffix {
        "Ki" => Some(10),
        "Mi" => Some(20),
        "Gi" => Some(30),
        "Ti" => Some(40),
        "Pi" => Some(50),
        "Ei" => Some(60),
        _ => None,
    };
    if let Some(e) = binary {
        return Some((2, e, Format::BinarySi));
    }
    let rest = suffix.strip_prefix(['e', 'E'])?;
    if rest.is_empty() {
        return None;
    }
    // `strconv.ParseInt(rest, 10, 64)`: an optional sign and decimal digits, as Rust's.
    let parsed: i64 = rest.parse().ok()?;
    // Go keeps the exponent as an int32.
    Some((10, parsed as i32, Format::DecimalExponent))
}

/// Go's `math.Pow10`, with its tables, so products round as Go's do.
fn pow10(n: i64) -> f64 {
    const TAB: [f64; 32] = [
        1e00, 1e01, 1e02, 1e03, 1e04, 1e05, 1e06, 1e07, 1e08, 1e09, 1e10, 1e11, 1e12, 1e13, 1e14,
        1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22, 1e23, 1e24, 1e25, 1e26, 1e27, 1e28, 1e29,
        1e30, 1e31,
    ];
    const POS32: [f64; 10] = [
        1e00, 1e32, 1e64, 1e96, 1e128, 1e160, 1e192, 1e224, 1e256, 1e288,
    ];
    const NEG32: [f64; 11] = [
        1e-00, 1e-32, 1e-64, 1e-96, 1e-128, 1e-160, 1e-192, 1e-224, 1e-256, 1e-288, 1e-320,
    ];
    let idx = |k: i64| usize::try_from(k).unwrap_or(0);
    if (0..=308).contains(&n) {
        let (q, r) = (idx(n / 32), idx(n % 32));
        return POS32.get(q).copied().unwrap_or(f64::INFINITY) * TAB.get(r).copied().unwrap_or(1.0);
    }
    if (-323..=0).contains(&n) {
        let (q, r) = (idx(-n / 32), idx(-n % 32));
        return NEG32.get(q).copied().unwrap_or(0.0) / TAB.get(r).copied().unwrap_or(1.0);
    }
    if n > 0 { f64::INFINITY } else { 0.0 }
}

/// Digits beyond which a rescaled decimal is out of float64 range anyway.
const MAX_DIGITS: usize = 400;

/// Whether `resource.ParseQuantity(s)` takes `s`, and its error if not.
///
/// # Errors
///
/// The [`QuantityError`] `ParseQuantity` returns.
pub fn parse(s: &str) -> Result<(), QuantityError> {
    parse_approximate_f64(s).map(|_| ())
}

/// `resource.ParseQuantity(s)` then `AsApproximateFloat64()`; may be infinite.
///
/// # Errors
///
/// The [`QuantityError`] `ParseQuantity` returns.
pub fn parse_approximate_f64(s: &str) -> Result<f64, QuantityError> {
    if s.is_empty() {
        return Err(QuantityError::FormatWrong);
    }
    if s == "0" {
        return Ok(0.0);
    }
    let parts = parse_quantity_string(s)?;
    let (base, exponent, format) = interpret(parts.suffix).ok_or(QuantityError::Suffix)?;

    let num_len = i64::try_from(parts.num.len()).unwrap_or(i64::MAX);
    let denom_len = i64::try_from(parts.denom.len()).unwrap_or(i64::MAX);
    let (precision, mut scale, mantissa): (i64, i64, i64) = match format {
        Format::DecimalExponent | Format::DecimalSi => (
            18 - num_len.saturating_add(denom_len),
            i64::from(exponent),
            1,
        ),
        Format::BinarySi if exponent >= 0 && parts.denom.is_empty() => {
            // Go: 15 - len(num) - int32(float32(exponent)*3/10) - 1; exact for 10..60.
            let digits = i64::from(exponent) * 3 / 10;
            (15 - num_len - digits - 1, 0, 1i64 << exponent)
        }
        Format::BinarySi => (-1, 0, 1),
    };

    // The fast path: an int64 with a decimal scale down to nano.
    if precision >= 0 {
        scale -= denom_len;
        if scale >= -9 {
            let shifted = format!("{}{}", parts.num, parts.denom);
            let value: i64 = shifted.parse().map_err(|_| QuantityError::Numeric)?;
            if let Some(mut result) = value.checked_mul(mantissa) {
                if !parts.positive {
                    result = -result;
                }
                // AsApproximateFloat64 of an int64Amount.
                let base = result as f64;
                return Ok(if scale == 0 {
                    base
                } else {
                    base * pow10(scale)
                });
            }
        }
    }

    // The slow path: inf.Dec's SetString of the whole number, sign included.
    let value = parts.value;
    let (neg, unsigned) = match value.as_bytes().first() {
        Some(b'-') => (true, value.get(1..).unwrap_or_default()),
        Some(b'+') => (false, value.get(1..).unwrap_or_default()),
        _ => (false, value),
    };
    let (int_part, frac_part) = unsigned.split_once('.').unwrap_or((unsigned, ""));
    if int_part.is_empty() && frac_part.is_empty() {
        return Err(QuantityError::Numeric);
    }
    let mut digits: Vec<u8> = int_part
        .bytes()
        .chain(frac_part.bytes())
        .map(|c| c - b'0')
        .collect();
    let mut dec_scale = i64::try_from(frac_part.len()).unwrap_or(i64::MAX);
    match base {
        10 => dec_scale -= i64::from(exponent),
        _ => {
            for _ in 0..exponent {
                times_small(&mut digits, 2);
            }
        }
    }
    let is_zero = digits.iter().all(|&d| d == 0);
    // Round non-zero amounts up to nano units.
    if !is_zero {
        if dec_scale <= 9 {
            let grow = usize::try_from(9 - dec_scale).unwrap_or(usize::MAX);
            if grow > MAX_DIGITS {
                let inf = f64::INFINITY;
                return Ok(if neg { -inf } else { inf });
            }
            digits.extend(std::iter::repeat_n(0, grow));
        } else {
            let drop = usize::try_from(dec_scale - 9).unwrap_or(usize::MAX);
            let keep = digits.len().saturating_sub(drop);
            let dropped_nonzero = digits
                .get(keep..)
                .is_some_and(|t| t.iter().any(|&d| d != 0));
            digits.truncate(keep);
            if dropped_nonzero {
                add_one(&mut digits);
            }
        }
        dec_scale = 9;
    }
    // Binary quantities are capped at 2^63-1.
    if format == Format::BinarySi {
        let max_nano: Vec<u8> = "9223372036854775807000000000"
            .bytes()
            .map(|c| c - b'0')
            .collect();
        if dec_scale == 9 && greater(&digits, &max_nano) {
            let base = 9_223_372_036_854_775_807_i64 as f64;
            return Ok(if neg { -base } else { base });
        }
    }
    let text: String = digits.iter().map(|&d| char::from(b'0' + d)).collect();
    let mut base: f64 = if text.is_empty() {
        0.0
    } else {
        text.parse().unwrap_or(0.0)
    };
    if neg && !is_zero {
        base = -base;
    }
    let exponent = -dec_scale;
    Ok(if exponent == 0 {
        base
    } else {
        base * pow10(exponent)
    })
}

/// `digits *= k` for a small `k`.
fn times_small(digits: &mut Vec<u8>, k: u32) {
    let mut carry = 0u32;
    for d in digits.iter_mut().rev() {
        let v = u32::from(*d) * k + carry;
        *d = (v % 10) as u8;
        carry = v / 10;
    }
    while carry > 0 {
        digits.insert(0, (carry % 10) as u8);
        carry /= 10;
    }
}

/// `digits += 1`.
fn add_one(digits: &mut Vec<u8>) {
    for d in digits.iter_mut().rev() {
        if *d == 9 {
            *d = 0;
        } else {
            *d += 1;
            return;
        }
    }
    digits.insert(0, 1);
}

/// Whether the decimal `a` is greater than `b` (both without a sign).
fn greater(a: &[u8], b: &[u8]) -> bool {
    let trim = |x: &[u8]| -> Vec<u8> { x.iter().copied().skip_while(|&d| d == 0).collect() };
    let (a, b) = (trim(a), trim(b));
    a.len() > b.len() || (a.len() == b.len() && a > b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_as_kubernetes_approximates_them() {
        let q = |s: &str| parse_approximate_f64(s);
        assert_eq!(q("1.5Gi"), Ok(1_610_612_736.0));
        assert_eq!(q("100Mi"), Ok(104_857_600.0));
        assert_eq!(q("1Ki"), Ok(1024.0));
        assert_eq!(q("500m"), Ok(0.5));
        assert_eq!(q("2k"), Ok(2000.0));
        assert_eq!(q("1e3"), Ok(1000.0));
        assert_eq!(q("1E-3"), Ok(0.001));
        assert_eq!(q("0.1"), Ok(0.1));
        assert_eq!(q("-1.5"), Ok(-1.5));
        assert_eq!(q("+2"), Ok(2.0));
        assert_eq!(q("0"), Ok(0.0));
        assert_eq!(q("."), Ok(0.0));
        assert_eq!(q("1.5n"), Ok(2.0 * 1e-9));
        assert_eq!(q("8Ei"), Ok(9_223_372_036_854_775_807_i64 as f64));
        assert_eq!(q("1e400"), Ok(f64::INFINITY));
        assert_eq!(q(""), Err(QuantityError::FormatWrong));
        assert_eq!(q("abc"), Err(QuantityError::FormatWrong));
        assert_eq!(q("1KiB"), Err(QuantityError::FormatWrong));
        assert_eq!(q("1ki"), Err(QuantityError::Suffix));
        assert_eq!(q("1e"), Err(QuantityError::Suffix));
        assert_eq!(
            QuantityError::FormatWrong.to_string(),
            "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        );
    }

    /// apimachinery's `quantity_test.go` (`TestQuantityParse`): inputs "written by trolls"
    /// and fractional binary ones it reads, and its `invalid` list.
    #[test]
    fn parses_as_apimachinery() {
        for s in [
            "1.",
            "1.G",
            ".001",
            ".0001k",
            "0.000000000001Ki",
            "100.035Ki",
            "0.5Mi",
            "9Ei",
            "12E",
        ] {
            assert_eq!(parse(s), Ok(()), "ParseQuantity({s:?})");
        }
        for s in [
            "1.1.M", "1+1.0M", "0.1mi", "0.1am", "aoeu", ".5i", "1i", "-3.01i", "-3.01e-", " 1",
            "1 ",
        ] {
            assert!(parse(s).is_err(), "ParseQuantity({s:?}) should fail");
        }
    }
}
