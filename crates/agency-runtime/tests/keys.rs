//! API keys: shown once, stored as a keyed hash, refused when missing, wrong, expired, revoked
//! or over their rate.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed unwrap is a failed test

mod common;

use std::sync::Arc;
use std::time::Duration;

use agency_runtime::keys::{self, AuthError, Authenticator, Keyring};
use agency_runtime::secrets::MasterKeySource;
use secrecy::ExposeSecret;

#[tokio::test]
async fn keys_are_hashed_checked_and_limited() {
    let h = common::Harness::sqlite().await;
    let dir = tempfile::tempdir().unwrap();
    let master = MasterKeySource::File(dir.path().join("agency.key"));
    let store = h.store.clone();
    let agency = h
        .agency(common::draft(
            "json",
            16,
            vec![common::agent(1, "m", "builtin/rules", &[])],
        ))
        .await;

    let keyring = Keyring::load(&*store, &master).await.unwrap();
    // A second load (another process) finds the same secret.
    let again = Keyring::load(&*store, &master).await.unwrap();
    assert_eq!(keyring.hash("agk_x"), again.hash("agk_x"));
    assert_eq!(keyring.hash("agk_x").len(), 64);

    let (dev, plain) = keys::create_key(
        &*store,
        &keyring,
        &agency,
        "dev",
        None,
        Some(2),
        agency_core::KeyBudgets::default(),
    )
    .await
    .unwrap();
    let plain = plain.expose_secret().to_string();
    assert!(
        plain.starts_with("agk_") && plain.len() == 4 + 64,
        "{plain}"
    );
    assert!(plain.starts_with(&dev.prefix));
    assert_ne!(dev.hash, plain);
    let stored = store.api_keys(agency.id).await.unwrap();
    assert_eq!(stored, vec![dev.clone()]);
    assert!(
        format!("{stored:?}").find(&plain[4..]).is_none(),
        "the key is stored nowhere"
    );
    assert!(
        keys::create_key(
            &*store,
            &keyring,
            &agency,
            "dev",
            None,
            None,
            agency_core::KeyBudgets::default()
        )
        .await
        .is_err(),
        "names are unique"
    );
    assert!(
        keys::create_key(
            &*store,
            &keyring,
            &agency,
            " ",
            None,
            None,
            agency_core::KeyBudgets::default()
        )
        .await
        .is_err()
    );

    let auth = Authenticator::new(store.clone(), keyring);
    assert_eq!(auth.authenticate(None).await, Err(AuthError::Missing));
    assert!(matches!(
        auth.authenticate(Some("sk-openai-style")).await,
        Err(AuthError::Invalid(_))
    ));
    let wrong = format!("agk_{}", "0".repeat(64));
    match auth.authenticate(Some(&wrong)).await {
        Err(AuthError::Invalid(shown)) => assert!(
            !shown.contains(&"0".repeat(10)),
            "errors show only the start: {shown}"
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(auth.authenticate(Some(&plain)).await.unwrap().id, dev.id);
    // Two a minute: the third is refused with a time to wait.
    assert!(auth.authenticate(Some(&plain)).await.is_ok());
    match auth.authenticate(Some(&plain)).await {
        Err(AuthError::RateLimited {
            limit: 2,
            retry_after,
        }) => assert!(retry_after > Duration::ZERO),
        other => panic!("{other:?}"),
    }
    auth.flush_usage().await.unwrap();
    assert!(
        store.api_keys(agency.id).await.unwrap()[0]
            .last_used_at
            .is_some()
    );

    // Revoked and expired keys are refused once the short cache has passed.
    let (_, short) = keys::create_key(
        &*store,
        &keyring_of(&store, &master).await,
        &agency,
        "short",
        Some(Duration::from_secs(1)),
        None,
        agency_core::KeyBudgets::default(),
    )
    .await
    .unwrap();
    let auth = Arc::new(Authenticator::new(
        store.clone(),
        keyring_of(&store, &master).await,
    ));
    assert!(auth.authenticate(Some(short.expose_secret())).await.is_ok());
    assert!(
        store
            .revoke_api_key(agency.id, "dev", chrono::Utc::now())
            .await
            .unwrap()
    );
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert!(matches!(
        auth.authenticate(Some(&plain)).await,
        Err(AuthError::Revoked(_))
    ));
    assert!(matches!(
        auth.authenticate(Some(short.expose_secret())).await,
        Err(AuthError::Expired(_))
    ));
}

async fn keyring_of(store: &Arc<dyn agency_store::Store>, master: &MasterKeySource) -> Keyring {
    Keyring::load(&**store, master).await.unwrap()
}
