//! XPath 1.0 selectors beside CSS (`xpath = "//div[@class='post']/h1/text()"`),
//! evaluated by the `xpath-eval` crate over the same scraper tree the CSS
//! selectors read: the page is parsed once, whichever language a spider
//! writes.
//!
//! The tree is seen as lxml (and so Scrapy/parsel) sees an HTML page:
//! element and attribute names are the parser's lowercase ones in no
//! namespace, so `//div` and `@href` match; the doctype is not a node.
//! Results follow parsel: a node-set yields its nodes in document order
//! (elements as their outer HTML, text nodes, attribute values, comments),
//! and an expression of another type (`normalize-space(//h1)`,
//! `count(//li)`, `string(@href)`) yields its one string value.
//!
//! Besides the XPath 1.0 core library, parsel's `has-class("a", …)` is
//! accepted (rewritten into core XPath when compiled). What cannot work on
//! an HTML page or in a spider file is refused when the spider is loaded,
//! with the reason: variables, namespace prefixes and the namespace axis,
//! extension functions (`re:test()`), XPath 2.0 functions, wrong argument
//! counts and type errors such as `count('x')`.
//!
//! This module owns compiling and evaluating; which page an expression runs
//! on, and what its values become, is the extractor's.

use std::cmp::Ordering;

use ego_tree::{NodeId, NodeRef, Tree};
use scraper::{ElementRef, Node as Html};
use xpath_eval::{
    Axis, EvaluationContext, ExpandedName, Expr, FilterExpr, LocationPath, NodeKind, NodeTest,
    PathExpr, PrimaryExpr, Value,
};

/// Longest expression accepted, in characters, and deepest nesting of
/// brackets and parentheses: the parser recurses, and no real selector
/// comes near either.
const MAX_LEN: usize = 4096;
const MAX_NESTING: usize = 64;

/// A compiled XPath expression.
#[derive(Debug, Clone)]
pub struct XPath {
    source: String,
    expr: Expr,
    /// What the expression yields when evaluated.
    result: Type,
    /// A node-set whose last step selects text, attributes or comments
    /// (useless as `each`).
    selects_values: bool,
}

/// One value an XPath expression found.
#[derive(Debug, Clone)]
pub enum Found<'a> {
    Element(ElementRef<'a>),
    /// A text node, an attribute value or a comment, borrowed from the page.
    Text(&'a str),
    /// The value of an expression that is not a node-set.
    Value(String),
}

impl Found<'_> {
    /// The value as a field stores it: an element as its outer HTML.
    pub fn into_string(self) -> String {
        match self {
            Found::Element(e) => e.html(),
            Found::Text(t) => t.to_owned(),
            Found::Value(v) => v,
        }
    }
}

