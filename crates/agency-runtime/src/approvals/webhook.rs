//! An agency's approval webhook: an endpoint of its owner's where each tool call that starts
//! waiting for a person is announced — a signed POST in the Standard Webhooks form
//! (`webhook-id`, `webhook-timestamp`, `webhook-signature: v1,…`), answered through the API
//! like any approval (with the agency's API key, or a person's session).
//!
//! The signing secret (`whsec_…`) is derived from the master key and the webhook's id: stored
//! nowhere, shown once when the URL is set, and new whenever it is set again. The endpoint is
//! an account's URL: public addresses only unless the operator allows others, called in the
//! background (a slow or failing endpoint never holds a turn).

use agency_core::{Agent, Approval, ApprovalWebhook};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use chrono::Utc;
use hmac::{Hmac, Mac};
use secrecy::SecretString;
use serde::Serialize;
use sha2::Sha256;

use super::Approvals;
use crate::RuntimeError;

/// The longest URL a webhook may have.
const MAX_URL: usize = 2048;

/// What the webhook is sent when a call starts waiting (`type: approval.requested`).
#[derive(Serialize)]
struct Requested<'a> {
    r#type: &'static str,
    timestamp: String,
    data: Data<'a>,
}

#[derive(Serialize)]
struct Data<'a> {
    id: String,
    agency_id: String,
    agency_name: &'a str,
    conversation_id: String,
    turn_id: String,
    agent: u32,
    agent_name: &'a str,
    /// `server/tool`.
    tool: &'a str,
    /// The call's arguments, as JSON text.
    arguments: &'a str,
    asked_at: String,
    expires_at: String,
    on_timeout: &'static str,
    edits: bool,
    /// Where the answer goes (POST, on this server): paths, the receiver knows the host.
    approve: String,
    deny: String,
}

impl Approvals<'_> {
    /// Sets the webhook of `owner`'s agency (by id or name) to `url`, replacing any: the webhook,
    /// and its new signing secret (shown this once).
    pub async fn set_webhook(
        &self,
        owner: &str,
        agency: &str,
        url: &str,
    ) -> Result<(ApprovalWebhook, SecretString), RuntimeError> {
        let agency = self.rt.agencies().get(owner, agency).await?;
        let url = url.trim();
        if url.len() > MAX_URL {
            return Err(RuntimeError::field(
                "url",
                format!("at most {MAX_URL} characters"),
            ));
        }
        let client =
            self.rt.providers().bots().ok_or_else(|| {
                RuntimeError::Invalid("this server cannot make HTTP calls".into())
            })?;
        let checked = client
            .check_endpoint(url)
            .await
            .map_err(|e| RuntimeError::field("url", e.to_string()))?;
        let hook = ApprovalWebhook {
            agency: agency.id,
            id: uuid::Uuid::now_v7(),
            url: checked.to_string(),
            created_at: Utc::now(),
        };
        let secret = self.secret(&hook)?;
        self.rt.store.put_approval_webhook(&hook).await?;
        Ok((hook, secret))
    }

    /// The webhook of `owner`'s agency, if it has one.
    pub async fn webhook(
        &self,
        owner: &str,
        agency: &str,
    ) -> Result<Option<ApprovalWebhook>, RuntimeError> {
        let agency = self.rt.agencies().get(owner, agency).await?;
        Ok(self.rt.store.approval_webhook(agency.id).await?)
    }

    /// Removes the webhook of `owner`'s agency: false when it had none.
    pub async fn delete_webhook(&self, owner: &str, agency: &str) -> Result<bool, RuntimeError> {
        let agency = self.rt.agencies().get(owner, agency).await?;
        Ok(self.rt.store.delete_approval_webhook(agency.id).await?)
    }

    /// The webhook's signing secret, `whsec_` and its key in base64 (derived, never stored).
    fn secret(&self, hook: &ApprovalWebhook) -> Result<SecretString, RuntimeError> {
        let source = self.rt.master_key().ok_or_else(|| {
            RuntimeError::Invalid(
                "this server has no master key, so it cannot sign approval webhooks".into(),
            )
        })?;
        Ok(SecretString::from(format!(
            "whsec_{}",
            STANDARD.encode(key(source, hook)?)
        )))
    }

    /// Announces `approval` (asked of `agent` in `agency`) at the agency's webhook, if it has
    /// one: in the background, retried as a provider call is; a failure is logged. Nothing is
    /// written for an agency without one.
    pub(crate) fn announce(&self, approval: &Approval, (agency, agent): (&str, &Agent)) {
        let Some(client) = self.rt.providers().bots().cloned() else {
            return;
        };
        let store = self.rt.store.clone();
        let master = self.rt.master_key().cloned();
        let (approval, agency, agent) = (approval.clone(), agency.to_string(), agent.name.clone());
        tokio::spawn(async move {
            let agency_id = approval.agency;
            let hook = match store.approval_webhook(agency_id).await {
                Ok(Some(hook)) => hook,
                Ok(None) => return,
                Err(e) => {
                    tracing::warn!(error = %e, "could not read an approval webhook");
                    return;
                }
            };
            let Some(key) = master.as_ref().and_then(|m| key(m, &hook).ok()) else {
                tracing::warn!(agency = %agency_id, "an approval webhook is set but this server has no master key to sign with");
                return;
            };
            let id = approval.id.to_string();
            let body =
                serde_json::to_value(requested(&approval, &agency, &agent)).unwrap_or_default();
            let headers = signed(&key, &id, &body);
            if let Err(e) = client.notify(&hook.url, &headers, &body).await {
                tracing::warn!(agency = %agency_id, approval = %id, error = %e, "an approval webhook failed");
            }
        });
    }
}

