//! The pickle machine: reads opcodes one by one onto a stack of values
//! kept in an arena, so that a container the memo shares and fills later
//! (as the pickler writes every list and dict: made empty, memoised, then
//! filled) is one value wherever it is used. The arena is turned into a
//! [`Value`] at `STOP`, within the bounds on values, bytes and depth.
//!
//! Every length read from the input is checked against what is left of
//! it before anything is allocated.

use std::collections::HashMap;

use super::text;
use super::{Limits, Refused, Value};

/// A value in the arena: a scalar, or a container of other values.
enum Node {
    Leaf(Value),
    List(Vec<usize>),
    Tuple(Vec<usize>),
    Set(Vec<usize>),
    Dict(Vec<(usize, usize)>),
}

pub(super) struct Machine<'a> {
    input: &'a [u8],
    pos: usize,
    /// Where the opcode being run starts, for messages.
    at: usize,
    limits: Limits,
    nodes: Vec<Node>,
    /// Arena indices; the same index twice is one shared value.
    stack: Vec<usize>,
    /// Stack lengths at each MARK.
    marks: Vec<usize>,
    memo: HashMap<u32, usize>,
}

/// What turning the arena into values has spent, against the limits.
struct Spent {
    values: usize,
    bytes: usize,
}

type Step = Result<(), Refused>;

