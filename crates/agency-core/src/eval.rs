//! Evaluating a bot against a real conversation (spec 003): for each reply of the person the
//! bot emulates, the bot is given the conversation up to that reply, and its answer is
//! compared with what the person really said, by the cosine similarity of their embeddings.
//! This module checks transcripts, picks the cases and sums up the scores; the IO (calling
//! bots, embedding) is the eval crate's.

use std::collections::HashSet;

/// A conversation as recorded: who took part, and what they said, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transcript {
    pub users: Vec<TranscriptUser>,
    pub messages: Vec<TranscriptMessage>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TranscriptUser {
    pub id: String,
    pub username: String,
}

/// A message of the spec: `from` is a user's id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TranscriptMessage {
    pub from: String,
    pub tagged: Vec<String>,
    pub id: String,
    pub text: String,
    pub timestamp: String,
}

impl Transcript {
    /// Every problem, each naming where it is (`messages[3].from: ...`).
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut users = HashSet::new();
        for (i, u) in self.users.iter().enumerate() {
            if u.id.trim().is_empty() || u.username.trim().is_empty() {
                out.push(format!("users[{i}]: a user has an `id` and a `username`"));
            } else if !users.insert(u.id.as_str()) {
                out.push(format!("users[{i}].id: `{}` is listed twice", u.id));
            }
        }
        if self.messages.is_empty() {
            out.push("messages: the transcript has no messages".into());
        }
        let mut ids = HashSet::new();
        for (i, m) in self.messages.iter().enumerate() {
            if !users.contains(m.from.as_str()) {
                out.push(format!(
                    "messages[{i}].from: `{}` is not one of the transcript's users",
                    m.from
                ));
            }
            if m.id.trim().is_empty() {
                out.push(format!("messages[{i}].id: a message has an id"));
            } else if !ids.insert(m.id.as_str()) {
                out.push(format!("messages[{i}].id: `{}` is used twice", m.id));
            }
            if m.text.trim().is_empty() {
                out.push(format!("messages[{i}].text: the message is empty"));
            }
            for t in &m.tagged {
                if !users.contains(t.as_str()) {
                    out.push(format!(
                        "messages[{i}].tagged: `{t}` is not one of the transcript's users"
                    ));
                }
            }
        }
        out
    }

    /// The user `who` names: an id, or a username (without regard to case, `@` allowed).
    pub fn user(&self, who: &str) -> Option<&TranscriptUser> {
        let who = who.trim().trim_start_matches('@');
        self.users.iter().find(|u| u.id == who).or_else(|| {
            self.users
                .iter()
                .find(|u| u.username.eq_ignore_ascii_case(who))
        })
    }

    /// The cases for emulating `person`: every message of theirs with something before it,
    /// by its index. An error when the person never replies.
    pub fn cases(&self, person: &TranscriptUser) -> Result<Vec<usize>, String> {
        let cases: Vec<usize> = self
            .messages
            .iter()
            .enumerate()
            .skip(1)
            .filter(|(_, m)| m.from == person.id)
            .map(|(i, _)| i)
            .collect();
        if cases.is_empty() {
            Err(format!(
                "@{} never answers anyone in this transcript: there is nothing to compare with",
                person.username
            ))
        } else {
            Ok(cases)
        }
    }
}

/// The cosine similarity of two vectors: 1 for the same direction, 0 for unrelated, and 0
/// when either is all zeros or they differ in length.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() || a.is_empty() {
        return 0.0;
    }
    let (mut dot, mut na, mut nb) = (0f64, 0f64, 0f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (f64::from(*x), f64::from(*y));
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        return 0.0;
    }
    (dot / (na.sqrt() * nb.sqrt())) as f32
}

/// One bot's answer to one case, and how close it came.
#[derive(Clone, Debug, PartialEq)]
pub struct Turn {
    /// The index of the person's reply in the transcript.
    pub message: usize,
    /// The bot's answer, or why it gave none.
    pub answer: Result<String, String>,
    /// The cosine similarity with the original; 0 when the bot failed.
    pub score: f32,
}

/// How one bot did.
#[derive(Clone, Debug, PartialEq)]
pub struct Scorecard {
    pub bot: String,
    pub turns: Vec<Turn>,
}

