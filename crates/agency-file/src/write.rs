//! Writing: any draft → block-style YAML that reads back as the same draft, laid out from its
//! `serde` serialization ([`crate::tree`]): what the types declare is what is written, in
//! declaration order.

use agency_core::AgencyDraft;

use crate::tree::{Node, to_tree};

/// Render a draft as YAML (block style, readable, fields in the order the draft's types
/// declare them; every string written as a JSON-style double-quoted scalar when it needs
/// quoting, which is valid YAML) such that `AgencyFile::parse(to_yaml(d)).draft == d` for every
/// draft.
///
/// Fields the types skip (`None`, empty lists) are left out. Lists of mappings (agents, rules)
/// are block lists, other lists flow lists (`send_to: [a, b]`). Multi-line text that can be
/// written as a literal block (`|`) without loss is, for people who edit the file.
pub fn to_yaml(draft: &AgencyDraft) -> String {
    match to_tree(draft) {
        Ok(Node::Map(fields)) => {
            let mut out = String::new();
            block_map(&mut out, 0, &fields);
            out
        }
        // A draft is a struct whose every `Serialize` succeeds; should that ever change, the
        // file says so rather than being empty.
        Ok(other) => format!("# not an agency: {other:?}\n"),
        Err(e) => format!("# the agency could not be written: {e}\n"),
    }
}

/// The fields of a mapping, one per line, at `indent`.
fn block_map(out: &mut String, indent: usize, fields: &[(String, Node)]) {
    for (key, value) in fields {
        field(out, indent, &inline(key), value);
    }
}

/// `key: value`: text as [`text_field`] writes it, non-empty mappings and lists of mappings
/// as blocks below the key, anything else on the key's line in flow style.
fn field(out: &mut String, indent: usize, key: &str, value: &Node) {
    let pad = " ".repeat(indent);
    match value {
        Node::Text(text) => text_field(out, indent, key, text),
        Node::Map(fields) if !fields.is_empty() => {
            out.push_str(&format!("{pad}{key}:\n"));
            block_map(out, indent + 2, fields);
        }
        Node::List(items) if !items.is_empty() && items.iter().all(is_block_map) => {
            out.push_str(&format!("{pad}{key}:\n"));
            for item in items {
                if let Node::Map(fields) = item {
                    list_item(out, indent + 2, |out, indent| {
                        block_map(out, indent, fields)
                    });
                }
            }
        }
        other => out.push_str(&format!("{pad}{key}: {}\n", flow(other))),
    }
}

fn is_block_map(node: &Node) -> bool {
    matches!(node, Node::Map(fields) if !fields.is_empty())
}

/// A value on one line: `[a, b]`, `{k: v}`, scalars as YAML reads them back.
fn flow(node: &Node) -> String {
    match node {
        Node::Null => "null".into(),
        Node::Bool(b) => b.to_string(),
        Node::Number(n) => n.clone(),
        Node::Float(f) => float(*f),
        Node::Text(s) => inline(s),
        Node::List(items) => {
            let items: Vec<String> = items.iter().map(flow).collect();
            format!("[{}]", items.join(", "))
        }
        Node::Map(fields) => {
            let fields: Vec<String> = fields
                .iter()
                .map(|(k, v)| format!("{}: {}", inline(k), flow(v)))
                .collect();
            format!("{{{}}}", fields.join(", "))
        }
    }
}

/// A float as it reads back as the same float, and as a float (`1.0`, not `1`): the shortest
/// such digits, as JSON writes them.
fn float(f: f64) -> String {
    match serde_json::Number::from_f64(f) {
        Some(n) => n.to_string(),
        None if f.is_nan() => ".nan".into(),
        None if f > 0.0 => ".inf".into(),
        None => "-.inf".into(),
    }
}

/// A `- ` item at `indent` whose fields `write` puts at `indent + 2`; the first field goes on
/// the dash's line.
fn list_item(out: &mut String, indent: usize, write: impl FnOnce(&mut String, usize)) {
    let mut item = String::new();
    write(&mut item, indent + 2);
    // Every writer starts with a field line indented by indent + 2 spaces.
    let body = item.get(indent + 2..).unwrap_or(&item);
    out.push_str(&" ".repeat(indent));
    out.push_str("- ");
    out.push_str(body);
}

fn text_field(out: &mut String, indent: usize, key: &str, value: &str) {
    let pad = " ".repeat(indent);
    if literal_ok(value) {
        let trailing = value.len() - value.trim_end_matches('\n').len();
        let chomp = match trailing {
            0 => "-",
            1 => "",
            _ => "+",
        };
        out.push_str(&format!("{pad}{key}: |{chomp}\n"));
        let body = value.trim_end_matches('\n');
        for line in body.split('\n') {
            if !line.is_empty() {
                out.push_str(&pad);
                out.push_str("  ");
                out.push_str(line);
            }
            out.push('\n');
        }
        for _ in 1..trailing {
            out.push('\n');
        }
    } else {
        out.push_str(&format!("{pad}{key}: {}\n", inline(value)));
    }
}

