//! A hard bound on the connections one spider's HTTP client keeps open,
//! whatever the number of hosts and the rate at which it meets them.
//!
//! hyper's pool (behind reqwest) limits idle connections per host and by
//! age, never in all: a crawl meeting hundreds of new hosts a second holds
//! thousands of sockets (about 20 KiB of the worker's memory each). This
//! module owns the one count that bounds them, and nothing else about an
//! exchange.
//!
//! # How
//!
//! A route's requests go to its current *generation*, one
//! `reqwest::Client` with its own pool. A connector layer ([`Count`]) sees
//! every connection the generation opens and charges it to the spider's
//! [`Ledger`]. Once a generation has opened half the cap it is retired: new
//! requests get a fresh client and the old one is dropped. When the last
//! clone of a hyper client goes, its pool goes, which closes its idle
//! connections; a connection still carrying a response is closed when that
//! response ends instead of going back to a pool (hyper-util's
//! `Pooled::drop` finds the pool gone). A generation gives its charge back
//! to the ledger only then, when its connector (held by exactly the same
//! owners as its pool) is dropped.
//!
//! A retired generation can outlive its retirement: each of its requests
//! still waiting for a response head holds a clone of its hyper client, so
//! its pool stays, idle connections and all. The ledger makes that safe
//! instead of merely rare: a request is given a pooled generation only if
//! it can reserve one connection under the cap, counting every live
//! generation's connections; otherwise it goes through the route's
//! unpooled client, whose connection closes when its response ends. So:
//!
//! ```text
//! open connections ≤ cap + requests in flight
//! ```
//!
//! (the connections of live generations, at most the cap, plus those of
//! requests on dead generations or on the unpooled client). The cookie
//! jar, the resolver and the proxy are shared by every generation.
//!
//! A crawl of a few hosts opens few connections and keeps them: a
//! generation is retired only after opening half the cap (connections
//! the servers closed count until then), so keep-alive is lost once per
//! that many new connections, not per request.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use arc_swap::ArcSwap;

use super::FetchError;

/// Builds one client of a route: pooled and counted, or unpooled.
pub(super) type Make = Box<dyn Fn(Pooling) -> Result<reqwest::Client, FetchError> + Send + Sync>;

/// How a client of a route keeps its connections.
pub(super) enum Pooling {
    /// In its pool, each one charged to the ledger by this layer.
    Counted(CountLayer),
    /// Not at all: each connection closes when its response ends.
    Unpooled,
}

/// The connections a spider's clients may hold, and those they hold now:
/// one for all its routes.
#[derive(Debug)]
pub(super) struct Ledger {
    /// `max_open_connections`.
    cap: usize,
    /// Connections opened (or opening) by generations whose pool still
    /// exists, plus one reservation per request about to use a pooled
    /// generation.
    held: AtomicUsize,
}

impl Ledger {
    pub(super) fn new(cap: usize) -> Arc<Ledger> {
        Arc::new(Ledger {
            cap,
            held: AtomicUsize::new(0),
        })
    }

    /// How many connections a generation opens before it is retired: half
    /// the cap, so a retired generation kept alive by a slow response
    /// leaves the other half to its successor.
    fn retire_after(&self) -> usize {
        (self.cap / 2).max(1)
    }

    /// Connections charged now (and reservations).
    #[cfg(test)]
    pub(super) fn held(&self) -> usize {
        self.held.load(Ordering::SeqCst)
    }

    fn charge(&self) {
        self.held.fetch_add(1, Ordering::SeqCst);
    }

    fn refund(&self, n: usize) {
        self.held.fetch_sub(n, Ordering::SeqCst);
    }
}

/// One reserved place under the cap, held by a request from the choice
/// of its client until its response head has arrived (the only time it
/// may open a connection).
struct Reservation(Arc<Ledger>);

impl Reservation {
    fn take(ledger: &Arc<Ledger>) -> Option<Reservation> {
        ledger
            .held
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |held| {
                (held < ledger.cap).then_some(held + 1)
            })
            .ok()
            .map(|_| Reservation(ledger.clone()))
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.0.refund(1);
    }
}

/// The client one request uses. Drop it once the response head is in:
/// holding it longer keeps a retired generation's pool alive.
pub(super) struct Lease {
    pub(super) client: reqwest::Client,
    _reservation: Option<Reservation>,
}

/// The clients of one route: the current generation, and the unpooled
/// client for requests the cap has no room for.
pub(super) struct Connections {
    make: Make,
    ledger: Arc<Ledger>,
    current: ArcSwap<Generation>,
    unpooled: reqwest::Client,
    /// Taken (never waited for) by the request that builds the next
    /// generation; the others go on with the current one meanwhile.
    rotating: Mutex<()>,
    /// Generations retired so far.
    retired: AtomicUsize,
}

