//! `agency eval`: score bots and our agents against a real conversation (spec 003).

use agency_runtime::{LOCAL_OWNER, Runtime};
use anyhow::{Context, bail};
use secrecy::SecretString;

use crate::cli::EvalArgs;

/// `agency eval`: the contestants asked every case, their answers scored with the embedder.
pub async fn run(rt: &Runtime, run: EvalArgs) -> anyhow::Result<()> {
    let embedder = embedder(&run)?;
    let embedder = &*embedder;
    let source = run.transcript.display().to_string();
    let text = std::fs::read_to_string(&run.transcript)
        .with_context(|| format!("cannot read the transcript {source}"))?;
    let transcript = agency_eval::transcript::parse(&source, &text)?;
    let Some(person) = transcript.user(&run.person).cloned() else {
        let names: Vec<String> = transcript
            .users
            .iter()
            .map(|u| format!("{} ({})", u.username, u.id))
            .collect();
        bail!(
            "no user `{}` in {source}; its users are {}",
            run.person,
            names.join(", ")
        );
    };
    if run.bots.is_empty() && run.agents.is_empty() {
        bail!("nothing to evaluate: give --bot URL or --agent AGENCY:AGENT (each may repeat)");
    }
    let mut contestants = Vec::new();
    // Evaluation calls the user's own bots, which often run on this machine.
    let client =
        agency_providers::bot::BotClient::new(agency_providers::bot::default_settings(), true)?;
    let key = SecretString::from(run.bot_key.unwrap_or_default());
    for bot in &run.bots {
        let (label, url) = match bot.split_once('=') {
            Some((label, url)) if !label.contains("://") => (label.to_string(), url.to_string()),
            _ => (bot.clone(), bot.clone()),
        };
        agency_providers::bot::parse_endpoint(&url)
            .map_err(|e| anyhow::anyhow!("--bot {bot}: {e}"))?;
        contestants.push(agency_eval::Contestant::Endpoint {
            label,
            url,
            key: key.clone(),
            client: client.clone(),
        });
    }
    for spec in &run.agents {
        contestants.push(eval_agent(rt, spec).await?);
    }
    let bar = agency_eval::Bar::new();
    let cards = agency_eval::evaluate(&transcript, &person, &contestants, embedder, &bar).await?;
    if run.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&agency_eval::report::json(&transcript, &person, &cards))?
        );
    } else {
        print!(
            "{}",
            agency_eval::report::table(&transcript, &person, &cards)
        );
    }
    if let Some(path) = run.html {
        std::fs::write(
            &path,
            agency_eval::report::html(&transcript, &person, &cards),
        )
        .with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

/// `AGENCY:AGENT` as a contestant: the agent's model, with its role and instructions.
async fn eval_agent(rt: &Runtime, spec: &str) -> anyhow::Result<agency_eval::Contestant> {
    let Some((agency_ref, agent_name)) = spec.rsplit_once(':') else {
        bail!("--agent {spec}: write AGENCY:AGENT, e.g. examples/studio.yaml:reviewer");
    };
    let path = std::path::Path::new(agency_ref);
    let agency = if path.is_file() {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("cannot read {agency_ref}"))?;
        let file = agency_file::AgencyFile::parse(agency_ref, &text)?;
        file.draft
            .validate(agency_core::AgencyId::new(), LOCAL_OWNER, &|_| true)
            .map_err(|e| file.locate(e))?
    } else {
        rt.agencies().get(LOCAL_OWNER, agency_ref).await?
    };
    let agent = agency
        .agents
        .iter()
        .find(|a| a.name == agent_name || a.handle.as_deref() == Some(agent_name))
        .ok_or_else(|| anyhow::anyhow!("agency `{}` has no agent `{agent_name}`", agency.name))?;
    let providers = rt.agencies().providers_of(&agency).await?;
    let answerer = providers
        .resolve(&agent.model)
        .ok_or_else(|| anyhow::anyhow!("no provider serves `{}`", agent.model))?;
    let mut instructions = String::new();
    if let Some(role) = &agent.role {
        instructions.push_str(&format!("Your role: {role}\n"));
    }
    for block in &agent.blocks {
        if let agency_core::Block::Text(t) = block {
            instructions.push_str(t);
            instructions.push('\n');
        }
    }
    Ok(agency_eval::Contestant::Agent {
        label: spec.to_string(),
        instructions,
        model: agent.model.clone(),
        answerer,
    })
}

/// The embeddings endpoint asked for, else the local model.
fn embedder(run: &EvalArgs) -> anyhow::Result<Box<dyn agency_eval::Embedder>> {
    Ok(match &run.embeddings_url {
        Some(base_url) => Box::new(agency_eval::embed::OpenAiEmbeddings {
            base_url: base_url.clone(),
            model: run.embeddings_model.clone(),
            key: std::env::var("AGENCY_EMBEDDINGS_KEY")
                .ok()
                .filter(|k| !k.is_empty())
                .map(SecretString::from),
            client: reqwest::Client::new(),
        }),
        None => {
            let Some(dir) = &run.model_dir else {
                bail!("no embeddings: {}", agency_eval::embed::INSTALL);
            };
            Box::new(agency_eval::embed::LocalModel::load(dir)?)
        }
    })
}
