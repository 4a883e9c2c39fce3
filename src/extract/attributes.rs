//! How many attributes one element of a page may get before its parse
//! stops: [`MAX_ATTRIBUTES`], and the scan of the page that finds the tag
//! that would pass it ([`first_crowded_tag`]). The parse itself, and what
//! happens at the cut, are [`super::bounded`]'s.
//!
//! Why: html5ever's tokenizer checks each attribute of a tag against every
//! earlier one of the same tag (to drop duplicates), so a tag of n
//! attributes costs n² steps: one element of 100,000 distinct attributes,
//! a 1 MB page, took 10 s (a release build; 263 s a debug one). And the
//! tree builder merges the attributes of every further `<html>` or
//! `<body>` tag into that one element, each new name inserted into a
//! sorted list: 100 `<body>` tags of 1,000 new names each took 2.9 s. The
//! parser has no hook while a tag is read, so the page is scanned first,
//! following the tokenizer's states far enough to count the
//! attributes of each tag, and the parse is stopped at the tag that passes
//! the limit.
//!
//! The scan must never see a tag where the parser sees text (a script, a
//! comment, a title): that would cut a real page. So it follows the
//! tokenizer's rules for comments, doctypes, quoted and unquoted values,
//! and the elements whose content is text (`script` with its `<!--`
//! escapes, `style`, `textarea`, `title`, `plaintext`…). Where it cannot
//! know what the parser does (the tree builder decides some of it: SVG and
//! MathML content, `<![CDATA[`), it takes the reading that sees fewer
//! tags: a page built to slip past it there is still bounded by
//! `extract_timeout`.

use std::collections::HashSet;

/// Most attributes an element may get. Real pages stay far below it (a
/// rich element carries tens: classes, data-, aria- and framework
/// attributes; 1,500 pages of documentation and templates had at most
/// 18), so it is no setting. At the limit a tag costs the parser about
/// half a million comparisons: a page made of nothing but such tags parses about ten
/// times slower than ordinary markup, and in time linear in its size.
pub const MAX_ATTRIBUTES: usize = 1024;

/// The elements whose content the tokenizer reads as text up to their end
/// tag (the tree builder switches it on their start tag), as their names
/// and how their text is read.
const TEXT_ELEMENTS: [(&[u8], Text); 10] = [
    (b"script", Text::Script),
    (b"style", Text::Raw),
    (b"xmp", Text::Raw),
    (b"iframe", Text::Raw),
    (b"noembed", Text::Raw),
    (b"noframes", Text::Raw),
    // The parser runs with scripting on, as browsers do.
    (b"noscript", Text::Raw),
    (b"title", Text::Raw),
    (b"textarea", Text::Raw),
    (b"plaintext", Text::ToTheEnd),
];

/// How the content of a text element ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Text {
    /// At its end tag.
    Raw,
    /// At its end tag, unless inside a `<!-- <script>` escape.
    Script,
    /// Never: the rest of the page is text.
    ToTheEnd,
}

/// Where the first tag starts (the byte offset of its `<`) that gives an
/// element more than `limit` attributes: a tag with more than `limit`, or
/// an `<html>` or `<body>` tag that brings the distinct attributes of all
/// the tags of that name so far past `limit`. `None`: no such tag.
pub fn first_crowded_tag(html: &str, limit: usize) -> Option<usize> {
    if html.len() < shortest_crowded(limit) {
        return None;
    }
    let b = html.as_bytes();
    let mut merged = Merged::default();
    let mut at = 0;
    while let Some(lt) = find(b, at, b'<') {
        // Just past what starts here, or none if it is a crowded tag.
        let next = match b.get(lt + 1) {
            Some(b'!') => Some(markup_declaration(b, lt)),
            Some(b'?') => Some(past(b, lt, b'>')),
            Some(b'/') => match b.get(lt + 2) {
                Some(c) if c.is_ascii_alphabetic() => {
                    tag(b, lt + 2, tag_name(b, lt + 2), limit, None)
                }
                Some(b'>') => Some(lt + 3),
                _ => Some(past(b, lt, b'>')),
            },
            Some(c) if c.is_ascii_alphabetic() => {
                let name = tag_name(b, lt + 1);
                let end = tag(b, lt + 1, name, limit, Some(&mut merged));
                match (end, text_element(name)) {
                    (Some(_), Some((_, Text::ToTheEnd))) => return None,
                    (Some(end), Some((name, kind))) => Some(text_end(b, end, name, kind)),
                    (end, _) => end,
                }
            }
            _ => Some(lt + 1),
        };
        match next {
            Some(next) => at = next,
            // This tag is the one: the parse stops before it.
            None => return Some(lt),
        }
    }
    None
}