impl XPath {
    /// Compiles `source`; the error says what is wrong and how to write it.
    pub fn parse(source: &str) -> Result<XPath, String> {
        let text = source.trim();
        if text.is_empty() {
            return Err("the XPath expression is empty".into());
        }
        if text.chars().count() > MAX_LEN {
            return Err(format!(
                "the XPath expression is longer than {MAX_LEN} characters"
            ));
        }
        let mut depth = 0usize;
        for c in text.chars() {
            match c {
                '(' | '[' => depth += 1,
                ')' | ']' => depth = depth.saturating_sub(1),
                _ => {}
            }
            if depth > MAX_NESTING {
                return Err(format!(
                    "the XPath expression nests brackets deeper than {MAX_NESTING}"
                ));
            }
        }
        let mut expr = xpath_eval::parse(text).map_err(|e| {
            let at = text
                .get(..e.position)
                .map_or(e.position, |s| s.chars().count());
            format!(
                "`{text}` is not a valid XPath 1.0 expression: {} (at character {})",
                e.message,
                at + 1
            )
        })?;
        let result = Checker
            .expr(&mut expr)
            .map_err(|e| format!("`{text}`: {e}"))?;
        let selects_values = result == Type::Nodes && last_step_selects_values(&expr);
        Ok(XPath {
            source: source.to_string(),
            expr,
            result,
            selects_values,
        })
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether the expression selects elements (what `each` needs): a
    /// node-set whose last step is not `text()`, `@attr` or `comment()`.
    pub fn selects_elements(&self) -> bool {
        self.result == Type::Nodes && !self.selects_values
    }

    /// Calls `found` with everything the expression yields with `scope` as
    /// its context node, in document order. `order` is the page's
    /// [`Order`]. An expression that fails on this page (rare: the types
    /// are checked when compiled) yields nothing.
    pub fn each<'a>(
        &self,
        scope: ElementRef<'a>,
        order: &'a Order,
        mut found: impl FnMut(Found<'a>),
    ) {
        let node = XNode {
            node: *scope,
            attr: 0,
            order,
        };
        let value = match xpath_eval::evaluate(&self.expr, &EvaluationContext::new(node)) {
            Ok(v) => v,
            Err(e) => {
                tracing::debug!(xpath = %self.source, error = %e, "XPath expression failed");
                return;
            }
        };
        match value {
            Value::NodeSet(nodes) => {
                for n in nodes {
                    if let Some(f) = n.found() {
                        found(f);
                    }
                }
            }
            Value::Boolean(b) => found(Found::Value(b.to_string())),
            other => found(Found::Value(other.to_xpath_string())),
        }
    }

    /// Everything the expression yields within `scope`, as strings.
    pub fn strings(&self, scope: ElementRef<'_>, order: &Order) -> Vec<String> {
        let mut out = Vec::new();
        self.each(scope, order, |f| out.push(f.into_string()));
        out
    }
}

/// A page's document order, which XPath results are sorted in: each node's
/// position in a preorder walk. The parser's node ids are not in document
/// order (it moves nodes: misnested tags, foster-parented tables), so it is
/// computed once per page, when the page's first XPath expression runs.
#[derive(Debug)]
pub struct Order {
    /// Every node id of the tree, ascending (the tree's storage order).
    ids: Vec<NodeId>,
    /// Preorder position by storage index; nodes outside the tree last.
    pre: Vec<u32>,
}

impl Order {
    pub fn new(tree: &Tree<Html>) -> Order {
        let ids: Vec<NodeId> = tree.nodes().map(|n| n.id()).collect();
        let mut pre = vec![u32::MAX; ids.len()];
        for (i, n) in tree.root().descendants().enumerate() {
            if let Ok(k) = ids.binary_search(&n.id()) {
                pre[k] = u32::try_from(i).unwrap_or(u32::MAX);
            }
        }
        Order { ids, pre }
    }

    fn of(&self, id: NodeId) -> u32 {
        self.ids
            .binary_search(&id)
            .ok()
            .and_then(|k| self.pre.get(k).copied())
            .unwrap_or(u32::MAX)
    }
}

/// A node of the page as XPath sees it: a tree node, or one of an
/// element's attributes (`attr` is its index + 1; 0 for the node itself).
#[derive(Clone, Copy)]
struct XNode<'a> {
    node: NodeRef<'a, Html>,
    attr: u32,
    order: &'a Order,
}

impl PartialEq for XNode<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.node.id() == other.node.id() && self.attr == other.attr
    }
}

impl Eq for XNode<'_> {}

impl<'a> XNode<'a> {
    fn wrap(node: NodeRef<'a, Html>, order: &'a Order) -> XNode<'a> {
        XNode {
            node,
            attr: 0,
            order,
        }
    }

    /// The attribute this node is: (name, value).
    fn attribute(self) -> Option<(&'a str, &'a str)> {
        let index = usize::try_from(self.attr.checked_sub(1)?).ok()?;
        self.node.value().as_element()?.attrs().nth(index)
    }

    /// The text of a text, attribute, comment or processing-instruction
    /// node, borrowed.
    fn own_text(self) -> Option<&'a str> {
        if self.attr > 0 {
            return self.attribute().map(|(_, v)| v);
        }
        match self.node.value() {
            Html::Text(t) => Some(&**t),
            Html::Comment(c) => Some(&**c),
            Html::ProcessingInstruction(p) => Some(&*p.data),
            _ => None,
        }
    }

    fn found(self) -> Option<Found<'a>> {
        if let Some(t) = self.own_text() {
            return Some(Found::Text(t));
        }
        match self.node.value() {
            Html::Element(_) => ElementRef::wrap(self.node).map(Found::Element),
            // `/` itself: the whole page, as its root element.
            _ => self
                .node
                .children()
                .find_map(ElementRef::wrap)
                .map(Found::Element),
        }
    }
}

