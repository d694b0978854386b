//! API keys of agencies, provider keys, the master key.

use agency_runtime::Runtime;
use agency_runtime::secrets::MASTER_KEY_ENV;
use anyhow::{Context, bail};
use secrecy::SecretString;

use crate::cli::{KeysCommand, ProviderKeyCommand};

/// `agency keys`: an agency's API keys.
pub async fn keys(rt: &Runtime, owner: &str, command: KeysCommand) -> anyhow::Result<()> {
    let auth = rt.authenticator().await?;
    match command {
        KeysCommand::Create {
            agency,
            name,
            expires_in,
            rate_limit,
        } => {
            let agency = rt.agencies().get(owner, &agency).await?;
            let (key, plain) = auth
                .create_key(&agency, &name, expires_in, rate_limit)
                .await?;
            eprintln!(
                "created key `{}` for {} ({} requests/minute{}). It is shown this once:",
                key.name,
                agency.name,
                key.rate_limit_per_minute,
                key.expires_at
                    .map(|t| format!(", expires {}", t.format("%Y-%m-%d %H:%M:%S UTC")))
                    .unwrap_or_default()
            );
            println!("{}", secrecy::ExposeSecret::expose_secret(&plain));
        }
        KeysCommand::List { agency } => {
            let agency = rt.agencies().get(owner, &agency).await?;
            let keys = auth.keys(agency.id).await?;
            if keys.is_empty() {
                println!(
                    "no keys: `agency keys create {} --name dev` makes one",
                    agency.name
                );
            }
            let when = |t: Option<chrono::DateTime<chrono::Utc>>| {
                t.map_or_else(
                    || "-".to_string(),
                    |t| t.format("%Y-%m-%d %H:%M").to_string(),
                )
            };
            println!(
                "{:<16} {:<14} {:<17} {:<17} {:<17} REVOKED",
                "NAME", "PREFIX", "CREATED", "EXPIRES", "LAST USED"
            );
            for k in keys {
                println!(
                    "{:<16} {:<14} {:<17} {:<17} {:<17} {}",
                    k.name,
                    format!("{}…", k.prefix),
                    when(Some(k.created_at)),
                    when(k.expires_at),
                    when(k.last_used_at),
                    when(k.revoked_at)
                );
            }
        }
        KeysCommand::Revoke { agency, name } => {
            let agency = rt.agencies().get(owner, &agency).await?;
            if auth.revoke(agency.id, &name).await? {
                println!("revoked key `{name}` of {}", agency.name);
            } else {
                bail!("{} has no unrevoked key named `{name}`", agency.name);
            }
        }
    }
    Ok(())
}

/// `agency provider-key`: the operator's stored provider keys.
pub async fn provider_key(
    rt: &Runtime,
    owner: &str,
    command: &ProviderKeyCommand,
) -> anyhow::Result<()> {
    match command {
        ProviderKeyCommand::Set { name } => {
            let mut key = String::new();
            std::io::stdin()
                .read_line(&mut key)
                .context("cannot read the key from standard input")?;
            let key = SecretString::from(key.trim().to_string());
            let sealed = rt.settings().put_provider_key(owner, name, &key).await?;
            println!("stored the key for `{name}` (…{}), sealed", sealed.suffix);
        }
        ProviderKeyCommand::List => {
            let keys = rt.settings().provider_keys(owner).await?;
            if keys.is_empty() {
                println!("no stored provider keys");
            }
            for k in keys {
                println!(
                    "{:<20} …{:<6} stored {}",
                    k.provider,
                    k.suffix,
                    k.created_at.format("%Y-%m-%d %H:%M UTC")
                );
            }
        }
        ProviderKeyCommand::Delete { name } => {
            if rt.settings().delete_provider_key(owner, name).await? {
                println!("deleted the key for `{name}`");
            } else {
                bail!("no key is stored for `{name}`");
            }
        }
    }
    Ok(())
}

/// `agency master-key rotate`.
pub async fn rotate_master_key(rt: &Runtime) -> anyhow::Result<()> {
    let (n, new_key) = rt.settings().rotate_master_key().await?;
    match new_key {
        None => println!("rotated the master key; re-sealed {n} stored key(s)"),
        Some(hex) => println!(
            "re-sealed {n} stored key(s) under a new master key; set {MASTER_KEY_ENV} to it now:\n{hex}"
        ),
    }
    Ok(())
}
