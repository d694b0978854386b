//! Fake LLM provider servers for tests: real HTTP on 127.0.0.1, scripted replies, and a record
//! of every request that reached them. The wire formats are in [`openai`] and [`anthropic`];
//! this module is the server they share.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test support

pub mod anthropic;
pub mod openai;

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use serde_json::Value;

/// One request as the fake received it.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    /// Lower-cased names.
    pub headers: BTreeMap<String, String>,
    /// The body as JSON (`Value::Null` when it was not JSON).
    pub body: Value,
}

impl Recorded {
    /// The chat's messages (`messages`), in order.
    pub fn messages(&self) -> Vec<Value> {
        list(&self.body["messages"])
    }

    /// The tools the request offered (`tools`), as sent; none when it sent none.
    pub fn tools(&self) -> Vec<Value> {
        list(&self.body["tools"])
    }

    /// The names of the tools offered: `function.name` (OpenAI) or `name` (Anthropic).
    pub fn tool_names(&self) -> Vec<String> {
        self.tools()
            .iter()
            .filter_map(|t| {
                t.pointer("/function/name")
                    .or_else(|| t.get("name"))
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .collect()
    }

    /// The tool calls in the chat, in order: the entries of assistant messages' `tool_calls`
    /// (OpenAI) or the `tool_use` blocks (Anthropic).
    pub fn tool_calls(&self) -> Vec<Value> {
        let mut out = Vec::new();
        for m in self.messages() {
            out.extend(list(&m["tool_calls"]));
            out.extend(blocks_of(&m, "tool_use"));
        }
        out
    }

    /// The tool results in the chat, in order: the `tool` messages (OpenAI) or the
    /// `tool_result` blocks (Anthropic).
    pub fn tool_results(&self) -> Vec<Value> {
        let mut out = Vec::new();
        for m in self.messages() {
            if m["role"] == "tool" {
                out.push(m.clone());
            }
            out.extend(blocks_of(&m, "tool_result"));
        }
        out
    }
}

fn list(value: &Value) -> Vec<Value> {
    value.as_array().cloned().unwrap_or_default()
}

/// A message's content blocks of type `kind`.
fn blocks_of(message: &Value, kind: &str) -> Vec<Value> {
    list(&message["content"])
        .into_iter()
        .filter(|b| b["type"] == kind)
        .collect()
}

/// Whether `name` is a tool name both APIs take: `^[a-zA-Z0-9_-]{1,64}$`.
pub fn is_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// A tool call a fake answers with: its id, the tool's name as the model writes it (any name,
/// one the request did not offer too), and its arguments in the pieces a stream sends them in
/// (joined when the answer is not streamed). The arguments may be any text, malformed JSON
/// too.
#[derive(Clone, Debug)]
pub struct Call {
    pub id: String,
    pub name: String,
    pub pieces: Vec<String>,
}

impl Call {
    /// A call whose arguments stream in one piece.
    pub fn new(id: &str, name: &str, arguments: &str) -> Self {
        Self::streamed(id, name, &[arguments])
    }

    /// A call whose arguments stream as `pieces`.
    pub fn streamed(id: &str, name: &str, pieces: &[&str]) -> Self {
        Self {
            id: id.to_string(),
            name: name.to_string(),
            pieces: pieces.iter().map(|p| p.to_string()).collect(),
        }
    }

    /// The arguments whole.
    pub fn arguments(&self) -> String {
        self.pieces.concat()
    }
}

/// What the fake answers to one request.
#[derive(Clone, Debug)]
pub enum Reply {
    /// A JSON body with a status and extra headers (e.g. `retry-after`).
    Json {
        status: u16,
        body: Value,
        headers: Vec<(String, String)>,
    },
    /// A server-sent event stream: each item is one event's lines (`data: {...}` or
    /// `event: x\ndata: {...}`). With `stall_after: Some(n)`, it sends n events, then hangs.
    Sse {
        events: Vec<String>,
        stall_after: Option<usize>,
    },
    /// Any body with a status and content type (for malformed answers).
    Raw {
        status: u16,
        content_type: String,
        body: String,
    },
    /// Never answers.
    Hang,
}

impl Reply {
    pub fn json(body: Value) -> Self {
        Reply::Json {
            status: 200,
            body,
            headers: Vec::new(),
        }
    }
}

#[derive(Default)]
struct Script {
    replies: VecDeque<Reply>,
    /// Answers when the queue is empty.
    otherwise: Option<Reply>,
    requests: Vec<Recorded>,
    /// Off for benchmarks: a real provider's bookkeeping does not run on our cores either.
    unrecorded: bool,
}

/// A running fake server.
#[derive(Clone)]
pub struct Fake {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    script: Arc<Mutex<Script>>,
}

impl Fake {
    pub async fn start() -> Self {
        let script = Arc::new(Mutex::new(Script::default()));
        let app = Router::new().fallback(handle).with_state(script.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Self { url, script }
    }

    /// Queues the answer to the next request.
    pub fn push(&self, reply: Reply) -> &Self {
        self.script.lock().unwrap().replies.push_back(reply);
        self
    }

    /// The answer to every request once the queue is empty.
    pub fn otherwise(&self, reply: Reply) -> &Self {
        self.script.lock().unwrap().otherwise = Some(reply);
        self
    }

    /// Stops recording requests (and parsing their bodies), for benchmarks that send many.
    pub fn unrecorded(&self) -> &Self {
        self.script.lock().unwrap().unrecorded = true;
        self
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.script.lock().unwrap().requests.clone()
    }
}

async fn handle(
    State(script): State<Arc<Mutex<Script>>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let reply = {
        let mut s = script.lock().unwrap();
        if !s.unrecorded {
            s.requests.push(Recorded {
                method: method.to_string(),
                path: uri.path().to_string(),
                headers: headers
                    .iter()
                    .map(|(k, v)| {
                        (
                            k.as_str().to_ascii_lowercase(),
                            v.to_str().unwrap_or_default().to_string(),
                        )
                    })
                    .collect(),
                body: serde_json::from_slice(&body).unwrap_or(Value::Null),
            });
        }
        s.replies.pop_front().or_else(|| s.otherwise.clone())
    };
    match reply {
        None => Response::builder()
            .status(StatusCode::INTERNAL_SERVER_ERROR)
            .body(Body::from(
                "the fake has no reply scripted for this request",
            ))
            .unwrap(),
        Some(Reply::Json {
            status,
            body,
            headers,
        }) => {
            let mut r = Response::builder()
                .status(status)
                .header("content-type", "application/json");
            for (k, v) in headers {
                r = r.header(k, v);
            }
            r.body(Body::from(body.to_string())).unwrap()
        }
        Some(Reply::Raw {
            status,
            content_type,
            body,
        }) => Response::builder()
            .status(status)
            .header("content-type", content_type)
            .body(Body::from(body))
            .unwrap(),
        Some(Reply::Sse {
            events,
            stall_after,
        }) => {
            let n = stall_after.unwrap_or(events.len());
            let sent: Vec<Result<Bytes, Infallible>> = events
                .into_iter()
                .take(n)
                .map(|e| Ok(Bytes::from(format!("{e}\n\n"))))
                .collect();
            let stream = futures::stream::iter(sent);
            let body = if stall_after.is_some() {
                Body::from_stream(futures::StreamExt::chain(
                    stream,
                    futures::stream::pending(),
                ))
            } else {
                Body::from_stream(stream)
            };
            Response::builder()
                .status(200)
                .header("content-type", "text/event-stream")
                .header("cache-control", "no-cache")
                .body(body)
                .unwrap()
        }
        Some(Reply::Hang) => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Response::new(Body::empty())
        }
    }
}
