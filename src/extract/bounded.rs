//! How much work one page may cost the extractor: the deepest element and
//! the most nodes its HTML parse builds, and the time its extraction takes
//! (`extract_max_depth`, `extract_max_nodes`, `extract_timeout`), plus a
//! flag the worker raises when it stops and abandons the page.
//!
//! Why the parse needs a bound of its own: html5ever's tree builder looks
//! through its stack of open elements for most tags it sees ("is there a
//! `<p>` in button scope?"), so a page of n nested elements costs n² steps
//! (100,000 nested `<div>`s took 26 s, 200,000 over 100 s), and it has no
//! option to stop. So the page is fed to it in slices, and after each
//! slice the tree built so far is measured (its node count, and the depth
//! of the element created last, which is where the parser is inserting);
//! past a limit, or past the time, the parse stops there and the page is
//! extracted as far as it was read. Browsers stop nesting at 512 too
//! (Blink's parser); real pages rarely go beyond 100–200. An element with
//! too many attributes costs the parser n² steps too; the page is scanned
//! for it before the parse, and the parse stops before its tag
//! ([`super::attributes`]).
//!
//! The clock is the one thing here that is not pure: the rest of the
//! extractor reads no clock, so given the same limits it gives the same
//! result, unless time runs out.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use html5ever::driver::{self, ParseOpts};
use html5ever::tendril::{StrTendril, TendrilSink};
use scraper::{Html, HtmlTreeSink};
use serde::Serialize;

use super::attributes;
use crate::settings::Settings;

/// Bytes of a page fed to the parser between two looks at the tree: small
/// enough that a slice of nested tags (about 200 of them) adds little to
/// the depth, large enough that the look costs nothing next to the parse.
const SLICE: usize = 1024;

/// Why a page was extracted only in part (the label of its
/// `extract/cut_short_reason_count/<reason>` stat).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CutShort {
    /// An element deeper than `extract_max_depth`.
    Depth,
    /// More nodes than `extract_max_nodes`.
    Nodes,
    /// An element with more attributes than
    /// [`super::attributes::MAX_ATTRIBUTES`].
    Attributes,
    /// The extraction took longer than `extract_timeout`.
    Time,
    /// The worker stopped and abandoned the page (its lease goes back to
    /// the queue; nothing of it is committed).
    Stopped,
}

impl CutShort {
    pub fn as_str(self) -> &'static str {
        match self {
            CutShort::Depth => "depth",
            CutShort::Nodes => "nodes",
            CutShort::Attributes => "attributes",
            CutShort::Time => "time",
            CutShort::Stopped => "stopped",
        }
    }
}

/// The limits one page's extraction runs within, and its clock.
#[derive(Debug, Clone)]
pub struct Budget {
    /// Deepest element the parse builds (0: no limit).
    max_depth: usize,
    /// Most nodes the parse builds (0: no limit).
    max_nodes: usize,
    /// When the time is up (none: no limit).
    deadline: Option<Instant>,
    /// Raised when the worker abandons the page.
    stop: Option<Arc<AtomicBool>>,
}

impl Budget {
    /// No limit at all (fixtures, tools).
    pub fn unlimited() -> Budget {
        Budget {
            max_depth: 0,
            max_nodes: 0,
            deadline: None,
            stop: None,
        }
    }

    /// The spider's limits, its time counted from now; `stop`, once
    /// raised, ends the extraction at its next look.
    pub fn new(settings: &Settings, stop: Option<Arc<AtomicBool>>) -> Budget {
        let time = settings.extract_timeout;
        Budget {
            max_depth: settings.extract_max_depth as usize,
            max_nodes: settings.extract_max_nodes as usize,
            deadline: (!time.is_zero()).then(|| Instant::now() + time),
            stop,
        }
    }

    /// Why the extraction must stop now, if it must: the worker stopped,
    /// or the time is up.
    pub fn spent(&self) -> Option<CutShort> {
        if self
            .stop
            .as_ref()
            .is_some_and(|s| s.load(Ordering::Relaxed))
        {
            return Some(CutShort::Stopped);
        }
        match self.deadline {
            Some(d) if Instant::now() >= d => Some(CutShort::Time),
            _ => None,
        }
    }

    /// Why the parse must stop, from the tree it built so far.
    fn exceeded(&self, html: &Html) -> Option<CutShort> {
        let mut nodes = html.tree.nodes();
        if self.max_nodes > 0 && nodes.len() > self.max_nodes {
            return Some(CutShort::Nodes);
        }
        if self.max_depth > 0 {
            // The document node is not an element: its children are at depth 1.
            let depth = nodes.next_back().map_or(0, |n| n.ancestors().count());
            if depth > self.max_depth {
                return Some(CutShort::Depth);
            }
        }
        self.spent()
    }
}

/// What [`parse_document`] read of a page.
pub struct Parsed {
    pub html: Html,
    /// Set when the parse stopped before the end of the page.
    pub cut_short: Option<CutShort>,
}

