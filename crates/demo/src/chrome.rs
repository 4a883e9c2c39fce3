//! Page chrome: what a real forum page carries around its content, added
//! to the demo's HTML pages for benchmarks (`crawlworker-demo serve
//! --page-kb 80`). The demo's pages are about 1 KB of content; a real
//! forum's weigh 50–150 KB, most of it a site menu, a sidebar of links,
//! a footer, inline style and script. An HTML parser's cost grows with
//! the bytes and elements of a page, so a benchmark on bare demo pages
//! measures a crawler's cost per request and barely its parse; with
//! chrome, it measures both as a real crawl does.
//!
//! The chrome is the same on every page (a real site's is too), uses no
//! class or element a demo spider selects (`site-`, `side-` and `foot-`
//! classes, links to `/about`), and so changes no item and no followed
//! link. About a fifth of its bytes are the head's style and script, the
//! rest markup with attributes, as in a forum's templates.

/// The chrome for pages of about `kb` KiB more, built once and added to
/// each HTML page by [`Chrome::dress`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Chrome {
    /// Inserted before `</head>`.
    head: String,
    /// Inserted after `<body>`.
    body: String,
}

impl Chrome {
    /// Chrome of about `kb` KiB (0: none).
    pub fn of_kb(kb: usize) -> Chrome {
        if kb == 0 {
            return Chrome::default();
        }
        let bytes = kb * 1024;
        Chrome {
            head: head(bytes / 5),
            body: body(bytes - bytes / 5),
        }
    }

    /// Whether there is any.
    pub fn is_empty(&self) -> bool {
        self.head.is_empty() && self.body.is_empty()
    }

    /// `html` with the chrome in its head and at the start of its body;
    /// a document without them is returned as it is.
    pub fn dress(&self, html: Vec<u8>) -> Vec<u8> {
        if self.is_empty() {
            return html;
        }
        let (Some(head_end), Some(body_start)) = (find(&html, b"</head>"), find(&html, b"<body>"))
        else {
            return html;
        };
        let body_start = body_start + b"<body>".len();
        if body_start < head_end {
            return html;
        }
        let mut out = Vec::with_capacity(html.len() + self.head.len() + self.body.len());
        out.extend_from_slice(&html[..head_end]);
        out.extend_from_slice(self.head.as_bytes());
        out.extend_from_slice(&html[head_end..body_start]);
        out.extend_from_slice(self.body.as_bytes());
        out.extend_from_slice(&html[body_start..]);
        out
    }
}

/// Where `needle` first starts in `haystack` (a demo page is small).
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Inline style and script, half each, of about `bytes`.
fn head(bytes: usize) -> String {
    let mut style = String::from("<style>\n");
    let mut i = 0;
    while style.len() < bytes / 2 {
        style.push_str(&format!(
            ".site-menu-{i} > li.site-item:hover a {{ color: #{:06x}; padding: {}px {}px; border-bottom: 1px solid #ddd; }}\n",
            i * 2_654_435 % 0xff_ffff,
            i % 9,
            i % 13
        ));
        i += 1;
    }
    style.push_str("</style>\n");
    let mut script = String::from("<script>\n");
    while script.len() < bytes - bytes / 2 {
        script.push_str(&format!(
            "window.siteTrack && window.siteTrack.push({{event: 'view', slot: {i}, ok: a < b && b > 0}});\n"
        ));
        i += 1;
    }
    script.push_str("</script>\n");
    style + &script
}

/// A site menu, a sidebar of link lists and a footer, of about `bytes`.
fn body(bytes: usize) -> String {
    let mut menu = String::from("<nav class=\"site-nav\"><ul class=\"site-menu\">");
    for i in 0..24 {
        menu.push_str(&format!(
            "<li class=\"site-item\"><a class=\"site-link\" href=\"/about#section-{i}\" title=\"Section {i}\">Section {i}</a></li>"
        ));
    }
    menu.push_str("</ul></nav>\n");
    let footer = "<footer class=\"foot-note\"><p class=\"foot-text\">Powered by the demo forum. \
        <a class=\"foot-link\" href=\"/about#terms\">Terms</a> · \
        <a class=\"foot-link\" href=\"/about#privacy\">Privacy</a></p></footer>\n";
    let mut side = String::from("<aside class=\"side-bar\">");
    let mut i = 0;
    while menu.len() + side.len() + footer.len() < bytes {
        if i % 20 == 0 {
            if i > 0 {
                side.push_str("</ul></div>");
            }
            side.push_str(&format!(
                "<div class=\"side-box\" id=\"side-box-{i}\"><h3 class=\"side-head\">Around the site</h3><ul class=\"side-list\">"
            ));
        }
        side.push_str(&format!(
            "<li class=\"side-entry\" data-rank=\"{i}\"><a class=\"side-link\" href=\"/about#topic-{i}\" title=\"Topic {i}: what the members talk about\">Topic {i}: what the members talk about</a> <span class=\"side-count\">{} replies</span></li>",
            i * 7 % 311
        ));
        i += 1;
    }
    side.push_str("</ul></div></aside>\n");
    menu + &side + footer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chrome_weighs_what_was_asked_and_goes_in_head_and_body() {
        let chrome = Chrome::of_kb(80);
        let page =
            b"<!DOCTYPE html><html><head><title>t</title></head><body>\n<h1>x</h1></body></html>"
                .to_vec();
        let dressed = chrome.dress(page.clone());
        let added = dressed.len() - page.len();
        assert!((80 * 1024..82 * 1024).contains(&added), "{added}");
        let text = String::from_utf8(dressed).unwrap();
        assert!(text.starts_with("<!DOCTYPE html><html><head><title>t</title><style>"));
        assert!(text.contains("</script>\n</head><body><nav class=\"site-nav\">"));
        assert!(text.ends_with("</footer>\n\n<h1>x</h1></body></html>"));
    }

    #[test]
    fn chrome_has_nothing_a_spider_selects() {
        // Only classes of its own and links to /about (never followed):
        // the demo spiders select by class, so items and links stay.
        let chrome = Chrome::of_kb(20);
        let page = chrome.dress(b"<html><head></head><body></body></html>".to_vec());
        let html = scraper::Html::parse_document(&String::from_utf8(page).unwrap());
        let mut elements = 0;
        for e in html
            .root_element()
            .descendants()
            .filter_map(scraper::ElementRef::wrap)
        {
            elements += 1;
            for class in e.value().classes() {
                assert!(
                    ["site-", "side-", "foot-"]
                        .iter()
                        .any(|p| class.starts_with(p)),
                    "{class}"
                );
            }
            if let Some(href) = e.value().attr("href") {
                assert!(href.starts_with("/about#"), "{href}");
            }
            assert!(!["h1", "time", "table", "form"].contains(&e.value().name()));
        }
        assert!(elements > 200, "{elements}");
    }

    #[test]
    fn no_chrome_or_no_head_leaves_the_page_alone() {
        let page = b"<html><body>x</body></html>".to_vec();
        assert_eq!(Chrome::of_kb(0).dress(page.clone()), page);
        assert_eq!(Chrome::of_kb(10).dress(page.clone()), page);
        assert_eq!(
            Chrome::of_kb(10).dress(b"{\"json\": 1}".to_vec()),
            b"{\"json\": 1}"
        );
    }
}
