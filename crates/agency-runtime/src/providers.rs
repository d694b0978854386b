//! Turning provider specs into live providers: each key from its owner's stored keys (sealed),
//! else from the environment variable the spec names.

use agency_core::ProviderSpec;
use agency_providers::Providers;
use agency_store::Store;
use secrecy::SecretString;

use crate::RuntimeError;
use crate::secrets::{self, MasterKeySource};

/// `base` plus the providers of `specs` (replacing those of the same name), their keys found
/// for `owner`.
pub async fn build(
    base: &Providers,
    specs: &[ProviderSpec],
    owner: &str,
    store: &dyn Store,
    master_key: Option<&MasterKeySource>,
) -> Result<Providers, RuntimeError> {
    let mut providers = base.clone();
    for spec in specs {
        let key = key_for(spec, owner, store, master_key).await?;
        let provider = agency_providers::from_spec(spec, key)
            .map_err(|e| RuntimeError::Invalid(format!("provider `{}`: {e}", spec.name)))?;
        providers.insert(&spec.name, provider);
        providers.set_prices(&spec.name, &spec.prices);
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
    Ok(spec
        .api_key_env
        .as_deref()
        .and_then(|var| std::env::var(var).ok())
        .filter(|k| !k.trim().is_empty())
        .map(SecretString::from))
}
