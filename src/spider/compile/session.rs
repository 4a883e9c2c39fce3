//! `[session]` as written, and its checks: a login page URL, a form
//! selector, form fields whose secret values come from the environment or
//! a file (a password written in the file is refused), the `logged_in`
//! and `logged_out` tests, `[[session.accounts]]` and the login limits.
//! What it compiles to is [`crate::spider::session`].

use std::time::Duration;

use super::Compiler;
use crate::reader::{At, Loc, TableReader};
use crate::settings;
use crate::spider::session::{is_secret_name, Account, Detector, SecretSource, Session};

/// Logins per account per hour when the spider does not say.
const DEFAULT_MAX_LOGINS_PER_HOUR: i64 = 10;
/// How long a login may hold the cluster's login lock when the spider
/// does not say.
const DEFAULT_LOGIN_TIMEOUT: Duration = Duration::from_secs(60);
/// How long an account rests after a refused login, when the site says
/// no `Retry-After`: a forum's "too many attempts" lock usually lasts
/// minutes.
const DEFAULT_LOGIN_COOLDOWN: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// `[session]` as written.
#[derive(Debug)]
pub struct SessionFile {
    pub loc: Loc,
    pub login_url: Option<At<String>>,
    pub form: Option<At<String>>,
    pub fields: Vec<FieldFile>,
    pub accounts: Vec<AccountFile>,
    pub logged_in: Option<DetectorFile>,
    pub logged_out: Option<DetectorFile>,
    pub max_logins_per_hour: Option<At<i64>>,
    pub login_timeout: Option<At<String>>,
    /// How long an account rests after a refused login.
    pub login_cooldown: Option<At<String>>,
    /// Hosts besides the login page's that may receive the credentials.
    pub login_hosts: Vec<At<String>>,
}

/// One form field: `name = { env = "VAR" }`, `{ file = "path" }` or a
/// plain string.
#[derive(Debug)]
pub struct FieldFile {
    pub name: At<String>,
    pub source: Option<SecretSource>,
    pub literal: bool,
}

/// `[[session.accounts]]`.
#[derive(Debug)]
pub struct AccountFile {
    pub loc: Loc,
    pub name: Option<At<String>>,
    pub fields: Vec<FieldFile>,
}

/// `{ css = "…" }` and/or `{ url = "…" }`.
#[derive(Debug)]
pub struct DetectorFile {
    pub loc: Loc,
    pub css: Option<At<String>>,
    pub url: Option<At<String>>,
}

/// Reads `[session]`.
pub(crate) fn read_session(t: &TableReader<'_>) -> SessionFile {
    let file = SessionFile {
        loc: t.loc.clone(),
        login_url: t.str("login_url"),
        form: t.str("form"),
        fields: read_fields(t),
        accounts: t
            .tables("accounts")
            .iter()
            .map(|a| {
                let account = AccountFile {
                    loc: a.loc.clone(),
                    name: a.str("name"),
                    fields: read_fields(a),
                };
                a.finish();
                account
            })
            .collect(),
        logged_in: t.table("logged_in").map(|d| read_detector(&d)),
        logged_out: t.table("logged_out").map(|d| read_detector(&d)),
        max_logins_per_hour: t.int_in("max_logins_per_hour", 1, 3600),
        login_timeout: t.str("login_timeout"),
        login_cooldown: t.str("login_cooldown"),
        login_hosts: t.str_list("login_hosts").unwrap_or_default(),
    };
    t.finish();
    file
}

fn read_detector(t: &TableReader<'_>) -> DetectorFile {
    let d = DetectorFile {
        loc: t.loc.clone(),
        css: t.str("css"),
        url: t.str("url"),
    };
    t.finish();
    d
}

