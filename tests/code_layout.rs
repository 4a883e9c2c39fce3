//! The code keeps the layout the project promises a newcomer, so it cannot
//! drift back as features land:
//!
//! - no hand-written function in `src/` is over 100 lines: a function that
//!   long is several steps that deserve names, and a reader has to hold all
//!   of it at once to change one line;
//! - no import circle between modules: the modules follow the data
//!   (`cli` → `spider` → `frontier` → `downloader` → `extract`), so each can
//!   be read, changed and tested knowing only what it uses; a circle makes
//!   two modules one unit with two names;
//! - every file in `src/` opens with a `//!` doc saying what it owns.
//!
//! `src/` is read as Rust syntax (with `syn`), not as text: comments, doc
//! comments and string literals never count as code, and a span gives each
//! function's first and last line. Test code (`#[cfg(test)]` and `#[test]`
//! items, files named `tests.rs` or `*_tests.rs`) follows none of the first
//! two rules: a test reads best as one straight story, and a test module
//! naturally uses its parent. `src/main.rs` is a crate of its own (it names
//! the library as `crawlworker::`), so it is outside the module graph.
//!
//! Exceptions are named with their reason in `LONG_ON_PURPOSE` and
//! `KNOWN_CIRCLES`; an exception that no longer applies fails too, so the
//! lists only shrink. Each check is a function of source text, so the tests
//! at the end feed it small synthetic crates that must fail.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::Path;
use std::sync::OnceLock;

use proc_macro2::{Span, TokenStream, TokenTree};
use syn::punctuated::Punctuated;
use syn::visit::{self, Visit};
use syn::{Attribute, Meta, Token};

use crawlworker_testkit::root;

/// Past this many lines (from the `fn` line to the closing brace) a
/// function fails the layout test.
const MAX_LINES: usize = 100;

/// Past this many lines a function is printed for the record: a function
/// over ~80 lines is usually two.
const WORTH_A_LOOK: usize = 80;

/// Functions allowed over `MAX_LINES`: (`module::Type::fn`, why). A name
/// here whose function is no longer over the limit fails the test.
const LONG_ON_PURPOSE: &[(&str, &str)] = &[];

/// Import circles allowed for now: (the modules of the circle, sorted; why).
/// A circle here that no longer exists fails the test.
const KNOWN_CIRCLES: &[(&[&str], &str)] = &[];

