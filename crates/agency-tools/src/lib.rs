//! Tools over MCP (issue 19): the process's connections to MCP servers, and the built-in tools.
//!
//! A [`ToolHub`] connects to each declared server once (on first use), shares the connection
//! among all calls, restarts it after the server dies, and holds each server to its call
//! timeout and concurrency limit. Every server — a process on stdio, a Streamable HTTP
//! endpoint, or the built-in tools served in this process — goes through the same rmcp
//! client, and every call ends in a [`ToolOutput`]: a failure is an error result a model can
//! read, never a hang.
//!
//! Who declared a server decides what it may be ([`Declared`]): the operator's configuration
//! is trusted; an account may declare only HTTP servers on public addresses (unless the
//! operator allows private ones), with no headers taken from the server's variables.
//!
//! - `hub.rs`: [`ToolHub`], the connections by server, timeouts, limits, calls.
//! - `connection.rs`: connecting by transport, the declaration rules, our client handler
//!   (progress, tool-list changes).
//! - `builtin.rs`: the built-in tools' server (`now`, `calculate`, `echo`); `calc.rs` its
//!   arithmetic.
//! - `group.rs`: a stdio server's process group, stopped whole when its connection ends.
//! - `credentials.rs`: the headers an account stored for its HTTP server, and [`Declarer`].
//! - `output.rs`: a tool result as the text an agent reads.
//! - `traced.rs`: a call's trace context in its request's `_meta`, and over Streamable HTTP in
//!   its headers too.
//! - `error.rs`: [`ToolError`].

mod builtin;
mod calc;
mod connection;
mod credentials;
mod error;
mod group;
mod hub;
mod output;
mod traced;

pub use builtin::Builtin;
pub use credentials::{Credentials, Declarer, MAX_HEADERS, MAX_NAME_BYTES, MAX_VALUE_BYTES};
pub use error::ToolError;
pub use hub::{DEFAULT_IDLE, ToolHub};
pub use output::ToolOutput;

/// Who declared an MCP server: the operator's configuration is trusted; an account is not.
pub use agency_core::Declared;
