//! A function's answer checked on the wire before prost decodes it, and the codec that
//! does so on every call.
//!
//! The client's message limit bounds an answer's bytes, not what decoding them builds: an
//! empty `google.protobuf.Value` is two bytes on the wire and 32 in memory, so 4 MiB of
//! them decode into 64 MiB of values (and more while their `Vec` grows), before
//! [`super::desired`] could bound anything. [`check_answer`] walks the protobuf wire format
//! of a `RunFunctionResponse` first, without building anything: it follows the fields that
//! decode into collections (the desired state, its resources and their `Struct`s, the
//! context and output, results, conditions, requirements) and counts every element decoding
//! would allocate, and how deep `Struct`s and lists nest, against
//! [`structpb::Limits`]. An answer over a limit is refused whole, so decoding never starts;
//! one within the limits decodes into at most `max_values` elements, whose strings and
//! bytes the wire size bounds. Measured (`tests/runner.rs`): 4 MiB of empty values, which
//! prost alone decodes into 64 MiB (176 MiB for 4 MiB of empty conditions), refused holding
//! 192 bytes; the largest answer within the default limits, 262,144 empty conditions
//! (88 bytes each decoded), decoded in 22 MiB.
//!
//! The walk is iterative (a stack of the messages it is in), so a hostile nesting costs
//! stack frames of neither the walk nor, being refused first, prost.

use std::sync::Arc;

use bytes::{Buf, BufMut, Bytes};
use prost::Message;
use tonic::Status;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};

use super::proto::RunFunctionResponse;
use crate::render::structpb;

/// Why an answer was refused before or while it was decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// More elements than [`structpb::Limits::max_values`]: the values of its objects and
    /// arrays (each object, array and scalar once, as [`structpb`] counts them), and the
    /// entries of its other lists and maps (resources, results, conditions, connection
    /// details, requirements).
    #[error("the answer holds more than {max} values")]
    TooManyValues {
        /// The limit.
        max: usize,
    },
    /// Objects and arrays nested deeper than [`structpb::Limits::max_depth`].
    #[error("the answer nests objects and arrays deeper than {max} levels")]
    TooDeep {
        /// The limit.
        max: usize,
    },
    /// Messages nested deeper than prost decodes (its recursion limit): about 33 levels of
    /// objects, as each is three messages (`Struct`, its entry, `Value`).
    #[error("the answer nests messages deeper than {max} levels, prost's recursion limit")]
    TooNested {
        /// The limit.
        max: usize,
    },
    /// Not a protobuf message: truncated, or a field that cannot be read.
    #[error("the answer is not protobuf: {reason} at byte {offset}")]
    Malformed {
        /// What is wrong.
        reason: &'static str,
        /// Where, from the message's start.
        offset: usize,
    },
    /// Within the limits, but prost could not decode it (a wrong wire type for a known
    /// field, text that is not UTF-8, prost's recursion limit).
    #[error("{0}")]
    Protobuf(String),
}

/// The messages of `run_function.proto` (and `struct.proto`) an answer's collections are in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Msg {
    Response,
    State,
    /// An entry of `State.resources`: its value (2) is a `Resource`.
    ResourceEntry,
    Resource,
    Requirements,
    /// An entry of `Requirements.resources` (or `extra_resources`): a `ResourceSelector`.
    SelectorEntry,
    ResourceSelector,
    MatchLabels,
    Struct,
    /// An entry of `Struct.fields`: its value (2) is a `Value`.
    FieldEntry,
    Value,
    ListValue,
}

/// What a length-delimited field of a message holds, as the walk treats it.
enum Field {
    /// A message to walk into; `count`: whether it is an element decoding allocates (a
    /// list item, a map entry, a top-level object); `container`: a `Struct` or list, one
    /// level deeper than the value holding it.
    Walk {
        msg: Msg,
        count: bool,
        container: bool,
    },
    /// An element whose own fields allocate nothing more than its bytes (a result, a
    /// condition, a map entry of strings or bytes): counted, not walked.
    Leaf,
    /// Anything else (strings, bytes, messages of scalars, unknown fields): skipped.
    Skip,
}

