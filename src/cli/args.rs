//! The command line as written: every command, argument and option, each
//! defined once with the text `--help`, the README and the shell
//! completions show. Values are checked as they are parsed (durations,
//! Redis addresses, counts of at least one), so nothing half-checked
//! reaches a command.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::settings::{self, RedisUrl};

/// A crawler worker: spiders are TOML files, Redis holds the shared crawl,
/// and any number of workers anywhere share it.
#[derive(Debug, Parser)]
#[command(
    name = "crawlworker",
    version = crate::version::LONG,
    about,
    after_help = "Exit codes: 0 done; 1 failed (Redis unreachable, a fatal error); 2 input to fix (a broken spider or configuration file, a bad entry, a usage error); 3 a run that ended on its own (run --local, --until-drained, --idle-exit) whose requests all failed for good (any of them, with --fail-on-failure).\n\nGetting started: crawlworker check spiders/bbs.toml, then crawlworker push-urls and crawlworker run. `crawlworker COMMAND --help` shows examples."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Log only warnings and errors (and show no status line).
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Log more: -v a line per page, -vv everything. Without -q or -v,
    /// CRAWLWORKER_LOG sets what is logged (default: info).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// How log lines are written: text, or json for log shippers (one
    /// object per line).
    #[arg(
        long,
        global = true,
        value_enum,
        default_value_t,
        env = "CRAWLWORKER_LOG_FORMAT"
    )]
    pub log_format: super::logging::LogFormat,
    /// Threads the worker runs its pages on. One thread costs the least
    /// CPU per page (no hand-overs between threads);
    /// pages over 64 KiB are parsed on blocking threads, one per CPU
    /// core at most, whatever N is. More threads help only a worker
    /// whose smaller pages need more than a core (docs/commands.md).
    #[arg(
        long,
        global = true,
        env = "CRAWLWORKER_THREADS",
        value_name = "N",
        default_value_t = 1,
        value_parser = clap::value_parser!(u16).range(1..)
    )]
    pub threads: u16,
}

impl Cli {
    /// What the command line says about logging.
    pub fn log_options(&self) -> super::logging::LogOptions {
        super::logging::LogOptions {
            quiet: self.quiet,
            verbose: self.verbose,
            format: self.log_format,
        }
    }
}