/// Parses an HTML document as [`Html::parse_document`] does, stopping
/// where the budget says, or before a tag that gives an element too many
/// attributes (see the module doc).
pub fn parse_document(text: &str, budget: &Budget) -> Parsed {
    let mut parser = driver::parse_document(
        HtmlTreeSink::new(Html::new_document()),
        ParseOpts::default(),
    );
    let crowded = attributes::first_crowded_tag(text, attributes::MAX_ATTRIBUTES);
    let text = &text[..crowded.unwrap_or(text.len())];
    let mut at = 0;
    let mut cut_short = None;
    while at < text.len() {
        let mut end = (at + SLICE).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        parser.process(StrTendril::from_slice(&text[at..end]));
        at = end;
        if at < text.len() {
            cut_short = budget.exceeded(&parser.tokenizer.sink.sink.0.borrow());
            if cut_short.is_some() {
                break;
            }
        }
    }
    Parsed {
        html: parser.finish(),
        cut_short: cut_short.or(crowded.map(|_| CutShort::Attributes)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(depth: usize, nodes: usize) -> Budget {
        Budget {
            max_depth: depth,
            max_nodes: nodes,
            ..Budget::unlimited()
        }
    }

    fn nested(n: usize) -> String {
        format!(
            "<html><body>{}<a href=\"/x\">x</a>{}</body></html>",
            "<div>".repeat(n),
            "</div>".repeat(n)
        )
    }

    #[test]
    fn a_page_within_the_limits_parses_as_in_one_piece() {
        // Slices end inside tags, character references and multi-byte
        // characters; the tree is the same.
        let mut page = String::from("<html><head><title>Caf&eacute; &amp; ü</title></head><body>");
        for i in 0..2000 {
            page.push_str(&format!(
                "<div class=\"c{i}\"><p>é &#233; &eacute {i}<a href=\"/p/{i}?a=1&amp;b=2\">l</a></div>\r\n"
            ));
        }
        page.push_str("<table><tr><td>x</table></body></html>");
        let parsed = parse_document(&page, &limits(512, 1_000_000));
        assert_eq!(parsed.cut_short, None);
        assert_eq!(parsed.html.html(), Html::parse_document(&page).html());
    }

    #[test]
    fn nesting_past_the_depth_limit_stops_the_parse_near_it() {
        let parsed = parse_document(&nested(20_000), &limits(512, 0));
        assert_eq!(parsed.cut_short, Some(CutShort::Depth));
        let deepest = parsed
            .html
            .tree
            .nodes()
            .map(|n| n.ancestors().count())
            .max()
            .unwrap_or(0);
        // One slice past the limit at most (a slice holds ~200 tags).
        assert!((512..512 + 300).contains(&deepest), "{deepest}");
        let within = parse_document(&nested(400), &limits(512, 0));
        assert_eq!(within.cut_short, None);
    }

    #[test]
    fn too_many_nodes_stop_the_parse() {
        let page = "<p>x</p>".repeat(10_000);
        let parsed = parse_document(&page, &limits(0, 1000));
        assert_eq!(parsed.cut_short, Some(CutShort::Nodes));
        assert!(parsed.html.tree.nodes().len() < 1500);
    }

    /// A page with one `<div>` of `n` distinct attributes between two
    /// paragraphs.
    fn crowded(n: usize) -> String {
        let names: Vec<String> = (0..n).map(|i| format!("a{i}")).collect();
        format!(
            "<p class=\"before\">b</p><div {}>x</div><p class=\"after\">a</p>",
            names.join(" ")
        )
    }

    #[test]
    fn an_element_with_too_many_attributes_stops_the_parse_before_it() {
        let parsed = parse_document(&crowded(100_000), &Budget::unlimited());
        assert_eq!(parsed.cut_short, Some(CutShort::Attributes));
        let classes: Vec<&str> = parsed
            .html
            .tree
            .nodes()
            .filter_map(|n| n.value().as_element()?.attr("class"))
            .collect();
        assert_eq!(classes, ["before"]);
        let page = crowded(500);
        let whole = parse_document(&page, &Budget::unlimited());
        assert_eq!(whole.cut_short, None);
        assert_eq!(whole.html.html(), Html::parse_document(&page).html());
    }

    #[test]
    fn a_raised_stop_flag_ends_the_parse() {
        let stop = Arc::new(AtomicBool::new(true));
        let budget = Budget {
            stop: Some(stop),
            ..Budget::unlimited()
        };
        let parsed = parse_document(&nested(5000), &budget);
        assert_eq!(parsed.cut_short, Some(CutShort::Stopped));
        assert_eq!(budget.spent(), Some(CutShort::Stopped));
    }

    #[test]
    fn time_runs_out() {
        let budget = Budget {
            deadline: Some(Instant::now()),
            ..Budget::unlimited()
        };
        assert_eq!(budget.spent(), Some(CutShort::Time));
        assert_eq!(Budget::unlimited().spent(), None);
    }
}
