//! The spider as a whole: the rule graph (which rules requests are sent
//! to, and what context they carry there), and the problems only it shows:
//! rules no request can reach, and context fields read where no request
//! carries them. Each section's own problems are its module's.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};

use super::{Compiler, Names};
use crate::reader::At;
use crate::spider::file::{ExtractFile, FollowFile, IntOrTemplate, RuleFile, SpiderFile};
use crate::spider::{Start, Template};

impl Compiler<'_> {
    /// Rules no request can ever reach.
    pub(super) fn check_reachable(&self, file: &SpiderFile, g: &Graph) {
        let shadows = Shadows::new(file);
        for (i, rule) in file.rules.iter().enumerate() {
            let Some(name) = &rule.name else { continue };
            if g.targeted[i] {
                continue;
            }
            if rule.matches.is_empty() {
                self.problem(
                    &name.loc,
                    format!("rule `{}` is never used: it has no `match` and nothing names it", name.value),
                    "add `match = '…'` (a URL regex), or name it with `rule = \"…\"` in a follow entry or in [start]",
                );
                continue;
            }
            let earlier = shadows.earlier(i, rule).map(|e| &file.rules[e]);
            if let Some(e) = earlier {
                let other = e.name.as_ref().map_or("", |n| n.value.as_str());
                self.problem(
                    &name.loc,
                    format!("rule `{}` is never used: rule `{other}` above matches the same URLs first", name.value),
                    "the first matching rule wins: make one pattern more specific, or name this rule in a follow entry",
                );
            }
        }
    }

    /// Context fields read where no request carries them.
    pub(super) fn check_context(&self, file: &SpiderFile, g: &Graph) {
        for (src, rule) in file.rules.iter().enumerate() {
            let rule_name = rule.name.as_ref().map_or("", |n| n.value.as_str());
            let Known::Set(have) = &g.known[src] else {
                continue;
            };
            // A JSON entry passes on fields of the JSON too.
            for f in rule.follow.iter().filter(|f| !reads_json_fields(f)) {
                self.check_follow_context(f, rule_name, have);
            }
            for e in &rule.extract {
                self.check_item_context(file, e, rule_name, have);
            }
        }
    }

    /// A follow entry's `meta` and `paginate.max` read only what requests
    /// reaching its rule carry (`have`).
    fn check_follow_context(&self, f: &FollowFile, rule_name: &str, have: &BTreeSet<String>) {
        for m in f.meta.iter().filter(|m| m.value != "*") {
            if !have.contains(&m.value) {
                self.problem(
                    &m.loc,
                    format!("rule `{rule_name}` passes on `{}`, but no request reaching `{rule_name}` carries it", m.value),
                    context_hint(have),
                );
            }
        }
        let Some(max) = f.paginate.as_ref().and_then(|p| p.max.as_ref()) else {
            return;
        };
        let IntOrTemplate::Template(t) = &max.value else {
            return;
        };
        if let Ok(t) = Template::parse(t) {
            for field in t.fields().into_iter().filter(|x| !have.contains(*x)) {
                self.problem(
                    &max.loc,
                    format!("`paginate.max` reads `{field}`, but no request reaching `{rule_name}` carries it"),
                    context_hint(have),
                );
            }
        }
    }

    /// The `meta` fields of an extract entry's item read only what
    /// requests reaching its rule carry (`have`).
    fn check_item_context(
        &self,
        file: &SpiderFile,
        e: &ExtractFile,
        rule_name: &str,
        have: &BTreeSet<String>,
    ) {
        let item = e
            .item
            .as_ref()
            .and_then(|i| file.items.iter().find(|it| it.name.value == i.value));
        for field in item.map(|i| i.fields.as_slice()).unwrap_or_default() {
            if let Some(meta) = &field.meta {
                if !have.contains(&meta.value) {
                    self.problem(
                        &meta.loc,
                        format!("item field `{}` reads `{}`, but no request reaching rule `{rule_name}` carries it", field.name.value, meta.value),
                        format!("pass it on with `meta = [\"{}\"]` in the follow entries that lead to `{rule_name}`; {}", meta.value, context_hint(have)),
                    );
                }
            }
        }
    }
}

fn context_hint(have: &BTreeSet<String>) -> String {
    if have.is_empty() {
        "requests reaching it carry no context fields".to_string()
    } else {
        format!(
            "requests reaching it carry: {}",
            have.iter().cloned().collect::<Vec<_>>().join(", ")
        )
    }
}

/// Whether a follow entry reads its `meta` names (and templates) from the
/// page's JSON as well as from the request's context.
fn reads_json_fields(f: &FollowFile) -> bool {
    f.url.is_some() || f.json.is_some()
}

/// What is known about the context of the requests reaching a rule.
#[derive(Debug, Clone, PartialEq)]
enum Known {
    /// Could carry anything (tasks are not declared, or reached by matching).
    Any,
    Set(BTreeSet<String>),
}

impl Known {
    fn meet(self, other: Known) -> Known {
        match (self, other) {
            (Known::Any, k) | (k, Known::Any) => k,
            (Known::Set(a), Known::Set(b)) => Known::Set(a.intersection(&b).cloned().collect()),
        }
    }
}

/// Which earlier rule matches every URL a rule matches, found through an
/// index of the rules by pattern instead of comparing every pair.
struct Shadows<'f> {
    /// Each `match` pattern, with the rules that have it, in file order.
    by_pattern: HashMap<&'f str, Vec<usize>>,
    /// Each rule's patterns.
    sets: Vec<HashSet<&'f str>>,
}

