//! The demo site's news section: a fixed model of fifteen articles
//! ([`News::demo`]) and its pages ([`page`]), crawled by `spiders/news.toml`.
//!
//! It is a different shape from the forum: no start tasks, only plain start
//! URLs; a section front paged with a query (`/news/?page=2`) whose "older"
//! link is a query-only relative href (`?page=2`); article pages whose lead
//! image and related links are relative to the article's own URL; and tag
//! pages a spider should not follow. Everything is UTF-8. Routes:
//!
//! - `/news/` and `/news/?page=N`: the front, [`ARTICLES_PER_FRONT_PAGE`]
//!   teasers per page, newest first (`?page=1` is page 1 too; other query
//!   parameters are ignored);
//! - `/news/{yyyy}/{mm}/{slug}.html`: an article (query ignored);
//! - `/news/tag/{tag}`: the teasers of every article with that tag;
//! - anything else under `/news/`, a page number past either end or not
//!   canonical (`?page=02`), an unknown slug or tag: not handled here, so
//!   the caller answers 404. Lead images are named but not served.
//!
//! Like [`super::pages`], the markup is a contract the example spider's
//! selectors are written against. Article pages also carry their metadata
//! as news sites do, for spiders that read it instead of the markup: a
//! JSON-LD `@graph` (a `WebSite` and a `NewsArticle` with its authors as
//! `Person` objects and its lead image as an `ImageObject`) and OpenGraph
//! `<meta>` properties ([`Article::authors`] lists the authors). This module
//! owns no I/O.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use super::pages::{escape, Page, UTF8_HTML};
use super::site::{Inline, Paragraph};

/// Teasers on one page of the section front.
pub const ARTICLES_PER_FRONT_PAGE: usize = 5;

/// The path of the section front.
pub const FRONT_PATH: &str = "/news/";

/// The path prefix of tag pages; the tag follows it.
pub const TAG_PATH: &str = "/news/tag/";

/// The paper's name, in every page title.
const MASTHEAD: &str = "The Demo Gazette";

/// One article.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Article {
    /// Lowercase ASCII letters, digits and `-`; unique, and the last part of
    /// the article's URL.
    pub slug: String,
    /// The desk that wrote it; the page says it in
    /// `<meta property="article:section">`. Related links point to the
    /// other articles of the same section.
    pub section: String,
    /// May contain `&`, `<`, `"` and `'`, which the pages escape.
    pub headline: String,
    /// One sentence: the teaser text and the article's standfirst.
    pub summary: String,
    /// The author names; the page shows them as `By {byline}`.
    pub byline: String,
    /// ISO 8601 in UTC, e.g. `"2026-03-20T09:15:00Z"`; its year and month
    /// are in the article's URL.
    pub published: String,
    /// Tag names (URL-safe), in page order; may be empty.
    pub tags: Vec<String>,
    /// The lead image's `src`, relative to the article's URL; `None` for
    /// articles without one.
    pub image: Option<String>,
    /// The body, one entry per `<p>`.
    pub body: Vec<Paragraph>,
}

impl Article {
    /// `/news/{yyyy}/{mm}/{slug}.html`.
    pub fn path(&self) -> String {
        let (year, month) = self.year_month();
        format!("/news/{year}/{month}/{}.html", self.slug)
    }

    /// The path the lead image's relative `src` resolves to, e.g.
    /// `/news/2026/03/img/{slug}.jpg`.
    pub fn image_path(&self) -> Option<String> {
        let (year, month) = self.year_month();
        let src = self.image.as_deref()?;
        Some(format!("/news/{year}/{month}/{src}"))
    }

    /// The text of the whole body exactly as an HTML parser sees it inside
    /// `div.article-body`: each paragraph's text, joined by the `"\n"` text
    /// node between the `<p>` elements. It is what joining every
    /// `div.article-body ::text` node with `""` gives.
    pub fn body_text(&self) -> String {
        let texts: Vec<String> = self.body.iter().map(Paragraph::text).collect();
        texts.join("\n")
    }

    /// The author names of the byline ("Maya Okafor and Tom Ng" is two),
    /// as the page's JSON-LD lists them.
    pub fn authors(&self) -> Vec<&str> {
        self.byline
            .split(" and ")
            .flat_map(|s| s.split(", "))
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect()
    }

