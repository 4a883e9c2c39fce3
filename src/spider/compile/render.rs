//! A rule's `render`: `true`, or a table of when its pages count as ready
//! (`wait`, `wait_for`), how long they may take (`timeout`), what they
//! never load (`block`) and how often they are scrolled (`scroll`).

use super::Compiler;
use crate::reader::At;
use crate::settings;
use crate::spider::file::RenderFile;
use crate::spider::render::{Render, Resource, Wait, MAX_RENDER_TIMEOUT, MAX_SCROLLS};

impl Compiler<'_> {
    /// `Some(None)` for a rule that does not render, `None` on a problem.
    pub(super) fn render(&self, file: Option<&RenderFile>) -> Option<Option<Render>> {
        let Some(file) = file.filter(|f| f.on) else {
            return Some(None);
        };
        let defaults = Render::default();
        let wait = file
            .wait
            .as_ref()
            .map_or(Some(defaults.wait), |w| self.wait(w));
        let wait_for = match &file.wait_for {
            Some(css) => self.wait_for(css).map(Some),
            None => Some(None),
        };
        let timeout = file
            .timeout
            .as_ref()
            .map_or(Some(defaults.timeout), |t| self.render_timeout(t));
        let block = match &file.block {
            Some(list) => list.iter().map(|b| self.resource(b)).collect(),
            None => Some(defaults.block),
        };
        let scroll = file.scroll.as_ref().map_or(Some(0), |s| self.scrolls(s));
        Some(Some(Render {
            wait: wait?,
            wait_for: wait_for?,
            timeout: timeout?,
            block: block?,
            scroll: scroll?,
        }))
    }

    fn wait(&self, at: &At<String>) -> Option<Wait> {
        let found = Wait::NAMES.iter().find(|(name, _)| *name == at.value);
        if found.is_none() {
            self.problem(
                &at.loc,
                format!("`{}` is not a way to wait for a rendered page", at.value),
                "write \"load\" (the page's load event) or \"network-idle\" (then nothing in flight for 500 ms, the default)",
            );
        }
        found.map(|(_, wait)| *wait)
    }

    /// `wait_for`: kept as written (Chromium runs it), checked here.
    fn wait_for(&self, at: &At<String>) -> Option<String> {
        if at.value.contains("::") || scraper::Selector::parse(&at.value).is_err() {
            self.problem(
                &at.loc,
                format!("`{}` is not a CSS selector of an element", at.value),
                "name the element the page's script writes, e.g. \"div.comments\" or \"#content h1\" (no ::text or ::attr here)",
            );
            return None;
        }
        Some(at.value.clone())
    }

    fn render_timeout(&self, at: &At<String>) -> Option<std::time::Duration> {
        match settings::parse_duration(&at.value) {
            Ok(t) if !t.is_zero() && t <= MAX_RENDER_TIMEOUT => Some(t),
            Ok(_) => {
                self.problem(
                    &at.loc,
                    format!("a render timeout of `{}` is out of range", at.value),
                    format!(
                        "give a page between 1ms and {} to render, e.g. \"30s\" (the default)",
                        humantime::format_duration(MAX_RENDER_TIMEOUT)
                    ),
                );
                None
            }
            Err(e) => {
                self.problem(&at.loc, e, "write e.g. \"30s\" or \"1m\"");
                None
            }
        }
    }

    fn resource(&self, at: &At<String>) -> Option<Resource> {
        let found = Resource::NAMES.iter().find(|(name, _)| *name == at.value);
        if found.is_none() {
            let names: Vec<&str> = Resource::NAMES.iter().map(|(n, _)| *n).collect();
            self.problem(
                &at.loc,
                format!(
                    "`{}` is not a kind of resource a page can be kept from loading",
                    at.value
                ),
                format!("choose among {}; [] loads everything", names.join(", ")),
            );
        }
        found.map(|(_, r)| *r)
    }

    fn scrolls(&self, at: &At<i64>) -> Option<u32> {
        match u32::try_from(at.value) {
            Ok(n) if n <= MAX_SCROLLS => Some(n),
            _ => {
                self.problem(
                    &at.loc,
                    format!("`scroll = {}` is out of range", at.value),
                    format!("scroll a page 0 to {MAX_SCROLLS} times to its end"),
                );
                None
            }
        }
    }
}