#[test]
fn no_function_in_src_is_over_100_lines() {
    let layout = src_layout();
    let allowed: BTreeMap<&str, &str> = LONG_ON_PURPOSE.iter().copied().collect();

    let mut worth_a_look: Vec<&Function> = layout
        .functions
        .iter()
        .filter(|f| f.lines > WORTH_A_LOOK)
        .collect();
    worth_a_look.sort_by_key(|f| std::cmp::Reverse(f.lines));
    println!("functions over {WORTH_A_LOOK} lines (for the record):");
    for f in &worth_a_look {
        println!("  {f}");
    }

    let over = over_limit(&layout.functions, MAX_LINES);
    let offenders: Vec<String> = over
        .iter()
        .filter(|f| !allowed.contains_key(f.name.as_str()))
        .map(|f| format!("  {f}"))
        .collect();
    let still_long: BTreeSet<&str> = over.iter().map(|f| f.name.as_str()).collect();
    let stale: Vec<String> = allowed
        .iter()
        .filter(|(name, _)| !still_long.contains(*name))
        .map(|(name, why)| format!("  {name} (\"{why}\")"))
        .collect();

    let mut problems = Vec::new();
    if !offenders.is_empty() {
        problems.push(format!(
            "functions over {MAX_LINES} lines; split them into named steps \
             (or name one in LONG_ON_PURPOSE with its reason):\n{}",
            offenders.join("\n")
        ));
    }
    if !stale.is_empty() {
        problems.push(format!(
            "LONG_ON_PURPOSE names functions that are no longer over {MAX_LINES} lines \
             (or no longer exist); remove them from the list:\n{}",
            stale.join("\n")
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

#[test]
fn no_import_circle_between_modules() {
    let layout = src_layout();
    let found = circles(&layout.edges);
    let known: BTreeMap<Vec<String>, &str> = KNOWN_CIRCLES
        .iter()
        .map(|(modules, why)| (modules.iter().map(|m| m.to_string()).collect(), *why))
        .collect();

    for circle in &found {
        if let Some(why) = known.get(&circle.modules) {
            println!("known import circle ({why}):\n{circle}");
        }
    }
    let new: Vec<String> = found
        .iter()
        .filter(|c| !known.contains_key(&c.modules))
        .map(|c| c.to_string())
        .collect();
    let present: BTreeSet<&Vec<String>> = found.iter().map(|c| &c.modules).collect();
    let stale: Vec<String> = known
        .iter()
        .filter(|(modules, _)| !present.contains(modules))
        .map(|(modules, why)| format!("  {} (\"{why}\")", modules.join(", ")))
        .collect();

    let mut problems = Vec::new();
    if !new.is_empty() {
        problems.push(format!(
            "import circles between modules; move what both sides need to one \
             of them, or below both:\n{}",
            new.join("\n")
        ));
    }
    if !stale.is_empty() {
        problems.push(format!(
            "KNOWN_CIRCLES names circles that no longer exist; remove them from \
             the list:\n{}",
            stale.join("\n")
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

#[test]
fn every_source_file_starts_with_a_module_doc() {
    let missing = &src_layout().undocumented;
    assert!(
        missing.is_empty(),
        "files in src/ that do not open with a `//!` doc saying what the module \
         owns and what it does not:\n  {}",
        missing.join("\n  ")
    );
}

// ---------------------------------------------------------------------------
// The checks, as functions of source text.
// ---------------------------------------------------------------------------

/// What the checks need to know about a crate's sources.
#[derive(Default)]
struct Layout {
    /// Every hand-written, non-test function.
    functions: Vec<Function>,
    /// Module → module it names (neither an ancestor of the other) → where
    /// it first does so.
    edges: BTreeMap<String, BTreeMap<String, Place>>,
    /// Files that do not open with a `//!` doc.
    undocumented: Vec<String>,
}

struct Function {
    /// `module::Type::fn` (nested functions also name their outer function).
    name: String,
    place: Place,
    /// From the line of `fn` (or `pub`) to the line of the closing brace.
    lines: usize,
}

impl std::fmt::Display for Function {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at {}: {} lines", self.name, self.place, self.lines)
    }
}

#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Place {
    file: String,
    line: usize,
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// The layout of `src/`, read once for all the tests of this module.
fn src_layout() -> &'static Layout {
    static LAYOUT: OnceLock<Layout> = OnceLock::new();
    LAYOUT.get_or_init(|| {
        let root = root();
        let mut files = Vec::new();
        collect_rust_files(&root, &root.join("src"), &mut files);
        assert!(
            files.len() > 10,
            "found only {} Rust files under {}: is the test run from the workspace?",
            files.len(),
            root.join("src").display()
        );
        let refs: Vec<(&str, &str)> = files
            .iter()
            .map(|(p, t)| (p.as_str(), t.as_str()))
            .collect();
        layout(&refs)
    })
}

/// Every `.rs` file under `dir`, as (path relative to `root`, text), sorted.
fn collect_rust_files(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
    let mut paths: Vec<_> = entries
        .map(|entry| {
            entry
                .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
                .path()
        })
        .collect();
    paths.sort();
    for path in paths {
        if path.is_dir() {
            collect_rust_files(root, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
            let relative = path.strip_prefix(root).unwrap_or(&path);
            out.push((relative.to_string_lossy().replace('\\', "/"), text));
        }
    }
}

/// The layout of a crate given as (path like `src/a/b.rs`, source text).
fn layout(files: &[(&str, &str)]) -> Layout {
    let mut layout = Layout::default();
    let mut modules: BTreeSet<Vec<String>> = BTreeSet::new();
    let mut references = Vec::new();
    let mut aliases = BTreeMap::new();
    for (path, text) in files {
        if !starts_with_module_doc(text) {
            layout.undocumented.push(path.to_string());
        }
    }
    let code: Vec<(&str, &str)> = files
        .iter()
        .filter(|(path, _)| !is_test_file(path))
        .copied()
        .collect();
    for scan in scan_in_parallel(&code) {
        layout.functions.extend(scan.functions);
        modules.extend(scan.modules);
        references.extend(scan.references);
        aliases.extend(scan.aliases);
    }
    for reference in &references {
        let Some(path) = resolve(&reference.target, &reference.from, &modules, &aliases, 0) else {
            continue;
        };
        let target = owning_module(&path, &modules);
        if related(&reference.from, &target) {
            continue;
        }
        let place = layout
            .edges
            .entry(reference.from.join("::"))
            .or_default()
            .entry(target.join("::"))
            .or_insert_with(|| reference.place.clone());
        if reference.place < *place {
            *place = reference.place.clone();
        }
    }
    layout
}

/// What one file holds, before the other files are known.
#[derive(Default)]
struct FileScan {
    functions: Vec<Function>,
    /// The file's module and its inline modules.
    modules: BTreeSet<Vec<String>>,
    references: Vec<Reference>,
    aliases: Aliases,
}

/// `scan_file` on every file, in file order, on every core: parsing is
/// nearly all of this test's time.
fn scan_in_parallel(files: &[(&str, &str)]) -> Vec<FileScan> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
    let mut scans: Vec<(usize, FileScan)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|first| {
                scope.spawn(move || {
                    (first..files.len())
                        .step_by(threads)
                        .map(|i| (i, scan_file(files[i].0, files[i].1)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            // A file that cannot be parsed fails the test with its own message.
            .flat_map(|worker| {
                worker
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });
    scans.sort_by_key(|(i, _)| *i);
    scans.into_iter().map(|(_, scan)| scan).collect()
}

/// One file's functions, modules, references and aliases. A file that does
/// not parse fails here, loudly: the checks cannot vouch for what they
/// cannot read.
fn scan_file(path: &str, text: &str) -> FileScan {
    let ast = syn::parse_file(text).unwrap_or_else(|e| {
        let at = e.span().start();
        panic!("cannot parse {path}:{}:{}: {e}", at.line, at.column + 1)
    });
    let mut scanner = Scanner {
        file: path,
        in_graph: path != "src/main.rs",
        module: module_of(path),
        owners: Vec::new(),
        found: FileScan::default(),
    };
    scanner.add_module();
    scanner.visit_file(&ast);
    scanner.found
}

/// Files of test code: by the project's convention they hold only a
/// `#[cfg(test)]` module's body.
fn is_test_file(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name == "tests.rs" || name.ends_with("_tests.rs")
}

fn starts_with_module_doc(text: &str) -> bool {
    text.trim_start().starts_with("//!")
}

/// `src/a/b.rs` and `src/a/b/mod.rs` → `a::b`; `src/lib.rs` → the root;
/// `src/main.rs` → `main` (the binary, a crate of its own).
fn module_of(path: &str) -> Vec<String> {
    let inside = path.strip_prefix("src/").unwrap_or(path);
    let inside = inside.strip_suffix(".rs").unwrap_or(inside);
    let mut parts: Vec<String> = inside.split('/').map(str::to_string).collect();
    match parts.last().map(String::as_str) {
        Some("mod") | Some("lib") => {
            parts.pop();
        }
        _ => {}
    }
    parts
}

/// A module is related to its ancestors and descendants: a parent declares
/// and re-exports its children, children use their parent's items.
fn related(a: &[String], b: &[String]) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// The deepest known module a path goes through (the root if none).
fn owning_module(path: &[String], modules: &BTreeSet<Vec<String>>) -> Vec<String> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|prefix| modules.contains(prefix))
        .unwrap_or_default()
}

/// A path as written, before knowing every module of the crate.
#[derive(Clone)]
enum Target {
    /// From the crate root (`crate::`, or `self::`/`super::` made absolute).
    Absolute(Vec<String>),
    /// Starts with a plain name: a child module, a name brought in by `use`,
    /// or something outside the crate (another crate, a local, a generic).
    Plain(Vec<String>),
}

struct Reference {
    from: Vec<String>,
    target: Target,
    place: Place,
}

/// Names a module's `use` declarations bring in: (module, name) → path.
type Aliases = BTreeMap<(Vec<String>, String), Target>;

/// The absolute path a reference names inside this crate, if it does.
fn resolve(
    target: &Target,
    from: &[String],
    modules: &BTreeSet<Vec<String>>,
    aliases: &Aliases,
    depth: usize,
) -> Option<Vec<String>> {
    match target {
        Target::Absolute(path) => Some(path.clone()),
        Target::Plain(path) => {
            let first = path.first()?;
            let mut child = from.to_vec();
            child.push(first.clone());
            if modules.contains(&child) {
                child.extend(path[1..].iter().cloned());
                return Some(child);
            }
            // `use a::b as c;` then `c::d`: follow the alias, a few hops at
            // most (`use x as x;` must not loop).
            if depth > 4 {
                return None;
            }
            let alias = aliases.get(&(from.to_vec(), first.clone()))?;
            let mut base = resolve(alias, from, modules, aliases, depth + 1)?;
            base.extend(path[1..].iter().cloned());
            Some(base)
        }
    }
}

/// A path's segments (as written) → a `Target` from module `module`.
/// `None` for what cannot name this crate's modules.
fn classify(module: &[String], segments: &[String]) -> Option<Target> {
    let first = segments.first()?;
    match first.as_str() {
        "crate" => Some(Target::Absolute(segments[1..].to_vec())),
        "self" => {
            let mut path = module.to_vec();
            path.extend(segments[1..].iter().cloned());
            Some(Target::Absolute(path))
        }
        "super" => {
            let ups = segments.iter().take_while(|s| *s == "super").count();
            let base = module.get(..module.len().checked_sub(ups)?)?;
            let mut path = base.to_vec();
            path.extend(segments[ups..].iter().cloned());
            Some(Target::Absolute(path))
        }
        "$crate" => None,
        _ => Some(Target::Plain(segments.to_vec())),
    }
}

/// Walks one file's syntax tree, skipping test code.
struct Scanner<'a> {
    file: &'a str,
    /// False for the binary's `main.rs`: its paths name its own crate.
    in_graph: bool,
    /// The module being walked (inline `mod x { }` blocks included).
    module: Vec<String>,
    /// Enclosing impl types, traits and functions, for functions' names.
    owners: Vec<String>,
    found: FileScan,
}

impl Scanner<'_> {
    fn place(&self, span: Span) -> Place {
        Place {
            file: self.file.to_string(),
            line: span.start().line,
        }
    }

    /// Records a function from its first line to its last, then walks its
    /// body with its name as the owner of anything nested in it.
    fn function(
        &mut self,
        name: &syn::Ident,
        first: Span,
        last: Span,
        walk: impl FnOnce(&mut Self),
    ) {
        let mut qualified = self.module.clone();
        qualified.extend(self.owners.iter().cloned());
        qualified.push(name.to_string());
        self.found.functions.push(Function {
            name: qualified.join("::"),
            place: self.place(first),
            lines: last.end().line + 1 - first.start().line,
        });
        self.owners.push(name.to_string());
        walk(self);
        self.owners.pop();
    }

    fn within(&mut self, owner: String, walk: impl FnOnce(&mut Self)) {
        self.owners.push(owner);
        walk(self);
        self.owners.pop();
    }

    fn add_module(&mut self) {
        if self.in_graph {
            self.found.modules.insert(self.module.clone());
        }
    }

    fn reference(&mut self, segments: &[String], span: Span) {
        if !self.in_graph {
            return;
        }
        if let Some(target) = classify(&self.module, segments) {
            self.found.references.push(Reference {
                from: self.module.clone(),
                target,
                place: self.place(span),
            });
        }
    }

    /// One `use` tree: each leaf is a reference, and each name it binds is
    /// an alias later plain paths of this module may start with.
    fn use_tree(&mut self, tree: &syn::UseTree, prefix: &mut Vec<String>) {
        let (segments, binding, span) = match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(&p.tree, prefix);
                prefix.pop();
                return;
            }
            syn::UseTree::Group(g) => {
                for item in &g.items {
                    self.use_tree(item, prefix);
                }
                return;
            }
            syn::UseTree::Name(n) => (
                leaf(prefix, &n.ident),
                bound_name(prefix, &n.ident),
                n.ident.span(),
            ),
            syn::UseTree::Rename(r) => (
                leaf(prefix, &r.ident),
                Some(r.rename.to_string()),
                r.ident.span(),
            ),
            syn::UseTree::Glob(g) => (prefix.clone(), None, g.star_token.span),
        };
        if segments.is_empty() {
            return;
        }
        self.reference(&segments, span);
        if let (Some(name), Some(target)) = (binding, classify(&self.module, &segments)) {
            if name != "_" && self.in_graph {
                self.found
                    .aliases
                    .insert((self.module.clone(), name), target);
            }
        }
    }

    /// Paths inside a macro's tokens (`format!`, `tokio::select!`, …): the
    /// parser does not read them as code, so they are read token by token.
    fn macro_tokens(&mut self, tokens: TokenStream) {
        let tokens: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < tokens.len() {
            match &tokens[i] {
                TokenTree::Group(g) => {
                    self.macro_tokens(g.stream());
                    i += 1;
                }
                TokenTree::Ident(first) if !follows_path_separator(&tokens, i) => {
                    let mut segments = vec![first.to_string()];
                    let mut next = i + 1;
                    while let Some(ident) = path_step(&tokens, next) {
                        segments.push(ident);
                        next += 3;
                    }
                    if segments.len() > 1 {
                        self.reference(&segments, first.span());
                    }
                    i = next;
                }
                _ => i += 1,
            }
        }
    }
}

/// The path a `use` leaf names: `a::b::{self}` names `a::b`.
fn leaf(prefix: &[String], ident: &syn::Ident) -> Vec<String> {
    let mut path = prefix.to_vec();
    if ident != "self" {
        path.push(ident.to_string());
    }
    path
}

fn bound_name(prefix: &[String], ident: &syn::Ident) -> Option<String> {
    if ident == "self" {
        prefix.last().cloned()
    } else {
        Some(ident.to_string())
    }
}

/// `::` then an identifier at `at`: the identifier.
fn path_step(tokens: &[TokenTree], at: usize) -> Option<String> {
    match (tokens.get(at), tokens.get(at + 1), tokens.get(at + 2)) {
        (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)), Some(TokenTree::Ident(ident)))
            if a.as_char() == ':' && b.as_char() == ':' =>
        {
            Some(ident.to_string())
        }
        _ => None,
    }
}

fn follows_path_separator(tokens: &[TokenTree], at: usize) -> bool {
    at >= 2
        && matches!(&tokens[at - 1], TokenTree::Punct(p) if p.as_char() == ':')
        && matches!(&tokens[at - 2], TokenTree::Punct(p) if p.as_char() == ':')
}

/// The first line of a function: `pub`, `const`, `async`, `unsafe`,
/// `extern` or `fn`, whichever comes first (attributes and doc comments
/// above it are not the function's length).
fn first_span(vis: Option<&syn::Visibility>, sig: &syn::Signature) -> Span {
    let vis = match vis {
        Some(syn::Visibility::Public(p)) => Some(p.span),
        Some(syn::Visibility::Restricted(r)) => Some(r.pub_token.span),
        _ => None,
    };
    vis.or(sig.constness.map(|t| t.span))
        .or(sig.asyncness.map(|t| t.span))
        .or(sig.unsafety.map(|t| t.span))
        .or(sig.abi.as_ref().map(|a| a.extern_token.span))
        .unwrap_or(sig.fn_token.span)
}

/// `#[cfg(test)]`, `#[cfg(all(test, …))]`, `#[test]`, `#[tokio::test]`.
fn is_test_code(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|attr| {
        let path = attr.path();
        if path.segments.last().is_some_and(|s| s.ident == "test") {
            return true;
        }
        path.is_ident("cfg")
            && attr
                .parse_args::<Meta>()
                .is_ok_and(|meta| needs_test(&meta))
    })
}

/// A `cfg` predicate that holds only when compiling tests.
fn needs_test(meta: &Meta) -> bool {
    match meta {
        Meta::Path(p) => p.is_ident("test"),
        Meta::List(list) if list.path.is_ident("all") => list
            .parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated)
            .is_ok_and(|all| all.iter().any(needs_test)),
        _ => false,
    }
}

fn item_attrs(item: &syn::Item) -> &[Attribute] {
    use syn::Item;
    match item {
        Item::Const(i) => &i.attrs,
        Item::Enum(i) => &i.attrs,
        Item::ExternCrate(i) => &i.attrs,
        Item::Fn(i) => &i.attrs,
        Item::ForeignMod(i) => &i.attrs,
        Item::Impl(i) => &i.attrs,
        Item::Macro(i) => &i.attrs,
        Item::Mod(i) => &i.attrs,
        Item::Static(i) => &i.attrs,
        Item::Struct(i) => &i.attrs,
        Item::Trait(i) => &i.attrs,
        Item::TraitAlias(i) => &i.attrs,
        Item::Type(i) => &i.attrs,
        Item::Union(i) => &i.attrs,
        Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

fn impl_item_attrs(item: &syn::ImplItem) -> &[Attribute] {
    match item {
        syn::ImplItem::Const(i) => &i.attrs,
        syn::ImplItem::Fn(i) => &i.attrs,
        syn::ImplItem::Type(i) => &i.attrs,
        syn::ImplItem::Macro(i) => &i.attrs,
        _ => &[],
    }
}

fn trait_item_attrs(item: &syn::TraitItem) -> &[Attribute] {
    match item {
        syn::TraitItem::Const(i) => &i.attrs,
        syn::TraitItem::Fn(i) => &i.attrs,
        syn::TraitItem::Type(i) => &i.attrs,
        syn::TraitItem::Macro(i) => &i.attrs,
        _ => &[],
    }
}

/// The name an impl block's functions are listed under: `Type` of `impl
/// Type` and of `impl Trait for Type`.
fn type_name(ty: &syn::Type) -> String {
    match ty {
        syn::Type::Path(p) => p
            .path
            .segments
            .last()
            .map_or_else(|| "_".to_string(), |s| s.ident.to_string()),
        syn::Type::Reference(r) => type_name(&r.elem),
        _ => "_".to_string(),
    }
}

impl<'ast> Visit<'ast> for Scanner<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if !is_test_code(item_attrs(item)) {
            visit::visit_item(self, item);
        }
    }

    fn visit_impl_item(&mut self, item: &'ast syn::ImplItem) {
        if !is_test_code(impl_item_attrs(item)) {
            visit::visit_impl_item(self, item);
        }
    }

    fn visit_trait_item(&mut self, item: &'ast syn::TraitItem) {
        if !is_test_code(trait_item_attrs(item)) {
            visit::visit_trait_item(self, item);
        }
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        // `mod x;` is a file of its own, walked on its own.
        if item.content.is_some() {
            self.module.push(item.ident.to_string());
            self.add_module();
            let owners = std::mem::take(&mut self.owners);
            visit::visit_item_mod(self, item);
            self.owners = owners;
            self.module.pop();
        }
    }

    fn visit_item_fn(&mut self, item: &'ast syn::ItemFn) {
        let first = first_span(Some(&item.vis), &item.sig);
        let last = item.block.brace_token.span.close();
        self.function(&item.sig.ident, first, last, |s| {
            visit::visit_item_fn(s, item)
        });
    }

    fn visit_impl_item_fn(&mut self, item: &'ast syn::ImplItemFn) {
        let first = first_span(Some(&item.vis), &item.sig);
        let last = item.block.brace_token.span.close();
        self.function(&item.sig.ident, first, last, |s| {
            visit::visit_impl_item_fn(s, item)
        });
    }

    fn visit_trait_item_fn(&mut self, item: &'ast syn::TraitItemFn) {
        let first = first_span(None, &item.sig);
        let last = match (&item.default, &item.semi_token) {
            (Some(body), _) => body.brace_token.span.close(),
            (None, Some(semi)) => semi.span,
            (None, None) => item.sig.fn_token.span,
        };
        self.function(&item.sig.ident, first, last, |s| {
            visit::visit_trait_item_fn(s, item)
        });
    }

    fn visit_item_impl(&mut self, item: &'ast syn::ItemImpl) {
        self.within(type_name(&item.self_ty), |s| {
            visit::visit_item_impl(s, item)
        });
    }

    fn visit_item_trait(&mut self, item: &'ast syn::ItemTrait) {
        self.within(item.ident.to_string(), |s| visit::visit_item_trait(s, item));
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        // `use ::x` names another crate.
        if item.leading_colon.is_none() {
            self.use_tree(&item.tree, &mut Vec::new());
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        // A lone name (`x`, `Foo`) is a local, an item or an import whose
        // `use` already counted; only `a::b` can name another module.
        if path.leading_colon.is_none() && path.segments.len() > 1 {
            let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
            self.reference(&segments, path.segments[0].ident.span());
        }
        visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        visit::visit_macro(self, mac);
        self.macro_tokens(mac.tokens.clone());
    }

    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {
        // `pub(crate)`, `pub(super)`, `pub(in a::b)` say who may see an
        // item; they use nothing.
    }
}

/// A strongly connected set of modules: each reaches every other by imports.
struct Circle {
    /// Sorted.
    modules: Vec<String>,
    /// The shortest way round from the first module back to itself.
    chain: Vec<String>,
    /// Every import inside the circle, with where it is first written.
    edges: Vec<(String, String, Place)>,
}

impl std::fmt::Display for Circle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "  {}", self.chain.join(" -> "))?;
        for (from, to, place) in &self.edges {
            writeln!(f, "    {from} -> {to}: {place}")?;
        }
        Ok(())
    }
}

