//! `transform = '…'`: a jq program a field's value (or a finished item)
//! goes through, compiled once when the spider is loaded and run by the
//! extractor. jq's language is jaq's (a pure Rust implementation of it).
//!
//! A transform is data, not code with powers: it reads its input and
//! returns a value, nothing else.
//!
//! - **No I/O.** The filters that read the environment (`env`, `$ENV`),
//!   the clock (`now`, `localtime`), write to stderr (`debug`, `stderr`),
//!   stop the process (`halt`) or read more input (`input`) are refused
//!   by `check` and are not even linked in.
//! - **Bounded time.** Every loop jq has goes through a definition of its
//!   standard library (`repeat`, `while`, `until`, `recurse`, `limit`, …)
//!   or through `range`, and a transform may not define its own (`def`):
//!   each of those costs one step, and a run stops at [`MAX_STEPS`] or
//!   [`MAX_TIME`], whichever comes first (the clock is read every
//!   [`CLOCK_EVERY`] steps). Iterating a value (`.[]`) is bounded by the
//!   value, which is bounded by the page.
//! - **Bounded output.** A run's value may take [`MAX_OUTPUT_BYTES`] as
//!   JSON; past it, the run fails.
//! - **Bounded depth.** jaq recurses on values (walking, comparing,
//!   printing, dropping them) and on nested calls, with no limit of its
//!   own. A run has a stack of its own ([`RUN_STACK`], or what is left of
//!   one [`with_stack`] gave the page's extraction) and stops when a step
//!   finds less than [`STACK_RESERVE`] of it left; `fromjson` refuses text
//!   nesting deeper than [`MAX_DEPTH`] before it parses it, and a value
//!   returned deeper than that fails the run (and is taken apart without
//!   recursion). A page's text cannot abort the worker. One gap is left:
//!   a `reduce` (or `foreach`) takes no step, so a program nesting a value
//!   once per element of a long array of the page (`reduce .[] as $x
//!   (null; [.])`) and using it inside the run (`… | length`) past about
//!   a million levels can still exhaust the run's stack; jaq gives no
//!   hook into a fold of the program's own.
//!
//! What is not measured: one operation building a large value at once
//! (`"x" * 1e9`, or doubling a string in a `reduce`), nor one walking a
//! value the program built deep (`paths` over 20,000 levels it nested
//! itself ran a minute in a debug build, far past [`MAX_TIME`]: the clock
//! is read between steps, and jaq's work between them grew with the
//! depth). The program is the spider
//! author's; the page only gives it values, nested at most [`MAX_DEPTH`]
//! deep by `fromjson` and 128 by a JSON page.
//!
//! What the transform's outcome means for the item (missing, dropped) is
//! the extractor's business.

use std::cell::Cell;
use std::fmt;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

use jaq_core::data::JustLut;
use jaq_core::load::parse::{BinaryOp, Def, Term};
use jaq_core::load::{Arena, File, Loader};
use jaq_core::native::{self, Fun};
use jaq_core::{Ctx, Native, Vars};
use jaq_json::Val;
use serde_json::Value;

type Data = JustLut<Val>;
type Program = jaq_core::compile::Filter<Native<Data>>;

/// Steps (calls of the standard library's definitions, values of `range`)
/// a run may take.
pub const MAX_STEPS: u64 = 200_000;
/// How long a run may take.
pub const MAX_TIME: Duration = Duration::from_millis(200);
/// How often the clock is read, in steps: reading it is dearer than a step.
pub const CLOCK_EVERY: u64 = 1024;
/// The largest value a run may return, as JSON.
pub const MAX_OUTPUT_BYTES: usize = 1 << 20;
/// The longest program accepted.
pub const MAX_SOURCE_BYTES: usize = 4096;
/// The deepest nesting of arrays and objects a value read by `fromjson`
/// or returned by a run may have.
pub const MAX_DEPTH: usize = crate::spider::limits::MAX_VALUE_DEPTH;
/// The stack a run has, mapped for it (the worker's threads have 2 MiB):
/// jq recurses once per level of a value it walks, builds or drops, and
/// per nested call. Only what a run touches becomes memory.
const RUN_STACK: usize = 256 << 20;
/// What a step must find left of the run's stack, or the run stops: room
/// for what jaq recurses on between two steps.
const STACK_RESERVE: usize = 64 << 20;
/// A run with less stack left than this gets a stack of its own.
const STACK_NEEDED: usize = 2 * STACK_RESERVE;

