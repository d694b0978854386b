//! A response streamed: the runtime's turn events as the Responses API's events.

use agency_core::ToolCall;
use agency_runtime::TurnEvent;
use axum::response::sse::Event;
use serde_json::{Value, json};

use super::{Kept, call_item, message_item, new_id, reasoning_item};
use crate::openai::error::runtime_error;
use crate::openai::work::Work;
use crate::openai::{FirstToken, RequestId};

/// A streamed response: `response.created`, `response.in_progress`, then the answer's message
/// item as the manager writes it (`output_item.added`, `content_part.added`,
/// `output_text.delta`s, `output_text.done`, `content_part.done`, `output_item.done`) or the
/// calls it paused on (each `output_item.added`, `function_call_arguments.delta` and `.done`,
/// `output_item.done`), and `response.completed` — or `response.failed`. Events are numbered
/// in order.
///
/// Asked to show the team's work, a `reasoning` item comes first (output index 0, the others
/// after it), opened at the first hop: each hop a summary part (`reasoning_summary_part.added`,
/// `reasoning_summary_text.delta` with the whole line, `reasoning_summary_text.done`,
/// `reasoning_summary_part.done`), and the item done when the answer or the calls begin.
pub(super) struct Events {
    kept: Kept,
    request_id: RequestId,
    first_token: FirstToken,
    seq: u64,
    message_id: String,
    /// The answer's text sent so far.
    streamed: String,
    /// Whether the answer's message item was opened.
    opened: bool,
    /// The team's work, while it is shown: until the answer (or the calls) begins.
    work: Option<Work>,
    /// The reasoning item shown: its id and lines; `done` once it is.
    reasoning: Option<Reasoning>,
}

/// The reasoning item of a streamed response.
struct Reasoning {
    id: String,
    lines: Vec<String>,
    /// The item as it was done.
    done: Option<Value>,
}

impl Events {
    pub(super) fn new(kept: Kept, request_id: &RequestId) -> Self {
        let work = kept
            .show_work
            .then(|| Work::new(std::sync::Arc::new(kept.agency.roster())));
        Self {
            first_token: FirstToken::new(&kept.agency.name),
            kept,
            request_id: request_id.clone(),
            seq: 0,
            message_id: new_id("msg"),
            streamed: String::new(),
            opened: false,
            work,
            reasoning: None,
        }
    }

    /// The output index of the answer's first item: after the reasoning item, when shown.
    fn first(&self) -> usize {
        usize::from(self.reasoning.is_some())
    }

    /// A line of the team's work as a summary part of the reasoning item (opened first).
    fn reason(&mut self, line: String, out: &mut Vec<Event>) {
        let id = match &self.reasoning {
            Some(r) => r.id.clone(),
            None => {
                let id = new_id("rs");
                out.push(self.event(
                    "response.output_item.added",
                    json!({"output_index": 0, "item": reasoning_item(&id, &[], "in_progress")}),
                ));
                self.reasoning = Some(Reasoning {
                    id: id.clone(),
                    lines: Vec::new(),
                    done: None,
                });
                id
            }
        };
        let index = self.reasoning.as_ref().map_or(0, |r| r.lines.len());
        let at = |extra: Value| {
            let mut data = json!({"item_id": id, "output_index": 0, "summary_index": index});
            if let (Value::Object(data), Value::Object(extra)) = (&mut data, extra) {
                data.extend(extra);
            }
            data
        };
        let part = |text: &str| json!({"type": "summary_text", "text": text});
        out.push(self.event(
            "response.reasoning_summary_part.added",
            at(json!({"part": part("")})),
        ));
        out.push(self.event(
            "response.reasoning_summary_text.delta",
            at(json!({"delta": line})),
        ));
        out.push(self.event(
            "response.reasoning_summary_text.done",
            at(json!({"text": line})),
        ));
        out.push(self.event(
            "response.reasoning_summary_part.done",
            at(json!({"part": part(&line)})),
        ));
        if let Some(r) = self.reasoning.as_mut() {
            r.lines.push(line);
        }
    }

    /// Ends the work shown: the reasoning item done (`status`), once. Returns the item as it
    /// was done.
    fn worked(&mut self, status: &str, out: &mut Vec<Event>) -> Option<Value> {
        self.work = None;
        let r = self.reasoning.as_ref()?;
        if let Some(item) = &r.done {
            return Some(item.clone());
        }
        let item = reasoning_item(&r.id, &r.lines, status);
        out.push(self.event(
            "response.output_item.done",
            json!({"output_index": 0, "item": item}),
        ));
        if let Some(r) = self.reasoning.as_mut() {
            r.done = Some(item.clone());
        }
        Some(item)
    }

    fn event(&mut self, kind: &str, mut data: Value) -> Event {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(self.seq);
        self.seq += 1;
        Event::default().event(kind).data(data.to_string())
    }

