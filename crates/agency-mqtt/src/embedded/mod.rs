//! `--mqtt embedded`: an MQTT 5 broker inside the process (rumqttd), so the protocol works with
//! nothing installed.
//!
//! The broker itself listens on a loopback port of its own where only this server logs in
//! (with a password made at start). Clients reach it through the [door](door) on the public
//! address, which lets a connection that logged in with an agency's API key (its password) use
//! that team's topics only, and one without a key anything but accounts' teams.

mod door;

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agency_runtime::Runtime;
use agency_runtime::keys::Authenticator;
use rumqttd::{Broker as Rumqttd, Config, ConnectionSettings, RouterConfig, ServerSettings};
use secrecy::{ExposeSecret, SecretString};

use crate::MqttError;

/// The largest message the embedded broker takes (as the server).
const MAX_PAYLOAD: usize = 1024 * 1024;
/// The user this server logs in as on the broker's own port.
const SERVER_USER: &str = "agency-server";

/// A broker running inside the process (its threads live as long as the process).
pub struct Broker {
    /// Where the broker itself listens (loopback): only this server logs in there.
    inner: SocketAddr,
    password: SecretString,
    /// The public address, until [`Broker::open_door`] takes it.
    listener: Mutex<Option<TcpListener>>,
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

/// What the door asks who comes in with a key.
pub(crate) struct Keeper {
    pub rt: Arc<Runtime>,
    pub auth: Arc<Authenticator>,
    /// No way in without a key (`--mqtt-require-key`).
    pub require_key: bool,
}

/// Starts the broker, its door to open on `listen` (MQTT 5) once the server can check keys
/// ([`Broker::open_door`]). Fails when the address cannot be used.
pub fn start(listen: SocketAddr) -> Result<Arc<Broker>, MqttError> {
    let busy = |e: std::io::Error| {
        MqttError::Client(format!(
            "the embedded broker cannot listen on {listen}: {e}"
        ))
    };
    let listener = TcpListener::bind(listen).map_err(busy)?;
    listener.set_nonblocking(true).map_err(busy)?;
    // A free loopback port for the broker itself (rumqttd binds it in its own thread).
    let inner = TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .map_err(busy)?;
    // A secret: from the operating system's random source (uuids come from a fast generator).
    let password = agency_runtime::secrets::random_password();
    let server = ServerSettings {
        name: "agency-v5".into(),
        listen: inner,
        tls: None,
        next_connection_delay_ms: 1,
        connections: ConnectionSettings {
            connection_timeout_ms: 60_000,
            max_payload_size: MAX_PAYLOAD,
            max_inflight_count: 500,
            auth: Some(HashMap::from([(
                SERVER_USER.to_string(),
                password.expose_secret().to_string(),
            )])),
            external_auth: None,
            dynamic_filters: true,
        },
    };
    let config = Config {
        id: 0,
        router: RouterConfig {
            max_connections: 10_010,
            max_outgoing_packet_count: 200,
            max_segment_size: 104_857_600,
            max_segment_count: 10,
            custom_segment: None,
            initialized_filters: None,
            shared_subscriptions_strategy: Default::default(),
        },
        v4: None,
        v5: Some(HashMap::from([("1".to_string(), server)])),
        ws: None,
        cluster: None,
        console: None,
        bridge: None,
        prometheus: None,
        metrics: None,
    };
    let mut broker = Rumqttd::new(config);
    std::thread::Builder::new()
        .name("mqtt-broker".into())
        .spawn(move || {
            if let Err(e) = broker.start() {
                tracing::error!(error = %e, "the embedded MQTT broker stopped");
            }
        })
        .map_err(|e| MqttError::Client(format!("cannot start the embedded broker: {e}")))?;
    // Ready once its own port answers.
    for _ in 0..200 {
        if TcpStream::connect(inner).is_ok() {
            return Ok(Arc::new(Broker {
                inner,
                password,
                listener: Mutex::new(Some(listener)),
            }));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Err(MqttError::Client(format!(
        "the embedded broker did not start on {inner}"
    )))
}

impl Broker {
    /// Where this server connects, and the credentials it logs in with.
    pub(crate) fn inner(&self) -> (SocketAddr, &'static str, &str) {
        (self.inner, SERVER_USER, self.password.expose_secret())
    }

    /// Lets clients in on the public address, checking keys with `keeper`, on a task of the
    /// current runtime, until [`Broker::close_door`]; the first caller opens it (`None` for
    /// others while it is open).
    pub(crate) fn open_door(&self, keeper: Keeper) -> Option<OpenDoor> {
        let listener = self.listener.lock().ok()?.take()?;
        let listener = match tokio::net::TcpListener::from_std(listener) {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(error = %e, "cannot open the embedded broker's door");
                return None;
            }
        };
        let door = door::Door::new(keeper, self.inner, self.password.clone());
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(door::run(listener, door, stopped));
        Some(OpenDoor { stop, task })
    }

    /// Stops letting clients in (those in stay), so that another server in the process may
    /// open the door again.
    pub(crate) async fn close_door(&self, door: OpenDoor) {
        let _ = door.stop.send(());
        if let Ok(listener) = door.task.await
            && let Ok(listener) = listener.into_std()
            && let Ok(mut slot) = self.listener.lock()
        {
            *slot = Some(listener);
        }
    }
}

/// The door while it lets clients in.
pub(crate) struct OpenDoor {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<tokio::net::TcpListener>,
}
