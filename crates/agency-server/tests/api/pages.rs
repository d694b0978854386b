//! The web UI's pages as addresses a person can type: each shows the signed-in account's own
//! things, sends anyone else to log in, and an address nobody serves is a page with a way home
//! (the JSON API's addresses keep the API's errors).

use super::*;

#[tokio::test]
async fn a_page_that_cannot_be_shown_is_a_page() {
    let app = App::spawn().await;
    for path in ["/agencies/nosuch", "/agencies/nosuch/playground"] {
        let res = app.client.get(app.url(path)).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::NOT_FOUND, "{path}");
        let kind = res.headers()["content-type"].to_str().unwrap().to_string();
        assert!(kind.starts_with("text/html"), "{path}: {kind}");
        let html = res.text().await.unwrap();
        assert!(html.contains("<h1>Not found</h1>"), "{html}");
        assert!(html.contains("no agency `nosuch`"), "{html}");
    }
    // Another user's agency is not found either, as a page.
    let bob = signed_up(&app.base, "bob@example.com").await;
    let res = bob
        .get(app.url(&format!("/agencies/{}", app.studio_id)))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
}

/// A page's status, address after redirects, content type and text, for `client`.
async fn page(client: &reqwest::Client, url: String) -> (StatusCode, String, String, String) {
    let res = client.get(url).send().await.unwrap();
    let status = res.status();
    let path = res.url().path().to_string();
    let kind = res.headers()["content-type"].to_str().unwrap().to_string();
    (status, path, kind, res.text().await.unwrap())
}

#[tokio::test]
async fn pages_have_addresses_a_person_can_type() {
    let app = App::spawn().await;
    // The agencies' list is at /agencies, where / leads.
    for path in ["/", "/agencies"] {
        let (status, at, _, html) = page(&app.client, app.url(path)).await;
        assert_eq!(
            (status, at.as_str()),
            (StatusCode::OK, "/agencies"),
            "{path}"
        );
        assert!(html.contains("<h1>Your agencies</h1>"), "{html}");
        assert!(
            html.contains(&format!("/agencies/{}", app.studio_id)),
            "{html}"
        );
    }

    // The conversation browser's list: the account's conversations, by agency.
    let id = app.new_conversation().await;
    let (status, _, _, html) = page(&app.client, app.url("/conversations")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("<h1>Your conversations</h1>"), "{html}");
    assert!(
        html.contains(&format!("href=\"/conversations/{id}\"")),
        "{html}"
    );
    assert!(html.contains("on the draft"), "{html}");
    // Another account's list has none of them.
    let bob = signed_up(&app.base, "bob@example.com").await;
    let (status, _, _, html) = page(&bob, app.url("/conversations")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        !html.contains(&id) && !html.contains(&app.studio_id),
        "{html}"
    );
    assert!(html.contains("You have no agency yet"), "{html}");

    // Without a session, the pages send to the log-in page.
    let anon = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    for path in ["/agencies", "/conversations"] {
        let res = anon.get(app.url(path)).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::SEE_OTHER, "{path}");
        assert_eq!(res.headers()["location"], "/login", "{path}");
    }

    // An address nobody serves is a page with a way home: the signed-in one's with its menu.
    let (status, _, kind, html) = page(&app.client, app.url("/no/such/page")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(kind.starts_with("text/html"), "{kind}");
    assert!(html.contains("<h1>Not found</h1>"), "{html}");
    assert!(html.contains("href=\"/agencies\""), "{html}");
    let (status, _, kind, html) = page(&anon, app.url("/nope")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(kind.starts_with("text/html"), "{kind}");
    assert!(
        html.contains("<h1>Not found</h1>") && html.contains("href=\"/\""),
        "{html}"
    );
    // The JSON API's addresses, and clients asking for JSON alone, get the API's error.
    for path in ["/api", "/api/nope", "/v1"] {
        let (status, body) = read(anon.get(app.url(path)).send().await.unwrap()).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
        assert_eq!(error_message(status, &body), "no such endpoint", "{path}");
    }
    let res = anon
        .get(app.url("/nope"))
        .header("accept", "application/json")
        .send()
        .await
        .unwrap();
    let (status, body) = read(res).await;
    assert_eq!(error_message(status, &body), "no such endpoint");
}