impl<'a> xpath_eval::Node<'a> for XNode<'a> {
    fn kind(self) -> NodeKind {
        if self.attr > 0 {
            return NodeKind::Attribute;
        }
        match self.node.value() {
            Html::Document | Html::Fragment => NodeKind::Root,
            Html::Element(_) => NodeKind::Element,
            Html::Text(_) => NodeKind::Text,
            Html::Comment(_) => NodeKind::Comment,
            Html::ProcessingInstruction(_) => NodeKind::ProcessingInstruction,
            // Never reached: `children()` leaves the doctype out.
            Html::Doctype(_) => NodeKind::Comment,
        }
    }

    fn parent(self) -> Option<Self> {
        if self.attr > 0 {
            return Some(XNode::wrap(self.node, self.order));
        }
        self.node.parent().map(|p| XNode::wrap(p, self.order))
    }

    fn children(self) -> impl Iterator<Item = Self> + 'a {
        let order = self.order;
        let own = (self.attr == 0).then_some(self.node);
        own.into_iter()
            .flat_map(|n| n.children())
            .filter(|n| !matches!(n.value(), Html::Doctype(_)))
            .map(move |n| XNode::wrap(n, order))
    }

    fn attributes(self) -> impl Iterator<Item = Self> + 'a {
        let count = match (self.attr, self.node.value()) {
            (0, Html::Element(e)) => e.attrs().count(),
            _ => 0,
        };
        let XNode { node, order, .. } = self;
        (1..=u32::try_from(count).unwrap_or(0)).map(move |attr| XNode { node, attr, order })
    }

    fn namespaces(self) -> impl Iterator<Item = Self> + 'a {
        std::iter::empty()
    }

    fn expanded_name(self) -> Option<ExpandedName> {
        let local = if self.attr > 0 {
            self.attribute()?.0
        } else {
            match self.node.value() {
                Html::Element(e) => e.name(),
                Html::ProcessingInstruction(p) => &*p.target,
                _ => return None,
            }
        };
        Some(ExpandedName {
            namespace_uri: None,
            local_name: local.to_string(),
        })
    }

    fn has_expanded_name(self, namespace_uri: Option<&str>, local_name: &str) -> bool {
        if namespace_uri.is_some() {
            return false;
        }
        if self.attr > 0 {
            return self.attribute().is_some_and(|(n, _)| n == local_name);
        }
        match self.node.value() {
            Html::Element(e) => e.name() == local_name,
            Html::ProcessingInstruction(p) => &*p.target == local_name,
            _ => false,
        }
    }

    fn string_value(self) -> String {
        self.with_string_value(str::to_string)
    }

    fn with_string_value<R>(self, f: impl FnOnce(&str) -> R) -> R {
        if let Some(t) = self.own_text() {
            return f(t);
        }
        let mut text = String::new();
        for n in self.node.descendants() {
            if let Html::Text(t) = n.value() {
                text.push_str(t);
            }
        }
        f(&text)
    }

    fn document_order(self, other: Self) -> Ordering {
        (self.order.of(self.node.id()), self.attr)
            .cmp(&(other.order.of(other.node.id()), other.attr))
    }

    /// HTML's `id` attributes, so `id('main')` finds `<div id="main">`.
    fn is_id_attribute(self) -> bool {
        self.attribute().is_some_and(|(n, _)| n == "id")
    }
}

/// The type of an expression's value (XPath 1.0 §1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Type {
    Nodes,
    Str,
    Num,
    Bool,
}

/// The core library (§4): name, fewest and most arguments, result type,
/// and whether the arguments must be node-sets.
const FUNCTIONS: &[(&str, usize, usize, Type, bool)] = &[
    ("last", 0, 0, Type::Num, false),
    ("position", 0, 0, Type::Num, false),
    ("count", 1, 1, Type::Num, true),
    ("id", 1, 1, Type::Nodes, false),
    ("local-name", 0, 1, Type::Str, true),
    ("namespace-uri", 0, 1, Type::Str, true),
    ("name", 0, 1, Type::Str, true),
    ("string", 0, 1, Type::Str, false),
    ("concat", 2, usize::MAX, Type::Str, false),
    ("starts-with", 2, 2, Type::Bool, false),
    ("contains", 2, 2, Type::Bool, false),
    ("substring-before", 2, 2, Type::Str, false),
    ("substring-after", 2, 2, Type::Str, false),
    ("substring", 2, 3, Type::Str, false),
    ("string-length", 0, 1, Type::Num, false),
    ("normalize-space", 0, 1, Type::Str, false),
    ("translate", 3, 3, Type::Str, false),
    ("boolean", 1, 1, Type::Bool, false),
    ("not", 1, 1, Type::Bool, false),
    ("true", 0, 0, Type::Bool, false),
    ("false", 0, 0, Type::Bool, false),
    ("lang", 1, 1, Type::Bool, false),
    ("number", 0, 1, Type::Num, false),
    ("sum", 1, 1, Type::Num, true),
    ("floor", 1, 1, Type::Num, false),
    ("ceiling", 1, 1, Type::Num, false),
    ("round", 1, 1, Type::Num, false),
];

