//! Agency files: an agency as YAML (or JSON, which is YAML) that people keep in git.
//!
//! ```yaml
//! name: studio
//! protocol: json
//! manager: manager
//! max_hops: 16
//! agents:
//!   - id: 4522
//!     name: manager
//!     model: builtin/rules
//!     instructions: You run a studio.
//!     rules:
//!       - when: user
//!         do: "Please build: {{message}}"
//!         send_to: programmer
//!   - id: 143
//!     name: programmer
//!     model: builtin/rules
//! ```
//!
//! [`AgencyFile::parse`] reads the text into an [`AgencyDraft`] and remembers where each field
//! stood, so that the problems [`AgencyDraft::validate`] finds (which this crate does not
//! repeat) can be reported against the file with [`AgencyFile::locate`]. [`to_yaml`] writes a
//! draft back out, and reading what it writes gives the same draft.
//!
//! Everything that can go wrong comes back as a [`FileError`]: a list of [`Problem`]s, each with
//! the path of the field (`agents[1].rules[0].send_to`), its line and column when known, and a
//! message a person can act on.

use std::collections::HashMap;
use std::fmt;

use agency_core::{AgencyDraft, ValidationErrors};

pub mod examples;
mod read;
mod tree;
mod write;

pub use write::to_yaml;

/// A line and a column, both counted from 1 (columns in characters).
type Pos = (usize, usize);

/// A parsed agency file: the draft plus where each field stood in the source.
#[derive(Clone, Debug)]
pub struct AgencyFile {
    /// The agency as written, not yet validated.
    pub draft: AgencyDraft,
    /// Field path (`agents[1].rules[0].send_to`) to the line and column of its value.
    positions: HashMap<String, Pos>,
    /// The display name given to [`AgencyFile::parse`], for [`AgencyFile::locate`].
    source_name: String,
}

impl AgencyFile {
    /// Parse YAML/JSON text. `source` is a display name (e.g. the file path) used in errors.
    ///
    /// Syntax errors, values of the wrong type, missing required fields and unknown fields are
    /// all reported (every one found, not just the first). The meaning of the agency (does the
    /// manager exist, are names unique, ...) is not checked here: call
    /// [`AgencyDraft::validate`] and pass its errors to [`AgencyFile::locate`].
    pub fn parse(source: &str, text: &str) -> Result<AgencyFile, FileError> {
        read::parse(text)
            .map(|(draft, positions)| AgencyFile {
                draft,
                positions,
                source_name: source.to_string(),
            })
            .map_err(|problems| FileError {
                source_name: source.to_string(),
                problems,
            })
    }

    /// Attach source positions to the core's validation errors (best match: the exact path,
    /// else its closest parent path, else line None).
    ///
    /// The error is named after the `source` given to [`AgencyFile::parse`].
    pub fn locate(&self, errors: ValidationErrors) -> FileError {
        FileError {
            source_name: self.source_name.clone(),
            problems: errors
                .0
                .into_iter()
                .map(|e| {
                    let pos = self.position(&e.path);
                    Problem {
                        line: pos.map(|p| p.0),
                        column: pos.map(|p| p.1),
                        path: e.path,
                        message: e.message,
                    }
                })
                .collect(),
        }
    }

    /// Where the value at `path` (or, failing that, its closest parent) stood.
    fn position(&self, path: &str) -> Option<Pos> {
        let mut path = path;
        loop {
            if let Some(pos) = self.positions.get(path) {
                return Some(*pos);
            }
            path = parent(path)?;
        }
    }
}

/// The server's configuration file (`agency serve --config FILE`): the providers and MCP servers
/// every agency can use, in the same form as an agency file's `providers:` and `mcp_servers:`
/// (where, being the operator's, a server may also be a `command` and read server variables).
#[derive(Clone, Debug)]
pub struct ConfigFile {
    pub providers: Vec<agency_core::ProviderDraft>,
    pub mcp_servers: Vec<agency_core::McpServerDraft>,
    positions: HashMap<String, Pos>,
    source_name: String,
}