/// The worker configuration file, for commands that read settings.
#[derive(Debug, Clone, clap::Args)]
pub struct ConfigArgs {
    /// Worker configuration file (settings under every spider's own)
    /// [default: config/crawlworker.toml if it exists]
    #[arg(long, env = "CRAWLWORKER_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// Where Redis is, for commands that use it.
#[derive(Debug, Clone, clap::Args)]
pub struct RedisArgs {
    /// Redis address (redis://, rediss:// for TLS). Without it: CRAWLWORKER_REDIS_URL,
    /// then REDIS_URL, then the spider's redis_url setting, then the
    /// configuration file's, then redis://127.0.0.1:6379
    #[arg(long, value_name = "URL", value_parser = RedisUrl::parse)]
    pub redis: Option<RedisUrl>,
    #[command(flatten)]
    pub config: ConfigArgs,
}

/// A spider definition file.
pub type SpiderPath = PathBuf;

/// A duration as every duration is written: seconds (`1.5`) or a number
/// with a unit (`250ms`, `30s`, `5m`).
fn duration(s: &str) -> Result<Duration, String> {
    settings::parse_duration(s)
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a worker: crawl the spiders' shared crawl from Redis, with any
    /// number of other workers. The first Ctrl-C or SIGTERM stops it
    /// gracefully; a second one at once.
    #[command(
        after_help = "Examples:\n  crawlworker run spiders/bbs.toml\n  crawlworker run spiders/news.toml --local --start https://news.example/ -o items.jsonl\n  crawlworker run spiders/bbs.toml --until-drained --metrics-addr 127.0.0.1:9410\n  CRAWLWORKER_REDIS_URL=redis://redis:6379 crawlworker run spiders/*.toml --idle-exit 5m"
    )]
    Run(RunArgs),
    /// Push start entries (URLs or JSON tasks) to a spider's start key.
    #[command(
        after_help = "Examples:\n  crawlworker push-urls spiders/bbs.toml '{\"forum_id\": \"00001\", \"max_page\": 5}'\n  crawlworker push-urls spiders/news.toml --file urls.txt\n  my-producer | crawlworker push-urls spiders/bbs.toml --max-queue 10000\n  crawlworker push-urls spiders/bbs.toml --from-failed"
    )]
    PushUrls(PushUrlsArgs),
    /// Pause a spider for the whole cluster: requests not yet downloading go
    /// back to the queue and no worker leases until `resume` (downloads in
    /// progress finish and commit; workers stay up).
    #[command(after_help = "Example:\n  crawlworker pause spiders/bbs.toml")]
    Pause(PauseArgs),
    /// Resume a paused spider: every worker leases again at once.
    #[command(after_help = "Example:\n  crawlworker resume spiders/bbs.toml")]
    Resume(ResumeArgs),
    /// Delete a spider's crawl state in Redis, in one step (asks first on a
    /// terminal).
    #[command(
        after_help = "Examples:\n  crawlworker flush spiders/bbs.toml --items --stats\n  crawlworker flush spiders/bbs.toml --all --yes\n  crawlworker flush spiders/bbs.toml --fingerprint http://127.0.0.1:8700/post/1001"
    )]
    Flush(FlushArgs),
    /// Take over the request queue a scrapy-redis crawl left: each queued
    /// request (a pickle, read as plain data, never run) becomes a request
    /// in crawlworker's queue, or a dead letter with its reason. Stopped
    /// and run again, it goes on where it was.
    #[command(
        after_help = "Examples:\n  crawlworker import-queue spiders/bbs.toml --dry-run\n  crawlworker import-queue spiders/bbs.toml\n  crawlworker import-queue spiders/bbs.toml --retry-dead\n\nThe spider's [scrapy_redis] table maps Scrapy callbacks to rules (see the migration guide)."
    )]
    ImportQueue(ImportQueueArgs),
    /// Show a crawl's progress: queues, live and gone workers, the stats hash.
    #[command(
        after_help = "Examples:\n  crawlworker stats spiders/bbs.toml\n  crawlworker stats spiders/bbs.toml --watch\n  crawlworker stats spiders/bbs.toml --json | jq .queues"
    )]
    Stats(StatsArgs),
    /// List the requests that failed for good (retries used up, refused, or
    /// answered with a status no rule handles, such as 404): time, kind,
    /// rule, URL and reason, newest last.
    #[command(
        after_help = "Examples:\n  crawlworker failed spiders/bbs.toml\n  crawlworker failed spiders/bbs.toml --kind 404 -n 100\n  crawlworker failed spiders/bbs.toml --json | jq -r .url"
    )]
    Failed(FailedArgs),
    /// Print scraped items as JSON Lines, oldest first.
    #[command(
        after_help = "Examples:\n  crawlworker items spiders/bbs.toml -n 10\n  crawlworker items spiders/bbs.toml --pop --follow > items.jsonl"
    )]
    Items(ItemsArgs),
    /// Export a spider's items from Redis into a store, each exactly once:
    /// PostgreSQL, SQLite, JSON Lines or CSV files, or a command. Run as
    /// many as you like; the first Ctrl-C or SIGTERM finishes the batch in
    /// flight.
    #[command(
        after_help = "Examples:\n  CRAWLWORKER_EXPORT_TO=postgres://crawler@127.0.0.1/forum crawlworker export spiders/bbs.toml --create\n  crawlworker export spiders/bbs.toml --to sqlite:bbs.db --create --until-drained\n  crawlworker export spiders/bbs.toml --to jsonl:out/ --gzip --rotate-every 5m\n  crawlworker export spiders/bbs.toml --to 'exec:python3 load.py'\n\nA PostgreSQL password comes from PGPASSWORD, or in an address given through CRAWLWORKER_EXPORT_TO or --to-file: never on the command line. See docs/export.md."
    )]
    Export(ExportArgs),
    /// Serve a live web dashboard of spiders (one self-contained page:
    /// rates, queues, workers, status codes, recent failures), read from
    /// Redis, until Ctrl-C. It has no login: keep it on a loopback address
    /// or behind your own proxy.
    #[command(
        after_help = "Examples:\n  crawlworker dashboard spiders/bbs.toml spiders/news.toml\n  crawlworker dashboard spiders/bbs.toml --listen 127.0.0.1:9400 --redis redis://127.0.0.1:6379"
    )]
    Dashboard(DashboardArgs),
    /// Check that a worker is alive: ask its metrics endpoint's /healthz
    /// (exit code 0 when it answers, 1 when not), e.g. for a container's
    /// HEALTHCHECK.
    #[command(
        after_help = "Examples:\n  crawlworker health --metrics-addr 127.0.0.1:9410\n  HEALTHCHECK CMD [\"crawlworker\", \"health\"]   (with CRAWLWORKER_METRICS_ADDR set)"
    )]
    Health(HealthArgs),
    /// Check spider files; every problem is reported as
    /// file:line:column with a fix.
    #[command(
        after_help = "Examples:\n  crawlworker check spiders/bbs.toml\n  crawlworker check spiders/"
    )]
    Check(CheckArgs),
    /// Try a spider on one page (a URL to fetch, or a saved file) and print
    /// what it gives as JSON; no Redis needed.
    #[command(
        after_help = "Examples:\n  crawlworker parse spiders/bbs.toml http://127.0.0.1:8700/list/00001/1 --meta '{\"forum_id\": \"00001\", \"max_page\": 2}'\n  crawlworker parse spiders/bbs.toml saved.html --url http://127.0.0.1:8700/post/1001"
    )]
    Parse(ParseArgs),
    /// Show a URL's scrapy-redis dupefilter fingerprint, its safe form and
    /// its canonical form.
    #[command(
        after_help = "Examples:\n  crawlworker fingerprint 'http://example.com/a?b=2&a=1'\n  crawlworker fingerprint http://example.com/search --method POST --body 'q=x'"
    )]
    Fingerprint(FingerprintArgs),
    /// List every setting with its default and meaning; with a spider,
    /// every setting's value a worker runs it with and where that value
    /// came from (default < config file < spider [settings] < environment
    /// < flag).
    #[command(
        after_help = "Examples:\n  crawlworker settings\n  crawlworker settings spiders/bbs.toml\n  CRAWLWORKER_DOWNLOAD_DELAY=2 crawlworker settings spiders/bbs.toml --config config/prod.toml\n  crawlworker settings --markdown"
    )]
    Settings(SettingsArgs),
    /// Print a shell completion script, e.g.
    /// `crawlworker completions bash > ~/.local/share/bash-completion/completions/crawlworker`.
    #[command(
        after_help = "Examples:\n  crawlworker completions bash > ~/.local/share/bash-completion/completions/crawlworker\n  crawlworker completions zsh > ~/.zfunc/_crawlworker"
    )]
    Completions(CompletionsArgs),
}

