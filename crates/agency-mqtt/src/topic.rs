//! The XMAGS topics (spec 002): what the server listens to and where it answers.
//!
//! `XMAGS/{teamId}/{CMD|DATA|EVT}/{name}/...`: `{teamId}` is an agency's handle (else its
//! name), `{agentId}` an agent's handle (else its name).

/// The first level of every topic.
pub const ROOT: &str = "XMAGS";

/// The filters the server subscribes to, each with a name of its own for shared
/// subscriptions (see [`filters`]).
pub const SUBSCRIPTIONS: &[(&str, &str)] = &[
    ("chat_new", "XMAGS/+/CMD/chat_new/+"),
    ("chat", "XMAGS/+/DATA/chat/+/+"),
    ("chat_cancel", "XMAGS/+/CMD/chat_cancel/+/+"),
    ("chat_approval", "XMAGS/+/CMD/chat_approval/+/+"),
    ("observation", "XMAGS/+/DATA/observation/+"),
    ("team_observation", "XMAGS/+/DATA/observation"),
];

/// The filters to subscribe to. With a share group, MQTT 5 shared subscriptions: each filter
/// as `$share/GROUP.NAME/FILTER`. For MQTT a shared subscription is its share name *and* its
/// filter, so a name per filter means the same as one name for all on any broker; rumqttd
/// (the embedded broker) keys a share group by its name alone, and with one name for five
/// filters loses messages. The names come from the filter, not its place in the list, so
/// servers of different versions still share.
///
/// `chat_cancel` is never shared: every server of the group gets it, and the one running the
/// turn cancels it.
pub fn filters(share_group: Option<&str>) -> Vec<String> {
    SUBSCRIPTIONS
        .iter()
        .map(|(name, filter)| match share_group {
            Some(group) if *name != "chat_cancel" => format!("$share/{group}.{name}/{filter}"),
            _ => (*filter).to_string(),
        })
        .collect()
}

/// A message the server acts on, by its topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Inbound {
    ChatNew {
        team: String,
        agent: String,
    },
    Chat {
        team: String,
        agent: String,
        conversation: String,
    },
    ChatCancel {
        team: String,
        agent: String,
        conversation: String,
    },
    /// A person's answer to a tool call of the conversation's turn that waits for approval.
    ChatApproval {
        team: String,
        agent: String,
        conversation: String,
    },
    /// To one agent, or (`agent: None`) to the team: the payload names the agent.
    Observation {
        team: String,
        agent: Option<String>,
    },
}

impl Inbound {
    pub fn team(&self) -> &str {
        match self {
            Inbound::ChatNew { team, .. }
            | Inbound::Chat { team, .. }
            | Inbound::ChatCancel { team, .. }
            | Inbound::ChatApproval { team, .. }
            | Inbound::Observation { team, .. } => team,
        }
    }

    /// The agent named by the topic, if it names one.
    pub fn agent(&self) -> Option<&str> {
        match self {
            Inbound::ChatNew { agent, .. }
            | Inbound::Chat { agent, .. }
            | Inbound::ChatCancel { agent, .. }
            | Inbound::ChatApproval { agent, .. } => Some(agent),
            Inbound::Observation { agent, .. } => agent.as_deref(),
        }
    }
}

/// The message a topic carries; `None` for topics the server does not act on (its own events
/// among them).
pub fn parse(topic: &str) -> Option<Inbound> {
    let parts: Vec<&str> = topic.split('/').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return None;
    }
    let s = |x: &str| x.to_string();
    match parts.as_slice() {
        [ROOT, team, "CMD", "chat_new", agent] => Some(Inbound::ChatNew {
            team: s(team),
            agent: s(agent),
        }),
        [ROOT, team, "DATA", "chat", agent, conversation] => Some(Inbound::Chat {
            team: s(team),
            agent: s(agent),
            conversation: s(conversation),
        }),
        [ROOT, team, "CMD", "chat_cancel", agent, conversation] => Some(Inbound::ChatCancel {
            team: s(team),
            agent: s(agent),
            conversation: s(conversation),
        }),
        [ROOT, team, "CMD", "chat_approval", agent, conversation] => Some(Inbound::ChatApproval {
            team: s(team),
            agent: s(agent),
            conversation: s(conversation),
        }),
        [ROOT, team, "DATA", "observation", agent] => Some(Inbound::Observation {
            team: s(team),
            agent: Some(s(agent)),
        }),
        [ROOT, team, "DATA", "observation"] => Some(Inbound::Observation {
            team: s(team),
            agent: None,
        }),
        _ => None,
    }
}

pub fn chat_progress(team: &str, agent: &str, conversation: &str) -> String {
    format!("{ROOT}/{team}/EVT/chat_progress/{agent}/{conversation}")
}

