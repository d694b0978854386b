//! What a turn shows operators (see `agency-telemetry`): an `invoke_agent {agency}` span for
//! the turn, a `chat {model}` span for each model call and an `execute_tool {tool}` span for
//! each tool call beneath it, the hops as the turn's events, and the metrics of each. With
//! tracing off no span is made; with metrics off too, nothing is copied for them.

use agency_core::{Agency, AgentId, Message, Roster, StopReason, ToolCall, TraceEntry, TurnRecord};
use agency_providers::{Completion, ModelError};
use agency_telemetry::metrics::{ModelCall, metrics};
use agency_telemetry::semconv as sc;
use agency_telemetry::{KeyValue, Span, SpanKind, capture_content};

/// Content put in a span at most (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`), in
/// bytes: the rest is cut.
const MAX_CONTENT: usize = 64 << 10;

fn clip(mut text: String) -> String {
    if text.len() > MAX_CONTENT {
        let mut end = MAX_CONTENT;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

/// Messages as the GenAI conventions write them (`[{"role", "parts": [{"type": "text",
/// "content"}]}]`), clipped.
fn messages_json<'a>(messages: impl Iterator<Item = (&'static str, &'a str)>) -> String {
    let list: Vec<serde_json::Value> = messages
        .map(|(role, text)| {
            serde_json::json!({"role": role, "parts": [{"type": "text", "content": text}]})
        })
        .collect();
    clip(serde_json::Value::Array(list).to_string())
}

/// The turn's span, a child of the request's (or of the caller's trace).
pub(crate) fn turn_span(agency: &Agency, record: &TurnRecord, input: &str) -> Span {
    Span::start(SpanKind::Internal, || {
        let mut kv = vec![
            KeyValue::new(sc::GEN_AI_OPERATION_NAME, sc::OP_INVOKE_AGENT),
            KeyValue::new(sc::GEN_AI_AGENT_NAME, agency.name.clone()),
            KeyValue::new(sc::GEN_AI_AGENT_ID, agency.id.to_string()),
            KeyValue::new(
                sc::GEN_AI_CONVERSATION_ID,
                record.conversation_id.to_string(),
            ),
            KeyValue::new(sc::AGENCY_TURN_NUMBER, i64::from(record.number)),
        ];
        if capture_content() {
            kv.push(KeyValue::new(
                sc::GEN_AI_INPUT_MESSAGES,
                messages_json(std::iter::once(("user", input))),
            ));
        }
        (format!("{} {}", sc::OP_INVOKE_AGENT, agency.name), kv)
    })
}

/// The turn ended: why, after how many hops, with what answer.
pub(crate) fn turn_ended(
    span: &Span,
    agency: &Agency,
    stopped_by: StopReason,
    hops: u32,
    answer: &str,
) {
    metrics().turn(&agency.name, stopped_by.as_str());
    span.set_attributes(|| {
        let mut kv = vec![
            KeyValue::new(sc::AGENCY_TURN_STOPPED_BY, stopped_by.as_str()),
            KeyValue::new(sc::AGENCY_TURN_HOPS, i64::from(hops)),
        ];
        if capture_content() {
            kv.push(KeyValue::new(
                sc::GEN_AI_OUTPUT_MESSAGES,
                messages_json(std::iter::once(("assistant", answer))),
            ));
        }
        kv
    });
}

/// The turn could not answer.
pub(crate) fn turn_failed(span: &Span, agency: &Agency, hops: u32, error: &str) {
    metrics().turn(&agency.name, "error");
    span.set_attributes(|| [KeyValue::new(sc::AGENCY_TURN_HOPS, i64::from(hops))]);
    span.set_error("model_error", error);
}

/// A hop: an event of the turn's span, and a count.
pub(crate) fn hop(span: &Span, agency: &Agency, roster: &Roster, entry: &TraceEntry) {
    metrics().hop(&agency.name, entry.kind_name());
    span.add_event(sc::EVENT_HOP, || {
        [
            KeyValue::new(sc::AGENCY_HOP_FROM, entry.from_name(roster).to_string()),
            KeyValue::new(sc::AGENCY_HOP_TO, entry.to_name(roster).to_string()),
            KeyValue::new(sc::AGENCY_HOP_KIND, entry.kind_name()),
        ]
    });
}

/// A call asked for a person's approval, or answered: an event of the turn's span (the audit:
/// who, what, with which arguments when content is captured, and why).
pub(crate) fn approval(span: &Span, approval: &agency_core::Approval) {
    span.add_event(sc::EVENT_APPROVAL, || {
        let mut kv = vec![
            KeyValue::new(sc::AGENCY_APPROVAL_ID, approval.id.to_string()),
            KeyValue::new(sc::GEN_AI_TOOL_NAME, approval.call.name.clone()),
            KeyValue::new(sc::GEN_AI_TOOL_CALL_ID, approval.call.id.clone()),
            KeyValue::new(sc::AGENCY_APPROVAL_STATE, approval.state.as_str()),
        ];
        if let Some(by) = &approval.answered_by {
            kv.push(KeyValue::new(sc::AGENCY_APPROVAL_ANSWERED_BY, by.clone()));
        }
        if capture_content() {
            kv.push(KeyValue::new(
                sc::GEN_AI_TOOL_CALL_ARGUMENTS,
                clip(approval.call.arguments.clone()),
            ));
            if let Some(why) = &approval.reason {
                kv.push(KeyValue::new(sc::AGENCY_APPROVAL_REASON, clip(why.clone())));
            }
        }
        kv
    });
}

/// Who makes a model call, for its span and metrics.
pub(crate) struct Caller {
    /// The agency's name (`rooms` for a room's agents).
    pub agency: String,
    pub agent: String,
    pub agent_id: Option<i64>,
    pub model: agency_core::ModelRef,
    pub temperature: Option<f64>,
    pub max_tokens: Option<u32>,
}

impl Caller {
    pub(crate) fn agent(agency: &Agency, agent: AgentId) -> Option<Self> {
        let a = agency.agent(agent)?;
        Some(Self {
            agency: agency.name.clone(),
            agent: a.name.clone(),
            agent_id: Some(i64::from(a.id.get())),
            model: a.model.clone(),
            temperature: a.sampling.temperature,
            max_tokens: a.sampling.max_tokens,
        })
    }
}

/// A model call: its span (a child of `parent`) and, when it ends, its metrics.
pub(crate) struct ModelCallObserver {
    pub span: Span,
    caller: Option<Caller>,
    price: Option<agency_core::Price>,
}

impl ModelCallObserver {
    /// `context` gives the messages sent (role, text), read only when content is captured.
    pub(crate) fn start<'a, I>(
        parent: &Span,
        caller: Option<Caller>,
        context: impl FnOnce() -> I,
        price: Option<agency_core::Price>,
    ) -> Self
    where
        I: Iterator<Item = (&'static str, &'a str)>,
    {
        let span = match &caller {
            Some(c) => parent.child(SpanKind::Client, || {
                let mut kv = vec![
                    KeyValue::new(sc::GEN_AI_OPERATION_NAME, sc::OP_CHAT),
                    KeyValue::new(sc::GEN_AI_PROVIDER_NAME, c.model.provider.clone()),
                    KeyValue::new(sc::GEN_AI_REQUEST_MODEL, c.model.model.clone()),
                    KeyValue::new(sc::GEN_AI_AGENT_NAME, c.agent.clone()),
                ];
                if let Some(id) = c.agent_id {
                    kv.push(KeyValue::new(sc::GEN_AI_AGENT_ID, id));
                }
                if let Some(t) = c.temperature {
                    kv.push(KeyValue::new(sc::GEN_AI_REQUEST_TEMPERATURE, t));
                }
                if let Some(m) = c.max_tokens {
                    kv.push(KeyValue::new(sc::GEN_AI_REQUEST_MAX_TOKENS, i64::from(m)));
                }
                if capture_content() {
                    kv.push(KeyValue::new(
                        sc::GEN_AI_INPUT_MESSAGES,
                        messages_json(context()),
                    ));
                }
                (format!("{} {}", sc::OP_CHAT, c.model.model), kv)
            }),
            None => Span::none(),
        };
        Self {
            span,
            caller,
            price,
        }
    }

    /// A model call of an agency's agent in a turn (observed only when tracing or metrics are
    /// on: the caller's names are copies).
    pub(crate) fn agent(
        turn: &Span,
        agency: &Agency,
        agent: AgentId,
        context: &[Message],
        price: Option<agency_core::Price>,
    ) -> Self {
        Self::start(
            turn,
            (agency_telemetry::tracing_on() || agency_telemetry::metrics_on())
                .then(|| Caller::agent(agency, agent))
                .flatten(),
            || {
                context
                    .iter()
                    .map(|m| (m.kind.role().as_str(), m.text.as_str()))
            },
            price,
        )
    }

    /// A retry of the call (the provider's `reason`, in a few words).
    pub(crate) fn retry(&self, attempt: u32, reason: &str) {
        let Some(c) = &self.caller else {
            return;
        };
        metrics().retry(&c.model.provider, reason);
        self.span.add_event(sc::EVENT_RETRY, || {
            [
                KeyValue::new(sc::AGENCY_RETRY_ATTEMPT, i64::from(attempt)),
                KeyValue::new(sc::AGENCY_RETRY_REASON, reason.to_string()),
            ]
        });
    }

    pub(crate) fn finish(&self, result: &Result<Completion, ModelError>, seconds: f64) {
        let Some(c) = &self.caller else {
            return;
        };
        let error = result.as_ref().err().map(error_type);
        let usage = result.as_ref().map(|c| c.usage).unwrap_or_default();
        metrics().model_call(&ModelCall {
            provider: &c.model.provider,
            model: &c.model.model,
            agency: &c.agency,
            agent: &c.agent,
            input_tokens: u64::from(usage.prompt_tokens),
            output_tokens: u64::from(usage.completion_tokens),
            seconds,
            error: error.as_deref(),
        });
        if let (Ok(_), Some(price)) = (result, self.price) {
            // Pico-dollars to dollars.
            let dollars = price.cost(usage).0 as f64 / 1e12;
            metrics().cost(&c.agency, &c.model.to_string(), dollars);
        }
        match result {
            Ok(done) => self.span.set_attributes(|| {
                let mut kv = vec![
                    KeyValue::new(
                        sc::GEN_AI_USAGE_INPUT_TOKENS,
                        i64::from(usage.prompt_tokens),
                    ),
                    KeyValue::new(
                        sc::GEN_AI_USAGE_OUTPUT_TOKENS,
                        i64::from(usage.completion_tokens),
                    ),
                    KeyValue::new(
                        sc::GEN_AI_RESPONSE_MODEL,
                        done.model.clone().unwrap_or_else(|| c.model.model.clone()),
                    ),
                ];
                if let Some(reason) = &done.finish_reason {
                    kv.push(KeyValue::new(
                        sc::GEN_AI_RESPONSE_FINISH_REASONS,
                        opentelemetry_array(reason),
                    ));
                }
                if capture_content() {
                    kv.push(KeyValue::new(
                        sc::GEN_AI_OUTPUT_MESSAGES,
                        messages_json(std::iter::once(("assistant", done.text.as_str()))),
                    ));
                }
                kv
            }),
            Err(e) => self
                .span
                .set_error(error.as_deref().unwrap_or("_OTHER"), &e.to_string()),
        }
    }
}