/// Every import circle of the graph (Tarjan's strongly connected components
/// with more than one module).
fn circles(edges: &BTreeMap<String, BTreeMap<String, Place>>) -> Vec<Circle> {
    let mut tarjan = Tarjan {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        components: Vec::new(),
    };
    let nodes: BTreeSet<&str> = edges
        .iter()
        .flat_map(|(from, tos)| {
            std::iter::once(from.as_str()).chain(tos.keys().map(String::as_str))
        })
        .collect();
    for node in nodes {
        if !tarjan.index.contains_key(node) {
            tarjan.connect(node);
        }
    }
    let mut found: Vec<Circle> = tarjan
        .components
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|mut modules| {
            modules.sort();
            circle(edges, modules)
        })
        .collect();
    found.sort_by(|a, b| a.modules.cmp(&b.modules));
    found
}

fn circle(edges: &BTreeMap<String, BTreeMap<String, Place>>, modules: Vec<String>) -> Circle {
    let inside: BTreeSet<&str> = modules.iter().map(String::as_str).collect();
    let inner = |from: &str| {
        edges
            .get(from)
            .into_iter()
            .flatten()
            .filter(|(to, _)| inside.contains(to.as_str()))
    };
    // Breadth first from the first module until an edge leads back to it.
    let start = modules[0].as_str();
    let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    let mut last = start;
    'search: while let Some(at) = queue.pop_front() {
        for (to, _) in inner(at) {
            if to == start {
                last = at;
                break 'search;
            }
            if !came_from.contains_key(to.as_str()) {
                came_from.insert(to, at);
                queue.push_back(to);
            }
        }
    }
    let mut chain = vec![start.to_string()];
    let mut at = last;
    while at != start {
        chain.push(at.to_string());
        at = came_from[at];
    }
    chain[1..].reverse();
    chain.push(start.to_string());
    let edges = modules
        .iter()
        .flat_map(|from| {
            inner(from).map(move |(to, place)| (from.clone(), to.clone(), place.clone()))
        })
        .collect();
    Circle {
        modules,
        chain,
        edges,
    }
}