fn field(msg: Msg, number: u64) -> Field {
    let walk = |msg, count| Field::Walk {
        msg,
        count,
        container: false,
    };
    // A `Struct` at the top of a field (an object) is depth 1, as structpb counts it.
    let object = Field::Walk {
        msg: Msg::Struct,
        count: true,
        container: true,
    };
    match (msg, number) {
        (Msg::Response, 2) => walk(Msg::State, false),
        (Msg::Response, 3 | 6) => Field::Leaf,
        (Msg::Response, 4 | 7) => object,
        (Msg::Response, 5) => walk(Msg::Requirements, false),
        (Msg::State, 1) => walk(Msg::Resource, false),
        (Msg::State, 2) => walk(Msg::ResourceEntry, true),
        (Msg::ResourceEntry, 2) => walk(Msg::Resource, false),
        (Msg::Resource, 1) => object,
        (Msg::Resource, 2) => Field::Leaf,
        (Msg::Requirements, 1 | 2) => walk(Msg::SelectorEntry, true),
        (Msg::Requirements, 3) => Field::Leaf,
        (Msg::SelectorEntry, 2) => walk(Msg::ResourceSelector, false),
        (Msg::ResourceSelector, 4) => walk(Msg::MatchLabels, false),
        (Msg::MatchLabels, 1) => Field::Leaf,
        // The entry is the value: counted once, here.
        (Msg::Struct, 1) => walk(Msg::FieldEntry, true),
        (Msg::FieldEntry, 2) => walk(Msg::Value, false),
        (Msg::Value, 5) => Field::Walk {
            msg: Msg::Struct,
            count: false,
            container: true,
        },
        (Msg::Value, 6) => Field::Walk {
            msg: Msg::ListValue,
            count: false,
            container: true,
        },
        (Msg::ListValue, 1) => walk(Msg::Value, true),
        _ => Field::Skip,
    }
}

/// A message the walk is in: where it ends and the depth of the object or array it is (or
/// is in; 0 outside any).
struct Frame {
    msg: Msg,
    end: usize,
    depth: usize,
}

/// The wire format's reader: a position in the message.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn malformed(&self, reason: &'static str) -> WireError {
        WireError::Malformed {
            reason,
            offset: self.pos,
        }
    }

    fn varint(&mut self, end: usize) -> Result<u64, WireError> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let Some(&byte) = self.bytes[..end].get(self.pos) else {
                return Err(self.malformed("a truncated varint"));
            };
            self.pos += 1;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(self.malformed("a varint longer than 10 bytes"))
    }

    fn skip(&mut self, len: u64, end: usize) -> Result<(), WireError> {
        match usize::try_from(len)
            .ok()
            .and_then(|n| self.pos.checked_add(n))
        {
            Some(next) if next <= end => {
                self.pos = next;
                Ok(())
            }
            _ => Err(self.malformed("a field longer than its message")),
        }
    }

    /// A field's value other than a group's, after its tag.
    fn skip_value(&mut self, wire_type: u64, end: usize) -> Result<(), WireError> {
        match wire_type {
            0 => self.varint(end).map(drop),
            1 => self.skip(8, end),
            2 => {
                let len = self.varint(end)?;
                self.skip(len, end)
            }
            5 => self.skip(4, end),
            _ => Err(self.malformed("an unknown wire type")),
        }
    }

    /// The rest of a group whose start tag was just read (prost skips unknown groups; known
    /// fields are never groups), nested groups included, without recursion.
    fn skip_group(&mut self, number: u64, end: usize) -> Result<(), WireError> {
        let mut open = vec![number];
        while let Some(&innermost) = open.last() {
            let tag = self.varint(end)?;
            let (number, wire_type) = (tag >> 3, tag & 7);
            match wire_type {
                3 => open.push(number),
                4 if number == innermost => {
                    open.pop();
                }
                4 => return Err(self.malformed("a group ended by another's tag")),
                _ => self.skip_value(wire_type, end)?,
            }
        }
        Ok(())
    }
}