/// XPath 2.0+ functions Scrapy users reach for, with the 1.0 way.
const NEWER: &[(&str, &str)] = &[
    (
        "ends-with",
        "compare the end: substring(@href, string-length(@href) - 3) = '.pdf'",
    ),
    (
        "lower-case",
        "translate(., 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')",
    ),
    (
        "upper-case",
        "translate(., 'abcdefghijklmnopqrstuvwxyz', 'ABCDEFGHIJKLMNOPQRSTUVWXYZ')",
    ),
    (
        "matches",
        "select the text and filter it with the field's `re = '…'`",
    ),
    (
        "replace",
        "select the text and keep what the field's `re = '…'` captures",
    ),
    (
        "string-join",
        "select the nodes and join them with the field's `join = \" \"`",
    ),
    (
        "tokenize",
        "select the text and split it with the field's `re` and `all = true`",
    ),
];

/// Checks an expression and rewrites parsel's `has-class()`: every problem
/// becomes the message `check` shows.
struct Checker;

impl Checker {
    fn expr(&self, e: &mut Expr) -> Result<Type, String> {
        Ok(match e {
            Expr::Or(a, b)
            | Expr::And(a, b)
            | Expr::Equality(a, _, b)
            | Expr::Relational(a, _, b) => {
                self.expr(a)?;
                self.expr(b)?;
                Type::Bool
            }
            Expr::Additive(a, _, b) | Expr::Multiplicative(a, _, b) => {
                self.expr(a)?;
                self.expr(b)?;
                Type::Num
            }
            Expr::Negate(a) => {
                self.expr(a)?;
                Type::Num
            }
            Expr::Union(a, b) => {
                for side in [a, b] {
                    if self.expr(side)? != Type::Nodes {
                        return Err("both sides of `|` must select nodes".into());
                    }
                }
                Type::Nodes
            }
            Expr::Path(PathExpr::Location(path)) => {
                self.path(path)?;
                Type::Nodes
            }
            Expr::Path(PathExpr::Filter(f)) => {
                let t = self.filter(f)?;
                if !f.predicates.is_empty() && t != Type::Nodes {
                    return Err(
                        "a predicate `[…]` can only follow an expression that selects nodes".into(),
                    );
                }
                t
            }
            Expr::Path(PathExpr::FilterLocation(f, path)) => {
                if self.filter(f)? != Type::Nodes {
                    return Err(
                        "a path `/…` can only follow an expression that selects nodes".into(),
                    );
                }
                self.path(path)?;
                Type::Nodes
            }
        })
    }

    fn path(&self, path: &mut LocationPath) -> Result<(), String> {
        for step in &mut path.steps {
            if step.axis == Axis::Namespace {
                return Err(
                    "the namespace axis is not supported: HTML pages have no namespace nodes"
                        .into(),
                );
            }
            match &step.node_test {
                NodeTest::QName(q) if q.prefix.is_some() => {
                    let prefix = q.prefix.as_deref().unwrap_or_default();
                    return Err(format!(
                        "`{prefix}:{}`: names on an HTML page have no namespace prefix; write `*[local-name()='{}']`",
                        q.local, q.local
                    ));
                }
                NodeTest::NamespaceWildcard(p) => {
                    return Err(format!(
                        "`{p}:*`: names on an HTML page have no namespace prefix; write `*`"
                    ));
                }
                _ => {}
            }
            for p in &mut step.predicates {
                self.expr(p)?;
            }
        }
        Ok(())
    }

    fn filter(&self, f: &mut FilterExpr) -> Result<Type, String> {
        let t = self.primary(&mut f.primary)?;
        for p in &mut f.predicates {
            self.expr(p)?;
        }
        Ok(t)
    }

