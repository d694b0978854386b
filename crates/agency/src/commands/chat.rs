//! `agency chat`: one turn, or a terminal chat showing the agents' trace.

use std::io::{BufRead, Write};
use std::sync::Arc;

use agency_core::{Agency, ConversationId, MessageKind};
use agency_runtime::{Event, Runtime, RuntimeError, TurnOutcome};
use anyhow::bail;

/// `agency chat NAME`: continues `conversation` (one of the agency's) or starts one; one turn
/// with `message`, else a terminal chat.
pub async fn run(
    rt: &Arc<Runtime>,
    owner: &str,
    name: &str,
    message: Option<String>,
    json: bool,
    conversation: Option<ConversationId>,
) -> anyhow::Result<()> {
    let agency = rt.agencies().get(owner, name).await?;
    let conversation = match conversation {
        Some(id) => match rt.conversations().of(agency.id, id).await {
            Ok(c) => c.id,
            Err(RuntimeError::ConversationNotFound(_)) => {
                bail!("agency `{name}` has no conversation {id}")
            }
            Err(e) => return Err(e.into()),
        },
        None => rt.conversations().start(&agency).await?.id,
    };
    let result = match message {
        Some(text) => chat_once(rt, conversation, text, json).await,
        None => chat(rt, &agency, conversation).await,
    };
    rt.settle().await;
    result
}

async fn chat_once(
    rt: &Arc<Runtime>,
    conversation: ConversationId,
    text: String,
    json: bool,
) -> anyhow::Result<()> {
    let out = rt.send(conversation, text).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&turn_json(&out))?);
    } else {
        println!("{}", out.answer);
    }
    Ok(())
}

fn turn_json(out: &TurnOutcome) -> serde_json::Value {
    serde_json::json!({
        "conversation_id": out.conversation_id.to_string(),
        "answer": out.answer,
        "stopped_by": out.stopped_by.as_str(),
        "hops": out.hops,
        "usage": {
            "prompt_tokens": out.usage.prompt_tokens,
            "completion_tokens": out.usage.completion_tokens,
            "total_tokens": out.usage.total(),
        },
        "trace": out.trace.iter().map(|e| {
            let mut hop = serde_json::json!({
                "from": e.from_name(&out.roster),
                "to": e.to_name(&out.roster),
                "kind": e.kind_name(),
                "text": e.text,
            });
            if let Some(t) = &e.tool {
                hop["tool"] = t.name.clone().into();
                hop["call_id"] = t.call_id.clone().into();
                hop["is_error"] = t.is_error.into();
            }
            if let Some(ms) = e.latency_ms {
                hop["latency_ms"] = ms.into();
            }
            hop
        }).collect::<Vec<_>>(),
    })
}

/// The terminal chat: each line is a turn; the agents' messages show as they happen.
async fn chat(
    rt: &Arc<Runtime>,
    agency: &Agency,
    conversation: ConversationId,
) -> anyhow::Result<()> {
    println!(
        "Chatting with {} (conversation {conversation}). Ctrl-D ends.",
        agency.name
    );
    let roster = agency.roster();
    let mut events = rt.subscribe();
    let show = |event: Event| {
        if let Event::Hop {
            conversation: c,
            entry,
            ..
        } = event
            && c == conversation
            && !matches!(entry.kind, MessageKind::Input | MessageKind::Answer)
        {
            let took = match (&entry.tool, entry.kind, entry.latency_ms) {
                (Some(t), MessageKind::ToolResult, Some(ms)) => {
                    let error = if t.is_error { ", error" } else { "" };
                    format!(" ({ms} ms{error})")
                }
                _ => String::new(),
            };
            let arrow = if entry.kind == MessageKind::Reply {
                "⚙"
            } else {
                "→"
            };
            println!(
                "  {} {arrow} {}{took}: {}",
                entry.from_name(&roster),
                entry.to_name(&roster),
                entry.text.replace('\n', "\n    ")
            );
        }
    };
    let (lines_tx, mut lines) = tokio::sync::mpsc::channel::<String>(1);
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines().map_while(Result::ok) {
            if lines_tx.blocking_send(line).is_err() {
                break;
            }
        }
    });
    loop {
        print!("you> ");
        std::io::stdout().flush()?;
        let Some(line) = lines.recv().await else {
            break;
        };
        if line.trim().is_empty() {
            continue;
        }
        let turn = rt.send(conversation, line);
        tokio::pin!(turn);
        let result = loop {
            tokio::select! {
                Ok(event) = events.recv() => show(event),
                result = &mut turn => break result,
            }
        };
        while let Ok(event) = events.try_recv() {
            show(event);
        }
        match result {
            Ok(out) => {
                let note = if out.stopped_by.is_guard() {
                    format!(" [stopped: {}]", out.stopped_by.as_str())
                } else {
                    String::new()
                };
                println!("{}> {}{note}", agency.name, out.answer);
            }
            Err(e) => eprintln!("error: {e}"),
        }
    }
    println!();
    Ok(())
}
