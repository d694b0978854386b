//! A request whose last message is the assistant's (a "prefill") asks for an answer that
//! begins with that text. The manager is asked to begin with it; the response then holds what
//! comes after it, as the servers that honour a prefill send it (Ollama, llama.cpp, vLLM's
//! `continue_final_message`): the client appends it to its prefill. An answer that does not
//! begin with the prefill is sent whole.

/// Takes the prefill off the start of an answer that arrives in pieces, holding back only
/// what may still turn out to be the prefill.
#[derive(Debug)]
pub(super) struct Continuation {
    prefill: Option<String>,
    held: String,
}

impl Continuation {
    pub(super) fn new(prefill: Option<&str>) -> Self {
        Self {
            prefill: prefill.filter(|p| !p.is_empty()).map(str::to_string),
            held: String::new(),
        }
    }

    /// The next piece of the answer; returns what may be sent now (perhaps nothing).
    pub(super) fn push(&mut self, piece: &str) -> String {
        let Some(prefill) = &self.prefill else {
            return piece.to_string();
        };
        self.held.push_str(piece);
        if self.held.len() >= prefill.len() {
            let held = std::mem::take(&mut self.held);
            let rest = match held.strip_prefix(prefill.as_str()) {
                Some(rest) => rest.to_string(),
                None => held,
            };
            self.prefill = None;
            rest
        } else if prefill.starts_with(self.held.as_str()) {
            String::new()
        } else {
            self.prefill = None;
            std::mem::take(&mut self.held)
        }
    }

    /// The answer has ended: what was held back (an answer shorter than the prefill).
    pub(super) fn finish(&mut self) -> String {
        self.prefill = None;
        std::mem::take(&mut self.held)
    }

    /// A whole answer as it is sent.
    pub(super) fn whole(prefill: Option<&str>, answer: &str) -> String {
        let mut c = Self::new(prefill);
        let mut out = c.push(answer);
        out.push_str(&c.finish());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::Continuation;

    fn streamed(prefill: Option<&str>, pieces: &[&str]) -> (Vec<String>, String) {
        let mut c = Continuation::new(prefill);
        let sent: Vec<String> = pieces.iter().map(|p| c.push(p)).collect();
        let rest = c.finish();
        (sent, rest)
    }

    #[test]
    fn the_prefill_is_taken_off_the_answer() {
        assert_eq!(
            Continuation::whole(Some("{\"a\":"), "{\"a\": 1}"),
            " 1}".to_string()
        );
        assert_eq!(Continuation::whole(Some("Sure"), "Sure"), "");
        // Not begun with it: the answer whole.
        assert_eq!(Continuation::whole(Some("Sure"), "No."), "No.");
        assert_eq!(Continuation::whole(Some("Sure, x"), "Sure"), "Sure");
        assert_eq!(Continuation::whole(None, "Sure"), "Sure");
        assert_eq!(Continuation::whole(Some(""), "Sure"), "Sure");
    }

    #[test]
    fn a_streamed_answer_is_held_back_only_while_it_may_be_the_prefill() {
        let (sent, rest) = streamed(Some("Once upon"), &["Once", " up", "on a time", ","]);
        assert_eq!(sent, ["", "", " a time", ","]);
        assert_eq!(rest, "");
        // It departs from the prefill: everything held goes at once.
        let (sent, rest) = streamed(Some("Once upon"), &["Once", " there", "!"]);
        assert_eq!(sent, ["", "Once there", "!"]);
        assert_eq!(rest, "");
        let (sent, _) = streamed(Some("Once upon"), &["Long ago"]);
        assert_eq!(sent, ["Long ago"]);
        // Shorter than the prefill, and the end: what was held.
        let (sent, rest) = streamed(Some("Once upon"), &["Once"]);
        assert_eq!(sent, [""]);
        assert_eq!(rest, "Once");
        // Multi-byte text is cut at the prefill's end only.
        let (sent, rest) = streamed(Some("Ça"), &["Ç", "a va ?"]);
        assert_eq!(sent, ["", " va ?"]);
        assert_eq!(rest, "");
    }
}
