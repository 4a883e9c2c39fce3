//! Links of sitemaps and feeds, for follow entries with `sitemap = true` or
//! `feed = true`: the `<loc>` of a sitemap's pages (with their `lastmod`,
//! or a news sitemap's publication date) and of a sitemap index's
//! sitemaps; the links of an RSS or Atom feed's entries (with their update
//! time). A gzip-compressed sitemap (`sitemap.xml.gz`, served as is) is
//! unpacked first, up to `download_maxsize`.

use std::io::Read;

use quick_xml::events::Event;

/// A link and when its page last changed, if the source says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dated {
    pub url: String,
    /// Seconds since the Unix epoch.
    pub modified: Option<i64>,
}

/// What a sitemap lists: pages (`<urlset>`) or other sitemaps
/// (`<sitemapindex>`).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Sitemap {
    pub pages: Vec<Dated>,
    pub sitemaps: Vec<Dated>,
}

/// Why a sitemap, a feed or a JSON document gave nothing (or less than it
/// holds): it is recorded with the page as a failure, with this reason.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Unreadable {
    /// For machines and the stats: `too_large`, `broken_gzip`, `malformed`,
    /// `not_a_sitemap`, `not_a_feed` or `not_json`.
    pub kind: &'static str,
    /// For people: what was wrong, and where.
    pub reason: String,
}

impl Unreadable {
    pub fn new(kind: &'static str, reason: impl Into<String>) -> Unreadable {
        Unreadable {
            kind,
            reason: reason.into(),
        }
    }
}

/// The body, unpacked if it is gzip (its magic bytes say so), up to
/// `limit` bytes; why not when it is gzip and broken or unpacks to more.
pub fn unpack(body: &[u8], limit: u64) -> Result<std::borrow::Cow<'_, [u8]>, Unreadable> {
    if !body.starts_with(&[0x1f, 0x8b]) {
        return Ok(body.into());
    }
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(body)
        .take(limit.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|e| Unreadable::new("broken_gzip", format!("the gzip body is broken: {e}")))?;
    if out.len() as u64 > limit {
        return Err(Unreadable::new(
            "too_large",
            format!(
                "the gzip body unpacks to more than download_maxsize ({limit} bytes); nothing of it was read (raise download_maxsize for this spider to read it)"
            ),
        ));
    }
    Ok(out.into())
}

/// A W3C datetime (`2024-05-01`, `2024-05-01T10:00:00+02:00`, …) or an
/// RFC 2822 date, as seconds since the epoch.
pub fn parse_date(text: &str) -> Option<i64> {
    let text = text.trim();
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(text) {
        return Some(t.timestamp());
    }
    if let Ok(t) = chrono::DateTime::parse_from_rfc2822(text) {
        return Some(t.timestamp());
    }
    // W3C datetime without seconds (`Z` or an offset), or a date alone.
    let zoned = match text.strip_suffix('Z') {
        Some(rest) => format!("{rest}+00:00"),
        None => text.to_string(),
    };
    if let Ok(t) = chrono::DateTime::parse_from_str(&zoned, "%Y-%m-%dT%H:%M%:z") {
        return Some(t.timestamp());
    }
    chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc().timestamp())
}

/// The pages and sitemaps a sitemap lists, and why the list is not whole
/// when it is not: the document is not a sitemap (its root is neither
/// `<urlset>` nor `<sitemapindex>`), or it breaks off (an XML error, or
/// its end before the root closes), where the entries read before stay.
/// Unknown elements are ignored.
pub fn sitemap(xml: &[u8]) -> (Sitemap, Option<Unreadable>) {
    let mut reader = quick_xml::Reader::from_reader(xml);
    reader.config_mut().trim_text(true);
    let mut read = SitemapReader::default();
    let mut buf = Vec::new();
    let error = loop {
        match reader.read_event_into(&mut buf) {
            Ok(Event::Start(e)) => {
                if let Err(e) = read.start(e.local_name().as_ref()) {
                    break Some(e);
                }
            }
            Ok(Event::Text(t)) => read.text.push_str(&t.xml10_content()),
            Ok(Event::CData(c)) => read.text.push_str(&c),
            Ok(Event::GeneralRef(r)) => {
                if let Ok(Some(c)) = r.resolve_char_ref() {
                    read.text.push(c);
                } else if let Some(s) = quick_xml::escape::resolve_xml_entity(&r) {
                    read.text.push_str(s);
                }
            }
            Ok(Event::End(_)) => read.end(),
            Ok(Event::Eof) => break read.unfinished(),
            Err(e) => break Some(broken_off(&read.out, reader.error_position(), &e)),
            Ok(_) => {}
        }
        buf.clear();
    };
    (read.out, error)
}

