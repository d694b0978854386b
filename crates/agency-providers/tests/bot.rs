//! Calling webhook bots: the exact request a bot receives, its answers and failures, and the
//! addresses a server refuses to call.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed unwrap is a failed test

use std::net::IpAddr;
use std::time::Duration;

use agency_fakes::{Fake, Reply};
use agency_providers::bot::{BotClient, BotMessage, BotRequest, BotUser};
use agency_providers::http::net::is_public;
use agency_providers::http::{HttpSettings, ProviderError};
use secrecy::SecretString;
use serde_json::json;

fn settings() -> HttpSettings {
    HttpSettings {
        backoff_base: Duration::from_millis(1),
        backoff_max: Duration::from_millis(5),
        max_retries: 2,
        ..agency_providers::bot::default_settings()
    }
}

fn client() -> BotClient {
    BotClient::new(settings(), true).unwrap()
}

fn message(from: &str, id: &str, text: &str) -> BotMessage {
    BotMessage {
        from: from.into(),
        tagged: vec![],
        id: id.into(),
        text: text.into(),
        timestamp: "2026-11-24T09:00:00Z".into(),
    }
}

fn request() -> BotRequest {
    BotRequest {
        context: vec![message("u1", "m1", "the fermenter is at 31 °C")],
        conversation: vec![],
        message: BotMessage {
            tagged: vec!["b1".into()],
            ..message("u1", "m2", "@ferm what should we do?")
        },
        users: vec![BotUser {
            id: "b1".into(),
            username: "ferm".into(),
        }],
    }
}

fn key() -> SecretString {
    SecretString::from("ck_secret-caller-key")
}

#[tokio::test]
async fn a_bot_gets_the_request_with_its_caller_key_and_its_message_comes_back() {
    let fake = Fake::start().await;
    fake.push(Reply::json(json!({"message": "cool it to 30 °C"})));
    let url = format!("{}/hooks/ferm", fake.url);
    let answer = client().call(&url, &key(), &request(), None).await.unwrap();
    assert_eq!(answer, "cool it to 30 °C");
    let got = fake.requests();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].method, "POST");
    assert_eq!(got[0].path, "/hooks/ferm");
    assert_eq!(got[0].headers["x-caller-key"], "ck_secret-caller-key");
    assert_eq!(got[0].headers["content-type"], "application/json");
    assert_eq!(
        got[0].body,
        json!({
            "context": [{"from": "u1", "tagged": [], "id": "m1",
                         "text": "the fermenter is at 31 °C", "timestamp": "2026-11-24T09:00:00Z"}],
            "conversation": [],
            "message": {"from": "u1", "tagged": ["b1"], "id": "m2",
                        "text": "@ferm what should we do?", "timestamp": "2026-11-24T09:00:00Z"},
            "users": [{"id": "b1", "username": "ferm"}],
        })
    );
}

#[tokio::test]
async fn a_failing_bot_is_retried_and_a_malformed_answer_asked_for_once_more() {
    let fake = Fake::start().await;
    fake.push(Reply::Json {
        status: 503,
        body: json!({"error": {"message": "warming up"}}),
        headers: vec![],
    });
    fake.push(Reply::json(json!({"message": "here now"})));
    let url = format!("{}/bot", fake.url);
    let answer = client().call(&url, &key(), &request(), None).await.unwrap();
    assert_eq!(answer, "here now");
    assert_eq!(fake.requests().len(), 2);

    // A malformed answer is asked for once more, then is the error; an empty one is not.
    for (body, wanted, requests) in [
        ("{\"text\": \"hi\"}", "expected {\"message\"", 2),
        ("not json", "the bot answered `not json`", 2),
        ("{\"message\": \"  \"}", "empty", 1),
    ] {
        let fake = Fake::start().await;
        fake.otherwise(Reply::Raw {
            status: 200,
            content_type: "application/json".into(),
            body: body.into(),
        });
        let error = client()
            .call(&format!("{}/bot", fake.url), &key(), &request(), None)
            .await
            .unwrap_err();
        assert!(error.to_string().contains(wanted), "{error}");
        assert_eq!(fake.requests().len(), requests, "{body}");
    }
    // A bot's answer is bounded: past it, an error, not a server out of memory.
    let fake = Fake::start().await;
    fake.otherwise(Reply::Raw {
        status: 200,
        content_type: "application/json".into(),
        body: format!("{{\"message\": \"{}\"}}", "x".repeat(2 << 20)),
    });
    let error = client()
        .call(&format!("{}/bot", fake.url), &key(), &request(), None)
        .await
        .unwrap_err();
    assert!(matches!(error, ProviderError::TooLarge(_)), "{error:?}");
}

#[tokio::test]
async fn a_bot_that_never_answers_times_out() {
    let fake = Fake::start().await;
    fake.otherwise(Reply::Hang);
    let client = BotClient::new(
        HttpSettings {
            first_byte_timeout: Duration::from_millis(100),
            max_retries: 1,
            ..settings()
        },
        true,
    )
    .unwrap();
    let error = client
        .call(&format!("{}/bot", fake.url), &key(), &request(), None)
        .await
        .unwrap_err();
    assert!(matches!(error, ProviderError::Timeout(_)), "{error:?}");
    assert_eq!(
        fake.requests().len(),
        2,
        "one retry after the first timeout"
    );
}

#[tokio::test]
async fn loopback_and_private_endpoints_are_refused_unless_allowed() {
    let fake = Fake::start().await;
    fake.otherwise(Reply::json(json!({"message": "should not be reached"})));
    let strict = BotClient::new(settings(), false).unwrap();
    let port = fake.url.rsplit(':').next().unwrap();
    for url in [
        fake.url.clone(),
        format!("http://localhost:{port}/bot"),
        format!("http://[::1]:{port}/bot"),
        format!("http://10.1.2.3:{port}/bot"),
        "http://169.254.169.254/latest/meta-data".to_string(),
    ] {
        let error = strict
            .call(&url, &key(), &request(), None)
            .await
            .unwrap_err();
        assert!(
            error.to_string().contains("loopback or private"),
            "{url}: {error}"
        );
    }
    assert!(fake.requests().is_empty(), "nothing reached the bot");
    // A server configured to allow them calls them.
    client()
        .call(&format!("{}/bot", fake.url), &key(), &request(), None)
        .await
        .unwrap();
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test]
async fn only_plain_http_urls_without_credentials_are_endpoints() {
    for (url, wanted) in [
        ("not a url", "is not a URL"),
        ("ftp://example.com/bot", "http or https"),
        ("https://user:pw@example.com/bot", "credentials"),
    ] {
        let error = client().check_endpoint(url).await.unwrap_err();
        assert!(error.to_string().contains(wanted), "{url}: {error}");
    }
}

#[test]
fn public_addresses_are_told_from_the_rest() {
    for ip in ["8.8.8.8", "1.1.1.1", "2606:4700::1111", "100.128.0.1"] {
        assert!(is_public(ip.parse::<IpAddr>().unwrap()), "{ip}");
    }
    for ip in [
        "127.0.0.1",
        "10.0.0.1",
        "172.16.5.4",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "255.255.255.255",
        "224.0.0.1",
        "198.18.0.1",
        "::1",
        "::",
        "fd00::1",
        "fe80::1",
        "::ffff:127.0.0.1",
        "::ffff:10.0.0.1",
        "64:ff9b::a00:1",
    ] {
        assert!(!is_public(ip.parse::<IpAddr>().unwrap()), "{ip}");
    }
}
