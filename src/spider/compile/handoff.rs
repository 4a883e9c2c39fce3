//! `to_spider`: the spiders a follow entry hands its links to. Each is
//! read once from `<name>.toml` beside this spider's file, for its start
//! key, the key's type, its wake channel and the task fields it requires;
//! in cluster mode its start key must share this spider's slot. Writing
//! the tasks is the frontier's.

use super::{compile_with, Compiler};
use crate::frontier::connection::hash_tag;
use crate::frontier::keys::Keys;
use crate::reader::{At, Loc};
use crate::spider::{Handoff, StartKind};

impl Compiler<'_> {
    /// The index of the spider a `to_spider` entry hands its links to, read
    /// from `<name>.toml` beside this file: its start key, the key's type,
    /// its wake channel, and the task fields it requires (which `meta` must
    /// carry, or it would refuse every task).
    pub(super) fn handoff(&self, to: &At<String>, meta: &[At<String>]) -> Option<usize> {
        if !self.name(to, "spider") {
            return None;
        }
        if let Some(i) = self
            .handoffs
            .borrow()
            .iter()
            .position(|(h, _)| h.spider == to.value)
        {
            return Some(i);
        }
        let target = if self.resolve_handoffs {
            self.target_spider(to)?
        } else {
            // Only this spider's keys are wanted; its targets are not read.
            Handoff {
                spider: to.value.clone(),
                start_key: String::new(),
                kind: StartKind::List,
                wake: String::new(),
                task_fields: Vec::new(),
            }
        };
        let carried = |f: &String| meta.iter().any(|m| m.value == *f || m.value == "*");
        let missing: Vec<&String> = target.task_fields.iter().filter(|f| !carried(f)).collect();
        if !missing.is_empty() {
            let names: Vec<String> = missing.iter().map(|f| format!("\"{f}\"")).collect();
            self.problem(
                &to.loc,
                format!(
                    "spider `{}` requires the task fields {} (its `task_fields`), which this entry does not pass",
                    to.value,
                    names.join(", ")
                ),
                format!("carry them: meta = [{}]", names.join(", ")),
            );
            return None;
        }
        let mut handoffs = self.handoffs.borrow_mut();
        handoffs.push((target, to.loc.clone()));
        Some(handoffs.len() - 1)
    }

    /// Reads the spider `to` names from beside this file.
    fn target_spider(&self, to: &At<String>) -> Option<Handoff> {
        let path = self.path.with_file_name(format!("{}.toml", to.value));
        let fail = |why: String| {
            self.problem(
                &to.loc,
                format!(
                    "spider `{}` is read from {} for its start key, but {why}",
                    to.value,
                    path.display()
                ),
                format!(
                    "put the `{}` spider file beside this one (and run `crawlworker check` on it)",
                    to.value
                ),
            );
            None
        };
        if path == self.path {
            return fail("that is this spider: follow within it with `rule`".into());
        }
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) => return fail(format!("it cannot be read ({e})")),
        };
        let spider = match compile_with(&path, &text, false) {
            Ok(spider) => spider,
            Err(e) => {
                let first = e
                    .diagnostics()
                    .iter()
                    .find(|d| !d.warning)
                    .map(|d| d.to_string());
                return fail(format!(
                    "it has problems: {}",
                    first.unwrap_or_else(|| e.to_string())
                ));
            }
        };
        if spider.name != to.value {
            return fail(format!("the spider there is named `{}`", spider.name));
        }
        Some(Handoff {
            spider: spider.name,
            start_key: spider.keys.start_urls,
            kind: spider.start.kind,
            wake: spider.keys.wake,
            task_fields: spider.start.task_fields.unwrap_or_default(),
        })
    }

    /// In cluster mode a page's commit writes the other spider's start key
    /// too, so it must be in this spider's slot.
    pub(super) fn check_handoff_slots(&self, keys: &Keys, handoffs: &[(Handoff, Loc)]) {
        let tag = hash_tag(&keys.requests);
        if tag == keys.requests {
            return; // plain keys: a single Redis, any key goes
        }
        for (h, loc) in handoffs {
            if hash_tag(&h.start_key) != tag {
                self.problem(
                    loc,
                    format!(
                        "on a Redis Cluster this spider's keys are in the slot of {{{tag}}} but `{}`'s start key `{}` is not, so one commit could not write both",
                        h.spider, h.start_key
                    ),
                    format!("give both spiders the same tag: `[keys] mode = \"cluster\"` and `hash_tag = \"{tag}\"` in each"),
                );
            }
        }
    }
}
