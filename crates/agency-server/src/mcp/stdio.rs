//! MCP over stdio (`agency mcp NAME`): one JSON-RPC message a line each way, for a client that
//! starts this process. The process is the caller (`Caller::Local`), on its own database, as
//! `agency chat` is. Requests carrying a 2026-07-28 envelope are read in that revision; others
//! in the one `initialize` agreed. A `notifications/cancelled` cancels its call's turn, and no
//! response follows.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use agency_core::Agency;
use agency_runtime::Runtime;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::tool::Asker;
use super::wire::{self, Message, RpcError};
use super::{Era, Reply};

/// Longest line read: a message is at most [`super::tool::MAX_MESSAGE`] and its envelope.
const MAX_LINE: usize = 2 * 1024 * 1024;

type Calls = Arc<Mutex<HashMap<String, JoinHandle<()>>>>;

/// Serves `agency` on `input` and `output` until `input` ends; calls still running are
/// cancelled then.
pub async fn serve(
    rt: Arc<Runtime>,
    agency: Arc<Agency>,
    input: impl AsyncRead + Unpin,
    mut output: impl AsyncWrite + Unpin + Send + 'static,
) -> std::io::Result<()> {
    let (out, mut written) = mpsc::channel::<Value>(64);
    let writer = tokio::spawn(async move {
        while let Some(message) = written.recv().await {
            let mut line = message.to_string();
            line.push('\n');
            output.write_all(line.as_bytes()).await?;
            output.flush().await?;
        }
        Ok::<_, std::io::Error>(())
    });
    let calls: Calls = Arc::default();
    let mut era = Era::Handshake(None);
    let mut lines = BufReader::new(input);
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = (&mut lines)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut line)
            .await?;
        if read == 0 {
            break;
        }
        if line.len() > MAX_LINE {
            let e = RpcError::new(wire::INVALID_REQUEST, "The message is too large.");
            let _ = out.send(e.to(Value::Null)).await;
            // The rest of the line is not a message.
            let mut rest = Vec::new();
            lines.read_until(b'\n', &mut rest).await?;
            continue;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let message = match wire::parse(&line) {
            Ok(message) => message,
            Err(e) => {
                let _ = out.send(e.to(Value::Null)).await;
                continue;
            }
        };
        handle(&rt, &agency, &calls, &out, &mut era, message).await;
    }
    // The client is gone: its calls' turns are cancelled.
    for (_, call) in calls.lock().unwrap_or_else(|p| p.into_inner()).drain() {
        call.abort();
    }
    drop(out);
    rt.settle().await;
    writer.await.map_err(std::io::Error::other)?
}

async fn handle(
    rt: &Arc<Runtime>,
    agency: &Arc<Agency>,
    calls: &Calls,
    out: &mpsc::Sender<Value>,
    era: &mut Era,
    message: Message,
) {
    let (id, method, params) = match message {
        Message::Request { id, method, params } => (id, method, params),
        Message::Notification { method, params } => {
            if method == "notifications/cancelled"
                && let Some(request) = params.get("requestId")
                && let Some(call) = calls
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&request.to_string())
            {
                call.abort();
            }
            return;
        }
        Message::Response => return,
    };
    let this = match wire::envelope_version(&params) {
        Err(e) => {
            let _ = out.send(e.to(id)).await;
            return;
        }
        Ok(Some(version)) if version != wire::MODERN => {
            let _ = out
                .send(RpcError::unsupported_version(&version).to(id))
                .await;
            return;
        }
        Ok(Some(_)) => Era::Modern,
        Ok(None) => era.clone(),
    };
    let modern = this == Era::Modern;
    let span = super::span(&method, &params, &this, &id, None);
    match super::answer(agency, &this, id, &method, params) {
        Reply::Now(response) => {
            let _ = out.send(response).await;
        }
        Reply::Initialized { response, version } => {
            *era = Era::Handshake(Some(version));
            let _ = out.send(response).await;
        }
        Reply::Call { id, token, call } => {
            let key = id.to_string();
            let (tx, mut rx) = mpsc::channel::<Value>(32);
            let asker = Asker::Local {
                agency: agency.clone(),
            };
            let call = super::run_call(rt.clone(), asker, modern, (id, token, call), tx, drop);
            tokio::spawn(span.run(call));
            // Its messages go out until it ends or is cancelled (the receiver dropped). The
            // map is held until the forwarder is in it, so that its end finds it there.
            let mut running = calls.lock().unwrap_or_else(|p| p.into_inner());
            let forward = {
                let (out, calls, key) = (out.clone(), calls.clone(), key.clone());
                tokio::spawn(async move {
                    while let Some(message) = rx.recv().await {
                        let _ = out.send(message).await;
                    }
                    calls.lock().unwrap_or_else(|p| p.into_inner()).remove(&key);
                })
            };
            running.insert(key, forward);
        }
    }
}
