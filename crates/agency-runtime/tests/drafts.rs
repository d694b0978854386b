//! Every field of an agency survives every path a draft travels in the runtime: saved (the
//! store's rows) and read back, published (a version's file and agency), exported, and saved
//! and published again — on SQLite, and on PostgreSQL when it is there. A field some path
//! drops leaves the draft unequal; `every_agency_field` sets them all (its tests say so).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use agency_core::draft::{CONFIGURATION_ONLY, every_agency_field, unset_fields};
use agency_file::AgencyFile;
use agency_runtime::LOCAL_OWNER;
use common::Harness;

async fn every_field_survives(h: Harness) {
    let d = every_agency_field();
    assert_eq!(unset_fields(&d), CONFIGURATION_ONLY);
    // An import saves the draft and publishes it.
    let saved = h.rt.agencies().save(&d, LOCAL_OWNER).await.unwrap();
    let stored = h.rt.agencies().get(LOCAL_OWNER, "every").await.unwrap();
    assert_eq!(stored.to_draft(), d, "the draft, as the store keeps it");
    let (_, published, file) =
        h.rt.agencies()
            .version(LOCAL_OWNER, saved.id, 1)
            .await
            .unwrap();
    assert_eq!(published.to_draft(), d, "the published version");
    let read = |what: &str, text: &str| AgencyFile::parse(what, text).unwrap().draft;
    assert_eq!(read("version", &file), d, "the version's file:\n{file}");
    let export = agency_runtime::agencies::file_of(&stored);
    assert_eq!(read("export", &export), d, "the export:\n{export}");
    // Saved again as an edit (the API's PUT) and published: the same again.
    h.rt.agencies()
        .update(LOCAL_OWNER, saved.id, &d)
        .await
        .unwrap();
    h.rt.agencies()
        .publish(LOCAL_OWNER, saved.id)
        .await
        .unwrap();
    let (_, again, _) =
        h.rt.agencies()
            .version(LOCAL_OWNER, saved.id, 2)
            .await
            .unwrap();
    assert_eq!(again.to_draft(), d, "the second version");
}

#[tokio::test]
async fn every_field_survives_the_store_publishing_and_export_on_sqlite() {
    every_field_survives(Harness::sqlite().await).await;
}

#[tokio::test]
async fn every_field_survives_the_store_publishing_and_export_on_postgres() {
    let Some(url) = agency_store::testing::postgres_url().await else {
        return;
    };
    every_field_survives(Harness::on(url, None).await).await;
}
