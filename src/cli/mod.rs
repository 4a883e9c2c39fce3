//! The command line: flags parsed by clap, then each command run. Commands
//! print results on stdout and problems on stderr; the exit code says which
//! (0 ok, 1 failed, 2 invalid input such as a broken spider or entry).
//!
//! [`run()`] dispatches each command to its function. The crawl commands live
//! in [`run`](mod@run) (and `local` for `run --local`); the Redis tools in
//! [`tools`] (`push-urls`, `pause`, `flush`), [`stats`] (with `watch` for
//! `stats --watch`), [`items`], [`failed`] and [`import_queue`] (taking over a
//! scrapy-redis queue); [`export`] moves items into a store; spider files
//! are tried with [`check`] and [`parse`].

pub mod args;
mod check;
mod effective_settings;
mod export;
mod failed;
mod import_queue;
mod items;
mod local;
pub mod logging;
mod onto_shards;
pub mod output;
mod parse;
mod parse_render;
mod parse_session;
mod run;
mod signals;
mod stats;
mod status_line;
mod tools;
mod watch;

pub use args::{Cli, Command, ConfigArgs, RedisArgs};

/// The exit code of a run that ended on its own with its requests failed
/// for good: all of them, or any with `--fail-on-failure`.
pub const EXIT_REQUESTS_FAILED: u8 = 3;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::CommandFactory;

use crate::config::Config;
use crate::frontier::KeyGroup;
use crate::settings::effective::{Layer, Source};
use crate::settings::{self, Overrides, RedisUrl};
use crate::spider::{LoadError, Spider};
use args::{FingerprintArgs, FlushArgs, ItemsArgs, PushUrlsArgs, RunArgs};

/// Runs a parsed command line: each command is one function.
pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let status_line = !cli.quiet && cli.log_format == logging::LogFormat::Text;
    match cli.command {
        Command::Run(args) => run_spiders(args, status_line).await,
        Command::PushUrls(args) => push_urls(args).await,
        Command::Pause(args) => tools::pause(&args.spider, &args.redis, true).await,
        Command::Resume(args) => tools::pause(&args.spider, &args.redis, false).await,
        Command::Flush(args) => flush(args).await,
        Command::ImportQueue(args) => {
            import_queue::import_queue(&args.spider, &args.redis, args.dry_run, args.retry_dead)
                .await
        }
        Command::Stats(args) if args.watch && !args.json => {
            watch::watch(&args.spider, &args.redis).await
        }
        Command::Stats(args) => stats::stats(&args.spider, &args.redis, args.json).await,
        Command::Items(args) => items(args).await,
        Command::Export(args) => export::export(args).await,
        Command::Failed(args) => {
            let list = failed::List {
                limit: args.limit as usize,
                kind: args.kind,
                json: args.json,
            };
            failed::failed(&args.spider, &args.redis, list).await
        }
        Command::Dashboard(args) => dashboard(&args.spiders, args.listen, &args.redis).await,
        Command::Health(args) => health(args.metrics_addr).await,
        Command::Check(args) => Ok(check::check(&args.spiders)),
        Command::Parse(args) => parse::parse(args).await,
        Command::Fingerprint(args) => fingerprint(&args),
        Command::Settings(args) => effective_settings::settings(args),
        Command::Completions(args) => completions(args.shell),
    }
}

/// `crawlworker run`: a worker for the spiders, or with `--local` a whole
/// crawl of one spider in this process.
async fn run_spiders(args: RunArgs, status_line: bool) -> anyhow::Result<ExitCode> {
    let config = load_config(&args.redis.config)?;
    let cli_layer = Overrides {
        redis_url: args.redis.redis,
        concurrent_requests: args.concurrency,
        httpcache_dir: args.http_cache.map(|d| d.display().to_string()),
        ..Overrides::default()
    };
    if args.local {
        let [spider] = args.spiders.as_slice() else {
            return Err(
                InvalidInput("--local crawls one spider: give one spider file".into()).into(),
            );
        };
        if args.metrics_addr.is_some() {
            // The worker image sets it for every command it runs.
            if std::env::var_os("CRAWLWORKER_METRICS_ADDR").is_none() {
                return Err(
                    InvalidInput("--local serves no metrics: drop --metrics-addr".into()).into(),
                );
            }
            tracing::info!("a local crawl serves no metrics: CRAWLWORKER_METRICS_ADDR is not used");
        }
        let given = local::Local {
            start: args.start,
            start_file: args.start_file,
            output: args.output,
            fail_on_failure: args.fail_on_failure,
        };
        return local::run_local(&config, spider, &cli_layer, given, status_line).await;
    }
    let rules = crate::worker::StopRules {
        idle_exit: args.idle_exit,
        until_drained: args.until_drained,
    };
    let how = run::How {
        rules,
        metrics_addr: args.metrics_addr,
        status_line,
        fail_on_failure: args.fail_on_failure,
    };
    run::run(&config, &args.spiders, &cli_layer, how).await
}

/// `crawlworker push-urls`: new start entries, or the failed requests
/// back into the queue.
async fn push_urls(args: PushUrlsArgs) -> anyhow::Result<ExitCode> {
    if args.from_failed {
        return tools::requeue_failed(&args.spider, &args.redis).await;
    }
    let push = tools::Push {
        entries: args.entries,
        file: args.file,
        priority: args.priority,
        max_queue: args.max_queue,
    };
    tools::push_urls(&args.spider, &args.redis, push).await
}