    /// The events that open the answer's message item, the first time.
    fn open_message(&mut self, out: &mut Vec<Event>) {
        if std::mem::replace(&mut self.opened, true) {
            return;
        }
        self.worked("completed", out);
        let (id, index) = (self.message_id.clone(), self.first());
        out.push(self.event(
            "response.output_item.added",
            json!({"output_index": index, "item": message_item(&id, "", "in_progress")}),
        ));
        out.push(self.event(
            "response.content_part.added",
            json!({"item_id": id, "output_index": index, "content_index": 0,
                   "part": {"type": "output_text", "text": "", "annotations": [], "logprobs": []}}),
        ));
    }

    fn delta(&mut self, piece: &str, out: &mut Vec<Event>) {
        self.open_message(out);
        self.first_token.seen();
        self.streamed.push_str(piece);
        let (id, index) = (self.message_id.clone(), self.first());
        out.push(self.event(
            "response.output_text.delta",
            json!({"item_id": id, "output_index": index, "content_index": 0,
                   "delta": piece, "logprobs": []}),
        ));
    }

    /// The answer's message item, done.
    fn answer(&mut self, rest: &str, out: &mut Vec<Event>) -> Value {
        self.open_message(out);
        if !rest.is_empty() {
            self.delta(rest, out);
        }
        let (id, text) = (self.message_id.clone(), self.streamed.clone());
        let index = self.first();
        let part = json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []});
        out.push(self.event(
            "response.output_text.done",
            json!({"item_id": id, "output_index": index, "content_index": 0,
                   "text": text, "logprobs": []}),
        ));
        out.push(self.event(
            "response.content_part.done",
            json!({"item_id": id, "output_index": index, "content_index": 0, "part": part}),
        ));
        let item = message_item(&id, &text, "completed");
        out.push(self.event(
            "response.output_item.done",
            json!({"output_index": index, "item": item}),
        ));
        item
    }

    /// The items of the calls the turn paused on, done.
    fn calls(&mut self, calls: &[ToolCall], out: &mut Vec<Event>) -> Vec<Value> {
        let mut items = Vec::new();
        let first = self.first();
        for (index, call) in calls.iter().enumerate() {
            let (id, index) = (new_id("fc"), first + index);
            out.push(self.event(
                "response.output_item.added",
                json!({"output_index": index, "item": call_item(&id, call, "in_progress")}),
            ));
            out.push(self.event(
                "response.function_call_arguments.delta",
                json!({"item_id": id, "output_index": index, "delta": call.arguments}),
            ));
            out.push(self.event(
                "response.function_call_arguments.done",
                json!({"item_id": id, "output_index": index, "name": call.name,
                       "arguments": call.arguments}),
            ));
            let item = call_item(&id, call, "completed");
            out.push(self.event(
                "response.output_item.done",
                json!({"output_index": index, "item": item}),
            ));
            items.push(item);
        }
        items
    }

    /// The items of the approvals the turn paused on: each added and done (they have no
    /// events in between).
    fn approvals(
        &mut self,
        approvals: &[agency_core::Approval],
        out: &mut Vec<Event>,
    ) -> Vec<Value> {
        let mut items = Vec::new();
        let first = self.first();
        for (index, approval) in approvals.iter().enumerate() {
            let (item, index) = (super::approval_item(approval), first + index);
            out.push(self.event(
                "response.output_item.added",
                json!({"output_index": index, "item": item}),
            ));
            out.push(self.event(
                "response.output_item.done",
                json!({"output_index": index, "item": item}),
            ));
            items.push(item);
        }
        items
    }
}

impl crate::encode::Encoder for Events {
    fn open(&mut self) -> Vec<Event> {
        let pending = self
            .kept
            .echo
            .response("in_progress", Vec::new(), Value::Null, Value::Null);
        vec![
            self.event("response.created", json!({"response": pending})),
            self.event("response.in_progress", json!({"response": pending})),
        ]
    }

    async fn encode(&mut self, event: TurnEvent) -> Vec<Event> {
        let mut out = Vec::new();
        match event {
            TurnEvent::Text(piece) => self.delta(&piece, &mut out),
            TurnEvent::Progress(event) => {
                if let Some(line) = self.work.as_mut().and_then(|w| w.event(&event)) {
                    self.reason(line, &mut out);
                }
            }
            TurnEvent::Finished { outcome, rest } => {
                let mut output: Vec<Value> =
                    self.worked("completed", &mut out).into_iter().collect();
                output.extend(if !outcome.approvals.is_empty() {
                    self.approvals(&outcome.approvals, &mut out)
                } else if outcome.tool_calls.is_empty() {
                    vec![self.answer(&rest, &mut out)]
                } else {
                    self.calls(&outcome.tool_calls, &mut out)
                });
                let body = self.kept.completed(&outcome, output).await;
                out.push(self.event("response.completed", json!({"response": body})));
            }
            TurnEvent::Failed(e) => {
                let error = runtime_error(e, &self.request_id);
                let output = self.worked("incomplete", &mut out).into_iter().collect();
                let failed = self.kept.echo.response(
                    "failed",
                    output,
                    Value::Null,
                    json!({"code": "server_error", "message": error.message}),
                );
                out.push(self.event("response.failed", json!({"response": failed})));
            }
        }
        out
    }
}
