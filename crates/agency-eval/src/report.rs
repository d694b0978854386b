//! The report: a terminal table, JSON, and an HTML page with a chart of the score per turn.

use std::fmt::Write as _;

use agency_core::eval::{Scorecard, Transcript, TranscriptUser};
use serde_json::{Value, json};

/// A line of text, at most `n` characters, on one line.
fn clip(text: &str, n: usize) -> String {
    let one: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one.chars().count() <= n {
        one
    } else {
        let cut: String = one.chars().take(n.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}

/// The report as a table for a terminal.
pub fn table(transcript: &Transcript, person: &TranscriptUser, cards: &[Scorecard]) -> String {
    let mut out = String::new();
    let cases = cards.first().map_or(0, |c| c.turns.len());
    let _ = writeln!(
        out,
        "Emulating @{} over {cases} replies of theirs.\n",
        person.username
    );
    let width = cards
        .iter()
        .map(|c| c.bot.chars().count())
        .max()
        .unwrap_or(3)
        .max(3);
    let _ = writeln!(
        out,
        "{:width$}  {:>5}  {:>14}  {:>14}  {:>8}",
        "bot", "mean", "best", "worst", "failed"
    );
    for c in cards {
        let at = |t: Option<&agency_core::eval::Turn>| {
            t.map_or("-".to_string(), |t| {
                format!("#{} {:.3}", t.message + 1, t.score)
            })
        };
        let _ = writeln!(
            out,
            "{:width$}  {:>5.3}  {:>14}  {:>14}  {:>8}",
            c.bot,
            c.mean(),
            at(c.best()),
            at(c.worst()),
            c.failures()
        );
    }
    let _ = writeln!(
        out,
        "\nPer turn (message #, what @{} said):",
        person.username
    );
    let _ = write!(out, "{:>5}", "#");
    for c in cards {
        let _ = write!(out, "  {:>width$}", c.bot);
    }
    let _ = writeln!(out, "  original");
    for i in 0..cases {
        let Some(message) = cards.first().map(|c| c.turns[i].message) else {
            break;
        };
        let _ = write!(out, "{:>5}", message + 1);
        for c in cards {
            let t = &c.turns[i];
            let cell = match &t.answer {
                Ok(_) => format!("{:.3}", t.score),
                Err(_) => "failed".to_string(),
            };
            let _ = write!(out, "  {cell:>width$}");
        }
        let _ = writeln!(out, "  {}", clip(&transcript.messages[message].text, 60));
    }
    out
}

/// The report as JSON.
pub fn json(transcript: &Transcript, person: &TranscriptUser, cards: &[Scorecard]) -> Value {
    let turn = |t: &agency_core::eval::Turn| {
        let m = &transcript.messages[t.message];
        let mut v = json!({
            "message": t.message + 1,
            "message_id": m.id,
            "original": m.text,
            "score": t.score,
        });
        match &t.answer {
            Ok(a) => v["answer"] = json!(a),
            Err(e) => v["error"] = json!(e),
        }
        v
    };
    json!({
        "person": { "id": person.id, "username": person.username },
        "bots": cards.iter().map(|c| json!({
            "bot": c.bot,
            "mean": c.mean(),
            "best": c.best().map(turn),
            "worst": c.worst().map(turn),
            "failed": c.failures(),
            "turns": c.turns.iter().map(turn).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const COLOURS: [&str; 6] = [
    "#2563eb", "#db2777", "#059669", "#d97706", "#7c3aed", "#0891b2",
];

/// The scores per turn, a line per bot, as an SVG chart.
fn chart(cards: &[Scorecard], cases: usize) -> String {
    let (w, h, pad) = (720.0_f32, 300.0_f32, 40.0_f32);
    let x = |i: usize| pad + (w - 2.0 * pad) * (i as f32) / ((cases.max(2) - 1) as f32);
    let y = |s: f32| h - pad - (h - 2.0 * pad) * s.clamp(0.0, 1.0);
    let mut svg = format!(
        r#"<svg viewBox="0 0 {w} {h}" width="100%" role="img" aria-label="Score per turn" xmlns="http://www.w3.org/2000/svg">"#
    );
    for tick in [0.0_f32, 0.25, 0.5, 0.75, 1.0] {
        let _ = write!(
            svg,
            r##"<line x1="{pad}" x2="{}" y1="{y}" y2="{y}" stroke="#e5e7eb"/><text x="4" y="{}" font-size="11" fill="#6b7280">{tick:.2}</text>"##,
            w - pad,
            y(tick) + 4.0,
            y = y(tick)
        );
    }
    for (k, c) in cards.iter().enumerate() {
        let colour = COLOURS[k % COLOURS.len()];
        let points: Vec<String> = c
            .turns
            .iter()
            .enumerate()
            .map(|(i, t)| format!("{:.1},{:.1}", x(i), y(t.score)))
            .collect();
        let _ = write!(
            svg,
            r#"<polyline fill="none" stroke="{colour}" stroke-width="2" points="{}"/>"#,
            points.join(" ")
        );
        for (i, t) in c.turns.iter().enumerate() {
            let _ = write!(
                svg,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{colour}"><title>{}: message #{} scored {:.3}</title></circle>"#,
                x(i),
                y(t.score),
                escape(&c.bot),
                t.message + 1,
                t.score
            );
        }
    }
    for (i, t) in cards
        .first()
        .map(|c| c.turns.as_slice())
        .unwrap_or(&[])
        .iter()
        .enumerate()
    {
        let _ = write!(
            svg,
            r##"<text x="{:.1}" y="{}" font-size="10" text-anchor="middle" fill="#6b7280">#{}</text>"##,
            x(i),
            h - pad + 16.0,
            t.message + 1
        );
    }
    svg.push_str("</svg>");
    svg
}

/// The report as a self-contained HTML page: a chart of the score per turn for each bot
/// (inline SVG), the summary, and every answer beside the original.
pub fn html(transcript: &Transcript, person: &TranscriptUser, cards: &[Scorecard]) -> String {
    let cases = cards.first().map_or(0, |c| c.turns.len());
    let svg = chart(cards, cases);

    let mut page = String::from(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>Bot evaluation</title><style>body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#111827}table{border-collapse:collapse;width:100%;margin:1rem 0}td,th{border-bottom:1px solid #e5e7eb;padding:.3rem .5rem;text-align:left;vertical-align:top}td.n{text-align:right;font-variant-numeric:tabular-nums}.key{display:inline-block;width:.8rem;height:.8rem;border-radius:2px;margin-right:.3rem}.err{color:#b91c1c}</style></head><body>",
    );
    let _ = write!(
        page,
        "<h1>Bot evaluation</h1><p>Emulating <strong>@{}</strong> over {cases} of their replies: each bot got the conversation up to a reply, and its answer was compared with the original by embedding similarity (1 is the same meaning).</p>{svg}",
        escape(&person.username)
    );
    page.push_str("<table><thead><tr><th>bot</th><th>mean</th><th>best</th><th>worst</th><th>failed</th></tr></thead><tbody>");
    for (k, c) in cards.iter().enumerate() {
        let at = |t: Option<&agency_core::eval::Turn>| {
            t.map_or("-".to_string(), |t| {
                format!("#{} ({:.3})", t.message + 1, t.score)
            })
        };
        let _ = write!(
            page,
            r#"<tr><td><span class="key" style="background:{}"></span>{}</td><td class="n">{:.3}</td><td>{}</td><td>{}</td><td class="n">{}</td></tr>"#,
            COLOURS[k % COLOURS.len()],
            escape(&c.bot),
            c.mean(),
            at(c.best()),
            at(c.worst()),
            c.failures()
        );
    }
    page.push_str(
        "</tbody></table><h2>Turn by turn</h2><table><thead><tr><th>#</th><th>original</th>",
    );
    for c in cards {
        let _ = write!(page, "<th>{}</th>", escape(&c.bot));
    }
    page.push_str("</tr></thead><tbody>");
    for i in 0..cases {
        let Some(message) = cards.first().map(|c| c.turns[i].message) else {
            break;
        };
        let _ = write!(
            page,
            "<tr><td class=\"n\">{}</td><td>{}</td>",
            message + 1,
            escape(&transcript.messages[message].text)
        );
        for c in cards {
            let t = &c.turns[i];
            let _ = match &t.answer {
                Ok(a) => write!(
                    page,
                    "<td><strong>{:.3}</strong> {}</td>",
                    t.score,
                    escape(a)
                ),
                Err(e) => write!(page, "<td class=\"err\">failed: {}</td>", escape(e)),
            };
        }
        page.push_str("</tr>");
    }
    page.push_str("</tbody></table></body></html>\n");
    page
}