    /// The article's JSON-LD and OpenGraph properties, for its `<head>`.
    fn metadata(&self) -> String {
        let authors: Vec<serde_json::Value> = self
            .authors()
            .into_iter()
            .map(|name| serde_json::json!({"@type": "Person", "name": name}))
            .collect();
        let mut article = serde_json::json!({
            "@type": ["NewsArticle", "Article"],
            "headline": self.headline,
            "description": self.summary,
            "datePublished": self.published,
            "articleSection": self.section,
            "keywords": self.tags,
            "author": authors,
        });
        if let (Some(src), Some(o)) = (&self.image, article.as_object_mut()) {
            o.insert(
                "image".into(),
                serde_json::json!({"@type": "ImageObject", "url": src}),
            );
        }
        let graph = serde_json::json!({
            "@context": "https://schema.org",
            "@graph": [{"@type": "WebSite", "name": MASTHEAD, "url": FRONT_PATH}, article],
        });
        // `<` escaped, so no string can close the script element.
        let json = graph.to_string().replace('<', "\\u003c");
        let mut out = format!("<script type=\"application/ld+json\">{json}</script>");
        let mut meta = |property: &str, content: &str| {
            out.push_str(&format!(
                "<meta property=\"{property}\" content=\"{}\">",
                escape(content)
            ));
        };
        meta("og:type", "article");
        meta("og:title", &self.headline);
        meta("og:description", &self.summary);
        if let Some(src) = &self.image {
            meta("og:image", src);
        }
        meta("article:published_time", &self.published);
        for tag in &self.tags {
            meta("article:tag", tag);
        }
        out
    }

    fn year_month(&self) -> (&str, &str) {
        (
            self.published.get(0..4).unwrap_or("0000"),
            self.published.get(5..7).unwrap_or("00"),
        )
    }
}

/// The news section: its articles, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct News {
    pub articles: Vec<Article>,
}

impl News {
    /// The fixed demo section: fifteen articles from five sections, all
    /// published in March 2026, so the front has three pages.
    pub fn demo() -> News {
        let articles = SPECS
            .iter()
            .enumerate()
            .map(|(index, spec)| make_article(index, spec))
            .collect();
        News { articles }
    }

    /// Number of pages of the section front.
    pub fn front_page_count(&self) -> usize {
        self.articles.len().div_ceil(ARTICLES_PER_FRONT_PAGE)
    }

    /// The articles on front page `page` (1-based), or `None` past either
    /// end.
    pub fn front_page(&self, page: usize) -> Option<&[Article]> {
        let index = page.checked_sub(1)?;
        self.articles.chunks(ARTICLES_PER_FRONT_PAGE).nth(index)
    }

    /// The article at this path, e.g. `/news/2026/03/{slug}.html`.
    pub fn article_at(&self, path: &str) -> Option<&Article> {
        self.articles.iter().find(|article| article.path() == path)
    }

    /// The articles with this tag, newest first.
    pub fn tagged<'a>(&'a self, tag: &'a str) -> impl Iterator<Item = &'a Article> + 'a {
        self.articles
            .iter()
            .filter(move |article| article.tags.iter().any(|t| t == tag))
    }

    /// Every tag of every article.
    pub fn tags(&self) -> BTreeSet<&str> {
        self.articles
            .iter()
            .flat_map(|article| article.tags.iter().map(String::as_str))
            .collect()
    }

    /// The other articles of `article`'s section, newest first: the
    /// article page's related links.
    pub fn related<'a>(&'a self, article: &'a Article) -> impl Iterator<Item = &'a Article> + 'a {
        self.articles
            .iter()
            .filter(move |other| other.section == article.section && other.slug != article.slug)
    }

    /// The tag linked from every front page as "Trending": the newest
    /// article's first tag.
    pub fn trending(&self) -> Option<&str> {
        self.articles.first()?.tags.first().map(String::as_str)
    }
}

/// [`News::demo`], built once: the pages are rendered from it.
pub fn demo_news() -> &'static News {
    static NEWS: OnceLock<News> = OnceLock::new();
    NEWS.get_or_init(News::demo)
}

/// The page of the news section at `path` (no query or fragment) with
/// `query` (the text after `?`, without the fragment), or `None` when the
/// section has no such page.
pub fn page(path: &str, query: Option<&str>) -> Option<Page> {
    let news = demo_news();
    let rest = path.strip_prefix(FRONT_PATH)?;
    let html = match rest.split('/').collect::<Vec<_>>().as_slice() {
        [""] => {
            let number = front_page_number(query)?;
            front_page(news, number)?
        }
        ["tag", tag] => tag_page(news, tag)?,
        [_year, _month, _file] => article_page(news, news.article_at(path)?),
        _ => return None,
    };
    Some(Page {
        status: 200,
        content_type: UTF8_HTML.to_owned(),
        body: html.into_bytes(),
    })
}

/// The `page` query parameter: 1 when absent, `None` when it is not a
/// canonical number (digits only, no leading zero).
fn front_page_number(query: Option<&str>) -> Option<usize> {
    let value = query
        .unwrap_or("")
        .split('&')
        .find_map(|pair| pair.strip_prefix("page="));
    let Some(value) = value else {
        return Some(1);
    };
    let canonical = !value.is_empty()
        && value.bytes().all(|b| b.is_ascii_digit())
        && (value == "0" || !value.starts_with('0'));
    if canonical {
        value.parse().ok()
    } else {
        None
    }
}