/// One pooled client and what its connector has charged.
struct Generation {
    client: reqwest::Client,
    opened: Arc<Opened>,
}

impl Generation {
    fn new(make: &Make, ledger: &Arc<Ledger>) -> Result<Generation, FetchError> {
        let opened = Arc::new(Opened {
            count: AtomicUsize::new(0),
            ledger: ledger.clone(),
        });
        let client = make(Pooling::Counted(CountLayer(opened.clone())))?;
        Ok(Generation { client, opened })
    }
}

/// The connections one generation has opened or is opening, charged to
/// the ledger until the generation's connector, and so its pool, is gone.
#[derive(Debug)]
struct Opened {
    count: AtomicUsize,
    ledger: Arc<Ledger>,
}

impl Opened {
    fn count(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }
}

impl Drop for Opened {
    fn drop(&mut self) {
        self.ledger.refund(*self.count.get_mut());
    }
}

impl Connections {
    pub(super) fn new(make: Make, ledger: Arc<Ledger>) -> Result<Connections, FetchError> {
        let first = Generation::new(&make, &ledger)?;
        let unpooled = make(Pooling::Unpooled)?;
        Ok(Connections {
            make,
            ledger,
            current: ArcSwap::from_pointee(first),
            unpooled,
            rotating: Mutex::new(()),
            retired: AtomicUsize::new(0),
        })
    }

    /// The client for one request: the current generation (a fresh one if
    /// it has opened its share) if the cap has room, else the unpooled one.
    pub(super) fn lease(&self) -> Lease {
        let mut current = self.current.load_full();
        if current.opened.count() >= self.ledger.retire_after() {
            current = self.rotate(&current);
        }
        match Reservation::take(&self.ledger) {
            Some(reservation) => Lease {
                client: current.client.clone(),
                _reservation: Some(reservation),
            },
            None => Lease {
                client: self.unpooled.clone(),
                _reservation: None,
            },
        }
    }

    /// Replaces `full` by a fresh generation, unless another request is
    /// doing it or has done it; returns the current one.
    fn rotate(&self, full: &Arc<Generation>) -> Arc<Generation> {
        if let Ok(_rotating) = self.rotating.try_lock() {
            if Arc::ptr_eq(&self.current.load(), full) {
                match Generation::new(&self.make, &self.ledger) {
                    Ok(fresh) => {
                        self.current.store(Arc::new(fresh));
                        self.retired.fetch_add(1, Ordering::SeqCst);
                    }
                    // The old generation stays; the ledger still holds the
                    // cap (requests go unpooled once it is reached).
                    Err(e) => tracing::warn!(
                        "cannot build a fresh HTTP client to replace one that opened {} connections; keeping the old one: {e}",
                        full.opened.count()
                    ),
                }
            }
        }
        self.current.load_full()
    }

    /// Generations retired so far.
    pub(super) fn retired(&self) -> usize {
        self.retired.load(Ordering::SeqCst)
    }
}

/// The connector layer of one generation: charges each connection it
/// opens to the ledger (refunded at once if opening fails).
#[derive(Clone)]
pub(super) struct CountLayer(Arc<Opened>);

impl<S> tower_layer::Layer<S> for CountLayer {
    type Service = Count<S>;

    fn layer(&self, inner: S) -> Count<S> {
        Count {
            inner,
            opened: self.0.clone(),
        }
    }
}

/// The connector service [`CountLayer`] makes.
#[derive(Clone)]
pub(super) struct Count<S> {
    inner: S,
    opened: Arc<Opened>,
}

impl<S, R> tower_service::Service<R> for Count<S>
where
    S: tower_service::Service<R>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> Self::Future {
        let opening = Opening::start(&self.opened);
        let connect = self.inner.call(request);
        Box::pin(async move {
            let conn = connect.await?;
            opening.done();
            Ok(conn)
        })
    }
}

/// A connection being opened: charged from the start (its socket exists),
/// refunded if it fails or is given up.
struct Opening(Option<Arc<Opened>>);

impl Opening {
    fn start(opened: &Arc<Opened>) -> Opening {
        opened.count.fetch_add(1, Ordering::SeqCst);
        opened.ledger.charge();
        Opening(Some(opened.clone()))
    }

    /// The connection is open: it stays charged to its generation.
    fn done(mut self) {
        self.0 = None;
    }
}

impl Drop for Opening {
    fn drop(&mut self) {
        if let Some(opened) = self.0.take() {
            opened.count.fetch_sub(1, Ordering::SeqCst);
            opened.ledger.refund(1);
        }
    }
}
