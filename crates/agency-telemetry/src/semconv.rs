//! The attribute, span and metric names we emit: OpenTelemetry's GenAI semantic conventions
//! (development status, as of November 2026: `gen_ai.provider.name` rather than the older
//! `gen_ai.system`), the HTTP and error conventions we use, and our own `agency.*` names.
//! Kept here rather than taken from the `opentelemetry-semantic-conventions` crate, whose
//! `gen_ai` constants are deprecated since the conventions moved to their own repository.

// GenAI operations (`gen_ai.operation.name`), which also begin the span names.
pub const OP_CHAT: &str = "chat";
pub const OP_INVOKE_AGENT: &str = "invoke_agent";
pub const OP_EXECUTE_TOOL: &str = "execute_tool";

// GenAI attributes.
pub const GEN_AI_OPERATION_NAME: &str = "gen_ai.operation.name";
pub const GEN_AI_PROVIDER_NAME: &str = "gen_ai.provider.name";
pub const GEN_AI_AGENT_NAME: &str = "gen_ai.agent.name";
pub const GEN_AI_AGENT_ID: &str = "gen_ai.agent.id";
pub const GEN_AI_CONVERSATION_ID: &str = "gen_ai.conversation.id";
pub const GEN_AI_REQUEST_MODEL: &str = "gen_ai.request.model";
pub const GEN_AI_REQUEST_TEMPERATURE: &str = "gen_ai.request.temperature";
pub const GEN_AI_REQUEST_MAX_TOKENS: &str = "gen_ai.request.max_tokens";
pub const GEN_AI_RESPONSE_MODEL: &str = "gen_ai.response.model";
pub const GEN_AI_RESPONSE_FINISH_REASONS: &str = "gen_ai.response.finish_reasons";
pub const GEN_AI_USAGE_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
pub const GEN_AI_USAGE_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
pub const GEN_AI_TOKEN_TYPE: &str = "gen_ai.token.type";
pub const GEN_AI_TOOL_NAME: &str = "gen_ai.tool.name";
pub const GEN_AI_TOOL_CALL_ID: &str = "gen_ai.tool.call.id";
pub const GEN_AI_TOOL_TYPE: &str = "gen_ai.tool.type";
/// Opt-in content (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`).
pub const GEN_AI_INPUT_MESSAGES: &str = "gen_ai.input.messages";
pub const GEN_AI_OUTPUT_MESSAGES: &str = "gen_ai.output.messages";
pub const GEN_AI_TOOL_CALL_ARGUMENTS: &str = "gen_ai.tool.call.arguments";
pub const GEN_AI_TOOL_CALL_RESULT: &str = "gen_ai.tool.call.result";

// General attributes.
pub const ERROR_TYPE: &str = "error.type";
pub const HTTP_REQUEST_METHOD: &str = "http.request.method";
pub const HTTP_ROUTE: &str = "http.route";
pub const HTTP_RESPONSE_STATUS_CODE: &str = "http.response.status_code";

// Ours.
pub const AGENCY_NAME: &str = "agency.name";
/// The `x-request-id` of an OpenAI request (`req_...`).
pub const AGENCY_REQUEST_ID: &str = "agency.request.id";
/// `rate`, `reflect` or `plan`: a task of an agent's memory cycle.
pub const AGENCY_MEMORY_TASK: &str = "agency.memory.task";
/// A room's name, on its agents' answers.
pub const AGENCY_ROOM: &str = "agency.room";
pub const AGENCY_TURN_STOPPED_BY: &str = "agency.turn.stopped_by";
pub const AGENCY_TURN_HOPS: &str = "agency.turn.hops";
pub const AGENCY_TURN_NUMBER: &str = "agency.turn.number";
pub const AGENCY_HOP_FROM: &str = "agency.hop.from";
pub const AGENCY_HOP_TO: &str = "agency.hop.to";
pub const AGENCY_HOP_KIND: &str = "agency.hop.kind";
pub const AGENCY_RETRY_ATTEMPT: &str = "agency.retry.attempt";
pub const AGENCY_RETRY_REASON: &str = "agency.retry.reason";
/// An approval's id, state (`pending`, `approved`, `denied`), who answered it, and why.
pub const AGENCY_APPROVAL_ID: &str = "agency.approval.id";
pub const AGENCY_APPROVAL_STATE: &str = "agency.approval.state";
pub const AGENCY_APPROVAL_ANSWERED_BY: &str = "agency.approval.answered_by";
pub const AGENCY_APPROVAL_REASON: &str = "agency.approval.reason";
pub const AGENCY_TOOL_OUTCOME: &str = "agency.tool.outcome";
pub const AGENCY_MQTT_DIRECTION: &str = "agency.mqtt.direction";
pub const AGENCY_STORE_BACKEND: &str = "agency.store.backend";
pub const AGENCY_DROP_REASON: &str = "agency.drop.reason";
/// What a cost is counted in.
pub const AGENCY_MODEL: &str = "agency.model";

// Span events.
pub const EVENT_HOP: &str = "agency.hop";
pub const EVENT_RETRY: &str = "agency.retry";
pub const EVENT_APPROVAL: &str = "agency.approval";

// Metrics (OpenTelemetry names; Prometheus shows dots as underscores, with the unit and
// `_total` suffixes: `gen_ai_client_operation_duration_seconds`, `agency_turns_total`).
pub const METRIC_TOKEN_USAGE: &str = "gen_ai.client.token.usage";
pub const METRIC_OPERATION_DURATION: &str = "gen_ai.client.operation.duration";
pub const METRIC_TIME_TO_FIRST_TOKEN: &str = "gen_ai.server.time_to_first_token";
pub const METRIC_HTTP_DURATION: &str = "http.server.request.duration";
pub const METRIC_TURNS: &str = "agency.turns";
pub const METRIC_HOPS: &str = "agency.hops";
pub const METRIC_TOOL_DURATION: &str = "agency.tool.duration";
pub const METRIC_RETRIES: &str = "agency.provider.retries";
pub const METRIC_ERRORS: &str = "agency.provider.errors";
pub const METRIC_COST: &str = "agency.cost.usd";
pub const METRIC_SSE_STREAMS: &str = "agency.sse.streams";
pub const METRIC_SESSIONS: &str = "agency.sessions";
pub const METRIC_MQTT_MESSAGES: &str = "agency.mqtt.messages";
pub const METRIC_COMMIT_DURATION: &str = "agency.store.commit.duration";
pub const METRIC_COMMIT_SIZE: &str = "agency.store.commit.size";
pub const METRIC_SPANS_DROPPED: &str = "agency.telemetry.spans.dropped";
