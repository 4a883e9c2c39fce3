//! The settings a spider runs with, each with where its value came from:
//! the built-in default, the configuration file, the spider's own
//! `[settings]`, an environment variable or a command-line flag, and the
//! values of the lower layers it overrode. `crawlworker settings SPIDER`
//! prints them all; a worker logs those that are not at their default
//! when it starts. Secrets are hidden here: proxy passwords, and the
//! values of headers that carry credentials.
//!
//! The layering itself is [`super::layered`]'s; this module only explains
//! its result.

use std::path::PathBuf;

use super::{layered, Overrides, Settings};

/// Where one layer of settings comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The worker configuration file.
    ConfigFile(PathBuf),
    /// A spider file's `[settings]`.
    Spider(PathBuf),
    /// An environment variable named after the setting, `CRAWLWORKER_<NAME>`.
    Environment,
    /// One environment variable for one setting (`REDIS_URL`).
    Variable(&'static str),
    /// Command-line flags.
    Flags,
}

/// One layer of settings and where it comes from.
#[derive(Debug, Clone)]
pub struct Layer {
    pub source: Source,
    pub overrides: Overrides,
}

/// One setting as a spider runs with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Effective {
    pub name: &'static str,
    /// Its value, as a settings file would write it (secrets hidden).
    pub value: String,
    /// Where it came from: `default`, or the layer that set it last.
    pub from: String,
    /// The lower layers that set it too, and their values, lowest first.
    pub over: Vec<(String, String)>,
    /// Whether it differs from the built-in default.
    pub changed: bool,
}

impl Source {
    /// The layer, as people name it, for setting `name`.
    fn describe(&self, name: &str) -> String {
        match self {
            Source::ConfigFile(p) => format!("config file {}", p.display()),
            Source::Spider(p) => format!("spider {}", p.display()),
            Source::Environment => format!("environment CRAWLWORKER_{}", name.to_ascii_uppercase()),
            Source::Variable(var) => format!("environment {var}"),
            Source::Flags => match name {
                "redis_url" => "flag --redis".to_string(),
                "concurrent_requests" => "flag --concurrency".to_string(),
                _ => "command line".to_string(),
            },
        }
    }
}

/// The settings `layers` (lowest first) build, and every setting of them
/// explained, in the catalogue's order.
pub fn explain(layers: &[Layer]) -> (Settings, Vec<Effective>) {
    let refs: Vec<&Overrides> = layers.iter().map(|l| &l.overrides).collect();
    let settings = layered(&refs);
    let defaults = hidden(Settings::default().shown());
    let set: Vec<Vec<(&'static str, String)>> =
        layers.iter().map(|l| hidden(l.overrides.shown())).collect();
    let explained = hidden(settings.shown())
        .into_iter()
        .zip(defaults)
        .map(|((name, value), (_, default))| {
            let mut setters: Vec<(String, String)> = layers
                .iter()
                .zip(&set)
                .filter_map(|(layer, values)| {
                    let (_, v) = values.iter().find(|(n, _)| *n == name)?;
                    Some((layer.source.describe(name), v.clone()))
                })
                .collect();
            let from = setters
                .pop()
                .map_or_else(|| "default".to_string(), |(from, _)| from);
            Effective {
                name,
                changed: value != default,
                value,
                from,
                over: setters,
            }
        })
        .collect();
    (settings, explained)
}

/// Hides the secrets of shown values: proxy credentials, and the values of
/// headers that carry credentials.
fn hidden(mut shown: Vec<(&'static str, String)>) -> Vec<(&'static str, String)> {
    for (name, value) in &mut shown {
        match *name {
            "proxies" => {
                if let Ok(list) = serde_json::from_str::<Vec<String>>(value) {
                    let list: Vec<String> = list.iter().map(|p| super::proxy::redact(p)).collect();
                    *value = format!("{list:?}");
                }
            }
            "default_request_headers" => {
                if let Ok(mut map) =
                    serde_json::from_str::<std::collections::BTreeMap<String, String>>(value)
                {
                    for (header, v) in &mut map {
                        if carries_credentials(header) {
                            *v = "***".to_string();
                        }
                    }
                    *value = serde_json::to_string(&map).unwrap_or_default();
                }
            }
            _ => {}
        }
    }
    shown
}

/// Whether a header's value is likely a credential (never shown).
fn carries_credentials(header: &str) -> bool {
    let h = header.to_ascii_lowercase();
    [
        "auth", "cookie", "token", "key", "secret", "session", "password",
    ]
    .iter()
    .any(|word| h.contains(word))
}

/// The settings that differ from their defaults, for a worker's start
/// line: `download_delay = 1s (spider spiders/bbs.toml)`.
pub fn changed(explained: &[Effective]) -> Vec<String> {
    explained
        .iter()
        .filter(|e| e.changed)
        .map(|e| format!("{} = {} ({})", e.name, e.value, e.from))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn each_value_names_its_layer_and_what_it_overrode() {
        let spider = Overrides {
            download_delay: Some(Duration::from_secs(2)),
            proxies: Some(vec!["http://user:hunter2@proxy:3128".into()]),
            ..Overrides::default()
        };
        let env = Overrides {
            download_delay: Some(Duration::from_millis(200)),
            ..Overrides::default()
        };
        let layers = [
            Layer {
                source: Source::ConfigFile("config/crawlworker.toml".into()),
                overrides: Overrides {
                    retry_times: Some(2),
                    ..Overrides::default()
                },
            },
            Layer {
                source: Source::Spider("spiders/bbs.toml".into()),
                overrides: spider,
            },
            Layer {
                source: Source::Environment,
                overrides: env,
            },
        ];
        let (settings, explained) = explain(&layers);
        assert_eq!(settings.download_delay, Duration::from_millis(200));
        let get = |name: &str| explained.iter().find(|e| e.name == name).unwrap();
        let delay = get("download_delay");
        assert_eq!(delay.from, "environment CRAWLWORKER_DOWNLOAD_DELAY");
        assert_eq!(
            delay.over,
            [("spider spiders/bbs.toml".to_string(), "2s".to_string())]
        );
        // Set to its default value: named, not changed.
        let retries = get("retry_times");
        assert_eq!(
            (retries.from.as_str(), retries.changed),
            ("config file config/crawlworker.toml", false)
        );
        assert_eq!(get("concurrent_requests").from, "default");
        let proxies = get("proxies");
        assert!(!proxies.value.contains("hunter2"), "{}", proxies.value);
        assert_eq!(
            changed(&explained),
            [
                "download_delay = 200ms (environment CRAWLWORKER_DOWNLOAD_DELAY)",
                "proxies = [\"http://user:***@proxy:3128\"] (spider spiders/bbs.toml)"
            ]
        );
    }

    #[test]
    fn header_values_that_carry_credentials_are_hidden() {
        let shown = hidden(vec![(
            "default_request_headers",
            r#"{"Accept":"text/html","Authorization":"Bearer s3cret","X-Api-Key":"k"}"#.to_string(),
        )]);
        assert_eq!(
            shown[0].1,
            r#"{"Accept":"text/html","Authorization":"***","X-Api-Key":"***"}"#
        );
    }
}
