//! Building and publishing agencies.
//!
//! The agency's rows are its **draft**: what its owner edits. Publishing freezes the draft as
//! a version (its agency file, the same text `agency export` writes) that the agency's API and
//! MQTT serve until a newer one is published; earlier versions stay readable. A conversation
//! runs on the draft (a playground) or on the published versions (see
//! [`agency_core::Conversation::version`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use agency_core::{Agency, AgencyDraft, AgencyId, Published, ValidationErrors};
use agency_providers::Providers;
use agency_store::StoreError;
use chrono::Utc;

use crate::{AgencyView, Runtime, RuntimeError, providers};

/// What a draft would be: [`Agencies::preview`].
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

/// How long an agency's state (its revision and published version) read from the store is
/// trusted. This runtime forgets it at once when it changes the agency itself; a change made
/// elsewhere (the CLI on the same database, another server) is seen within this time, as a
/// key's revocation is.
const AGENCY_STATE_FOR: std::time::Duration = std::time::Duration::from_secs(1);

/// An agency as loaded at some revision (or a published version), with its roster and its providers (the server's plus
/// its own, built once so that their limits hold across conversations).
struct Cached {
    revision: i64,
    agency: Arc<Agency>,
    roster: Arc<agency_core::Roster>,
    providers: Arc<Providers>,
}

/// Agencies' states as last read. `changes` counts this runtime's own changes to agencies, so
/// that a read that started before one does not put back what it replaced.
#[derive(Default)]
struct States {
    read: HashMap<AgencyId, (std::time::Instant, agency_store::AgencyState)>,
    changes: u64,
}

/// What [`Agencies`] keeps of agencies between turns.
#[derive(Default)]
pub(crate) struct Cache {
    /// Agencies as last loaded: drafts (`None`) and published versions.
    loaded: Mutex<HashMap<(AgencyId, Option<u32>), Cached>>,
    /// Agencies' states as last read, and when (see [`AGENCY_STATE_FOR`]).
    states: Mutex<States>,
}

impl Cache {
    /// Forgets the agencies built with stored keys (of `owner`, or of everyone), so that their
    /// providers are built again, with the keys as they are now, on their next use.
    pub(crate) fn forget_keyed(&self, owner: Option<&str>) {
        if let Ok(mut loaded) = self.loaded.lock() {
            loaded.retain(|_, c| {
                c.agency.providers.is_empty() || owner.is_some_and(|o| c.agency.owner != o)
            });
        }
    }
}

/// Agencies: drafts saved and validated, versions published, and each agency as a turn runs on it (cached, see [`Cache`]).
/// Reached through [`Runtime::agencies`].
pub struct Agencies<'a> {
    pub(crate) rt: &'a Runtime,
}

