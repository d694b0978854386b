//! A provider's limits queue calls instead of flooding it. Each test asserts on what reached
//! the fake, never on how long anything took: a broken limit lets a second request through
//! while the first still holds its place, which these tests would see.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed unwrap is a failed test

use std::num::NonZeroU32;
use std::time::Duration;

use agency_fakes::{Fake, openai};
use agency_providers::http::{Answer, Endpoint, HttpSettings, ProviderError};
use serde_json::json;

/// A call's read that keeps the answer (and with it the call's place under the limits).
async fn answered(answer: Answer) -> Result<Answer, ProviderError> {
    Ok(answer)
}

fn settings() -> HttpSettings {
    HttpSettings {
        backoff_base: Duration::from_millis(1),
        backoff_max: Duration::from_millis(20),
        max_retries: 0,
        ..HttpSettings::default()
    }
}

#[tokio::test]
async fn a_busy_provider_makes_the_next_call_wait_its_turn() {
    let fake = Fake::start().await;
    fake.otherwise(openai::completion("ok", 1, 1));
    let endpoint = Endpoint::new(
        &fake.url,
        HttpSettings {
            max_concurrency: 1,
            ..settings()
        },
    )
    .unwrap();
    // The first answer holds the only place until it is read (or dropped).
    let first = endpoint
        .call(
            "/v1/chat/completions",
            &[],
            &json!({"n": 1}),
            None,
            false,
            answered,
        )
        .await
        .unwrap();
    let body = json!({"n": 2});
    let second = endpoint.call("/v1/chat/completions", &[], &body, None, false, answered);
    tokio::pin!(second);
    assert!(
        tokio::time::timeout(Duration::from_millis(300), &mut second)
            .await
            .is_err()
    );
    assert_eq!(fake.requests().len(), 1, "the second call waited");
    drop(first);
    second.await.unwrap();
    assert_eq!(fake.requests().len(), 2);
}

#[tokio::test]
async fn a_rate_limited_provider_starts_no_more_calls_than_allowed() {
    let fake = Fake::start().await;
    fake.otherwise(openai::completion("ok", 1, 1));
    let endpoint = Endpoint::new(
        &fake.url,
        HttpSettings {
            requests_per_minute: NonZeroU32::new(1),
            ..settings()
        },
    )
    .unwrap();
    endpoint
        .call(
            "/v1/chat/completions",
            &[],
            &json!({}),
            None,
            false,
            answered,
        )
        .await
        .unwrap();
    let body = json!({});
    let next = endpoint.call("/v1/chat/completions", &[], &body, None, false, answered);
    assert!(
        tokio::time::timeout(Duration::from_millis(300), next)
            .await
            .is_err()
    );
    assert_eq!(
        fake.requests().len(),
        1,
        "one call a minute: the second is still waiting"
    );
}

#[tokio::test]
async fn credentials_are_sent_and_bad_header_values_refused() {
    let fake = Fake::start().await;
    fake.otherwise(openai::completion("ok", 1, 1));
    let endpoint = Endpoint::new(&fake.url, settings()).unwrap();
    endpoint
        .call(
            "/x",
            &[("authorization", "Bearer sk-1".into())],
            &json!({}),
            None,
            false,
            answered,
        )
        .await
        .unwrap();
    assert_eq!(fake.requests()[0].headers["authorization"], "Bearer sk-1");
    let e = endpoint
        .call(
            "/x",
            &[("x-api-key", "bad\nvalue".into())],
            &json!({}),
            None,
            false,
            answered,
        )
        .await
        .err()
        .unwrap();
    assert!(e.to_string().contains("`x-api-key` header"), "{e}");
    assert!(
        !e.to_string().contains("bad"),
        "the value is not repeated: {e}"
    );
    assert_eq!(fake.requests().len(), 1);
}

/// Endpoints share the process's client: a second provider (as an agency's next revision
/// builds) reuses the first one's connection instead of building a client of its own, which
/// read the system's certificates, and opening another connection.
#[tokio::test]
async fn endpoints_share_one_client_and_its_connections() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        loop {
            let (mut socket, _) = listener.accept().await.unwrap();
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            // A keep-alive HTTP/1.1 server answering `{}` to each whole request (its headers,
            // then `content-length` bytes of body).
            tokio::spawn(async move {
                let mut pending = Vec::new();
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    while let Some(end) = request_end(&pending) {
                        pending.drain(..end);
                        let answer = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
                        if socket.write_all(answer.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => pending.extend_from_slice(&buf[..n]),
                    }
                }
            });
        }
    });
    for n in 0..2 {
        let endpoint = Endpoint::new(&url, settings()).unwrap();
        let answer = endpoint
            .call(
                "/v1/chat/completions",
                &[],
                &json!({"n": n}),
                None,
                false,
                answered,
            )
            .await
            .unwrap();
        assert_eq!(answer.response.text().await.unwrap(), "{}");
    }
    assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 1);
}

/// Where the first whole HTTP request in `bytes` ends, if it is all there.
fn request_end(bytes: &[u8]) -> Option<usize> {
    let head = bytes.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let length = String::from_utf8_lossy(&bytes[..head])
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    (bytes.len() >= head + length).then_some(head + length)
}
