//! What both backends share, one file per area: the SQL they run, written once, and the rows
//! as the database holds them, with their conversions to and from the domain.
//!
//! Parameters are `$1, $2, ...` in order of first use, which PostgreSQL and SQLite both read
//! the same way.

use agency_core::AgentId;

use crate::StoreError;

pub(crate) mod accounts;
pub(crate) mod agencies;
pub(crate) mod approvals;
pub(crate) mod conversations;
pub(crate) mod keys;
pub(crate) mod legacy_agencies;
pub(crate) mod memory;
pub(crate) mod rooms;
pub(crate) mod secrets;
pub(crate) mod settings;
pub(crate) mod spend;
pub(crate) mod tasks;

/// A stored value this code cannot read back.
pub(crate) fn corrupt(what: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(what.to_string())
}

fn agent_id(n: i64) -> Result<AgentId, StoreError> {
    u32::try_from(n)
        .ok()
        .and_then(AgentId::new)
        .ok_or_else(|| corrupt(format!("agent id {n}")))
}

fn opt_agent(n: Option<i64>) -> Result<Option<AgentId>, StoreError> {
    n.map(agent_id).transpose()
}

fn u32_of(n: i64, what: &str) -> Result<u32, StoreError> {
    u32::try_from(n).map_err(|_| corrupt(format!("{what} {n}")))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

    use std::collections::HashMap;
    use std::iter::Peekable;
    use std::str::CharIndices;

    /// A `&str` constant of a file here, as the compiler builds it.
    struct Statement {
        file: String,
        name: String,
        sql: String,
    }

    /// SQLite numbers `$N` parameters in the order they first appear, while they are bound by
    /// position: SQL shared with PostgreSQL must name them `$1, $2, ...` in that order, or
    /// values land in the wrong places on SQLite alone. Every statement of every file here is
    /// checked whole, however its text is split across lines and column macros.
    #[test]
    fn shared_sql_names_its_parameters_in_order() {
        let statements = statements();
        for s in &statements {
            let mut seen: Vec<u32> = Vec::new();
            for part in s.sql.split('$').skip(1) {
                let digits: String = part.chars().take_while(char::is_ascii_digit).collect();
                if let Ok(n) = digits.parse::<u32>()
                    && !seen.contains(&n)
                {
                    seen.push(n);
                }
            }
            let expected: Vec<u32> = (1..).take(seen.len()).collect();
            assert_eq!(
                seen, expected,
                "{}: {} names its parameters in this order: {}",
                s.file, s.name, s.sql
            );
        }
    }

    /// The reader below builds the statements as the compiler does: macros, line
    /// continuations and all.
    #[test]
    fn the_statements_are_read_as_compiled() {
        let statements = statements();
        let read = |name: &str| {
            let found: Vec<&str> = statements
                .iter()
                .filter(|s| s.name == name)
                .map(|s| s.sql.as_str())
                .collect();
            assert_eq!(found.len(), 1, "{name}: {found:?}");
            found[0]
        };
        assert_eq!(read("SAVE_AGENCY"), super::agencies::SAVE_AGENCY);
        assert_eq!(read("SAVE_TURN"), super::conversations::SAVE_TURN);
        assert_eq!(read("ADD_MESSAGE"), super::rooms::ADD_MESSAGE);
        assert_eq!(read("UPSERT_PLAN"), super::memory::UPSERT_PLAN);
        assert_eq!(read("API_KEYS_OF_AGENCY"), super::keys::API_KEYS_OF_AGENCY);
    }

    /// Every `&str` constant of every file in this folder (each area must have some).
    fn statements() -> Vec<Statement> {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/shared");
        let mut all = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let file = path.file_name().unwrap().to_string_lossy().into_owned();
            if !file.ends_with(".rs") || file == "mod.rs" {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let before = all.len();
            all.extend(statements_of(&file, &text));
            assert!(all.len() > before, "no SQL read in shared/{file}");
        }
        all
    }

    fn statements_of(file: &str, text: &str) -> Vec<Statement> {
        let mut macros = HashMap::new();
        for (at, _) in text.match_indices("macro_rules! ") {
            let rest = &text[at + "macro_rules! ".len()..];
            let (name, rest) = rest.split_once(' ').unwrap();
            let body = &rest[rest.find("=> {").unwrap() + "=> {".len()..];
            let sql = expression(body, &macros, file);
            macros.insert(format!("{name}!()"), sql);
        }
        let mut statements = Vec::new();
        let mut at = 0;
        for line in text.split_inclusive('\n') {
            let start = at;
            at += line.len();
            let trimmed = line.trim_start();
            let Some(declared) = trimmed
                .strip_prefix("pub(crate) const ")
                .or_else(|| trimmed.strip_prefix("const "))
            else {
                continue;
            };
            let (name, rest) = declared.split_once(':').unwrap();
            let Some(rest) = rest.trim_start().strip_prefix("&str =") else {
                continue; // not SQL (a number)
            };
            let from = start + line.len() - rest.len();
            let sql = expression(&text[from..], &macros, file);
            statements.push(Statement {
                file: format!("shared/{file}"),
                name: name.to_string(),
                sql,
            });
        }
        statements
    }

    /// The text of an expression made of string literals, `concat!` and the column macros read
    /// so far, up to the `;` or `}` that ends it; anything else fails the test.
    fn expression(mut rest: &str, macros: &HashMap<String, String>, file: &str) -> String {
        let mut sql = String::new();
        loop {
            rest = rest.trim_start();
            if let Some(after) = rest.strip_prefix('"') {
                let (text, after) = literal(after);
                sql.push_str(&text);
                rest = after;
            } else if rest.starts_with([';', '}']) {
                return sql;
            } else if let Some(after) = rest.strip_prefix("concat!(") {
                rest = after;
            } else if let Some(after) = rest.strip_prefix([',', ')']) {
                rest = after;
            } else if let Some((call, text)) = macros.iter().find(|(m, _)| rest.starts_with(*m)) {
                sql.push_str(text);
                rest = &rest[call.len()..];
            } else {
                let near: String = rest.chars().take(40).collect();
                panic!("shared/{file}: cannot read the SQL at `{near}`");
            }
        }
    }

    /// The text of a string literal whose opening quote is just before `rest`, and what
    /// follows its closing quote.
    fn literal(rest: &str) -> (String, &str) {
        let mut text = String::new();
        let mut chars: Peekable<CharIndices> = rest.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => return (text, &rest[i + 1..]),
                '\\' => match chars.next() {
                    // A line continuation: the line break and the next line's indent go.
                    Some((_, '\n')) => while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {},
                    Some((_, 'n')) => text.push('\n'),
                    Some((_, e @ ('"' | '\\' | '\''))) => text.push(e),
                    other => panic!("an escape this test does not read: {other:?}"),
                },
                c => text.push(c),
            }
        }
        panic!("a string literal without its end: {rest}");
    }
}