/// A sitemap read so far: the element open now (by local name), the entry
/// being read and its kind, and the text of the element open now.
#[derive(Default)]
struct SitemapReader {
    out: Sitemap,
    path: Vec<String>,
    entry: Option<(bool, Dated)>,
    text: String,
    root_seen: bool,
}

impl SitemapReader {
    fn start(&mut self, name: &str) -> Result<(), Unreadable> {
        let name = name.to_string();
        if !self.root_seen {
            self.root_seen = true;
            if name != "urlset" && name != "sitemapindex" {
                return Err(Unreadable::new(
                    "not_a_sitemap",
                    format!("the response is not a sitemap: its root element is <{name}>, not <urlset> or <sitemapindex>"),
                ));
            }
        }
        match name.as_str() {
            "url" => self.entry = Some((false, empty())),
            "sitemap" => self.entry = Some((true, empty())),
            _ => {}
        }
        self.path.push(name);
        self.text.clear();
        Ok(())
    }

    fn end(&mut self) {
        let name = self.path.pop().unwrap_or_default();
        match (name.as_str(), self.entry.as_mut()) {
            ("loc", Some((_, d))) => d.url = self.text.trim().to_string(),
            // A news sitemap's publication date stands in for lastmod.
            ("lastmod" | "publication_date", Some((_, d))) => {
                d.modified = d.modified.or(parse_date(&self.text));
            }
            ("url" | "sitemap", Some(_)) => {
                if let Some((is_sitemap, d)) = self.entry.take() {
                    if !d.url.is_empty() {
                        match is_sitemap {
                            true => self.out.sitemaps.push(d),
                            false => self.out.pages.push(d),
                        }
                    }
                }
            }
            _ => {}
        }
        self.text.clear();
    }

    /// Why the document ended too soon, if it did.
    fn unfinished(&self) -> Option<Unreadable> {
        if !self.root_seen {
            return Some(Unreadable::new(
                "not_a_sitemap",
                "the response is not a sitemap: it holds no XML element",
            ));
        }
        (!self.path.is_empty()).then(|| {
            Unreadable::new(
                "malformed",
                format!(
                    "the sitemap ends before </{}> closes (cut off?); {} read before",
                    self.path[0],
                    entries(&self.out)
                ),
            )
        })
    }
}

/// Why a sitemap broke off at `at`, with what was read before.
fn broken_off(read: &Sitemap, at: u64, e: &quick_xml::Error) -> Unreadable {
    Unreadable::new(
        "malformed",
        format!(
            "the sitemap is not well-formed XML at byte {at}: {e}; {} read before",
            entries(read)
        ),
    )
}

/// "3 entries", for people.
fn entries(read: &Sitemap) -> String {
    match read.pages.len() + read.sitemaps.len() {
        1 => "1 entry".to_string(),
        n => format!("{n} entries"),
    }
}

fn empty() -> Dated {
    Dated {
        url: String::new(),
        modified: None,
    }
}