fn read_fields(t: &TableReader<'_>) -> Vec<FieldFile> {
    let Some(f) = t.table("fields") else {
        return Vec::new();
    };
    let fields = f
        .entries()
        .into_iter()
        .map(|(name, node, loc)| {
            if let Some(v) = node.as_str() {
                return FieldFile {
                    name,
                    source: Some(SecretSource::Literal(v.to_string())),
                    literal: true,
                };
            }
            let source = f.as_table(node, loc.clone()).and_then(|s| {
                let env = s.str("env");
                let file = s.str("file");
                s.finish();
                let source = match (env, file) {
                    (Some(e), None) => Some(SecretSource::Env(e.value)),
                    (None, Some(p)) => Some(SecretSource::File(p.value.into())),
                    _ => None,
                };
                if source.is_none() {
                    f.reader().problem(
                        &loc,
                        format!("field `{}` needs exactly one of `env` or `file`", name.value),
                        Some(format!("write `{} = {{ env = \"FORUM_PASS\" }}` or `{{ file = \"/run/secrets/forum_pass\" }}`", name.value)),
                    );
                }
                source
            });
            FieldFile {
                name,
                source,
                literal: false,
            }
        })
        .collect();
    f.finish();
    fields
}

impl Compiler<'_> {
    /// Compiles `[session]`; `None` when anything is wrong (reported).
    pub(super) fn session(&self, file: Option<&SessionFile>) -> Option<Option<Session>> {
        let Some(file) = file else {
            return Some(None);
        };
        let login_url = self.login_url(file);
        let form = self.required(
            file,
            "form",
            file.form.as_ref(),
            "add `form = \"form#login\"`: the CSS selector of the login form",
        );
        let form = form.and_then(|f| self.selector(f));
        let fields = self.secret_fields(&file.fields);
        let accounts = self.accounts(file);
        let logged_in = self.detector(file.logged_in.as_ref(), "logged_in", &file.loc, false);
        let logged_out = self.detector(file.logged_out.as_ref(), "logged_out", &file.loc, true);
        let login_timeout = match &file.login_timeout {
            Some(at) => settings::parse_duration(&at.value)
                .map_err(|e| self.problem(&at.loc, e, "write a duration such as \"60s\""))
                .ok(),
            None => Some(DEFAULT_LOGIN_TIMEOUT),
        };
        let login_cooldown = match &file.login_cooldown {
            Some(at) => settings::parse_duration(&at.value)
                .map_err(|e| self.problem(&at.loc, e, "write a duration such as \"15m\""))
                .ok(),
            None => Some(DEFAULT_LOGIN_COOLDOWN),
        };
        let login_hosts = self.login_hosts(&file.login_hosts);
        Some(Some(Session {
            login_url: login_url?,
            form: form?,
            fields: fields?,
            accounts: accounts?,
            logged_in: logged_in?,
            logged_out: logged_out?,
            max_logins_per_hour: file
                .max_logins_per_hour
                .as_ref()
                .map_or(DEFAULT_MAX_LOGINS_PER_HOUR, |m| m.value)
                as u32,
            login_timeout: login_timeout?,
            login_cooldown: login_cooldown?,
            login_hosts: login_hosts?,
        }))
    }

    /// `login_hosts`: each a host, or `host:port`, nothing more.
    fn login_hosts(&self, hosts: &[At<String>]) -> Option<Vec<String>> {
        let mut ok = true;
        let mut out = Vec::new();
        for at in hosts {
            let written = at.value.trim().to_ascii_lowercase();
            let parsed = url::Url::parse(&format!("http://{written}/")).ok();
            let plain = parsed.as_ref().is_some_and(|u| {
                u.path() == "/"
                    && u.username().is_empty()
                    && u.query().is_none()
                    && u.host_str().is_some()
            });
            if plain && !written.contains('/') {
                out.push(written);
            } else {
                self.problem(
                    &at.loc,
                    format!("login_hosts: `{}` is not a host or host:port", at.value),
                    "write the host the login form may send the credentials to, e.g. \"sso.forum.example\" or \"127.0.0.1:8443\"",
                );
                ok = false;
            }
        }
        ok.then_some(out)
    }

    fn required<'f>(
        &self,
        file: &SessionFile,
        key: &str,
        value: Option<&'f At<String>>,
        hint: &str,
    ) -> Option<&'f At<String>> {
        if value.is_none() {
            self.problem(&file.loc, format!("[session] has no `{key}`"), hint);
        }
        value
    }

    fn login_url(&self, file: &SessionFile) -> Option<url::Url> {
        let at = self.required(
            file,
            "login_url",
            file.login_url.as_ref(),
            "add `login_url = \"https://forum.example/login\"`: the page with the login form",
        )?;
        match url::Url::parse(&at.value) {
            Ok(u) if matches!(u.scheme(), "http" | "https") => Some(u),
            Ok(u) => {
                self.problem(
                    &at.loc,
                    format!("login_url must be http or https, not `{}`", u.scheme()),
                    "give the address of the login page",
                );
                None
            }
            Err(e) => {
                self.problem(
                    &at.loc,
                    format!("login_url is not a URL: {e}"),
                    "give an absolute address, e.g. https://forum.example/login",
                );
                None
            }
        }
    }

    /// The fields, refusing a secret written in the file.
    fn secret_fields(&self, fields: &[FieldFile]) -> Option<Vec<(String, SecretSource)>> {
        let mut ok = true;
        let mut out = Vec::new();
        for f in fields {
            if f.literal && is_secret_name(&f.name.value) {
                self.problem(
                    &f.name.loc,
                    format!("`{}` is a credential written in the spider file", f.name.value),
                    format!("credentials come from the environment or a file: `{} = {{ env = \"FORUM_PASS\" }}` or `{{ file = \"/run/secrets/forum_pass\" }}`", f.name.value),
                );
                ok = false;
            }
            match &f.source {
                Some(s) => out.push((f.name.value.clone(), s.clone())),
                None => ok = false,
            }
        }
        ok.then_some(out)
    }

    fn accounts(&self, file: &SessionFile) -> Option<Vec<Account>> {
        if file.accounts.is_empty() {
            if file.fields.is_empty() {
                self.problem(
                    &file.loc,
                    "the session has no form fields to log in with",
                    "add `fields = { username = { env = \"FORUM_USER\" }, password = { env = \"FORUM_PASS\" } }`, or `[[session.accounts]]` with their own",
                );
                return None;
            }
            return Some(vec![Account {
                name: "account-1".into(),
                fields: Vec::new(),
            }]);
        }
        let mut out = Vec::new();
        let mut ok = true;
        for (i, a) in file.accounts.iter().enumerate() {
            let name = a
                .name
                .as_ref()
                .map_or_else(|| format!("account-{}", i + 1), |n| n.value.clone());
            if out.iter().any(|o: &Account| o.name == name) {
                self.problem(
                    &a.loc,
                    format!("two accounts are named `{name}`"),
                    "give each account its own `name`",
                );
                ok = false;
            }
            match self.secret_fields(&a.fields) {
                Some(fields) => out.push(Account { name, fields }),
                None => ok = false,
            }
        }
        ok.then_some(out)
    }

    fn detector(
        &self,
        file: Option<&DetectorFile>,
        key: &str,
        session: &Loc,
        url_allowed: bool,
    ) -> Option<Detector> {
        let hint = if url_allowed {
            format!("add `{key} = {{ url = \"/login\" }}` (a response redirected there) or `{{ css = \"form#login\" }}`")
        } else {
            format!("add `{key} = {{ css = \"a.logout\" }}`: what the page after a login shows when it worked")
        };
        let Some(file) = file else {
            self.problem(session, format!("the session has no `{key}` test"), hint);
            return None;
        };
        if file.url.is_some() && !url_allowed {
            self.problem(&file.loc, format!("`{key}` takes `css` only"), hint);
            return None;
        }
        if file.css.is_none() && file.url.is_none() {
            self.problem(&file.loc, format!("`{key}` says nothing to test"), hint);
            return None;
        }
        let css = match &file.css {
            Some(at) => Some(self.selector(at)?),
            None => None,
        };
        Some(Detector {
            url: file.url.as_ref().map(|u| u.value.clone()),
            css,
        })
    }
}
