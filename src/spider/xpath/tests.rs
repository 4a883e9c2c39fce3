//! XPath on small pages: what Scrapy users write, parsel's results, and
//! the expressions refused when a spider is loaded.

use scraper::{ElementRef, Html};

use super::{Found, Order, XPath};

fn eval(xpath: &str, html: &str) -> Vec<String> {
    let doc = Html::parse_document(html);
    let order = Order::new(&doc.tree);
    let x = XPath::parse(xpath).unwrap_or_else(|e| panic!("{e}"));
    x.strings(doc.root_element(), &order)
}

fn refused(xpath: &str) -> String {
    match XPath::parse(xpath) {
        Ok(_) => panic!("`{xpath}` was accepted"),
        Err(e) => e,
    }
}

const PAGE: &str = r#"<!DOCTYPE html><html><head><title> The  title </title></head><body>
<div id="x" class="post  featured"><h1>Hello <b>big</b> world</h1>
<a class="btn next" href="/p/2">Next</a><a class="prev" href="/p/0">Prev</a>
<!-- a comment --></div>
<ul><li>one</li><li>two</li><li>three</li></ul>
<table><tr><td>1</td></tr></table>
</body></html>"#;

#[test]
fn what_scrapy_users_write() {
    assert_eq!(eval("//h1/text()", PAGE), ["Hello ", " world"]);
    assert_eq!(
        eval("//div[@id='x']//text()", PAGE).concat().trim(),
        "Hello big world\nNextPrev"
    );
    assert_eq!(eval("//a[contains(@class,'next')]/@href", PAGE), ["/p/2"]);
    assert_eq!(eval("normalize-space(//title)", PAGE), ["The title"]);
    assert_eq!(eval("string(//h1)", PAGE), ["Hello big world"]);
    assert_eq!(eval("//li[2]/text()", PAGE), ["two"]);
    assert_eq!(eval("//li[last()]/text()", PAGE), ["three"]);
    assert_eq!(
        eval("(//li)[position() > 1]/text()", PAGE),
        ["two", "three"]
    );
    assert_eq!(eval("count(//li)", PAGE), ["3"]);
    assert_eq!(
        eval("//a[starts-with(@href, '/p/')]/text()", PAGE),
        ["Next", "Prev"]
    );
    assert_eq!(eval("//a[text()='Prev']/@href", PAGE), ["/p/0"]);
    assert_eq!(eval("//h1/following-sibling::a[1]/@href", PAGE), ["/p/2"]);
    assert_eq!(eval("//b/ancestor::div/@id", PAGE), ["x"]);
    assert_eq!(eval("//div/comment()", PAGE), [" a comment "]);
    assert_eq!(eval("id('x')/h1/b/text()", PAGE), ["big"]);
    assert_eq!(eval("boolean(//table)", PAGE), ["true"]);
    // The parser's implied <tbody> is there, as in lxml's tree of the page.
    assert_eq!(eval("//table/tbody/tr/td/text()", PAGE), ["1"]);
    // Absolute paths and relative ones from the root element (<html>).
    assert_eq!(eval("/html/head/title/text()", PAGE), [" The  title "]);
    assert_eq!(eval("body/ul/li[1]/text()", PAGE), ["one"]);
    // Elements give their outer HTML.
    assert_eq!(eval("//li[1]", PAGE), ["<li>one</li>"]);
}

#[test]
fn has_class_as_parsel() {
    assert_eq!(eval("//a[has-class('next')]/@href", PAGE), ["/p/2"]);
    assert_eq!(
        eval("//div[has-class('post', 'featured')]/@id", PAGE),
        ["x"]
    );
    assert!(eval("//div[has-class('post', 'nope')]/@id", PAGE).is_empty());
    assert!(refused("//a[has-class(@x)]").contains("quoted strings"));
}

#[test]
fn document_order_follows_the_tree_not_the_parser() {
    // The parser creates the <p> before the table it is foster-parented in
    // front of, and re-creates <b> for misnested tags: results still come
    // in page order.
    let html = "<table><tr><td>a</td></tr>x<p>p</p></table><b>1<i>2</b>3</i>";
    assert_eq!(eval("//text()", html), ["x", "p", "a", "1", "2", "3"]);
    assert_eq!(eval("//td/text() | //p/text()", html), ["p", "a"]);
}

#[test]
fn relative_to_an_each_element() {
    let doc = Html::parse_document(PAGE);
    let order = Order::new(&doc.tree);
    let li = XPath::parse("//li").unwrap();
    let mut items: Vec<ElementRef<'_>> = Vec::new();
    li.each(doc.root_element(), &order, |f| {
        if let Found::Element(e) = f {
            items.push(e)
        }
    });
    assert_eq!(items.len(), 3);
    let own = XPath::parse("./text()").unwrap();
    let dot = XPath::parse("string(.)").unwrap();
    let pos = XPath::parse("count(preceding-sibling::li) + 1").unwrap();
    assert_eq!(own.strings(items[1], &order), ["two"]);
    assert_eq!(dot.strings(items[2], &order), ["three"]);
    assert_eq!(pos.strings(items[2], &order), ["3"]);
    // `//` from an element still searches the whole page, as in Scrapy.
    assert_eq!(
        XPath::parse("//li")
            .unwrap()
            .strings(items[0], &order)
            .len(),
        3
    );
}

#[test]
fn each_needs_elements() {
    assert!(XPath::parse("//div[@class='c']")
        .unwrap()
        .selects_elements());
    assert!(XPath::parse("(//li)[1] | //p").unwrap().selects_elements());
    assert!(!XPath::parse("//a/@href").unwrap().selects_elements());
    assert!(!XPath::parse("//a/text()").unwrap().selects_elements());
    assert!(!XPath::parse("count(//a)").unwrap().selects_elements());
}

#[test]
fn refused_with_the_reason() {
    assert!(refused("//div[@class='x'").contains("is not a valid XPath 1.0 expression"));
    assert!(refused("").contains("empty"));
    assert!(refused("//a[re:test(@href, 'x')]").contains("extension function"));
    assert!(refused("//a[ends-with(@href, '.pdf')]").contains("XPath 2.0"));
    assert!(refused("string-join(//a/text(), ',')").contains("`join"));
    assert!(refused("//a[normalise-space(.)]").contains("did you mean `normalize-space()`?"));
    assert!(refused("//a[contains(@href)]").contains("takes 2 arguments, not 1"));
    assert!(refused("count('a')").contains("must select nodes"));
    assert!(refused("//a[@href=$url]").contains("variables"));
    assert!(refused("//svg:rect").contains("local-name()='rect'"));
    assert!(refused("//a/namespace::*").contains("namespace axis"));
    assert!(refused("concat('a', 'b')/x").contains("can only follow"));
    assert!(refused("'a' | //b").contains("`|`"));
    let deep = format!("{}1{}", "(".repeat(100), ")".repeat(100));
    assert!(refused(&deep).contains("deeper than"));
}
