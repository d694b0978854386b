//! Showing the team's work (issue 37): asked for by `x-agency-show-work: 1` on either API, or
//! by a Responses request's `reasoning.summary`, each hop before the answer is a line of
//! reasoning — Chat Completions' `reasoning_content`, the Responses API's `reasoning` item.
//! Not asked for, nothing changes.

use super::*;

const SHOW: &str = "x-agency-show-work";

/// The studio's work on `input`: a line a hop, in order.
fn work(input: &str) -> Vec<String> {
    let built = format!("fn main() {{ /* Please build: {input} */ }}");
    let review = format!("Please review: {built}");
    vec![
        format!("manager asked programmer: Please build: {input}"),
        format!("programmer answered manager: {built}"),
        format!("manager asked reviewer: {review}"),
        format!(
            "reviewer called builtin/echo with {}",
            json!({ "text": review })
        ),
        format!("builtin/echo answered reviewer: {review}"),
        format!("reviewer answered manager: Approved: {review}"),
    ]
}

impl App {
    /// `POST path` with `body` and the studio's key, and `x-agency-show-work: show` if given.
    async fn showing(&self, path: &str, body: &Value, show: Option<&str>) -> Reply {
        let rb = self.post(path, Some(&self.key)).json(body);
        let rb = match show {
            Some(v) => rb.header(SHOW, v),
            None => rb,
        };
        Reply::of(rb).await
    }
}

/// The object keys of `v`, sorted.
fn keys(v: &Value) -> Vec<String> {
    let mut keys: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
    keys.sort();
    keys
}