/// The links of an RSS, Atom or JSON feed's entries: each entry's first
/// link (Atom's `alternate` first), with its update (else publication)
/// time; why not when the body is not a feed (or a cut-off one).
pub fn feed(body: &[u8]) -> Result<Vec<Dated>, Unreadable> {
    let feed = feed_rs::parser::parse(body).map_err(|e| {
        let kind = match e {
            feed_rs::parser::ParseFeedError::ParseError(_) => "not_a_feed",
            _ => "malformed",
        };
        Unreadable::new(kind, format!("the response is not a readable feed: {e}"))
    })?;
    Ok(feed
        .entries
        .iter()
        .filter_map(|entry| {
            let link = entry
                .links
                .iter()
                .find(|l| l.rel.as_deref().is_none_or(|r| r == "alternate"))
                .or_else(|| entry.links.first())?;
            Some(Dated {
                url: link.href.clone(),
                modified: entry.updated.or(entry.published).map(|t| t.timestamp()),
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sitemaps_indexes_news_and_gzip_are_read() {
        let xml = br#"<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"
        xmlns:news="http://www.google.com/schemas/sitemap-news/0.9">
  <url><loc>http://127.0.0.1/a?x=1&amp;y=2</loc><lastmod>2024-05-01</lastmod></url>
  <url><loc> http://127.0.0.1/b </loc><lastmod>2024-05-01T10:00:00+02:00</lastmod></url>
  <url><loc>http://127.0.0.1/c</loc>
    <news:news><news:publication_date>2024-05-02T00:00Z</news:publication_date></news:news></url>
  <url><lastmod>2024-05-01</lastmod></url>
</urlset>"#;
        let (s, error) = sitemap(xml);
        assert_eq!(error, None);
        assert_eq!(
            s.pages,
            vec![
                Dated {
                    url: "http://127.0.0.1/a?x=1&y=2".into(),
                    modified: Some(1_714_521_600)
                },
                Dated {
                    url: "http://127.0.0.1/b".into(),
                    modified: Some(1_714_550_400)
                },
                Dated {
                    url: "http://127.0.0.1/c".into(),
                    modified: parse_date("2024-05-02T00:00:00Z")
                },
            ]
        );
        let index = br#"<sitemapindex><sitemap><loc>http://127.0.0.1/s1.xml.gz</loc></sitemap></sitemapindex>"#;
        assert_eq!(sitemap(index).0.sitemaps.len(), 1);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, xml).unwrap();
        let packed = gz.finish().unwrap();
        assert_eq!(unpack(&packed, 1 << 20).unwrap().as_ref(), xml);
        assert_eq!(unpack(&packed, 100).unwrap_err().kind, "too_large");
        assert_eq!(
            unpack(b"\x1f\x8bnot gzip", 1 << 20).unwrap_err().kind,
            "broken_gzip"
        );
    }

    #[test]
    fn rss_and_atom_entries_give_their_links() {
        let rss = br#"<rss version="2.0"><channel><title>t</title>
<item><title>one</title><link>http://127.0.0.1/post/1</link><pubDate>Wed, 01 May 2024 00:00:00 GMT</pubDate></item>
<item><title>two</title><link>http://127.0.0.1/post/2</link></item>
</channel></rss>"#;
        let links = feed(rss).unwrap();
        assert_eq!(links.len(), 2);
        assert_eq!(links[0].url, "http://127.0.0.1/post/1");
        assert_eq!(links[0].modified, Some(1_714_521_600));
        let atom = br#"<feed xmlns="http://www.w3.org/2005/Atom"><title>t</title><id>x</id><updated>2024-05-01T00:00:00Z</updated>
<entry><title>one</title><id>1</id><updated>2024-05-01T00:00:00Z</updated>
<link rel="replies" href="http://127.0.0.1/comments/1"/><link rel="alternate" href="http://127.0.0.1/post/1"/></entry>
</feed>"#;
        assert_eq!(feed(atom).unwrap()[0].url, "http://127.0.0.1/post/1");
    }

    #[test]
    fn what_is_not_a_whole_sitemap_or_feed_says_why() {
        let cut = b"<urlset><url><loc>http://127.0.0.1/a</loc></url><url><loc>http://127.0";
        let (s, error) = sitemap(cut);
        assert_eq!(s.pages.len(), 1, "what came before the cut stays");
        let error = error.unwrap();
        assert_eq!(error.kind, "malformed");
        assert!(error.reason.contains("ends before </urlset>"), "{error:?}");
        assert!(error.reason.contains("1 entry read before"), "{error:?}");
        let broken = b"<urlset><url><loc>http://127.0.0.1/a</loc></url></url></urlset>";
        let error = sitemap(broken).1.unwrap();
        assert!(
            error.reason.contains("not well-formed XML at byte"),
            "{error:?}"
        );
        for garbage in [
            &b"<html><body>a page</body></html>"[..],
            b"\x00\x01 binary",
            b"",
        ] {
            let (s, error) = sitemap(garbage);
            assert_eq!(s, Sitemap::default());
            assert_eq!(error.map(|e| e.kind), Some("not_a_sitemap"));
        }
        let cut_rss = br#"<rss version="2.0"><channel><title>t</title>
<item><title>one</title><link>http://127.0.0.1/post/1</link></item>
<item><title>two</title><link>http://127.0"#;
        assert!(feed(cut_rss).is_err(), "a cut-off feed is not whole");
        for garbage in [&b"<html>not a feed</html>"[..], b"\x00\x01 binary", b"{}"] {
            let error = feed(garbage).unwrap_err();
            assert!(error
                .reason
                .starts_with("the response is not a readable feed"));
        }
    }
}
