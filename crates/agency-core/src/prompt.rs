//! Instruction blocks compiled into an agent's system prompt.

use std::fmt::Write;

use crate::agency::{Agency, Agent, Block, Party, Recipient, Roster};
use crate::protocol::format_instructions;

/// The system prompt of `agent`: principles, its own instructions and rules, the roster of the
/// other agents as `#ID (name)` (the manager also sees `#0 (user)`), and the reply format.
pub fn system_prompt(agency: &Agency, agent: &Agent) -> String {
    let roster = agency.roster();
    let is_manager = agent.id == agency.manager;
    let manager_name = roster.display(Some(agency.manager));
    let mut out = String::new();
    let _ = write!(
        out,
        "You are {} (#{}), an agent of the agency \"{}\".",
        agent.name,
        agent.id.get(),
        agency.name
    );
    if let Some(role) = &agent.role {
        let _ = write!(out, " Your role: {role}.");
    }
    out.push_str("\n\n## Principles\n");
    if is_manager {
        out.push_str(
            "- You are the manager: you alone talk to the user (#0). Forward the user's requests to the agents who can help, coordinate them until you agree on what to answer, then send the user one complete answer.\n",
        );
    } else {
        let _ = writeln!(
            out,
            "- You never talk to the user directly. Work with the other agents and report to the manager, #{} ({manager_name}).",
            agency.manager.get()
        );
    }
    out.push_str(
        "- Whoever you address sees only the messages sent to them: make each message self-contained.\n- Be brief and concrete.\n",
    );

    let mut instructions = String::new();
    for block in &agent.blocks {
        match block {
            Block::Text(t) => {
                let _ = writeln!(instructions, "{t}");
            }
            Block::Rule(r) => {
                let first = r
                    .call
                    .as_ref()
                    .map(|c| {
                        format!(
                            "call the tool `{}` with {}, then (its answer is {{{{result}}}}) ",
                            c.tool, c.with
                        )
                    })
                    .unwrap_or_default();
                let _ = writeln!(
                    instructions,
                    "- When a message is from {}: {first}{}. Send your response to {}.",
                    party(&roster, r.when),
                    r.action.trim().trim_end_matches('.'),
                    r.send_to
                        .iter()
                        .map(|to| recipient(&roster, *to))
                        .collect::<Vec<_>>()
                        .join(" and ")
                );
            }
        }
    }
    if !instructions.is_empty() {
        out.push_str("\n## Your instructions\n");
        out.push_str(&instructions);
    }
    if !agent.tools.is_empty() {
        out.push_str(
            "\n## Tools\nYou may call the tools you are given, as tool calls (not in your reply's text); each result comes back to you alone. Pass on what others need to know.\n",
        );
    }

    out.push_str("\n## Agents\n");
    for (id, name) in roster.entries() {
        if *id != agent.id {
            let _ = writeln!(out, "#{} ({name})", id.get());
        }
    }
    if is_manager {
        out.push_str("#0 (user)\n");
    }
    let example = roster
        .entries()
        .iter()
        .find(|(id, _)| *id != agent.id)
        .map(|(id, n)| (*id, n.as_str()));
    out.push_str("\n## Reply format\n");
    out.push_str(&format_instructions(agency.protocol, example));
    out
}

fn party(roster: &Roster, p: Party) -> String {
    match p {
        Party::Any => "anyone".into(),
        Party::User => "the user (#0)".into(),
        Party::Agent(id) => format!("#{} ({})", id.get(), roster.display(Some(id))),
    }
}

fn recipient(roster: &Roster, r: Recipient) -> String {
    match r {
        Recipient::User => "the user (#0)".into(),
        Recipient::Agent(id) => format!("#{} ({})", id.get(), roster.display(Some(id))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agency::{AgencyDraft, AgentDraft, RuleDraft};
    use crate::ids::AgencyId;

    fn agency(protocol: &str) -> Agency {
        AgencyDraft {
            name: "studio".into(),
            protocol: protocol.into(),
            manager: "manager".into(),
            agents: vec![
                AgentDraft {
                    id: Some(4522),
                    name: "manager".into(),
                    model: "builtin/rules".into(),
                    instructions: Some("You run a studio.".into()),
                    rules: vec![RuleDraft {
                        when: "user".into(),
                        action: "Ask for a build".into(),
                        send_to: vec!["programmer".into()],
                        ..Default::default()
                    }],
                    ..Default::default()
                },
                AgentDraft {
                    id: Some(143),
                    name: "programmer".into(),
                    role: Some("writes Rust".into()),
                    model: "builtin/rules".into(),
                    ..Default::default()
                },
            ],
            ..Default::default()
        }
        .validate(AgencyId::new(), "local", &|_| true)
        .unwrap()
    }

    #[test]
    fn the_manager_sees_the_user_and_its_rules() {
        let a = agency("json");
        let p = system_prompt(&a, &a.agents[0]);
        assert!(p.contains("You run a studio."));
        assert!(p.contains("- When a message is from the user (#0): Ask for a build. Send your response to #143 (programmer)."));
        assert!(
            p.contains("## Agents\n#143 (programmer)\n#0 (user)\n"),
            "{p}"
        );
        assert!(p.contains(r#"{"to": <id>, "context": "<your message>"}"#));
        assert!(
            !p.contains("#4522 (manager)"),
            "an agent is not listed to itself"
        );
    }

    #[test]
    fn other_agents_do_not_see_the_user() {
        let a = agency("directives");
        let p = system_prompt(&a, &a.agents[1]);
        assert!(p.contains("Your role: writes Rust."));
        assert!(p.contains("#4522 (manager)"));
        assert!(!p.contains("#0 (user)"));
        assert!(p.contains("TO manager: <your message>"), "{p}");
    }
}
