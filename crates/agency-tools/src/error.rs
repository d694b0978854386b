//! What can go wrong reaching an MCP server. Every message is written for whoever reads it
//! next — an operator in a log, or a model in a tool result — and names no secret.

/// Why a server's tools could not be listed (and, as a [`crate::ToolOutput`], why a call did
/// not happen).
#[derive(Clone, Debug, thiserror::Error)]
pub enum ToolError {
    /// The declaration is not allowed for who made it (an account's stdio server, an account's
    /// header from a server variable, an account's URL on a private address).
    #[error("{0}")]
    Refused(String),
    /// The declaration cannot be used as written (a bad URL, a missing variable).
    #[error("{0}")]
    Config(String),
    /// The server could not be started or reached, or did not complete the handshake.
    #[error("could not connect to the MCP server {server}: {message}")]
    Connect { server: String, message: String },
    /// The server did not answer in time.
    #[error("the MCP server {server} did not answer within {secs} s")]
    Timeout { server: String, secs: u64 },
    /// The connection closed (the server exited or hung up); the next use reconnects.
    #[error("the MCP server {server} closed the connection (it will be restarted on next use)")]
    Closed { server: String },
    /// The server answered a request with an error.
    #[error("the MCP server {server} answered with an error: {message}")]
    Server { server: String, message: String },
}
