//! Provider keys stored sealed, read back, and carried across a master key rotation.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed unwrap is a failed test

use agency_runtime::secrets::{self, MasterKey, MasterKeySource};
use secrecy::{ExposeSecret, SecretString};

#[tokio::test]
async fn keys_survive_rotation_and_never_sit_in_clear() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("a.db");
    let store = agency_store::open(&format!("sqlite://{}", db.display()))
        .await
        .unwrap();
    let file = dir.path().join("agency.key");
    let source = MasterKeySource::File(file.clone());
    let key = SecretString::from("sk-live-0123456789-SECRET-wxyz");

    assert!(
        secrets::provider_key(&*store, &source, "local", "openai")
            .await
            .unwrap()
            .is_none()
    );
    secrets::store_provider_key(&*store, &source, "local", "openai", &key)
        .await
        .unwrap();
    secrets::store_provider_key(
        &*store,
        &source,
        "local",
        "anthropic",
        &SecretString::from("sk-ant-xyz"),
    )
    .await
    .unwrap();
    assert!(
        file.exists(),
        "the master key file is made when the first key is stored"
    );
    let read = secrets::provider_key(&*store, &source, "local", "openai")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.expose_secret(), key.expose_secret());
    assert_eq!(
        store.provider_keys("local").await.unwrap()[1].suffix,
        "wxyz"
    );

    // The database file never holds the key in clear.
    drop(store);
    let bytes = std::fs::read(&db).unwrap();
    let wal = std::fs::read(dir.path().join("a.db-wal")).unwrap_or_default();
    for haystack in [&bytes, &wal] {
        assert!(
            !haystack.windows(6).any(|w| w == b"SECRET"),
            "the key is in the database in clear"
        );
    }
    let store = agency_store::open(&format!("sqlite://{}", db.display()))
        .await
        .unwrap();

    let before = std::fs::read_to_string(&file).unwrap();
    let (n, printed) = secrets::rotate_master_key(&*store, &source).await.unwrap();
    assert_eq!((n, printed), (2, None));
    assert_ne!(std::fs::read_to_string(&file).unwrap(), before);
    let read = secrets::provider_key(&*store, &source, "local", "openai")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.expose_secret(), key.expose_secret());

    // A rotation interrupted after re-sealing the rows, before replacing the file: the staged
    // `agency.key.new` still opens them.
    let current = MasterKey::load(&source).unwrap().unwrap();
    let staged =
        MasterKey::load_or_create(&MasterKeySource::File(dir.path().join("agency.key.new")))
            .unwrap();
    let resealed: Vec<_> = store
        .all_provider_keys()
        .await
        .unwrap()
        .iter()
        .map(|k| {
            staged
                .seal(&k.owner, &k.provider, &current.open(k).unwrap())
                .unwrap()
        })
        .collect();
    store.reseal_provider_keys(&resealed).await.unwrap();
    assert!(current.open(&resealed[0]).is_err());
    let read = secrets::provider_key(&*store, &source, "local", "openai")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.expose_secret(), key.expose_secret());

    // With the master key lost, stored keys are an error, not a silent nothing.
    std::fs::remove_file(&file).unwrap();
    let e = secrets::provider_key(&*store, &source, "local", "openai")
        .await
        .unwrap_err();
    assert!(e.to_string().contains("master key is missing"), "{e}");
}
