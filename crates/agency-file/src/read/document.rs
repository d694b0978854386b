//! The text as a YAML document, before its fields are read: its size and nesting bounded,
//! the loader's errors put as a person reads them, and a second document found.

use marked_yaml::{LoadError, Span};

use super::{MAX_BYTES, MAX_DEPTH};
use crate::{Pos, Problem};

/// The file's size, and its nesting read off the parser's event stream (which keeps its own
/// stack on the heap), before the recursive loader sees it. Aliases are refused here too, so a
/// "billion laughs" never expands. A syntax error ends the check: the loader reports it, having
/// read no deeper than this did.
pub(super) fn bounds(text: &str) -> Result<(), Problem> {
    let problem = |mark: Option<&yaml_rust2::scanner::Marker>, message: String| Problem {
        line: mark.map(|m| m.line()),
        column: mark.map(|m| m.col() + 1),
        path: String::new(),
        message,
    };
    if text.len() > MAX_BYTES {
        return Err(problem(
            None,
            format!(
                "the file is {} KiB; an agency file may be at most {} KiB",
                text.len().div_ceil(1024),
                MAX_BYTES / 1024
            ),
        ));
    }
    let mut parser = yaml_rust2::parser::Parser::new_from_str(text);
    let mut depth = 0usize;
    let too_deep = |mark| {
        problem(
            Some(mark),
            format!(
                "lists and mappings nest more than {MAX_DEPTH} deep here; an agency file needs \
                 far fewer levels"
            ),
        )
    };
    loop {
        let (event, mark) = match parser.next_token() {
            Ok(next) => next,
            // The scanner's own limit on flow nesting (`[[[…`), which it reaches while looking
            // ahead, before the events say how deep they are.
            Err(e) if e.info().contains("recursion limit") => return Err(too_deep(e.marker())),
            Err(_) => return Ok(()),
        };
        use yaml_rust2::Event;
        let anchored = match &event {
            Event::Alias(_) => true,
            Event::Scalar(_, _, anchor, _)
            | Event::SequenceStart(anchor, _)
            | Event::MappingStart(anchor, _) => *anchor != 0,
            _ => false,
        };
        if anchored {
            return Err(problem(
                Some(&mark),
                "anchors and aliases (`&name`, `*name`) are not supported: write the value out"
                    .into(),
            ));
        }
        match event {
            Event::StreamEnd => return Ok(()),
            Event::SequenceStart(..) | Event::MappingStart(..) => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(too_deep(&mark));
                }
            }
            Event::SequenceEnd | Event::MappingEnd => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
}

pub(super) fn load_problem(e: &LoadError) -> Problem {
    let (pos, message) = match e {
        LoadError::TopLevelMustBeMapping(m) | LoadError::TopLevelMustBeSequence(m) => {
            return top_level_problem(Some(marker(m)));
        }
        LoadError::UnexpectedAnchor(m) => (
            Some(marker(m)),
            "anchors and aliases (`&name`, `*name`) are not supported: write the value out".into(),
        ),
        LoadError::MappingKeyMustBeScalar(m) => (
            Some(marker(m)),
            "a key must be a plain name, not a list or a mapping".into(),
        ),
        LoadError::UnexpectedTag(m) => (
            Some(marker(m)),
            "YAML tags (`!!str`, `!thing`) are not supported: leave the tag out, quote the value \
             if it must be a string"
                .into(),
        ),
        LoadError::ScanError(m, e) => (Some(marker(m)), format!("YAML syntax error: {}", e.info())),
        LoadError::DuplicateKey(d) => {
            let first = start(d.prev_key.span())
                .map(|(line, _)| format!(" (first on line {line})"))
                .unwrap_or_default();
            (
                start(d.key.span()),
                format!(
                    "`{}` is given twice in the same mapping{first}: keep one",
                    d.key.as_str()
                ),
            )
        }
    };
    Problem {
        line: pos.map(|p| p.0),
        column: pos.map(|p| p.1),
        path: String::new(),
        message,
    }
}

pub(super) fn top_level_problem(pos: Option<Pos>) -> Problem {
    Problem {
        line: pos.map(|p| p.0),
        column: pos.map(|p| p.1),
        path: String::new(),
        message: "the top level of an agency file must be a mapping of its fields (`name: ...`, \
                  `manager: ...`, `agents: ...`), not a list or a single value"
            .into(),
    }
}

/// marked-yaml reads only the first document of a stream and drops the rest without a word; a
/// second agency pasted under `---` would vanish. Returns the line where one starts, if any.
pub(super) fn second_document(text: &str, first_content_line: usize) -> Option<usize> {
    let mut after_marker = false;
    for (i, line) in text.lines().enumerate() {
        let number = i + 1;
        if number <= first_content_line {
            continue;
        }
        let rest = ["---", "..."].iter().find_map(|m| {
            let rest = line.strip_prefix(m)?;
            (rest.is_empty() || rest.starts_with([' ', '\t'])).then_some(rest)
        });
        let content = match rest {
            Some(rest) => {
                after_marker = true;
                rest
            }
            None if after_marker => line,
            None => continue,
        };
        let content = content.trim();
        if !content.is_empty() && !content.starts_with('#') {
            return Some(number);
        }
    }
    None
}

pub(super) fn marker(m: &marked_yaml::Marker) -> Pos {
    (m.line(), m.column())
}

pub(super) fn start(span: &Span) -> Option<Pos> {
    span.start().map(marker)
}