fn front_page(news: &News, number: usize) -> Option<String> {
    let articles = news.front_page(number)?;
    let mut body = format!(
        "<main id=\"top\">\n<h1 class=\"section-front\">News</h1>\n{}",
        teasers(articles)
    );
    // The "older" link is query-only: it resolves against the page's own
    // path, `/news/`, whatever page the crawler is on.
    body.push_str("<nav class=\"pages\">");
    if number == 2 {
        body.push_str("<a rel=\"prev\" href=\"./\">Newer</a> ");
    } else if number > 2 {
        body.push_str(&format!(
            "<a rel=\"prev\" href=\"?page={}\">Newer</a> ",
            number - 1
        ));
    }
    body.push_str(&format!(
        "<span class=\"current\">Page {number} of {}</span>",
        news.front_page_count()
    ));
    if number < news.front_page_count() {
        body.push_str(&format!(
            " <a rel=\"next\" href=\"?page={}\">Older</a>",
            number + 1
        ));
    }
    body.push_str("</nav>\n</main>\n");
    if let Some(tag) = news.trending() {
        body.push_str(&format!(
            "<aside class=\"trending\">Trending: <a href=\"{TAG_PATH}{}\">{}</a></aside>\n",
            escape(tag),
            escape(tag)
        ));
    }
    // Links a crawler must drop, should a spider follow every link.
    body.push_str(concat!(
        "<footer>",
        "<a href=\"#top\">Top</a> ",
        "<a href=\"mailto:desk@news.demo.invalid\">Send a tip</a> ",
        "<a href=\"javascript:void(0)\">Subscribe</a> ",
        "<a href=\"http://ads.demo.invalid/click?id=2\">Ad</a>",
        "</footer>\n"
    ));
    let title = if number == 1 {
        format!("News - {MASTHEAD}")
    } else {
        format!("News, page {number} - {MASTHEAD}")
    };
    Some(document(&title, None, &body))
}

fn tag_page(news: &News, tag: &str) -> Option<String> {
    let articles: Vec<Article> = news.tagged(tag).cloned().collect();
    if articles.is_empty() {
        return None;
    }
    let body = format!(
        "<main>\n<h1 class=\"tag\">Tagged: {}</h1>\n{}</main>\n",
        escape(tag),
        teasers(&articles)
    );
    Some(document(&format!("{tag} - {MASTHEAD}"), None, &body))
}

fn teasers(articles: &[Article]) -> String {
    let mut out = String::new();
    for article in articles {
        out.push_str(&format!(
            "<article class=\"teaser\"><h2><a href=\"{}\">{}</a></h2><p class=\"summary\">{}</p></article>\n",
            escape(&article.path()),
            escape(&article.headline),
            escape(&article.summary)
        ));
    }
    out
}

fn article_page(news: &News, article: &Article) -> String {
    let mut body = format!(
        concat!(
            "<article class=\"story\">\n",
            "<p class=\"section\">{section}</p>\n",
            "<h1 itemprop=\"headline\">{headline}</h1>\n",
            "<p class=\"standfirst\">{summary}</p>\n",
            "<p class=\"meta\"><span class=\"byline\">By {byline}</span> ",
            "<time itemprop=\"datePublished\" datetime=\"{published}\">{human}</time></p>\n",
        ),
        section = escape(&article.section),
        headline = escape(&article.headline),
        summary = escape(&article.summary),
        byline = escape(&article.byline),
        published = escape(&article.published),
        human = escape(&human_time(&article.published)),
    );
    if let Some(src) = &article.image {
        body.push_str(&format!(
            "<figure><img src=\"{}\" alt=\"{}\"></figure>\n",
            escape(src),
            escape(&article.headline)
        ));
    }
    body.push_str("<div class=\"article-body\">");
    for (index, paragraph) in article.body.iter().enumerate() {
        if index > 0 {
            body.push('\n');
        }
        body.push_str("<p>");
        push_inlines(&mut body, paragraph);
        body.push_str("</p>");
    }
    body.push_str("</div>\n");
    if !article.tags.is_empty() {
        body.push_str("<ul class=\"tags\">");
        for tag in &article.tags {
            body.push_str(&format!(
                "<li><a href=\"{TAG_PATH}{}\">{}</a></li>",
                escape(tag),
                escape(tag)
            ));
        }
        body.push_str("</ul>\n");
    }
    body.push_str("</article>\n");

    // Related articles are in the same directory, so their hrefs are bare
    // file names; beside them, a tag page and an off-site share link.
    body.push_str("<aside class=\"related\"><h2>Related</h2><ul>");
    for other in news.related(article) {
        body.push_str(&format!(
            "<li><a href=\"{}.html\">{}</a></li>",
            escape(&other.slug),
            escape(&other.headline)
        ));
    }
    if let Some(tag) = article.tags.first() {
        body.push_str(&format!(
            "<li><a href=\"{TAG_PATH}{}\">More on {}</a></li>",
            escape(tag),
            escape(tag)
        ));
    }
    body.push_str(&format!(
        "<li><a href=\"https://share.demo.invalid/?article={}\">Share</a></li>",
        escape(&article.slug)
    ));
    body.push_str("</ul></aside>\n");
    let title = format!("{} - {MASTHEAD}", article.headline);
    document(&title, Some(&article.section), &body).replacen(
        "</head>",
        &format!("{}</head>", article.metadata()),
        1,
    )
}

