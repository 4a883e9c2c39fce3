//! The checks of a field's finished value (`expect`, `non_empty`,
//! `pattern`, `min`/`max`, `min_length`/`max_length`). What the field is
//! sure to make is known from its type, `all` and its source, so a check
//! that could never pass is refused here rather than dropping every item
//! at crawl time. Running the checks on a page is the extractor's.

use super::Compiler;
use crate::reader::At;
use crate::spider::file::FieldFile;
use crate::spider::{FieldChecks, FieldType, ValueKind};

impl Compiler<'_> {
    /// A field's checks. `kind` and `list` say what the field makes.
    pub(super) fn checks(
        &self,
        f: &FieldFile,
        kind: Option<FieldType>,
        list: bool,
    ) -> Option<FieldChecks> {
        let mut ok = true;
        let expect = f.expect.as_ref().and_then(|e| {
            let k = self.value_kind(e);
            ok &= k.is_some();
            k
        });
        let made = made(f, kind, list);
        if let (Some(want), Some(made), Some(at)) = (expect, made, &f.expect) {
            ok &= self.check_expect_fits(f, at, want, made);
        }
        let pattern = f.pattern.as_ref().and_then(|p| {
            let re = self.regex(p);
            ok &= re.is_some();
            re
        });
        ok &= self.check_ordered(&f.min, &f.max, "min", "max");
        ok &= self.check_ordered(&f.min_length, &f.max_length, "min_length", "max_length");
        ok &= self.check_bounds_numbers(f, made, expect);
        let length = |n: &Option<At<i64>>| n.as_ref().map(|n| n.value as usize);
        ok.then(|| FieldChecks {
            expect,
            non_empty: f.non_empty.as_ref().is_some_and(|n| n.value),
            pattern,
            min: f.min.as_ref().map(|m| m.value),
            max: f.max.as_ref().map(|m| m.value),
            min_length: length(&f.min_length),
            max_length: length(&f.max_length),
        })
    }

    /// `expect = "…"`: a JSON value type.
    fn value_kind(&self, e: &At<String>) -> Option<ValueKind> {
        match ValueKind::NAMES.iter().find(|(n, _)| *n == e.value) {
            Some((_, k)) => Some(*k),
            None => {
                self.problem(
                    &e.loc,
                    format!("`{}` is not a value type", e.value),
                    "use \"string\", \"integer\", \"number\", \"boolean\", \"list\" or \"object\"",
                );
                None
            }
        }
    }

    /// Whether values of type `made` pass `expect = want` (integers are
    /// numbers). False on a problem.
    fn check_expect_fits(
        &self,
        f: &FieldFile,
        at: &At<String>,
        want: ValueKind,
        made: ValueKind,
    ) -> bool {
        let fits = want == made || (want == ValueKind::Number && made == ValueKind::Integer);
        if !fits {
            self.problem(
                &at.loc,
                format!(
                    "field `{}` makes {} values, so `expect = \"{}\"` would drop every item",
                    f.path,
                    made.name(),
                    want.name()
                ),
                "make `expect` agree with `type` (and `all = true`, which makes a list)",
            );
        }
        fits
    }

    /// A lower bound above its upper bound lets no value pass. False on a
    /// problem.
    fn check_ordered<T: PartialOrd + std::fmt::Display>(
        &self,
        min: &Option<At<T>>,
        max: &Option<At<T>>,
        min_key: &str,
        max_key: &str,
    ) -> bool {
        let (Some(min), Some(max)) = (min, max) else {
            return true;
        };
        if min.value > max.value {
            self.problem(
                &max.loc,
                format!("{max_key} {} is below {min_key} {}", max.value, min.value),
                "no value could pass: swap them",
            );
            return false;
        }
        true
    }

    /// `min` and `max` on a field that makes text or booleans could never
    /// pass. False on a problem.
    fn check_bounds_numbers(
        &self,
        f: &FieldFile,
        made: Option<ValueKind>,
        expect: Option<ValueKind>,
    ) -> bool {
        let bound = f.min.as_ref().or(f.max.as_ref());
        let textual = matches!(made, Some(ValueKind::String | ValueKind::Boolean))
            || matches!(
                expect,
                Some(ValueKind::String | ValueKind::Boolean | ValueKind::Object)
            );
        let Some(at) = bound.filter(|_| textual) else {
            return true;
        };
        self.problem(
            &at.loc,
            format!(
                "min and max bound numbers, and field `{}` makes no numbers",
                f.path
            ),
            "bound a text's length with min_length / max_length, or convert it with type = \"int\" or \"float\"",
        );
        false
    }
}

/// What the field is sure to make, when `type`, `all` or its source say
/// (CSS selections and URLs are text until converted).
fn made(f: &FieldFile, kind: Option<FieldType>, list: bool) -> Option<ValueKind> {
    let text_source = f.css.is_some() || f.page.as_ref().is_some_and(|p| p.value == "url");
    if f.transform.is_some() {
        // A transform may make anything.
        return None;
    }
    if list {
        return Some(ValueKind::List);
    }
    if f.fields.is_some() {
        return Some(ValueKind::Object);
    }
    if f.prepare.is_some() && kind.is_none() {
        // A `prepare` may make anything, and no `type` reads it.
        return None;
    }
    match kind {
        Some(FieldType::String) => Some(ValueKind::String),
        Some(FieldType::Int) => Some(ValueKind::Integer),
        Some(FieldType::Float) => Some(ValueKind::Number),
        Some(FieldType::Bool) => Some(ValueKind::Boolean),
        Some(FieldType::DateTime) => Some(ValueKind::String),
        None if text_source => Some(ValueKind::String),
        None => None,
    }
}