/// `crawlworker flush`: the key groups asked for (every one with `--all`).
async fn flush(args: FlushArgs) -> anyhow::Result<ExitCode> {
    let groups: Vec<KeyGroup> = [
        (args.start_urls, KeyGroup::StartUrls),
        (args.requests, KeyGroup::Requests),
        (args.politeness, KeyGroup::Politeness),
        (args.dupefilter, KeyGroup::Dupefilter),
        (args.items, KeyGroup::Items),
        (args.stats, KeyGroup::Stats),
        (args.dead, KeyGroup::Dead),
        (args.schedule, KeyGroup::Schedule),
        (false, KeyGroup::Workers),
        (false, KeyGroup::Control),
    ]
    .into_iter()
    .filter(|(asked, _)| *asked || args.all)
    .map(|(_, group)| group)
    .collect();
    tools::flush(
        &args.spider,
        &args.redis,
        &groups,
        args.fingerprint,
        args.yes,
    )
    .await
}

/// `crawlworker items`.
async fn items(args: ItemsArgs) -> anyhow::Result<ExitCode> {
    let read = items::Read {
        limit: args.limit,
        follow: args.follow,
        pop: args.pop,
    };
    items::items(&args.spider, &args.redis, read).await
}

/// `crawlworker fingerprint`: a URL's dupefilter fingerprint, safe and
/// canonical forms.
fn fingerprint(args: &FingerprintArgs) -> anyhow::Result<ExitCode> {
    let method = args.method.to_ascii_uppercase();
    let safe = scrapy_url::safe_url_string(&args.url, encoding_rs::UTF_8);
    // A crawl never fingerprints what is not a URL (Scrapy's Request
    // refuses it: "Missing scheme in request url").
    if let Err(e) = url::Url::parse(&safe) {
        anyhow::bail!(
            "`{}` is not an absolute URL ({e}); give one with its scheme and host, e.g. https://forum.example/thread/1",
            args.url
        );
    }
    output::print(format_args!(
        "fingerprint {}\nmethod      {method}\nurl         {safe}\ncanonical   {}\n",
        scrapy_url::request_fingerprint(&method, &safe, args.body.as_bytes()),
        scrapy_url::canonicalize_url(&safe)
    ))?;
    Ok(ExitCode::SUCCESS)
}

/// `crawlworker completions`: the shell's completion script.
fn completions(shell: clap_complete::Shell) -> anyhow::Result<ExitCode> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "crawlworker", &mut script);
    output::print(String::from_utf8_lossy(&script))?;
    Ok(ExitCode::SUCCESS)
}

/// `crawlworker dashboard`: reads the spiders, serves the page until Ctrl-C.
async fn dashboard(
    paths: &[PathBuf],
    listen: std::net::SocketAddr,
    redis: &RedisArgs,
) -> anyhow::Result<ExitCode> {
    let mut watched = Vec::new();
    for path in paths {
        let (spider, shards) = tools::open_shards(path, redis).await?;
        watched.push(crate::dashboard::Watched {
            name: spider.name.clone(),
            shards,
            lease: spider.settings.lease_timeout,
            session: spider.session.clone(),
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
        Ok(r) => {
            let status = r.status();
            let reason = r.text().await.unwrap_or_default();
            anyhow::bail!("the worker at {host} answered {status}: {}", reason.trim())
        }
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
    let layers = setting_layers(config, &spider, cli)?;
    let (settings, explained) = settings::effective::explain(&layers);
    spider.settings = settings;
    spider.settings_changed = settings::effective::changed(&explained);
    Ok(spider)
}

/// The layers of a spider's settings, lowest first: the configuration
/// file, the spider's `[settings]`, `REDIS_URL` (scrapy-redis reads it; so
/// do we, below our own variables), the `CRAWLWORKER_<NAME>` variables,
/// and the command line.
pub(crate) fn setting_layers(
    config: &Config,
    spider: &Spider,
    cli: &Overrides,
) -> anyhow::Result<Vec<Layer>> {
    let env = Overrides::from_env(|k| std::env::var(k).ok()).map_err(InvalidInput)?;
    let redis_env = match std::env::var("REDIS_URL").ok().filter(|u| !u.is_empty()) {
        Some(url) => Overrides {
            redis_url: Some(
                RedisUrl::parse(&url).map_err(|e| InvalidInput(format!("REDIS_URL: {e}")))?,
            ),
            ..Overrides::default()
        },
        None => Overrides::default(),
    };
    let config_file = config.path.clone().unwrap_or_default();
    Ok(vec![
        Layer {
            source: Source::ConfigFile(config_file),
            overrides: config.settings.clone(),
        },
        Layer {
            source: Source::Spider(spider.source.clone()),
            overrides: spider.overrides.clone(),
        },
        Layer {
            source: Source::Variable("REDIS_URL"),
            overrides: redis_env,
        },
        Layer {
            source: Source::Environment,
            overrides: env,
        },
        Layer {
            source: Source::Flags,
            overrides: cli.clone(),
        },
    ])
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
