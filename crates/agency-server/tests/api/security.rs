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

/// A connection that opens and then says nothing, or trickles its headers a byte at a time,
/// is closed after the header deadline; past the cap on open connections the server answers
/// 503 at once — it keeps accepting — and serves again once idle ones are closed.
#[tokio::test]
async fn idle_and_slow_connections_are_bounded_and_the_server_keeps_answering() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let app = App::spawn_with(agency_server::Connections {
        max: 40,
        max_per_address: None,
        header_timeout: std::time::Duration::from_secs(1),
        ..Default::default()
    })
    .await;
    let addr = app.base.trim_start_matches("http://").to_string();

    // A slow loris: a header byte every 100 ms, never the end of its headers.
    let mut loris = tokio::net::TcpStream::connect(&addr).await.unwrap();
    loris
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n")
        .await
        .unwrap();
    let trickle = async {
        loop {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            if loris.write_all(b"x").await.is_err() {
                return;
            }
            let mut byte = [0u8; 1];
            if let Ok(Ok(0) | Err(_)) =
                tokio::time::timeout(std::time::Duration::from_millis(1), loris.read(&mut byte))
                    .await
            {
                return;
            }
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(60), trickle)
        .await
        .expect("the trickling connection is closed");

    // The cap filled with idle connections (the test's own client holds one more, maybe).
    let mut idle = Vec::new();
    for _ in 0..40 {
        idle.push(tokio::net::TcpStream::connect(&addr).await.unwrap());
    }
    let fresh = reqwest::Client::new();
    let res = fresh.get(app.url("/healthz")).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(res.headers()["retry-after"], "1");
    let (status, body) = read(res).await;
    assert!(
        error_message(status, &body).contains("connections"),
        "{body}"
    );

    // The idle ones are closed after the deadline, and everyone is served again.
    let mut served = false;
    for _ in 0..100 {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        if let Ok(res) = reqwest::Client::new().get(app.url("/healthz")).send().await
            && res.status() == StatusCode::OK
        {
            served = true;
            break;
        }
    }
    assert!(
        served,
        "the server answers again once idle connections are closed"
    );
    for mut socket in idle {
        let mut byte = [0u8; 1];
        let closed =
            tokio::time::timeout(std::time::Duration::from_secs(30), socket.read(&mut byte))
                .await
                .expect("closed by the server");
        assert!(matches!(closed, Ok(0) | Err(_)), "{closed:?}");
    }
}

/// Optionally, a cap per client address: one address cannot take every connection.
#[tokio::test]
async fn a_cap_per_address_answers_503_past_it() {
    let app = App::spawn_with(agency_server::Connections {
        max_per_address: Some(3),
        ..agency_server::Connections::default()
    })
    .await;
    let addr = app.base.trim_start_matches("http://").to_string();
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(tokio::net::TcpStream::connect(&addr).await.unwrap());
    }
    let res = reqwest::Client::new()
        .get(app.url("/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    drop(held);
    let mut served = false;
    for _ in 0..50 {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let res = reqwest::Client::new()
            .get(app.url("/healthz"))
            .send()
            .await
            .unwrap();
        if res.status() == StatusCode::OK {
            served = true;
            break;
        }
    }
    assert!(served, "closed connections give their places back");
}

/// A thousand clients each holding an event stream open, with a short header deadline: none
/// is cut, every one sees the turn that runs meanwhile, and others are still served.
#[tokio::test]
async fn a_thousand_open_event_streams_are_not_cut() {
    use futures::StreamExt;
    let app = App::spawn_with(agency_server::Connections {
        header_timeout: std::time::Duration::from_secs(1),
        ..agency_server::Connections::default()
    })
    .await;
    // Both ends of two thousand sockets live in this process.
    rlimit::increase_nofile_limit(8192).unwrap();
    let conversation = app.new_conversation().await;
    let mut streams = Vec::new();
    for _ in 0..1000 {
        // Each stream still open holds its connection: the next one opens another.
        let res = app
            .client
            .get(app.url(&format!("/api/conversations/{conversation}/events")))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        streams.push(res.bytes_stream());
    }
    // Longer than the header deadline: the streams are not idle connections.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let (status, _) = app.get("/healthz").await;
    assert_eq!(status, StatusCode::OK);
    app.say(&conversation, "a todo app").await;
    for stream in &mut streams {
        let mut seen = String::new();
        while !seen.contains("turn_finished") {
            let chunk = tokio::time::timeout(std::time::Duration::from_secs(60), stream.next())
                .await
                .expect("the stream goes on")
                .expect("the stream is not closed")
                .unwrap();
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
    }
}

/// Signing up with an email that has an account says nothing of it: it is a log-in with that
/// password, answered and throttled as one.
#[tokio::test]
async fn sign_up_does_not_say_that_an_email_has_an_account() {
    let app = App::spawn().await;
    let anon = reqwest::Client::new();
    let post = |path: &str, password: &str| {
        anon.post(app.url(path))
            .json(&json!({ "email": "ADA@example.com ", "password": password }))
            .send()
    };
    let (status, signed) = read(post("/api/auth/signup", "long enough").await.unwrap()).await;
    let (login_status, logged) = read(post("/api/auth/login", "long enough").await.unwrap()).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{signed}");
    assert_eq!((status, &signed), (login_status, &logged));
    let text = signed.to_string().to_lowercase();
    assert!(
        !text.contains("exist") && !text.contains("already"),
        "{signed}"
    );

    // With the account's password it logs in, as a new account's sign-up does.
    let (status, me) = read(
        post("/api/auth/signup", "correct horse battery")
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{me}");
    assert_eq!(me["email"], "ada@example.com");

    // Wrong guesses through sign-up count as failed log-ins: past five, this address waits.
    for _ in 0..4 {
        post("/api/auth/signup", "a wrong guess").await.unwrap();
    }
    let res = post("/api/auth/signup", "correct horse battery")
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
}