impl Agencies<'_> {
    /// Imports an agency file: creates the agency, or replaces the draft of the owner's agency
    /// of the same name (keeping its id, so its conversations and keys stay), and publishes it
    /// — the file is the release — unless the published version is that file already.
    pub async fn save(&self, draft: &AgencyDraft, owner: &str) -> Result<Agency, RuntimeError> {
        let id = match self.rt.store.agency_by_name(owner, &draft.name).await? {
            Some(existing) => existing.id,
            None => AgencyId::new(),
        };
        let agency = self.validate_to_save(draft, id, owner).await?;
        self.rt.store.save_agency(&agency).await?;
        self.changed(id);
        let body = file_of(&agency);
        let current = match self
            .rt
            .store
            .agency_state(id)
            .await?
            .and_then(|s| s.published)
        {
            Some(v) => self.rt.store.version(id, v).await?.map(|(_, b)| b),
            None => None,
        };
        if current.as_deref() != Some(body.as_str()) {
            self.rt.store.publish(id, &body, Utc::now()).await?;
            self.changed(id);
        }
        Ok(agency)
    }

    /// Creates an agency (a draft, not yet published). Its name must be free among the
    /// owner's agencies.
    pub async fn create(&self, owner: &str, draft: &AgencyDraft) -> Result<Agency, RuntimeError> {
        // A new id: another of the owner's agencies with this name is the store's conflict.
        let agency = self.validate_to_save(draft, AgencyId::new(), owner).await?;
        self.rt
            .store
            .save_agency(&agency)
            .await
            .map_err(name_problem)?;
        Ok(agency)
    }

    /// Replaces the draft of the owner's agency `id`; what is published stays as it was.
    pub async fn update(
        &self,
        owner: &str,
        id: AgencyId,
        draft: &AgencyDraft,
    ) -> Result<Agency, RuntimeError> {
        self.owned(owner, id).await?;
        let agency = self.validate_to_save(draft, id, owner).await?;
        self.rt
            .store
            .save_agency(&agency)
            .await
            .map_err(name_problem)?;
        self.changed(id);
        Ok(agency)
    }

    /// Deletes the owner's agency with its versions, conversations and keys.
    pub async fn delete(&self, owner: &str, id: AgencyId) -> Result<(), RuntimeError> {
        self.owned(owner, id).await?;
        self.rt.store.delete_agency(id).await?;
        self.changed(id);
        if let Ok(mut cache) = self.rt.agency_cache.loaded.lock() {
            cache.retain(|(a, _), _| *a != id);
        }
        Ok(())
    }

    /// Publishes the draft of the owner's agency as its next version.
    pub async fn publish(&self, owner: &str, id: AgencyId) -> Result<Published, RuntimeError> {
        let agency = self.owned(owner, id).await?;
        let published = self
            .rt
            .store
            .publish(id, &file_of(&agency), Utc::now())
            .await?;
        self.changed(id);
        Ok(published)
    }

    /// The owner's agency's published versions, newest first.
    pub async fn versions(
        &self,
        owner: &str,
        id: AgencyId,
    ) -> Result<Vec<Published>, RuntimeError> {
        self.owned(owner, id).await?;
        Ok(self.rt.store.versions(id).await?)
    }

    /// One published version of the owner's agency, and its agency file.
    pub async fn version(
        &self,
        owner: &str,
        id: AgencyId,
        version: u32,
    ) -> Result<(Published, Agency, String), RuntimeError> {
        let draft = self.owned(owner, id).await?;
        let (published, body) = self.rt.store.version(id, version).await?.ok_or_else(|| {
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
            .rt
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
        Ok(self.rt.tools.available((&agency).into()).await)
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
    pub async fn list(&self, owner: &str) -> Result<Vec<AgencyInfo>, RuntimeError> {
        Ok(self
            .rt
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
    pub async fn info(&self, owner: &str, id_or_name: &str) -> Result<AgencyInfo, RuntimeError> {
        let agency = self.get(owner, id_or_name).await?;
        self.with_state(agency).await
    }

    /// The agency with the version its API serves now.
    pub async fn with_state(&self, agency: Agency) -> Result<AgencyInfo, RuntimeError> {
        let published = self.state(agency.id).await?.and_then(|s| s.published);
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
        if self.rt.store.claim_once(marker).await?
            && self.rt.store.list_agencies(owner).await?.is_empty()
        {
            self.save(draft, owner).await?;
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
            &self.rt.providers,
            &agency.providers,
            &agency.owner,
            &*self.rt.store,
            self.rt.master_key.as_ref(),
        )
        .await
    }

    /// The owner's agency `id` (its draft); another owner's looks as if it did not exist.
    pub async fn owned(&self, owner: &str, id: AgencyId) -> Result<Agency, RuntimeError> {
        self.rt
            .store
            .agency(id)
            .await?
            .filter(|a| a.owner == owner)
            .ok_or_else(|| RuntimeError::AgencyNotFound(id.to_string()))
    }

    /// Validates a draft; the errors name each bad field.
    pub fn validate(
        &self,
        draft: &AgencyDraft,
        id: AgencyId,
        owner: &str,
    ) -> Result<Agency, ValidationErrors> {
        let agency = draft.validate(id, owner, &|m| self.rt.providers.serves(m))?;
        providers::account_problems(&agency, self.rt.providers.allows_private())?;
        crate::spend::unpriced(&agency, &self.rt.providers)?;
        Ok(agency)
    }

    /// [`Agencies::validate`], and an account's providers' host names resolved: what is saved.
    async fn validate_to_save(
        &self,
        draft: &AgencyDraft,
        id: AgencyId,
        owner: &str,
    ) -> Result<Agency, RuntimeError> {
        let agency = self.validate(draft, id, owner)?;
        providers::private_hosts(&agency, self.rt.providers.allows_private()).await?;
        self.rt.tools.check(&agency).await?;
        Ok(agency)
    }

    /// An agency by id or by name.
    pub async fn get(&self, owner: &str, id_or_name: &str) -> Result<Agency, RuntimeError> {
        match id_or_name.parse::<AgencyId>() {
            Ok(id) => self.owned(owner, id).await,
            Err(_) => self
                .rt
                .store
                .agency_by_name(owner, id_or_name)
                .await?
                .ok_or_else(|| RuntimeError::AgencyNotFound(id_or_name.to_string())),
        }
    }

    /// An agency's draft by id, as it is now (cached, checked with one small read).
    pub async fn draft(&self, id: AgencyId) -> Result<Arc<Agency>, RuntimeError> {
        Ok(self.current(id, false).await?.agency)
    }

    /// The version of an agency its API serves: the latest published (cached, checked with
    /// one small read). [`RuntimeError::NotPublished`] when it was never published.
    pub async fn published(&self, id: AgencyId) -> Result<Arc<Agency>, RuntimeError> {
        Ok(self.current(id, true).await?.agency)
    }

    /// The agency's draft, or its latest published version: from the cache when it holds
    /// that revision of the draft, or that version (versions never change).
    pub(crate) async fn current(
        &self,
        id: AgencyId,
        published: bool,
    ) -> Result<AgencyView, RuntimeError> {
        let not_found = || RuntimeError::AgencyNotFound(id.to_string());
        let state = self.state(id).await?.ok_or_else(not_found)?;
        let version = match (published, state.published) {
            (false, _) => None,
            (true, Some(v)) => Some(v),
            (true, None) => return Err(RuntimeError::NotPublished(id.to_string())),
        };
        if let Ok(cache) = self.rt.agency_cache.loaded.lock()
            && let Some(c) = cache.get(&(id, version))
            && (version.is_some() || c.revision == state.revision)
        {
            return Ok(AgencyView {
                agency: c.agency.clone(),
                roster: c.roster.clone(),
                providers: c.providers.clone(),
            });
        }
        let draft = self.rt.store.agency(id).await?.ok_or_else(not_found)?;
        let agency = Arc::new(match version {
            None => draft,
            Some(v) => self.load_version(&draft, v).await?,
        });
        let roster = Arc::new(agency.roster());
        let providers = if agency.providers.is_empty() {
            self.rt.providers.clone()
        } else {
            Arc::new(self.providers_of(&agency).await?)
        };
        if let Ok(mut cache) = self.rt.agency_cache.loaded.lock() {
            cache.insert(
                (id, version),
                Cached {
                    revision: state.revision,
                    agency: agency.clone(),
                    roster: roster.clone(),
                    providers: providers.clone(),
                },
            );
        }
        Ok(AgencyView {
            agency,
            roster,
            providers,
        })
    }

    /// The agency's revision and published version: as last read, if that was less than
    /// [`AGENCY_STATE_FOR`] ago, so that a busy API does not read them on every request.
    async fn state(&self, id: AgencyId) -> Result<Option<agency_store::AgencyState>, RuntimeError> {
        let changes = {
            let Ok(states) = self.rt.agency_cache.states.lock() else {
                return Ok(self.rt.store.agency_state(id).await?);
            };
            if let Some((at, state)) = states.read.get(&id)
                && at.elapsed() < AGENCY_STATE_FOR
            {
                return Ok(Some(*state));
            }
            states.changes
        };
        let read_at = std::time::Instant::now();
        let state = self.rt.store.agency_state(id).await?;
        if let Ok(mut states) = self.rt.agency_cache.states.lock()
            && states.changes == changes
        {
            match state {
                Some(s) => states.read.insert(id, (read_at, s)),
                None => states.read.remove(&id),
            };
        }
        Ok(state)
    }

    /// Forgets what this runtime knew of the agency's state: it has just changed it.
    fn changed(&self, id: AgencyId) {
        if let Ok(mut states) = self.rt.agency_cache.states.lock() {
            states.changes = states.changes.wrapping_add(1);
            states.read.remove(&id);
        }
    }
}
