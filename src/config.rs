//! The worker configuration file (`config/crawlworker.toml`): the settings
//! layer between the built-in defaults and each spider's `[settings]`. It is
//! validated like a spider file, with file:line:column for every problem.

use std::path::{Path, PathBuf};

use crate::reader::diagnostic::{syntax_error, LoadError};
use crate::reader::Reader;
use crate::settings::Overrides;

/// Where the configuration is looked for when no path is given.
pub const DEFAULT_PATH: &str = "config/crawlworker.toml";

/// The worker configuration.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// The file it came from; `None` when no file exists.
    pub path: Option<PathBuf>,
    pub settings: Overrides,
}

impl Config {
    /// Loads `path`, or [`DEFAULT_PATH`] if it exists, or nothing.
    pub fn load(path: Option<&Path>) -> Result<Config, LoadError> {
        let path = match path {
            Some(p) => p.to_path_buf(),
            None if Path::new(DEFAULT_PATH).exists() => PathBuf::from(DEFAULT_PATH),
            None => return Ok(Config::default()),
        };
        let text = std::fs::read_to_string(&path).map_err(|source| LoadError::Read {
            what: "configuration file",
            path: path.clone(),
            source,
        })?;
        let doc = toml_edit::Document::parse(text.as_str())
            .map_err(|e| syntax_error(&path, &text, &e))?;
        let reader = Reader::new(&path, &text);
        let root = reader.root(doc.as_table());
        let settings = Overrides::read_section(&root);
        root.finish();
        let problems = reader.into_problems();
        if !problems.is_empty() {
            return Err(LoadError::Invalid(problems));
        }
        Ok(Config {
            path: Some(path),
            settings,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file holding `text`, in a directory removed with the returned guard.
    fn write(name: &str, text: &str) -> (PathBuf, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        (p, dir)
    }

    #[test]
    fn reads_settings_and_reports_problems_with_positions() {
        let (ok, _d1) = write("ok.toml", "[settings]\nretry_times = 5\n");
        assert_eq!(
            Config::load(Some(&ok)).unwrap().settings.retry_times,
            Some(5)
        );
        let (bad, _d2) = write("bad.toml", "[settings]\nretry_time = 5\n[redis]\n");
        let err = Config::load(Some(&bad)).unwrap_err().to_string();
        assert!(
            err.contains("bad.toml:2:1: settings.retry_time: unknown key `retry_time`"),
            "{err}"
        );
        assert!(err.contains("did you mean `retry_times`?"), "{err}");
        assert!(err.contains("bad.toml:3:2: redis: unknown key"), "{err}");
    }

    #[test]
    fn the_shipped_config_is_valid() {
        let text = include_str!("../config/crawlworker.toml");
        let (p, _d) = write("shipped.toml", text);
        assert!(Config::load(Some(&p)).is_ok());
    }
}
