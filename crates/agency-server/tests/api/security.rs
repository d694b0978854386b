//! An ordinary account trying what an attacker would: every body the server parses is bounded,
//! accounts name no server variable and reach no private address, keys change at once, log-in
//! failures slow attackers without locking out the owner.

use super::*;

/// Deep block nesting once overflowed the stack and aborted the process for every tenant.
#[tokio::test]
async fn hostile_bodies_get_a_clear_4xx_and_the_server_stays_up() {
    let app = App::spawn().await;
    let yaml = |body: String| {
        app.client
            .post(app.url("/api/agencies/import"))
            .header("content-type", "application/yaml")
            .body(body)
            .send()
    };
    let mut laughs = String::from("a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for (i, c) in ('b'..='z').enumerate() {
        let p = (b'a' + i as u8) as char;
        laughs.push_str(&format!(
            "{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        ));
    }
    for (body, says) in [
        ("- ".repeat(5000), "nest more than 64 deep"),
        ("- ".repeat(500_000), "nest more than 64 deep"),
        (
            format!("name: {}", "[".repeat(100_000)),
            "nest more than 64 deep",
        ),
        (
            format!("name: {}", "{a: ".repeat(100_000)),
            "nest more than 64 deep",
        ),
        (laughs, "anchors and aliases"),
        (
            format!("name: {}\n", "x".repeat(1_500_000)),
            "at most 1024 KiB",
        ),
    ] {
        let (status, err) = read(yaml(body).await.unwrap()).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{err}");
        assert!(err.to_string().contains(says), "{says}: {err}");
    }
    // Past the body limit, before anything reads it.
    let res = yaml("a".repeat(3 << 20)).await.unwrap();
    assert_eq!(res.status(), StatusCode::PAYLOAD_TOO_LARGE);

    // JSON bodies: deep arrays and objects where a draft, a message or a chat is expected.
    let deep_array = "[".repeat(100_000);
    let deep_object = r#"{"a":"#.repeat(100_000);
    let conversation = app.new_conversation().await;
    for path in [
        "/api/agencies".to_string(),
        "/api/agencies/preview".to_string(),
        format!("/api/conversations/{conversation}/messages"),
        "/api/rooms".to_string(),
        "/api/auth/login".to_string(),
    ] {
        for body in [&deep_array, &deep_object] {
            let res = app
                .client
                .post(app.url(&path))
                .header("content-type", "application/json")
                .body(body.clone())
                .send()
                .await
                .unwrap();
            let status = res.status();
            assert!(status.is_client_error(), "{path}: {status}");
        }
    }
    let (status, body) = app.get("/healthz").await;
    assert_eq!(status, StatusCode::OK, "{body}");
}
