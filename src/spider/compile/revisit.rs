//! A rule's `revisit` (a fixed interval, or an adaptive one between `min`
//! and `max`) and the keys that go with it: `change` (what tells that a
//! page changed), `change_fields` and `emit`. Keeping the schedule is the
//! frontier's.

use std::time::Duration;

use super::Compiler;
use crate::reader::At;
use crate::settings;
use crate::spider::file::{ItemFile, RevisitFile, RuleFile};
use crate::spider::{Change, RevisitRule};

/// The shortest `revisit` a rule may ask for.
const MIN_REVISIT: Duration = Duration::from_millis(100);

impl Compiler<'_> {
    /// The rule's revisit, `Some(None)` when it has none; `None` on a
    /// problem.
    pub(super) fn rule_revisit(
        &self,
        r: &RuleFile,
        item_files: &[ItemFile],
    ) -> Option<Option<RevisitRule>> {
        match &r.revisit {
            Some(file) => Some(Some(self.revisit(file, r, item_files)?)),
            None => {
                let fields = r.change_fields.iter().flatten().take(1);
                for at in [&r.change, &r.emit].into_iter().flatten().chain(fields) {
                    self.problem(
                        &at.loc,
                        "`change`, `change_fields` and `emit` apply to pages a rule revisits, and this rule has no `revisit`",
                        "add `revisit = \"10m\"` (or { min = \"5m\", max = \"6h\" }), or remove the key",
                    );
                }
                Some(None)
            }
        }
    }

    fn revisit(
        &self,
        file: &RevisitFile,
        r: &RuleFile,
        item_files: &[ItemFile],
    ) -> Option<RevisitRule> {
        let (min, max) = self.revisit_intervals(file)?;
        let change = self.change(r);
        let emit_changed = self.emit_changed(r);
        if !self.check_change_fields(r, item_files) {
            return None;
        }
        Some(RevisitRule {
            min: min?,
            max: max?,
            change_fields: r
                .change_fields
                .iter()
                .flatten()
                .map(|f| f.value.clone())
                .collect(),
            change: change?,
            emit_changed: emit_changed?,
        })
    }

    /// The shortest and the longest interval (equal for a fixed one), each
    /// `None` where it is a problem; `None` when an adaptive revisit lacks
    /// one of them.
    fn revisit_intervals(
        &self,
        file: &RevisitFile,
    ) -> Option<(Option<Duration>, Option<Duration>)> {
        match file {
            RevisitFile::Every(at) => {
                let every = self.revisit_interval(at);
                Some((every, every))
            }
            RevisitFile::Adaptive { loc, min, max } => {
                let (Some(min), Some(max)) = (min, max) else {
                    self.problem(
                        loc,
                        "an adaptive revisit needs both `min` and `max`",
                        "write revisit = { min = \"5m\", max = \"6h\" }, or revisit = \"10m\" for a fixed interval",
                    );
                    return None;
                };
                let (lo, hi) = (self.revisit_interval(min), self.revisit_interval(max));
                match (lo, hi) {
                    (Some(l), Some(h)) if l > h => {
                        self.problem(
                            &max.loc,
                            format!("`max = \"{}\"` is shorter than `min = \"{}\"`", max.value, min.value),
                            "the interval moves between min (pages that change) and max (pages that do not): make max the longer",
                        );
                        Some((None, None))
                    }
                    _ => Some((lo, hi)),
                }
            }
        }
    }

    /// A duration of `revisit`, at least [`MIN_REVISIT`].
    fn revisit_interval(&self, at: &At<String>) -> Option<Duration> {
        match settings::parse_duration(&at.value) {
            Ok(every) if every >= MIN_REVISIT => Some(every),
            Ok(_) => {
                self.problem(
                    &at.loc,
                    format!("`{}` is too short to revisit a page", at.value),
                    "the shortest is \"100ms\"; a list page is typically revisited every few minutes (\"5m\"), a feed every hour (\"1h\")",
                );
                None
            }
            Err(e) => {
                self.problem(
                    &at.loc,
                    e,
                    "write how often to fetch the page again, e.g. \"10m\", \"1h 30m\" or \"1d\"",
                );
                None
            }
        }
    }

    /// `change = "extracted" | "body"`.
    fn change(&self, r: &RuleFile) -> Option<Change> {
        match r.change.as_ref().map(|c| (c, c.value.as_str())) {
            None | Some((_, "extracted")) => Some(Change::Extracted),
            Some((_, "body")) => Some(Change::Body),
            Some((at, other)) => {
                self.problem(
                    &at.loc,
                    format!("`change = \"{other}\"` is not a way to compare pages"),
                    "use \"extracted\" (the items and links the rule extracts: the default) or \"body\" (the response body, byte for byte)",
                );
                None
            }
        }
    }

    /// `emit = "all" | "changed"`: whether only changed items are pushed.
    fn emit_changed(&self, r: &RuleFile) -> Option<bool> {
        match r.emit.as_ref().map(|e| (e, e.value.as_str())) {
            None | Some((_, "all")) => Some(false),
            Some((_, "changed")) => Some(true),
            Some((at, other)) => {
                self.problem(
                    &at.loc,
                    format!("`emit = \"{other}\"` is not an emit mode"),
                    "use \"all\" (push every visit's items: the default) or \"changed\" (only the items the last visit did not have)",
                );
                None
            }
        }
    }

    /// The fields `change_fields` names must be fields of the items this
    /// rule extracts. False on a problem.
    fn check_change_fields(&self, r: &RuleFile, item_files: &[ItemFile]) -> bool {
        let known: Vec<&str> = r
            .extract
            .iter()
            .filter_map(|e| e.item.as_ref())
            .filter_map(|i| item_files.iter().find(|d| d.name.value == i.value))
            .flat_map(|d| d.fields.iter().map(|f| f.name.value.as_str()))
            .collect();
        let mut ok = true;
        for f in r.change_fields.iter().flatten() {
            if !known.contains(&f.value.as_str()) {
                ok = false;
                self.problem(
                    &f.loc,
                    format!(
                        "`{}` is not a field of the items this rule extracts",
                        f.value
                    ),
                    format!("name fields of its items: {}", known.join(", ")),
                );
            }
        }
        ok
    }
}