impl<'f> Shadows<'f> {
    fn new(file: &'f SpiderFile) -> Shadows<'f> {
        let mut by_pattern: HashMap<&str, Vec<usize>> = Default::default();
        let mut sets = Vec::with_capacity(file.rules.len());
        for (i, rule) in file.rules.iter().enumerate() {
            let set: HashSet<&str> = rule.matches.iter().map(|m| m.value.as_str()).collect();
            for m in &set {
                by_pattern.entry(m).or_default().push(i);
            }
            sets.push(set);
        }
        Shadows { by_pattern, sets }
    }

    /// The first rule before `i` whose patterns include all of `rule`'s:
    /// only rules sharing its rarest pattern are candidates.
    fn earlier(&self, i: usize, rule: &RuleFile) -> Option<usize> {
        let rarest = rule
            .matches
            .iter()
            .filter_map(|m| self.by_pattern.get(m.value.as_str()))
            .min_by_key(|rules| rules.len())?;
        rarest
            .iter()
            .take_while(|&&e| e < i)
            .copied()
            .find(|&e| self.sets[i].is_subset(&self.sets[e]))
    }
}

/// The rule graph: which rules requests are sent to, and what context they
/// carry there (a greatest fixed point over the follow edges).
pub(super) struct Graph {
    targeted: Vec<bool>,
    known: Vec<Known>,
}

/// A follow entry naming a rule: requests go from one rule to another.
struct Edge {
    from: usize,
    to: usize,
    /// The names it carries; `None` for all (`meta = ["*"]`).
    carry: Option<BTreeSet<String>>,
    /// Whether the names are read from the JSON as well.
    json: bool,
}

/// The follow edges of a spider, with which rules something names and
/// whether some requests find their rule by matching URLs.
struct Edges {
    list: Vec<Edge>,
    targeted: Vec<bool>,
    by_matching: bool,
}

impl Edges {
    fn new(file: &SpiderFile, rules: &Names<'_>, start_rule: Option<usize>) -> Edges {
        let index = |at: &Option<At<String>>| at.as_ref().and_then(|a| rules.position(&a.value));
        let mut targeted = vec![false; file.rules.len()];
        if let Some(s) = start_rule {
            targeted[s] = true;
        }
        let mut list = Vec::new();
        let mut by_matching = file.start.rule.is_none();
        for (from, rule) in file.rules.iter().enumerate() {
            for f in &rule.follow {
                let carry = (!f.meta.iter().any(|m| m.value == "*")).then(|| {
                    f.meta
                        .iter()
                        .chain(&f.counter)
                        .map(|m| m.value.clone())
                        .collect()
                });
                match index(&f.rule) {
                    Some(to) => {
                        targeted[to] = true;
                        list.push(Edge {
                            from,
                            to,
                            carry,
                            json: reads_json_fields(f),
                        });
                    }
                    None => by_matching |= f.rule.is_none(),
                }
            }
        }
        Edges {
            list,
            targeted,
            by_matching,
        }
    }
}

impl Graph {
    pub(super) fn new(file: &SpiderFile, rules: &Names<'_>, start: Option<&Start>) -> Graph {
        let start_rule = file
            .start
            .rule
            .as_ref()
            .and_then(|a| rules.position(&a.value));
        let edges = Edges::new(file, rules, start_rule);
        let task = match start.and_then(|s| s.task_fields.as_ref()) {
            Some(f) => Known::Set(f.iter().cloned().collect()),
            None => Known::Any,
        };
        let known = known_context(file, &edges, start_rule, &task);
        Graph {
            targeted: edges.targeted,
            known,
        }
    }
}

/// What the requests reaching each rule carry. Each rule's incoming and
/// outgoing edges are indexed, so that a rule is recomputed only when a
/// rule leading to it changed (a worklist): no pass over all rules per
/// change, nothing quadratic.
fn known_context(
    file: &SpiderFile,
    edges: &Edges,
    start_rule: Option<usize>,
    task: &Known,
) -> Vec<Known> {
    let n = file.rules.len();
    let mut incoming: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut outgoing: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (e, edge) in edges.list.iter().enumerate() {
        incoming[edge.to].push(e);
        outgoing[edge.from].push(edge.to);
    }
    let mut known = vec![Known::Any; n];
    let mut queued = vec![true; n];
    let mut work: VecDeque<usize> = (0..n).collect();
    while let Some(dst) = work.pop_front() {
        queued[dst] = false;
        // A request reached by URL matching may carry anything.
        let open = edges.by_matching && !file.rules[dst].matches.is_empty();
        let next = if open {
            Known::Any
        } else {
            let start = (start_rule == Some(dst)).then_some(task);
            let from = incoming[dst].iter().map(|&e| &edges.list[e]);
            reaching(start, from, &known)
        };
        if next != known[dst] {
            known[dst] = next;
            for &to in &outgoing[dst] {
                if !queued[to] {
                    queued[to] = true;
                    work.push_back(to);
                }
            }
        }
    }
    known
}

/// What every request reaching a rule carries: the start task's fields
/// (`start`, for the start rule), met with what each incoming edge
/// provides given what its rule knows.
fn reaching<'e>(
    start: Option<&Known>,
    incoming: impl Iterator<Item = &'e Edge>,
    known: &[Known],
) -> Known {
    let mut k: Option<Known> = start.cloned();
    for edge in incoming {
        let provided = match (&edge.carry, &known[edge.from]) {
            // The JSON may hold any of the names.
            (Some(names), _) if edge.json => Known::Set(names.clone()),
            (None, from) => from.clone(),
            (Some(names), Known::Any) => Known::Set(names.clone()),
            (Some(names), Known::Set(have)) => {
                Known::Set(names.intersection(have).cloned().collect())
            }
        };
        k = Some(match k {
            None => provided,
            Some(k) => k.meet(provided),
        });
    }
    k.unwrap_or(Known::Any)
}