/// A task of the memory cycle (rating an observation, reflecting, planning) for an agent:
/// its span, under the MQTT message that brought the observation.
pub(crate) fn memory_span(
    agency: &Agency,
    agent: &str,
    task: &agency_core::memory::MemoryTask,
) -> Span {
    let name = match task {
        agency_core::memory::MemoryTask::Check { .. } => "check",
        agency_core::memory::MemoryTask::Importance { .. } => "rate",
        agency_core::memory::MemoryTask::Reflect { .. } => "reflect",
        agency_core::memory::MemoryTask::Plan { .. } => "plan",
    };
    Span::start(SpanKind::Internal, || {
        let kv = vec![
            KeyValue::new(sc::AGENCY_MEMORY_TASK, name),
            KeyValue::new(sc::AGENCY_NAME, agency.name.clone()),
            KeyValue::new(sc::GEN_AI_AGENT_NAME, agent.to_string()),
        ];
        (format!("memory {name}"), kv)
    })
}

/// A room agent's answer to a person's message: its own `invoke_agent` span, under the
/// request that posted the message.
pub(crate) fn room_answer_span(room: &agency_core::room::Room, agent: &str) -> Span {
    Span::start(SpanKind::Internal, || {
        let kv = vec![
            KeyValue::new(sc::GEN_AI_OPERATION_NAME, sc::OP_INVOKE_AGENT),
            KeyValue::new(sc::GEN_AI_AGENT_NAME, agent.to_string()),
            KeyValue::new(sc::GEN_AI_CONVERSATION_ID, room.id.to_string()),
            KeyValue::new(sc::AGENCY_ROOM, room.name.clone()),
        ];
        (format!("{} {}", sc::OP_INVOKE_AGENT, agent), kv)
    })
}

