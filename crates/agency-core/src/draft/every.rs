//! For tests of every path a draft travels (the file, the API, the store, a published
//! version, an export): a draft that sets every field, and a check that it does.

use serde_json::{Value, json};

use super::{
    AgencyDraft, AgentDraft, McpServerDraft, PriceDraft, ProviderDraft, RuleDraft, fields_of,
};

/// A draft in which every field of every draft type is set in some item: each `Option` is
/// `Some`, each list and mapping non-empty. Its values are the ones the domain writes back
/// ([`crate::Agency::to_draft`]), so every path must give it back equal; a path that drops a
/// field does not. Its MCP servers are valid only in the server's own configuration (one is
/// a command, one reads a server variable): [`every_agency_field`] is the valid agency.
///
/// Every struct here is written out whole, without `..Default::default()`: a field added to a
/// draft type does not compile here until it is given a value, and [`unset_fields`] fails the
/// tests while that value is `None` or empty.
pub fn every_field() -> AgencyDraft {
    AgencyDraft {
        name: "every".into(),
        handle: Some("EVERY-1".into()),
        protocol: "directives".into(),
        manager: "boss".into(),
        max_hops: Some(7),
        turn_deadline_secs: Some(90),
        max_turn_cost_usd: Some("0.5".into()),
        budget_usd: Some("20".into()),
        budget_period: Some("week".into()),
        providers: vec![ProviderDraft {
            name: "own".into(),
            kind: "openai".into(),
            base_url: Some("http://127.0.0.1:9/v1".into()),
            api_key_env: Some("OWN_API_KEY".into()),
            max_concurrency: Some(3),
            requests_per_minute: Some(60),
            prices: vec![(
                "small".into(),
                PriceDraft {
                    input: "2.5".into(),
                    output: "10".into(),
                },
            )],
        }],
        mcp_servers: vec![
            McpServerDraft {
                name: "web".into(),
                url: Some("http://127.0.0.1:9/mcp".into()),
                command: None,
                args: vec![],
                env: vec![],
                headers_env: vec![("Authorization".into(), "WEB_TOKEN".into())],
                timeout_secs: Some(30),
                max_concurrency: Some(4),
            },
            McpServerDraft {
                name: "local".into(),
                url: None,
                command: Some("mcp-local".into()),
                args: vec!["--stdio".into()],
                env: vec![("A".into(), "1".into()), ("B".into(), "2".into())],
                headers_env: vec![],
                timeout_secs: None,
                max_concurrency: None,
            },
        ],
        agents: vec![boss(), helper()],
    }
}

/// The fields only the server's own configuration may set (an agency's MCP server is a `url`,
/// whose headers an account stores as credentials): what [`every_agency_field`] leaves unset.
pub const CONFIGURATION_ONLY: &[&str] = &[
    "mcp_servers.*.command",
    "mcp_servers.*.args",
    "mcp_servers.*.env",
    "mcp_servers.*.headers_env",
];

/// [`every_field`] as a valid agency (of the operator, whose provider may name a server
/// variable): every field set but the [`CONFIGURATION_ONLY`] ones.
pub fn every_agency_field() -> AgencyDraft {
    let mut d = every_field();
    d.mcp_servers.retain(|m| m.command.is_none());
    for m in &mut d.mcp_servers {
        m.headers_env.clear();
    }
    d
}

fn boss() -> AgentDraft {
    AgentDraft {
        id: Some(4522),
        name: "boss".into(),
        handle: Some("BOSS-1".into()),
        role: Some("runs the team".into()),
        model: "builtin/rules".into(),
        temperature: Some(0.5),
        top_p: Some(0.9),
        max_tokens: Some(256),
        reflection_threshold: Some(1.5),
        reflection_half_life_hours: Some(6.0),
        observe_chats: Some(true),
        instructions: Some("Line one.\nLine two.".into()),
        tools: vec!["builtin/now".into()],
        approve: vec!["builtin/now".into()],
        approve_timeout_secs: Some(90),
        approve_on_timeout: Some("approve".into()),
        approve_edits: Some(true),
        rules: vec![
            RuleDraft {
                when: "user".into(),
                call: Some("builtin/now".into()),
                with: Some(json!({"note": "{{message}}", "n": 2, "deep": {"list": [1, "x"]}})),
                action: "At {{result}}: {{message}}".into(),
                send_to: vec!["helper".into()],
            },
            RuleDraft {
                when: "helper".into(),
                call: None,
                with: None,
                action: "{{message}}".into(),
                send_to: vec!["user".into()],
            },
        ],
    }
}

