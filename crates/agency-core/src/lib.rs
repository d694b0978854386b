//! The domain of Agency and every decision the conversation engine makes.
//!
//! This crate does no IO: no database, no HTTP, no clock, no async runtime. The runtime feeds it
//! what happened (a reply arrived, the deadline passed) and carries out the [`engine::Step`]s it
//! returns. Wire formats live at the edges that speak them.

pub mod account;
pub mod agency;
pub mod apikey;
pub mod approval;
pub mod draft;
pub mod engine;
pub mod entry;
pub mod eval;
pub mod ids;
pub mod memory;
pub mod message;
pub mod plan;
pub mod price;
pub mod prompt;
pub mod protocol;
pub mod room;
pub mod rules;
pub mod spend;
pub mod stream;
pub mod tool;

pub use account::{Email, LoginSession, PasswordHash, User};
pub use agency::{
    Agency, AgencyDraft, Agent, AgentDraft, Block, Declared, Edge, Limits, McpServerDraft,
    ModelRef, Party, PriceDraft, Protocol, ProviderDraft, ProviderKind, ProviderSpec, Published,
    Recipient, Roster, Rule, RuleCall, RuleDraft, Sampling, ValidationError, ValidationErrors,
    validate_mcp_servers, validate_providers,
};
pub use apikey::{ApiKey, KeyBudgets, KeyState};
pub use approval::{Approval, ApprovalPolicy, ApprovalState, ApprovalWebhook, OnTimeout};
pub use ids::{
    AgencyId, AgentId, ApprovalId, ConversationId, DefinitionId, MessageId, ParticipantId, RoomId,
    RoomMessageId, TurnId, UserId,
};
pub use message::{
    ChatMessage, Conversation, Face, Message, MessageKind, Role, StopReason, TraceEntry,
    TurnRecord, trace,
};
pub use price::{Cost, Price, Usage};
pub use spend::{Budget, Period};
pub use tool::{
    McpServer, McpTransport, Tool, ToolCall, ToolGrants, ToolPart, ToolProgress, ToolResult,
};
