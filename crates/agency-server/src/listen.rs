//! Accepting connections within bounds: a cap on open connections (in total, and optionally
//! per client address), answered with a 503 past it instead of an accept loop that stops; a
//! deadline for a request's headers, which also closes idle keep-alive connections; and
//! accept errors (the open-file limit) that pause accepting for a moment rather than end it.
//!
//! Requests in progress are not bounded here: a turn that takes minutes and an event stream
//! that stays open for hours are no longer reading headers, so the deadline does not apply.

use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tower::ServiceExt;

/// How many connections the server holds open, and how patient it is with them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Connections {
    /// Open connections at most; past it, a connection is answered 503 and closed.
    pub max: usize,
    /// Open connections from one client address at most (none: no such cap). Behind a load
    /// balancer every connection comes from its address, so this is off by default.
    pub max_per_address: Option<usize>,
    /// The most a client may take to send a request's headers, counted from when the server
    /// starts waiting for them: on a new connection, or when a keep-alive connection has
    /// answered its last request. So a connection idle that long is closed too.
    pub header_timeout: Duration,
    /// Proxies whose forwarding headers name the client (none by default: every peer is the
    /// client).
    pub trusted_proxies: crate::TrustedProxies,
}

impl Default for Connections {
    fn default() -> Self {
        Self {
            max: 10_000,
            max_per_address: None,
            header_timeout: Duration::from_secs(30),
            trusted_proxies: crate::TrustedProxies::default(),
        }
    }
}

/// Connections answered 503 at once, at most; past this, an over-limit connection is closed
/// without an answer (each refusal holds a socket for a moment).
const MAX_REFUSING: usize = 64;
/// How long a refused client has to send its request before the 503 goes out anyway.
const REFUSAL_PATIENCE: Duration = Duration::from_secs(2);
/// The pause after an accept error (out of file descriptors, most likely) before the next.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// Serves `app` on `listener` within `limits` until `shutdown` resolves, then waits for the
/// connections in progress to finish their requests.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Connections,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let open = Arc::new(Semaphore::new(limits.max.max(1)));
    let refusing = Arc::new(Semaphore::new(MAX_REFUSING));
    let per_address = Arc::new(PerAddress::default());
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(limits.header_timeout)
        .keep_alive_timeout(limits.header_timeout);
    let builder = Arc::new(builder);
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot accept a connection; accepting again shortly");
                    tokio::time::sleep(ACCEPT_PAUSE).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        if let Err(e) = tcp.set_nodelay(true) {
            // Small writes (stream chunks) go out at once instead of waiting for the peer's ACK.
            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
        }
        let place = open.clone().try_acquire_owned().ok().and_then(|total| {
            let address = per_address.enter(peer.ip(), limits.max_per_address)?;
            Some((total, address))
        });
        let Some(place) = place else {
            match refusing.clone().try_acquire_owned() {
                Ok(permit) => {
                    tokio::spawn(async move {
                        refuse(tcp).await;
                        drop(permit);
                    });
                }
                Err(_) => drop(tcp),
            }
            continue;
        };
        let app = app.clone();
        let proxies = limits.trusted_proxies.clone();
        // The peer's address, and the client's behind trusted proxies, reach handlers (limits
        // on failed log-ins count per client address).
        let service = hyper::service::service_fn(move |mut request: hyper::Request<_>| {
            let client = proxies.client(peer.ip(), request.headers());
            request.extensions_mut().insert(ConnectInfo(peer));
            request
                .extensions_mut()
                .insert(crate::proxy::ClientIp(client));
            app.clone().oneshot(request)
        });
        let builder = builder.clone();
        let watcher = graceful.watcher();
        let header_timeout = limits.header_timeout;
        tokio::spawn(async move {
            // Telling HTTP/1 from HTTP/2 waits for the first bytes, without a deadline of its
            // own: a connection that sends none is closed here.
            let mut first = [0u8; 1];
            if !matches!(
                tokio::time::timeout(header_timeout, tcp.peek(&mut first)).await,
                Ok(Ok(1..))
            ) {
                return;
            }
            let connection = builder.serve_connection_with_upgrades(TokioIo::new(tcp), service);
            if let Err(e) = watcher.watch(connection.into_owned()).await {
                tracing::debug!(error = %e, %peer, "connection ended with an error");
            }
            drop(place);
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// Answers one request on `tcp` with 503 and closes it: the client reads why, instead of a
/// reset connection.
async fn refuse(tcp: TcpStream) {
    let service = hyper::service::service_fn(|_request| async {
        let refusal = crate::ApiError::Unavailable(
            "the server has as many connections open as it allows; try again shortly".into(),
        );
        Ok::<_, std::convert::Infallible>(axum::response::IntoResponse::into_response(refusal))
    });
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(REFUSAL_PATIENCE)
        .keep_alive(false);
    let connection = http.serve_connection(TokioIo::new(tcp), service);
    let _ = tokio::time::timeout(REFUSAL_PATIENCE * 2, connection).await;
}

/// Open connections per client address.
#[derive(Default)]
struct PerAddress(Mutex<HashMap<IpAddr, usize>>);

/// A connection's place in its address's count, given back when dropped.
struct Place(Option<(Arc<PerAddress>, IpAddr)>);

impl PerAddress {
    /// A place for one more connection from `ip`, unless it has `max` open already.
    fn enter(self: &Arc<Self>, ip: IpAddr, max: Option<usize>) -> Option<Place> {
        let Some(max) = max else {
            return Some(Place(None));
        };
        let mut open = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = open.entry(ip).or_default();
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(Place(Some((self.clone(), ip))))
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        if let Some((counts, ip)) = self.0.take() {
            let mut open = counts
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(n) = open.get_mut(&ip) {
                *n -= 1;
                if *n == 0 {
                    open.remove(&ip);
                }
            }
        }
    }
}