/// The webhook's signing key: derived from the master key, the agency and the webhook's id.
fn key(
    source: &crate::secrets::MasterKeySource,
    hook: &ApprovalWebhook,
) -> Result<[u8; 32], RuntimeError> {
    let master = crate::secrets::MasterKey::load_or_create(source)?;
    Ok(master.derive(&format!(
        "agency approval webhook\0{}\0{}",
        hook.agency, hook.id
    )))
}

fn requested<'a>(a: &'a Approval, agency: &'a str, agent: &'a str) -> Requested<'a> {
    Requested {
        r#type: "approval.requested",
        timestamp: Utc::now().to_rfc3339(),
        data: Data {
            id: a.id.to_string(),
            agency_id: a.agency.to_string(),
            agency_name: agency,
            conversation_id: a.conversation.to_string(),
            turn_id: a.turn.to_string(),
            agent: a.agent.get(),
            agent_name: agent,
            tool: &a.call.name,
            arguments: &a.call.arguments,
            asked_at: a.asked_at.to_rfc3339(),
            expires_at: a.expires_at.to_rfc3339(),
            on_timeout: a.on_timeout.as_str(),
            edits: a.edits,
            approve: format!("/api/approvals/{}/approve", a.id),
            deny: format!("/api/approvals/{}/deny", a.id),
        },
    }
}

/// The Standard Webhooks headers of `body` sent as message `id` now: its id, the time, and
/// `v1,` with the HMAC-SHA256 of `{id}.{timestamp}.{body}` in base64.
fn signed(key: &[u8; 32], id: &str, body: &serde_json::Value) -> Vec<(&'static str, String)> {
    let timestamp = Utc::now().timestamp().to_string();
    let payload = serde_json::to_string(body).unwrap_or_default();
    let signature = sign(key, &format!("{id}.{timestamp}.{payload}"));
    vec![
        ("webhook-id", id.to_string()),
        ("webhook-timestamp", timestamp),
        ("webhook-signature", format!("v1,{signature}")),
    ]
}

fn sign(key: &[u8; 32], content: &str) -> String {
    let Ok(mut mac) = <Hmac<Sha256> as Mac>::new_from_slice(key) else {
        return String::new();
    };
    mac.update(content.as_bytes());
    STANDARD.encode(mac.finalize().into_bytes())
}

/// What a receiver checks: whether `header` (`webhook-signature`) signs message `id` sent at
/// `timestamp` with `body` (the request's bytes, as text) under `secret` (`whsec_…`).
pub fn verify(secret: &str, id: &str, timestamp: &str, body: &str, header: &str) -> bool {
    let Some(key) = secret
        .strip_prefix("whsec_")
        .and_then(|k| STANDARD.decode(k).ok())
    else {
        return false;
    };
    let Ok(mut mac) = <Hmac<Sha256> as Mac>::new_from_slice(&key) else {
        return false;
    };
    mac.update(format!("{id}.{timestamp}.{body}").as_bytes());
    let expected = STANDARD.encode(mac.finalize().into_bytes());
    header
        .split(' ')
        .any(|s| s.strip_prefix("v1,") == Some(expected.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_verifies_with_the_secret_and_nothing_else() {
        let key = [7u8; 32];
        let secret = format!("whsec_{}", STANDARD.encode(key));
        let body = serde_json::json!({"type": "approval.requested", "data": {"id": "a"}});
        let headers = signed(&key, "msg_1", &body);
        let text = serde_json::to_string(&body).unwrap();
        let (ts, sig) = (&headers[1].1, &headers[2].1);
        assert!(verify(&secret, "msg_1", ts, &text, sig));
        assert!(!verify(&secret, "msg_2", ts, &text, sig), "another id");
        assert!(
            !verify(&secret, "msg_1", ts, &text.replace('a', "b"), sig),
            "another body"
        );
        let other = format!("whsec_{}", STANDARD.encode([8u8; 32]));
        assert!(!verify(&other, "msg_1", ts, &text, sig), "another secret");
    }
}