/// A string on one line: plain when that reads back the same everywhere, else double-quoted.
fn inline(s: &str) -> String {
    if plain_ok(s) {
        s.to_string()
    } else {
        quoted(s)
    }
}

/// Characters that are written as escapes: those YAML does not allow raw (controls, and the
/// BOM and non-characters) and those some readers take for line breaks (NEL, LS, PS).
fn needs_escape(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{1f}'
        | '\u{7f}'..='\u{9f}'
        | '\u{2028}' | '\u{2029}'
        | '\u{feff}'
        | '\u{fffe}' | '\u{ffff}')
}

/// A JSON-style double-quoted scalar, which YAML reads the same way.
fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if needs_escape(c) => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Whether `s` can be written plain (unquoted) in block and in flow context and read back
/// as the same string, by this crate and by other YAML readers (so nothing that looks like a
/// null, a boolean or a number).
fn plain_ok(s: &str) -> bool {
    let Some(first) = s.chars().next() else {
        return false;
    };
    let last = s.chars().next_back().unwrap_or(first);
    if first.is_whitespace() || last.is_whitespace() {
        return false;
    }
    if "-?:,[]{}#&*!|>'\"%@`".contains(first) {
        return false;
    }
    if s.chars()
        .any(|c| needs_escape(c) || matches!(c, ':' | '#' | ',' | '[' | ']' | '{' | '}'))
    {
        return false;
    }
    // A `-` or `?` after white space that a flow indicator follows (`[A -]`) is read as the
    // start of a token, not the end of the scalar.
    let mut ends = s.chars().rev();
    if matches!(ends.next(), Some('-' | '?')) && ends.next().is_some_and(char::is_whitespace) {
        return false;
    }
    let lower = s.to_ascii_lowercase();
    let special = [
        "~", "null", "true", "false", "yes", "no", "on", "off", "y", "n", ".inf", ".nan", "<<",
    ];
    if special.contains(&lower.as_str()) {
        return false;
    }
    // Numbers (`12`, `1.5`, `0x1f`, `1e3`) and dates (`2024-01-01`).
    if (first.is_ascii_digit() || first == '.' || first == '+')
        && !s.chars().any(char::is_whitespace)
    {
        return false;
    }
    true
}

/// Whether `s` can be written as a literal block (`|`) and read back the same: several lines,
/// the first not indented (it sets the block's indentation), no invisible trailing white
/// space, and nothing that would need an escape.
fn literal_ok(s: &str) -> bool {
    if !s.contains('\n') {
        return false;
    }
    let body = s.trim_end_matches('\n');
    let Some(first) = body.split('\n').next() else {
        return false;
    };
    if first.is_empty() || first.starts_with(char::is_whitespace) {
        return false;
    }
    if body.chars().any(|c| c != '\n' && needs_escape(c)) {
        return false;
    }
    body.split('\n')
        .all(|line| !line.ends_with(char::is_whitespace))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn plain_only_when_safe() {
        for ok in [
            "studio",
            "builtin/rules",
            "You run a studio.",
            "café",
            "4th floor",
        ] {
            assert!(plain_ok(ok), "{ok:?} should be plain");
        }
        for quote in [
            "",
            " x",
            "x ",
            "null",
            "~",
            "True",
            "no",
            "12",
            "1.5",
            "2024-01-01",
            "-x",
            "A -",
            "what ?",
            "a: b",
            "a #b",
            "{{message}}",
            "\"x\"",
            "'x'",
            "a\nb",
            "a,b",
            "*x",
            "&x",
            "!x",
            "%x",
            "@x",
            "\u{feff}x",
            "x\u{85}",
        ] {
            assert!(!plain_ok(quote), "{quote:?} should be quoted");
        }
    }

    #[test]
    fn quoting_escapes_what_yaml_cannot_hold_raw() {
        assert_eq!(quoted("a\"b\\c\nd\te"), r#""a\"b\\c\nd\te""#);
        assert_eq!(quoted("\u{1}\u{7f}\u{2028}é"), "\"\\u0001\\u007f\\u2028é\"");
    }

    #[test]
    fn literal_blocks_for_plain_paragraphs_only() {
        assert!(literal_ok("one\ntwo"));
        assert!(literal_ok("one\n\n  two\n\n"));
        assert!(!literal_ok("one"));
        assert!(!literal_ok(" one\ntwo"));
        assert!(!literal_ok("\none"));
        assert!(!literal_ok("one \ntwo"));
        assert!(!literal_ok("one\n \ntwo"));
        assert!(!literal_ok("one\ttab\ntwo"));
    }
}
