//! Chat Completions: a request's messages read into a turn (see [`super::messages`]), its
//! answer as a completion, or streamed in chunks.

use std::sync::Arc;

use agency_core::{Agency, StopReason};
use agency_runtime::{TurnEvent, TurnOutcome};
use axum::extract::State;
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use chrono::Utc;

use super::error::runtime_error;
use super::messages::chat_turn;
use super::prefill::Continuation;
use super::types::{self, ChatRequest, Content};
use super::work::Work;
use super::{
    Asked, FirstToken, Named, OpenAiError, RequestId, Watched, begin, end_user, fingerprint,
    format, of_conversation, tools,
};
use crate::AppState;

impl Named for ChatRequest {
    const MISSING: &'static str = "You must provide a model parameter.";

    fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }
}

/// `POST /v1/chat/completions`, and `/api/agency/{agency}/chat/completions`.
pub(super) async fn chat(
    State(s): State<AppState>,
    Asked {
        request_id,
        key,
        agency,
        conversation,
        show_work,
        body: request,
    }: Asked<ChatRequest>,
) -> Result<Response, OpenAiError> {
    let request_id = &request_id;
    let stream = request.stream.unwrap_or(false);
    let include_usage = check(&request, stream)?;
    let end_user = end_user(&request.other);
    let client = tools::client_tools(
        request.other.get("tools"),
        request.other.get("tool_choice"),
        request.other.get("parallel_tool_calls"),
    )?;
    let format =
        format::response_format(request.response_format.as_ref(), "response_format", false)?;
    if format == Some(agency_runtime::format::ResponseFormat::JsonObject)
        && !request.messages.iter().any(mentions_json)
    {
        return Err(OpenAiError::invalid(
            "'messages' must contain the word 'json' in some form, to use 'response_format' of type 'json_object'.",
            Some("messages"),
        ));
    }
    let mut turn = chat_turn(request.messages, false)?;
    turn.end_user = end_user;
    turn.format = format;
    turn.tools = client.tools;
    turn.tool_use = client.tool_use;
    turn.conversation = conversation;
    let prefill = turn.prefill.clone();
    let turn = begin(
        &s,
        request_id,
        key,
        agency.clone(),
        turn,
        Watched { stream, show_work },
        agency_core::Face::ChatCompletions,
    )
    .await?;
    let conversation = turn.conversation();
    let response = if stream {
        let mut chunks = ChatChunks::new(&agency, prefill.as_deref(), include_usage, request_id);
        if show_work {
            chunks.work = Some(Work::new(Arc::new(agency.roster())));
        }
        crate::encode::sse(turn.events(), chunks)
    } else {
        let out = turn
            .outcome()
            .await
            .map_err(|e| runtime_error(e, request_id))?;
        let mut completion = completion(&agency, &out, prefill.as_deref());
        if show_work {
            let lines = Work::of(&out);
            completion.choices[0].message.reasoning_content =
                (!lines.is_empty()).then(|| lines.join("\n"));
        }
        axum::Json(completion).into_response()
    };
    Ok(of_conversation(response, conversation))
}

/// Refuses what an agency cannot do, by parameter. Returns whether usage goes in the stream.
fn check(r: &ChatRequest, stream: bool) -> Result<bool, OpenAiError> {
    if let Some((name, _)) = r
        .other
        .iter()
        .find(|(k, v)| types::REFUSED.contains(&k.as_str()) && !v.is_null())
    {
        let why = match name.as_str() {
            "functions" | "function_call" => {
                "it is deprecated; declare the same functions in `tools` (and use `tool_choice`)"
            }
            _ => "an agency answers with text from its manager; audio is not available",
        };
        return Err(OpenAiError::invalid(
            format!("`{name}` is not supported: {why}."),
            Some(name),
        ));
    }
    if let Some(name) = r.other.keys().find(|k| {
        ![types::IGNORED, types::REFUSED, types::TOOLS]
            .iter()
            .any(|list| list.contains(&k.as_str()))
    }) {
        return Err(OpenAiError::invalid(
            format!("Unrecognized request argument supplied: {name}"),
            Some(name),
        ));
    }
    if let Some(modalities) = r.other.get("modalities").and_then(|m| m.as_array())
        && modalities.iter().any(|m| m.as_str() != Some("text"))
    {
        return Err(OpenAiError::invalid(
            "Only the `text` modality is supported by an agency.",
            Some("modalities"),
        ));
    }
    if r.n.is_some_and(|n| n != 1) {
        return Err(OpenAiError::invalid(
            "Only `n: 1` is supported: an agency gives one answer.",
            Some("n"),
        ));
    }
    if r.logprobs == Some(true) {
        return Err(OpenAiError::invalid(
            "`logprobs` is not supported by an agency.",
            Some("logprobs"),
        ));
    }
    match &r.stream_options {
        Some(_) if !stream => Err(OpenAiError::invalid(
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
            Some("stream_options"),
        )),
        Some(o) => Ok(o.include_usage),
        None => Ok(false),
    }
}

