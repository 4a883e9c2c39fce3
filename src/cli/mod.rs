//! The command line: flags parsed by clap, then each command run. Commands
//! print results on stdout and problems on stderr; the exit code says which
//! (0 ok, 1 failed, 2 invalid input such as a broken spider or entry).
//!
//! The crawl commands live in [`run`]; the Redis tools (`push-urls`,
//! `flush`, `stats`) in [`tools`].

pub mod args;
mod items;
mod local;
pub mod logging;
pub mod output;
mod run;
mod status_line;
mod tools;
mod watch;

pub use args::{Cli, Command, ConfigArgs, RedisArgs};

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::CommandFactory;
use serde_json::{json, Map, Value};

use crate::config::Config;
use crate::extract::{self, Response};

use crate::downloader::{Fetched, HttpClient};
use crate::frontier::KeyGroup;
use crate::request::Request;
use crate::settings::{self, Overrides, RedisUrl};
use crate::spider::{LoadError, Spider};
use crate::wording::plural;

/// Runs a parsed command line.
pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let status_line = !cli.quiet && cli.log_format == logging::LogFormat::Text;
    match cli.command {
        Command::Run {
            spiders,
            redis,
            concurrency,
            idle_exit,
            until_drained,
            metrics_addr,
            local,
            start,
            start_file,
            output,
        } => {
            let config = load_config(&redis.config)?;
            let cli_layer = Overrides {
                redis_url: redis.redis,
                concurrent_requests: concurrency,
                ..Overrides::default()
            };
            if local {
                let [spider] = spiders.as_slice() else {
                    return Err(InvalidInput(
                        "--local crawls one spider: give one spider file".into(),
                    )
                    .into());
                };
                let given = local::Local {
                    start,
                    start_file,
                    output,
                };
                return local::run_local(&config, spider, &cli_layer, given, status_line).await;
            }
            let rules = crate::worker::StopRules {
                idle_exit,
                until_drained,
            };
            run::run(
                &config,
                &spiders,
                &cli_layer,
                rules,
                metrics_addr,
                status_line,
            )
            .await
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
                tools::requeue_failed(&spider, &redis).await
            } else {
                let push = tools::Push {
                    entries,
                    file,
                    priority,
                    max_queue,
                };
                tools::push_urls(&spider, &redis, push).await
            }
        }
        Command::Pause { spider, redis } => tools::pause(&spider, &redis, true).await,
        Command::Resume { spider, redis } => tools::pause(&spider, &redis, false).await,
        Command::Flush {
            spider,
            requests,
            dupefilter,
            items,
            stats,
            start_urls,
            dead,
            politeness,
            schedule,
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
                (schedule, KeyGroup::Schedule),
                (false, KeyGroup::Workers),
                (false, KeyGroup::Control),
            ]
            .into_iter()
            .filter(|(asked, _)| *asked || all)
            .map(|(_, group)| group)
            .collect();
            tools::flush(&spider, &redis, &groups, fingerprint, yes).await
        }
        Command::Stats {
            spider,
            json,
            watch: true,
            redis,
        } if !json => watch::watch(&spider, &redis).await,
        Command::Stats {
            spider,
            json,
            redis,
            ..
        } => tools::stats(&spider, &redis, json).await,
        Command::Items {
            spider,
            limit,
            follow,
            pop,
            redis,
        } => items::items(&spider, &redis, items::Read { limit, follow, pop }).await,
        Command::Dashboard {
            spiders,
            listen,
            redis,
        } => dashboard(&spiders, listen, &redis).await,
        Command::Health { metrics_addr } => health(metrics_addr).await,
        Command::Check { spiders } => Ok(check(&spiders)),
        Command::Parse {
            spider,
            target,
            url,
            rule,
            meta,
            depth,
            config,
        } => {
            let config = load_config(&config)?;
            parse(&config, &spider, &target, url, rule, meta, depth).await
        }
        Command::Fingerprint { url, method, body } => {
            let method = method.to_ascii_uppercase();
            let safe = scrapy_url::safe_url_string(&url, encoding_rs::UTF_8);
            output::print(format_args!(
                "fingerprint {}\nmethod      {method}\nurl         {safe}\ncanonical   {}\n",
                scrapy_url::request_fingerprint(&method, &safe, body.as_bytes()),
                scrapy_url::canonicalize_url(&safe)
            ))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Settings { markdown } => {
            output::print(settings_table(markdown))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "crawlworker", &mut script);
            output::print(String::from_utf8_lossy(&script))?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `crawlworker dashboard`: reads the spiders, serves the page until Ctrl-C.
async fn dashboard(
    paths: &[PathBuf],
    listen: std::net::SocketAddr,
    redis: &RedisArgs,
) -> anyhow::Result<ExitCode> {
    let mut watched = Vec::new();
    for path in paths {
        let (spider, frontier) = tools::open(path, redis).await?;
        watched.push(crate::dashboard::Watched {
            name: spider.name.clone(),
            frontier,
            lease: spider.settings.lease_timeout,
        });
    }
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot serve the dashboard on {listen}"))?;
    eprintln!("crawlworker: dashboard on http://{listen}/ (Ctrl-C stops it)");
    crate::dashboard::serve(listener, watched, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await;
    Ok(ExitCode::SUCCESS)
}

/// `crawlworker health`: is the worker at `addr` answering?
async fn health(addr: std::net::SocketAddr) -> anyhow::Result<ExitCode> {
    // A worker listening on every interface is asked on loopback.
    let host = if addr.ip().is_unspecified() {
        std::net::SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), addr.port())
    } else {
        addr
    };
    let answer = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(3))
        .no_proxy()
        .build()?
        .get(format!("http://{host}/healthz"))
        .send()
        .await;
    match answer {
        Ok(r) if r.status().is_success() => {
            output::line("ok")?;
            Ok(ExitCode::SUCCESS)
        }
        Ok(r) => anyhow::bail!("the worker at {host} answered {}", r.status()),
        Err(e) => anyhow::bail!("no worker answers at {host}: {e}"),
    }
}

/// The worker configuration `args` name, or the default one.
fn load_config(args: &ConfigArgs) -> anyhow::Result<Config> {
    Ok(Config::load(args.config.as_deref()).map_err(InvalidInput::from)?)
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
pub(crate) fn spider_files(paths: &[PathBuf]) -> Vec<PathBuf> {
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
                let handed: Vec<String> = s
                    .handoffs
                    .iter()
                    .map(|h| format!(", hands links to `{}` ({})", h.spider, h.start_key))
                    .collect();
                let _ = output::line(format_args!(
                    "{}: ok (spider `{}`, {}, {}{}{})",
                    path.display(),
                    s.name,
                    plural(s.rules.len(), "rule", "rules"),
                    plural(s.items.len(), "item type", "item types"),
                    handed.concat(),
                    match s.warnings.len() {
                        0 => String::new(),
                        n => format!(", {}", plural(n, "warning", "warnings")),
                    }
                ));
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
            held: Default::default(),
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
