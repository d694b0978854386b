//! Every agency is an MCP server: one tool (the team, named after the agency) over
//! Streamable HTTP at `/api/agency/{agency}/mcp` ([`http`]) and over stdio (`agency mcp`,
//! [`stdio`]), in both revisions clients speak: 2026-07-28 (stateless: each request carries
//! its version and capabilities in `_meta`; `server/discover`) and 2025-11-25 and before (the
//! `initialize` handshake; over HTTP a session, `Mcp-Session-Id`).
//!
//! A face on the runtime's one pipeline: [`tool::begin`] translates a `tools/call` into a
//! `TurnRequest` (a key's `Ask::Chat` over HTTP, the process's message over stdio) and
//! [`tool::Encoder`] writes the turn's events as progress notifications and its result.
//! [`answer`] is the rest of the protocol, the same on both transports.

pub mod http;
pub mod stdio;
pub mod tool;
pub mod wire;

use std::sync::Arc;

use agency_core::Agency;
use agency_runtime::Runtime;
use futures::StreamExt;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use wire::{HANDSHAKE, MODERN, RpcError};

/// How long a client may keep the tool list (it changes when the agency is published again).
const LIST_TTL_MS: u64 = 60_000;

/// The protocol a request is read in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Era {
    /// 2026-07-28: no handshake; the request's `_meta` carries the envelope.
    Modern,
    /// A revision agreed in the `initialize` handshake (or none yet, before it).
    Handshake(Option<String>),
}

impl Era {
    fn modern(&self) -> bool {
        *self == Era::Modern
    }

    /// The revision, for spans and logs.
    pub fn version(&self) -> &str {
        match self {
            Era::Modern => MODERN,
            Era::Handshake(v) => v.as_deref().unwrap_or(""),
        }
    }
}

/// The server's name and version, as both revisions give it.
pub fn server_info() -> Value {
    json!({ "name": "agency", "title": "Agency", "version": env!("CARGO_PKG_VERSION") })
}

/// What a request gets.
#[derive(Debug)]
pub enum Reply {
    /// Its response, at once.
    Now(Value),
    /// An `initialize` answered: its response, and the revision agreed.
    Initialized { response: Value, version: String },
    /// A call of the tool, to run.
    Call {
        id: Value,
        token: Option<Value>,
        call: tool::Call,
    },
}

/// The version a client's `initialize` asks for, or the newest handshake revision when this
/// server does not speak that one (the client then decides).
fn negotiate(params: &Map<String, Value>) -> Result<String, RpcError> {
    let asked = params
        .get("protocolVersion")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid_params("`protocolVersion` must be a string"))?;
    Ok(HANDSHAKE
        .iter()
        .find(|v| **v == asked)
        .unwrap_or(&HANDSHAKE[0])
        .to_string())
}

/// The server's capabilities: tools only.
fn capabilities() -> Value {
    json!({ "tools": { "listChanged": false } })
}

fn instructions(agency: &Agency) -> String {
    format!(
        "`{}` is a team of agents behind one tool, `{}`: send it a message and it answers. Pass back the `conversation` of a result to go on with that conversation.",
        agency.name,
        tool::name(agency)
    )
}

