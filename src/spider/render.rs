//! `render`: a rule whose pages are built by JavaScript is rendered in
//! headless Chromium before it is extracted ([`crate::downloader::render`] does it).
//! This is what the spider file asks for, compiled: when the page counts
//! as ready, how long it may take, what it never loads, how often it is
//! scrolled to load more.

use std::time::Duration;

/// The longest `timeout` a rule may ask for: a lease must outlive it.
pub const MAX_RENDER_TIMEOUT: Duration = Duration::from_secs(120);

/// The most `scroll` steps a rule may ask for.
pub const MAX_SCROLLS: u32 = 100;

/// How a rule's pages are rendered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Render {
    /// When the page counts as loaded.
    pub wait: Wait,
    /// A CSS selector that must match before the page is taken (after
    /// `wait`): the element the page's script writes last.
    pub wait_for: Option<String>,
    /// Longest the whole render may take; past it the page fails as a
    /// download that timed out does (and is retried).
    pub timeout: Duration,
    /// The kinds of subresource the page never loads.
    pub block: Vec<Resource>,
    /// Times the page is scrolled to its end once loaded, each followed by
    /// the same wait (pages that load more on scroll).
    pub scroll: u32,
}

impl Default for Render {
    fn default() -> Self {
        Render {
            wait: Wait::NetworkIdle,
            wait_for: None,
            timeout: Duration::from_secs(30),
            block: vec![Resource::Image, Resource::Font, Resource::Media],
            scroll: 0,
        }
    }
}

/// When a rendered page counts as loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Its `load` event: the document and its subresources, not what its
    /// scripts fetch after.
    Load,
    /// Its `load` event, then no request in flight for
    /// [`NETWORK_IDLE`](crate::downloader::render::NETWORK_IDLE): what its scripts
    /// fetched has arrived.
    NetworkIdle,
}

impl Wait {
    /// The spelling in a spider file.
    pub const NAMES: [(&'static str, Wait); 2] =
        [("load", Wait::Load), ("network-idle", Wait::NetworkIdle)];

    pub fn name(self) -> &'static str {
        match self {
            Wait::Load => "load",
            Wait::NetworkIdle => "network-idle",
        }
    }
}

/// A kind of subresource a rule may block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    Image,
    Font,
    Media,
    Stylesheet,
}

impl Resource {
    /// The spelling in a spider file.
    pub const NAMES: [(&'static str, Resource); 4] = [
        ("image", Resource::Image),
        ("font", Resource::Font),
        ("media", Resource::Media),
        ("stylesheet", Resource::Stylesheet),
    ];

    /// Chromium's name of the resource type (DevTools `Network.ResourceType`).
    pub fn devtools_name(self) -> &'static str {
        match self {
            Resource::Image => "Image",
            Resource::Font => "Font",
            Resource::Media => "Media",
            Resource::Stylesheet => "Stylesheet",
        }
    }
}
