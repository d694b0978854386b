//! Building and publishing agencies.
//!
//! The agency's rows are its **draft**: what its owner edits. Publishing freezes the draft as
//! a version (its agency file, the same text `agency export` writes) that the agency's API and
//! MQTT serve until a newer one is published; earlier versions stay readable. A conversation
//! runs on the draft (a playground) or on the published versions (see
//! [`agency_core::Conversation::version`]).

use agency_core::{Agency, AgencyDraft, AgencyId, Published};
use agency_store::StoreError;
use chrono::Utc;

use crate::{Runtime, RuntimeError};

/// What a draft would be: [`Runtime::preview`].
pub struct Preview {
    pub prompts: Vec<(String, String)>,
    pub edges: Vec<agency_core::Edge>,
    /// The draft, validated: what the edges' agent ids name.
    pub agency: Agency,
}

/// An agency and the version its API serves (`None`: never published).
pub struct AgencyInfo {
    pub agency: Agency,
    pub published: Option<u32>,
}

/// The agency file of an agency: what a published version stores.
pub fn file_of(agency: &Agency) -> String {
    agency_file::to_yaml(&agency.to_draft())
}

/// A name taken by another of the owner's agencies, as a problem of the `name` field.
fn name_problem(e: StoreError) -> RuntimeError {
    match e {
        StoreError::Conflict(m) => RuntimeError::field("name", m),
        other => other.into(),
    }
}

impl Runtime {
    /// Imports an agency file: creates the agency, or replaces the draft of the owner's agency
    /// of the same name (keeping its id, so its conversations and keys stay), and publishes it
    /// — the file is the release — unless the published version is that file already.
    pub async fn save_agency(
        &self,
        draft: &AgencyDraft,
        owner: &str,
    ) -> Result<Agency, RuntimeError> {
        let id = match self.store.agency_by_name(owner, &draft.name).await? {
            Some(existing) => existing.id,
            None => AgencyId::new(),
        };
        let agency = self.validate_to_save(draft, id, owner).await?;
        self.store.save_agency(&agency).await?;
        self.agency_changed(id);
        let body = file_of(&agency);
        let current = match self.store.agency_state(id).await?.and_then(|s| s.published) {
            Some(v) => self.store.version(id, v).await?.map(|(_, b)| b),
            None => None,
        };
        if current.as_deref() != Some(body.as_str()) {
            self.store.publish(id, &body, Utc::now()).await?;
            self.agency_changed(id);
        }
        Ok(agency)
    }

    /// Creates an agency (a draft, not yet published). Its name must be free among the
    /// owner's agencies.
    pub async fn create_agency(
        &self,
        owner: &str,
        draft: &AgencyDraft,
    ) -> Result<Agency, RuntimeError> {
        // A new id: another of the owner's agencies with this name is the store's conflict.
        let agency = self.validate_to_save(draft, AgencyId::new(), owner).await?;
        self.store
            .save_agency(&agency)
            .await
            .map_err(name_problem)?;
        Ok(agency)
    }

    /// Replaces the draft of the owner's agency `id`; what is published stays as it was.
    pub async fn update_agency(
        &self,
        owner: &str,
        id: AgencyId,
        draft: &AgencyDraft,
    ) -> Result<Agency, RuntimeError> {
        self.owned(owner, id).await?;
        let agency = self.validate_to_save(draft, id, owner).await?;
        self.store
            .save_agency(&agency)
            .await
            .map_err(name_problem)?;
        self.agency_changed(id);
        Ok(agency)
    }

    /// Deletes the owner's agency with its versions, conversations and keys.
    pub async fn delete_agency(&self, owner: &str, id: AgencyId) -> Result<(), RuntimeError> {
        self.owned(owner, id).await?;
        self.store.delete_agency(id).await?;
        self.agency_changed(id);
        if let Ok(mut cache) = self.agencies.lock() {
            cache.retain(|(a, _), _| *a != id);
        }
        Ok(())
    }

    /// Publishes the draft of the owner's agency as its next version.
    pub async fn publish_agency(
        &self,
        owner: &str,
        id: AgencyId,
    ) -> Result<Published, RuntimeError> {
        let agency = self.owned(owner, id).await?;
        let published = self
            .store
            .publish(id, &file_of(&agency), Utc::now())
            .await?;
        self.agency_changed(id);
        Ok(published)
    }

    /// The owner's agency's published versions, newest first.
    pub async fn versions(
        &self,
        owner: &str,
        id: AgencyId,
    ) -> Result<Vec<Published>, RuntimeError> {
        self.owned(owner, id).await?;
        Ok(self.store.versions(id).await?)
    }