impl<'a> Machine<'a> {
    pub fn new(input: &'a [u8], limits: Limits) -> Machine<'a> {
        Machine {
            input,
            pos: 0,
            at: 0,
            limits,
            nodes: Vec::new(),
            stack: Vec::new(),
            marks: Vec::new(),
            memo: HashMap::new(),
        }
    }

    /// Runs to `STOP` and returns the value on top of the stack.
    pub fn run(mut self) -> Result<Value, Refused> {
        loop {
            self.at = self.pos;
            let op = self.byte()?;
            if op == b'.' {
                break;
            }
            self.step(op)?;
        }
        if self.pos != self.input.len() {
            return Err(Refused::malformed("bytes after STOP", self.pos));
        }
        let top = *self
            .stack
            .last()
            .ok_or_else(|| Refused::malformed("STOP with nothing made", self.at))?;
        let mut spent = Spent {
            values: 0,
            bytes: 0,
        };
        self.value(top, 0, &mut spent)
    }

    fn step(&mut self, op: u8) -> Step {
        if let Some(leaf) = self.scalar(op)? {
            return self.push_new(Node::Leaf(leaf));
        }
        if self.structure(op)? || self.memo_op(op)? {
            return Ok(());
        }
        Err(self.refusal(op))
    }

    // Reading the input.

    fn malformed(&self, what: impl std::fmt::Display) -> Refused {
        Refused::malformed(what, self.at)
    }

    fn byte(&mut self) -> Result<u8, Refused> {
        Ok(self.take(1)?[0])
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], Refused> {
        let input: &'a [u8] = self.input;
        let end = self
            .pos
            .checked_add(n)
            .filter(|end| *end <= input.len())
            .ok_or_else(|| self.malformed("the pickle ends inside an opcode"))?;
        let out = &input[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    fn uint(&mut self, width: usize) -> Result<u64, Refused> {
        let bytes = self.take(width)?;
        Ok(bytes
            .iter()
            .rev()
            .fold(0u64, |n, b| (n << 8) | u64::from(*b)))
    }

    /// A length of `width` bytes, then that many bytes.
    fn counted(&mut self, width: usize) -> Result<&'a [u8], Refused> {
        let n = self.uint(width)?;
        let n = usize::try_from(n).map_err(|_| self.malformed("a length past the input"))?;
        self.take(n)
    }

    /// The bytes up to the next newline (protocol 0's text arguments).
    fn line(&mut self) -> Result<&'a [u8], Refused> {
        let rest = &self.input[self.pos..];
        let n = rest
            .iter()
            .position(|b| *b == b'\n')
            .ok_or_else(|| self.malformed("a text argument without its newline"))?;
        let line = &rest[..n];
        self.pos += n + 1;
        Ok(line)
    }

    fn text<T>(&self, parsed: Result<T, String>) -> Result<T, Refused> {
        parsed.map_err(|e| self.malformed(e))
    }

    // The opcodes.

    /// The opcodes that make one scalar value.
    fn scalar(&mut self, op: u8) -> Result<Option<Value>, Refused> {
        let v = match op {
            b'N' => Value::None,
            0x88 => Value::Bool(true),
            0x89 => Value::Bool(false),
            b'I' => {
                let line = self.line()?;
                self.text(text::int_line(line))?
            }
            b'L' => {
                let line = self.line()?;
                Value::Int(self.text(text::long_line(line))?)
            }
            b'F' => {
                let line = self.line()?;
                Value::Float(self.text(text::float_line(line))?)
            }
            b'J' => Value::Int(i64::from(self.uint(4)? as u32 as i32)),
            b'K' => Value::Int(self.uint(1)? as i64),
            b'M' => Value::Int(self.uint(2)? as i64),
            0x8a => Value::Int(self.long(1)?),
            0x8b => Value::Int(self.long(4)?),
            b'G' => Value::Float(f64::from_be_bytes(
                self.take(8)?.try_into().unwrap_or_default(),
            )),
            _ => return self.string(op),
        };
        Ok(Some(v))
    }

    /// The opcodes that make a string or bytes.
    fn string(&mut self, op: u8) -> Result<Option<Value>, Refused> {
        let v = match op {
            b'S' => {
                let line = self.line()?;
                text::old_str(self.text(text::string_literal(line))?)
            }
            b'T' => text::old_str(self.counted(4)?.to_vec()),
            b'U' => text::old_str(self.counted(1)?.to_vec()),
            b'V' => {
                let line = self.line()?;
                Value::Str(self.text(text::raw_unicode_escape(line))?)
            }
            b'X' => self.utf8(4)?,
            0x8c => self.utf8(1)?,
            0x8d => self.utf8(8)?,
            b'B' => Value::Bytes(self.counted(4)?.to_vec()),
            b'C' => Value::Bytes(self.counted(1)?.to_vec()),
            0x8e | 0x96 => Value::Bytes(self.counted(8)?.to_vec()),
            _ => return Ok(None),
        };
        Ok(Some(v))
    }

    fn utf8(&mut self, width: usize) -> Result<Value, Refused> {
        let bytes = self.counted(width)?;
        std::str::from_utf8(bytes)
            .map(|s| Value::Str(s.to_string()))
            .map_err(|_| self.malformed("a str that is not UTF-8"))
    }

    /// LONG1/LONG4: a little-endian two's complement integer, kept when
    /// it fits in 64 bits.
    fn long(&mut self, width: usize) -> Result<i64, Refused> {
        let bytes = self.counted(width)?;
        text::twos_complement(bytes)
            .ok_or_else(|| self.malformed("an integer beyond 64 bits (not kept)"))
    }

    /// The opcodes that make or fill containers, or move the stack.
    fn structure(&mut self, op: u8) -> Result<bool, Refused> {
        match op {
            b'(' => self.mark()?,
            b'0' => {
                self.pop()?;
            }
            b'1' => {
                self.pop_mark()?;
            }
            b'2' => self.push(self.top()?)?,
            b']' => self.push_new(Node::List(Vec::new()))?,
            b')' => self.push_new(Node::Tuple(Vec::new()))?,
            b'}' => self.push_new(Node::Dict(Vec::new()))?,
            0x8f => self.push_new(Node::Set(Vec::new()))?,
            b'l' => {
                let items = self.pop_mark()?;
                self.push_new(Node::List(items))?
            }
            b't' => {
                let items = self.pop_mark()?;
                self.push_new(Node::Tuple(items))?
            }
            0x85..=0x87 => {
                let items = self.pop_n(usize::from(op - 0x84))?;
                self.push_new(Node::Tuple(items))?
            }
            0x91 => {
                let items = self.pop_mark()?;
                self.push_new(Node::Set(items))?
            }
            b'd' => {
                let items = self.pop_mark()?;
                let pairs = self.pairs(items)?;
                self.push_new(Node::Dict(pairs))?
            }
            _ => return self.fill(op),
        }
        Ok(true)
    }

    /// APPEND, APPENDS, SETITEM, SETITEMS, ADDITEMS, and PROTO and FRAME.
    fn fill(&mut self, op: u8) -> Result<bool, Refused> {
        match op {
            b'a' => {
                let item = self.pop()?;
                self.extend(vec![item])?
            }
            b'e' | 0x90 => {
                let items = self.pop_mark()?;
                self.extend(items)?
            }
            b's' => {
                let value = self.pop()?;
                let key = self.pop()?;
                self.extend(vec![key, value])?
            }
            b'u' => {
                let items = self.pop_mark()?;
                self.extend(items)?
            }
            0x80 => {
                let proto = self.byte()?;
                if proto > 5 {
                    return Err(self.malformed(format!("protocol {proto} (known: 0 to 5)")));
                }
            }
            0x95 => {
                // A frame only says how much to read at once.
                let n = self.uint(8)?;
                if n > (self.input.len() - self.pos) as u64 {
                    return Err(self.malformed("a frame longer than the input"));
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Adds `items` to the container on top of the stack: a list's or a
    /// set's elements, or a dict's keys and values in turn.
    fn extend(&mut self, items: Vec<usize>) -> Step {
        let top = self.top()?;
        let pairs = match &self.nodes[top] {
            Node::Dict(_) => Some(self.pairs(items.clone())?),
            _ => None,
        };
        match (&mut self.nodes[top], pairs) {
            (Node::List(v) | Node::Set(v), _) => v.extend(items),
            (Node::Dict(d), Some(pairs)) => d.extend(pairs),
            _ => return Err(self.malformed("items added to a value that is no list, set or dict")),
        }
        Ok(())
    }

    fn pairs(&self, items: Vec<usize>) -> Result<Vec<(usize, usize)>, Refused> {
        if !items.len().is_multiple_of(2) {
            return Err(self.malformed("a dict key without its value"));
        }
        Ok(items.chunks_exact(2).map(|p| (p[0], p[1])).collect())
    }

    /// PUT, BINPUT, LONG_BINPUT, MEMOIZE, and GET, BINGET, LONG_BINGET.
    fn memo_op(&mut self, op: u8) -> Result<bool, Refused> {
        match op {
            b'p' | b'q' | b'r' | 0x94 => {
                let index = match op {
                    b'p' => self.decimal()?,
                    b'q' => self.uint(1)? as u32,
                    b'r' => self.uint(4)? as u32,
                    _ => u32::try_from(self.memo.len()).unwrap_or(u32::MAX),
                };
                if self.memo.len() >= self.limits.max_values {
                    return Err(Refused::TooMany {
                        max: self.limits.max_values,
                    });
                }
                let top = self.top()?;
                self.memo.insert(index, top);
            }
            b'g' | b'h' | b'j' => {
                let index = match op {
                    b'g' => self.decimal()?,
                    b'h' => self.uint(1)? as u32,
                    _ => self.uint(4)? as u32,
                };
                let found = *self
                    .memo
                    .get(&index)
                    .ok_or_else(|| self.malformed(format!("memo {index} read before it is set")))?;
                self.push(found)?
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn decimal(&mut self) -> Result<u32, Refused> {
        let line = self.line()?;
        self.text(text::decimal(line))
    }

    /// Why an opcode that is not plain data is refused, with what the
    /// pickle names (read, never resolved).
    fn refusal(&mut self, op: u8) -> Refused {
        let (opcode, what) = match op {
            b'c' => ("GLOBAL", format!("imports {}", self.named())),
            0x93 => ("STACK_GLOBAL", format!("imports {}", self.stacked_name())),
            b'R' => ("REDUCE", "calls a function".to_string()),
            b'b' => ("BUILD", "sets an object's state".to_string()),
            b'i' => ("INST", format!("builds an object of {}", self.named())),
            b'o' => ("OBJ", "builds an object".to_string()),
            0x81 => ("NEWOBJ", "builds an object".to_string()),
            0x92 => ("NEWOBJ_EX", "builds an object".to_string()),
            0x82..=0x84 => ("EXT", "imports a registered name".to_string()),
            b'P' | b'Q' => ("PERSID", "refers to a persistent object".to_string()),
            0x97 | 0x98 => ("NEXT_BUFFER", "refers to an out-of-band buffer".to_string()),
            other => return self.malformed(format!("unknown opcode 0x{other:02x}")),
        };
        Refused::NotData {
            opcode,
            what,
            at: self.at,
        }
    }

    /// GLOBAL's and INST's `module\nname\n`, for the message.
    fn named(&mut self) -> String {
        let mut parts = Vec::new();
        for _ in 0..2 {
            match self.line() {
                Ok(line) => parts.push(crate::wording::escaped(line).into_owned()),
                Err(_) => break,
            }
        }
        shown_name(&parts.join("."))
    }

    /// STACK_GLOBAL's module and name, the two strings on the stack.
    fn stacked_name(&self) -> String {
        let n = self.stack.len();
        let names: Vec<&str> = self.stack[n.saturating_sub(2)..]
            .iter()
            .filter_map(|i| match &self.nodes[*i] {
                Node::Leaf(Value::Str(s)) => Some(s.as_str()),
                _ => None,
            })
            .collect();
        match names.as_slice() {
            [module, name] => shown_name(&format!("{module}.{name}")),
            _ => "a name".to_string(),
        }
    }

    // The stack.

    fn push(&mut self, index: usize) -> Step {
        if self.stack.len() >= self.limits.max_values {
            return Err(Refused::TooMany {
                max: self.limits.max_values,
            });
        }
        self.stack.push(index);
        Ok(())
    }

    fn push_new(&mut self, node: Node) -> Step {
        if self.nodes.len() >= self.limits.max_values {
            return Err(Refused::TooMany {
                max: self.limits.max_values,
            });
        }
        self.nodes.push(node);
        self.push(self.nodes.len() - 1)
    }

    /// The top of the stack, above the last MARK (below it, values are
    /// out of reach until the mark is popped, as in Python's machine).
    fn top(&self) -> Result<usize, Refused> {
        let floor = self.marks.last().copied().unwrap_or(0);
        match self.stack.last() {
            Some(top) if self.stack.len() > floor => Ok(*top),
            _ => Err(self.malformed("an opcode with nothing on the stack")),
        }
    }

    fn pop(&mut self) -> Result<usize, Refused> {
        let floor = self.marks.last().copied().unwrap_or(0);
        if self.stack.len() <= floor {
            return Err(self.malformed("an opcode with nothing on the stack"));
        }
        Ok(self.stack.pop().unwrap_or_default())
    }

    fn pop_n(&mut self, n: usize) -> Result<Vec<usize>, Refused> {
        let floor = self.marks.last().copied().unwrap_or(0);
        if self.stack.len() < floor + n {
            return Err(self.malformed("an opcode with too little on the stack"));
        }
        Ok(self.stack.split_off(self.stack.len() - n))
    }

    /// A MARK: containers are built within marks, so more marks open at
    /// once than the depth limit is a nesting too deep.
    fn mark(&mut self) -> Step {
        if self.marks.len() >= self.limits.max_depth {
            return Err(Refused::TooDeep {
                max: self.limits.max_depth,
            });
        }
        self.marks.push(self.stack.len());
        Ok(())
    }

    fn pop_mark(&mut self) -> Result<Vec<usize>, Refused> {
        let mark = self
            .marks
            .pop()
            .ok_or_else(|| self.malformed("an opcode that needs a MARK without one"))?;
        Ok(self.stack.split_off(mark))
    }

    // From the arena to values.

    /// The value at `index`, `depth` containers down.
    fn value(&self, index: usize, depth: usize, spent: &mut Spent) -> Result<Value, Refused> {
        spent.values += 1;
        if spent.values > self.limits.max_values {
            return Err(Refused::TooMany {
                max: self.limits.max_values,
            });
        }
        if depth > self.limits.max_depth {
            return Err(Refused::TooDeep {
                max: self.limits.max_depth,
            });
        }
        let all = |items: &[usize], spent: &mut Spent| -> Result<Vec<Value>, Refused> {
            items
                .iter()
                .map(|i| self.value(*i, depth + 1, spent))
                .collect()
        };
        Ok(match &self.nodes[index] {
            Node::Leaf(leaf) => self.leaf(leaf, spent)?,
            Node::List(items) => Value::List(all(items, spent)?),
            Node::Tuple(items) => Value::Tuple(all(items, spent)?),
            Node::Set(items) => Value::Set(all(items, spent)?),
            Node::Dict(pairs) => Value::Dict(
                pairs
                    .iter()
                    .map(|(k, v)| {
                        Ok((
                            self.value(*k, depth + 1, spent)?,
                            self.value(*v, depth + 1, spent)?,
                        ))
                    })
                    .collect::<Result<_, Refused>>()?,
            ),
        })
    }

    /// A scalar, copied: a string the memo repeats costs its size each
    /// time, within twice the input's limit.
    fn leaf(&self, leaf: &Value, spent: &mut Spent) -> Result<Value, Refused> {
        spent.bytes += match leaf {
            Value::Str(s) => s.len(),
            Value::Bytes(b) => b.len(),
            _ => 8,
        };
        if spent.bytes > 2 * self.limits.max_bytes {
            return Err(Refused::Expands {
                max: 2 * self.limits.max_bytes,
            });
        }
        Ok(leaf.clone())
    }
}

/// A module-qualified name as a message shows it: at most 100 bytes.
fn shown_name(name: &str) -> String {
    crate::wording::cut(name, 100).into_owned()
}
