//! The encoder half of a face that streams a turn over server-sent events: the runtime's
//! [`TurnEvent`]s in, the face's wire out. The translator half is the face's handler, which
//! makes the `TurnRequest` (see `agency_runtime::pipeline`).

use std::convert::Infallible;
use std::time::Duration;

use agency_runtime::TurnEvent;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use tracing::Instrument;

/// Comments sent while the agents work, so proxies keep the stream open.
const KEEP_ALIVE: Duration = Duration::from_secs(10);

/// A face's wire for a streamed turn.
pub(crate) trait Encoder: Send + 'static {
    /// What the stream opens with, before the turn says anything.
    fn open(&mut self) -> Vec<Event>;

    /// One event of the turn on the wire: none, one or several server-sent events.
    fn encode(&mut self, event: TurnEvent) -> impl Future<Output = Vec<Event>> + Send;
}

/// The turn's `events` as `encoder` writes them, with keep-alive comments while the agents
/// work. The stream is written on a task of its own: a client that leaves stops receiving,
/// not the turn, nor what the encoder does at its end.
pub(crate) fn sse(
    events: impl Stream<Item = TurnEvent> + Send + 'static,
    mut encoder: impl Encoder,
) -> Response {
    let (tx, rx) = tokio::sync::mpsc::channel::<Event>(32);
    tokio::spawn(
        agency_telemetry::Span::current().run(
            async move {
                let mut events = std::pin::pin!(events);
                for e in encoder.open() {
                    let _ = tx.send(e).await;
                }
                while let Some(event) = events.next().await {
                    for e in encoder.encode(event).await {
                        let _ = tx.send(e).await;
                    }
                }
            }
            // The turn outlives the response's head: it logs under the request's id too.
            .in_current_span(),
        ),
    );
    let events = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|e| (Ok::<_, Infallible>(e), rx))
    });
    Sse::new(crate::counted(events))
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("keep-alive"))
        .into_response()
}
