//! The tools served in the process (`builtin/…`): an rmcp server like any other, reached over an
//! in-memory pipe, so a built-in tool goes through the same client path as every server.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{Implementation, ServerCapabilities, ServerConfig};
use rmcp::{ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use serde::Deserialize;

use crate::calc;

/// Bytes of the in-memory pipe between the client and the built-in server, each way.
const PIPE_BYTES: usize = 64 * 1024;

/// The built-in tools' server.
#[derive(Clone, Debug, Default)]
pub struct Builtin;

#[derive(Debug, Deserialize, rmcp::schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub struct CalculateArgs {
    /// An arithmetic expression: numbers, + - * / % ^ (power), unary minus and parentheses,
    /// e.g. `(2 + 3) * 4 ^ 2`.
    pub expression: String,
}

#[derive(Debug, Deserialize, rmcp::schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub struct EchoArgs {
    /// The text to return.
    pub text: String,
}

#[tool_router]
impl Builtin {
    /// The current date and time.
    #[tool(description = "The current date and time in UTC, as RFC 3339 \
                          (e.g. 2026-11-20T14:03:09Z).")]
    async fn now(&self) -> String {
        chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    }

    /// Evaluates an arithmetic expression.
    #[tool(
        description = "Evaluates an arithmetic expression exactly as written: numbers, \
                          + - * / % and ^ (power, right-associative), unary minus and \
                          parentheses, with the usual precedence. Returns the number."
    )]
    async fn calculate(
        &self,
        Parameters(args): Parameters<CalculateArgs>,
    ) -> Result<String, String> {
        calc::evaluate(&args.expression)
            .map(calc::format)
            .map_err(|e| format!("cannot calculate `{}`: {e}", args.expression))
    }

    /// Returns its text.
    #[tool(description = "Returns the text it is given, unchanged.")]
    async fn echo(&self, Parameters(args): Parameters<EchoArgs>) -> String {
        args.text
    }
}

#[tool_handler]
impl ServerHandler for Builtin {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build()).with_server_info(
            Implementation::new("agency-builtin", env!("CARGO_PKG_VERSION")),
        )
    }
}

impl Builtin {
    /// Starts the server on a task and returns the client's end of its pipe. The server ends
    /// when the client's end is dropped.
    pub fn start() -> tokio::io::DuplexStream {
        let (client, server) = tokio::io::duplex(PIPE_BYTES);
        tokio::spawn(async move {
            match Builtin.serve(server).await {
                Ok(running) => {
                    let _ = running.waiting().await;
                }
                Err(e) => tracing::warn!(error = %e, "the built-in tools' server did not start"),
            }
        });
        client
    }
}