/// The fewest bytes a page needs to give an element more than `limit`
/// attributes: `<`, one letter of name, then two bytes an attribute (a
/// separator, whitespace or `/`, and one letter of name: `<p a b c`). A
/// shorter page, such as most API fragments and small pages, is not
/// scanned.
fn shortest_crowded(limit: usize) -> usize {
    2 + 2 * (limit + 1)
}

/// The attributes merged so far into the page's `<html>` and `<body>`
/// elements (the tree builder adds those of each further such tag).
#[derive(Default)]
struct Merged {
    html: HashSet<Vec<u8>>,
    body: HashSet<Vec<u8>>,
}

/// The first `byte` at or after `from`.
fn find(b: &[u8], from: usize, byte: u8) -> Option<usize> {
    memchr::memchr(byte, b.get(from..)?).map(|i| from + i)
}

/// Just past the first `byte` after `from`, or the end of the page.
fn past(b: &[u8], from: usize, byte: u8) -> usize {
    find(b, from + 1, byte).map_or(b.len(), |i| i + 1)
}

/// Just past the first `needle` at or after `from`, or the end.
fn past_str(b: &[u8], from: usize, needle: &[u8]) -> usize {
    b.get(from..)
        .and_then(|rest| memchr::memmem::find(rest, needle))
        .map_or(b.len(), |i| from + i + needle.len())
}

/// Whitespace as the tokenizer sees it (a carriage return is a line feed
/// to it).
fn space(c: u8) -> bool {
    matches!(c, b'\t' | b'\n' | b'\x0C' | b'\r' | b' ')
}

/// Just past a `<!…` construct starting at `lt`: a comment, a doctype, a
/// CDATA section or a bogus comment.
fn markup_declaration(b: &[u8], lt: usize) -> usize {
    let rest = &b[lt..];
    if rest.starts_with(b"<!--") {
        // `<!-->` and `<!--->` are whole (empty) comments; any other ends
        // at `-->` or `--!>`.
        let body = lt + 4;
        return match (b.get(body), b.get(body + 1)) {
            (Some(b'>'), _) => body + 1,
            (Some(b'-'), Some(b'>')) => body + 2,
            _ => past_str(b, body, b"-->").min(past_str(b, body, b"--!>")),
        };
    }
    if rest.starts_with(b"<![CDATA[") {
        // A CDATA section in SVG or MathML, a bogus comment up to `>`
        // elsewhere: the section skips more, so it is taken.
        return past_str(b, lt + 9, b"]]>");
    }
    // A doctype or a bogus comment: every one of their states ends at `>`.
    past(b, lt, b'>')
}

/// The name of the tag whose name starts at `from`, as written.
fn tag_name(b: &[u8], from: usize) -> &[u8] {
    let end = b[from..]
        .iter()
        .position(|&c| space(c) || c == b'/' || c == b'>')
        .map_or(b.len(), |i| from + i);
    &b[from..end]
}

/// The text element named `name`, if it is one.
fn text_element(name: &[u8]) -> Option<(&'static [u8], Text)> {
    TEXT_ELEMENTS
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .copied()
}

/// States of a tag's attributes, as the tokenizer's (those that act
/// alike are one: the states before a name, after a quoted value and
/// after a `/` all start a new attribute on anything but a space, `/` or
/// `>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum In {
    BeforeName,
    Name,
    AfterName,
    BeforeValue,
    Unquoted,
}

/// What a tag's scan does next.
enum Step {
    To(In),
    /// A new attribute's name starts here.
    NewName,
    /// The name read ends here; then on to the state.
    EndName(In),
    /// A value quoted with this quote starts just after here; it ends at
    /// the same quote and nowhere else, and then a new attribute may
    /// start.
    Quoted(u8),
    /// The tag ends here (just past its `>`), after the name read if any.
    Close,
}