/// Checks an encoded `RunFunctionResponse` against `limits` (values and depth; its bytes
/// bound its text) without decoding it: see the module's comment.
pub fn check_answer(bytes: &[u8], limits: structpb::Limits) -> Result<(), WireError> {
    let mut reader = Reader { bytes, pos: 0 };
    let mut values = 0usize;
    let mut stack = vec![Frame {
        msg: Msg::Response,
        end: bytes.len(),
        depth: 0,
    }];
    while let Some(frame) = stack.last() {
        if reader.pos == frame.end {
            stack.pop();
            continue;
        }
        let (msg, end, depth) = (frame.msg, frame.end, frame.depth);
        let tag = reader.varint(end)?;
        let (number, wire_type) = (tag >> 3, tag & 7);
        if number == 0 {
            return Err(reader.malformed("field number 0"));
        }
        match wire_type {
            2 => {
                let len = reader.varint(end)?;
                let field_end = usize::try_from(len)
                    .ok()
                    .and_then(|len| reader.pos.checked_add(len))
                    .filter(|&field_end| field_end <= end)
                    .ok_or_else(|| reader.malformed("a field longer than its message"))?;
                let (child, count, container) = match field(msg, number) {
                    Field::Skip => (None, false, false),
                    Field::Leaf => (None, true, false),
                    Field::Walk {
                        msg,
                        count,
                        container,
                    } => (Some(msg), count, container),
                };
                if count {
                    values += 1;
                    if values > limits.max_values {
                        return Err(WireError::TooManyValues {
                            max: limits.max_values,
                        });
                    }
                }
                let depth = depth + usize::from(container);
                if depth > limits.max_depth {
                    return Err(WireError::TooDeep {
                        max: limits.max_depth,
                    });
                }
                match child {
                    // Walked from here, its first field next.
                    Some(msg) => {
                        // The top message is prost's level 0.
                        if stack.len() > RECURSION_LIMIT {
                            return Err(WireError::TooNested {
                                max: RECURSION_LIMIT,
                            });
                        }
                        stack.push(Frame {
                            msg,
                            end: field_end,
                            depth,
                        });
                    }
                    None => reader.pos = field_end,
                }
            }
            3 => reader.skip_group(number, end)?,
            4 => return Err(reader.malformed("a group's end without its start")),
            _ => reader.skip_value(wire_type, end)?,
        }
    }
    Ok(())
}

/// prost's limit on nested messages (`prost::RECURSION_LIMIT`, not public): the walk never
/// goes deeper than prost would decode, whatever [`structpb::Limits::max_depth`] allows.
const RECURSION_LIMIT: usize = 100;

/// An encoded `RunFunctionResponse` checked ([`check_answer`]), then decoded.
pub fn decode_answer(
    bytes: &[u8],
    limits: structpb::Limits,
) -> Result<RunFunctionResponse, WireError> {
    check_answer(bytes, limits)?;
    RunFunctionResponse::decode(bytes).map_err(|e| WireError::Protobuf(e.to_string()))
}

/// The client's codec: the request goes as the bytes [`super::FunctionClient::run`]
/// encoded once (the same bytes on v1 and on v1beta1's retry), the answer is decoded by
/// [`decode_answer`] within `limits`.
#[derive(Debug, Clone, Copy)]
pub(super) struct RunCodec {
    pub(super) limits: structpb::Limits,
}

impl Codec for RunCodec {
    type Encode = Bytes;
    type Decode = RunFunctionResponse;
    type Encoder = RawEncoder;
    type Decoder = AnswerDecoder;

    fn encoder(&mut self) -> RawEncoder {
        RawEncoder
    }

    fn decoder(&mut self) -> AnswerDecoder {
        AnswerDecoder {
            limits: self.limits,
        }
    }
}

/// Writes an encoded message as it is.
#[derive(Debug)]
pub(super) struct RawEncoder;

impl Encoder for RawEncoder {
    type Item = Bytes;
    type Error = Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.reserve(item.len());
        dst.put_slice(&item);
        Ok(())
    }
}

