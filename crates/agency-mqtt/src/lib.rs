//! The XMAGS topic protocol (spec 002) over any MQTT 3.1.1/5 broker.
//!
//! The server is one MQTT 5 client: it subscribes (QoS 1) to the command and data topics of
//! every team, runs what arrives through the runtime, and answers on the event topics. Messages
//! of one conversation are handled in order, one at a time; different conversations at once. A
//! message is acknowledged only once what it asked for is persisted (a chat message: once the
//! user's message is stored), so a crash before that leaves it with the broker, which delivers
//! it again.
//!
//! Payloads are metadata; content is read by id over HTTP
//! (`GET /api/conversations/{conversationId}/entries`).

mod bridge;
mod config;
mod error;
pub mod topic;
pub mod wire;

pub use bridge::serve;
pub use config::MqttConfig;
pub use error::MqttError;
