//! The OpenAPI document of the management API, made from the handlers and wire types
//! themselves (utoipa), served at `/api/openapi.json` and committed as
//! `crates/agency-server/openapi.json` (a test fails when the committed copy is stale).
//!
//! The drop-in Chat Completions endpoint is OpenAI's own API and is documented by OpenAI.

use std::sync::OnceLock;

use utoipa::OpenApi;

use crate::{conversations, manage, rooms, wire};

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
        manage::publish,
        manage::versions,
        manage::version,
        manage::export_agency,
        manage::import_agency,
        manage::list_keys,
        manage::create_key,
        manage::revoke_key,
        manage::list_provider_keys,
        manage::put_provider_key,
        manage::delete_provider_key,
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
    components(schemas(wire::Usage, wire::TraceEntry, wire::Turn))
)]
struct ApiDoc;

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