struct Tarjan<'a> {
    edges: &'a BTreeMap<String, BTreeMap<String, Place>>,
    index: BTreeMap<&'a str, usize>,
    low: BTreeMap<&'a str, usize>,
    stack: Vec<&'a str>,
    on_stack: BTreeSet<&'a str>,
    components: Vec<Vec<String>>,
}

impl<'a> Tarjan<'a> {
    fn connect(&mut self, node: &'a str) {
        let index = self.index.len();
        self.index.insert(node, index);
        self.low.insert(node, index);
        self.stack.push(node);
        self.on_stack.insert(node);
        let edges = self.edges;
        for next in edges.get(node).into_iter().flat_map(|tos| tos.keys()) {
            let next = next.as_str();
            if !self.index.contains_key(next) {
                self.connect(next);
                let low = self.low[node].min(self.low[next]);
                self.low.insert(node, low);
            } else if self.on_stack.contains(next) {
                let low = self.low[node].min(self.index[next]);
                self.low.insert(node, low);
            }
        }
        if self.low[node] == self.index[node] {
            let mut component = Vec::new();
            while let Some(member) = self.stack.pop() {
                self.on_stack.remove(member);
                component.push(member.to_string());
                if member == node {
                    break;
                }
            }
            self.components.push(component);
        }
    }
}