/// The arguments of `crawlworker run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Spider files (TOML), or directories of them; one worker runs them
    /// all, sharing its download slots fairly, and reloads a file when it
    /// changes (or on SIGHUP).
    #[arg(required = true, value_name = "SPIDER")]
    pub spiders: Vec<SpiderPath>,
    #[command(flatten)]
    pub redis: RedisArgs,
    /// Pages this worker downloads at once (the concurrent_requests setting).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub concurrency: Option<u32>,
    /// Exit after this long without work, e.g. 30s or 5m (default: run forever).
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub idle_exit: Option<Duration>,
    /// Exit when the whole crawl is finished: nothing queued, nothing in
    /// flight in any worker, no start entries.
    #[arg(long)]
    pub until_drained: bool,
    /// Exit with code 3 when any request failed for good (a 404 too).
    /// Without it, a run that ends on its own (--local, --until-drained,
    /// --idle-exit) exits with code 3 only when every one of its requests
    /// failed.
    #[arg(long, env = "CRAWLWORKER_FAIL_ON_FAILURE")]
    pub fail_on_failure: bool,
    /// Serve Prometheus metrics on this address (`/metrics`, and
    /// `/healthz` for health checks), e.g. 127.0.0.1:9410.
    #[arg(long, value_name = "ADDR", env = "CRAWLWORKER_METRICS_ADDR")]
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// Crawl in this process alone, without Redis: the queue, the
    /// dupefilter and the politeness state live in memory, items go to
    /// --output, and the command exits when the crawl is done. One spider.
    #[arg(long, conflicts_with_all = ["until_drained", "idle_exit"])]
    pub local: bool,
    /// With --local: a start entry (URL or JSON task); repeat for more.
    #[arg(long = "start", value_name = "ENTRY", requires = "local")]
    pub start: Vec<String>,
    /// With --local: read start entries from this file, one per line
    /// ("-" for standard input).
    #[arg(
        long,
        value_name = "FILE",
        requires = "local",
        conflicts_with = "start"
    )]
    pub start_file: Option<PathBuf>,
    /// With --local: write the items to this file, as JSON Lines ("-",
    /// the default: standard output).
    #[arg(long, short = 'o', value_name = "FILE", requires = "local")]
    pub output: Option<PathBuf>,
    /// With --local: replay pages from this page cache and store the
    /// pages fetched in it, for developing spiders (the httpcache_dir
    /// setting; not for crawls on Redis).
    #[arg(long, value_name = "DIR", requires = "local")]
    pub http_cache: Option<PathBuf>,
}

