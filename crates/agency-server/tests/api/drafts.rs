//! Every field of an agency that an account may set survives the API: imported as a file, read
//! back as JSON, saved as JSON (the editor's PUT), published, and exported. `every_agency_field`
//! sets them all (its own tests say so), so a field some path drops leaves the draft unequal.

use agency_core::AgencyDraft;
use agency_core::draft::{CONFIGURATION_ONLY, every_agency_field, unset_fields};

use super::*;

#[derive(serde::Deserialize)]
struct Detail {
    draft: AgencyDraft,
}

#[derive(serde::Deserialize)]
struct VersionDetail {
    agency: AgencyDraft,
    file: String,
}

/// A body as it came: parsed by the test into the types, with its keys in their order.
async fn text(res: reqwest::Response) -> String {
    let status = res.status();
    let text = res.text().await.unwrap();
    assert!(status.is_success(), "{status}: {text}");
    text
}

#[tokio::test]
async fn every_field_an_account_may_set_survives_the_api() {
    let app = App::spawn().await;
    let mut d = every_agency_field();
    // An account names no server variable: it stores its provider's key instead.
    d.providers[0].api_key_env = None;
    let mut unset = unset_fields(&d);
    unset.sort();
    let mut expected: Vec<&str> = CONFIGURATION_ONLY.to_vec();
    expected.push("providers.*.api_key_env");
    expected.sort();
    assert_eq!(unset, expected);

    let get = |path: &str| app.client.get(app.url(path)).send();
    let file = agency_file::to_yaml(&d);
    let import = app
        .client
        .post(app.url("/api/agencies/import"))
        .header("content-type", "application/yaml")
        .body(file)
        .send()
        .await
        .unwrap();
    text(import).await;
    let read: Detail =
        serde_json::from_str(&text(get("/api/agencies/every").await.unwrap()).await).unwrap();
    assert_eq!(read.draft, d, "the file, imported, read back as JSON");

    let put = app
        .client
        .put(app.url("/api/agencies/every"))
        .header("content-type", "application/json")
        .body(serde_json::to_string(&read.draft).unwrap())
        .send()
        .await
        .unwrap();
    let saved: Detail = serde_json::from_str(&text(put).await).unwrap();
    assert_eq!(saved.draft, d, "the JSON, saved");
    let publish = app
        .client
        .post(app.url("/api/agencies/every/publish"))
        .send()
        .await
        .unwrap();
    text(publish).await;
    let version: VersionDetail =
        serde_json::from_str(&text(get("/api/agencies/every/versions/2").await.unwrap()).await)
            .unwrap();
    assert_eq!(version.agency, d, "the published version");
    let parse = |what: &str, yaml: &str| agency_file::AgencyFile::parse(what, yaml).unwrap().draft;
    assert_eq!(parse("version", &version.file), d, "its file");
    let export = text(get("/api/agencies/every/export").await.unwrap()).await;
    assert_eq!(parse("export", &export), d, "the export:\n{export}");
}
