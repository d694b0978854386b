//! The committed OpenAPI document is the one the server serves, and it cannot carry secrets.
//! After changing the API: `UPDATE_OPENAPI=1 cargo test -p agency-server --test openapi`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed unwrap is a failed test

use serde_json::Value;

const COMMITTED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.json");

#[test]
fn the_committed_document_is_current() {
    let served = agency_server::openapi::document();
    if std::env::var("UPDATE_OPENAPI").is_ok_and(|v| v == "1") {
        std::fs::write(COMMITTED, served).unwrap();
    }
    let committed = std::fs::read_to_string(COMMITTED).unwrap_or_default();
    assert!(
        committed == served,
        "crates/agency-server/openapi.json is stale: run `UPDATE_OPENAPI=1 cargo test -p agency-server --test openapi` and commit it"
    );
}

/// Every property name anywhere in the document.
fn properties(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            if let Some(Value::Object(props)) = map.get("properties") {
                out.extend(props.keys().cloned());
            }
            for child in map.values() {
                properties(child, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|c| properties(c, out)),
        _ => {}
    }
}

#[test]
fn no_schema_can_carry_a_secret_out() {
    let doc: Value = serde_json::from_str(agency_server::openapi::document()).unwrap();
    let mut names = Vec::new();
    properties(&doc, &mut names);
    assert!(
        names.contains(&"csrf_token".to_string()),
        "the walk finds properties"
    );
    for secret in [
        "password_hash",
        "hash",
        "token_hash",
        "sealed",
        "nonce",
        "system_prompt",
    ] {
        assert!(
            !names.iter().any(|n| n == secret),
            "a schema has a `{secret}` property"
        );
    }
    // A signing secret is shown once, in the answer that made it, and nowhere else.
    assert_eq!(names.iter().filter(|n| *n == "secret").count(), 1);
    let created = doc["components"]["schemas"]["CreatedApprovalWebhook"].to_string();
    assert!(created.contains("\"secret\""), "{created}");
    // Write-only fields exist only in request bodies: `password` in credentials, a provider
    // key when it is stored; no response schema has them.
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    for (name, schema) in schemas {
        let props: Vec<&String> = schema["properties"]
            .as_object()
            .map(|p| p.keys().collect())
            .unwrap_or_default();
        if props.iter().any(|p| *p == "password" || *p == "key") {
            assert!(
                ["Credentials", "PutProviderKey", "CreatedKey"].contains(&name.as_str()),
                "{name} carries a password or key"
            );
        }
    }
}
