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

/// The body, unpacked if it is gzip (its magic bytes say so), up to
/// `limit` bytes; `None` when it is gzip and broken or too large.
pub fn unpack(body: &[u8], limit: u64) -> Option<std::borrow::Cow<'_, [u8]>> {
    if !body.starts_with(&[0x1f, 0x8b]) {
        return Some(body.into());
    }
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(body)
        .take(limit.saturating_add(1))
        .read_to_end(&mut out)
        .ok()?;
    (out.len() as u64 <= limit).then_some(out.into())
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

/// The pages and sitemaps a sitemap lists. Unknown elements are ignored;
/// an XML error ends the list where it happened.
pub fn sitemap(xml: &[u8]) -> Sitemap {
    let mut reader = quick_xml::Reader::from_reader(xml);
    reader.config_mut().trim_text(true);
    let mut out = Sitemap::default();
    let mut buf = Vec::new();
    // The element open now (by local name), the entry being read and its
    // kind, and the text of the element open now.
    let mut path: Vec<String> = Vec::new();
    let mut entry: Option<(bool, Dated)> = None;
    let mut text = String::new();
    loop {
        match reader.read_event_into(&mut buf) {
            Ok(Event::Start(e)) => {
                let name = e.local_name().as_ref().to_string();
                match name.as_str() {
                    "url" => entry = Some((false, empty())),
                    "sitemap" => entry = Some((true, empty())),
                    _ => {}
                }
                path.push(name);
                text.clear();
            }
            Ok(Event::Text(t)) => text.push_str(&t.xml10_content()),
            Ok(Event::CData(c)) => text.push_str(&c),
            Ok(Event::GeneralRef(r)) => {
                if let Ok(Some(c)) = r.resolve_char_ref() {
                    text.push(c);
                } else if let Some(s) = quick_xml::escape::resolve_xml_entity(&r) {
                    text.push_str(s);
                }
            }
            Ok(Event::End(_)) => {
                let name = path.pop().unwrap_or_default();
                match (name.as_str(), entry.as_mut()) {
                    ("loc", Some((_, d))) => d.url = text.trim().to_string(),
                    // A news sitemap's publication date stands in for lastmod.
                    ("lastmod" | "publication_date", Some((_, d))) => {
                        d.modified = d.modified.or(parse_date(&text));
                    }
                    ("url" | "sitemap", Some(_)) => {
                        if let Some((is_sitemap, d)) = entry.take() {
                            if !d.url.is_empty() {
                                if is_sitemap {
                                    out.sitemaps.push(d);
                                } else {
                                    out.pages.push(d);
                                }
                            }
                        }
                    }
                    _ => {}
                }
                text.clear();
            }
            Ok(Event::Eof) | Err(_) => break,
            Ok(_) => {}
        }
        buf.clear();
    }
    out
}

fn empty() -> Dated {
    Dated {
        url: String::new(),
        modified: None,
    }
}

/// The links of an RSS, Atom or JSON feed's entries: each entry's first
/// link (Atom's `alternate` first), with its update (else publication)
/// time. Nothing when it is not a feed.
pub fn feed(body: &[u8]) -> Vec<Dated> {
    let Ok(feed) = feed_rs::parser::parse(body) else {
        return Vec::new();
    };
    feed.entries
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
        .collect()
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
        let s = sitemap(xml);
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
        assert_eq!(sitemap(index).sitemaps.len(), 1);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, xml).unwrap();
        let packed = gz.finish().unwrap();
        assert_eq!(unpack(&packed, 1 << 20).unwrap().as_ref(), xml);
        assert!(unpack(&packed, 100).is_none(), "over the limit");
        assert!(unpack(b"\x1f\x8bnot gzip", 1 << 20).is_none());
    }

    #[test]
    fn rss_and_atom_entries_give_their_links() {
        let rss = br#"<rss version="2.0"><channel><title>t</title>
<item><title>one</title><link>http://127.0.0.1/post/1</link><pubDate>Wed, 01 May 2024 00:00:00 GMT</pubDate></item>
<item><title>two</title><link>http://127.0.0.1/post/2</link></item>
</channel></rss>"#;
        let links = feed(rss);
        assert_eq!(links.len(), 2);
        assert_eq!(links[0].url, "http://127.0.0.1/post/1");
        assert_eq!(links[0].modified, Some(1_714_521_600));
        let atom = br#"<feed xmlns="http://www.w3.org/2005/Atom"><title>t</title><id>x</id><updated>2024-05-01T00:00:00Z</updated>
<entry><title>one</title><id>1</id><updated>2024-05-01T00:00:00Z</updated>
<link rel="replies" href="http://127.0.0.1/comments/1"/><link rel="alternate" href="http://127.0.0.1/post/1"/></entry>
</feed>"#;
        assert_eq!(feed(atom)[0].url, "http://127.0.0.1/post/1");
        assert!(feed(b"<html>not a feed</html>").is_empty());
    }
}
