//! The example agencies (`examples/*.yaml` at the repository's root), embedded in the binary:
//! the web UI's gallery offers them to every account, and the first start of a database imports
//! `studio` for the CLI's local owner. Each runs offline, on the built-in rules model and tools.

/// An example agency file, with what the gallery says about it.
#[derive(Clone, Copy, Debug)]
pub struct Example {
    /// The agency's `name:` in the file.
    pub name: &'static str,
    /// A title for people.
    pub title: &'static str,
    /// One sentence: who does what.
    pub summary: &'static str,
    /// The agency file, as in `examples/`.
    pub file: &'static str,
}

/// Every example, in the gallery's order.
pub const EXAMPLES: &[Example] = &[
    Example {
        name: "studio",
        title: "Software studio",
        summary: "A manager has the programmer build, and the reviewer check the build with a tool, before answering.",
        file: include_str!("../../../examples/studio.yaml"),
    },
    Example {
        name: "research",
        title: "Research desk with a critic",
        summary: "The editor sends a question to the researcher, who dates the brief with a tool; the critic checks it before the reader gets it.",
        file: include_str!("../../../examples/research.yaml"),
    },
    Example {
        name: "support",
        title: "Support team with escalation",
        summary: "The front desk opens a ticket, triage escalates it to billing, billing works out a credit with the calculator.",
        file: include_str!("../../../examples/support.yaml"),
    },
    Example {
        name: "standup",
        title: "Roundtable standup",
        summary: "The facilitator opens the round; each member adds an update and passes it on; the user gets the notes.",
        file: include_str!("../../../examples/standup.yaml"),
    },
];

/// The example named `name`.
pub fn example(name: &str) -> Option<&'static Example> {
    EXAMPLES.iter().find(|e| e.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_example_reads_and_is_named_as_listed() {
        assert!(EXAMPLES.len() >= 4);
        for e in EXAMPLES {
            let file = crate::AgencyFile::parse(e.name, e.file)
                .unwrap_or_else(|err| panic!("{}: {err}", e.name));
            assert_eq!(file.draft.name, e.name);
            let valid = file
                .draft
                .validate(agency_core::AgencyId::new(), "local", &|_| true);
            assert!(valid.is_ok(), "{}: {:?}", e.name, valid.err());
            for a in &file.draft.agents {
                assert_eq!(a.model, "builtin/rules", "{} runs offline", e.name);
            }
        }
        assert!(example("studio").is_some());
        assert!(example("nothing").is_none());
    }
}
