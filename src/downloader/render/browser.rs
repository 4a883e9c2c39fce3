//! The worker's Chromium: started when the first page to render comes,
//! restarted when it died, after `render_restart_pages` pages, or when its
//! processes use more than `render_max_rss`.
//!
//! The worker starts the process itself (not through the CDP crate's
//! launcher) so that it dies with the worker: a worker killed with SIGKILL
//! leaves no browser behind (`PR_SET_PDEATHSIG`). It gets a fresh profile
//! folder each start, removed when it stops, and reaches the network only
//! through the worker ([`super::serve`]): every request it makes is
//! intercepted, and whatever is not (a WebSocket) goes to a proxy that is
//! not there, with every name unresolvable.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chromiumoxide::error::CdpError;
use chromiumoxide::handler::HandlerConfig;
use chromiumoxide::{Browser, Page};
use futures_util::StreamExt;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStderr, Command};
use tokio::sync::Mutex;

use crate::settings::Settings;

/// How long Chromium may take to start and say where its DevTools are.
const LAUNCH_TIMEOUT: Duration = Duration::from_secs(30);

/// A profile folder's name before `<worker pid>-<start>`, in the
/// temporary folder.
const PROFILE_PREFIX: &str = "crawlworker-chromium-";

/// The name of the folder Chromium makes for its singleton socket starts
/// with this, in the temporary folder.
const SOCKET_FOLDER_PREFIX: &str = "org.chromium.";

/// How long opening a tab may take.
const NEW_PAGE_TIMEOUT: Duration = Duration::from_secs(10);

/// How often (in pages) the browser's memory is read.
const RSS_EVERY: u32 = 20;

/// Names looked up on PATH when the `chromium` setting is empty.
const CANDIDATES: [&str; 4] = [
    "chromium",
    "chromium-browser",
    "google-chrome",
    "google-chrome-stable",
];

/// The flags every start gets: headless, no first-run or background
/// traffic, nothing reaching the network except through interception.
const FLAGS: &[&str] = &[
    "--headless",
    "--disable-gpu",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--disable-breakpad",
    "--disable-dev-shm-usage",
    "--disable-quic",
    // Every tab renders as if it were in front: a page in a background
    // tab would have its timers, frames and observers held back.
    "--disable-background-timer-throttling",
    "--disable-backgrounding-occluded-windows",
    "--disable-renderer-backgrounding",
    "--disable-ipc-flooding-protection",
    "--disable-features=Translate,OptimizationHints,MediaRouter,HttpsUpgrades",
    "--metrics-recording-only",
    "--mute-audio",
    "--hide-scrollbars",
    "--password-store=basic",
    "--use-mock-keychain",
    // Whatever escapes interception goes nowhere.
    "--proxy-server=http://127.0.0.1:9",
    "--proxy-bypass-list=<-loopback>",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--remote-debugging-port=0",
    "about:blank",
];

/// One running Chromium.
pub struct Instance {
    browser: Option<Browser>,
    child: Option<Child>,
    handler: tokio::task::JoinHandle<()>,
    profile: PathBuf,
    pid: Option<u32>,
    /// Set when its DevTools connection ended or a call showed it gone.
    dead: Arc<AtomicBool>,
    /// Woken when its DevTools connection ends.
    ended: Arc<tokio::sync::Notify>,
    served: AtomicU32,
}

impl Instance {
    /// A new tab, blank; a browser that does not open one in
    /// [`NEW_PAGE_TIMEOUT`] has stopped answering.
    pub async fn new_page(&self) -> Result<Page, String> {
        let browser = self.browser.as_ref().ok_or("the browser is stopping")?;
        match tokio::time::timeout(NEW_PAGE_TIMEOUT, browser.new_page("about:blank")).await {
            Ok(page) => page.map_err(|e| e.to_string()),
            Err(_) => Err(format!(
                "no new tab within {}",
                humantime::format_duration(NEW_PAGE_TIMEOUT)
            )),
        }
    }

    /// Marks it for a restart before the next page (a call failed).
    pub fn mark_dead(&self) {
        self.dead.store(true, Ordering::Relaxed);
    }

    pub fn is_dead(&self) -> bool {
        self.dead.load(Ordering::Relaxed)
    }

    /// Resolves once its DevTools connection has ended (the browser
    /// exited or was killed): the pages rendering in it fail at once
    /// instead of at their timeout.
    pub async fn gone(&self) {
        let ended = self.ended.notified();
        // Set before the handler wakes its waiters: an end that came
        // before `ended` was made is seen here.
        if self.is_dead() {
            return;
        }
        ended.await;
    }