/// The tokenizer's step from `state` on byte `c` of a tag.
fn step(state: In, c: u8) -> Step {
    match (state, c) {
        (In::Name, b'>') => Step::Close,
        (In::Name, b'=') => Step::EndName(In::BeforeValue),
        (In::Name, b'/') => Step::EndName(In::BeforeName),
        (In::Name, c) if space(c) => Step::EndName(In::AfterName),
        (In::Name, _) => Step::To(In::Name),
        (In::BeforeValue, b'"' | b'\'') => Step::Quoted(c),
        (In::BeforeValue | In::AfterName, c) if space(c) => Step::To(state),
        (In::BeforeValue, b'>') => Step::Close,
        (In::BeforeValue, _) => Step::To(In::Unquoted),
        (In::Unquoted, b'>') => Step::Close,
        (In::Unquoted, c) if space(c) => Step::To(In::BeforeName),
        (In::Unquoted, _) => Step::To(In::Unquoted),
        (In::AfterName, b'=') => Step::To(In::BeforeValue),
        (In::BeforeName | In::AfterName, b'>') => Step::Close,
        (In::BeforeName | In::AfterName, b'/') => Step::To(In::BeforeName),
        (In::BeforeName, c) if space(c) => Step::To(In::BeforeName),
        (In::BeforeName | In::AfterName, _) => Step::NewName,
    }
}

/// The attributes of one tag, counted as it is read.
struct Attributes<'m> {
    /// Attributes of the tag so far.
    count: usize,
    /// Where the name being read starts.
    name: Option<usize>,
    /// The distinct names of the element this tag merges into (an
    /// `<html>` or `<body>` start tag), lowercase as the tokenizer makes
    /// them.
    merged: Option<&'m mut HashSet<Vec<u8>>>,
    limit: usize,
}

impl Attributes<'_> {
    /// A name starts at `i`; false once the tag has too many.
    #[inline]
    fn start(&mut self, i: usize) -> bool {
        self.count += 1;
        self.name = Some(i);
        self.count <= self.limit
    }

    /// The name being read ends before `i`; false once the element it
    /// merges into has too many.
    #[inline]
    fn end(&mut self, b: &[u8], i: usize) -> bool {
        let (Some(from), Some(merged)) = (self.name.take(), self.merged.as_deref_mut()) else {
            return true;
        };
        merged.insert(b[from..i].to_ascii_lowercase());
        merged.len() <= self.limit
    }
}

/// Reads the tag whose name (`name`, see [`tag_name`]) starts at `from`:
/// just past its `>` (or the end of the page), or `None` when it gives an
/// element too many attributes; `merged` holds what the start tags of
/// `<html>` and `<body>` gave theirs (none for an end tag).
fn tag(
    b: &[u8],
    from: usize,
    name: &[u8],
    limit: usize,
    merged: Option<&mut Merged>,
) -> Option<usize> {
    let merged = merged.and_then(|m| {
        if name.eq_ignore_ascii_case(b"html") {
            Some(&mut m.html)
        } else if name.eq_ignore_ascii_case(b"body") {
            Some(&mut m.body)
        } else {
            None
        }
    });
    let mut attributes = Attributes {
        count: 0,
        name: None,
        merged,
        limit,
    };
    // The byte that ends the name acts as it does before an attribute.
    let mut state = In::BeforeName;
    let mut i = from + name.len();
    while let Some(&c) = b.get(i) {
        state = match step(state, c) {
            Step::Quoted(q) => {
                // A quoted value ends at its quote and nowhere else (most
                // of a real tag's bytes): found at once, not a byte at a
                // time.
                let Some(quote) = find(b, i + 1, q) else {
                    break;
                };
                i = quote;
                In::BeforeName
            }
            Step::To(next) => next,
            Step::NewName if attributes.start(i) => In::Name,
            Step::NewName => return None,
            Step::EndName(next) if attributes.end(b, i) => next,
            Step::EndName(_) => return None,
            Step::Close => return attributes.end(b, i).then_some(i + 1),
        };
        i += 1;
    }
    attributes.end(b, b.len()).then_some(b.len())
}

/// Where the content of the text element `name`, starting at `from`,
/// ends: the `<` of its end tag, or the end of the page.
fn text_end(b: &[u8], from: usize, name: &[u8], kind: Text) -> usize {
    match kind {
        Text::Script => script_end(b, from),
        _ => {
            let mut at = from;
            while let Some(lt) = find(b, at, b'<') {
                if end_tag(b, lt, name) {
                    return lt;
                }
                at = lt + 1;
            }
            b.len()
        }
    }
}

