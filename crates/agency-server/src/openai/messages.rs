//! Chat messages read into a turn, as OpenAI checks them: what both APIs send (the Responses
//! API's input items are read as chat messages first).

use agency_core::{ChatMessage, Role};
use agency_runtime::api::ChatTurn;

use super::types::{self, Content};
use super::{OpenAiError, tools};

/// The messages as a conversation turn: system messages, the transcript so far (with the
/// calls of the client's tools and their results), the new messages (what follows the last
/// assistant message: the user's, and the results of its calls), and a last assistant message
/// without calls as the prefill. Tool messages are checked as OpenAI checks them: each answers
/// a call of the assistant message before it, and every call is answered before anything else.
/// A request `continuing` a stored conversation (the Responses API's `previous_response_id`)
/// need not hold a user message: the conversation has them.
pub(super) fn chat_turn(
    messages: Vec<types::ChatMessage>,
    continuing: bool,
) -> Result<ChatTurn, OpenAiError> {
    if messages.is_empty() {
        return Err(OpenAiError::invalid(
            "`messages` must hold at least one message.",
            Some("messages"),
        ));
    }
    let mut reader = Reader::default();
    for (i, m) in messages.into_iter().enumerate() {
        reader.read(i, m)?;
    }
    let Reader {
        system,
        mut rest,
        open,
    } = reader;
    if !open.is_empty() {
        return Err(unanswered(&open));
    }
    // A last assistant message is a prefill: the beginning of the answer the client wants.
    let prefill = match rest.last() {
        Some(last) if last.role == Role::Assistant => rest.pop().map(|m| m.text),
        _ => None,
    };
    if !continuing && !rest.iter().any(|m| m.role == Role::User) {
        return Err(OpenAiError::invalid(
            "`messages` must hold a user message.",
            Some("messages"),
        ));
    }
    let start = rest
        .iter()
        .rposition(|m| m.role == Role::Assistant)
        .map_or(0, |i| i + 1);
    let input = rest.split_off(start);
    if input.is_empty() {
        return Err(OpenAiError::invalid(
            "A last assistant message (a prefill) must follow the user's message, not another assistant message.",
            Some("messages"),
        ));
    }
    if input
        .iter()
        .all(|m| m.role == Role::User && m.text.trim().is_empty())
    {
        return Err(OpenAiError::invalid(
            "The user's message is empty.",
            Some("messages"),
        ));
    }
    Ok(ChatTurn {
        system: (!system.is_empty()).then(|| system.join("\n\n")),
        history: rest,
        input,
        prefill: prefill.filter(|p| !p.trim().is_empty()),
        ..ChatTurn::default()
    })
}

/// The messages read so far.
#[derive(Default)]
struct Reader {
    /// The system (and developer) messages' text.
    system: Vec<String>,
    /// Everything else, in order.
    rest: Vec<ChatMessage>,
    /// The calls of the last assistant message not answered yet: (id, name).
    open: Vec<(String, String)>,
}

impl Reader {
    /// Reads `messages[i]`.
    fn read(&mut self, i: usize, m: types::ChatMessage) -> Result<(), OpenAiError> {
        let param = format!("messages[{i}]");
        let calls = match (m.role.as_str(), m.other.get("tool_calls")) {
            ("assistant", Some(calls)) => {
                tools::history_calls(calls, &format!("{param}.tool_calls"))?
            }
            _ => Vec::new(),
        };
        let mut images = Vec::new();
        let text = match m.content {
            None if !calls.is_empty() => String::new(),
            None => {
                return Err(OpenAiError::invalid(
                    format!("{param} has no content."),
                    Some(&param),
                ));
            }
            Some(Content::Text(t)) => t,
            Some(Content::Parts(parts)) => parts
                .iter()
                .enumerate()
                .map(|(j, part)| {
                    part_text(part, &m.role, &format!("{param}.content[{j}]"), &mut images)
                })
                .collect::<Result<Vec<_>, _>>()?
                .join("\n"),
        };
        if m.role != "tool" && !self.open.is_empty() {
            return Err(unanswered(&self.open));
        }
        match m.role.as_str() {
            "system" | "developer" => self.system.push(text),
            "user" => self.rest.push(ChatMessage {
                images,
                ..ChatMessage::new(Role::User, text)
            }),
            "assistant" if calls.is_empty() => {
                self.rest.push(ChatMessage::new(Role::Assistant, text));
            }
            "assistant" => {
                self.open = calls
                    .iter()
                    .map(|c| (c.id.clone(), c.name.clone()))
                    .collect();
                self.rest.push(ChatMessage::calls(text, calls));
            }
            "tool" => {
                let id = m.other.get("tool_call_id").and_then(|v| v.as_str());
                let Some(at) = id.and_then(|id| self.open.iter().position(|(open, _)| open == id))
                else {
                    return Err(OpenAiError::invalid(
                        format!(
                            "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls' ({param}.tool_call_id)."
                        ),
                        Some(&format!("{param}.tool_call_id")),
                    ));
                };
                let (id, name) = self.open.remove(at);
                self.rest.push(ChatMessage::result(id, name, text));
            }
            other => {
                return Err(OpenAiError::invalid(
                    format!(
                        "{param}: role `{other}` is not supported (use system, developer, user, assistant or tool)."
                    ),
                    Some(&param),
                ));
            }
        }
        Ok(())
    }
}

