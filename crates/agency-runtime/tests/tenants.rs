//! What an account's agency may reach (issue 17): no server variable, no private address
//! unless the operator allows it, errors in our words, and key changes that apply at once.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;

use agency_core::{AgencyDraft, AgencyId};
use agency_fakes::{Fake, openai};
use agency_providers::Providers;
use agency_runtime::{LOCAL_OWNER, Runtime, RuntimeError};
use secrecy::SecretString;

/// An account: anyone who signed up, not the operator.
const OWNER: &str = "0193f1e6-account";
const ANSWER: &str = r#"{"to": 0, "context": "hi"}"#;

async fn runtime(
    allow_private: bool,
) -> (
    Arc<Runtime>,
    Arc<dyn agency_store::Store>,
    tempfile::TempDir,
) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("agency.db").display());
    let store = agency_store::open(&url).await.unwrap();
    let mut providers = Providers::builtin();
    if allow_private {
        providers.allow_private_addresses().unwrap();
    }
    let master = agency_runtime::secrets::MasterKeySource::Hex(SecretString::from("42".repeat(32)));
    (
        Runtime::with_master_key(store.clone(), providers, Some(master)),
        store,
        dir,
    )
}

/// An agency whose manager runs on its own provider `x`, as an agency file declares it.
fn file(provider: &str) -> AgencyDraft {
    let text = format!(
        "name: own\nprotocol: json\nmanager: boss\nproviders:\n  x: {provider}\n\
         agents:\n  - {{ id: 1, name: boss, model: x/gpt }}\n"
    );
    agency_file::AgencyFile::parse("own.yaml", &text)
        .unwrap()
        .draft
}

/// A conversation of an account's agency whose manager runs on `fake`.
async fn conversation_on(rt: &Arc<Runtime>, fake: &Fake) -> agency_core::ConversationId {
    let agency = rt
        .agencies()
        .save(
            &file(&format!("{{ kind: openai, base_url: '{}/v1' }}", fake.url)),
            OWNER,
        )
        .await
        .unwrap();
    rt.conversations().start(&agency).await.unwrap().id
}

fn problems(result: Result<agency_core::Agency, RuntimeError>) -> Vec<(String, String)> {
    match result {
        Err(RuntimeError::Validation(v)) => v.0.into_iter().map(|e| (e.path, e.message)).collect(),
        other => panic!("expected problems, got {other:?}"),
    }
}

#[tokio::test]
async fn an_account_names_no_server_variable_and_no_private_address() {
    let (rt, _, _dir) = runtime(false).await;
    let found = problems(
        rt.agencies()
            .save(
                &file(
                    "{ kind: openai, base_url: 'http://127.0.0.1:9/v1', api_key_env: AGENCY_DB }",
                ),
                OWNER,
            )
            .await,
    );
    let paths: Vec<&str> = found.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(paths, ["providers.x.api_key_env", "providers.x.base_url"]);
    assert!(found[0].1.contains("provider-keys"), "{found:?}");
    assert!(found[1].1.contains("loopback or private"), "{found:?}");

    // A name resolving to a private address, and the rest of the private ranges.
    for url in [
        "http://localhost:9/v1",
        "http://[::1]:9/v1",
        "http://10.0.0.7/v1",
        "http://169.254.169.254/latest",
    ] {
        let found = problems(
            rt.agencies()
                .save(
                    &file(&format!("{{ kind: openai, base_url: '{url}' }}")),
                    OWNER,
                )
                .await,
        );
        assert_eq!(found[0].0, "providers.x.base_url", "{url}");
    }
    // The preview (no save) says so too.
    assert!(matches!(
        rt.agencies()
            .preview(OWNER, &file("{ kind: openai, api_key_env: HOME }")),
        Err(RuntimeError::Validation(_))
    ));
    // A public URL and a stored key are what an account uses.
    rt.agencies()
        .save(
            &file("{ kind: openai, base_url: 'https://api.example.com/v1' }"),
            OWNER,
        )
        .await
        .unwrap();
    // The operator (the CLI's local owner) keeps both.
    rt.agencies()
        .save(
            &file("{ kind: openai, base_url: 'http://127.0.0.1:9/v1', api_key_env: AGENCY_DB }"),
            LOCAL_OWNER,
        )
        .await
        .unwrap();
}

/// An account's agency saved before these checks (or written to the store some other way)
/// still reads no server variable and reaches no private address when it runs.
#[tokio::test]
async fn a_stored_account_agency_reaches_neither_when_it_runs() {
    let fake = Fake::start().await;
    fake.otherwise(openai::completion(ANSWER, 1, 1));
    let spec = format!(
        "{{ kind: openai, base_url: '{}/v1', api_key_env: PATH }}",
        fake.url
    );
    let agency = file(&spec)
        .validate(AgencyId::new(), OWNER, &|_| true)
        .unwrap();

    let (rt, store, _dir) = runtime(false).await;
    store.save_agency(&agency).await.unwrap();
    let conversation = rt.conversations().start(&agency).await.unwrap();
    let error = rt.send(conversation.id, "hello".into()).await.unwrap_err();
    assert!(error.to_string().contains("loopback or private"), "{error}");
    assert!(
        fake.requests().is_empty(),
        "nothing reached the private address"
    );

    // With private addresses allowed by the operator, it is called: without the variable.
    let (rt, store, _dir) = runtime(true).await;
    store.save_agency(&agency).await.unwrap();
    let conversation = rt.conversations().start(&agency).await.unwrap();
    let done = rt.send(conversation.id, "hello".into()).await.unwrap();
    assert_eq!(done.answer, "hi");
    let sent = fake.requests();
    assert_eq!(sent.len(), 1);
    assert!(
        !sent[0].headers.contains_key("authorization"),
        "{:?}",
        sent[0].headers
    );
}

/// Storing, replacing or deleting a key applies to the very next call.
#[tokio::test]
async fn key_changes_apply_to_the_next_call() {
    let fake = Fake::start().await;
    fake.otherwise(openai::completion(ANSWER, 1, 1));
    let (rt, _, _dir) = runtime(true).await;
    let conversation = conversation_on(&rt, &fake).await;
    let sent_key = |n: usize| {
        fake.requests()[n]
            .headers
            .get("authorization")
            .map(|v| v.to_string())
    };
    rt.send(conversation, "one".into()).await.unwrap();
    assert_eq!(sent_key(0), None);
    for (n, key) in ["sk-first", "sk-second"].into_iter().enumerate() {
        rt.settings()
            .put_provider_key(OWNER, "x", &SecretString::from(key))
            .await
            .unwrap();
        rt.send(conversation, "again".into()).await.unwrap();
        assert_eq!(sent_key(n + 1), Some(format!("Bearer {key}")));
    }
    assert!(rt.settings().delete_provider_key(OWNER, "x").await.unwrap());
    rt.send(conversation, "after".into()).await.unwrap();
    assert_eq!(sent_key(3), None, "a deleted key is not sent again");
}

/// What a provider an account named answers in its error body is not shown: our words are.
#[tokio::test]
async fn an_account_providers_errors_are_told_in_our_words() {
    let fake = Fake::start().await;
    fake.otherwise(openai::error(
        401,
        "db password is hunter2",
        "internal",
        None,
    ));
    let (rt, _, _dir) = runtime(true).await;
    let conversation = conversation_on(&rt, &fake).await;
    let error = rt
        .send(conversation, "hello".into())
        .await
        .unwrap_err()
        .to_string();
    assert!(!error.contains("hunter2"), "{error}");
    assert!(error.contains("HTTP 401"), "{error}");
    assert!(error.contains("refused the key"), "{error}");
}
