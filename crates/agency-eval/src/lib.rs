//! `agency eval` (spec 003): scores bots — webhook endpoints or our agents — against a real
//! conversation. For each reply of the person a bot emulates, the bot is given the
//! conversation up to that reply; its answer is embedded beside the original, and their
//! cosine similarity is the turn's score. The pure parts (checking the transcript, choosing
//! the cases, summing up) are `agency_core::eval`; this crate reads transcripts, calls bots,
//! embeds (an OpenAI-compatible `/embeddings` endpoint, or all-MiniLM-L6-v2 run locally with
//! candle) and writes the report (a table, JSON, an HTML page with a chart).

pub mod bots;
pub mod embed;
pub mod report;
pub mod transcript;

use agency_core::eval::{Scorecard, Transcript, TranscriptUser, Turn, cosine};

pub use bots::Contestant;
pub use embed::Embedder;

/// Why an evaluation could not run.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// The transcript is not valid: every problem, each with its place.
    #[error("the transcript is not valid:\n  {}", .0.join("\n  "))]
    Transcript(Vec<String>),
    #[error("{0}")]
    Invalid(String),
    #[error("embeddings: {0}")]
    Embeddings(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Told as each case is done (for a progress bar).
pub trait Progress: Send + Sync {
    fn start(&self, total: u64);
    fn done(&self, bot: &str);
    fn finish(&self);
}

/// No progress shown.
pub struct Quiet;

impl Progress for Quiet {
    fn start(&self, _: u64) {}
    fn done(&self, _: &str) {}
    fn finish(&self) {}
}

/// Evaluates every contestant on every reply of `person` in `transcript`. A bot that fails a
/// case scores 0 on it (its error is kept in the report).
pub async fn evaluate(
    transcript: &Transcript,
    person: &TranscriptUser,
    contestants: &[Contestant],
    embedder: &dyn Embedder,
    progress: &dyn Progress,
) -> Result<Vec<Scorecard>, EvalError> {
    let problems = transcript.problems();
    if !problems.is_empty() {
        return Err(EvalError::Transcript(problems));
    }
    let cases = transcript.cases(person).map_err(EvalError::Invalid)?;
    progress.start((cases.len() * contestants.len()) as u64);
    let originals: Vec<String> = cases
        .iter()
        .map(|&i| transcript.messages[i].text.clone())
        .collect();
    let original_vectors = embedder.embed(&originals).await?;
    let mut cards = Vec::new();
    for c in contestants {
        let mut answers = Vec::new();
        for &i in &cases {
            answers.push(c.answer(transcript, person, i).await);
            progress.done(c.label());
        }
        let texts: Vec<String> = answers
            .iter()
            .filter_map(|a| a.as_ref().ok().cloned())
            .collect();
        let mut vectors = embedder.embed(&texts).await?.into_iter();
        let turns = cases
            .iter()
            .zip(answers)
            .zip(&original_vectors)
            .map(|((&message, answer), original)| {
                let score = match &answer {
                    Ok(_) => vectors
                        .next()
                        .map_or(0.0, |v| cosine(&v, original).max(0.0)),
                    Err(_) => 0.0,
                };
                Turn {
                    message,
                    answer,
                    score,
                }
            })
            .collect();
        cards.push(Scorecard {
            bot: c.label().to_string(),
            turns,
        });
    }
    progress.finish();
    Ok(cards)
}

/// A progress bar on standard error (drawn only when it is a terminal).
pub struct Bar(indicatif::ProgressBar);

impl Bar {
    pub fn new() -> Self {
        let bar = indicatif::ProgressBar::new(0);
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{spinner} {bar:30} {pos}/{len} answers ({msg}) {elapsed}",
        ) {
            bar.set_style(style);
        }
        Self(bar)
    }
}

impl Default for Bar {
    fn default() -> Self {
        Self::new()
    }
}

impl Progress for Bar {
    fn start(&self, total: u64) {
        self.0.set_length(total);
    }
    fn done(&self, bot: &str) {
        self.0.set_message(bot.to_string());
        self.0.inc(1);
    }
    fn finish(&self) {
        self.0.finish_and_clear();
    }
}