fn push_inlines(out: &mut String, paragraph: &Paragraph) {
    for inline in &paragraph.0 {
        match inline {
            Inline::Text(text) => out.push_str(&escape(text)),
            Inline::Bold(text) => out.push_str(&format!("<b>{}</b>", escape(text))),
            Inline::Link { href, text } => out.push_str(&format!(
                "<a href=\"{}\">{}</a>",
                escape(href),
                escape(text)
            )),
            Inline::LineBreak => out.push_str("<br>"),
        }
    }
}

/// A whole page: the masthead, then `body`. Articles name their section in
/// a `<meta property="article:section">`, as news sites do for link
/// previews.
fn document(title: &str, section: Option<&str>, body: &str) -> String {
    let section = section.map_or_else(String::new, |s| {
        format!(
            "<meta property=\"article:section\" content=\"{}\">",
            escape(s)
        )
    });
    format!(
        concat!(
            "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{}</title>{}</head><body>\n",
            "<header class=\"masthead\"><a href=\"{}\">{}</a> <a href=\"/\">Forum</a></header>\n",
            "{}</body></html>\n"
        ),
        escape(title),
        section,
        FRONT_PATH,
        MASTHEAD,
        body
    )
}

/// `2026-03-20T09:15:00Z` → `20 March 2026, 09:15 UTC`; anything
/// unparsable is shown as is.
fn human_time(iso: &str) -> String {
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    let parts = || -> Option<(&str, &str, u32, &str)> {
        let year = iso.get(0..4)?;
        let month: usize = iso.get(5..7)?.parse().ok()?;
        let day: u32 = iso.get(8..10)?.parse().ok()?;
        let clock = iso.get(11..16)?;
        Some((year, MONTHS.get(month.checked_sub(1)?)?, day, clock))
    };
    match parts() {
        Some((year, month, day, clock)) => format!("{day} {month} {year}, {clock} UTC"),
        None => iso.to_owned(),
    }
}

/// What is written by hand about an article; the rest is derived from its
/// position in [`SPECS`].
struct Spec {
    slug: &'static str,
    section: &'static str,
    headline: &'static str,
    summary: &'static str,
    byline: &'static str,
    tags: &'static [&'static str],
}

/// Builds article `index` (0 = newest): published one day earlier per
/// position from 2026-03-20, with a lead image except every fourth, and a
/// three-paragraph body whose second paragraph starts with `<b>` (so text
/// nodes and paragraph boundaries differ) and whose third has an off-site
/// link.
fn make_article(index: usize, spec: &Spec) -> Article {
    let day = 20 - index;
    let hour = (9 + 7 * index) % 24;
    let minute = (15 + 13 * index) % 60;
    let body = vec![
        Paragraph(vec![Inline::Text(format!(
            "{} {}",
            spec.summary,
            DETAILS[index % DETAILS.len()]
        ))]),
        Paragraph(vec![
            Inline::Bold("Why it matters:".to_owned()),
            Inline::Text(format!(" {}", WHY[index % WHY.len()])),
        ]),
        Paragraph(vec![
            Inline::Text(format!(
                "{} Earlier coverage is in ",
                FOLLOW_UPS[index % FOLLOW_UPS.len()]
            )),
            Inline::Link {
                href: format!("https://archive.demo.invalid/news/{}", spec.slug),
                text: "our archive".to_owned(),
            },
            Inline::Text(".".to_owned()),
        ]),
    ];
    Article {
        slug: spec.slug.to_owned(),
        section: spec.section.to_owned(),
        headline: spec.headline.to_owned(),
        summary: spec.summary.to_owned(),
        byline: spec.byline.to_owned(),
        published: format!("2026-03-{day:02}T{hour:02}:{minute:02}:00Z"),
        tags: spec.tags.iter().map(|&t| t.to_owned()).collect(),
        image: (index % 4 != 3).then(|| format!("img/{}.jpg", spec.slug)),
        body,
    }
}