    /// Counts a page it rendered.
    pub fn served(&self) {
        self.served.fetch_add(1, Ordering::Relaxed);
    }
}

impl Drop for Instance {
    /// Kills the browser and removes its profile folder here, not in a
    /// task: a task spawned while the runtime shuts down (the end of a
    /// local crawl) never runs, and left the folder behind. The process is
    /// reaped in the background (kill_on_drop).
    fn drop(&mut self) {
        self.handler.abort();
        drop(self.browser.take());
        if let Some(mut child) = self.child.take() {
            let _ = child.start_kill();
        }
        remove_profile(&self.profile);
    }
}

/// Removes a browser's profile folder and the folder of its singleton
/// socket, which Chromium makes in the temporary folder
/// (`org.chromium.Chromium.XXXXXX`, linked from the profile's
/// `SingletonSocket`) and removes only when it exits cleanly: a browser
/// killed, as every restart and stop kills it, left one more such folder
/// each time. (Chromium cannot be told to put it in the profile: the
/// socket's path must fit 107 bytes, which a profile in a long `TMPDIR`
/// does not.)
fn remove_profile(profile: &Path) {
    let socket_folder = std::fs::read_link(profile.join("SingletonSocket"))
        .ok()
        .and_then(|socket| socket.parent().map(Path::to_path_buf))
        .filter(|folder| {
            folder
                .file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.starts_with(SOCKET_FOLDER_PREFIX))
        });
    if let Some(folder) = socket_folder {
        let _ = std::fs::remove_dir_all(folder);
    }
    let _ = std::fs::remove_dir_all(profile);
}

/// Why the browser is (re)started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// It was running and fit to serve.
    Running,
    /// First start.
    First,
    /// It died, served its pages or grew too large: counted as a restart.
    Restarted(&'static str),
}

/// The worker's browser, started and restarted on demand.
pub struct Keeper {
    settings: Arc<Settings>,
    current: Mutex<Option<Arc<Instance>>>,
    starts: AtomicU32,
}

impl Keeper {
    pub fn new(settings: Arc<Settings>) -> Keeper {
        Keeper {
            settings,
            current: Mutex::new(None),
            starts: AtomicU32::new(0),
        }
    }

    /// The running browser, started (again) if it is not fit to serve.
    pub async fn instance(&self) -> Result<(Arc<Instance>, Start), String> {
        let mut current = self.current.lock().await;
        let why = match current.as_ref() {
            None => None,
            Some(instance) => match self.unfit(instance) {
                None => return Ok((instance.clone(), Start::Running)),
                Some(why) => Some(why),
            },
        };
        // The old one stops when its last page is done.
        *current = None;
        let n = self.starts.fetch_add(1, Ordering::Relaxed);
        let instance = Arc::new(launch(&self.settings, n).await?);
        *current = Some(instance.clone());
        Ok((instance, why.map_or(Start::First, Start::Restarted)))
    }

    /// Why `instance` should not serve another page, if it should not.
    fn unfit(&self, instance: &Instance) -> Option<&'static str> {
        let served = instance.served.load(Ordering::Relaxed);
        let limit = self.settings.render_restart_pages;
        if instance.is_dead() {
            return Some("it stopped answering");
        }
        if limit > 0 && served >= limit {
            return Some("render_restart_pages");
        }
        let max_rss = self.settings.render_max_rss.0;
        if max_rss > 0 && served > 0 && served.is_multiple_of(RSS_EVERY) {
            let rss = instance.pid.map(super::processes::tree_rss).unwrap_or(0);
            if rss > max_rss {
                return Some("render_max_rss");
            }
        }
        None
    }
}

/// The Chromium binary: the `chromium` setting, else the first of
/// [`CANDIDATES`] on PATH.
pub fn executable(settings: &Settings) -> Result<PathBuf, String> {
    let named = settings.chromium.trim();
    if !named.is_empty() {
        return find(named).ok_or_else(|| {
            format!("the `chromium` setting names `{named}`, which is not an executable file (give its full path, or install it)")
        });
    }
    CANDIDATES.iter().find_map(|c| find(c)).ok_or_else(|| {
        format!(
            "no Chromium found on PATH (looked for {}): install it (Debian: apt-get install chromium) or set `chromium` to its path",
            CANDIDATES.join(", ")
        )
    })
}

/// `name` as a path if it has a slash, else looked up on PATH.
fn find(name: &str) -> Option<PathBuf> {
    let is_file = |p: &Path| p.is_file();
    if name.contains('/') {
        return Some(PathBuf::from(name)).filter(|p| is_file(p));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| is_file(p))
}

