//! Go's `encoding/base64` `StdEncoding`: `EncodeToString` and `DecodeString` with the offset
//! its `CorruptInputError` reports.

use base64::Engine as _;
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};

/// `StdEncoding`, which (unlike its `Strict` form) ignores the unused bits of the last
/// symbol.
const STD_ENCODING: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_allow_trailing_bits(true)
        .with_decode_padding_mode(DecodePaddingMode::RequireCanonical),
);

/// Go's `CorruptInputError`: the offset of the first byte that is not base64.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("illegal base64 data at input byte {0}")]
pub struct CorruptInputError(pub usize);

/// `StdEncoding.EncodeToString`.
pub fn encode_to_string(bytes: &[u8]) -> String {
    STD_ENCODING.encode(bytes)
}

/// `StdEncoding.DecodeString`: newlines (`\r`, `\n`) are skipped anywhere.
pub fn decode_string(s: &str) -> Result<Vec<u8>, CorruptInputError> {
    if let Some(offset) = corrupt_at(s.as_bytes()) {
        return Err(CorruptInputError(offset));
    }
    let stripped: Vec<u8> = s.bytes().filter(|c| !matches!(c, b'\r' | b'\n')).collect();
    STD_ENCODING
        .decode(stripped)
        .map_err(|_| CorruptInputError(0))
}

/// The offset Go's `DecodeString` reports (`decodeQuantum`'s checks, newlines skipped), or
/// `None` when Go decodes the input.
fn corrupt_at(src: &[u8]) -> Option<usize> {
    let is_symbol = |c: u8| c.is_ascii_alphanumeric() || c == b'+' || c == b'/';
    let is_newline = |c: u8| c == b'\r' || c == b'\n';
    let len = src.len();
    let mut si = 0;
    while si < len {
        let mut j = 0;
        while j < 4 {
            let Some(&c) = src.get(si) else {
                // Input ended inside a quantum.
                return (j != 0).then_some(si - j);
            };
            si += 1;
            if is_symbol(c) {
                j += 1;
                continue;
            }
            if is_newline(c) {
                continue;
            }
            if c != b'=' {
                return Some(si - 1);
            }
            // Padding.
            match j {
                0 | 1 => return Some(si - 1),
                2 => {
                    while src.get(si).is_some_and(|&c| is_newline(c)) {
                        si += 1;
                    }
                    match src.get(si) {
                        None => return Some(len),
                        Some(&b'=') => si += 1,
                        Some(_) => return Some(si - 1),
                    }
                }
                _ => {}
            }
            while src.get(si).is_some_and(|&c| is_newline(c)) {
                si += 1;
            }
            // Anything after the padding is garbage.
            return (si < len).then_some(si);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `base64_test.go`'s `pairs` (RFC 3548, RFC 4648 and Wikipedia examples).
    const PAIRS: &[(&[u8], &str)] = &[
        (b"\x14\xfb\x9c\x03\xd9\x7e", "FPucA9l+"),
        (b"\x14\xfb\x9c\x03\xd9", "FPucA9k="),
        (b"\x14\xfb\x9c\x03", "FPucAw=="),
        (b"", ""),
        (b"f", "Zg=="),
        (b"fo", "Zm8="),
        (b"foo", "Zm9v"),
        (b"foob", "Zm9vYg=="),
        (b"fooba", "Zm9vYmE="),
        (b"foobar", "Zm9vYmFy"),
        (b"sure.", "c3VyZS4="),
        (b"sure", "c3VyZQ=="),
        (b"sur", "c3Vy"),
        (b"su", "c3U="),
        (b"leasure.", "bGVhc3VyZS4="),
        (b"easure.", "ZWFzdXJlLg=="),
        (b"asure.", "YXN1cmUu"),
    ];

    #[test]
    fn encodes_and_decodes_as_go() {
        for &(bytes, encoded) in PAIRS {
            assert_eq!(encode_to_string(bytes), encoded);
            assert_eq!(decode_string(encoded).as_deref(), Ok(bytes), "{encoded}");
        }
        // `TestDecoderIssue3577`-style newlines, and the unused bits StdEncoding ignores.
        assert_eq!(
            decode_string("Zm9v\r\nYmFy\n").as_deref(),
            Ok(&b"foobar"[..])
        );
        assert_eq!(decode_string("YR==").as_deref(), Ok(&b"a"[..]));
    }

    /// `base64_test.go`'s `TestDecodeCorrupt` (`None`: Go decodes it).
    const CORRUPT: &[(&str, Option<usize>)] = &[
        ("", None),
        ("\n", None),
        ("AAA=\n", None),
        ("AAAA\n", None),
        ("!!!!", Some(0)),
        ("====", Some(0)),
        ("x===", Some(1)),
        ("=AAA", Some(0)),
        ("A=AA", Some(1)),
        ("AA=A", Some(2)),
        ("AA==A", Some(4)),
        ("AAA=AAAA", Some(4)),
        ("AAAAA", Some(4)),
        ("AAAAAA", Some(4)),
        ("A=", Some(1)),
        ("A==", Some(1)),
        ("AA=", Some(3)),
        ("AA==", None),
        ("AAA=", None),
        ("AAAA", None),
        ("AAAAAA=", Some(7)),
        ("YWJjZA=====", Some(8)),
        ("A!\n", Some(1)),
        ("A=\n", Some(1)),
    ];

    #[test]
    fn corrupt_input_at_gos_offset() {
        for &(input, offset) in CORRUPT {
            assert_eq!(
                decode_string(input).err(),
                offset.map(CorruptInputError),
                "{input:?}"
            );
        }
        assert_eq!(
            CorruptInputError(12).to_string(),
            "illegal base64 data at input byte 12"
        );
    }
}
