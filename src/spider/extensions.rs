//! The file extensions a follow entry does not follow: Scrapy's list by
//! default, or the entry's own `deny_extensions`, and how a link is checked
//! against them (as Scrapy's link extractor does: the end of the URL's
//! path, any case, the query and fragment left out).
//!
//! This module owns the list and the match; counting a skipped link is
//! [`crate::extract::links`]'s, reading `deny_extensions` from the file is
//! [`super::compile`]'s.

/// The extensions Scrapy's `LinkExtractor` skips by default: the value of
/// `scrapy.linkextractors.IGNORED_EXTENSIONS` in Scrapy 2.19.0, as that
/// version prints it (91 entries, in its order), kept here as data so a
/// spider migrated from Scrapy follows the same links.
#[rustfmt::skip]
pub const SCRAPY_IGNORED: &[&str] = &[
    // archives
    "7z", "7zip", "bz2", "rar", "tar", "tar.gz", "xz", "zip",
    // images
    "mng", "pct", "bmp", "gif", "jpg", "jpeg", "png", "pst", "psp", "tif", "tiff", "ai", "drw",
    "dxf", "eps", "ps", "svg", "cdr", "ico", "webp",
    // audio
    "mp3", "wma", "ogg", "wav", "ra", "aac", "mid", "au", "aiff",
    // video
    "3gp", "asf", "asx", "avi", "mov", "mp4", "mpg", "qt", "rm", "swf", "wmv", "m4a", "m4v",
    "flv", "webm",
    // office suites
    "xls", "xlsm", "xlsx", "xltm", "xltx", "potm", "potx", "ppt", "pptm", "pptx", "pps", "doc",
    "docb", "docm", "docx", "dotm", "dotx", "odt", "ods", "odg", "odp",
    // other
    "css", "pdf", "exe", "bin", "rss", "dmg", "iso", "apk", "jar", "sh", "rb", "js", "hta",
    "bat", "cpl", "msi", "msp", "py",
];

/// The extensions one follow entry does not follow, each kept as the
/// path ending it denies (`.pdf`), lower case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DenyExtensions {
    endings: Vec<String>,
}

impl Default for DenyExtensions {
    /// Scrapy's list.
    fn default() -> Self {
        DenyExtensions::new(SCRAPY_IGNORED.iter().copied())
    }
}

impl DenyExtensions {
    /// The given extensions, written with or without their dot, any case.
    pub fn new<'a>(extensions: impl IntoIterator<Item = &'a str>) -> Self {
        let endings = extensions
            .into_iter()
            .map(|e| format!(".{}", e.trim_start_matches('.').to_ascii_lowercase()))
            .collect();
        DenyExtensions { endings }
    }

    /// No extension denied: every link is followed, whatever it ends with.
    pub fn none() -> Self {
        DenyExtensions {
            endings: Vec::new(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.endings.is_empty()
    }

    /// Whether the path of `url` ends with one of the extensions. As in
    /// Scrapy, the path is read as Python's `urlparse` reads it: without
    /// the query, the fragment and the `;parameters` of its last segment,
    /// compared in lower case (`/logo.PNG?x=1` ends with `.png`).
    pub fn denies(&self, url: &url::Url) -> bool {
        if self.endings.is_empty() {
            return false;
        }
        let path = url.path();
        let last_segment = path.rfind('/').map_or(0, |i| i + 1);
        let path = match path[last_segment..].find(';') {
            Some(i) => &path[..last_segment + i],
            None => path,
        };
        let path = path.to_ascii_lowercase();
        self.endings.iter().any(|e| path.ends_with(e.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn denied(list: &DenyExtensions, url: &str) -> bool {
        list.denies(&url::Url::parse(url).unwrap())
    }

    #[test]
    fn scrapys_list_has_its_91_entries_once_each() {
        let mut seen = std::collections::HashSet::new();
        assert!(SCRAPY_IGNORED.iter().all(|e| seen.insert(*e)));
        assert_eq!(SCRAPY_IGNORED.len(), 91);
    }

    #[test]
    fn the_path_ending_counts_in_any_case_without_query_or_fragment() {
        let scrapy = DenyExtensions::default();
        for url in [
            "http://h/a/report.pdf",
            "http://h/logo.PNG?x=1",
            "http://h/x.py#top",
            "http://h/dist/app.tar.gz",
            "http://h/f.zip;jsessionid=1",
        ] {
            assert!(denied(&scrapy, url), "{url}");
        }
        for url in [
            "http://h/page.html",
            "http://h/view?file=a.pdf",
            "http://h/a.pdf/",
            "http://h/apdf",
            "http://h/a;x.pdf/b",
            "http://h/",
        ] {
            assert!(!denied(&scrapy, url), "{url}");
        }
    }

    #[test]
    fn a_list_of_its_own_replaces_scrapys() {
        let own = DenyExtensions::new([".PDF", "epub"]);
        assert!(denied(&own, "http://h/a.pdf") && denied(&own, "http://h/b.EPUB"));
        assert!(!denied(&own, "http://h/c.png"));
        assert!(!denied(&DenyExtensions::none(), "http://h/c.png"));
    }
}
