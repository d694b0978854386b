//! One agent call, whoever asks: a routed turn's hop (`turn.rs`), a room's answer
//! (`rooms/answering.rs`), a task of the memory cycle (`memory.rs`). The agent's model is
//! resolved from the providers, asked under the call's span, and the call is measured
//! (`observe.rs`: its duration, tokens and cost); a tool call likewise, under a span of its
//! own. What a caller does with the answer — route it, post it, rate it — stays its own.

use std::time::{Duration, Instant};

use agency_core::memory::MemoryTask;
use agency_core::{ModelRef, ToolCall, ToolProgress};
use agency_providers::{ChatRequest, Completion, ModelError, ModelRequest, Providers};
use agency_telemetry::Span;
use agency_tools::ToolOutput;

use crate::observe::ModelCallObserver;
use crate::tools::{Scope, Tools};

/// How an agent's model is asked.
pub(crate) enum Asking<'a> {
    /// Its turn in a routed conversation: its whole context, framed by the protocol.
    Routed(ModelRequest),
    /// A plain chat (a room's agent).
    Chat(ChatRequest),
    /// A task of the memory cycle.
    Task(ModelRequest, &'a MemoryTask),
}

/// Asks `model`, resolved from `providers`, as `asking` says, observed by `observer` (the call
/// runs under its span): the answer, and how long the call took.
pub(crate) async fn model(
    providers: &Providers,
    model: &ModelRef,
    observer: &ModelCallObserver,
    asking: Asking<'_>,
) -> (Result<Completion, ModelError>, Duration) {
    let started = Instant::now();
    let done = match providers.resolve(model) {
        None => Err(ModelError::UnknownModel {
            provider: model.provider.clone(),
            model: model.model.clone(),
        }),
        Some(m) => {
            observer
                .span
                .run(async move {
                    match asking {
                        Asking::Routed(request) => m.complete(request).await,
                        Asking::Chat(request) => m.chat(request).await,
                        Asking::Task(request, task) => m.complete_task(request, task).await,
                    }
                })
                .await
        }
    };
    let took = started.elapsed();
    observer.finish(&done, took.as_secs_f64());
    (done, took)
}

/// [`model`], paid from budgets: `paid`'s reservation taken before the call (refused, the call
/// is not made: the budget's error), settled to the call's exact cost after.
pub(crate) async fn paid(
    spending: &crate::spend::Spending,
    paid: crate::spend::Paid,
    providers: &Providers,
    model_ref: &ModelRef,
    observer: &ModelCallObserver,
    asking: Asking<'_>,
) -> Result<(Result<Completion, ModelError>, Duration), crate::RuntimeError> {
    let reservation = match spending.reserve(&paid, model_ref).await {
        Ok(r) => r,
        Err(e) => {
            let refused = Err(ModelError::Failed {
                provider: "agency".into(),
                message: e.to_string(),
            });
            observer.finish(&refused, 0.0);
            return Err(e);
        }
    };
    let (done, took) = model(providers, model_ref, observer, asking).await;
    let (cost, tokens) = match (&done, paid.price) {
        (Ok(c), Some(price)) => (price.cost(c.usage), c.usage.total()),
        _ => (agency_core::Cost::default(), 0),
    };
    spending.settle(reservation, cost, tokens).await;
    Ok((done, took))
}

/// Runs one tool call in `scope` under a span of its own (a child of `parent`), its progress
/// to `progress`; should `stopped` resolve first, the call ends with an error result saying
/// `why`. The result, and how long the call took. Never fails: whatever goes wrong is an error
/// result the agent reads.
pub(crate) async fn tool(
    tools: &Tools,
    scope: Scope<'_>,
    parent: &Span,
    call: &ToolCall,
    progress: Option<tokio::sync::mpsc::UnboundedSender<ToolProgress>>,
    stopped: impl Future<Output = &'static str>,
) -> (ToolOutput, Duration) {
    let span = crate::observe::tool_span(parent, call);
    let started = Instant::now();
    let output = span
        .run(async {
            tokio::select! {
                output = tools.call(scope, call, progress) => output,
                why = stopped => ToolOutput {
                    text: why.to_string(),
                    is_error: true,
                },
            }
        })
        .await;
    let took = started.elapsed();
    crate::observe::tool_done(&span, call, &output, took.as_secs_f64());
    (output, took)
}
