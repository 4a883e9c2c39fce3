//! Downloading one request over HTTP: the minimal downloader `parse` uses,
//! with the spider's user agent, headers, timeouts and size limit. It does
//! not follow redirects (a redirect is a response like any other) and never
//! parses what it downloads.

use std::time::Duration;

use crate::request::Request;
use crate::settings::Settings;

/// A downloaded response.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub url: String,
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// Why a download failed.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("cannot build the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
    #[error("only http and https URLs are fetched, not `{0}`")]
    Scheme(String),
    #[error("`{method}` is not a valid HTTP method")]
    Method { method: String },
    #[error("request to {url} failed: {source}")]
    Http {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("response from {url} is larger than download_maxsize ({limit} bytes); it was cut off")]
    TooLarge { url: String, limit: u64 },
}

impl FetchError {
    /// A short name for stats (`downloader/exception_type_count/<kind>`).
    pub fn kind(&self) -> &'static str {
        match self {
            FetchError::Client(_) => "ClientError",
            FetchError::Scheme(_) => "UnsupportedScheme",
            FetchError::Method { .. } => "InvalidMethod",
            FetchError::Http { source, .. } if source.is_timeout() => "TimeoutError",
            FetchError::Http { source, .. } if source.is_connect() => "ConnectionRefusedError",
            FetchError::Http { .. } => "ResponseFailed",
            FetchError::TooLarge { .. } => "ResponseTooLarge",
        }
    }
}

/// Builds the HTTP client for a spider's settings.
pub fn client(settings: &Settings) -> Result<reqwest::Client, FetchError> {
    reqwest::Client::builder()
        .user_agent(settings.user_agent.clone())
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(settings.connect_timeout)
        .timeout(settings.download_timeout.max(Duration::from_millis(1)))
        .build()
        .map_err(FetchError::Client)
}

/// Downloads `request`, reading at most `download_maxsize` bytes.
pub async fn fetch(
    client: &reqwest::Client,
    settings: &Settings,
    request: &Request,
) -> Result<Fetched, FetchError> {
    let url = url::Url::parse(&request.url).map_err(|_| FetchError::Scheme(request.url.clone()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(FetchError::Scheme(url.scheme().to_string()));
    }
    let method =
        reqwest::Method::from_bytes(request.method.as_bytes()).map_err(|_| FetchError::Method {
            method: request.method.clone(),
        })?;
    let http = |source| FetchError::Http {
        url: request.url.clone(),
        source,
    };
    let mut builder = client.request(method, url);
    let own = |name: &str| {
        request
            .headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case(name))
    };
    for (k, v) in &settings.default_request_headers {
        if !own(k) {
            builder = builder.header(k, v);
        }
    }
    for (k, v) in &request.headers {
        builder = builder.header(k, v);
    }
    if !request.body.is_empty() {
        builder = builder.body(request.body.clone());
    }
    let mut response = builder.send().await.map_err(http)?;
    let status = response.status().as_u16();
    let headers = response
        .headers()
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let final_url = response.url().to_string();
    let limit = settings.download_maxsize.0;
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(http)? {
        if body.len() as u64 + chunk.len() as u64 > limit {
            return Err(FetchError::TooLarge {
                url: request.url.clone(),
                limit,
            });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Fetched {
        url: final_url,
        status,
        headers,
        body,
    })
}
