//! The OpenAPI document of the management API, made from the handlers and wire types
//! themselves (utoipa), served at `/api/openapi.json` and committed as
//! `crates/agency-server/openapi.json` (a test fails when the committed copy is stale).
//!
//! The drop-in endpoints (Chat Completions, the Responses API) are OpenAI's own API, documented
//! by OpenAI and, for what an agency does with them, in `docs/openai.md` and `docs/responses.md`.

use std::sync::OnceLock;

use utoipa::openapi;
use utoipa::{Modify, OpenApi};

use crate::{conversations, events, manage, rooms, wire};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Agency management API",
        description = "Accounts, agencies (drafts, publishing, versions), API keys, provider keys, \
            conversations and roundtable rooms. Log in with `POST /api/auth/login`: the session is an HTTP-only \
            cookie, and every request that changes something must send the session's CSRF token \
            (from `GET /api/auth/me`) in the `x-csrf-token` header. Errors are \
            `{\"error\": {\"message\", \"status\", \"fields\"?}}`; `fields` lists each invalid \
            field by its path. Another user's ids answer 404."
    ),
    paths(
        manage::sign_up,
        manage::log_in,
        manage::log_out,
        manage::me,
        manage::change_password,
        manage::list_agencies,
        manage::create_agency,
        manage::get_agency,
        manage::update_agency,
        manage::delete_agency,
        manage::preview,
        manage::examples,
        manage::providers,
        manage::tools,
        manage::publish,
        manage::versions,
        manage::version,
        manage::export_agency,
        manage::import_agency,
        manage::list_keys,
        manage::create_key,
        manage::change_key,
        manage::key_spend,
        manage::agency_spend,
        manage::revoke_key,
        manage::list_provider_keys,
        manage::put_provider_key,
        manage::delete_provider_key,
        manage::list_mcp_credentials,
        manage::put_mcp_credentials,
        manage::delete_mcp_credentials,
        conversations::create_conversation,
        conversations::list_conversations,
        conversations::get_conversation,
        conversations::post_message,
        conversations::get_turn,
        conversations::list_messages,
        conversations::events,
        rooms::list_rooms,
        rooms::create_room,
        rooms::get_room,
        rooms::delete_room,
        rooms::post_message,
        rooms::set_included,
        rooms::add_participant,
        rooms::set_enabled,
        rooms::remove_participant,
        rooms::retry,
        rooms::list_bots,
        rooms::register_bot,
        rooms::unregister_bot,
        rooms::list_definitions,
        rooms::create_definition,
        rooms::update_definition,
        rooms::delete_definition,
        rooms::events,
    ),
    components(schemas(
        wire::Usage,
        wire::TraceEntry,
        wire::Turn,
        wire::ErrorBody,
        events::ConversationEvent,
        events::RoomEvent
    )),
    modifiers(&CommonErrors)
)]
struct ApiDoc;

/// Operations anyone may call; every other one needs a login session.
const PUBLIC: &[&str] = &["/api/auth/signup", "/api/auth/login"];

/// The answers that whole kinds of operations give, written once here instead of on every
/// handler: a body the extractors refuse (400, 413, 415 for JSON), a query they refuse (400),
/// no session (401), no CSRF token on a change (403). Every error answer gets its JSON shape
/// (`ErrorBody`) and a description. And any request may meet a server at its limit of open
/// connections (503).
struct CommonErrors;

impl Modify for CommonErrors {
    fn modify(&self, doc: &mut openapi::OpenApi) {
        let error = || openapi::ResponseBuilder::new().content("application/json", error_body());
        let max_mib = crate::MAX_BODY >> 20;
        for (path, item) in doc.paths.paths.iter_mut() {
            let public = PUBLIC.contains(&path.as_str());
            let operations = [
                (false, &mut item.get),
                (true, &mut item.put),
                (true, &mut item.post),
                (true, &mut item.delete),
                (true, &mut item.patch),
            ];
            for (changes, op) in operations {
                let Some(op) = op.as_mut() else { continue };
                let mut add = |status: u16, description: String| {
                    op.responses
                        .responses
                        .entry(status.to_string())
                        .or_insert_with(|| error().description(description).build().into());
                };
                if let Some(openapi::RefOr::T(body)) = &op.request_body {
                    let json = body.content.contains_key("application/json");
                    add(
                        400,
                        "The body is not of the documented shape (the message says where), or \
                         a value the server does not take"
                            .into(),
                    );
                    add(413, format!("The body is larger than {max_mib} MiB"));
                    if json {
                        add(
                            415,
                            "The body is not `Content-Type: application/json`".into(),
                        );
                    }
                }
                let query = op.parameters.iter().flatten().any(|p| {
                    matches!(p, openapi::RefOr::T(p) if p.parameter_in == openapi::path::ParameterIn::Query)
                });
                if query {
                    add(400, "A query parameter is not of its type".into());
                }
                add(
                    503,
                    "The server holds as many connections as it allows; `Retry-After` says when \
                     to try again"
                        .into(),
                );
                if !public {
                    add(401, "Not logged in, or the session has ended".into());
                    if changes {
                        add(
                            403,
                            "The session's CSRF token is not in the `x-csrf-token` header".into(),
                        );
                    }
                }
                // Every error answers `ErrorBody`; every answer is described (by its status when
                // the handler said no more), as OpenAPI requires.
                for (status, response) in op.responses.responses.iter_mut() {
                    let openapi::RefOr::T(response) = response else {
                        continue;
                    };
                    let Ok(code) = status.parse::<u16>() else {
                        continue;
                    };
                    if code >= 400 && response.content.is_empty() {
                        response
                            .content
                            .insert("application/json".into(), error_body().into());
                    }
                    if response.description.is_empty() {
                        response.description = axum::http::StatusCode::from_u16(code)
                            .ok()
                            .and_then(|c| c.canonical_reason())
                            .unwrap_or("Error")
                            .to_string();
                    }
                }
            }
        }
    }
}

/// `application/json` content of an error answer.
fn error_body() -> openapi::Content {
    openapi::ContentBuilder::new()
        .schema(Some(openapi::Ref::from_schema_name("ErrorBody")))
        .build()
}

/// The document, as served and committed (pretty JSON with a final newline).
pub fn document() -> &'static str {
    static DOC: OnceLock<String> = OnceLock::new();
    DOC.get_or_init(|| {
        let mut text = ApiDoc::openapi()
            .to_pretty_json()
            .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
        text.push('\n');
        text
    })
}