/// The arguments of `crawlworker push-urls`.
#[derive(Debug, clap::Args)]
pub struct PushUrlsArgs {
    /// The spider file (TOML).
    pub spider: SpiderPath,
    /// Entries (URLs or JSON tasks); with none, read --file, or standard
    /// input, one per line.
    #[arg(value_name = "ENTRY")]
    pub entries: Vec<String>,
    /// Read entries from this file, one per line ("-" for standard input).
    #[arg(long, short = 'f', value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Score of the entries; only for a start key of type zset (higher
    /// is claimed first).
    #[arg(long, value_name = "SCORE")]
    pub priority: Option<f64>,
    /// Push only while the start key holds fewer than N entries; the
    /// entries left over are printed on standard output.
    #[arg(long, value_name = "N")]
    pub max_queue: Option<u64>,
    /// Instead of new entries, move the requests recorded in the failed
    /// key back into the queue (their retries start again).
    #[arg(long, conflicts_with_all = ["entries", "file", "max_queue", "priority"])]
    pub from_failed: bool,
    #[command(flatten)]
    pub redis: RedisArgs,
}

/// The arguments of `crawlworker pause`.
#[derive(Debug, clap::Args)]
pub struct PauseArgs {
    /// The spider file (TOML).
    pub spider: SpiderPath,
    #[command(flatten)]
    pub redis: RedisArgs,
}

/// The arguments of `crawlworker resume`.
#[derive(Debug, clap::Args)]
pub struct ResumeArgs {
    /// The spider file (TOML).
    pub spider: SpiderPath,
    #[command(flatten)]
    pub redis: RedisArgs,
}

/// The arguments of `crawlworker flush`.
#[derive(Debug, clap::Args)]
pub struct FlushArgs {
    /// The spider file (TOML).
    pub spider: SpiderPath,
    /// The start entries.
    #[arg(long)]
    pub start_urls: bool,
    /// The request queue, in-flight leases and retries waiting.
    #[arg(long)]
    pub requests: bool,
    /// The dupefilter, so every URL is crawled again.
    #[arg(long)]
    pub dupefilter: bool,
    /// The scraped items.
    #[arg(long)]
    pub items: bool,
    /// The stats hash.
    #[arg(long)]
    pub stats: bool,
    /// Dead letters and failed requests.
    #[arg(long)]
    pub dead: bool,
    /// Per-host politeness state: next slots, Crawl-delays, back-off,
    /// the robots.txt cache.
    #[arg(long)]
    pub politeness: bool,
    /// The revisit schedule (pages a `revisit` rule fetches again).
    /// A revisit already queued or in flight is scheduled again when
    /// it is fetched, if its rule still says `revisit`.
    #[arg(long)]
    pub schedule: bool,
    /// Every key of the spider.
    #[arg(long)]
    pub all: bool,
    /// Remove one URL's fingerprint from the dupefilter (so it is
    /// crawled again).
    #[arg(long, value_name = "URL")]
    pub fingerprint: Option<String>,
    /// Do not ask (needed when standard input is not a terminal).
    #[arg(long, short = 'y')]
    pub yes: bool,
    #[command(flatten)]
    pub redis: RedisArgs,
}

/// The arguments of `crawlworker import-queue`.
#[derive(Debug, clap::Args)]
pub struct ImportQueueArgs {
    /// The spider file (TOML): its keys, rules and [scrapy_redis] table.
    pub spider: SpiderPath,
    /// Read the whole queue and say what would be queued and what set
    /// aside (and why), changing nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// First bring back the entries an earlier import refused that the
    /// spider maps now (an unmapped callback since mapped, say): each
    /// leaves the dead letters and is imported; the others stay.
    #[arg(long, conflicts_with = "dry_run")]
    pub retry_dead: bool,
    #[command(flatten)]
    pub redis: RedisArgs,
}