impl Scorecard {
    /// The mean score over every case (a failed case scores 0).
    pub fn mean(&self) -> f32 {
        if self.turns.is_empty() {
            return 0.0;
        }
        let sum: f64 = self.turns.iter().map(|t| f64::from(t.score)).sum();
        (sum / self.turns.len() as f64) as f32
    }

    pub fn best(&self) -> Option<&Turn> {
        self.turns.iter().max_by(|a, b| a.score.total_cmp(&b.score))
    }

    pub fn worst(&self) -> Option<&Turn> {
        self.turns.iter().min_by(|a, b| a.score.total_cmp(&b.score))
    }

    pub fn failures(&self) -> usize {
        self.turns.iter().filter(|t| t.answer.is_err()).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(id: &str, name: &str) -> TranscriptUser {
        TranscriptUser {
            id: id.into(),
            username: name.into(),
        }
    }

    fn msg(id: &str, from: &str, text: &str) -> TranscriptMessage {
        TranscriptMessage {
            from: from.into(),
            tagged: vec![],
            id: id.into(),
            text: text.into(),
            timestamp: "2026-11-24T08:00:00Z".into(),
        }
    }

    fn transcript() -> Transcript {
        Transcript {
            users: vec![user("u1", "ana"), user("u2", "ben")],
            messages: vec![
                msg("m1", "u2", "morning"),
                msg("m2", "u1", "hi ben"),
                msg("m3", "u2", "status?"),
                msg("m4", "u2", "anyone?"),
                msg("m5", "u1", "all green"),
            ],
        }
    }

    #[test]
    fn the_cases_are_the_persons_replies() {
        let t = transcript();
        assert!(t.problems().is_empty());
        let ana = t.user("@ANA").unwrap().clone();
        assert_eq!(t.user("u1"), Some(&ana));
        assert_eq!(t.cases(&ana), Ok(vec![1, 4]));
        let mut first = t.clone();
        first.messages.remove(0);
        assert_eq!(
            first.cases(&ana),
            Ok(vec![3]),
            "a first message answers nobody"
        );
        let ben = t.user("ben").unwrap().clone();
        let mut silent = t.clone();
        silent.messages.retain(|m| m.from == "u1");
        assert!(silent.cases(&ben).unwrap_err().contains("never answers"));
    }

    #[test]
    fn transcripts_are_checked_message_by_message() {
        let mut t = transcript();
        t.messages[1].from = "ghost".into();
        t.messages[2].id = "m1".into();
        t.messages[3].tagged = vec!["nobody".into()];
        t.messages[4].text = " ".into();
        assert_eq!(
            t.problems(),
            [
                "messages[1].from: `ghost` is not one of the transcript's users",
                "messages[2].id: `m1` is used twice",
                "messages[3].tagged: `nobody` is not one of the transcript's users",
                "messages[4].text: the message is empty",
            ]
        );
        let empty = Transcript {
            users: vec![],
            messages: vec![],
        };
        assert_eq!(
            empty.problems(),
            ["messages: the transcript has no messages"]
        );
    }

    #[test]
    fn cosine_is_one_for_the_same_direction_and_zero_for_nothing() {
        assert!((cosine(&[1.0, 2.0], &[2.0, 4.0]) - 1.0).abs() < 1e-6);
        assert!(cosine(&[1.0, 0.0], &[0.0, 1.0]).abs() < 1e-6);
        assert!((cosine(&[1.0, 0.0], &[-1.0, 0.0]) + 1.0).abs() < 1e-6);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 1.0]), 0.0);
        assert_eq!(cosine(&[1.0], &[1.0, 1.0]), 0.0);
    }

    #[test]
    fn a_scorecard_has_its_mean_best_and_worst() {
        let turn = |message, score: f32, ok: bool| Turn {
            message,
            answer: if ok {
                Ok("x".into())
            } else {
                Err("timeout".into())
            },
            score,
        };
        let card = Scorecard {
            bot: "copy".into(),
            turns: vec![turn(1, 0.9, true), turn(4, 0.3, true), turn(6, 0.0, false)],
        };
        assert!((card.mean() - 0.4).abs() < 1e-6);
        assert_eq!(card.best().map(|t| t.message), Some(1));
        assert_eq!(card.worst().map(|t| t.message), Some(6));
        assert_eq!(card.failures(), 1);
    }
}