/// The events' types.
fn kinds(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn a_completion_shows_the_work_as_reasoning_content_when_asked() {
    let app = App::spawn().await;
    let body = json!({"model": "studio", "messages": [user(TODO_APP)]});
    let r = app.showing(CHAT, &body, Some("1")).await;
    let shown = r.ok();
    let message = &shown["choices"][0]["message"];
    assert_eq!(message["content"], json!(answer(TODO_APP)));
    assert_eq!(
        message["reasoning_content"],
        json!(work(TODO_APP).join("\n"))
    );
    assert_usage(&shown["usage"]);

    // The message sent back whole in the history (as chat apps do) continues the conversation.
    let next = json!({"model": "studio", "messages": [user(TODO_APP), message, user("more")]});
    let again = app.showing(CHAT, &next, Some("1")).await;
    assert_eq!(again.conversation(), r.conversation());
    assert_eq!(app.turns(r.conversation()).await, [1, 2]);

    // Not asked (or asked not to): the message as before, without the field.
    for show in [None, Some("0")] {
        let plain = app.showing(CHAT, &body, show).await.ok();
        let message = &plain["choices"][0]["message"];
        assert_eq!(
            keys(message),
            ["annotations", "content", "refusal", "role"],
            "{plain}"
        );
        assert_eq!(message["content"], json!(answer(TODO_APP)));
        assert_eq!(keys(&plain), keys(&shown));
    }
}

#[tokio::test]
async fn a_streamed_completion_sends_the_work_before_the_answer() {
    let app = App::spawn().await;
    let body = json!({"model": "studio", "messages": [user(TODO_APP)], "stream": true});
    let events = app.showing(CHAT, &body, Some("1")).await.events();
    assert_eq!(events.last(), Some(&json!("[DONE]")));
    let deltas: Vec<&Value> = events[..events.len() - 1]
        .iter()
        .map(|c| &c["choices"][0]["delta"])
        .collect();
    // The role chunk, a line of work a chunk, then the answer's pieces and the finish.
    assert_eq!(deltas[0], &json!({"role": "assistant", "content": ""}));
    let lines = work(TODO_APP);
    for (i, line) in lines.iter().enumerate() {
        let sent = if i == 0 {
            line.clone()
        } else {
            format!("\n{line}")
        };
        assert_eq!(deltas[1 + i], &json!({ "reasoning_content": sent }));
    }
    let rest = &deltas[1 + lines.len()..];
    assert!(rest.iter().all(|d| d.get("reasoning_content").is_none()));
    let text: String = rest.iter().filter_map(|d| d["content"].as_str()).collect();
    assert_eq!(text, answer(TODO_APP));

    // Not asked: no chunk carries work, and the chunks are as many as before.
    let events = app.showing(CHAT, &body, None).await.events();
    let deltas: Vec<&Value> = events[..events.len() - 1]
        .iter()
        .map(|c| &c["choices"][0]["delta"])
        .collect();
    assert!(deltas.iter().all(|d| d.get("reasoning_content").is_none()));
    assert_eq!(deltas[0], &json!({"role": "assistant", "content": ""}));
    let text: String = deltas[1..]
        .iter()
        .filter_map(|d| d["content"].as_str())
        .collect();
    assert_eq!(text, answer(TODO_APP));
}

/// The reasoning item of the studio's work on `input`, checked: its id.
fn assert_reasoning(item: &Value, input: &str) -> String {
    let summary: Vec<Value> = work(input)
        .into_iter()
        .map(|text| json!({"type": "summary_text", "text": text}))
        .collect();
    let id = item["id"].as_str().unwrap().to_string();
    assert!(id.starts_with("rs_"), "{item}");
    assert_eq!(
        item,
        &json!({"type": "reasoning", "id": id, "summary": summary, "status": "completed"})
    );
    id
}

#[tokio::test]
async fn a_response_begins_with_the_work_as_a_reasoning_item_when_asked() {
    let app = App::spawn().await;
    let asked = json!({"model": "studio", "input": TODO_APP, "reasoning": {"summary": "auto"}});
    let body = app.showing("/v1/responses", &asked, None).await.ok();
    let output = body["output"].as_array().unwrap();
    assert_eq!(output.len(), 2, "{body}");
    assert_reasoning(&output[0], TODO_APP);
    assert_eq!(output[1]["type"], json!("message"));
    assert_eq!(output[1]["content"][0]["text"], json!(answer(TODO_APP)));
    assert_eq!(
        body["reasoning"],
        json!({"effort": null, "summary": "auto"})
    );
    // The summaries are written by the server, not a model: no reasoning tokens.
    assert_eq!(
        body["usage"]["output_tokens_details"],
        json!({"reasoning_tokens": 0})
    );
    // Stored as sent.
    let id = body["id"].as_str().unwrap();
    let got = app
        .get(&format!("/v1/responses/{id}"), Some(&app.key))
        .await;
    assert_eq!(got.ok(), body);

    // The header asks the same; the request's `reasoning` is echoed as it was.
    let plain = json!({"model": "studio", "input": TODO_APP});
    let body = app.showing("/v1/responses", &plain, Some("1")).await.ok();
    assert_reasoning(&body["output"][0], TODO_APP);
    assert_eq!(body["reasoning"], json!({"effort": null, "summary": null}));

    // Not asked (an effort alone asks nothing): the answer alone.
    for request in [
        plain.clone(),
        json!({"model": "studio", "input": TODO_APP, "reasoning": {"effort": "high"}}),
        json!({"model": "studio", "input": TODO_APP, "reasoning": {"summary": null}}),
    ] {
        let body = app.showing("/v1/responses", &request, None).await.ok();
        let output = body["output"].as_array().unwrap();
        assert_eq!(output.len(), 1, "{body}");
        assert_eq!(output[0]["type"], json!("message"));
        assert_eq!(body["reasoning"], json!({"effort": null, "summary": null}));
    }
}

#[tokio::test]
async fn a_streamed_response_streams_the_work_before_the_answer() {
    let app = App::spawn().await;
    let asked = json!({"model": "studio", "input": TODO_APP, "stream": true,
                       "reasoning": {"summary": "detailed"}});
    let events = app.showing("/v1/responses", &asked, None).await.events();
    let lines = work(TODO_APP);
    let n = lines.len();
    let mut expected = vec!["response.created", "response.in_progress"];
    expected.push("response.output_item.added");
    for _ in 0..n {
        expected.extend([
            "response.reasoning_summary_part.added",
            "response.reasoning_summary_text.delta",
            "response.reasoning_summary_text.done",
            "response.reasoning_summary_part.done",
        ]);
    }
    expected.extend([
        "response.output_item.done",
        "response.output_item.added",
        "response.content_part.added",
    ]);
    let got = kinds(&events);
    let deltas = got
        .iter()
        .filter(|k| *k == "response.output_text.delta")
        .count();
    assert!(deltas > 0, "{got:?}");
    expected.extend(std::iter::repeat_n("response.output_text.delta", deltas));
    expected.extend([
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]);
    assert_eq!(got, expected);
    let numbers: Vec<u64> = events
        .iter()
        .map(|e| e["sequence_number"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, (0..events.len() as u64).collect::<Vec<_>>());

    // The reasoning item: added empty, a summary part a line, done whole; output index 0.
    let added = &events[2];
    let id = added["item"]["id"].as_str().unwrap();
    assert_eq!(
        added,
        &json!({"type": "response.output_item.added", "sequence_number": 2, "output_index": 0,
                "item": {"type": "reasoning", "id": id, "summary": [], "status": "in_progress"}})
    );
    for (i, line) in lines.iter().enumerate() {
        let at = 3 + 4 * i;
        let seq = |k: usize| json!(at + k);
        let part = |text: &str| json!({"type": "summary_text", "text": text});
        assert_eq!(
            events[at..at + 4],
            [
                json!({"type": "response.reasoning_summary_part.added", "sequence_number": seq(0),
                       "item_id": id, "output_index": 0, "summary_index": i, "part": part("")}),
                json!({"type": "response.reasoning_summary_text.delta", "sequence_number": seq(1),
                       "item_id": id, "output_index": 0, "summary_index": i, "delta": line}),
                json!({"type": "response.reasoning_summary_text.done", "sequence_number": seq(2),
                       "item_id": id, "output_index": 0, "summary_index": i, "text": line}),
                json!({"type": "response.reasoning_summary_part.done", "sequence_number": seq(3),
                       "item_id": id, "output_index": 0, "summary_index": i, "part": part(line)}),
            ]
        );
    }
    let done = &events[3 + 4 * n];
    assert_eq!(done["output_index"], json!(0));
    assert_eq!(assert_reasoning(&done["item"], TODO_APP), id);

    // The answer's message item after it, at output index 1.
    let message_events = &events[4 + 4 * n..events.len() - 1];
    assert!(
        message_events.iter().all(|e| e["output_index"] == json!(1)),
        "{message_events:?}"
    );
    let completed = &events[events.len() - 1]["response"];
    let output = completed["output"].as_array().unwrap();
    assert_eq!(output.len(), 2);
    assert_eq!(output[0], done["item"]);
    assert_eq!(output[1], message_events[message_events.len() - 1]["item"]);
    assert_eq!(output[1]["content"][0]["text"], json!(answer(TODO_APP)));
    assert_eq!(
        completed["reasoning"],
        json!({"effort": null, "summary": "detailed"})
    );
    let stored = completed["id"].as_str().unwrap();
    let got = app
        .get(&format!("/v1/responses/{stored}"), Some(&app.key))
        .await;
    assert_eq!(&got.ok(), completed);

    // Not asked: the events are the answer's alone, at output index 0.
    let plain = json!({"model": "studio", "input": TODO_APP, "stream": true});
    let events = app.showing("/v1/responses", &plain, None).await.events();
    let kinds = kinds(&events);
    assert!(!kinds.iter().any(|k| k.contains("reasoning")), "{kinds:?}");
    assert_eq!(kinds[2], "response.output_item.added");
    assert!(
        events[2..events.len() - 1]
            .iter()
            .all(|e| e["output_index"] == json!(0))
    );
    assert_eq!(
        events[events.len() - 1]["response"]["output"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn what_asks_for_the_work_is_checked_as_openai_checks_it() {
    let app = App::spawn().await;
    let r = app
        .showing(
            "/v1/responses",
            &json!({"model": "studio", "input": "hi", "reasoning": {"summary": "verbose"}}),
            None,
        )
        .await;
    let message = r.error(
        StatusCode::BAD_REQUEST,
        Some("invalid_value"),
        Some("reasoning.summary"),
    );
    assert!(
        message.contains("'auto', 'concise', and 'detailed'"),
        "{message}"
    );
    app.showing(
        "/v1/responses",
        &json!({"model": "studio", "input": "hi", "reasoning": "high"}),
        None,
    )
    .await
    .error(
        StatusCode::BAD_REQUEST,
        Some("invalid_type"),
        Some("reasoning"),
    );
    for path in [CHAT, "/v1/responses"] {
        let body = json!({"model": "studio", "messages": [user("hi")], "input": "hi"});
        let r = app.showing(path, &body, Some("yes")).await;
        let message = r.error(StatusCode::BAD_REQUEST, None, None);
        assert!(message.contains(SHOW), "{message}");
    }
}

#[tokio::test]
async fn approvals_pause_with_the_work_shown_and_resume() {
    let app = App::spawn().await;
    let key = clerk(&app).await;
    for stream in [false, true] {
        let r = Reply::of(
            app.post("/v1/responses", Some(&key))
                .header(SHOW, "1")
                .json(&json!({"model": "clerk", "input": "ship it", "stream": stream})),
        )
        .await;
        let body = if stream {
            let events = r.events();
            assert_eq!(
                kinds(&events),
                [
                    "response.created",
                    "response.in_progress",
                    "response.output_item.added",
                    "response.reasoning_summary_part.added",
                    "response.reasoning_summary_text.delta",
                    "response.reasoning_summary_text.done",
                    "response.reasoning_summary_part.done",
                    "response.output_item.done",
                    "response.output_item.added",
                    "response.output_item.done",
                    "response.completed",
                ]
            );
            assert_eq!(events[8]["output_index"], json!(1));
            assert_eq!(events[8]["item"]["type"], json!("mcp_approval_request"));
            events[10]["response"].clone()
        } else {
            r.ok()
        };
        let output = body["output"].as_array().unwrap();
        assert_eq!(output.len(), 2, "{body}");
        assert_eq!(output[0]["type"], json!("reasoning"));
        assert_eq!(
            output[0]["summary"],
            json!([{"type": "summary_text",
                    "text": "clerk called builtin/echo with {\"text\":\"ship it\"}"}])
        );
        let item = &output[1];
        assert_eq!(item["type"], json!("mcp_approval_request"));
        let id = body["id"].as_str().unwrap();
        let answer = answering(&app, &key, id, item, true).await;
        assert_eq!(answer, "Echoed: ship it");
    }
}

#[tokio::test]
async fn a_paused_completion_shows_the_call_it_paused_on() {
    let app = App::spawn().await;
    let fake = Fake::start().await;
    let (_, key) = solo(&app, &fake).await;
    fake.push(openai::tool_call_stream(
        &[],
        &[agency_fakes::Call::new(
            "call_w",
            "get_weather",
            r#"{"city":"Oslo"}"#,
        )],
        2,
        2,
    ));
    let r = Reply::of(
        app.post(CHAT, Some(&key))
            .header(SHOW, "1")
            .json(&json!({"model": "solo", "messages": [user("Weather?")],
                          "tools": [weather_tool()], "stream": true})),
    )
    .await;
    let events = r.events();
    let deltas: Vec<&Value> = events[..events.len() - 1]
        .iter()
        .map(|c| &c["choices"][0]["delta"])
        .collect();
    assert_eq!(
        deltas[1],
        &json!({"reasoning_content": "only called get_weather with {\"city\":\"Oslo\"}"})
    );
    assert_eq!(deltas[2]["tool_calls"][0]["id"], json!("call_w"));
    let finishes: Vec<&Value> = events[..events.len() - 1]
        .iter()
        .map(|c| &c["choices"][0]["finish_reason"])
        .filter(|f| !f.is_null())
        .collect();
    assert_eq!(finishes, [&json!("tool_calls")]);
}

#[tokio::test]
async fn a_structured_answer_is_checked_with_the_work_shown() {
    let app = App::spawn().await;
    let fake = Fake::start().await;
    let (_, key) = solo(&app, &fake).await;
    fake.push(openai::completion(
        r#"{"to": 0, "context": "It is 21 degrees in Oslo."}"#,
        1,
        1,
    ));
    fake.push(openai::completion(
        r#"{"to": 0, "context": {"city": "Oslo", "temperature_c": 21}}"#,
        1,
        1,
    ));
    let format = weather_format()["json_schema"].clone();
    let mut text_format = json!({"type": "json_schema"});
    for field in ["name", "strict", "schema"] {
        text_format[field] = format[field].clone();
    }
    let r = Reply::of(app.post("/v1/responses", Some(&key)).json(&json!({
        "model": "solo", "input": "Weather in Oslo?", "text": {"format": text_format},
        "reasoning": {"summary": "concise"},
    })))
    .await;
    let body = r.ok();
    assert_eq!(
        body["output"][0]["summary"],
        json!([{"type": "summary_text", "text": "only's reply could not be used; it was asked again"}]),
        "{body}"
    );
    let answer = body["output"][1]["content"][0]["text"].as_str().unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(answer).unwrap(),
        json!({"city": "Oslo", "temperature_c": 21})
    );
}
