//! Writing: [`AgencyDraft`] → block-style YAML that reads back as the same draft.

use agency_core::{AgencyDraft, AgentDraft, RuleDraft};

/// Render a draft as YAML (block style, readable, stable field order as in the crate example;
/// every string written as a JSON-style double-quoted scalar when it needs quoting, which is
/// valid YAML) such that `AgencyFile::parse(to_yaml(d)).draft == d` for every draft.
///
/// Fields that are `None` and empty rule lists are left out; a rule with one recipient is
/// written `send_to: name`, otherwise `send_to: [a, b]`. Multi-line text that can be written
/// as a literal block (`|`) without loss is, for people who edit the file.
pub fn to_yaml(draft: &AgencyDraft) -> String {
    let mut out = String::new();
    text_field(&mut out, 0, "name", &draft.name);
    if let Some(handle) = &draft.handle {
        text_field(&mut out, 0, "handle", handle);
    }
    text_field(&mut out, 0, "protocol", &draft.protocol);
    text_field(&mut out, 0, "manager", &draft.manager);
    if let Some(n) = draft.max_hops {
        out.push_str(&format!("max_hops: {n}\n"));
    }
    if let Some(n) = draft.turn_deadline_secs {
        out.push_str(&format!("turn_deadline_secs: {n}\n"));
    }
    if !draft.providers.is_empty() {
        out.push_str("providers:\n");
        for p in &draft.providers {
            out.push_str(&format!("  {}:\n", inline(&p.name)));
            text_field(&mut out, 4, "kind", &p.kind);
            if let Some(url) = &p.base_url {
                text_field(&mut out, 4, "base_url", url);
            }
            if let Some(var) = &p.api_key_env {
                text_field(&mut out, 4, "api_key_env", var);
            }
            if let Some(n) = p.max_concurrency {
                out.push_str(&format!("    max_concurrency: {n}\n"));
            }
            if let Some(n) = p.requests_per_minute {
                out.push_str(&format!("    requests_per_minute: {n}\n"));
            }
            if !p.prices.is_empty() {
                out.push_str("    prices:\n");
                for (model, price) in &p.prices {
                    out.push_str(&format!("      {}:\n", inline(model)));
                    for (key, amount) in [("input", &price.input), ("output", &price.output)] {
                        // A valid amount is written as the number it is; anything else as text
                        // (validation will name it).
                        if amount.trim() == amount.as_str()
                            && agency_core::price::parse_dollars(amount).is_ok()
                        {
                            out.push_str(&format!("        {key}: {amount}\n"));
                        } else {
                            text_field(&mut out, 8, key, amount);
                        }
                    }
                }
            }
        }
    }
    if !draft.mcp_servers.is_empty() {
        out.push_str("mcp_servers:\n");
        for m in &draft.mcp_servers {
            if *m
                == (agency_core::McpServerDraft {
                    name: m.name.clone(),
                    ..Default::default()
                })
            {
                out.push_str(&format!("  {}: {{}}\n", inline(&m.name)));
                continue;
            }
            out.push_str(&format!("  {}:\n", inline(&m.name)));
            if let Some(url) = &m.url {
                text_field(&mut out, 4, "url", url);
            }
            if let Some(command) = &m.command {
                text_field(&mut out, 4, "command", command);
            }
            if !m.args.is_empty() {
                out.push_str(&format!("    args: {}\n", flow_list(&m.args)));
            }
            for (key, map) in [("env", &m.env), ("headers_env", &m.headers_env)] {
                if !map.is_empty() {
                    out.push_str(&format!("    {key}:\n"));
                    for (k, v) in map {
                        text_field(&mut out, 6, &inline(k), v);
                    }
                }
            }
            if let Some(n) = m.timeout_secs {
                out.push_str(&format!("    timeout_secs: {n}\n"));
            }
            if let Some(n) = m.max_concurrency {
                out.push_str(&format!("    max_concurrency: {n}\n"));
            }
        }
    }
    if draft.agents.is_empty() {
        out.push_str("agents: []\n");
    } else {
        out.push_str("agents:\n");
        for agent in &draft.agents {
            list_item(&mut out, 2, |out, indent| write_agent(out, indent, agent));
        }
    }
    out
}

fn write_agent(out: &mut String, indent: usize, agent: &AgentDraft) {
    let pad = " ".repeat(indent);
    if let Some(id) = agent.id {
        out.push_str(&format!("{pad}id: {id}\n"));
    }
    text_field(out, indent, "name", &agent.name);
    if let Some(handle) = &agent.handle {
        text_field(out, indent, "handle", handle);
    }
    if let Some(role) = &agent.role {
        text_field(out, indent, "role", role);
    }
    text_field(out, indent, "model", &agent.model);
    if let Some(t) = agent.temperature {
        out.push_str(&format!("{pad}temperature: {t}\n"));
    }
    if let Some(t) = agent.top_p {
        out.push_str(&format!("{pad}top_p: {t}\n"));
    }
    if let Some(n) = agent.max_tokens {
        out.push_str(&format!("{pad}max_tokens: {n}\n"));
    }
    if let Some(t) = agent.reflection_threshold {
        out.push_str(&format!("{pad}reflection_threshold: {t}\n"));
    }
    if let Some(h) = agent.reflection_half_life_hours {
        out.push_str(&format!("{pad}reflection_half_life_hours: {h}\n"));
    }
    if let Some(instructions) = &agent.instructions {
        text_field(out, indent, "instructions", instructions);
    }
    if !agent.tools.is_empty() {
        out.push_str(&format!("{pad}tools: {}\n", flow_list(&agent.tools)));
    }
    if !agent.rules.is_empty() {
        out.push_str(&format!("{pad}rules:\n"));
        for rule in &agent.rules {
            list_item(out, indent + 2, |out, indent| write_rule(out, indent, rule));
        }
    }
}

fn write_rule(out: &mut String, indent: usize, rule: &RuleDraft) {
    text_field(out, indent, "when", &rule.when);
    let pad = " ".repeat(indent);
    if let Some(call) = &rule.call {
        text_field(out, indent, "call", call);
    }
    if let Some(with) = &rule.with {
        // JSON is YAML's flow style; strings are written quoted, so they read back as text.
        out.push_str(&format!("{pad}with: {with}\n"));
    }
    text_field(out, indent, "do", &rule.action);
    match rule.send_to.as_slice() {
        [one] => text_field(out, indent, "send_to", one),
        many => {
            let items: Vec<String> = many.iter().map(|s| inline(s)).collect();
            out.push_str(&format!("{pad}send_to: [{}]\n", items.join(", ")));
        }
    }
}

/// `[a, b]`, each item as [`inline`] writes it.
fn flow_list(items: &[String]) -> String {
    let items: Vec<String> = items.iter().map(|s| inline(s)).collect();
    format!("[{}]", items.join(", "))
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
