//! OpenAI's Chat Completions wire format: what clients send and what they get back.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A request body. Fields an agency cannot honour are refused by name; fields that cannot
/// apply to a team of agents are accepted and ignored, as OpenAI itself ignores some.
#[derive(Debug, Deserialize)]
pub struct ChatRequest {
    pub model: Option<String>,
    pub messages: Vec<ChatMessage>,
    #[serde(default)]
    pub stream: Option<bool>,
    pub stream_options: Option<StreamOptions>,
    pub n: Option<u32>,
    pub logprobs: Option<bool>,
    pub response_format: Option<Value>,
    /// Everything else: checked against [`IGNORED`] and [`REFUSED`].
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// Accepted and ignored: they tune one model's sampling or bookkeeping, and an agency's
/// agents have their own.
pub const IGNORED: &[&str] = &[
    "temperature",
    "top_p",
    "max_tokens",
    "max_completion_tokens",
    "stop",
    "presence_penalty",
    "frequency_penalty",
    "logit_bias",
    "user",
    "seed",
    "store",
    "metadata",
    "service_tier",
    "reasoning_effort",
    "top_logprobs",
    "prompt_cache_key",
    "safety_identifier",
    "verbosity",
    "prompt_cache_options",
    "prompt_cache_retention",
    "moderation",
    // Checked on its own: text only.
    "modalities",
];

/// Read on their own: the client's tools (see `tools.rs`).
pub const TOOLS: &[&str] = &["tools", "tool_choice", "parallel_tool_calls"];

/// Refused with a 400 naming the parameter when set to anything but null.
pub const REFUSED: &[&str] = &[
    "functions",
    "function_call",
    "audio",
    "prediction",
    "web_search_options",
];

#[derive(Debug, Deserialize)]
pub struct StreamOptions {
    #[serde(default)]
    pub include_usage: bool,
}

#[derive(Debug, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    #[serde(default)]
    pub content: Option<Content>,
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// A message's content: text, or parts of which only text ones are understood.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Parts(Vec<Value>),
}

/// What an agency's turn used: every model call of it, summed. The details are OpenAI's (code
/// reads `usage.prompt_tokens_details.cached_tokens`); an agency counts none of them, so zeros.
#[derive(Debug, Serialize)]
pub struct Usage {
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
    pub total_tokens: u32,
    pub prompt_tokens_details: PromptTokensDetails,
    pub completion_tokens_details: CompletionTokensDetails,
}

#[derive(Debug, Default, Serialize)]
pub struct PromptTokensDetails {
    pub cached_tokens: u32,
    pub audio_tokens: u32,
}

#[derive(Debug, Default, Serialize)]
pub struct CompletionTokensDetails {
    pub reasoning_tokens: u32,
    pub audio_tokens: u32,
    pub accepted_prediction_tokens: u32,
    pub rejected_prediction_tokens: u32,
}

/// The `service_tier` OpenAI names in its answers when none was asked for.
pub const SERVICE_TIER: &str = "default";

#[derive(Debug, Serialize)]
pub struct ChatCompletion {
    pub id: String,
    pub object: &'static str,
    pub created: i64,
    pub model: String,
    pub choices: Vec<Choice>,
    pub usage: Usage,
    pub service_tier: &'static str,
    /// `fp_` and the agency's published version: it changes when the agency does.
    pub system_fingerprint: String,
}

#[derive(Debug, Serialize)]
pub struct Choice {
    pub index: u32,
    pub message: AssistantMessage,
    pub logprobs: Option<Value>,
    pub finish_reason: &'static str,
}

#[derive(Debug, Serialize)]
pub struct AssistantMessage {
    pub role: &'static str,
    /// `null` when the message calls the client's tools.
    pub content: Option<String>,
    pub refusal: Option<String>,
    /// Always empty: an agency cites no URLs (OpenAI sends `[]` too).
    pub annotations: Vec<Value>,
    /// The team's work, one line a hop, when the request asked to see it (as DeepSeek-style
    /// APIs send a model's reasoning); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    /// The calls of the client's tools the turn paused on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<Value>>,
}

#[derive(Debug, Serialize)]
pub struct Chunk {
    pub id: String,
    pub object: &'static str,
    pub created: i64,
    pub model: String,
    pub choices: Vec<ChunkChoice>,
    /// Present (null until the last chunk) when the client asked for usage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Option<Usage>>,
    pub service_tier: &'static str,
    pub system_fingerprint: String,
}

#[derive(Debug, Serialize)]
pub struct ChunkChoice {
    pub index: u32,
    pub delta: Delta,
    pub logprobs: Option<Value>,
    pub finish_reason: Option<&'static str>,
}

#[derive(Debug, Default, Serialize)]
pub struct Delta {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// A line of the team's work (see [`AssistantMessage::reasoning_content`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<Value>>,
}

#[derive(Debug, Serialize)]
pub struct ModelList {
    pub object: &'static str,
    pub data: Vec<Model>,
}

#[derive(Debug, Serialize)]
pub struct Model {
    pub id: String,
    pub object: &'static str,
    pub created: i64,
    pub owned_by: String,
}