/// The arguments of `crawlworker stats`.
#[derive(Debug, clap::Args)]
pub struct StatsArgs {
    /// The spider file (TOML).
    pub spider: SpiderPath,
    /// Print one JSON object instead of text.
    #[arg(long, conflicts_with = "watch")]
    pub json: bool,
    /// Keep a live view, refreshed every second, until Ctrl-C.
    #[arg(long)]
    pub watch: bool,
    #[command(flatten)]
    pub redis: RedisArgs,
}

/// The arguments of `crawlworker failed`.
#[derive(Debug, clap::Args)]
pub struct FailedArgs {
    /// The spider file (TOML).
    pub spider: SpiderPath,
    /// The newest N failed requests (of --kind, if given).
    #[arg(short = 'n', long = "limit", value_name = "N", default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..))]
    pub limit: u64,
    /// Only failures of this kind: a status (404, 503) or an error's kind
    /// (timeout, connect, …), as the KIND column shows.
    #[arg(long, value_name = "K")]
    pub kind: Option<String>,
    /// One JSON object per line (the failed key's records) instead of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub redis: RedisArgs,
}

/// The arguments of `crawlworker items`.
#[derive(Debug, clap::Args)]
pub struct ItemsArgs {
    /// The spider file (TOML).
    pub spider: SpiderPath,
    /// At most this many items (default: all there are).
    #[arg(short = 'n', long = "limit", value_name = "N")]
    pub limit: Option<u64>,
    /// Keep printing items as they arrive, until interrupted.
    #[arg(long)]
    pub follow: bool,
    /// Remove the items printed from Redis (a consumer's read; each item
    /// reaches one consumer).
    #[arg(long)]
    pub pop: bool,
    #[command(flatten)]
    pub redis: RedisArgs,
}

/// The arguments of `crawlworker export`.
#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// The spider file (TOML).
    pub spider: SpiderPath,
    /// Where items go: postgres://USER@HOST:PORT/DB, sqlite:PATH, jsonl:DIR,
    /// csv:DIR or exec:COMMAND
    #[arg(
        long,
        env = "CRAWLWORKER_EXPORT_TO",
        value_name = "URL",
        hide_env_values = true,
        required_unless_present = "to_file",
        conflicts_with = "to_file"
    )]
    pub to: Option<String>,
    /// A file holding the --to address (with its password, if it has one)
    #[arg(long, value_name = "FILE")]
    pub to_file: Option<PathBuf>,
    /// Create missing tables and add missing columns (nothing is ever
    /// dropped); for files, create the directory
    #[arg(long)]
    pub create: bool,
    /// Stop once the crawl is drained and every item is exported
    #[arg(long)]
    pub until_drained: bool,
    /// Items taken and written in one step
    #[arg(long, default_value_t = 500, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub batch: u64,
    /// An exporter silent this long is gone: its unacknowledged items go to
    /// the others
    #[arg(long, default_value = "30s", value_name = "DURATION", value_parser = duration)]
    pub claim_after: Duration,
    /// The stream's consumer group ([items] sink = "stream")
    #[arg(long, default_value = crate::export::DEFAULT_GROUP, value_name = "NAME")]
    pub group: String,
    /// Files: close a file (and start the next) at this size
    #[arg(long, default_value = "64MiB", value_name = "SIZE", value_parser = size)]
    pub rotate_size: u64,
    /// Files: close a file at this age
    #[arg(long, default_value = "60s", value_name = "DURATION", value_parser = duration)]
    pub rotate_every: Duration,
    /// Files: gzip them (.gz)
    #[arg(long)]
    pub gzip: bool,
    /// exec: runs of a failed batch again before its items are dead-lettered
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub exec_retries: u32,
    /// exec: the wait before the first run again (doubled each time)
    #[arg(long, default_value = "1s", value_name = "DURATION", value_parser = duration)]
    pub exec_retry_wait: Duration,
    /// exec: a run still going after this is killed (with what it
    /// started) and counts as a failed run
    #[arg(long, default_value = "5m", value_name = "DURATION", value_parser = duration)]
    pub exec_timeout: Duration,
    /// Serve Prometheus metrics on this address (`/metrics`, and
    /// `/healthz` for health checks), e.g. 127.0.0.1:9411
    #[arg(long, value_name = "ADDR", env = "CRAWLWORKER_METRICS_ADDR")]
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// Print the statements that make the tables, and exit
    #[arg(long)]
    pub print_schema: bool,
    #[command(flatten)]
    pub redis: RedisArgs,
}

