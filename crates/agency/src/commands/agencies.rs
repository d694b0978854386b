//! Agency files in and out, and the list of agencies.

use std::path::PathBuf;

use agency_file::AgencyFile;
use agency_runtime::{Runtime, RuntimeError};
use anyhow::Context;

pub async fn import(rt: &Runtime, owner: &str, path: &PathBuf) -> anyhow::Result<()> {
    let source = path.display().to_string();
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {source}"))?;
    let file = AgencyFile::parse(&source, &text)?;
    let agency = match rt.agencies().save(&file.draft, owner).await {
        Ok(a) => a,
        Err(RuntimeError::Validation(errors)) => return Err(file.locate(errors).into()),
        Err(e) => return Err(e.into()),
    };
    println!(
        "imported {} ({} agents, manager {})",
        agency.name,
        agency.agents.len(),
        agency.roster().display(Some(agency.manager))
    );
    Ok(())
}

pub async fn export(
    rt: &Runtime,
    owner: &str,
    name: &str,
    output: Option<PathBuf>,
) -> anyhow::Result<()> {
    let agency = rt.agencies().get(owner, name).await?;
    let yaml = agency_file::to_yaml(&agency.to_draft());
    match output {
        Some(path) => std::fs::write(&path, yaml)
            .with_context(|| format!("cannot write {}", path.display()))?,
        None => print!("{yaml}"),
    }
    Ok(())
}

pub async fn list(rt: &Runtime, owner: &str) -> anyhow::Result<()> {
    let agencies: Vec<_> = rt
        .agencies()
        .list(owner)
        .await?
        .into_iter()
        .map(|a| a.agency)
        .collect();
    if agencies.is_empty() {
        println!("no agencies yet: `agency import FILE` adds one");
    }
    for a in agencies {
        let names: Vec<&str> = a.agents.iter().map(|g| g.name.as_str()).collect();
        println!(
            "{:<24} {:<10} manager {:<16} agents: {}",
            a.name,
            a.protocol.as_str(),
            a.roster().display(Some(a.manager)),
            names.join(", ")
        );
    }
    Ok(())
}
