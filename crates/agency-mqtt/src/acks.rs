//! Acknowledgements in the order the messages arrived.
//!
//! MQTT (3.1.1 and 5, section 4.6) asks a client to send its PUBACKs in the order it received
//! the PUBLISHes. The bridge handles conversations at once and acknowledges each message only
//! when what it asked for is persisted, so they finish out of order; this task holds each
//! acknowledgement until every message received before it is acknowledged too. Some brokers
//! (rumqttd, the embedded one) drop a connection that acknowledges out of order.

use std::collections::VecDeque;

use rumqttc::v5::AsyncClient;
use rumqttc::v5::mqttbytes::v5::Publish;
use tokio::sync::mpsc;

pub(crate) enum AckEvent {
    /// A message arrived (sent by the event loop, in arrival order).
    Received(u64, Box<Publish>),
    /// What message `seq` asked for is done (or refused): it may be acknowledged.
    Done(u64),
    /// A new connection: what arrived on the old one is delivered again by the broker, and
    /// its acknowledgements would name packets the new connection never had.
    Reset,
}

/// Runs until every sender is gone.
pub(crate) async fn run(client: AsyncClient, mut events: mpsc::UnboundedReceiver<AckEvent>) {
    // Arrival order: (seq, message, done).
    let mut pending: VecDeque<(u64, Box<Publish>, bool)> = VecDeque::new();
    while let Some(event) = events.recv().await {
        match event {
            AckEvent::Received(seq, p) => pending.push_back((seq, p, false)),
            AckEvent::Done(seq) => {
                if let Some(entry) = pending.iter_mut().find(|(s, _, _)| *s == seq) {
                    entry.2 = true;
                }
                while pending.front().is_some_and(|(_, _, done)| *done) {
                    if let Some((_, p, _)) = pending.pop_front()
                        && let Err(e) = client.ack(&p).await
                    {
                        tracing::warn!(error = %e, "cannot acknowledge a message");
                    }
                }
            }
            AckEvent::Reset => pending.clear(),
        }
    }
}