fn opentelemetry_array(reason: &str) -> agency_telemetry::Value {
    agency_telemetry::Value::Array(agency_telemetry::Array::String(vec![
        agency_telemetry::StringValue::from(reason.to_string()),
    ]))
}

/// A tool call's span (a child of the turn's).
pub(crate) fn tool_span(turn: &Span, call: &ToolCall) -> Span {
    turn.child(SpanKind::Internal, || {
        let mut kv = vec![
            KeyValue::new(sc::GEN_AI_OPERATION_NAME, sc::OP_EXECUTE_TOOL),
            KeyValue::new(sc::GEN_AI_TOOL_NAME, call.name.clone()),
            KeyValue::new(sc::GEN_AI_TOOL_CALL_ID, call.id.clone()),
            KeyValue::new(sc::GEN_AI_TOOL_TYPE, "function"),
        ];
        if capture_content() {
            kv.push(KeyValue::new(
                sc::GEN_AI_TOOL_CALL_ARGUMENTS,
                clip(call.arguments.clone()),
            ));
        }
        (format!("{} {}", sc::OP_EXECUTE_TOOL, call.name), kv)
    })
}

pub(crate) fn tool_done(
    span: &Span,
    call: &ToolCall,
    output: &agency_tools::ToolOutput,
    seconds: f64,
) {
    metrics().tool_call(&call.name, !output.is_error, seconds);
    if output.is_error {
        span.set_error("tool_error", &output.text);
    }
    if capture_content() {
        span.set_attributes(|| {
            [KeyValue::new(
                sc::GEN_AI_TOOL_CALL_RESULT,
                clip(output.text.clone()),
            )]
        });
    }
}

