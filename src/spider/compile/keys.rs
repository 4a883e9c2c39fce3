//! `[keys]` and `[start] key`: the spider's Redis key names. Resolves the
//! key mode and each kind's template, checks the hash tag of cluster mode,
//! and refuses a name two kinds would share or one the dupefilter's own
//! keys may take. How names are made from templates is the frontier's
//! ([`Keys`]); this module checks what the file asks of it.

use super::values::valid_name;
use super::Compiler;
use crate::frontier::keys::{KeyKind, KeyMode, Keys};
use crate::frontier::shards::{shard_keys, MAX_SHARDS};
use crate::reader::diagnostic::did_you_mean;
use crate::reader::{At, Loc};
use crate::spider::file::{KeysFile, StartFile};

/// Where each kind's name was written, to point at a clash.
type Written<'k> = Vec<(KeyKind, &'k Loc)>;

impl Compiler<'_> {
    /// Resolves the spider's key names from `[keys]` and `[start] key`,
    /// with those of each of its shards (`[keys] shards`; shard 0's are
    /// the spider's own).
    pub(super) fn keys(
        &self,
        k: &KeysFile,
        start: &StartFile,
        spider: &str,
    ) -> Option<(Keys, Vec<Keys>)> {
        let mode = self.key_mode(k);
        let mut ok = true;
        let mut templates = Vec::new();
        let mut written: Written<'_> = Vec::new();
        for (kind, template) in &k.templates {
            match self.key_kind(kind, template, mode) {
                Some(parsed) => {
                    templates.push((parsed, template.value.clone()));
                    written.push((parsed, &template.loc));
                }
                None => ok = false,
            }
        }
        let tag = self.hash_tag(k, mode);
        ok &= tag.is_some();
        let tag = tag.flatten();
        let tagged = Keys::tagged_name(spider, mode, tag);
        ok &= self.check_start_key(start, spider, mode, &tagged);
        if let Some(key) = &start.key {
            written.push((KeyKind::Start, &key.loc));
        }
        let keys = Keys::resolve(
            spider,
            mode,
            tag,
            &templates,
            start.key.as_ref().map(|k| k.value.as_str()),
        );
        let all: Vec<(KeyKind, &str)> = keys.all().collect();
        ok &= self.check_own_names(&all, k, spider, &tagged);
        ok &= self.check_shared_keys(&all, &written, k);
        ok &= self.check_below_dupefilter(&keys, &all, &written, k);
        let shards = self.shard_count(k)?;
        let start_key = start.key.as_ref().map(|k| k.value.as_str());
        // Shard 0's are the spider's own (a hash tag included: only a
        // spider that is not sharded may have one).
        let shard_keys = std::iter::once(keys.clone())
            .chain((1..shards).map(|i| shard_keys(spider, mode, &templates, start_key, i, shards)))
            .collect();
        ok.then_some((keys, shard_keys))
    }

    /// `[keys] shards`: 1 (the default) to [`MAX_SHARDS`]; a sharded
    /// spider may not share its hash tag (its shards have tags of their
    /// own). `None` when it is a problem.
    fn shard_count(&self, k: &KeysFile) -> Option<usize> {
        let Some(n) = &k.shards else { return Some(1) };
        if !(1..=MAX_SHARDS as i64).contains(&n.value) {
            self.problem(
                &n.loc,
                format!("`shards = {}` is out of range", n.value),
                format!("give 1 (not sharded, the default) to {MAX_SHARDS}, e.g. one per master of the Redis Cluster"),
            );
            return None;
        }
        if n.value > 1 {
            if let Some(tag) = &k.hash_tag {
                self.problem(
                    &tag.loc,
                    "a sharded spider cannot share a hash tag: each shard has its own (`{name.1}`, …)",
                    "remove `hash_tag`, or `shards`",
                );
                return None;
            }
        }
        Some(n.value as usize)
    }

    /// `[keys] mode`: plain, or cluster (hash tags).
    fn key_mode(&self, k: &KeysFile) -> KeyMode {
        match k.mode.as_ref().map(|m| m.value.as_str()) {
            None | Some("plain") => KeyMode::Plain,
            Some("cluster") => KeyMode::Cluster,
            Some(other) => {
                self.problem(
                    &k.mode.as_ref().map(|m| m.loc.clone()).unwrap_or_default(),
                    format!("`{other}` is not a key mode"),
                    "use \"plain\" (default) or \"cluster\" (Redis Cluster hash tags)",
                );
                KeyMode::Plain
            }
        }
    }

    /// The kind a `[keys]` entry renames, if it may be renamed there and
    /// its template suits the mode.
    fn key_kind(&self, kind: &At<String>, template: &At<String>, mode: KeyMode) -> Option<KeyKind> {
        match KeyKind::parse(&kind.value) {
            Some(KeyKind::Start) => {
                self.problem(
                    &kind.loc,
                    "the start key is not named in `[keys]`",
                    "name it in the `[start]` table: key = \"…\"",
                );
                None
            }
            None => {
                let kinds: Vec<&str> = KeyKind::ALL
                    .iter()
                    .filter(|k| **k != KeyKind::Start)
                    .map(|k| k.name())
                    .collect();
                let hint = match did_you_mean(&kind.value, kinds.iter().copied()) {
                    Some(near) => format!("did you mean `{near}`?"),
                    None => format!("key kinds: mode, {}", kinds.join(", ")),
                };
                self.problem(
                    &kind.loc,
                    format!("unknown key kind `{}`", kind.value),
                    hint,
                );
                None
            }
            Some(_) if mode == KeyMode::Cluster && !template.value.contains("{name}") => {
                self.problem(
                    &template.loc,
                    "in cluster mode a key template must contain `{name}` (it becomes the hash tag)",
                    "write e.g. \"{name}:requests\"",
                );
                None
            }
            Some(parsed) => Some(parsed),
        }
    }

    /// `[keys] hash_tag`, which only cluster mode uses: `Some(None)` when
    /// there is none to use, `None` when it is a problem.
    fn hash_tag<'k>(&self, k: &'k KeysFile, mode: KeyMode) -> Option<Option<&'k str>> {
        match (&k.hash_tag, mode) {
            (Some(t), KeyMode::Cluster) if !valid_name(&t.value) => {
                self.problem(
                    &t.loc,
                    format!("`{}` is not a usable hash tag", t.value),
                    "use letters, digits, `_`, `-` and `.` (e.g. the name of the spider this one works with)",
                );
                None
            }
            (Some(t), KeyMode::Cluster) => Some(Some(t.value.as_str())),
            (Some(t), KeyMode::Plain) => {
                self.r.warning(
                    &t.loc,
                    "`hash_tag` only matters in cluster mode",
                    Some("add `mode = \"cluster\"`, or remove `hash_tag`".into()),
                );
                Some(None)
            }
            (None, _) => Some(None),
        }
    }

    /// `[start] key`: in cluster mode it must carry the hash tag; a name
    /// without the spider's is a warning. False on a problem.
    fn check_start_key(
        &self,
        start: &StartFile,
        spider: &str,
        mode: KeyMode,
        tagged: &str,
    ) -> bool {
        let Some(key) = &start.key else {
            return true;
        };
        let mut ok = true;
        if mode == KeyMode::Cluster && !key.value.contains(tagged) {
            ok = false;
            self.problem(
                &key.loc,
                format!("in cluster mode the start key must contain the hash tag `{tagged}`"),
                format!("write e.g. key = \"{tagged}:start_urls\", so every key of the spider is in one slot"),
            );
        }
        // A copy of a spider under a new name would share its start key.
        if !key.value.contains(spider) {
            self.r.warning(
                &key.loc,
                format!(
                    "the start key `{}` does not contain the spider's name `{spider}`; a copy of this spider under another name would share it (and `flush --all` of one would delete the other's entries)",
                    key.value
                ),
                Some(format!(
                    "leave `key` out to use the default `{}`",
                    KeyKind::Start.template().replace("{name}", tagged)
                )),
            );
        }
        ok
    }

    /// A `[keys]` name must be one: an empty one is refused, and one
    /// without the spider's name (`other:items`) may be another spider's,
    /// whose records would mix with this one's. False on a problem.
    fn check_own_names(
        &self,
        all: &[(KeyKind, &str)],
        k: &KeysFile,
        spider: &str,
        tagged: &str,
    ) -> bool {
        let mut ok = true;
        for (kind, template) in &k.templates {
            let Some(parsed) = KeyKind::parse(&kind.value) else {
                continue;
            };
            let default = parsed.template().replace("{name}", tagged);
            if template.value.trim().is_empty() {
                ok = false;
                self.problem(
                    &template.loc,
                    format!("the `{}` key name is empty", kind.value),
                    format!("leave `{}` out to use the default `{default}`", kind.value),
                );
                continue;
            }
            let name = all.iter().find(|(k, _)| *k == parsed).map(|(_, n)| *n);
            if let Some(name) = name.filter(|n| !n.contains(spider)) {
                self.r.warning(
                    &template.loc,
                    format!(
                        "the `{}` key `{name}` does not contain the spider's name `{spider}`: if another spider uses it, their records mix (and `flush --all` of one deletes the other's)",
                        kind.value
                    ),
                    Some(format!(
                        "write it with `{{name}}` (e.g. `{}`), or leave it out to use `{default}`",
                        parsed.template()
                    )),
                );
            }
        }
        ok
    }

    /// Two kinds sharing a key would mix what they hold (and `flush` of one
    /// would delete the other). False on a problem.
    fn check_shared_keys(
        &self,
        all: &[(KeyKind, &str)],
        written: &Written<'_>,
        k: &KeysFile,
    ) -> bool {
        let mut ok = true;
        for (i, (kind, key)) in all.iter().enumerate() {
            if let Some((other, _)) = all[..i].iter().find(|(_, k)| k == key) {
                ok = false;
                self.problem(
                    &written_at(written, [*kind, *other], k),
                    format!(
                        "the `{}` and `{}` keys would both be `{key}`",
                        other.name(),
                        kind.name()
                    ),
                    "give every kind its own key name",
                );
            }
        }
        ok
    }

    /// The dupefilter's bloom and expiring modes also write
    /// `<dupefilter>:<n>` and `<dupefilter>:<n>:piece:<p>`: no other key
    /// may be one of those. False on a problem.
    fn check_below_dupefilter(
        &self,
        keys: &Keys,
        all: &[(KeyKind, &str)],
        written: &Written<'_>,
        k: &KeysFile,
    ) -> bool {
        let mut ok = true;
        let below = format!("{}:", keys.dupefilter);
        for (kind, key) in all {
            let derived = key.strip_prefix(&below).is_some_and(|rest| {
                rest.starts_with(|c: char| c.is_ascii_digit()) || rest.starts_with("piece:")
            });
            if derived {
                ok = false;
                self.problem(
                    &written_at(written, [*kind, KeyKind::Dupefilter], k),
                    format!(
                        "the `{}` key `{key}` is one the `dupefilter` key's own keys may take (`{below}<n>`, in the bloom and expiring modes)",
                        kind.name()
                    ),
                    "give every kind its own key name, not one below another's",
                );
            }
        }
        ok
    }
}

/// Where the first of `kinds` was named, else `[keys] mode`.
fn written_at(written: &Written<'_>, kinds: [KeyKind; 2], k: &KeysFile) -> Loc {
    written
        .iter()
        .find(|(w, _)| kinds.contains(w))
        .map(|(_, l)| (*l).clone())
        .unwrap_or_else(|| k.mode.as_ref().map(|m| m.loc.clone()).unwrap_or_default())
}
