//! Chat Completions over conversations. The API is stateless — every request resends the
//! history — while an agency's agents keep their own contexts. A request whose earlier messages
//! equal the visible transcript (the client's system message, user messages and answers) of
//! one of its key's conversations continues that conversation; any other starts a new one.

use std::sync::Arc;

use agency_core::{Agency, ApiKey, ConversationId, Role};
use sha2::{Digest, Sha256};

use crate::{Runtime, RuntimeError, TurnOutcome};

/// One Chat Completions request, as the conversation sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChatTurn {
    /// The client's system messages, joined: appended to the manager's system prompt.
    pub system: Option<String>,
    /// The visible transcript before the new message: user messages and answers, in order.
    pub history: Vec<(Role, String)>,
    /// The new user messages, as sent (usually one): the manager gets them joined.
    pub input: Vec<String>,
    /// A conversation the client named (`x-agency-conversation`); its history is then the
    /// server's.
    pub conversation: Option<ConversationId>,
}

/// A stable digest of a visible transcript.
pub fn transcript_hash(system: Option<&str>, turns: &[(Role, String)]) -> String {
    let mut h = Sha256::new();
    let mut field = |s: &str| {
        h.update((s.len() as u64).to_be_bytes());
        h.update(s.as_bytes());
    };
    field(system.unwrap_or(""));
    for (role, text) in turns {
        field(role.as_str());
        field(text);
    }
    crate::hex::encode(&h.finalize())
}

impl Runtime {
    /// The conversation a request continues (or names), or a new one for it.
    pub async fn api_conversation(
        &self,
        key: &ApiKey,
        agency: &Agency,
        turn: &ChatTurn,
    ) -> Result<ConversationId, RuntimeError> {
        let system = turn.system.as_deref();
        if let Some(id) = turn.conversation {
            return match self.store.conversation(id).await? {
                Some(c) if c.agency_id == agency.id => Ok(id),
                _ => Err(RuntimeError::ConversationNotFound(id)),
            };
        }
        if !turn.history.is_empty()
            && let Some(id) = self
                .store
                .api_thread(key.id, &transcript_hash(system, &turn.history))
                .await?
        {
            return Ok(id);
        }
        Ok(self.start_conversation_with(agency, system).await?.id)
    }

    /// Runs the request's turn in `conversation` and remembers the transcript, so that the
    /// next request continues it.
    pub async fn api_turn(
        self: &Arc<Self>,
        key: &ApiKey,
        conversation: ConversationId,
        turn: ChatTurn,
        answer: Option<tokio::sync::mpsc::UnboundedSender<String>>,
    ) -> Result<TurnOutcome, RuntimeError> {
        let out = self
            .send_streaming(conversation, turn.input.join("\n\n"), answer)
            .await?;
        // Named by its id, the conversation's transcript is the server's, not the request's.
        let mut after = if turn.conversation.is_some() && turn.history.is_empty() {
            self.visible_transcript(conversation, out.turn_id).await?
        } else {
            turn.history
        };
        after.extend(turn.input.into_iter().map(|text| (Role::User, text)));
        after.push((Role::Assistant, out.answer.clone()));
        self.store
            .put_api_thread(
                key.id,
                &transcript_hash(turn.system.as_deref(), &after),
                conversation,
            )
            .await?;
        Ok(out)
    }

    /// The user's messages and the answers of the conversation, before `turn`.
    async fn visible_transcript(
        &self,
        conversation: ConversationId,
        turn: agency_core::TurnId,
    ) -> Result<Vec<(Role, String)>, RuntimeError> {
        Ok(self
            .store
            .messages(conversation)
            .await?
            .into_iter()
            .filter(|m| m.turn_id != Some(turn))
            .filter_map(|m| match m.kind {
                agency_core::MessageKind::Input => Some((Role::User, m.text)),
                agency_core::MessageKind::Answer => Some((Role::Assistant, m.text)),
                _ => None,
            })
            .collect())
    }

    /// Both: one Chat Completions request.
    pub async fn chat_completion(
        self: &Arc<Self>,
        key: &ApiKey,
        agency: &Agency,
        turn: ChatTurn,
    ) -> Result<TurnOutcome, RuntimeError> {
        let conversation = self.api_conversation(key, agency, &turn).await?;
        self.api_turn(key, conversation, turn, None).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_tell_transcripts_apart() {
        let t = |pairs: &[(Role, &str)]| {
            pairs
                .iter()
                .map(|(r, s)| (*r, s.to_string()))
                .collect::<Vec<_>>()
        };
        let a = transcript_hash(None, &t(&[(Role::User, "hi"), (Role::Assistant, "hello")]));
        assert_eq!(
            a,
            transcript_hash(None, &t(&[(Role::User, "hi"), (Role::Assistant, "hello")]))
        );
        assert_ne!(
            a,
            transcript_hash(
                Some("be brief"),
                &t(&[(Role::User, "hi"), (Role::Assistant, "hello")])
            )
        );
        assert_ne!(
            a,
            transcript_hash(None, &t(&[(Role::User, "hih"), (Role::Assistant, "ello")])),
            "fields are delimited"
        );
        assert_ne!(
            a,
            transcript_hash(None, &t(&[(Role::Assistant, "hi"), (Role::User, "hello")]))
        );
    }
}