/// The error for calls left without results.
fn unanswered(open: &[(String, String)]) -> OpenAiError {
    OpenAiError::invalid(
        format!(
            "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
            open.iter()
                .map(|(id, _)| id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Some("messages"),
    )
}

/// The longest image URL shown in full to the manager; longer ones are cut.
const MAX_IMAGE_URL: usize = 256;

/// A content part as text: a text part as it is (and an assistant's refusal), an image in a
/// user message as a short placeholder that names it in the text — `[image: URL]`, or
/// `[image: inline image]` for a `data:` URL, never copied into text (it may be megabytes) —
/// with the image itself pushed to `images` (the manager's model is sent it). Other parts
/// (audio, files) are refused by name.
fn part_text(
    part: &serde_json::Value,
    role: &str,
    param: &str,
    images: &mut Vec<String>,
) -> Result<String, OpenAiError> {
    let kind = part.get("type").and_then(|t| t.as_str());
    let field = |name: &str| part.get(name).and_then(|v| v.as_str());
    match (kind, role) {
        (Some("text"), _) => field("text").map(str::to_string).ok_or_else(|| {
            OpenAiError::invalid(format!("{param}: a text part needs `text`."), Some(param))
        }),
        (Some("refusal"), "assistant") => field("refusal").map(str::to_string).ok_or_else(|| {
            OpenAiError::invalid(
                format!("{param}: a refusal part needs `refusal`."),
                Some(param),
            )
        }),
        (Some("image_url"), "user") => {
            let image = part.get("image_url");
            let url = image
                .and_then(|i| i.get("url"))
                .or(image)
                .and_then(|u| u.as_str())
                .map(str::trim)
                .filter(|u| !u.is_empty())
                .ok_or_else(|| {
                    OpenAiError::invalid(
                        format!("{param}: an image_url part needs `image_url.url`."),
                        Some(param),
                    )
                })?;
            let scheme = url.split_once(':').map(|(s, _)| s.to_ascii_lowercase());
            if !matches!(scheme.as_deref(), Some("https" | "http" | "data")) {
                return Err(OpenAiError::invalid(
                    format!("{param}: `image_url.url` must be an https, http or data: URL."),
                    Some(param),
                ));
            }
            images.push(url.to_string());
            Ok(image_placeholder(url))
        }
        (Some(other), _) => Err(OpenAiError::invalid(
            format!(
                "{param}: `{other}` content parts are not supported in {role} messages: an agency reads text parts, and image parts in user messages."
            ),
            Some(param),
        )),
        (None, _) => Err(OpenAiError::invalid(
            format!("{param}: a content part needs a `type`."),
            Some(param),
        )),
    }
}

/// What the manager reads for an image at `url`.
fn image_placeholder(url: &str) -> String {
    if url
        .get(..5)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("data:"))
    {
        return "[image: inline image]".into();
    }
    match url.char_indices().nth(MAX_IMAGE_URL) {
        Some((cut, _)) => format!("[image: {}…]", &url[..cut]),
        None => format!("[image: {url}]"),
    }
}