/// Decodes an answer by [`decode_answer`]; its error travels as the status's source, so the
/// client reports it as it is.
#[derive(Debug)]
pub(super) struct AnswerDecoder {
    limits: structpb::Limits,
}

impl Decoder for AnswerDecoder {
    type Item = RunFunctionResponse;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<RunFunctionResponse>, Status> {
        // The whole message, split off tonic's buffer without a copy.
        let bytes = src.copy_to_bytes(src.remaining());
        decode_answer(&bytes, self.limits).map(Some).map_err(|e| {
            let mut status = Status::internal(e.to_string());
            status.set_source(Arc::new(e));
            status
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::proto::{
        Condition, MatchLabels, Requirements, Resource, ResourceSelector, Result as FnResult,
        State, resource_selector,
    };
    use prost_types::value::Kind;
    use prost_types::{ListValue, Struct, Value};

    fn limits(max_values: usize, max_depth: usize) -> structpb::Limits {
        structpb::Limits {
            max_values,
            max_depth,
            ..structpb::Limits::DEFAULT
        }
    }

    fn list(n: usize) -> Value {
        Value {
            kind: Some(Kind::ListValue(ListValue {
                values: vec![Value::default(); n],
            })),
        }
    }

    fn with_resource(object: Struct) -> RunFunctionResponse {
        RunFunctionResponse {
            desired: Some(State {
                composite: None,
                resources: [(
                    "r".to_string(),
                    Resource {
                        resource: Some(object),
                        ..Resource::default()
                    },
                )]
                .into(),
            }),
            ..RunFunctionResponse::default()
        }
    }

    /// `{"a": {"a": ... {}}}`, `levels` objects deep.
    fn nested(levels: usize) -> Struct {
        let mut object = Struct::default();
        for _ in 1..levels {
            object = Struct {
                fields: [(
                    "a".to_string(),
                    Value {
                        kind: Some(Kind::StructValue(object)),
                    },
                )]
                .into(),
            };
        }
        object
    }

    #[test]
    fn values_are_counted_as_structpb_counts_them() {
        // The resources entry, the object, the list and its 5 items: 8.
        let answer = with_resource(Struct {
            fields: [("items".to_string(), list(5))].into(),
        });
        let bytes = answer.encode_to_vec();
        assert_eq!(check_answer(&bytes, limits(8, 64)), Ok(()));
        assert_eq!(
            check_answer(&bytes, limits(7, 64)),
            Err(WireError::TooManyValues { max: 7 })
        );
        // The object's own count agrees with structpb's.
        let object = answer.desired.as_ref().expect("desired").resources["r"]
            .resource
            .clone()
            .expect("an object");
        assert!(structpb::from_struct(&object, limits(7, 64)).is_ok());
        assert!(structpb::from_struct(&object, limits(6, 64)).is_err());
        assert_eq!(
            decode_answer(&bytes, limits(8, 64)).expect("decoded"),
            answer
        );
    }

    #[test]
    fn depth_is_counted_as_structpb_counts_it() {
        let bytes = with_resource(nested(5)).encode_to_vec();
        assert_eq!(check_answer(&bytes, limits(100, 5)), Ok(()));
        assert_eq!(
            check_answer(&bytes, limits(100, 4)),
            Err(WireError::TooDeep { max: 4 })
        );
        let object = nested(5);
        assert!(structpb::from_struct(&object, limits(100, 5)).is_ok());
        assert!(structpb::from_struct(&object, limits(100, 4)).is_err());
        // Far deeper than prost would go, refused by the walk without recursion.
        let mut deep = Vec::new();
        for _ in 0..2_000 {
            // Struct.fields entry { value: Value { struct_value: ... } }, built inside out.
            let inner = std::mem::take(&mut deep);
            let mut value = vec![0x2a];
            prost::encoding::encode_varint(inner.len() as u64, &mut value);
            value.extend(inner);
            let mut entry = vec![0x12];
            prost::encoding::encode_varint(value.len() as u64, &mut entry);
            entry.extend(value);
            deep.push(0x0a);
            prost::encoding::encode_varint(entry.len() as u64, &mut deep);
            deep.extend(entry);
        }
        let mut answer = vec![0x3a];
        prost::encoding::encode_varint(deep.len() as u64, &mut answer);
        answer.extend(deep);
        assert_eq!(
            check_answer(&answer, limits(100, 20)),
            Err(WireError::TooDeep { max: 20 })
        );
        // Past prost's recursion limit, whatever the depth allowed: 33 objects below the
        // output are 1 + 33 * 3 = 100 nested messages; the 34th is one too many.
        let unbounded = limits(100, usize::MAX);
        assert_eq!(
            check_answer(&answer, unbounded),
            Err(WireError::TooNested { max: 100 })
        );
        let output = |levels| {
            RunFunctionResponse {
                output: Some(nested(levels)),
                ..RunFunctionResponse::default()
            }
            .encode_to_vec()
        };
        assert_eq!(check_answer(&output(34), unbounded), Ok(()));
        assert!(RunFunctionResponse::decode(&output(34)[..]).is_ok());
        assert_eq!(
            check_answer(&output(35), unbounded),
            Err(WireError::TooNested { max: 100 })
        );
        assert!(RunFunctionResponse::decode(&output(35)[..]).is_err());
    }

    #[test]
    fn every_collection_of_an_answer_counts() {
        let answer = RunFunctionResponse {
            results: vec![FnResult::default(); 3],
            conditions: vec![Condition::default(); 2],
            context: Some(Struct::default()),
            requirements: Some(Requirements {
                resources: [(
                    "a".to_string(),
                    ResourceSelector {
                        r#match: Some(resource_selector::Match::MatchLabels(MatchLabels {
                            labels: [("k".to_string(), "v".to_string())].into(),
                        })),
                        ..ResourceSelector::default()
                    },
                )]
                .into(),
                ..Requirements::default()
            }),
            ..RunFunctionResponse::default()
        };
        // 3 results, 2 conditions, the context, the selector and its label: 8.
        let bytes = answer.encode_to_vec();
        assert_eq!(check_answer(&bytes, limits(8, 64)), Ok(()));
        assert_eq!(
            check_answer(&bytes, limits(7, 64)),
            Err(WireError::TooManyValues { max: 7 })
        );
    }

