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
            budget,
        } => {
            let budgets = budget.budgets()?;
            let agency = rt.agencies().get(owner, &agency).await?;
            let (key, plain) = auth
                .create_key(&agency, &name, expires_in, rate_limit, budgets)
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
            if !key.budgets.is_none() {
                eprintln!("budgets: {}", budgets_text(&key.budgets));
            }
            println!("{}", secrecy::ExposeSecret::expose_secret(&plain));
        }
        KeysCommand::Budget {
            agency,
            name,
            budget,
        } => {
            let budgets = budget.budgets()?;
            let agency = rt.agencies().get(owner, &agency).await?;
            match auth.set_budgets(agency.id, &name, budgets).await? {
                Some(key) => println!(
                    "key `{name}` of {}: {}",
                    agency.name,
                    budgets_text(&key.budgets)
                ),
                None => bail!("{} has no unrevoked key named `{name}`", agency.name),
            }
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
                "{:<16} {:<14} {:<17} {:<17} {:<17} {:<17} BUDGET",
                "NAME", "PREFIX", "CREATED", "EXPIRES", "LAST USED", "REVOKED"
            );
            for k in keys {
                println!(
                    "{:<16} {:<14} {:<17} {:<17} {:<17} {:<17} {}",
                    k.name,
                    format!("{}…", k.prefix),
                    when(Some(k.created_at)),
                    when(k.expires_at),
                    when(k.last_used_at),
                    when(k.revoked_at),
                    spend_text(rt, &k).await?
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

/// A key's budgets as a person reads them.
fn budgets_text(b: &agency_core::KeyBudgets) -> String {
    let dollars = |v: Option<u64>| v.map(agency_core::price::format_dollars);
    match (dollars(b.usd), dollars(b.user_usd)) {
        (None, None) => "no budget".to_string(),
        (key, user) => {
            let mut parts = Vec::new();
            if let Some(k) = key {
                parts.push(format!("${k} a {}", b.period.as_str()));
            }
            if let Some(u) = user {
                parts.push(format!("${u} a {} per end user", b.period.as_str()));
            }
            parts.join(", ")
        }
    }
}

/// A key's budget and what it spent in the current period (`-` without a budget).
async fn spend_text(rt: &Runtime, k: &agency_core::ApiKey) -> anyhow::Result<String> {
    if k.budgets.is_none() {
        return Ok("-".to_string());
    }
    let (own, users) = rt.spend().of_key(k).await?;
    let start = rt.spend().period_start(k.budgets.period);
    let now = |s: &agency_runtime::spend::Spent| s.period_start == start;
    let spent = own
        .iter()
        .find(|s| now(s))
        .map(|s| s.spent)
        .unwrap_or_default();
    let users = users.iter().filter(|(_, s)| now(s)).count();
    let mut text = format!("{spent} spent of {}", budgets_text(&k.budgets));
    if k.budgets.user_usd.is_some() {
        text.push_str(&format!(" ({users} end users this period)"));
    }
    Ok(text)
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