pub fn chat_response(team: &str, agent: &str, conversation: &str) -> String {
    format!("{ROOT}/{team}/EVT/chat_response/{agent}/{conversation}")
}

pub fn error(team: &str, agent: &str) -> String {
    format!("{ROOT}/{team}/EVT/error/{agent}")
}

pub fn observation_result(team: &str, agent: &str) -> String {
    format!("{ROOT}/{team}/EVT/observation_result/{agent}")
}

pub fn reflection_result(team: &str, agent: &str) -> String {
    format!("{ROOT}/{team}/EVT/reflection_result/{agent}")
}

pub fn plan_new(team: &str, agent: &str) -> String {
    format!("{ROOT}/{team}/EVT/plan_new/{agent}")
}

pub fn plan_update(team: &str, agent: &str) -> String {
    format!("{ROOT}/{team}/EVT/plan_update/{agent}")
}

pub fn plan_task(team: &str) -> String {
    format!("{ROOT}/{team}/CMD/plan_task")
}

pub fn plan_action(team: &str) -> String {
    format!("{ROOT}/{team}/CMD/plan_action")
}

/// Whether `segment` may stand in a topic level the server publishes to.
pub fn valid_level(segment: &str) -> bool {
    !segment.is_empty() && !segment.contains(['/', '+', '#', '\0'])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spec_topics_parse() {
        assert_eq!(
            parse("XMAGS/plant/CMD/chat_new/FERM-DATA-AGENT-001"),
            Some(Inbound::ChatNew {
                team: "plant".into(),
                agent: "FERM-DATA-AGENT-001".into()
            })
        );
        assert_eq!(
            parse("XMAGS/plant/DATA/chat/A1/550e8400-e29b-41d4-a716-446655440000"),
            Some(Inbound::Chat {
                team: "plant".into(),
                agent: "A1".into(),
                conversation: "550e8400-e29b-41d4-a716-446655440000".into()
            })
        );
        assert_eq!(
            parse("XMAGS/plant/DATA/observation"),
            Some(Inbound::Observation {
                team: "plant".into(),
                agent: None
            })
        );
        assert_eq!(
            parse("XMAGS/plant/CMD/chat_cancel/A1/c1"),
            Some(Inbound::ChatCancel {
                team: "plant".into(),
                agent: "A1".into(),
                conversation: "c1".into()
            })
        );
        assert_eq!(
            parse("XMAGS/plant/CMD/chat_approval/A1/c1"),
            Some(Inbound::ChatApproval {
                team: "plant".into(),
                agent: "A1".into(),
                conversation: "c1".into()
            })
        );
    }

    #[test]
    fn shared_subscriptions_have_a_name_per_filter() {
        assert_eq!(filters(None)[1], "XMAGS/+/DATA/chat/+/+");
        let shared = filters(Some("agency"));
        assert_eq!(shared[1], "$share/agency.chat/XMAGS/+/DATA/chat/+/+");
        assert_eq!(
            shared[2], "XMAGS/+/CMD/chat_cancel/+/+",
            "every server gets a cancel"
        );
        assert_eq!(shared.len(), SUBSCRIPTIONS.len());
        let names: std::collections::HashSet<&str> = shared
            .iter()
            .filter(|f| f.starts_with("$share/"))
            .filter_map(|f| f.split('/').nth(1))
            .collect();
        assert_eq!(names.len(), SUBSCRIPTIONS.len() - 1, "{shared:?}");
        assert!(names.iter().all(|n| valid_level(n)));
        // Every filter still parses what it subscribes to.
        for (_, f) in SUBSCRIPTIONS {
            assert!(parse(&f.replace('+', "x")).is_some(), "{f}");
        }
    }

    #[test]
    fn events_and_strangers_are_not_commands() {
        assert_eq!(parse("XMAGS/plant/EVT/chat_progress/A1/c1"), None);
        assert_eq!(parse("XMAGS/plant/CMD/chat_new"), None);
        assert_eq!(parse("XMAGS//CMD/chat_new/A1"), None);
        assert_eq!(parse("OTHER/plant/CMD/chat_new/A1"), None);
        assert_eq!(parse("XMAGS/plant/CMD/chat_new/A1/extra"), None);
    }

    #[test]
    fn outgoing_topics_follow_the_spec() {
        assert_eq!(
            chat_progress("t", "a", "c"),
            "XMAGS/t/EVT/chat_progress/a/c"
        );
        assert_eq!(
            chat_response("t", "a", "c"),
            "XMAGS/t/EVT/chat_response/a/c"
        );
        assert_eq!(error("t", "a"), "XMAGS/t/EVT/error/a");
        assert_eq!(plan_task("t"), "XMAGS/t/CMD/plan_task");
        assert!(valid_level("FERM-DATA-AGENT-001"));
        assert!(!valid_level("a/b") && !valid_level("a+") && !valid_level(""));
    }
}