fn over_limit(functions: &[Function], limit: usize) -> Vec<&Function> {
    functions.iter().filter(|f| f.lines > limit).collect()
}

// ---------------------------------------------------------------------------
// The checks catch what they should, on small synthetic crates.
// ---------------------------------------------------------------------------

/// A function whose `fn` line to closing brace spans `lines` lines.
fn function_of(name: &str, lines: usize) -> String {
    let body: String = (0..lines - 2)
        .map(|i| format!("    let _x{i} = {i};\n"))
        .collect();
    format!("fn {name}() {{\n{body}}}\n")
}

#[test]
fn a_function_over_100_lines_is_caught_and_test_code_is_not() {
    let source = format!(
        "//! A module.\n\
         /// A doc comment is not the function's length.\n\
         #[inline]\n\
         pub {long}\n\
         {at_limit}\n\
         struct S;\n\
         impl S {{\n    {method}}}\n\
         fn outer() {{\n{nested}}}\n\
         #[cfg(test)]\nmod tests {{\n{in_tests}}}\n\
         #[test]\n{test_fn}\n",
        long = function_of("long", 101),
        at_limit = function_of("at_limit", 100),
        method = function_of("method", 150),
        nested = function_of("nested", 120),
        in_tests = function_of("in_tests", 200),
        test_fn = function_of("test_fn", 200),
    );
    let tests_file = format!("//! Tests.\n{}", function_of("in_a_test_file", 300));
    let crate_ = layout(&[
        ("src/lib.rs", "//! Root.\npub mod a;\n"),
        ("src/a.rs", &source),
        ("src/a/tests.rs", &tests_file),
    ]);
    let over: Vec<(&str, usize, usize)> = over_limit(&crate_.functions, MAX_LINES)
        .iter()
        .map(|f| (f.name.as_str(), f.place.line, f.lines))
        .collect();
    let line_of = |text: &str| {
        let index = source.lines().position(|l| l.contains(text));
        index.map_or(0, |i| i + 1)
    };
    assert_eq!(
        over,
        [
            ("a::long", line_of("pub fn long("), 101),
            ("a::S::method", line_of("fn method("), 150),
            ("a::outer", line_of("fn outer("), 122),
            ("a::outer::nested", line_of("fn nested("), 120),
        ]
    );
    let at_limit = crate_.functions.iter().find(|f| f.name == "a::at_limit");
    assert_eq!(at_limit.map(|f| f.lines), Some(100));
}

