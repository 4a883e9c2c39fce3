//! Files tests need: the repository root (tests run from it), copies of the
//! shipped spiders pointed at a fixture server, and temporary directories
//! that are removed when dropped.

use std::path::{Path, PathBuf};

/// The repository root: the workspace holding this crate.
pub fn root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .ancestors()
        .nth(2)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| manifest.to_path_buf())
}

/// A temporary directory named after `label`, removed when dropped.
pub fn temp_dir(label: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("crawlworker-{label}-"))
        .tempdir()
        .unwrap_or_else(|e| panic!("cannot create a temporary directory: {e}"))
}

/// Every file with extension `ext` in `dir`, sorted.
pub fn files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    out.sort();
    out
}

/// Sends the items of the spider file at `path` to the stream sink: a
/// `sink = "stream"` line in its `[items]` table (after the table's
/// header when it has one, else in a new table at the end).
pub fn items_to_stream(path: &Path) {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read spider {}: {e}", path.display()));
    let text = match text.find("\n[items]\n") {
        Some(at) => {
            let end = at + "\n[items]\n".len();
            format!("{}sink = \"stream\"\n{}", &text[..end], &text[end..])
        }
        // A super-table after its sub-tables is valid TOML.
        None => format!("{text}\n[items]\nsink = \"stream\"\n"),
    };
    std::fs::write(path, text)
        .unwrap_or_else(|e| panic!("cannot write spider {}: {e}", path.display()));
}

/// A copy of a shipped spider in `dir`, its URLs pointing at `base`
/// instead of the demo's default 127.0.0.1:8700.
pub fn spider_for(name: &str, base: &str, dir: &Path) -> PathBuf {
    let source = root().join("spiders").join(format!("{name}.toml"));
    let text = std::fs::read_to_string(&source)
        .unwrap_or_else(|e| panic!("cannot read spider {}: {e}", source.display()));
    let text = text.replace("http://127.0.0.1:8700", base);
    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    path
}

/// The `i`-th of many distinct loopback hosts in 127.`net`.0.0/16 (`net`
/// ≥ 1, so never 127.0.0.1 itself), for crawls over many hosts that reach
/// them all through one proxy on 127.0.0.1 ([`proxied_spider`]).
pub fn loopback_host(net: u8, i: usize) -> String {
    format!("127.{net}.{}.{}", i / 256 % 256, i % 256)
}

/// A spider named `name` (the file `dir/name.toml`) that scrapes one
/// item, the page's URL, from every `/fault/` page of a fixture server:
/// `settings` are its `[settings]` lines and `tables` any tables that go
/// before its items (a `[start]`, say).
pub fn fault_spider(dir: &Path, name: &str, settings: &str, tables: &str) -> PathBuf {
    let path = dir.join(format!("{name}.toml"));
    let text = format!(
        r#"
name = "{name}"

[settings]
{settings}

{tables}

[items.page]
url = {{ page = "url" }}

[[rules]]
name = "page"
match = '/fault/'
  [[rules.extract]]
  item = "page"
"#
    );
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    path
}

/// A spider named `hosts` in `dir` that fetches every host through the HTTP
/// proxy at `proxy` (a fixture server, which answers for any host) and
/// scrapes one item, the page's URL, from every `/fault/` page; `settings`
/// are added to its `[settings]` (private networks are allowed already).
pub fn proxied_spider(dir: &Path, proxy: std::net::SocketAddr, settings: &str) -> PathBuf {
    let settings =
        format!("allow_private_networks = true\nproxies = [\"http://{proxy}\"]\n{settings}");
    fault_spider(dir, "hosts", &settings, "")
}