/// The names a transform may not use: they reach outside the value.
const REFUSED: &[&str] = &[
    "env",
    "$ENV",
    "now",
    "localtime",
    "strflocaltime",
    "mktime",
    "debug",
    "stderr",
    "halt",
    "halt_error",
    "input",
    "inputs",
    "input_filename",
    "$__loc__",
    "$__prog_args",
    "get_search_list",
    "import",
    "include",
];

/// The native filters whose work is replaced by an error (the names
/// above, as jaq implements them): the library's definitions name them,
/// so they stay, doing nothing.
const UNLINKED: &[&str] = &[
    "env",
    "now",
    "localtime",
    "strflocaltime",
    "mktime",
    "halt",
    "debug_empty",
    "stderr_empty",
];

/// Definitions of the standard library left out: their cost grows
/// exponentially with the input, outside the step count.
const UNDEFINED: &[&str] = &["combinations"];

/// A compiled jq program.
#[derive(Clone)]
pub struct Transform {
    source: String,
    program: Arc<Program>,
}

impl fmt::Debug for Transform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Transform").field(&self.source).finish()
    }
}

/// Why a program does not compile: what, and where in its text (a byte
/// offset).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileError {
    pub offset: usize,
    pub message: String,
}

impl Transform {
    /// Compiles `source`; the error says where it breaks.
    pub fn compile(source: &str) -> Result<Transform, CompileError> {
        if source.len() > MAX_SOURCE_BYTES {
            return Err(CompileError {
                offset: 0,
                message: format!(
                    "the program is {} bytes; a transform may have at most {MAX_SOURCE_BYTES}",
                    source.len()
                ),
            });
        }
        refuse_words(source)?;
        let arena = Arena::default();
        let loader = Loader::new(library());
        let file = File {
            code: source,
            path: (),
        };
        let modules = loader
            .load(&arena, file)
            .map_err(|errors| load_error(source, errors))?;
        let program = jaq_core::Compiler::default()
            .with_funs(natives())
            .compile(modules)
            .map_err(|errors| compile_error(source, errors))?;
        Ok(Transform {
            source: source.to_string(),
            program: Arc::new(program),
        })
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// The program's first output for `input` (`null` when it has none),
    /// or why the run failed: a jq error, or a bound passed.
    pub fn run(&self, input: &Value) -> Result<Value, String> {
        with_stack(|| self.run_on_this_stack(input))
    }

    fn run_on_this_stack(&self, input: &Value) -> Result<Value, String> {
        let input = jaq_json::read::parse_single(input.to_string().as_bytes())
            .map_err(|e| format!("the value is not JSON jq reads: {e}"))?;
        STEPS.with(|s| s.set(0));
        DEADLINE.with(|d| d.set(Some(Instant::now() + MAX_TIME)));
        let program = &self.program;
        let ran = catch_unwind(AssertUnwindSafe(|| {
            let ctx = Ctx::<Data>::new(&program.lut, Vars::new([]));
            let mut out = program.id.run((ctx, input)).map(jaq_core::unwrap_valr);
            let first = out.next();
            drop(out);
            match first {
                None => Ok(None),
                Some(Ok(v)) if nests_deeper(&v, MAX_DEPTH) => {
                    drop_flat(v);
                    Err(format!(
                        "its value nests arrays and objects deeper than {MAX_DEPTH}"
                    ))
                }
                Some(Ok(v)) => Ok(Some(v.to_string())),
                Some(Err(e)) => Err(format!(
                    "jq error: {}",
                    crate::wording::cut(&error_text(e), 200)
                )),
            }
        }));
        DEADLINE.with(|d| d.set(None));
        let text = match ran {
            Ok(Ok(Some(text))) => text,
            Ok(Ok(None)) => return Ok(Value::Null),
            Ok(Err(e)) => return Err(e),
            Err(payload) => match payload.downcast::<OverBudget>() {
                Ok(over) => return Err(over.to_string()),
                Err(other) => resume_unwind(other),
            },
        };
        if text.len() > MAX_OUTPUT_BYTES {
            return Err(format!(
                "its value takes {} bytes as JSON, more than the {MAX_OUTPUT_BYTES} a transform may return",
                text.len()
            ));
        }
        serde_json::from_str(&text).map_err(|e| format!("its value is not JSON ({e})"))
    }
}

/// What a jq error says: a string as it is (`error("no")` says `no`),
/// any other value as JSON.
fn error_text(e: jaq_core::Error<Val>) -> String {
    match e.into_val() {
        Val::TStr(text) => String::from_utf8_lossy(&text).into_owned(),
        other => other.to_string(),
    }
}

/// Runs `work` where a transform run has the stack it needs: here, if
/// enough is left, else on a stack mapped for it ([`RUN_STACK`]). Mapping
/// one costs a few system calls: an extraction that may run many
/// transforms runs within one, so its runs need none of their own.
pub fn with_stack<T>(work: impl FnOnce() -> T) -> T {
    stacker::maybe_grow(STACK_NEEDED, RUN_STACK, work)
}

thread_local! {
    /// Steps taken by the run on this thread.
    static STEPS: Cell<u64> = const { Cell::new(0) };
    /// When the run on this thread must stop; none outside a run.
    static DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Why a run was stopped: unwound out of jaq, whose `try` cannot catch
/// it, and caught in [`Transform::run`].
#[derive(Debug)]
enum OverBudget {
    Steps,
    Time,
    Stack,
}

impl fmt::Display for OverBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OverBudget::Steps => write!(f, "it took more than {MAX_STEPS} steps (a loop over a large range, or one that does not end)"),
            OverBudget::Time => write!(f, "it ran longer than {} ms", MAX_TIME.as_millis()),
            OverBudget::Stack => write!(f, "it went too deep (a value or a call nested deeper than a transform's stack holds)"),
        }
    }
}