/// A size in bytes: `1048576`, `64MiB`, `10MB`.
fn size(s: &str) -> Result<u64, String> {
    s.parse::<bytesize::ByteSize>()
        .map(|b| b.as_u64())
        .map_err(|e| format!("`{s}` is not a size such as 64MiB: {e}"))
}

/// The arguments of `crawlworker dashboard`.
#[derive(Debug, clap::Args)]
pub struct DashboardArgs {
    /// Spider files (TOML) to show.
    #[arg(required = true, value_name = "SPIDER")]
    pub spiders: Vec<SpiderPath>,
    /// The address to serve the page on.
    #[arg(long, default_value = "127.0.0.1:9400", value_name = "ADDR")]
    pub listen: std::net::SocketAddr,
    #[command(flatten)]
    pub redis: RedisArgs,
}

/// The arguments of `crawlworker health`.
#[derive(Debug, clap::Args)]
pub struct HealthArgs {
    /// The worker's --metrics-addr.
    #[arg(long, value_name = "ADDR", env = "CRAWLWORKER_METRICS_ADDR")]
    pub metrics_addr: std::net::SocketAddr,
}

/// The arguments of `crawlworker check`.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// Spider files, or directories whose *.toml files are checked.
    #[arg(required = true, value_name = "SPIDER")]
    pub spiders: Vec<SpiderPath>,
}

/// The arguments of `crawlworker parse`.
#[derive(Debug, clap::Args)]
pub struct ParseArgs {
    /// The spider file (TOML).
    pub spider: SpiderPath,
    /// An http(s) URL to fetch, or a file holding a saved page.
    pub target: String,
    /// The page's address, when TARGET is a file (for rule matching and links).
    #[arg(long)]
    pub url: Option<String>,
    /// Use this rule instead of the one whose `match` fits the URL.
    #[arg(long, value_name = "NAME")]
    pub rule: Option<String>,
    /// The request's context, as a JSON object (e.g. a task).
    #[arg(long, value_name = "JSON")]
    pub meta: Option<String>,
    /// The request's depth.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub depth: u32,
    /// Replay the page from this page cache when it holds it, else fetch
    /// it and store it there (the httpcache_dir setting): develop a spider
    /// without asking the site again.
    #[arg(long, value_name = "DIR")]
    pub http_cache: Option<PathBuf>,
    /// For a `[session]` spider: the cluster's Redis, whose live session
    /// fetches the page (no login). Without it, or without a live
    /// session there, parse logs in once itself. Nothing is written there.
    #[arg(long, value_name = "URL", value_parser = RedisUrl::parse)]
    pub redis: Option<RedisUrl>,
    #[command(flatten)]
    pub config: ConfigArgs,
}

/// The arguments of `crawlworker fingerprint`.
#[derive(Debug, clap::Args)]
pub struct FingerprintArgs {
    /// The URL, as a page or a task gives it.
    pub url: String,
    /// The request's HTTP method.
    #[arg(long, default_value = "GET")]
    pub method: String,
    /// The request body, as text.
    #[arg(long, default_value = "")]
    pub body: String,
}

/// The arguments of `crawlworker settings`.
#[derive(Debug, clap::Args)]
pub struct SettingsArgs {
    /// A spider file: show the values it runs with, and where each came
    /// from.
    #[arg(value_name = "SPIDER")]
    pub spider: Option<SpiderPath>,
    /// As the book's Markdown table (the catalogue, without a spider).
    #[arg(long, conflicts_with = "spider")]
    pub markdown: bool,
    /// With a spider: one JSON object per setting (setting, value, from,
    /// over).
    #[arg(long, requires = "spider")]
    pub json: bool,
    /// With a spider: the --redis flag `run` would be given.
    #[arg(long, value_name = "URL", value_parser = RedisUrl::parse, requires = "spider")]
    pub redis: Option<RedisUrl>,
    /// With a spider: the --concurrency flag `run` would be given.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..), requires = "spider")]
    pub concurrency: Option<u32>,
    /// With a spider: the worker configuration file (settings under every
    /// spider's own) [default: CRAWLWORKER_CONFIG, else
    /// config/crawlworker.toml if it exists]
    #[arg(long, value_name = "FILE", requires = "spider")]
    pub config: Option<PathBuf>,
}

/// The arguments of `crawlworker completions`.
#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell.
    pub shell: clap_complete::Shell,
}
