//! Turning provider specs into live providers: each key from its owner's stored keys (sealed),
//! else — for the operator's own specs only — from the environment variable the spec names.
//!
//! An account's specs are untrusted (see `docs/security.md`): they name no server variable and
//! reach only public addresses unless the operator allows private ones.

use agency_core::{Agency, ProviderSpec, ValidationError, ValidationErrors};
use agency_providers::Providers;
use agency_providers::http::{Origin, net};
use agency_store::Store;
use secrecy::SecretString;

use crate::secrets::{self, MasterKeySource};
use crate::{LOCAL_OWNER, Runtime, RuntimeError};

/// Whether `owner` is the operator: the CLI's local owner, whose agency files are the server's
/// own configuration as much as `--config` is.
pub fn is_operator(owner: &str) -> bool {
    owner == LOCAL_OWNER
}

/// `base` plus the providers of `specs` (replacing those of the same name), their keys found
/// for `owner`.
pub(crate) async fn build(
    base: &Providers,
    specs: &[ProviderSpec],
    owner: &str,
    store: &dyn Store,
    master_key: Option<&MasterKeySource>,
) -> Result<Providers, RuntimeError> {
    let mut providers = base.clone();
    let origin = if is_operator(owner) {
        Origin::Operator
    } else {
        Origin::Account {
            allow_private: base.allows_private(),
        }
    };
    for spec in specs {
        let key = key_for(spec, owner, store, master_key).await?;
        let state = agency_providers::KeyState::of(spec, key.is_some());
        let provider = agency_providers::from_spec(spec, key, base.http(), origin)
            .map_err(|e| RuntimeError::Invalid(format!("provider `{}`: {e}", spec.name)))?;
        providers.insert(&spec.name, provider);
        providers.set_prices(&spec.name, &spec.prices);
        providers.describe(
            &spec.name,
            agency_providers::ProviderInfo {
                kind: Some(spec.kind),
                key: state,
                models: spec.prices.iter().map(|(m, _)| m.clone()).collect(),
            },
        );
    }
    Ok(providers)
}

async fn key_for(
    spec: &ProviderSpec,
    owner: &str,
    store: &dyn Store,
    master_key: Option<&MasterKeySource>,
) -> Result<Option<SecretString>, RuntimeError> {
    if let Some(source) = master_key
        && let Some(key) = secrets::provider_key(store, source, owner, &spec.name).await?
    {
        return Ok(Some(key));
    }
    if !is_operator(owner) {
        // Even a spec stored before accounts were refused `api_key_env` reads nothing here.
        return Ok(None);
    }
    Ok(spec
        .api_key_env
        .as_deref()
        .and_then(|var| std::env::var(var).ok())
        .filter(|k| !k.trim().is_empty())
        .map(SecretString::from))
}

/// What an account's agency may not declare, each at its field: a server variable to read a
/// key from, or a base URL on an address the server does not call for accounts, written out.
pub(crate) fn account_problems(
    agency: &Agency,
    allow_private: bool,
) -> Result<(), ValidationErrors> {
    let mut problems = Vec::new();
    for spec in account_specs(agency) {
        if spec.api_key_env.is_some() {
            problems.push(ValidationError {
                path: format!("providers.{}.api_key_env", spec.name),
                message: "an account cannot name a server variable: store the key with \
                          PUT /api/provider-keys/{provider} (Settings → Provider keys) and \
                          leave api_key_env out"
                    .into(),
            });
        }
        if let Some(url) = spec.base_url.as_deref().filter(|_| !allow_private) {
            let checked =
                net::parse_url(url, "the base URL").and_then(|url| net::refuse_literal(&url));
            if let Err(e) = checked {
                problems.push(base_url_problem(spec, e));
            }
        }
    }
    errors(problems)
}