/// Whether a message says "json" anywhere in its text (OpenAI asks it of `json_object`).
fn mentions_json(m: &types::ChatMessage) -> bool {
    let says = |t: &str| t.to_ascii_lowercase().contains("json");
    match &m.content {
        Some(Content::Text(t)) => says(t),
        Some(Content::Parts(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(|t| t.as_str()))
            .any(says),
        None => false,
    }
}

fn finish_reason(stopped_by: StopReason) -> &'static str {
    if stopped_by == StopReason::ToolCalls {
        "tool_calls"
    } else if stopped_by.is_guard() {
        "length"
    } else {
        "stop"
    }
}

fn usage(out: &TurnOutcome) -> types::Usage {
    types::Usage {
        prompt_tokens: out.usage.prompt_tokens,
        completion_tokens: out.usage.completion_tokens,
        total_tokens: out.usage.total(),
        prompt_tokens_details: types::PromptTokensDetails::default(),
        completion_tokens_details: types::CompletionTokensDetails::default(),
    }
}

fn completion_id(out: &TurnOutcome) -> String {
    format!("chatcmpl-{}", out.turn_id.0.simple())
}

/// The completion of a turn; with a prefill, its answer is what follows the prefill.
fn completion(agency: &Agency, out: &TurnOutcome, prefill: Option<&str>) -> types::ChatCompletion {
    types::ChatCompletion {
        id: completion_id(out),
        object: "chat.completion",
        created: Utc::now().timestamp(),
        model: agency.name.clone(),
        choices: vec![types::Choice {
            index: 0,
            message: if out.tool_calls.is_empty() {
                types::AssistantMessage {
                    role: "assistant",
                    content: Some(Continuation::whole(prefill, &out.answer)),
                    refusal: None,
                    annotations: Vec::new(),
                    reasoning_content: None,
                    tool_calls: None,
                }
            } else {
                types::AssistantMessage {
                    role: "assistant",
                    content: None,
                    refusal: None,
                    annotations: Vec::new(),
                    reasoning_content: None,
                    tool_calls: Some(tools::wire_calls(&out.tool_calls, false)),
                }
            },
            logprobs: None,
            finish_reason: finish_reason(out.stopped_by),
        }],
        usage: usage(out),
        service_tier: types::SERVICE_TIER,
        system_fingerprint: fingerprint(agency),
    }
}

/// A streamed answer in Chat Completions' chunks: the role chunk at once (keep-alive comments
/// follow while the agents work), then the answer's pieces — what follows the prefill, when
/// there is one — the finish chunk, the usage chunk when asked for, and `[DONE]`. A turn that
/// paused on the client's tools sends its calls instead of text, each whole in one delta.
/// Asked to show the team's work, each hop before the answer is a `reasoning_content` delta
/// (a line; every line after the first begins with a newline).
struct ChatChunks {
    id: String,
    created: i64,
    model: String,
    system_fingerprint: String,
    include_usage: bool,
    continuation: Continuation,
    first_token: FirstToken,
    request_id: RequestId,
    /// The team's work, while it is shown: until the answer (or the calls) begins.
    work: Option<Work>,
    /// Whether a line of work was sent.
    worked: bool,
}