#[test]
fn an_import_circle_is_caught_with_where_each_import_is() {
    let crate_ = layout(&[
        (
            "src/lib.rs",
            "//! Root.\npub mod a;\npub mod b;\npub mod x;\npub mod d;\npub fn f() {}\n",
        ),
        // a -> b by `crate::`, in a `use` group.
        ("src/a.rs", "//! A.\nuse crate::{b::B, f};\npub struct A;\n"),
        // b -> x::c through an alias of the parent x, in code only.
        (
            "src/b.rs",
            "//! B.\nuse crate::x as ex;\npub struct B;\nfn g() {\n    ex::c::h();\n}\n",
        ),
        ("src/x/mod.rs", "//! X.\npub mod c;\n"),
        // x::c -> a inside a macro's tokens, by `super::super::`.
        (
            "src/x/c.rs",
            "//! C.\npub fn h() {\n    println!(\"{:?}\", super::super::a::A);\n}\n",
        ),
        // d names b only in comments, strings and test code, and names its
        // own child: no edge.
        (
            "src/d/mod.rs",
            "//! D uses crate::a::A in prose.\n\
             mod e;\n\
             // crate::b::B\n\
             /// crate::b::B\n\
             const S: &str = \"crate::b::B\";\n\
             fn k() { e::m(); }\n\
             #[cfg(test)]\nmod tests { use crate::b::B; }\n",
        ),
        (
            "src/d/e.rs",
            "//! E uses its parent.\npub fn m() { super::k(); }\n",
        ),
    ]);
    let found = circles(&crate_.edges);
    assert_eq!(
        found.len(),
        1,
        "{}",
        found.iter().map(ToString::to_string).collect::<String>()
    );
    let circle = &found[0];
    assert_eq!(circle.modules, ["a", "b", "x::c"]);
    assert_eq!(circle.chain, ["a", "b", "x::c", "a"]);
    let places: Vec<String> = circle
        .edges
        .iter()
        .map(|(from, to, place)| format!("{from} -> {to}: {place}"))
        .collect();
    assert_eq!(
        places,
        [
            "a -> b: src/a.rs:2",
            "b -> x::c: src/b.rs:5",
            "x::c -> a: src/x/c.rs:3"
        ]
    );
    assert!(
        !crate_.edges.contains_key("d"),
        "d names b only in comments and tests"
    );
    assert!(
        !crate_.edges.contains_key("d::e"),
        "a child using its parent is no circle"
    );
}

#[test]
fn a_file_without_a_module_doc_is_caught() {
    let crate_ = layout(&[
        (
            "src/lib.rs",
            "\n  //! Root: whitespace before the doc is fine.\nmod a;\nmod b;\n",
        ),
        (
            "src/a.rs",
            "/// An item doc is not a module doc.\npub struct A;\n",
        ),
        ("src/b.rs", "#![allow(dead_code)]\n//! Too late.\n"),
    ]);
    assert_eq!(crate_.undocumented, ["src/a.rs", "src/b.rs"]);
}