/// The base URLs of an account's providers whose names resolve, now, to addresses the server
/// does not call for accounts. (Calls check every answer again.)
pub(crate) async fn private_hosts(
    agency: &Agency,
    allow_private: bool,
) -> Result<(), ValidationErrors> {
    let mut problems = Vec::new();
    if !allow_private {
        for spec in account_specs(agency) {
            let Some(Ok(url)) = spec
                .base_url
                .as_deref()
                .map(|u| net::parse_url(u, "the base URL"))
            else {
                continue;
            };
            if let Err(e) = net::check_url(&url).await {
                problems.push(base_url_problem(spec, e));
            }
        }
    }
    errors(problems)
}

fn account_specs(agency: &Agency) -> impl Iterator<Item = &ProviderSpec> {
    let account = !is_operator(&agency.owner);
    agency.providers.iter().filter(move |_| account)
}

fn base_url_problem(
    spec: &ProviderSpec,
    e: agency_providers::http::ProviderError,
) -> ValidationError {
    ValidationError {
        path: format!("providers.{}.base_url", spec.name),
        message: e.to_string(),
    }
}

fn errors(problems: Vec<ValidationError>) -> Result<(), ValidationErrors> {
    if problems.is_empty() {
        Ok(())
    } else {
        Err(ValidationErrors(problems))
    }
}

/// An account's settings: its stored provider keys and MCP credentials (sealed), and the master key they are sealed under.
/// Reached through [`Runtime::settings`].
pub struct Settings<'a> {
    pub(crate) rt: &'a Runtime,
}

impl Settings<'_> {
    /// Stores (or replaces) `owner`'s key for `provider`, sealed. The providers built with the
    /// key it replaces are rebuilt before their next call.
    pub async fn put_provider_key(
        &self,
        owner: &str,
        provider: &str,
        key: &SecretString,
    ) -> Result<agency_store::SealedKey, RuntimeError> {
        let source = self.rt.master_key.as_ref().ok_or_else(|| {
            RuntimeError::Invalid("this server has no master key to seal provider keys with".into())
        })?;
        let sealed =
            secrets::store_provider_key(&*self.rt.store, source, owner, provider, key).await?;
        self.rt.agency_cache.forget_keyed(Some(owner));
        Ok(sealed)
    }

    /// `owner`'s stored provider keys, sealed (what to show of them: their last characters).
    /// The server's providers as an account sees them: each with what is known of it, and
    /// whether the account stored a key of that name (which its agencies' own declaration of
    /// the provider uses: [`build`]).
    pub async fn provider_catalog(
        &self,
        owner: &str,
    ) -> Result<Vec<(String, agency_providers::ProviderInfo, bool)>, RuntimeError> {
        let stored: Vec<String> = self
            .provider_keys(owner)
            .await?
            .into_iter()
            .map(|k| k.provider)
            .collect();
        Ok(self
            .rt
            .providers
            .catalog()
            .into_iter()
            .map(|(name, info)| {
                let yours = stored.contains(&name);
                (name, info, yours)
            })
            .collect())
    }

    pub async fn provider_keys(
        &self,
        owner: &str,
    ) -> Result<Vec<agency_store::SealedKey>, RuntimeError> {
        let mut keys = self.rt.store.provider_keys(owner).await?;
        keys.retain(|k| !k.provider.starts_with(secrets::CREDENTIALS_PREFIX));
        Ok(keys)
    }

    /// Re-seals every stored key under a new master key (see [`secrets::rotate_master_key`]).
    pub async fn rotate_master_key(&self) -> Result<(usize, Option<String>), RuntimeError> {
        let source = self.rt.master_key.as_ref().ok_or_else(|| {
            RuntimeError::Invalid("this server has no master key to rotate".into())
        })?;
        let rotated = secrets::rotate_master_key(&*self.rt.store, source).await?;
        self.rt.agency_cache.forget_keyed(None);
        Ok(rotated)
    }

    /// Deletes `owner`'s key for `provider`: no call made after this sends it. False when
    /// none was stored.
    pub async fn delete_provider_key(
        &self,
        owner: &str,
        provider: &str,
    ) -> Result<bool, RuntimeError> {
        let deleted = self.rt.store.delete_provider_key(owner, provider).await?;
        self.rt.agency_cache.forget_keyed(Some(owner));
        Ok(deleted)
    }
}