/// `error.type` of a failed model call: the HTTP status the provider answered, or what kind of
/// failure it was.
pub(crate) fn error_type(e: &ModelError) -> String {
    let message = match e {
        ModelError::UnknownModel { .. } => return "unknown_model".into(),
        ModelError::Failed { message, .. } => message.as_str(),
    };
    if let Some(status) = message
        .strip_prefix("HTTP ")
        .and_then(|r| r.get(..3))
        .filter(|s| s.bytes().all(|b| b.is_ascii_digit()))
    {
        return status.to_string();
    }
    let kind = [
        ("timed out", "timeout"),
        ("could not reach", "connection"),
        ("malformed", "malformed"),
        ("the stream broke off", "broken"),
        ("the answer is larger", "too_large"),
        ("the model refused", "refused"),
    ]
    .into_iter()
    .find(|(start, _)| message.starts_with(start))
    .map_or("_OTHER", |(_, kind)| kind);
    kind.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_typed_by_status_or_kind() {
        let failed = |message: &str| ModelError::Failed {
            provider: "p".into(),
            message: message.into(),
        };
        assert_eq!(error_type(&failed("HTTP 429: slow down")), "429");
        assert_eq!(
            error_type(&failed("timed out waiting for the first byte")),
            "timeout"
        );
        assert_eq!(
            error_type(&failed("could not reach the provider: refused")),
            "connection"
        );
        assert_eq!(error_type(&failed("something else")), "_OTHER");
        assert_eq!(
            error_type(&ModelError::UnknownModel {
                provider: "p".into(),
                model: "m".into()
            }),
            "unknown_model"
        );
        assert_eq!(clip("é".repeat(MAX_CONTENT)).len(), MAX_CONTENT);
    }
}
