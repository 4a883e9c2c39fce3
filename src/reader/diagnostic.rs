//! Problems found in a spider file, each pinned to a place a person can open:
//! file, line:column, the field path, what is wrong and how to fix it.
//!
//! Validation collects every problem before it reports, so a broken file is
//! fixed in one round instead of one error per run.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// One problem in a spider file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub file: PathBuf,
    /// 1-based line of the offending key or value.
    pub line: usize,
    /// 1-based column, counted in characters.
    pub column: usize,
    /// Dotted field path, e.g. `rules[1].follow[0].css`.
    pub path: String,
    pub message: String,
    /// How to fix it; every problem we can name a fix for carries one.
    pub hint: Option<String>,
    /// A warning: worth fixing, but the file loads.
    pub warning: bool,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: ", self.file.display(), self.line, self.column)?;
        if self.warning {
            write!(f, "warning: ")?;
        }
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        write!(f, "{}", self.message)?;
        if let Some(hint) = &self.hint {
            write!(f, "\n  help: {hint}")?;
        }
        Ok(())
    }
}

/// Why a spider could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read {what} {}: {source}", path.display())]
    Read {
        /// What the file is (`spider file`, `configuration file`).
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}", render(.0))]
    Invalid(Vec<Diagnostic>),
}

impl LoadError {
    /// The problems found, empty when the file could not even be read.
    pub fn diagnostics(&self) -> &[Diagnostic] {
        match self {
            LoadError::Read { .. } => &[],
            LoadError::Invalid(d) => d,
        }
    }
}

fn render(diagnostics: &[Diagnostic]) -> String {
    let mut out = String::new();
    for (i, d) in diagnostics.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&d.to_string());
    }
    let n = diagnostics.iter().filter(|d| !d.warning).count();
    out.push_str(&format!(
        "\n{n} problem{} found; the spider was not loaded",
        if n == 1 { "" } else { "s" }
    ));
    out
}

/// Maps byte offsets of one source text to line:column.
pub(crate) struct SourceMap<'s> {
    file: &'s Path,
    text: &'s str,
    line_starts: Vec<usize>,
    /// The last offset mapped, with its line index and 0-based column: the
    /// next one on the same line further on counts only the characters in
    /// between, so many problems on one long line cost linear time.
    last: std::cell::Cell<(usize, usize, usize)>,
}

impl<'s> SourceMap<'s> {
    pub(crate) fn new(file: &'s Path, text: &'s str) -> Self {
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        SourceMap {
            file,
            text,
            line_starts,
            last: std::cell::Cell::new((0, 0, 0)),
        }
    }

    pub(crate) fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let line = match self.line_starts.binary_search(&offset) {
            Ok(i) => i,
            Err(i) => i - 1,
        };
        let (last_offset, last_line, last_column) = self.last.get();
        let (start, before) = if last_line == line && last_offset <= offset {
            (last_offset, last_column)
        } else {
            (self.line_starts[line], 0)
        };
        let column = before
            + self
                .text
                .get(start..offset)
                .map_or(offset - start, |s| s.chars().count());
        if self.text.is_char_boundary(offset) {
            self.last.set((offset, line, column));
        }
        (line + 1, column + 1)
    }

    pub(crate) fn diagnostic(
        &self,
        span: &Range<usize>,
        path: &str,
        message: String,
        hint: Option<String>,
    ) -> Diagnostic {
        let (line, column) = self.line_col(span.start);
        Diagnostic {
            file: self.file.to_path_buf(),
            line,
            column,
            path: path.to_string(),
            message,
            hint,
            warning: false,
        }
    }
}

/// A file that is not valid TOML at all.
pub(crate) fn syntax_error(path: &Path, text: &str, e: &toml_edit::TomlError) -> LoadError {
    let map = SourceMap::new(path, text);
    LoadError::Invalid(vec![map.diagnostic(
        &e.span().unwrap_or(0..0),
        "",
        format!("invalid TOML: {}", e.message().trim()),
        Some("check the quotes, brackets and `=` near this place".into()),
    )])
}

/// The closest of `candidates` to a misspelt `word`, when one is close enough
/// to be what was meant.
pub(crate) fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (strsim::jaro_winkler(word, c), c))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_characters() {
        let text = "a = 1\nb = \"中文\" x\n";
        let map = SourceMap::new(Path::new("s.toml"), text);
        assert_eq!(map.line_col(0), (1, 1));
        assert_eq!(map.line_col(6), (2, 1));
        let x = text.find('x').unwrap();
        assert_eq!(map.line_col(x), (2, 10));
        // Out of order and again: the remembered place does not leak.
        assert_eq!(map.line_col(6), (2, 1));
        assert_eq!(map.line_col(x), (2, 10));
        assert_eq!(map.line_col(x), (2, 10));
        assert_eq!(map.line_col(3), (1, 4));
    }

    #[test]
    fn suggests_close_names_only() {
        let keys = ["allowed_domains", "name", "rules"];
        assert_eq!(
            did_you_mean("alowed_domains", keys),
            Some("allowed_domains")
        );
        assert_eq!(did_you_mean("zzz", keys), None);
    }
}
