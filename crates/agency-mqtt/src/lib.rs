//! The XMAGS topic protocol (spec 002) over any MQTT 3.1.1/5 broker.
//!
//! The server is one MQTT 5 client: it subscribes (QoS 1) to the command and data topics of
//! every team, runs what arrives through the runtime, and answers on the event topics. Messages
//! of one conversation are handled in order, one at a time; different conversations at once. A
//! message is acknowledged only once what it asked for is persisted (a chat message: once the
//! user's message is stored), so a crash before that leaves it with the broker, which delivers
//! it again.
//!
//! `--mqtt embedded` runs a broker inside the process ([`start_broker`], cargo feature
//! `embedded`, on by default) and connects to it like to any other.
//!
//! Payloads are metadata; content is read by id over HTTP
//! (`GET /api/conversations/{conversationId}/entries`).

mod acks;
mod bridge;
mod config;
#[cfg(feature = "embedded")]
pub mod embedded;
mod error;
mod progress;
pub mod topic;
pub mod wire;

pub use bridge::serve;
pub use config::MqttConfig;
pub use error::MqttError;

/// Starts the broker inside the process when `config` asks for one (`--mqtt embedded`);
/// nothing otherwise. Call it before [`serve`], so that a busy address fails the start.
pub fn start_broker(config: &mut MqttConfig) -> Result<(), MqttError> {
    if !config.embedded {
        return Ok(());
    }
    let ip: std::net::IpAddr = config.host.parse().map_err(|_| {
        MqttError::Unsupported(format!(
            "the embedded broker listens on an IP address, not `{}`",
            config.host
        ))
    })?;
    start_embedded(config, std::net::SocketAddr::new(ip, config.port))
}

#[cfg(feature = "embedded")]
fn start_embedded(config: &mut MqttConfig, addr: std::net::SocketAddr) -> Result<(), MqttError> {
    config.broker = Some(embedded::start(addr)?);
    Ok(())
}

#[cfg(not(feature = "embedded"))]
fn start_embedded(_: &mut MqttConfig, _: std::net::SocketAddr) -> Result<(), MqttError> {
    Err(MqttError::Unsupported(
        "this build has no embedded broker (cargo feature `embedded`)".into(),
    ))
}