fn helper() -> AgentDraft {
    AgentDraft {
        id: Some(143),
        name: "helper".into(),
        handle: None,
        role: None,
        model: "builtin/rules".into(),
        temperature: None,
        top_p: None,
        max_tokens: None,
        reflection_threshold: None,
        reflection_half_life_hours: None,
        observe_chats: None,
        instructions: None,
        tools: vec![],
        approve: vec![],
        approve_timeout_secs: None,
        approve_on_timeout: None,
        approve_edits: None,
        rules: vec![RuleDraft {
            when: "any".into(),
            call: None,
            with: None,
            action: "done: {{message}}".into(),
            send_to: vec!["boss".into(), "user".into()],
        }],
    }
}

/// The fields of `draft` that no item sets (`agents[].top_p`: no agent has a `top_p`), read
/// through its serialization: what serde leaves out is unset. Each draft type's fields are its
/// own ([`fields_of`]), so a field added to a type is checked here without a word.
pub fn unset_fields(draft: &AgencyDraft) -> Vec<String> {
    let Ok(root) = serde_json::to_value(draft) else {
        return vec!["(the draft does not serialize)".into()];
    };
    let values = |v: &Value| -> Vec<Value> {
        match v {
            Value::Array(items) => items.clone(),
            Value::Object(map) => map.values().cloned().collect(),
            _ => Vec::new(),
        }
    };
    let under = |items: &[Value], key: &str| -> Vec<Value> {
        items.iter().flat_map(|i| values(&i[key])).collect()
    };
    let top = vec![root];
    let providers = under(&top, "providers");
    let agents = under(&top, "agents");
    let mut unset = Vec::new();
    unset.extend(unset_of::<AgencyDraft>("", &top));
    unset.extend(unset_of::<ProviderDraft>("providers.*.", &providers));
    unset.extend(unset_of::<PriceDraft>(
        "providers.*.prices.*.",
        &under(&providers, "prices"),
    ));
    unset.extend(unset_of::<McpServerDraft>(
        "mcp_servers.*.",
        &under(&top, "mcp_servers"),
    ));
    unset.extend(unset_of::<AgentDraft>("agents[].", &agents));
    unset.extend(unset_of::<RuleDraft>(
        "agents[].rules[].",
        &under(&agents, "rules"),
    ));
    unset
}

/// `T`'s fields that none of `items` sets.
fn unset_of<T: serde::de::DeserializeOwned>(path: &str, items: &[Value]) -> Vec<String> {
    let set = |v: Option<&Value>| match v {
        None | Some(Value::Null) => false,
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Object(o)) => !o.is_empty(),
        Some(_) => true,
    };
    fields_of::<T>()
        .iter()
        .filter(|f| !items.iter().any(|i| set(i.get(**f))))
        .map(|f| format!("{path}{f}"))
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use crate::AgencyId;

    #[test]
    fn every_field_is_set_valid_and_what_the_domain_writes_back() {
        assert_eq!(unset_fields(&every_field()), Vec::<String>::new());
        let d = every_agency_field();
        assert_eq!(unset_fields(&d), CONFIGURATION_ONLY);
        let agency = d.validate(AgencyId::new(), "local", &|_| true).unwrap();
        assert_eq!(agency.to_draft(), d);
    }

    #[test]
    fn the_configurations_servers_are_valid_there() {
        let servers =
            crate::validate_mcp_servers(&every_field().mcp_servers, crate::Declared::Operator)
                .unwrap();
        let again: Vec<McpServerDraft> = servers
            .iter()
            .map(|(name, s)| McpServerDraft::of(name, s))
            .collect();
        assert_eq!(again, every_field().mcp_servers);
    }

    #[test]
    fn the_api_body_keeps_every_field() {
        let d = every_field();
        let body = serde_json::to_string(&d).unwrap();
        assert_eq!(serde_json::from_str::<AgencyDraft>(&body).unwrap(), d);
    }

    #[test]
    fn an_unset_field_is_named() {
        let mut d = every_field();
        d.agents[0].top_p = None;
        d.agents[0].rules[0].with = None;
        d.providers[0].prices.clear();
        assert_eq!(
            unset_fields(&d),
            [
                "providers.*.prices",
                "providers.*.prices.*.input",
                "providers.*.prices.*.output",
                "agents[].top_p",
                "agents[].rules[].with",
            ]
        );
    }
}
