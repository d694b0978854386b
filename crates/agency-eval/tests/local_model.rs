//! all-MiniLM-L6-v2 run with candle embeds as a sentence model should: unit vectors, and
//! sentences that mean the same thing closer than ones that do not. Needs the model
//! (AGENCY_EMBEDDINGS_MODEL_DIR); skipped without it, except under CI=true.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed unwrap is a failed test

use agency_core::eval::cosine;
use agency_eval::Embedder;
use agency_eval::embed::LocalModel;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn related_sentences_are_closer_than_unrelated_ones() {
    let Some(dir) = std::env::var("AGENCY_EMBEDDINGS_MODEL_DIR")
        .ok()
        .filter(|d| !d.is_empty())
    else {
        let why = "AGENCY_EMBEDDINGS_MODEL_DIR is not set";
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("{why}; CI=true requires the local model");
        }
        eprintln!("skipping: {why}");
        return;
    };
    let model = LocalModel::load(std::path::Path::new(&dir)).unwrap();
    let texts: Vec<String> = [
        "The fermenter is running too warm.",
        "The temperature in the tank is too high.",
        "Penguins opened a bakery in Lisbon.",
        // A short and a long text in one batch: padding must not change the short one.
        "The fermenter is running too warm. The jacket valve is stuck half open again and the cooling water cannot get through, so the batch keeps heating up.",
    ]
    .map(String::from)
    .to_vec();
    let v = model.embed(&texts).await.unwrap();
    assert_eq!(v.len(), 4);
    assert!(v.iter().all(|x| x.len() == 384));
    for x in &v {
        let norm: f32 = x.iter().map(|a| a * a).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "unit length: {norm}");
    }
    let related = cosine(&v[0], &v[1]);
    let unrelated = cosine(&v[0], &v[2]);
    assert!(related > 0.5, "{related}");
    assert!(unrelated < 0.2, "{unrelated}");
    let alone = model.embed(&texts[..1]).await.unwrap();
    assert!(
        cosine(&alone[0], &v[0]) > 0.9999,
        "padding leaves a text's embedding alone"
    );
}