/// Whether an end tag of `name` starts at `lt`, as the tokenizer reads one
/// in text: `</name` and a space, `/` or `>`.
fn end_tag(b: &[u8], lt: usize, name: &[u8]) -> bool {
    let after = lt + 2 + name.len();
    b.get(lt..lt + 2) == Some(b"</")
        && b.get(lt + 2..after)
            .is_some_and(|n| n.eq_ignore_ascii_case(name))
        && b.get(after)
            .is_some_and(|&c| space(c) || c == b'/' || c == b'>')
}

/// Whether a `<script` tag name as the tokenizer reads it inside an
/// escaped script (`<script` and a space, `/` or `>`) starts at `lt`.
fn script_start(b: &[u8], lt: usize) -> bool {
    b.get(lt + 1..lt + 7)
        .is_some_and(|n| n.eq_ignore_ascii_case(b"script"))
        && b.get(lt + 7)
            .is_some_and(|&c| space(c) || c == b'/' || c == b'>')
}

/// Where a script's content, starting at `from`, ends: the `<` of its end
/// tag, or the end of the page. Inside `<!--` (escaped), a `<script` opens
/// a part in which `</script>` only closes that part (double escaped);
/// `-->` leaves both.
fn script_end(b: &[u8], from: usize) -> usize {
    #[derive(PartialEq)]
    enum Part {
        Plain,
        Escaped,
        DoubleEscaped,
    }
    let mut part = Part::Plain;
    // Dashes just read in an escaped part: two, then `>`, end it.
    let mut dashes = 0;
    let mut i = from;
    while i < b.len() {
        if part == Part::Plain {
            let Some(lt) = find(b, i, b'<') else {
                break;
            };
            if end_tag(b, lt, b"script") {
                return lt;
            }
            if b[lt..].starts_with(b"<!--") {
                (part, dashes, i) = (Part::Escaped, 2, lt + 4);
            } else {
                i = lt + 1;
            }
            continue;
        }
        match b[i] {
            b'-' => dashes += 1,
            b'>' if dashes >= 2 => (part, dashes) = (Part::Plain, 0),
            b'<' if part == Part::Escaped && end_tag(b, i, b"script") => return i,
            b'<' if part == Part::Escaped && script_start(b, i) => {
                (part, dashes) = (Part::DoubleEscaped, 0)
            }
            b'<' if part == Part::DoubleEscaped && end_tag(b, i, b"script") => {
                (part, dashes) = (Part::Escaped, 0)
            }
            _ => dashes = 0,
        }
        i += 1;
    }
    b.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use scraper::Html;

    /// The most attributes any element of the parsed page has.
    fn most_in_the_tree(page: &str) -> usize {
        let html = Html::parse_document(page);
        html.tree
            .nodes()
            .filter_map(|n| n.value().as_element().map(|e| e.attrs.len()))
            .max()
            .unwrap_or(0)
    }

    /// Pages where the parser sees tags, or text that looks like tags:
    /// the scan finds a tag of more than 2 attributes exactly where the
    /// parsed tree has an element of more than 2.
    const PAGES: &[&str] = &[
        "<p a b>x</p>",
        "<p a b c>",
        "<script>if (a<b c d e) x</script><p>",
        "<script>var s = \"</scr\" + \"ipt><p a b c>\"</script>",
        "<script><!-- <script> </script> <p a b c> --></script>",
        "<script><!-- <script> </script> --> <p a b c></script>",
        "<script><!-- </script><p a b c>",
        "<script><!--> <p a b c></script>",
        "<script><!-- <scriptx> </script><p a b c>",
        "<SCRIPT type=module>x<p a b c></SCRIPT ><p a b c>",
        "<script/>a<p a b c></script>",
        "<style>a<b c d e{}</style>",
        "<style>a</stylex><p a b c></style><p a b c>",
        "<title><p a b c></title>",
        "<title><p a b c></titlex></title>",
        "<textarea><p a b c></textarea>",
        "<select><textarea><p a b c></textarea>",
        "<table><script>x<p a b c></script></table>",
        "<xmp><p a b c></xmp>",
        "<iframe><p a b c></iframe>",
        "<noembed><p a b c></noembed>",
        "<noframes><p a b c></noframes>",
        "<noscript><p a b c></noscript>",
        "<plaintext><p a b c></plaintext><p a b c>",
        "<!-- <p a b c> -->",
        "<!--> <p a b c>",
        "<!---> <p a b c>",
        "<!-- --!> <p a b c>",
        "<!-- -- > <p a b c> -->",
        "<!-- <!-- <p a b c> -->",
        "<!DOCTYPE html \"x>\"><p a b c>",
        "<!DOCTYPE html><p a b>",
        "<?xml a b c?><p a>",
        "</ p a b c>",
        "</><p a b c>",
        "<![CDATA[ <p a b c> ]]>",
        "<svg><![CDATA[ x ]]><p a b c>",
        "<svg><style>a</style><p a b c></svg>",
        "<math><mi a b c></mi></math>",
        "<p title=\"<p a b c>\">",
        "<p title='a > b' a b>",
        "<p a=\"x b c d>",
        "<p a='x\" b c' d>",
        "<p a=\"\"b c>",
        "<p a=\"\" b c>",
        "<p a = 'x'b='y' c>",
        "<p a=x>y b c>",
        "<p a=\"x\"b c>",
        "<p/a/b/c>",
        "<p a= b c>",
        "<p =a b>",
        "<p =a b c>",
        "<a<b c d>",
        "<a<b c d e>",
        "< p a b c>",
        "<p \u{e9}=1 \u{fc}=2 \u{f6}=3>",
        "<p a\tb\nc>",
        "<p a\rb\x0Cc>",
        "<template><p a b c></template>",
        "<body a b><body c d>",
        "<body a b><body a b><body b>",
        "<html a><html b c>",
        "<html a><body b><html a b>",
        "<p a b><p c d><p a e>",
    ];

    #[test]
    fn the_scan_counts_attributes_as_the_parser_does() {
        for page in PAGES {
            let crowded = first_crowded_tag(page, 2);
            assert_eq!(
                crowded.is_some(),
                most_in_the_tree(page) > 2,
                "{page:?}: the scan says {crowded:?}"
            );
        }
    }

    #[test]
    fn the_crowded_tag_is_where_the_parse_stops() {
        let page = "<p a>x</p><script>1<b c d e</script><div a b c>y";
        assert_eq!(first_crowded_tag(page, 2), page.find("<div"));
        let page = "<body a b><p>x</p><body c>";
        assert_eq!(first_crowded_tag(page, 2), page.rfind("<body"));
    }

    #[test]
    fn tags_the_parser_drops_still_count() {
        // Attributes on an end tag, repeated ones and a tag never closed
        // cost the parser as much: counted.
        assert_eq!(first_crowded_tag("<p></p a b c>", 2), Some(3));
        assert_eq!(first_crowded_tag("<p a a a>", 2), Some(0));
        assert_eq!(first_crowded_tag("<p a b c", 2), Some(0));
        assert_eq!(first_crowded_tag("<p a b", 2), None);
    }

    #[test]
    fn pages_too_short_to_be_crowded_are_not_scanned_and_the_bound_is_tight() {
        for limit in [2, 5, MAX_ATTRIBUTES] {
            let n = limit + 1;
            for page in [
                format!("<p{}", " a".repeat(n)),
                format!("<p{}", "/a".repeat(n)),
            ] {
                assert_eq!(page.len(), shortest_crowded(limit));
                // (Repeated names and a tag cut off by the page's end
                // cost the parser as much: counted.)
                assert_eq!(first_crowded_tag(&page, limit), Some(0), "{limit}");
            }
        }
    }

    /// `n` distinct attributes on one element.
    fn crowded(n: usize) -> String {
        let attributes: Vec<String> = (0..n).map(|i| format!("data-a{i}=\"{i}\"")).collect();
        format!("<div {}>x</div>", attributes.join(" "))
    }

    #[test]
    fn real_pages_are_far_below_the_limit() {
        assert_eq!(
            first_crowded_tag(&crowded(MAX_ATTRIBUTES), MAX_ATTRIBUTES),
            None
        );
        assert_eq!(
            first_crowded_tag(
                &format!("<p>x</p>{}", crowded(MAX_ATTRIBUTES + 1)),
                MAX_ATTRIBUTES
            ),
            Some(8)
        );
        // Text that looks like a tag of thousands of attributes: a script
        // of JSON with `<` in it, a long comment, a title.
        let words = "word \"https://a.example/b/c\" ".repeat(5000);
        for page in [
            format!("<script>var x = a <b; {words}</script>"),
            format!("<script type=application/json>{{\"a\": \"<b {words}\"}}</script>"),
            format!("<!-- <b {words} -->"),
            format!("<title>a <b {words}</title>"),
            format!("<p title='<b {words}'>"),
        ] {
            assert_eq!(
                first_crowded_tag(&page, MAX_ATTRIBUTES),
                None,
                "{}",
                &page[..40]
            );
        }
    }
}