impl ConfigFile {
    pub fn parse(source: &str, text: &str) -> Result<ConfigFile, FileError> {
        read::parse_config(text)
            .map(|((providers, mcp_servers), positions)| ConfigFile {
                providers,
                mcp_servers,
                positions,
                source_name: source.to_string(),
            })
            .map_err(|problems| FileError {
                source_name: source.to_string(),
                problems,
            })
    }

    /// Validates the providers, with the line of each problem.
    pub fn validate(&self) -> Result<Vec<agency_core::ProviderSpec>, FileError> {
        agency_core::validate_providers(&self.providers).map_err(|errors| self.locate(errors))
    }

    /// Validates the MCP servers (as the operator's: commands and server variables allowed),
    /// with the line of each problem.
    pub fn validate_mcp_servers(&self) -> Result<Vec<(String, agency_core::McpServer)>, FileError> {
        agency_core::validate_mcp_servers(&self.mcp_servers, agency_core::Declared::Operator)
            .map_err(|errors| self.locate(errors))
    }

    fn locate(&self, errors: ValidationErrors) -> FileError {
        AgencyFile {
            draft: AgencyDraft::default(),
            positions: self.positions.clone(),
            source_name: self.source_name.clone(),
        }
        .locate(errors)
    }
}

/// `agents[1].rules[0].send_to` → `agents[1].rules[0]` → `agents[1].rules` → `agents[1]` →
/// `agents` → none.
fn parent(path: &str) -> Option<&str> {
    let cut = if path.ends_with(']') {
        path.rfind('[')?
    } else {
        path.rfind('.')?
    };
    Some(&path[..cut])
}

/// Everything wrong with an agency file, each problem where it stood.
///
/// Displays as one line per problem: `{source}:{line}:{column}: {path}: {message}`, leaving out
/// `:{line}:{column}` when the position is unknown and `{path}: ` when the problem is not about
/// one field (a syntax error).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", Rendered(self))]
pub struct FileError {
    /// The display name the file was parsed under (e.g. its path).
    pub source_name: String,
    /// In the order of the file (parse problems) or of the core's checks (validation).
    pub problems: Vec<Problem>,
}

/// One problem in an agency file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// From 1.
    pub line: Option<usize>,
    /// From 1, in characters.
    pub column: Option<usize>,
    /// The field, as `agents[1].rules[0].send_to`; empty when the problem is the file's syntax.
    pub path: String,
    /// What is wrong, for a person.
    pub message: String,
}

struct Rendered<'a>(&'a FileError);

impl fmt::Display for Rendered<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let e = self.0;
        for (i, p) in e.problems.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{}", e.source_name)?;
            if let Some(line) = p.line {
                write!(f, ":{line}")?;
                if let Some(column) = p.column {
                    write!(f, ":{column}")?;
                }
            }
            f.write_str(": ")?;
            if !p.path.is_empty() {
                write!(f, "{}: ", p.path)?;
            }
            f.write_str(&p.message)?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn parents_walk_up_the_path() {
        let mut chain = vec![];
        let mut p = Some("agents[1].rules[0].send_to");
        while let Some(path) = p {
            chain.push(path);
            p = parent(path);
        }
        assert_eq!(
            chain,
            [
                "agents[1].rules[0].send_to",
                "agents[1].rules[0]",
                "agents[1].rules",
                "agents[1]",
                "agents",
            ]
        );
    }

    #[test]
    fn display_leaves_out_what_is_unknown() {
        let e = FileError {
            source_name: "a.yaml".into(),
            problems: vec![
                Problem {
                    line: Some(3),
                    column: Some(10),
                    path: "manager".into(),
                    message: "no".into(),
                },
                Problem {
                    line: None,
                    column: None,
                    path: "agents".into(),
                    message: "none".into(),
                },
                Problem {
                    line: Some(1),
                    column: Some(2),
                    path: String::new(),
                    message: "syntax".into(),
                },
            ],
        };
        assert_eq!(
            e.to_string(),
            "a.yaml:3:10: manager: no\na.yaml: agents: none\na.yaml:1:2: syntax"
        );
    }
}