const DETAILS: [&str; 5] = [
    "Officials said the plan had broad support.",
    "The figures were published on Tuesday.",
    "Critics say the cost & timing are still unclear.",
    "Further details are expected next week.",
    "Residents were invited to comment until Friday.",
];

const WHY: [&str; 4] = [
    "it affects thousands of people every day.",
    "similar plans elsewhere took years to deliver.",
    "numbers < last year's would have meant cuts.",
    "it is the first change of its kind since 2019.",
];

const FOLLOW_UPS: [&str; 3] = [
    "We will follow the story as it develops.",
    "Readers can send questions to the news desk.",
    "A full report appears in Saturday's edition.",
];

/// The articles, newest first; sections cycle, so each has two related
/// articles.
const SPECS: [Spec; 15] = [
    Spec {
        slug: "council-approves-riverside-bike-lanes",
        section: "City",
        headline: "Council approves riverside bike lanes",
        summary:
            "Six kilometres of protected lanes will link the old town to the university by autumn.",
        byline: "Maya Okafor",
        tags: &["transport", "city-hall"],
    },
    Spec {
        slug: "probe-sends-first-images-from-europa",
        section: "Science",
        headline: "Probe sends first images from Europa's ice shell",
        summary: "Cracks in the moon's crust may reach a salty ocean below, scientists say.",
        byline: "Siobhán O'Neill",
        tags: &["space"],
    },
    Spec {
        slug: "rates-hold-steady-as-inflation-stays-low",
        section: "Business",
        headline: "Rates hold steady as inflation stays < 2%",
        summary: "The central bank kept its key rate at 3.25% for a third meeting in a row.",
        byline: "Tom Ng",
        tags: &["markets", "economy"],
    },
    Spec {
        slug: "jazz-and-blues-festival-returns",
        section: "Culture",
        headline: "Jazz & blues festival returns to the old harbour",
        summary: "Forty bands will play on three stages over the first weekend of June.",
        byline: "Ana Lima",
        tags: &["music", "harbour"],
    },
    Spec {
        slug: "late-goal-sends-united-into-semi-final",
        section: "Sport",
        headline: "Late goal sends United into the cup semi-final",
        summary: "A header in the 89th minute settled a tense quarter-final at home.",
        byline: "Jonas Berg",
        tags: &["football"],
    },
    Spec {
        slug: "new-tram-line-opens-ahead-of-schedule",
        section: "City",
        headline: "New tram line opens ahead of schedule",
        summary: "Line 4 carried 12,000 passengers on its first day, twice the forecast.",
        byline: "Maya Okafor and Tom Ng",
        tags: &["transport"],
    },
    Spec {
        slug: "city-trees-linked-to-cooler-nights",
        section: "Science",
        headline: "Heatwave study links city trees to cooler nights",
        summary: "Streets with full canopies stayed up to 4 °C cooler after sunset.",
        byline: "Siobhán O'Neill",
        tags: &["climate", "health"],
    },
    Spec {
        slug: "bakery-chain-rise-expands",
        section: "Business",
        headline: "Bakery chain \"Rise\" expands to five towns",
        summary: "The family firm will open new shops & a central kitchen this year.",
        byline: "Tom Ng",
        tags: &["markets", "food"],
    },
    Spec {
        slug: "cafe-cinema-revives-silent-films",
        section: "Culture",
        headline: "Café cinema revives silent films with live piano",
        summary: "Every Thursday a pianist improvises scores for classics from the 1920s.",
        byline: "Ana Lima",
        tags: &["film", "music"],
    },
    Spec {
        slug: "teenager-reaches-first-tennis-final",
        section: "Sport",
        headline: "Teenager reaches her first tennis final",
        summary: "The 17-year-old qualifier has not dropped a set all week.",
        byline: "Jonas Berg",
        tags: &["tennis"],
    },
    Spec {
        slug: "rents-rise-again-as-shortage-deepens",
        section: "City",
        headline: "Rents rise again as housing shortage deepens",
        summary: "Average rents are up 6% on last year, with few new homes on the way.",
        byline: "Maya Okafor",
        tags: &["housing", "city-hall"],
    },
    Spec {
        slug: "solar-farm-on-old-landfill",
        section: "Science",
        headline: "Solar farm on old landfill powers 4,000 homes",
        summary: "Panels now cover the site that took the city's rubbish until 1998.",
        byline: "Siobhán O'Neill",
        tags: &["energy", "climate"],
    },
    Spec {
        slug: "start-ups-and-schools-team-up-on-coding",
        section: "Business",
        headline: "Start-ups & schools team up on coding classes",
        summary: "Volunteers from twenty firms will teach after-school clubs.",
        byline: "Tom Ng",
        tags: &["education"],
    },
    Spec {
        slug: "library-extends-summer-opening-hours",
        section: "Culture",
        headline: "Library extends opening hours over the summer",
        summary: "The central library will stay open until 10 pm from July.",
        byline: "Ana Lima",
        tags: &[],
    },
    Spec {
        slug: "marathon-route-changes-for-bridge-works",
        section: "Sport",
        headline: "Marathon route changes to avoid bridge works",
        summary: "Runners will cross the river twice on a new course through the park.",
        byline: "Jonas Berg",
        tags: &["transport", "running"],
    },
];

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use scraper::{ElementRef, Html, Selector};
    use url::Url;

    use super::*;
    use crate::{render, Site};

    const ORIGIN: &str = "http://127.0.0.1:8700";

    /// A page rendered through the whole demo site, parsed.
    struct Fetched {
        status: u16,
        content_type: String,
        html: Html,
        url: Url,
    }

    impl Fetched {
        fn get(path_and_query: &str) -> Fetched {
            let page = render(&Site::demo(), path_and_query);
            let text = String::from_utf8(page.body).expect("news pages are UTF-8");
            Fetched {
                status: page.status,
                content_type: page.content_type,
                html: Html::parse_document(&text),
                url: Url::parse(&format!("{ORIGIN}{path_and_query}")).expect("url"),
            }
        }

        fn all(&self, css: &str) -> Vec<ElementRef<'_>> {
            let selector = Selector::parse(css).expect("test selector");
            self.html.select(&selector).collect()
        }

        fn texts(&self, css: &str) -> Vec<String> {
            self.all(css).iter().map(|e| e.text().collect()).collect()
        }

        fn one_text(&self, css: &str) -> String {
            let texts = self.texts(css);
            assert_eq!(texts.len(), 1, "{css} on {}", self.url);
            texts.into_iter().next().unwrap_or_default()
        }

        fn attrs(&self, css: &str, name: &str) -> Vec<String> {
            self.all(css)
                .iter()
                .map(|e| e.value().attr(name).expect("attribute").to_owned())
                .collect()
        }

        /// The hrefs of `css`, resolved against the page URL.
        fn links(&self, css: &str) -> Vec<String> {
            self.attrs(css, "href")
                .iter()
                .map(|href| self.url.join(href).expect("resolvable").to_string())
                .collect()
        }
    }

    fn url(path: &str) -> String {
        format!("{ORIGIN}{path}")
    }

    #[test]
    fn demo_has_the_documented_shape() {
        let news = News::demo();
        assert_eq!(&news, demo_news());
        assert_eq!(news.articles.len(), 15);
        assert_eq!(news.front_page_count(), 3);
        assert_eq!(news.front_page(0), None);
        assert_eq!(news.front_page(4), None);
        let per_page: Vec<usize> = (1..=3)
            .map(|n| news.front_page(n).map_or(0, <[_]>::len))
            .collect();
        assert_eq!(per_page, [5, 5, 5]);

        let slugs: HashSet<&str> = news.articles.iter().map(|a| a.slug.as_str()).collect();
        assert_eq!(slugs.len(), news.articles.len(), "slugs are unique");
        for article in &news.articles {
            assert!(article
                .slug
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'));
            assert!(
                article.path().starts_with("/news/2026/03/"),
                "{}",
                article.path()
            );
            assert_eq!(news.article_at(&article.path()), Some(article));
            assert_eq!(news.related(article).count(), 2, "{}", article.slug);
            assert_eq!(article.body.len(), 3);
        }
        let published: Vec<&str> = news.articles.iter().map(|a| a.published.as_str()).collect();
        assert_eq!(published[0], "2026-03-20T09:15:00Z");
        assert_eq!(published[14], "2026-03-06T11:17:00Z");
        assert!(published.windows(2).all(|w| w[0] > w[1]), "newest first");

        let without_image: Vec<usize> = (0..15)
            .filter(|&i| news.articles[i].image.is_none())
            .collect();
        assert_eq!(without_image, [3, 7, 11]);
        assert_eq!(
            news.articles[0].image_path().as_deref(),
            Some("/news/2026/03/img/council-approves-riverside-bike-lanes.jpg")
        );
        let untagged: Vec<&str> = news
            .articles
            .iter()
            .filter(|a| a.tags.is_empty())
            .map(|a| a.slug.as_str())
            .collect();
        assert_eq!(untagged, ["library-extends-summer-opening-hours"]);
        assert_eq!(news.trending(), Some("transport"));
        assert_eq!(news.tagged("transport").count(), 3);
        assert_eq!(news.tags().len(), 17);
        // Texts the pages must escape or encode are there.
        let headlines: String = news.articles.iter().map(|a| a.headline.as_str()).collect();
        for c in ['&', '<', '"', '\'', 'é'] {
            assert!(headlines.contains(c), "a headline with {c}");
        }
    }

    #[test]
    fn front_pages_list_their_articles_and_link_older_and_newer() {
        let news = News::demo();
        let cases = [
            ("/news/", 1, None, Some("/news/?page=2")),
            ("/news/?page=1", 1, None, Some("/news/?page=2")),
            ("/news/?page=2", 2, Some("/news/"), Some("/news/?page=3")),
            ("/news/?page=3", 3, Some("/news/?page=2"), None),
        ];
        for (target, number, prev, next) in cases {
            let page = Fetched::get(target);
            assert_eq!(page.status, 200, "{target}");
            assert_eq!(page.content_type, "text/html; charset=utf-8");
            let articles = news.front_page(number).expect("page");
            let paths: Vec<String> = articles.iter().map(|a| url(&a.path())).collect();
            assert_eq!(page.links("article.teaser h2 a"), paths, "{target}");
            let headlines: Vec<&str> = articles.iter().map(|a| a.headline.as_str()).collect();
            assert_eq!(page.texts("article.teaser h2 a"), headlines);
            let summaries: Vec<&str> = articles.iter().map(|a| a.summary.as_str()).collect();
            assert_eq!(page.texts("article.teaser p.summary"), summaries);
            assert_eq!(
                page.one_text("nav.pages span.current"),
                format!("Page {number} of 3")
            );
            assert_eq!(
                page.links("nav.pages a[rel=prev]"),
                prev.map(url).into_iter().collect::<Vec<_>>(),
                "{target}"
            );
            assert_eq!(
                page.links("nav.pages a[rel=next]"),
                next.map(url).into_iter().collect::<Vec<_>>(),
                "{target}"
            );
            assert_eq!(page.links("aside.trending a"), [url("/news/tag/transport")]);
        }
        // The pagination hrefs are relative, query only.
        assert_eq!(
            Fetched::get("/news/").attrs("a[rel=next]", "href"),
            ["?page=2"]
        );
        assert_eq!(
            Fetched::get("/news/?page=2").attrs("a[rel]", "href"),
            ["./", "?page=3"]
        );
    }

    #[test]
    fn front_page_has_noise_links() {
        let page = Fetched::get("/news/");
        assert_eq!(
            page.attrs("footer a", "href"),
            [
                "#top",
                "mailto:desk@news.demo.invalid",
                "javascript:void(0)",
                "http://ads.demo.invalid/click?id=2"
            ]
        );
        assert_eq!(page.attrs("header.masthead a", "href"), ["/news/", "/"]);
    }

    #[test]
    fn article_pages_parse_back_to_the_model() {
        let news = News::demo();
        for article in &news.articles {
            let page = Fetched::get(&article.path());
            assert_eq!(page.status, 200, "{}", article.path());
            assert_eq!(page.one_text("h1[itemprop=headline]"), article.headline);
            assert_eq!(page.one_text("p.standfirst"), article.summary);
            assert_eq!(
                page.one_text("span.byline"),
                format!("By {}", article.byline)
            );
            assert_eq!(
                page.attrs("time[itemprop=datePublished]", "datetime"),
                [article.published.as_str()]
            );
            assert_eq!(
                page.attrs("meta[property=\"article:section\"]", "content"),
                [article.section.as_str()]
            );
            assert_eq!(page.texts("ul.tags a"), article.tags);
            let tag_links: Vec<String> = article
                .tags
                .iter()
                .map(|t| url(&format!("/news/tag/{t}")))
                .collect();
            assert_eq!(page.links("ul.tags a"), tag_links);
            assert_eq!(
                page.attrs("article.story figure img", "src"),
                article.image.iter().cloned().collect::<Vec<_>>()
            );
            let images: Vec<String> = page
                .attrs("article.story figure img", "src")
                .iter()
                .map(|src| page.url.join(src).expect("src").to_string())
                .collect();
            assert_eq!(
                images,
                article
                    .image_path()
                    .map(|p| url(&p))
                    .into_iter()
                    .collect::<Vec<_>>()
            );
            assert_eq!(page.one_text("div.article-body"), article.body_text());
            let paragraphs = page.texts("div.article-body > p");
            let expected: Vec<String> = article.body.iter().map(Paragraph::text).collect();
            assert_eq!(paragraphs, expected);

            let mut related: Vec<String> = news.related(article).map(|a| url(&a.path())).collect();
            related.extend(article.tags.first().map(|t| url(&format!("/news/tag/{t}"))));
            related.push(format!(
                "https://share.demo.invalid/?article={}",
                article.slug
            ));
            assert_eq!(page.links("aside.related a"), related);
        }
    }

    #[test]
    fn article_markup_and_escaping() {
        let news = News::demo();
        let article = &news.articles[7];
        let page = render(&Site::demo(), &article.path());
        let text = String::from_utf8(page.body).expect("utf-8");
        assert!(text.contains(
            "<h1 itemprop=\"headline\">Bakery chain &quot;Rise&quot; expands to five towns</h1>"
        ));
        assert!(text.contains("new shops &amp; a central kitchen"));
        assert!(
            !text.contains("<figure>"),
            "no image on every fourth article"
        );
        assert!(text.contains(concat!(
            "<div class=\"article-body\"><p>The family firm",
            " will open new shops &amp; a central kitchen this year.",
            " Critics say the cost &amp; timing are still unclear.</p>\n",
            "<p><b>Why it matters:</b> it is the first change of its kind since 2019.</p>\n"
        )));
        assert!(text.contains(
            "<time itemprop=\"datePublished\" datetime=\"2026-03-13T10:46:00Z\">13 March 2026, 10:46 UTC</time>"
        ));
        let untagged = render(
            &Site::demo(),
            "/news/2026/03/library-extends-summer-opening-hours.html",
        );
        let text = String::from_utf8(untagged.body).expect("utf-8");
        assert!(!text.contains("class=\"tags\""));
        assert!(!text.contains("/news/tag/"));
    }

    #[test]
    fn tag_pages_list_the_tagged_articles() {
        let news = News::demo();
        for tag in news.tags() {
            let page = Fetched::get(&format!("/news/tag/{tag}"));
            assert_eq!(page.status, 200, "{tag}");
            assert_eq!(page.one_text("h1.tag"), format!("Tagged: {tag}"));
            let expected: Vec<String> = news.tagged(tag).map(|a| url(&a.path())).collect();
            assert!(!expected.is_empty());
            assert_eq!(page.links("article.teaser h2 a"), expected);
        }
        let transport: Vec<&str> = news.tagged("transport").map(|a| a.slug.as_str()).collect();
        assert_eq!(
            transport,
            [
                "council-approves-riverside-bike-lanes",
                "new-tram-line-opens-ahead-of-schedule",
                "marathon-route-changes-for-bridge-works"
            ]
        );
    }

    #[test]
    fn queries_and_fragments() {
        let site = Site::demo();
        let page2 = render(&site, "/news/?page=2");
        assert_eq!(render(&site, "/news/?utm_source=x&page=2").body, page2.body);
        assert_eq!(render(&site, "/news/?page=2&page=3").body, page2.body);
        assert_eq!(render(&site, "/news/?page=2#top").body, page2.body);
        let page1 = render(&site, "/news/");
        assert_eq!(render(&site, "/news/?utm_source=x").body, page1.body);
        assert_eq!(render(&site, "/news/?").body, page1.body);
        assert_eq!(render(&site, "/news/#?page=2").body, page1.body);
        let article = &News::demo().articles[0];
        assert_eq!(
            render(&site, &format!("{}?ref=front", article.path())).status,
            200
        );
    }

    #[test]
    fn unknown_paths_and_pages_are_404() {
        let slug = "council-approves-riverside-bike-lanes";
        let paths = [
            "/news".to_owned(),
            "/news//".to_owned(),
            "/news/?page=0".to_owned(),
            "/news/?page=4".to_owned(),
            "/news/?page=02".to_owned(),
            "/news/?page=".to_owned(),
            "/news/?page=two".to_owned(),
            "/news/?page=-1".to_owned(),
            "/news/?page=%32".to_owned(),
            "/news/?page=99999999999999999999999".to_owned(),
            "/news/2026/03/".to_owned(),
            "/news/2026/03/no-such-story.html".to_owned(),
            format!("/news/2026/04/{slug}.html"),
            format!("/news/2025/03/{slug}.html"),
            format!("/news/2026/3/{slug}.html"),
            format!("/news/2026/03/{slug}"),
            format!("/news/2026/03/{slug}.html/"),
            format!("/news/2026/03/{slug}.HTML"),
            format!("/news/2026/03/img/{slug}.jpg"),
            format!("/news/{slug}.html"),
            "/news/tag/".to_owned(),
            "/news/tag/no-such-tag".to_owned(),
            "/news/tag/transport/".to_owned(),
            "/news/tag/Transport".to_owned(),
            "/news/tag/<script>".to_owned(),
            "/NEWS/".to_owned(),
        ];
        let site = Site::demo();
        for path in &paths {
            let page = render(&site, path);
            assert_eq!(page.status, 404, "{path:?}");
            assert_eq!(page.content_type, "text/html; charset=utf-8");
            assert!(!String::from_utf8_lossy(&page.body).contains("<script>"));
        }
    }

    #[test]
    fn human_times() {
        assert_eq!(
            human_time("2026-03-20T09:15:00Z"),
            "20 March 2026, 09:15 UTC"
        );
        assert_eq!(human_time("2026-00-20T09:15:00Z"), "2026-00-20T09:15:00Z");
        assert_eq!(human_time("soon"), "soon");
    }
}
