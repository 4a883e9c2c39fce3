//! The command line: flags parsed by clap, then each command run. Commands
//! print results on stdout and problems on stderr; the exit code says which
//! (0 ok, 1 failed, 2 invalid input such as a broken spider or entry).
//!
//! The crawl commands live in [`run`]; the Redis tools (`push-urls`,
//! `flush`, `stats`) in [`tools`].

pub mod logging;
mod run;
mod tools;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::{Parser, Subcommand};
use serde_json::{json, Map, Value};

use crate::config::Config;
use crate::extract::{self, Response};

use crate::downloader::{Fetched, HttpClient};
use crate::frontier::KeyGroup;
use crate::request::Request;
use crate::settings::{self, Overrides, RedisUrl};
use crate::spider::{LoadError, Spider};
use crate::wording::plural;

/// A crawler worker: spiders are TOML files, Redis holds the shared crawl.
#[derive(Debug, Parser)]
#[command(name = "crawlworker", version, about)]
pub struct Cli {
    /// Worker configuration file [default: config/crawlworker.toml if it exists]
    #[arg(long, global = true, env = "CRAWLWORKER_CONFIG")]
    pub config: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

/// Where Redis is, for commands that use it.
#[derive(Debug, Clone, clap::Args)]
pub struct RedisArgs {
    /// Redis URL (redis:// or rediss://) [default: REDIS_URL, the config file, or redis://127.0.0.1:6379]
    #[arg(long, value_parser = RedisUrl::parse)]
    pub redis: Option<RedisUrl>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a worker: crawl the spiders' shared crawl from Redis.
    Run {
        #[arg(required = true)]
        spiders: Vec<PathBuf>,
        #[command(flatten)]
        redis: RedisArgs,
        /// Pages this worker downloads at once (concurrent_requests).
        #[arg(long)]
        concurrency: Option<u32>,
        /// Exit after this long without work, e.g. "30s" (default: run forever).
        #[arg(long, value_parser = humantime::parse_duration)]
        idle_exit: Option<std::time::Duration>,
        /// Exit when the whole crawl is finished: nothing queued, nothing in
        /// flight in any worker, no start entries.
        #[arg(long)]
        until_drained: bool,
    },
    /// Push start entries (URLs or JSON tasks) to a spider's start key.
    PushUrls {
        spider: PathBuf,
        /// Entries; with none, read --file (or standard input), one per line.
        entries: Vec<String>,
        /// Read entries from this file, one per line ("-" for standard input).
        #[arg(long, short = 'f')]
        file: Option<PathBuf>,
        /// Score of the entries when the start key is a sorted set.
        #[arg(long, default_value_t = 0.0)]
        priority: f64,
        /// Push only while the start key holds fewer than N entries; the
        /// entries left over are printed on standard output.
        #[arg(long)]
        max_queue: Option<u64>,
        /// Instead of new entries, move the requests recorded in the failed
        /// key back into the queue (their retries start again).
        #[arg(long, conflicts_with_all = ["entries", "file", "max_queue"])]
        from_failed: bool,
        #[command(flatten)]
        redis: RedisArgs,
    },
    /// Delete a spider's crawl state in Redis (asks first on a terminal).
    Flush {
        spider: PathBuf,
        /// The request queue, in-flight leases and retries waiting.
        #[arg(long)]
        requests: bool,
        #[arg(long)]
        dupefilter: bool,
        #[arg(long)]
        items: bool,
        #[arg(long)]
        stats: bool,
        #[arg(long)]
        start_urls: bool,
        /// Dead letters and failed requests.
        #[arg(long)]
        dead: bool,
        /// Per-host politeness state: next slots, Crawl-delays, back-off,
        /// the robots.txt cache.
        #[arg(long)]
        politeness: bool,
        /// Every key of the spider.
        #[arg(long)]
        all: bool,
        /// Remove one URL's fingerprint from the dupefilter (so it is crawled again).
        #[arg(long, value_name = "URL")]
        fingerprint: Option<String>,
        /// Do not ask.
        #[arg(long, short = 'y')]
        yes: bool,
        #[command(flatten)]
        redis: RedisArgs,
    },
    /// Show a crawl's progress: queues, workers and the stats hash.
    Stats {
        spider: PathBuf,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        redis: RedisArgs,
    },
    /// Validate spider files; every problem is reported with file:line:column.
    Check {
        /// Spider files to check.
        #[arg(required = true)]
        spiders: Vec<PathBuf>,
    },
    /// Try a spider on one page (a URL to fetch, or a saved file); no Redis needed.
    Parse {
        spider: PathBuf,
        /// An http(s) URL to fetch, or a file holding a saved page.
        target: String,
        /// The page's address, when TARGET is a file (for rule matching and links).
        #[arg(long)]
        url: Option<String>,
        /// Use this rule instead of matching the URL.
        #[arg(long)]
        rule: Option<String>,
        /// The request's context, as a JSON object (e.g. a task).
        #[arg(long)]
        meta: Option<String>,
        /// The request's depth.
        #[arg(long, default_value_t = 0)]
        depth: u32,
    },
    /// Show a URL's scrapy-redis dupefilter fingerprint and canonical form.
    Fingerprint {
        url: String,
        #[arg(long, default_value = "GET")]
        method: String,
        /// The request body, as text.
        #[arg(long, default_value = "")]
        body: String,
    },
    /// List every setting with its default (as a Markdown table with --markdown).
    Settings {
        #[arg(long)]
        markdown: bool,
    },
}

/// Runs a parsed command line.
pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let config = Config::load(cli.config.as_deref()).map_err(InvalidInput::from)?;
    match cli.command {
        Command::Run {
            spiders,
            redis,
            concurrency,
            idle_exit,
            until_drained,
        } => {
            let cli_layer = Overrides {
                redis_url: redis.redis,
                concurrent_requests: concurrency,
                ..Overrides::default()
            };
            let rules = crate::worker::StopRules {
                idle_exit,
                until_drained,
            };
            run::run(&config, &spiders, &cli_layer, rules).await
        }
        Command::PushUrls {
            spider,
            entries,
            file,
            priority,
            max_queue,
            from_failed,
            redis,
        } => {
            if from_failed {
                tools::requeue_failed(&config, &spider, &redis).await
            } else {
                tools::push_urls(&config, &spider, &redis, entries, file, priority, max_queue).await
            }
        }
        Command::Flush {
            spider,
            requests,
            dupefilter,
            items,
            stats,
            start_urls,
            dead,
            politeness,
            all,
            fingerprint,
            yes,
            redis,
        } => {
            let groups: Vec<KeyGroup> = [
                (start_urls, KeyGroup::StartUrls),
                (requests, KeyGroup::Requests),
                (politeness, KeyGroup::Politeness),
                (dupefilter, KeyGroup::Dupefilter),
                (items, KeyGroup::Items),
                (stats, KeyGroup::Stats),
                (dead, KeyGroup::Dead),
                (false, KeyGroup::Workers),
            ]
            .into_iter()
            .filter(|(asked, _)| *asked || all)
            .map(|(_, group)| group)
            .collect();
            tools::flush(&config, &spider, &redis, &groups, fingerprint, yes).await
        }
        Command::Stats {
            spider,
            json,
            redis,
        } => tools::stats(&config, &spider, &redis, json).await,
        Command::Check { spiders } => Ok(check(&spiders)),
        Command::Parse {
            spider,
            target,
            url,
            rule,
            meta,
            depth,
        } => parse(&config, &spider, &target, url, rule, meta, depth).await,
        Command::Fingerprint { url, method, body } => {
            let method = method.to_ascii_uppercase();
            let safe = scrapy_url::safe_url_string(&url, encoding_rs::UTF_8);
            println!(
                "fingerprint {}",
                scrapy_url::request_fingerprint(&method, &safe, body.as_bytes())
            );
            println!("method      {method}");
            println!("url         {safe}");
            println!("canonical   {}", scrapy_url::canonicalize_url(&safe));
            Ok(ExitCode::SUCCESS)
        }
        Command::Settings { markdown } => {
            print!("{}", settings_table(markdown));
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The settings catalogue, as plain text or as the README's Markdown table.
pub fn settings_table(markdown: bool) -> String {
    let mut out = String::new();
    if markdown {
        out.push_str("| setting | default | meaning |\n|---|---|---|\n");
    }
    for s in settings::catalogue() {
        if markdown {
            out.push_str(&format!(
                "| `{}` | `{}` | {} |\n",
                s.name,
                s.default.replace('|', "\\|"),
                s.doc
            ));
        } else {
            out.push_str(&format!("{:<32} {:<24} {}\n", s.name, s.default, s.doc));
        }
    }
    out
}

/// Input a person must fix (a broken spider or configuration file, a bad
/// entry): reported as it is, without the program's name, and the command
/// exits with code 2 instead of 1.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct InvalidInput(pub String);

impl From<LoadError> for InvalidInput {
    fn from(e: LoadError) -> Self {
        InvalidInput(e.to_string())
    }
}

/// Loads a spider and layers its settings: built-in < config file < spider
/// < environment < `cli`.
pub fn load_spider(config: &Config, path: &Path, cli: &Overrides) -> anyhow::Result<Spider> {
    let mut spider = Spider::load(path).map_err(InvalidInput::from)?;
    let mut env = Overrides::from_env(|k| std::env::var(k).ok()).map_err(InvalidInput)?;
    // scrapy-redis reads REDIS_URL; so do we, below our own variable.
    if env.redis_url.is_none() {
        if let Some(url) = std::env::var("REDIS_URL").ok().filter(|u| !u.is_empty()) {
            env.redis_url =
                Some(RedisUrl::parse(&url).map_err(|e| InvalidInput(format!("REDIS_URL: {e}")))?);
        }
    }
    spider.settings = settings::layered(&[&config.settings, &spider.overrides, &env, cli]);
    Ok(spider)
}

/// The spider files `paths` name: files as given, and every `*.toml` of a
/// directory.
fn spider_files(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for path in paths {
        match std::fs::read_dir(path) {
            Ok(entries) => {
                let mut found: Vec<PathBuf> = entries
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|x| x == "toml"))
                    .collect();
                found.sort();
                out.extend(found);
            }
            Err(_) => out.push(path.clone()),
        }
    }
    out
}

fn check(paths: &[PathBuf]) -> ExitCode {
    let files = spider_files(paths);
    if files.is_empty() {
        eprintln!(
            "crawlworker: no spider files (*.toml) in {}",
            paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        return ExitCode::from(2);
    }
    let mut bad = 0;
    for path in &files {
        match Spider::load(path) {
            Ok(s) => {
                for w in &s.warnings {
                    eprintln!("{w}");
                }
                println!(
                    "{}: ok (spider `{}`, {}, {}{})",
                    path.display(),
                    s.name,
                    plural(s.rules.len(), "rule", "rules"),
                    plural(s.items.len(), "item type", "item types"),
                    match s.warnings.len() {
                        0 => String::new(),
                        n => format!(", {}", plural(n, "warning", "warnings")),
                    }
                );
            }
            Err(e) => {
                bad += 1;
                eprintln!("{e}");
            }
        }
    }
    if bad == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    }
}

async fn parse(
    config: &Config,
    spider_path: &Path,
    target: &str,
    url: Option<String>,
    rule: Option<String>,
    meta: Option<String>,
    depth: u32,
) -> anyhow::Result<ExitCode> {
    let spider = load_spider(config, spider_path, &Overrides::default())?;
    if let Some(r) = &rule {
        if spider.rule_index(r).is_none() {
            let names: Vec<&str> = spider.rules.iter().map(|r| r.name.as_str()).collect();
            bail!(
                "spider `{}` has no rule `{r}`; its rules are: {}",
                spider.name,
                names.join(", ")
            );
        }
    }
    let meta: Map<String, Value> = match meta {
        Some(m) => match serde_json::from_str(&m) {
            Ok(Value::Object(o)) => o,
            Ok(_) => bail!("--meta must be a JSON object, e.g. '{{\"forum_id\": \"00001\"}}'"),
            Err(e) => bail!("--meta is not valid JSON: {e}"),
        },
        None => Map::new(),
    };
    let is_url = target.starts_with("http://") || target.starts_with("https://");
    let page_url = match (&url, is_url) {
        (Some(u), _) => u.clone(),
        (None, true) => target.to_string(),
        (None, false) => {
            let abs = std::fs::canonicalize(target)
                .with_context(|| format!("cannot read page file {target}"))?;
            url::Url::from_file_path(&abs)
                .map(|u| u.to_string())
                .unwrap_or_else(|_| format!("file://{}", abs.display()))
        }
    };
    let request = Request {
        rule,
        meta,
        depth,
        ..Request::get(&page_url)
    };
    let fetched = if is_url {
        let client = HttpClient::new(&spider.settings)?;
        client.fetch(&request).await?
    } else {
        let body =
            std::fs::read(target).with_context(|| format!("cannot read page file {target}"))?;
        Fetched {
            url: request.url.clone(),
            status: 200,
            headers: Vec::new(),
            body,
        }
    };
    let response = Response {
        url: &fetched.url,
        status: fetched.status,
        headers: &fetched.headers,
        body: &fetched.body,
    };
    let result = extract::extract(&spider, &request, &response);
    let mut out = json!({
        "url": fetched.url,
        "status": fetched.status,
        "bytes": fetched.body.len(),
    });
    let extra = serde_json::to_value(&result)?;
    if let (Some(o), Value::Object(e)) = (out.as_object_mut(), extra) {
        o.extend(e);
        if result.rule.is_none() {
            o.insert(
                "note".into(),
                Value::String(format!(
                    "no rule of spider `{}` matches {}; give --rule or --url",
                    spider.name, fetched.url
                )),
            );
        }
    }
    let mut stdout = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut stdout, &out)?;
    writeln!(stdout)?;
    Ok(ExitCode::SUCCESS)
}
