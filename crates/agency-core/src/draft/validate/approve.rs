//! An agent's approval policy (issue 36), checked.

use super::Problems;
use crate::agency::AgentDraft;
use crate::tool::ToolGrants;

/// The agent's approval policy: `approve` names tools of servers its `tools` name, each once;
/// the timeout is between a second and a week; what happens at it is `deny` or `approve`.
pub(super) fn approve_of(
    i: usize,
    a: &AgentDraft,
    tools: &ToolGrants,
    p: &mut Problems,
) -> crate::approval::ApprovalPolicy {
    use crate::approval::{ApprovalPolicy, OnTimeout};
    let mut listed: Vec<String> = Vec::new();
    let servers = tools.servers();
    for (k, t) in a.approve.iter().enumerate() {
        let t = t.trim();
        let path = format!("agents[{i}].approve[{k}]");
        match crate::tool::split(t) {
            Some(_) if listed.iter().any(|g| g == t) => {
                p.add(path, format!("`{t}` is listed twice"));
            }
            Some((server, _)) if !servers.contains(&server) => p.add(
                path,
                format!("`{t}` is not one of this agent's tools: add `{server}/…` to its `tools`"),
            ),
            Some(_) => listed.push(t.to_string()),
            None => p.add(
                path,
                format!("`{t}` is not a tool: write `server/tool`, or `server/*` for every tool of a server"),
            ),
        }
    }
    if let Some(secs) = a.approve_timeout_secs
        && !(1..=604_800).contains(&secs)
    {
        p.add(
            format!("agents[{i}].approve_timeout_secs"),
            "must be between 1 and 604800 (a week)",
        );
    }
    let on_timeout = match a.approve_on_timeout.as_deref() {
        None => OnTimeout::Deny,
        Some(s) => OnTimeout::parse(s).unwrap_or_else(|| {
            p.add(
                format!("agents[{i}].approve_on_timeout"),
                format!("`{s}` is not `deny` or `approve`"),
            );
            OnTimeout::Deny
        }),
    };
    ApprovalPolicy {
        tools: ToolGrants(listed),
        timeout_secs: a.approve_timeout_secs,
        on_timeout,
        edits: a.approve_edits.unwrap_or(false),
    }
}
