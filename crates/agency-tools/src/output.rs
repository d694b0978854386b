//! A tool's result as the text an agent reads: text blocks joined, other content described in
//! a line, structured content when there is no text, clipped to what a context keeps.

use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};

/// A tool call's outcome, as it goes into the caller's context.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolOutput {
    /// At most [`agency_core::tool::MAX_RESULT_CHARS`] characters (and a line saying so when
    /// cut).
    pub text: String,
    /// The call failed: the tool said so, or it could not be made. The text says why.
    pub is_error: bool,
}

impl ToolOutput {
    pub fn ok(text: impl Into<String>) -> Self {
        Self {
            text: agency_core::tool::clip_result(text.into()),
            is_error: false,
        }
    }

    pub fn error(text: impl Into<String>) -> Self {
        Self {
            text: agency_core::tool::clip_result(text.into()),
            is_error: true,
        }
    }
}

/// The output of a result the server sent.
pub fn from_result(result: CallToolResult) -> ToolOutput {
    let is_error = result.is_error.unwrap_or(false);
    let mut parts: Vec<String> = result.content.iter().map(describe).collect();
    let has_text = result
        .content
        .iter()
        .any(|c| matches!(c, ContentBlock::Text(_)));
    if !has_text && let Some(structured) = &result.structured_content {
        parts.insert(0, structured.to_string());
    }
    let mut text = parts.join("\n");
    if text.is_empty() {
        text = if is_error {
            "the tool failed and said nothing more".into()
        } else {
            "(the tool returned nothing)".into()
        };
    }
    ToolOutput {
        text: agency_core::tool::clip_result(text),
        is_error,
    }
}

fn describe(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(t) => t.text.clone(),
        ContentBlock::Image(i) => format!("[image {}, {} bytes]", i.mime_type, b64_len(&i.data)),
        ContentBlock::Audio(a) => format!("[audio {}, {} bytes]", a.mime_type, b64_len(&a.data)),
        ContentBlock::Resource(r) => match &r.resource {
            ResourceContents::TextResourceContents { uri, text, .. } => {
                format!("[resource {uri}]\n{text}")
            }
            ResourceContents::BlobResourceContents {
                uri,
                mime_type,
                blob,
                ..
            } => format!(
                "[resource {uri}, {}, {} bytes]",
                mime_type.as_deref().unwrap_or("binary"),
                b64_len(blob)
            ),
            _ => "[a resource of a kind this client does not read]".into(),
        },
        ContentBlock::ResourceLink(link) => {
            let mut s = format!("[link to resource {}", link.uri);
            if let Some(mime) = &link.mime_type {
                s.push_str(&format!(", {mime}"));
            }
            if let Some(d) = link.description.as_deref().filter(|d| !d.is_empty()) {
                s.push_str(&format!(": {d}"));
            }
            s.push(']');
            s
        }
        // A kind of content newer than this client.
        _ => "[content of a kind this client does not read]".into(),
    }
}

/// Bytes encoded by base64 text of this length.
fn b64_len(data: &str) -> usize {
    let n = data.trim_end().trim_end_matches('=').len();
    n / 4 * 3
        + match n % 4 {
            2 => 1,
            3 => 2,
            _ => 0,
        }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{EmbeddedResource, ImageContent, TextContent};

    fn result(content: Vec<ContentBlock>) -> CallToolResult {
        let mut r = CallToolResult::default();
        r.content = content;
        r
    }

    #[test]
    fn text_blocks_are_joined_and_other_content_described() {
        let out = from_result(result(vec![
            ContentBlock::Text(TextContent::new("first")),
            ContentBlock::Image(ImageContent::new("aGVsbG8=", "image/png")),
            ContentBlock::Resource(EmbeddedResource::new(ResourceContents::text(
                "inside",
                "file:///a.txt",
            ))),
            ContentBlock::Text(TextContent::new("last")),
        ]));
        assert_eq!(
            out.text,
            "first\n[image image/png, 5 bytes]\n[resource file:///a.txt]\ninside\nlast"
        );
        assert!(!out.is_error);
    }

    #[test]
    fn structured_content_stands_in_for_missing_text() {
        let mut r = result(vec![]);
        r.structured_content = Some(serde_json::json!({"sum": 3}));
        assert_eq!(from_result(r).text, r#"{"sum":3}"#);

        let mut r = result(vec![ContentBlock::Text(TextContent::new("3"))]);
        r.structured_content = Some(serde_json::json!({"sum": 3}));
        assert_eq!(from_result(r).text, "3");
    }

    #[test]
    fn errors_and_empty_results_say_so() {
        let mut r = result(vec![]);
        r.is_error = Some(true);
        let out = from_result(r);
        assert!(out.is_error);
        assert_eq!(out.text, "the tool failed and said nothing more");
        assert_eq!(
            from_result(result(vec![])).text,
            "(the tool returned nothing)"
        );
    }

    #[test]
    fn base64_lengths() {
        assert_eq!(b64_len(""), 0);
        assert_eq!(b64_len("aA=="), 1);
        assert_eq!(b64_len("aGk="), 2);
        assert_eq!(b64_len("aGVsbG8="), 5);
        assert_eq!(b64_len("aGVsbG8h"), 6);
        assert_eq!(b64_len("aGVsbG8"), 5); // unpadded
    }

    #[test]
    fn long_results_are_clipped() {
        let long = "x".repeat(agency_core::tool::MAX_RESULT_CHARS + 10);
        let out = from_result(result(vec![ContentBlock::Text(TextContent::new(long))]));
        assert!(out.text.ends_with("characters]"));
    }
}