/// One step of a run: stops it past its bounds.
fn step() {
    let n = STEPS.with(|s| {
        let n = s.get() + 1;
        s.set(n);
        n
    });
    if n > MAX_STEPS {
        resume_unwind(Box::new(OverBudget::Steps));
    }
    if stacker::remaining_stack().is_some_and(|left| left < STACK_RESERVE) {
        resume_unwind(Box::new(OverBudget::Stack));
    }
    if n.is_multiple_of(CLOCK_EVERY) {
        let late = DEADLINE.with(|d| d.get().is_some_and(|d| Instant::now() > d));
        if late {
            resume_unwind(Box::new(OverBudget::Time));
        }
    }
}

/// jq's standard library, every definition costing a step per call, with
/// `range/3` (native in jaq) counted per value.
fn library() -> impl Iterator<Item = Def<&'static str>> {
    let counted_range = jaq_core::load::parse(
        "def range($from; $upto; $by): __range($from; $upto; $by) | __step;",
        |p| p.defs(),
    )
    .unwrap_or_default();
    let std = jaq_core::defs()
        .chain(jaq_std::defs())
        .chain(jaq_json::defs())
        .filter(|d| !UNDEFINED.contains(&d.name))
        .map(counted_def);
    counted_range.into_iter().chain(std)
}

