//! The agent card: who the agency is to an A2A client, where it answers and how to sign in.

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, json};

use super::admit;
use super::types::{AgentCapabilities, AgentCard, AgentInterface, AgentSkill, VERSION};
use crate::AppState;
use crate::auth::{Key, KeyRefused};

/// `GET /api/agency/{agency}/a2a/.well-known/agent-card.json`, with the agency's key (an
/// agency is its account's: who may call it may read its card).
pub(super) async fn card(
    State(s): State<AppState>,
    Path(selector): Path<String>,
    headers: HeaderMap,
    key: Result<Key, KeyRefused>,
) -> Response {
    match admit(&s, &selector, key).await {
        Ok(a) => axum::Json(card_of(&a.agency, &base_url(&headers, &selector))).into_response(),
        Err(e) => e.rest_response(),
    }
}

/// The agent's base URL, as the client reached this server (behind a proxy that says it
/// serves HTTPS, `https`).
fn base_url(headers: &HeaderMap, selector: &str) -> String {
    let https = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("https"));
    let host = headers
        .get(axum::http::header::HOST)
        .and_then(|v| v.to_str().ok())
        .filter(|h| !h.is_empty() && !h.contains(['/', ' ', '@']))
        .unwrap_or("localhost");
    let scheme = if https { "https" } else { "http" };
    let selector: String = selector
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            b => format!("%{b:02X}"),
        })
        .collect();
    format!("{scheme}://{host}/api/agency/{selector}/a2a")
}

fn card_of(agency: &agency_core::Agency, url: &str) -> AgentCard {
    let manager = agency
        .agent(agency.manager)
        .map_or("its manager", |a| a.name.as_str());
    let names: Vec<&str> = agency.agents.iter().map(|a| a.name.as_str()).collect();
    let description = format!(
        "The agency {}: a team of {} agents ({}) that work a message out together; {manager} answers.",
        agency.name,
        agency.agents.len(),
        names.join(", ")
    );
    let mut skills = vec![AgentSkill {
        id: "agency".into(),
        name: agency.name.clone(),
        description: description.clone(),
        tags: vec!["team".into()],
    }];
    skills.extend(agency.agents.iter().map(|agent| {
        AgentSkill {
            id: format!("agent-{}", agent.id),
            name: agent.name.clone(),
            description: agent
                .role
                .clone()
                .filter(|r| !r.trim().is_empty())
                .unwrap_or_else(|| format!("{}, an agent of the team", agent.name)),
            tags: vec![if agent.id == agency.manager {
                "manager".into()
            } else {
                "agent".into()
            }],
        }
    }));
    let mut schemes = Map::new();
    schemes.insert(
        "agencyKey".into(),
        json!({ "httpAuthSecurityScheme": {
            "scheme": "Bearer",
            "bearerFormat": "agk_…",
            "description": "An API key of the agency (its owner makes them on the key page).",
        }}),
    );
    AgentCard {
        name: agency.name.clone(),
        description,
        supported_interfaces: ["JSONRPC", "HTTP+JSON"]
            .into_iter()
            .map(|binding| AgentInterface {
                url: url.to_string(),
                protocol_binding: binding,
                protocol_version: VERSION,
            })
            .collect(),
        version: agency
            .version
            .map_or_else(|| "draft".to_string(), |v| v.to_string()),
        capabilities: AgentCapabilities {
            streaming: true,
            push_notifications: false,
            extended_agent_card: false,
        },
        security_schemes: schemes,
        security_requirements: vec![json!({ "schemes": { "agencyKey": { "list": [] } } })],
        default_input_modes: vec!["text/plain", "application/json", "image/*"],
        default_output_modes: vec!["text/plain"],
        skills,
    }
}