    fn primary(&self, p: &mut PrimaryExpr) -> Result<Type, String> {
        let call = match p {
            PrimaryExpr::Variable(q) => {
                return Err(format!(
                    "`${}`: variables are not supported; write the value into the expression",
                    q.local
                ))
            }
            PrimaryExpr::Parenthesized(e) => return self.expr(e),
            PrimaryExpr::Literal(_) => return Ok(Type::Str),
            PrimaryExpr::Number(_) => return Ok(Type::Num),
            PrimaryExpr::Function(call) => call,
        };
        if let Some(prefix) = &call.name.prefix {
            let hint = if call.name.local == "test" || call.name.local == "match" {
                "select the text and filter it with the field's `re = '…'`"
            } else {
                "use the XPath 1.0 functions (contains(), starts-with(), normalize-space(), …) or the field's `re`"
            };
            return Err(format!(
                "`{prefix}:{}()` is an extension function, which is not supported; {hint}",
                call.name.local
            ));
        }
        let name = call.name.local.as_str();
        if name == "has-class" {
            *p = has_class(&call.args)?;
            return Ok(Type::Bool);
        }
        if let Some((_, hint)) = NEWER.iter().find(|(n, _)| *n == name) {
            return Err(format!(
                "`{name}()` is XPath 2.0, which is not supported; {hint}"
            ));
        }
        let Some(&(_, min, max, result, node_args)) = FUNCTIONS.iter().find(|f| f.0 == name) else {
            let names = FUNCTIONS.iter().map(|f| f.0).chain(["has-class"]);
            let hint = match crate::reader::diagnostic::did_you_mean(name, names) {
                Some(near) => format!("did you mean `{near}()`?"),
                None => "use the XPath 1.0 core functions, or parsel's has-class()".to_string(),
            };
            return Err(format!("`{name}()` is not an XPath 1.0 function; {hint}"));
        };
        let got = call.args.len();
        if got < min || got > max {
            let wants = match (min, max) {
                (a, b) if a == b => format!("{a}"),
                (a, usize::MAX) => format!("at least {a}"),
                (a, b) => format!("{a} to {b}"),
            };
            return Err(format!(
                "`{name}()` takes {wants} argument{}, not {got}",
                if max == 1 && min == 1 { "" } else { "s" }
            ));
        }
        for arg in &mut call.args {
            if self.expr(arg)? != Type::Nodes && node_args {
                return Err(format!("the argument of `{name}()` must select nodes"));
            }
        }
        Ok(result)
    }
}

/// parsel's `has-class("a", "b")`: the context element has every class
/// named, as core XPath.
fn has_class(args: &[Expr]) -> Result<PrimaryExpr, String> {
    let mut tests = Vec::new();
    for arg in args {
        let class =
            match arg {
                Expr::Path(PathExpr::Filter(FilterExpr {
                    primary: PrimaryExpr::Literal(s),
                    predicates,
                })) if predicates.is_empty() => s.trim(),
                _ => return Err(
                    "`has-class()` takes class names as quoted strings, e.g. has-class(\"next\")"
                        .into(),
                ),
            };
        if class.is_empty() || class.contains(['\'', '"']) || class.contains(char::is_whitespace) {
            return Err(format!("`{class}` is not a class name for `has-class()`"));
        }
        tests.push(format!(
            "contains(concat(' ', normalize-space(@class), ' '), ' {class} ')"
        ));
    }
    if tests.is_empty() {
        return Err("`has-class()` needs at least one class name".into());
    }
    let rewritten = format!("({})", tests.join(" and "));
    match xpath_eval::parse(&rewritten) {
        Ok(Expr::Path(PathExpr::Filter(FilterExpr { primary, .. }))) => Ok(primary),
        _ => Err("`has-class()` could not be rewritten".into()),
    }
}

/// Whether a node-set expression's last step selects text, attributes or
/// comments rather than elements.
fn last_step_selects_values(e: &Expr) -> bool {
    let path = match e {
        Expr::Path(PathExpr::Location(p)) | Expr::Path(PathExpr::FilterLocation(_, p)) => p,
        Expr::Path(PathExpr::Filter(f)) => {
            return match &f.primary {
                PrimaryExpr::Parenthesized(inner) => last_step_selects_values(inner),
                _ => false,
            }
        }
        Expr::Union(a, b) => return last_step_selects_values(a) || last_step_selects_values(b),
        _ => return false,
    };
    path.steps.last().is_some_and(|s| {
        s.axis == Axis::Attribute
            || matches!(
                s.node_test,
                NodeTest::Text | NodeTest::Comment | NodeTest::ProcessingInstruction(_)
            )
    })
}

#[cfg(test)]
mod tests;
