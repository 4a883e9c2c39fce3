//! A reader of Python pickles that takes plain data only: dicts, lists,
//! tuples, sets, strings, bytes, numbers, booleans and None, in every
//! protocol (0 to 5). Everything that would import a name, call a
//! function or build an object (`GLOBAL`, `STACK_GLOBAL`, `REDUCE`,
//! `BUILD`, `INST`, `OBJ`, `NEWOBJ`, `NEWOBJ_EX`, the extension registry,
//! persistent ids, out-of-band buffers) is refused with its name and
//! place, before anything is made of it: nothing is ever resolved, let
//! alone run. Input is bounded ([`Limits`]): its size, the values it
//! makes, how deep they nest (also through shared references, so neither
//! a cycle nor a memo "billion laughs" gets past), and nothing is
//! allocated for a length the input does not hold.
//!
//! It owns decoding; what a decoded scrapy-redis request means is
//! `super::request`'s. (Why not the `serde-pickle` crate: it reads
//! `NEWOBJ`/`BUILD`/`REDUCE` as best-effort data with no way to refuse
//! them, and converts values recursively with no bound on nesting or on
//! memo copies, so a deep or self-multiplying pickle exhausts the stack
//! or the memory.)
//!
//! Opcodes and their arguments are Python's `pickletools` documentation.

mod machine;
mod text;

use std::fmt;

/// A plain Python value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    None,
    Bool(bool),
    /// Integers within 64 bits (larger ones are refused).
    Int(i64),
    Float(f64),
    /// `bytes` and `bytearray`.
    Bytes(Vec<u8>),
    Str(String),
    List(Vec<Value>),
    Tuple(Vec<Value>),
    /// `set` and `frozenset`, in the pickle's order.
    Set(Vec<Value>),
    /// Keys and values in the pickle's order.
    Dict(Vec<(Value, Value)>),
}

impl Value {
    /// The value under the string key `key` of a dict.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Dict(pairs) => pairs
                .iter()
                .find(|(k, _)| k.as_text() == Some(key))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    /// A `str`, or `bytes` that are UTF-8 text.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            Value::Bytes(b) => std::str::from_utf8(b).ok(),
            _ => None,
        }
    }

    /// What Python calls the value's type, for messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::None => "None",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::Bytes(_) => "bytes",
            Value::Str(_) => "str",
            Value::List(_) => "list",
            Value::Tuple(_) => "tuple",
            Value::Set(_) => "set",
            Value::Dict(_) => "dict",
        }
    }
}

/// How much one pickle may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Its size in bytes (checked before anything is read).
    pub max_bytes: usize,
    /// Values made, counting a shared one each time it is used.
    pub max_values: usize,
    /// Containers within containers.
    pub max_depth: usize,
}

/// The bounds a queued scrapy-redis request is read with: a request is a
/// dict of a dozen fields and a few headers; its body and context make it
/// large, and crawlworker's queue holds requests of up to
/// [`crate::frontier::MAX_REQUEST_BYTES`] as JSON.
pub const REQUEST_LIMITS: Limits = Limits {
    max_bytes: 2 * crate::frontier::MAX_REQUEST_BYTES,
    max_values: 100_000,
    max_depth: 64,
};

/// Why a pickle was not read. Each says where (the byte offset of the
/// opcode) when it is about one place.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("the pickle is {bytes} bytes, over the {max}-byte limit")]
    TooLarge { bytes: usize, max: usize },
    #[error("the pickle {what} (opcode {opcode} at byte {at}); only plain data is read, nothing is imported, called or built")]
    NotData {
        opcode: &'static str,
        /// What it would do, as far as the pickle says (`imports os.system`).
        what: String,
        at: usize,
    },
    #[error("the pickle nests values more than {max} deep (or refers to itself)")]
    TooDeep { max: usize },
    #[error("the pickle makes more than {max} values")]
    TooMany { max: usize },
    #[error(
        "the pickle's values take more than {max} bytes (one value repeated through the memo)"
    )]
    Expands { max: usize },
    #[error("not a pickle: {what} at byte {at}")]
    Malformed { what: String, at: usize },
}

impl Refused {
    fn malformed(what: impl fmt::Display, at: usize) -> Refused {
        Refused::Malformed {
            what: what.to_string(),
            at,
        }
    }
}

/// Reads one pickle of plain data within `limits`.
pub fn decode(input: &[u8], limits: Limits) -> Result<Value, Refused> {
    if input.len() > limits.max_bytes {
        return Err(Refused::TooLarge {
            bytes: input.len(),
            max: limits.max_bytes,
        });
    }
    machine::Machine::new(input, limits).run()
}

#[cfg(test)]
pub(crate) mod tests;