    /// One published version of the owner's agency, and its agency file.
    pub async fn version(
        &self,
        owner: &str,
        id: AgencyId,
        version: u32,
    ) -> Result<(Published, Agency, String), RuntimeError> {
        let draft = self.owned(owner, id).await?;
        let (published, body) = self.store.version(id, version).await?.ok_or_else(|| {
            RuntimeError::AgencyNotFound(format!("{} version {version}", draft.name))
        })?;
        let agency = self.parse_version(&draft, version, &body)?;
        Ok((published, agency, body))
    }

    /// Version `version` of `draft`'s agency, as it was published.
    pub(crate) async fn load_version(
        &self,
        draft: &Agency,
        version: u32,
    ) -> Result<Agency, RuntimeError> {
        let (_, body) = self
            .store
            .version(draft.id, version)
            .await?
            .ok_or_else(|| RuntimeError::NotPublished(draft.id.to_string()))?;
        self.parse_version(draft, version, &body)
    }

    fn parse_version(
        &self,
        draft: &Agency,
        version: u32,
        body: &str,
    ) -> Result<Agency, RuntimeError> {
        let damaged = |m: String| {
            RuntimeError::Invalid(format!(
                "version {version} of agency `{}` cannot be read: {m}",
                draft.name
            ))
        };
        let file =
            agency_file::AgencyFile::parse("version", body).map_err(|e| damaged(e.to_string()))?;
        // It was checked when it was published; a model no longer served fails when called.
        let mut agency = file
            .draft
            .validate(draft.id, &draft.owner, &|_| true)
            .map_err(|e| damaged(e.to_string()))?;
        agency.version = Some(version);
        Ok(agency)
    }

    /// The tools the owner's agency may give its agents, by server (see
    /// [`crate::tools::Tools::available`]).
    pub async fn available_tools(
        &self,
        owner: &str,
        id: AgencyId,
    ) -> Result<Vec<(String, Result<Vec<agency_core::Tool>, String>)>, RuntimeError> {
        let agency = self.owned(owner, id).await?;
        Ok(self.tools.available((&agency).into()).await)
    }

    /// What a draft would be (nothing is saved): each agent's system prompt, by agent name, and
    /// the edges its rules allow.
    pub fn preview(&self, owner: &str, draft: &AgencyDraft) -> Result<Preview, RuntimeError> {
        let agency = self.validate(draft, AgencyId::new(), owner)?;
        let prompts = agency
            .agents
            .iter()
            .map(|a| {
                (
                    a.name.clone(),
                    agency_core::prompt::system_prompt(&agency, a),
                )
            })
            .collect();
        Ok(Preview {
            prompts,
            edges: agency.edges(),
            agency,
        })
    }

    /// The owner's agencies (their drafts), by name, with the versions their APIs serve.
    pub async fn agencies(&self, owner: &str) -> Result<Vec<AgencyInfo>, RuntimeError> {
        Ok(self
            .store
            .list_agencies(owner)
            .await?
            .into_iter()
            .map(|(agency, state)| AgencyInfo {
                agency,
                published: state.published,
            })
            .collect())
    }

    /// The owner's agency (by id or name) with the version its API serves.
    pub async fn agency_info(
        &self,
        owner: &str,
        id_or_name: &str,
    ) -> Result<AgencyInfo, RuntimeError> {
        let agency = self.agency(owner, id_or_name).await?;
        self.with_state(agency).await
    }

    /// The agency with the version its API serves now.
    pub async fn with_state(&self, agency: Agency) -> Result<AgencyInfo, RuntimeError> {
        let published = self
            .agency_state(agency.id)
            .await?
            .and_then(|s| s.published);
        Ok(AgencyInfo { agency, published })
    }

    /// Imports `draft` for `owner` the first time a database is opened with none of theirs
    /// (`marker` names the occasion, so that deleting it later does not bring it back).
    pub async fn seed(
        &self,
        marker: &str,
        owner: &str,
        draft: &AgencyDraft,
    ) -> Result<(), RuntimeError> {
        if self.store.claim_once(marker).await? && self.store.list_agencies(owner).await?.is_empty()
        {
            self.save_agency(draft, owner).await?;
        }
        Ok(())
    }

    /// The providers the agency's models are called through: the server's, and the agency's
    /// own with their owner's keys (the agency need not be stored: `agency eval` reads files).
    pub async fn providers_of(
        &self,
        agency: &Agency,
    ) -> Result<agency_providers::Providers, RuntimeError> {
        crate::providers::build(
            &self.providers,
            &agency.providers,
            &agency.owner,
            &*self.store,
            self.master_key.as_ref(),
        )
        .await
    }

    /// The owner's agency `id` (its draft); another owner's looks as if it did not exist.
    pub async fn owned(&self, owner: &str, id: AgencyId) -> Result<Agency, RuntimeError> {
        self.store
            .agency(id)
            .await?
            .filter(|a| a.owner == owner)
            .ok_or_else(|| RuntimeError::AgencyNotFound(id.to_string()))
    }
}
