//! A follow entry's `rewrite`: a link made canonical before it is
//! checked (`allow`, `deny`, allowed domains) and queued, so the
//! dupefilter sees one URL per page. Query parameters are kept or removed
//! as written in the URL (their bytes are not re-encoded), then each
//! `replace` regex runs over the whole URL, then the `jq` program; what
//! comes out is resolved against the link and must be an http(s) URL.
//! Fragments are already gone: followed links never keep one.

use std::borrow::Cow;

use percent_encoding::percent_decode_str;
use serde_json::Value;

use crate::request::absolute_url;
use crate::spider::{QueryParam, QueryRule, Rewrite};

/// `url` rewritten, or why it cannot be (the link is not followed).
pub fn apply(rewrite: &Rewrite, url: &str) -> Result<String, String> {
    let link = url::Url::parse(url).map_err(|e| format!("`{url}` is not a URL: {e}"))?;
    let mut out = filter_query(&rewrite.query, link.clone()).to_string();
    for (re, with) in &rewrite.replace {
        if let Cow::Owned(replaced) = re.replace_all(&out, with.as_str()) {
            out = replaced;
        }
    }
    if let Some(jq) = &rewrite.jq {
        out = match jq.run(&Value::String(out)) {
            Ok(Value::String(s)) => s,
            Ok(Value::Null) => return Err("its jq gave null (the link is left out)".into()),
            Ok(other) => return Err(format!("its jq gave {other}, not a URL string")),
            Err(e) => return Err(format!("its jq failed: {e}")),
        };
    }
    absolute_url(Some(&link), &out, encoding_rs::UTF_8, false).map_err(|_| {
        format!(
            "it made `{}`, not an http(s) URL",
            crate::wording::cut(&out, 200)
        )
    })
}

/// `link` with the query parameters `rule` keeps (no `?` when none is
/// left).
fn filter_query(rule: &QueryRule, mut link: url::Url) -> url::Url {
    let keep = |part: &str| match rule {
        QueryRule::All => true,
        QueryRule::Keep(params) => params.iter().any(|p| matches(p, part)),
        QueryRule::Remove(params) => !params.iter().any(|p| matches(p, part)),
    };
    if matches!(rule, QueryRule::All) {
        return link;
    }
    let Some(query) = link.query() else {
        return link;
    };
    let kept: Vec<&str> = query
        .split('&')
        .filter(|p| !p.is_empty() && keep(p))
        .collect();
    let kept = kept.join("&");
    link.set_query((!kept.is_empty()).then_some(kept.as_str()));
    link
}

/// Whether the query part `name=value` (as written) is `param`.
fn matches(param: &QueryParam, part: &str) -> bool {
    let (name, value) = part.split_once('=').unwrap_or((part, ""));
    let decoded = |s: &str| {
        let plus = s.replace('+', " ");
        percent_decode_str(&plus).decode_utf8_lossy().into_owned()
    };
    let name = decoded(name);
    let named = match param.prefix {
        true => name.starts_with(&param.name),
        false => name == param.name,
    };
    named && param.value.as_ref().is_none_or(|v| *v == decoded(value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spider::Transform;

    fn param(s: &str) -> QueryParam {
        let (name, value) = match s.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (s, None),
        };
        QueryParam {
            name: name.trim_end_matches('*').to_string(),
            prefix: name.ends_with('*'),
            value,
        }
    }

    fn rewrite(query: QueryRule, replace: &[(&str, &str)], jq: Option<&str>) -> Rewrite {
        Rewrite {
            query,
            replace: replace
                .iter()
                .map(|(r, w)| (regex::Regex::new(r).expect("regex"), w.to_string()))
                .collect(),
            jq: jq.map(|j| Transform::compile(j).expect("jq")),
        }
    }

    #[test]
    fn query_parameters_are_removed_or_kept_by_name_value_or_prefix() {
        let remove = rewrite(
            QueryRule::Remove(vec![param("page=1"), param("utm_*")]),
            &[],
            None,
        );
        let url = "http://f.test/t/42/?page=1&utm_source=x&sort=new";
        assert_eq!(
            apply(&remove, url).as_deref(),
            Ok("http://f.test/t/42/?sort=new")
        );
        assert_eq!(
            apply(&remove, "http://f.test/t/42/?page=3").as_deref(),
            Ok("http://f.test/t/42/?page=3")
        );
        assert_eq!(
            apply(&remove, "http://f.test/t/42/?page=1").as_deref(),
            Ok("http://f.test/t/42/")
        );
        let keep = rewrite(QueryRule::Keep(vec![param("id")]), &[], None);
        assert_eq!(
            apply(&keep, "http://f.test/show?sid=abc&id=7&x").as_deref(),
            Ok("http://f.test/show?id=7")
        );
        // A GBK query's bytes stay as they were.
        let gbk = "http://f.test/s?q=%C4%E3%BA%C3&page=2";
        assert_eq!(
            apply(&remove, gbk).as_deref(),
            Ok("http://f.test/s?q=%C4%E3%BA%C3&page=2")
        );
    }

    #[test]
    fn replace_then_jq_make_the_url_followed() {
        let r = rewrite(
            QueryRule::Remove(vec![param("page")]),
            &[(r"/+$", ""), (r"/topic/(\d+)-[^/]*", "/t/$1")],
            Some(r#"sub("^http:"; "https:")"#),
        );
        assert_eq!(
            apply(&r, "http://f.test/topic/42-a-title/?page=3").as_deref(),
            Ok("https://f.test/t/42")
        );
        let relative = rewrite(QueryRule::All, &[], Some(r#""/t/" + (split("/") | last)"#));
        assert_eq!(
            apply(&relative, "http://f.test/x/y/42").as_deref(),
            Ok("http://f.test/t/42")
        );
        let bad = rewrite(QueryRule::All, &[], Some(r#""mailto:a@b""#));
        assert!(apply(&bad, "http://f.test/")
            .unwrap_err()
            .contains("not an http(s) URL"));
        let none = rewrite(QueryRule::All, &[], Some("null"));
        assert!(apply(&none, "http://f.test/").is_err());
    }
}