/// A definition whose every call costs a step, and so do the calls of the
/// definitions inside it (`def repeat(f): def rec: f, rec; rec;` loops in
/// its inner `rec`).
fn counted_def(d: Def<&'static str>) -> Def<&'static str> {
    Def {
        body: Term::BinOp(
            Box::new(Term::Call("__step", Vec::new())),
            BinaryOp::Pipe(None),
            Box::new(counted(d.body)),
        ),
        ..d
    }
}

/// `t` with the definitions inside it counted (see [`counted_def`]).
fn counted(t: Term<&'static str>) -> Term<&'static str> {
    let boxed = |b: Box<Term<&'static str>>| Box::new(counted(*b));
    match t {
        Term::Def(defs, body) => {
            Term::Def(defs.into_iter().map(counted_def).collect(), boxed(body))
        }
        Term::BinOp(l, op, r) => Term::BinOp(boxed(l), op, boxed(r)),
        Term::Neg(t) => Term::Neg(boxed(t)),
        Term::Arr(t) => Term::Arr(t.map(boxed)),
        Term::Label(l, t) => Term::Label(l, boxed(t)),
        Term::Fold(name, xs, pattern, args) => Term::Fold(
            name,
            boxed(xs),
            pattern,
            args.into_iter().map(counted).collect(),
        ),
        Term::TryCatch(t, c) => Term::TryCatch(boxed(t), c.map(boxed)),
        Term::IfThenElse(branches, otherwise) => Term::IfThenElse(
            branches
                .into_iter()
                .map(|(c, t)| (counted(c), counted(t)))
                .collect(),
            otherwise.map(boxed),
        ),
        Term::Call(name, args) => Term::Call(name, args.into_iter().map(counted).collect()),
        Term::Path(t, path) => Term::Path(boxed(t), path),
        other => other,
    }
}

/// The native filters: jaq's, without those that reach outside the value,
/// `range/3` renamed for the counted definition, and the step.
fn natives() -> impl Iterator<Item = Fun<Data>> {
    let step_fun: Fun<Data> = native::run(("__step", native::v(0), |cv| {
        step();
        jaq_core::box_iter::box_once(Ok(cv.1))
    }));
    let fromjson: Fun<Data> = native::run(("fromjson", native::v(0), |cv| {
        Box::new(
            from_json(&cv.1)
                .into_iter()
                .map(|r| r.map_err(jaq_core::Exn::from)),
        )
    }));
    jaq_core::funs()
        .chain(jaq_std::funs())
        .chain(jaq_json::funs().filter(|(name, _, _)| *name != "fromjson"))
        .map(|(name, args, f)| {
            if UNLINKED.contains(&name) {
                return native::run((name, args, |_| {
                    native::bome(Err(jaq_core::Error::new(Val::from(
                        "reaches outside the value".to_string(),
                    ))))
                }));
            }
            let name = if name == "range" && args.len() == 3 {
                "__range"
            } else {
                name
            };
            (name, args, f)
        })
        .chain([step_fun, fromjson])
}

/// jq's `fromjson`, refusing text that nests deeper than [`MAX_DEPTH`]
/// before jaq's parser (which recurses once per level) sees it.
fn from_json(v: &Val) -> Vec<Result<Val, jaq_core::Error<Val>>> {
    let text: &[u8] = match v {
        Val::TStr(b) | Val::BStr(b) => b,
        other => return vec![Err(jaq_core::Error::typ(other.clone(), "string"))],
    };
    if text_nests_deeper(text, MAX_DEPTH) {
        return vec![Err(jaq_core::Error::str(format_args!(
            "cannot parse the text as JSON: it nests arrays and objects deeper than {MAX_DEPTH}"
        )))];
    }
    jaq_json::read::parse_many(text)
        .map(|r| {
            r.map_err(|e| {
                let shown = crate::wording::cut(&String::from_utf8_lossy(text), 40).into_owned();
                jaq_core::Error::str(format_args!("cannot parse {shown:?} as JSON: {e}"))
            })
        })
        .collect()
}

/// Whether JSON `text` opens arrays and objects deeper than `max`
/// (brackets in strings left out).
fn text_nests_deeper(text: &[u8], max: usize) -> bool {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &b in text {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > max {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// Drops `v` without recursion: dropping a value recurses once per level,
/// and a run may return one nested deeper than any stack holds (a `reduce`
/// wrapping its value once per element of a long array of the page).
fn drop_flat(v: Val) {
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Val::Arr(a) => {
                if let Ok(items) = jaq_json::Rc::try_unwrap(a) {
                    stack.extend(items);
                }
            }
            Val::Obj(o) => {
                if let Ok(entries) = jaq_json::Rc::try_unwrap(o) {
                    stack.extend(entries.into_iter().flat_map(|(k, v)| [k, v]));
                }
            }
            _ => {}
        }
    }
}

/// Whether `v` nests arrays and objects deeper than `max`, found without
/// recursion (an object's keys may be values too).
fn nests_deeper(v: &Val, max: usize) -> bool {
    let mut stack = vec![(v, 0usize)];
    while let Some((v, depth)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Val>> = match v {
            Val::Arr(a) => Box::new(a.iter()),
            Val::Obj(o) => Box::new(o.iter().flat_map(|(k, v)| [k, v])),
            _ => continue,
        };
        if depth + 1 > max {
            return true;
        }
        stack.extend(children.map(|c| (c, depth + 1)));
    }
    false
}

/// Refuses `def` (a loop of its own) and the names that reach outside the
/// value, at the first place one is written.
fn refuse_words(source: &str) -> Result<(), CompileError> {
    let Ok(tokens) = jaq_core::load::lex::Lexer::new(source).lex() else {
        // The loader reports lexical errors with their place.
        return Ok(());
    };
    for token in tokens {
        let word = token.0;
        let message = if word == "def" {
            "a transform cannot define functions (`def`): use jq's built-in ones (map, select, gsub, …), which keep every transform bounded in time".to_string()
        } else if REFUSED.contains(&word) {
            format!("`{word}` reaches outside the value, and a transform only reads its input")
        } else {
            continue;
        };
        return Err(CompileError {
            offset: offset_in(source, word),
            message,
        });
    }
    Ok(())
}

/// Where `part` (a slice of `source`) starts in it.
fn offset_in(source: &str, part: &str) -> usize {
    let start = source.as_ptr() as usize;
    let at = part.as_ptr() as usize;
    if at >= start && at <= start + source.len() {
        at - start
    } else {
        0
    }
}

fn load_error(source: &str, errors: jaq_core::load::Errors<&str, ()>) -> CompileError {
    use jaq_core::load::Error;
    let first = errors.into_iter().next().map(|(_, e)| e);
    let (at, message) = match first {
        Some(Error::Lex(errs)) => match errs.first() {
            Some((expect, at)) => (*at, format!("expected {}", expect.as_str())),
            None => ("", "it does not parse".to_string()),
        },
        Some(Error::Parse(errs)) => match errs.first() {
            Some((expect, at)) => {
                let found = if at.is_empty() {
                    "the end".to_string()
                } else {
                    format!("`{}`", crate::wording::cut(at, 20))
                };
                (*at, format!("expected {}, found {found}", expect.as_str()))
            }
            None => ("", "it does not parse".to_string()),
        },
        Some(Error::Io(errs)) => match errs.first() {
            Some((at, e)) => (*at, format!("modules cannot be loaded: {e}")),
            None => ("", "modules cannot be loaded".to_string()),
        },
        None => ("", "it does not parse".to_string()),
    };
    CompileError {
        offset: offset_in(source, at),
        message,
    }
}

fn compile_error(source: &str, errors: jaq_core::compile::Errors<&str, ()>) -> CompileError {
    let first = errors.into_iter().flat_map(|(_, errs)| errs).next();
    match first {
        Some((at, undefined)) => CompileError {
            offset: offset_in(source, at),
            message: format!("`{at}` is not a defined {}", undefined.as_str()),
        },
        None => CompileError {
            offset: 0,
            message: "it does not compile".to_string(),
        },
    }
}

// A compiled program is shared by the worker's threads.
const _: fn() = || {
    fn shared<T: Send + Sync>() {}
    shared::<Transform>();
};

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(program: &str, input: Value) -> Result<Value, String> {
        Transform::compile(program).expect("compiles").run(&input)
    }

    #[test]
    fn the_issue_example_reads_a_number_out_of_text() {
        assert_eq!(
            run(r#"gsub("[^0-9]"; "") | tonumber"#, json!("1,234 views")),
            Ok(json!(1234))
        );
    }

    #[test]
    fn the_first_output_counts_and_none_is_null() {
        assert_eq!(run(".[]", json!([1, 2])), Ok(json!(1)));
        assert_eq!(run("empty", json!(1)), Ok(Value::Null));
        assert_eq!(
            run("select(.views > 10)", json!({"views": 3})),
            Ok(Value::Null)
        );
    }

    /// Stopped by the step count or the clock, whichever came first (an
    /// unoptimised build reaches the clock first).
    fn stopped(e: &str) -> bool {
        e.contains("steps") || e.contains("ran longer")
    }

    #[test]
    fn endless_loops_stop_at_a_bound() {
        for program in [
            "last(repeat(.))",
            "reduce range(1e12) as $x (0; . + 1)",
            "[limit(1e9; repeat(1))] | length",
            "until(false; .)",
            // jq's `try` does not catch the bound.
            "try last(range(1e12)) catch 0",
        ] {
            let e = run(program, json!(1)).unwrap_err();
            assert!(stopped(&e), "{program}: {e}");
        }
    }

    #[test]
    fn io_and_definitions_are_refused_where_written() {
        let e = Transform::compile(".a | env.HOME").unwrap_err();
        assert_eq!(e.offset, 5);
        assert!(e.message.contains("outside the value"), "{}", e.message);
        let e = Transform::compile("def f: f; f").unwrap_err();
        assert_eq!(e.offset, 0);
        assert!(Transform::compile("now").is_err());
        assert!(Transform::compile("$ENV").is_err());
    }

    #[test]
    fn syntax_and_names_are_reported_at_their_place() {
        let e = Transform::compile(".a | (.b").unwrap_err();
        assert!(e.message.contains("expected"), "{}", e.message);
        let e = Transform::compile(".a | nosuchfilter").unwrap_err();
        assert_eq!(e.offset, 5);
        assert!(e.message.contains("nosuchfilter"), "{}", e.message);
    }

    /// Text nesting `n` arrays: `[[[…]]]`.
    fn nested_text(n: usize) -> String {
        format!("{}{}", "[".repeat(n), "]".repeat(n))
    }

    #[test]
    fn fromjson_of_text_nested_too_deep_fails_with_its_reason() {
        // 3,000 arrays in 6 KB of a page's `<script>` once aborted the
        // worker (its stack overflowed); so would ten million.
        for n in [3_000, 10_000_000] {
            let e = run("fromjson", json!(nested_text(n))).unwrap_err();
            assert!(e.contains("deeper than 64"), "{n}: {e}");
        }
        let within = nested_text(MAX_DEPTH - 1);
        assert!(run("fromjson | length", json!(within)).is_ok());
    }

    #[test]
    fn values_a_transform_builds_too_deep_fail_with_their_reason() {
        // Each once aborted the worker, on every page (an unoptimised
        // build may reach the time bound first with the larger ones).
        for program in [
            "reduce range(2000) as $i (null; [.])",
            "reduce range(2000) as $i (null; {a: .})",
            "reduce range(2000) as $i (null; [.]) | [1, .]",
            "reduce range(20000) as $i (null; [.])",
            "reduce range(20000) as $i (null; {a: .})",
        ] {
            let e = run(program, json!(null)).unwrap_err();
            let quick = program.contains("2000)");
            assert!(
                e.contains("deeper than 64") || !quick && stopped(&e),
                "{program}: {e}"
            );
        }
        assert!(run("reduce range(63) as $i (null; [.])", json!(null)).is_ok());
        // One level per element of the page's array, without a step: its
        // value is refused and dropped without recursion.
        let long = Value::Array(vec![json!(0); 3_000_000]);
        let e = run("reduce .[] as $x (null; [.])", long).unwrap_err();
        assert!(e.contains("deeper than 64"), "{e}");
    }

    /// Walked, compared, printed, dropped, or too deep for the run's
    /// stack: each once aborted the worker; now each ends, with a value or
    /// a reason.
    #[test]
    fn deep_values_used_inside_a_run_do_not_abort_it() {
        for program in [
            "reduce range(20000) as $i (null; [.]) | tojson | length",
            "reduce range(20000) as $i (null; [.]) | length",
            "reduce range(20000) as $i (null; [.]) | . == .",
            // (Over 20,000 levels, `paths` takes a minute: see the
            // module's doc.)
            "[reduce range(2000) as $i (null; [.]) | paths] | length",
            "reduce range(20000) as $i (null; [.]) | walk(.) | length",
            "reduce range(200000) as $i (null; [[[[[[[[[[.]]]]]]]]]]) | length",
            "(\"a\" * 100000 | split(\"\")) as $p | {} | setpath($p; 1) | length",
        ] {
            if let Err(e) = run(program, json!(null)) {
                assert!(
                    e.contains("jq error") || e.contains("deep") || stopped(&e),
                    "{program}: {e}"
                );
            }
        }
    }

    #[test]
    fn large_outputs_are_refused() {
        let big = "x".repeat(200_000);
        let e = run("[., ., ., ., ., ., ., .]", json!(big)).unwrap_err();
        assert!(e.contains("bytes"), "{e}");
    }
}