/// Starts Chromium and connects to its DevTools.
async fn launch(settings: &Settings, n: u32) -> Result<Instance, String> {
    let exe = executable(settings)?;
    let profile = std::env::temp_dir().join(format!("{PROFILE_PREFIX}{}-{n}", std::process::id()));
    remove_profile(&profile);
    sweep_stale_profiles();
    let mut child = spawn(&exe, &profile)?;
    let pid = child.id();
    let stderr = child
        .stderr
        .take()
        .ok_or("Chromium's error output is not readable")?;
    let found = tokio::time::timeout(LAUNCH_TIMEOUT, devtools_url(stderr)).await;
    let url = match found {
        Ok(Ok(url)) => url,
        Ok(Err(e)) => return Err(format!("{} did not start: {e}", exe.display())),
        Err(_) => {
            return Err(format!(
                "{} did not open its DevTools within {}",
                exe.display(),
                humantime::format_duration(LAUNCH_TIMEOUT)
            ))
        }
    };
    let config = HandlerConfig {
        request_intercept: true,
        ignore_https_errors: false,
        viewport: None,
        ..HandlerConfig::default()
    };
    let (browser, mut handler) = Browser::connect_with_config(url, config)
        .await
        .map_err(|e| format!("cannot connect to Chromium's DevTools: {e}"))?;
    let dead = Arc::new(AtomicBool::new(false));
    let ended = Arc::new(tokio::sync::Notify::new());
    let (mark, wake) = (dead.clone(), ended.clone());
    let handler = tokio::spawn(async move {
        while let Some(event) = handler.next().await {
            match event {
                // The connection is gone (the browser exited or was
                // killed): nothing sent on it will be answered.
                Err(e @ (CdpError::Ws(_) | CdpError::Io(_))) => {
                    tracing::debug!(error = %e, "Chromium's DevTools connection ended");
                    break;
                }
                Err(e) => {
                    tracing::debug!(error = %e, "Chromium's DevTools connection reported an error")
                }
                Ok(()) => {}
            }
        }
        mark.store(true, Ordering::Relaxed);
        wake.notify_waiters();
    });
    tracing::info!(chromium = %exe.display(), pid = pid.unwrap_or(0), "started Chromium to render pages");
    Ok(Instance {
        browser: Some(browser),
        child: Some(child),
        handler,
        profile,
        pid,
        dead,
        ended,
        served: AtomicU32::new(0),
    })
}

/// Removes the profile folders of workers that are gone: one killed
/// (SIGKILL) cannot remove its own, and a browser still exiting when its
/// worker removed it may write a few files back.
fn sweep_stale_profiles() {
    let Ok(dir) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in dir.flatten() {
        let name = entry.file_name();
        let owner = name
            .to_str()
            .and_then(|n| n.strip_prefix(PROFILE_PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok());
        if owner.is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists()) {
            remove_profile(&entry.path());
        }
    }
}

/// The Chromium process, set to die with this worker's thread.
fn spawn(exe: &Path, profile: &Path) -> Result<Child, String> {
    let mut command = Command::new(exe);
    command
        .args(FLAGS)
        .arg(format!("--user-data-dir={}", profile.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // As root (a container), Chromium's sandbox cannot start.
    if rustix::process::geteuid().is_root() {
        command.arg("--no-sandbox");
    }
    // SAFETY: the closure runs in the forked child before exec and makes
    // one system call (prctl), which is async-signal-safe; it touches no
    // memory shared with the parent.
    unsafe {
        command.pre_exec(|| {
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
                .map_err(std::io::Error::from)
        });
    }
    command
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", exe.display()))
}

/// Reads Chromium's error output until it says where its DevTools listen,
/// then keeps reading it (into the debug log) so it never blocks on a
/// full pipe.
async fn devtools_url(stderr: ChildStderr) -> Result<String, String> {
    let mut lines = BufReader::new(stderr).lines();
    let mut said = Vec::new();
    while let Some(line) = lines.next_line().await.map_err(|e| e.to_string())? {
        if let Some(url) = line.trim().strip_prefix("DevTools listening on ") {
            let url = url.to_string();
            tokio::spawn(async move {
                while let Ok(Some(line)) = lines.next_line().await {
                    tracing::trace!(line = %line, "Chromium");
                }
            });
            return Ok(url);
        }
        if said.len() < 5 {
            said.push(line);
        }
    }
    Err(format!("it exited, saying: {}", said.join(" | ")))
}
