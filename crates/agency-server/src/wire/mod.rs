//! The JSON this API speaks, converted from the domain explicitly: what every answer shares
//! (errors, checked strings) here, each area's beside the others in `wire/`.

mod approvals;
mod conversations;
mod manage;
mod rooms;

pub use approvals::*;
pub use conversations::*;
pub use manage::*;
pub use rooms::*;

use serde::Serialize;
use utoipa::ToSchema;

/// Schemas of the strings the server checks, saying what it takes (`schema_with`): a client
/// that keeps to the document is not refused. Where a rule cannot be said exactly, the schema
/// says less than the server takes, never more (a participant's name: ASCII letters only).
pub(crate) mod text {
    use utoipa::openapi::schema::{KnownFormat, Object, ObjectBuilder, SchemaFormat, Type};

    /// Some character that is not white space, as Rust's `trim` sees it (with U+0085, which
    /// `\s` does not mean the same in every regex dialect, so the class is spelled out).
    const NOT_BLANK: &str =
        r"[^\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]";
    /// Not blank, and no control character (`char::is_control`) anywhere.
    const NAME: &str = r"^[^\x00-\x1f\x7f-\x9f]*[^\x00-\x20\x7f-\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000][^\x00-\x1f\x7f-\x9f]*$";
    /// A room participant's name: a letter, then letters, digits, `_`, `-` or `.`.
    const HANDLE: &str = r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$";

    fn string(nullable: bool) -> ObjectBuilder {
        if nullable {
            ObjectBuilder::new().schema_type(
                [Type::String, Type::Null]
                    .into_iter()
                    .collect::<utoipa::openapi::schema::SchemaType>(),
            )
        } else {
            ObjectBuilder::new().schema_type(Type::String)
        }
    }

    fn not_blank(max: usize, description: &str) -> Object {
        string(false)
            .pattern(Some(NOT_BLANK))
            .max_length(Some(max))
            .description(Some(description))
            .build()
    }

    fn name(max: usize, description: &str) -> Object {
        string(false)
            .pattern(Some(NAME))
            .max_length(Some(max))
            .description(Some(description))
            .build()
    }

    fn one_of(nullable: bool, values: &[&str], description: &str) -> Object {
        let mut values: Vec<serde_json::Value> = values.iter().map(|v| (*v).into()).collect();
        if nullable {
            values.push(serde_json::Value::Null);
        }
        string(nullable)
            .enum_values(Some(values))
            .description(Some(description))
            .build()
    }

    pub fn email() -> Object {
        string(false)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Email)))
            .max_length(Some(254))
            .build()
    }

    pub fn password() -> Object {
        string(false)
            .min_length(Some(agency_core::account::PASSWORD_MIN))
            .max_length(Some(agency_core::account::PASSWORD_MAX))
            .description(Some("Sign-up and new passwords: 8 to 1024 characters."))
            .build()
    }

    pub fn key_name() -> Object {
        name(
            64,
            "The key's name among the agency's keys, e.g. `prod`: 1 to 64 characters.",
        )
    }

    pub fn expires_in() -> Object {
        string(true)
            .pattern(Some(r"^0*[1-9][0-9]{0,3}[smhdw]$"))
            .description(Some(
                "How long it lasts: a number and a unit (`s`, `m`, `h`, `d`, `w`), e.g. `15m`, \
                 `2h`, `30d`, `1w`; none: until revoked.",
            ))
            .build()
    }

    pub fn turn_text() -> Object {
        string(false)
            .pattern(Some(NOT_BLANK))
            .description(Some("The user's message to the manager: not blank."))
            .build()
    }

    /// Header names are HTTP tokens, values visible ASCII (and spaces, tabs): what a header
    /// can carry. (That the MCP client's own headers are refused, JSON Schema cannot say.)
    pub fn mcp_headers() -> Object {
        let value = string(false)
            .pattern(Some(r"^[\t\x20-\x7E]+$"))
            .max_length(Some(agency_runtime::tools::MAX_VALUE_BYTES))
            .description(Some("The header's value."))
            .build();
        let name = string(false)
            .pattern(Some(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$"))
            .max_length(Some(agency_runtime::tools::MAX_NAME_BYTES))
            .build();
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .property_names(Some(name))
            .additional_properties(Some(utoipa::openapi::schema::AdditionalProperties::RefOr(
                utoipa::openapi::RefOr::T(utoipa::openapi::Schema::Object(value)),
            )))
            .min_properties(Some(1))
            .max_properties(Some(agency_runtime::tools::MAX_HEADERS))
            .description(Some("Header → value, sent on every request to the server."))
            .build()
    }

    pub fn provider_key() -> Object {
        not_blank(4096, "The provider's API key.")
    }

    pub fn on() -> Object {
        one_of(
            true,
            &["draft", "published"],
            "`draft` (the playground's default) or `published`.",
        )
    }

    pub fn room_name() -> Object {
        not_blank(100, "1 to 100 characters.")
    }

    pub fn room_message() -> Object {
        not_blank(
            agency_core::room::MAX_MESSAGE_CHARS,
            "At most 5,000 characters, not blank. `@name` tags an agent; a command \
             (`/register`, `/bots`, `/unregister`, `/help`) goes to the room's utility bot.",
        )
    }

    pub fn id(nullable: bool, description: &str) -> Object {
        string(nullable)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Uuid)))
            .description(Some(description))
            .build()
    }

    pub fn reply_to() -> Object {
        id(
            true,
            "The id of the message this one replies to: its author is asked to answer.",
        )
    }

    pub fn role_id() -> Object {
        id(
            true,
            "A saved role's id (`/api/definitions`), instead of `role`.",
        )
    }

    pub fn personality_id() -> Object {
        id(true, "A saved personality's id, instead of `personality`.")
    }

    pub fn handle() -> Object {
        string(false)
            .pattern(Some(HANDLE))
            .description(Some(
                "What @mentions and tags name: a letter, then letters, digits, `_`, `-` or `.` \
                 (at most 64).",
            ))
            .build()
    }

    pub fn definition_kind() -> Object {
        one_of(false, &["role", "personality"], "`role` or `personality`.")
    }

    pub fn definition_name() -> Object {
        name(
            64,
            "Unique among your definitions of its kind: 1 to 64 characters.",
        )
    }

    pub fn definition_text() -> Object {
        not_blank(
            agency_core::room::MAX_DEFINITION_CHARS,
            "At most 4,000 characters, not blank.",
        )
    }
}

/// Every error of this API: `{"error": {"message", "status", "fields"?}}`.
#[derive(Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Serialize, ToSchema)]
pub struct ErrorDetail {
    pub message: String,
    /// The HTTP status, again.
    pub status: u16,
    /// Each invalid field by its path (`agents[1].rules[0].send_to`), when the request's fields
    /// were read and some are wrong.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fields: Option<Vec<FieldError>>,
}

#[derive(Serialize, ToSchema)]
pub struct FieldError {
    pub path: String,
    pub message: String,
}
