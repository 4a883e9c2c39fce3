//! `crawlworker parse`: one page (a URL fetched with the spider's settings,
//! or a saved file) through the spider's rule, and what it gives printed
//! as JSON. Nothing is queued, deduplicated or pushed; Redis is read only
//! for a `[session]` spider's live session, with `--redis`
//! ([`super::parse_session`]).

use std::io::Write;
use std::process::ExitCode;

use anyhow::{bail, Context};
use serde_json::{json, Map, Value};

use super::args::ParseArgs;
use super::parse_session::SessionUsed;
use super::{load_config, load_spider};
use crate::downloader::cache::HttpCache;
use crate::downloader::{Fetched, HttpClient};
use crate::extract::{self, Response};
use crate::frontier::redis_url::RedisUrl;
use crate::request::Request;
use crate::settings::Overrides;
use crate::spider::Spider;

pub(super) async fn parse(args: ParseArgs) -> anyhow::Result<ExitCode> {
    let config = load_config(&args.config)?;
    let cli = Overrides {
        httpcache_dir: args.http_cache.map(|d| d.display().to_string()),
        ..Overrides::default()
    };
    let spider = load_spider(&config, &args.spider, &cli)?;
    if let Some(r) = &args.rule {
        if spider.rule_index(r).is_none() {
            let names: Vec<&str> = spider.rules.iter().map(|r| r.name.as_str()).collect();
            bail!(
                "spider `{}` has no rule `{r}`; its rules are: {}",
                spider.name,
                names.join(", ")
            );
        }
    }
    let meta = meta(args.meta)?;
    let target = args.target.as_str();
    let is_url = target.starts_with("http://") || target.starts_with("https://");
    let request = Request {
        rule: args.rule,
        meta,
        depth: args.depth,
        ..Request::get(&page_url(target, args.url, is_url)?)
    };
    let (fetched, session) = if is_url {
        fetch(&spider, &request, args.redis.as_ref()).await?
    } else {
        (read_page(target, &request)?, None)
    };
    let (fetched, render) = super::parse_render::rendered(&spider, &request, fetched).await?;
    let mut out = report(&spider, &request, &fetched)?;
    if let (Some(render), Some(o)) = (render, out.as_object_mut()) {
        o.insert("render".into(), render);
    }
    if let (Some(session), Some(o)) = (session, out.as_object_mut()) {
        tracing::info!("{}", session.said());
        o.insert("session".into(), serde_json::to_value(&session)?);
    }
    let mut stdout = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut stdout, &out)?;
    writeln!(stdout)?;
    Ok(ExitCode::SUCCESS)
}

/// The page from the page cache when it is on and holds it, else from the
/// site (and then stored in the cache): logged in, for a `[session]`
/// spider, with the session it says.
async fn fetch(
    spider: &Spider,
    request: &Request,
    redis: Option<&RedisUrl>,
) -> anyhow::Result<(Fetched, Option<SessionUsed>)> {
    let cache = HttpCache::from_settings(&spider.settings);
    if let Some(fetched) = cache.as_ref().and_then(|c| c.get(request)) {
        tracing::info!(url = %request.url, "replayed from the page cache");
        return Ok((fetched, None));
    }
    let client = HttpClient::new(&spider.settings)?;
    let (fetched, session) =
        match super::parse_session::fetch_logged_in(spider, &client, request, redis).await? {
            Some((fetched, used)) => (fetched, Some(used)),
            None => (client.fetch(request).await?, None),
        };
    if let Some(cache) = &cache {
        cache.put(request, &fetched);
    }
    Ok((fetched, session))
}

/// `--meta`: the request's context, a JSON object.
fn meta(meta: Option<String>) -> anyhow::Result<Map<String, Value>> {
    Ok(match meta {
        Some(m) => match serde_json::from_str(&m) {
            Ok(Value::Object(o)) => o,
            Ok(_) => bail!("--meta must be a JSON object, e.g. '{{\"forum_id\": \"00001\"}}'"),
            Err(e) => bail!("--meta is not valid JSON: {e}"),
        },
        None => Map::new(),
    })
}