    #[test]
    fn malformed_answers_are_refused_with_where() {
        let bytes = with_resource(nested(3)).encode_to_vec();
        assert_eq!(
            check_answer(&bytes[..bytes.len() - 1], structpb::Limits::DEFAULT),
            Err(WireError::Malformed {
                reason: "a field longer than its message",
                offset: 2
            })
        );
        assert_eq!(
            check_answer(&[0x08, 0x80], structpb::Limits::DEFAULT),
            Err(WireError::Malformed {
                reason: "a truncated varint",
                offset: 2
            })
        );
        assert_eq!(
            check_answer(&[0x0c], structpb::Limits::DEFAULT),
            Err(WireError::Malformed {
                reason: "a group's end without its start",
                offset: 1
            })
        );
        // Unknown fields of every wire type, a group among them, are skipped as prost
        // skips them.
        let unknown = [
            0x40, 0x01, // 8: varint
            0x49, 0, 0, 0, 0, 0, 0, 0, 0, // 9: fixed64
            0x55, 0, 0, 0, 0, // 10: fixed32
            0x5a, 0x01, 0x00, // 11: bytes
            0x63, 0x08, 0x01, 0x6b, 0x6c, 0x64, // 12: a group holding a group
        ];
        assert_eq!(check_answer(&unknown, structpb::Limits::DEFAULT), Ok(()));
        assert_eq!(
            decode_answer(&unknown, structpb::Limits::DEFAULT),
            Ok(RunFunctionResponse::default())
        );
        // Within the limits but not what prost reads: desired (2) as a varint.
        assert!(matches!(
            decode_answer(&[0x10, 0x01], structpb::Limits::DEFAULT),
            Err(WireError::Protobuf(message)) if message.contains("invalid wire type")
        ));
    }
}