/// Answers request `method` of a client speaking `era`.
pub fn answer(
    agency: &Agency,
    era: &Era,
    id: Value,
    method: &str,
    params: Map<String, Value>,
) -> Reply {
    let result = match (method, era) {
        ("initialize", Era::Handshake(_)) => {
            return match negotiate(&params) {
                Ok(version) => Reply::Initialized {
                    response: wire::result(
                        id,
                        json!({
                            "protocolVersion": version,
                            "capabilities": capabilities(),
                            "serverInfo": server_info(),
                            "instructions": instructions(agency),
                        }),
                    ),
                    version,
                },
                Err(e) => Reply::Now(e.to(id)),
            };
        }
        ("server/discover", Era::Modern) => json!({
            "supportedVersions": wire::supported(),
            "capabilities": capabilities(),
            "instructions": instructions(agency),
            "ttlMs": LIST_TTL_MS,
            "cacheScope": "private",
        }),
        ("ping", _) => json!({}),
        ("tools/list", _) => {
            let mut list = json!({ "tools": [tool::definition(agency)] });
            if era.modern() {
                list["ttlMs"] = LIST_TTL_MS.into();
                list["cacheScope"] = "private".into();
            }
            list
        }
        ("tools/call", _) => {
            let token = wire::progress_token(&params);
            let read = tool::read(agency, &params).map(|call| -> Result<tool::Call, String> {
                let mut call = call?;
                // Only 2026-07-28 asks a client for input in a result.
                if era.modern() {
                    tool::approvals_of(&mut call, &params)?;
                }
                Ok(call)
            });
            return match read {
                Err(e) => Reply::Now(e.to(id)),
                Ok(Ok(call)) => Reply::Call { id, token, call },
                Ok(Err(why)) => Reply::Now(tool::refused(id, era.modern(), &why)),
            };
        }
        _ => return Reply::Now(RpcError::method_not_found(method).to(id)),
    };
    let mut result = result;
    if era.modern() {
        tool::modern_result(&mut result);
    }
    Reply::Now(wire::result(id, result))
}

/// Runs a call of the tool to its end: its messages (progress, then the response, last) go to
/// `out`. Should `out` close before the end (the client left, or cancelled), the turn is
/// cancelled. `begun` is told the turn's conversation once it runs.
pub async fn run_call(
    rt: Arc<Runtime>,
    asker: tool::Asker,
    modern: bool,
    (id, token, call): (Value, Option<Value>, tool::Call),
    out: mpsc::Sender<Value>,
    begun: impl FnOnce(agency_core::ConversationId),
) {
    let agency = asker.agency().clone();
    let mut encoder = tool::Encoder::new(id, token.clone(), modern, agency);
    let turn = tokio::select! {
        turn = tool::begin(&rt, &asker, call, token.is_some()) => turn,
        () = out.closed() => return,
    };
    let turn = match turn {
        Ok(turn) => turn,
        Err(why) => {
            let _ = out.send(encoder.refused(&why)).await;
            return;
        }
    };
    let conversation = turn.conversation();
    begun(conversation);
    let mut events = std::pin::pin!(turn.events());
    loop {
        tokio::select! {
            event = events.next() => match event {
                Some(event) => {
                    if let Some(message) = encoder.encode(event) {
                        // A response ends the call; a client gone meanwhile reads nothing.
                        let last = message.get("id").is_some();
                        let _ = out.send(message).await;
                        if last {
                            return;
                        }
                    }
                }
                None => return,
            },
            () = out.closed() => {
                let cancelled = rt.cancel(conversation);
                tracing::debug!(%conversation, cancelled, "the MCP client left: its turn is cancelled");
                // The turn ends on its own task, its record written.
                return;
            }
        }
    }
}

/// The MCP request's span (a server span, under the HTTP request's when there is one), as
/// the semantic conventions for MCP name it: `{method} {tool}`. Nothing when tracing is off.
pub fn span(
    method: &str,
    params: &Map<String, Value>,
    era: &Era,
    id: &Value,
    session: Option<&str>,
) -> agency_telemetry::Span {
    use agency_telemetry::KeyValue;
    agency_telemetry::Span::current().child(agency_telemetry::SpanKind::Server, || {
        let tool = (method == "tools/call")
            .then(|| params.get("name").and_then(Value::as_str))
            .flatten();
        let mut kv = vec![
            KeyValue::new("mcp.method.name", method.to_string()),
            KeyValue::new("mcp.protocol.version", era.version().to_string()),
            KeyValue::new("jsonrpc.request.id", id.to_string()),
        ];
        if let Some(session) = session {
            kv.push(KeyValue::new("mcp.session.id", session.to_string()));
        }
        let name = match tool {
            Some(tool) => {
                kv.push(KeyValue::new(
                    agency_telemetry::semconv::GEN_AI_TOOL_NAME,
                    tool.to_string(),
                ));
                kv.push(KeyValue::new(
                    agency_telemetry::semconv::GEN_AI_OPERATION_NAME,
                    agency_telemetry::semconv::OP_EXECUTE_TOOL,
                ));
                format!("{method} {tool}")
            }
            None => method.to_string(),
        };
        (name, kv)
    })
}