/// The page's address: `--url`, the URL fetched, or the file's own.
fn page_url(target: &str, url: Option<String>, is_url: bool) -> anyhow::Result<String> {
    Ok(match (url, is_url) {
        (Some(u), _) => u,
        (None, true) => target.to_string(),
        (None, false) => {
            let abs = std::fs::canonicalize(target)
                .with_context(|| format!("cannot read page file {target}"))?;
            url::Url::from_file_path(&abs)
                .map(|u| u.to_string())
                .unwrap_or_else(|_| format!("file://{}", abs.display()))
        }
    })
}

/// A saved page, as if it had been fetched with status 200.
fn read_page(target: &str, request: &Request) -> anyhow::Result<Fetched> {
    let body = std::fs::read(target).with_context(|| format!("cannot read page file {target}"))?;
    // A saved page was fetched when it was saved: its "3 hours ago" counts
    // from then.
    let fetched_at = std::fs::metadata(target)
        .and_then(|m| m.modified())
        .unwrap_or_else(|_| std::time::SystemTime::now());
    Ok(Fetched {
        url: request.url.clone(),
        status: 200,
        headers: Vec::new(),
        body,
        fetched_at,
        held: Default::default(),
    })
}

/// What is printed: the response's URL, status and size, then what the
/// spider extracted from it (and a note when no rule handled it, its
/// status keeps it from the rules, or its body was binary and nothing
/// read it).
fn report(spider: &Spider, request: &Request, fetched: &Fetched) -> anyhow::Result<Value> {
    let response = Response {
        url: &fetched.url,
        status: fetched.status,
        headers: &fetched.headers,
        body: &fetched.body,
        fetched_at: fetched.fetched_at,
    };
    let result = extract::extract(spider, request, &response);
    let mut out = json!({
        "url": fetched.url,
        "status": fetched.status,
        "bytes": fetched.body.len(),
    });
    let extra = serde_json::to_value(&result)?;
    if let (Some(o), Value::Object(e)) = (out.as_object_mut(), extra) {
        o.extend(e);
        if let Some(note) = note(spider, &result, fetched) {
            o.insert("note".into(), Value::String(note));
        }
    }
    Ok(out)
}

/// Why nothing was extracted, when the output alone does not say it.
fn note(spider: &Spider, result: &extract::Extraction, fetched: &Fetched) -> Option<String> {
    if let Some(status) = result.ignored_status {
        return Some(status_note(spider, fetched, status, result.rule.as_deref()));
    }
    if let Some(binary) = &result.binary {
        return Some(format!(
            "nothing extracted: {}, and a binary body is not read as a page; add `binary = true` to rule `{}` to take such responses (its items can read `page = \"url\"`, `\"status\"` and `\"headers\"`)",
            binary.reason,
            result.rule.as_deref().unwrap_or_default()
        ));
    }
    if let Some(unreadable) = &result.unreadable {
        return Some(format!(
            "{}; a crawl records this page as failed (`crawlworker failed` lists it) and counts it in extract/unreadable_count",
            unreadable.reason
        ));
    }
    result.rule.is_none().then(|| {
        format!(
            "no rule of spider `{}` matches {}; give --rule or --url",
            spider.name, fetched.url
        )
    })
}

/// What a crawl does with a response whose status keeps it from the rules
/// (`rule`: the rule the page is for).
fn status_note(spider: &Spider, fetched: &Fetched, status: u16, rule: Option<&str>) -> String {
    let s = &spider.settings;
    let rule_sees = match rule {
        Some(r) => format!("rule `{r}` extracts nothing from it"),
        None => format!("no rule of spider `{}` matches it either", spider.name),
    };
    let location = fetched.header("location");
    if s.redirect_enabled && matches!(status, 301 | 302 | 303 | 307 | 308) {
        if let Some(to) = location {
            return format!(
                "HTTP {status}: a crawl follows the redirect to {to} as a new request (parse that URL to see it); {rule_sees}"
            );
        }
    }
    if s.retry_enabled && s.retry_http_codes.contains(&status) {
        return format!(
            "HTTP {status}: a crawl retries it (up to retry_times = {} times), then records it as failed (crawlworker failed lists it); {rule_sees}",
            s.retry_times
        );
    }
    let allow = match rule {
        Some(r) => format!("; add {status} to the spider's httperror_allowed_codes setting for rule `{r}` to see such pages"),
        None => String::new(),
    };
    format!(
        "HTTP {status}: not handled (only 2xx and httperror_allowed_codes reach the rules), so a crawl ignores it and records it as failed (kind {status}: crawlworker failed --kind {status} lists it); {rule_sees}{allow}"
    )
}