impl ChatChunks {
    fn new(
        agency: &Agency,
        prefill: Option<&str>,
        include_usage: bool,
        request_id: &RequestId,
    ) -> Self {
        Self {
            id: format!("chatcmpl-{}", uuid::Uuid::now_v7().simple()),
            created: Utc::now().timestamp(),
            model: agency.name.clone(),
            system_fingerprint: fingerprint(agency),
            include_usage,
            continuation: Continuation::new(prefill),
            first_token: FirstToken::new(&agency.name),
            request_id: request_id.clone(),
            work: None,
            worked: false,
        }
    }

    /// A chunk of `delta` (with `finish`); with `usage`, the usage chunk, without choices.
    fn chunk(
        &self,
        delta: types::Delta,
        finish: Option<&'static str>,
        usage: Option<types::Usage>,
    ) -> Event {
        let choices = match usage {
            Some(_) => Vec::new(),
            None => vec![types::ChunkChoice {
                index: 0,
                delta,
                logprobs: None,
                finish_reason: finish,
            }],
        };
        let chunk = types::Chunk {
            id: self.id.clone(),
            object: "chat.completion.chunk",
            created: self.created,
            model: self.model.clone(),
            choices,
            // `null` in every chunk but the last when usage was asked for; absent otherwise.
            usage: self.include_usage.then_some(usage),
            service_tier: types::SERVICE_TIER,
            system_fingerprint: self.system_fingerprint.clone(),
        };
        Event::default().data(serde_json::to_string(&chunk).unwrap_or_default())
    }

    fn text(&self, piece: String) -> Event {
        let delta = types::Delta {
            content: Some(piece),
            ..types::Delta::default()
        };
        self.chunk(delta, None, None)
    }

    /// A line of the team's work, while it is shown.
    fn work(&mut self, event: &agency_runtime::Event) -> Option<Event> {
        let line = self.work.as_mut()?.event(event)?;
        let line = if std::mem::replace(&mut self.worked, true) {
            format!("\n{line}")
        } else {
            line
        };
        let delta = types::Delta {
            reasoning_content: Some(line),
            ..types::Delta::default()
        };
        Some(self.chunk(delta, None, None))
    }

    fn finished(&mut self, out: &TurnOutcome, rest: &str) -> Vec<Event> {
        self.work = None;
        let mut events = Vec::new();
        if out.tool_calls.is_empty() {
            let rest = self.continuation.push(rest) + &self.continuation.finish();
            if !rest.is_empty() {
                self.first_token.seen();
            }
            for piece in rest.split_inclusive(char::is_whitespace) {
                events.push(self.text(piece.to_string()));
            }
        } else {
            let delta = types::Delta {
                tool_calls: Some(tools::wire_calls(&out.tool_calls, true)),
                ..types::Delta::default()
            };
            events.push(self.chunk(delta, None, None));
        }
        let finish = Some(finish_reason(out.stopped_by));
        events.push(self.chunk(types::Delta::default(), finish, None));
        if self.include_usage {
            events.push(self.chunk(types::Delta::default(), None, Some(usage(out))));
        }
        events
    }
}

impl crate::encode::Encoder for ChatChunks {
    fn open(&mut self) -> Vec<Event> {
        let delta = types::Delta {
            role: Some("assistant"),
            content: Some(String::new()),
            ..types::Delta::default()
        };
        vec![self.chunk(delta, None, None)]
    }

    async fn encode(&mut self, event: TurnEvent) -> Vec<Event> {
        let mut events = match event {
            TurnEvent::Text(piece) => {
                let piece = self.continuation.push(&piece);
                if piece.is_empty() {
                    return Vec::new();
                }
                // The answer begins: the work before it is shown, what follows is not.
                self.work = None;
                self.first_token.seen();
                return vec![self.text(piece)];
            }
            TurnEvent::Progress(event) => return self.work(&event).into_iter().collect(),
            TurnEvent::Finished { outcome, rest } => self.finished(&outcome, &rest),
            TurnEvent::Failed(e) => {
                let body = runtime_error(e, &self.request_id).body();
                vec![Event::default().data(body.to_string())]
            }
        };
        events.push(Event::default().data("[DONE]"));
        events
    }
}
