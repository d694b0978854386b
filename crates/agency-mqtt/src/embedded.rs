//! `--mqtt embedded`: an MQTT 5 broker inside the process (rumqttd), listening on loopback, so
//! the protocol works with nothing installed. The server connects to it as to any broker.

use std::collections::HashMap;
use std::net::SocketAddr;

use rumqttd::{Broker, Config, ConnectionSettings, RouterConfig, ServerSettings};

use crate::MqttError;

/// The largest message the embedded broker takes (as the server).
const MAX_PAYLOAD: usize = 1024 * 1024;

/// Starts the broker on `listen` (MQTT 5) in threads of its own; they live as long as the
/// process. Fails when the address cannot be used.
pub fn start(listen: SocketAddr) -> Result<(), MqttError> {
    // rumqttd reports a busy port only in its own thread: find out here first.
    std::net::TcpListener::bind(listen).map_err(|e| {
        MqttError::Client(format!(
            "the embedded broker cannot listen on {listen}: {e}"
        ))
    })?;
    let server = ServerSettings {
        name: "agency-v5".into(),
        listen,
        tls: None,
        next_connection_delay_ms: 1,
        connections: ConnectionSettings {
            connection_timeout_ms: 60_000,
            max_payload_size: MAX_PAYLOAD,
            max_inflight_count: 500,
            auth: None,
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
    let mut broker = Broker::new(config);
    std::thread::Builder::new()
        .name("mqtt-broker".into())
        .spawn(move || {
            if let Err(e) = broker.start() {
                tracing::error!(error = %e, "the embedded MQTT broker stopped");
            }
        })
        .map_err(|e| MqttError::Client(format!("cannot start the embedded broker: {e}")))?;
    Ok(())
}
