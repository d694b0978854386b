//! The web UI: server-rendered pages (askama templates in `templates/`) and our own CSS and
//! JavaScript (`assets/`, embedded in the binary with rust-embed, served under `/static`).
//!
//! Pages are shells: the server renders the layout, the logged-in user and the session's CSRF
//! token (`<meta name="csrf-token">`), and each page's own ES module (`assets/js/<page>.js`,
//! served as it is: no build step) fills in the agency editor, keys, playground, conversation
//! browser, rooms and settings by calling the JSON API (`/api/...`) with the `x-csrf-token`
//! header; the modules they share (`api.js`, `dom.js`, `errors.js`, ...) are imported by
//! relative paths. Only what must work before a session exists is plain HTML forms:
//! sign-up and log-in, plus log-out and "new agency" (forms with a `csrf_token` field).
//!
//! **CSRF on the pre-login forms** (sign-up, log-in): there is no session yet to tie a token to,
//! so these check that the request's `Origin` (or, without it, `Referer`) names this host. Browsers
//! send `Origin` on every cross-site POST, so a page of another site cannot log a visitor into
//! an account of its choosing; and the session cookie is `SameSite=Lax`, so no other site's
//! POST carries it. Requests with neither header are not from another site's page in a browser
//! and are let through.

use agency_core::ValidationErrors;
use askama::Template;
use axum::extract::{FromRequestParts, Path, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Form, Router};
use secrecy::ExposeSecret;
use serde::Deserialize;

use crate::auth::{ClientAddr, Session, cleared_cookie, session_cookie};
use crate::{ApiError, AppState};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(|| async { Redirect::to("/agencies") }))
        .route("/signup", get(sign_up_page).post(sign_up))
        .route("/login", get(log_in_page).post(log_in))
        .route("/logout", post(log_out))
        .route("/agencies", get(home).post(new_agency))
        .route("/agencies/{agency}", get(agency_page))
        .route("/agencies/{agency}/playground", get(playground_page))
        .route("/agencies/{agency}/versions/{version}", get(version_page))
        .route("/conversations", get(conversations_page))
        .route("/conversations/{id}", get(conversation_page))
        .route("/settings", get(settings_page))
        .route("/approvals", get(approvals_page))
        .route("/rooms", get(rooms_page))
        .route("/rooms/{id}", get(room_page))
        .route("/static/{*file}", get(asset))
}

#[derive(rust_embed::RustEmbed)]
#[folder = "assets/"]
struct Assets;

/// An embedded asset by its path under `assets/` (`app.css`, `js/room.js`), with its type: ES
/// modules need a JavaScript one. Nothing is cached without asking again (`no-cache`).
async fn asset(Path(file): Path<String>) -> Response {
    let Some(f) = Assets::get(&file) else {
        return (StatusCode::NOT_FOUND, "no such file").into_response();
    };
    let mime = match file.rsplit_once('.').map(|(_, ext)| ext) {
        Some("css") => "text/css; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("svg") => "image/svg+xml",
        _ => "application/octet-stream",
    };
    (
        [
            (header::CONTENT_TYPE, mime),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        f.data,
    )
        .into_response()
}

/// A page's rendering, or the error page.
fn render(t: &impl Template) -> Response {
    match t.render() {
        Ok(html) => Html(html).into_response(),
        Err(e) => ApiError::Internal(format!("cannot render a page: {e}")).into_response(),
    }
}

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage {
    layout: Layout,
    title: &'static str,
    message: String,
}

/// A page that could not be shown, as a page (the API's errors are JSON).
fn error_page(session: &Session, e: ApiError) -> Response {
    if let ApiError::Internal(detail) = &e {
        tracing::error!(error = %detail, "a page failed");
    }
    let status = e.status_code();
    let title = match status {
        StatusCode::NOT_FOUND => "Not found",
        StatusCode::FORBIDDEN => "Not allowed",
        _ => "Something went wrong",
    };
    let page = ErrorPage {
        layout: Layout::of(session),
        title,
        message: e.to_string(),
    };
    (status, render(&page)).into_response()
}

#[derive(Template)]
#[template(path = "not_found.html")]
struct NotFoundPage;

/// What answers an address nobody serves: the API's error for the JSON API (`/api`, `/v1`) and
/// for clients that ask for JSON alone; for a person, a page with a way home (the signed-in
/// one's with the pages' menu).
pub async fn not_found(State(s): State<AppState>, request: Request) -> Response {
    let (mut parts, _) = request.into_parts();
    if !wants_page(&parts) {
        return ApiError::NotFound("no such endpoint".into()).into_response();
    }
    match Session::from_request_parts(&mut parts, &s).await {
        Ok(session) => error_page(
            &session,
            ApiError::NotFound("there is no page at this address".into()),
        ),
        Err(_) => (StatusCode::NOT_FOUND, render(&NotFoundPage)).into_response(),
    }
}

/// Whether a request is a person's, for a page: outside the JSON API, and not asking for JSON
/// alone.
fn wants_page(parts: &Parts) -> bool {
    let path = parts.uri.path();
    let api = ["/api", "/v1"].iter().any(|p| {
        path.strip_prefix(p)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    });
    let accept = parts
        .headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let json_alone = accept.contains("application/json") && !accept.contains("text/html");
    !api && !json_alone
}

/// A logged-in visitor of a page; anyone else is sent to the log-in page.
pub struct Page(Session);

impl FromRequestParts<AppState> for Page {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, s: &AppState) -> Result<Self, Response> {
        match Session::from_request_parts(parts, s).await {
            Ok(session) => Ok(Page(session)),
            Err(ApiError::Unauthorized(_)) => Err(Redirect::to("/login").into_response()),
            Err(e) => Err(e.into_response()),
        }
    }
}

/// What every logged-in page's layout shows.
struct Layout {
    email: String,
    csrf: String,
}

impl Layout {
    fn of(session: &Session) -> Self {
        Layout {
            email: session.user.email.to_string(),
            csrf: session.csrf_token(),
        }
    }
}

/// The message for field `path` among `errors`, for a plain form.
fn field_error(errors: &ValidationErrors, path: &str) -> String {
    errors
        .0
        .iter()
        .filter(|e| e.path == path)
        .map(|e| e.message.as_str())
        .collect::<Vec<_>>()
        .join("; ")
}

// ---- Sign-up, log-in, log-out ----

#[derive(Template)]
#[template(path = "login.html")]
struct LoginPage {
    /// `signup` or `login`.
    mode: &'static str,
    email: String,
    email_error: String,
    password_error: String,
    error: String,
}

impl LoginPage {
    fn new(mode: &'static str) -> Self {
        LoginPage {
            mode,
            email: String::new(),
            email_error: String::new(),
            password_error: String::new(),
            error: String::new(),
        }
    }
}

#[derive(Deserialize)]
struct CredentialsForm {
    email: String,
    password: String,
}

async fn sign_up_page() -> Response {
    render(&LoginPage::new("signup"))
}

async fn log_in_page() -> Response {
    render(&LoginPage::new("login"))
}

/// The host part of an `Origin` or `Referer` value (`http://host:port/...` → `host:port`).
fn host_of(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    Some(rest.split(['/', '?', '#']).next().unwrap_or(rest))
}

/// Whether a pre-login form was posted from one of our own pages (see the module's notes).
fn same_origin(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
        return false;
    };
    let from = headers
        .get(header::ORIGIN)
        .or_else(|| headers.get(header::REFERER))
        .and_then(|v| v.to_str().ok());
    match from {
        None => true,
        Some(v) => host_of(v).is_some_and(|h| h.eq_ignore_ascii_case(host)),
    }
}

fn cross_site() -> Response {
    (
        StatusCode::FORBIDDEN,
        "This form was posted from another site's page.",
    )
        .into_response()
}

/// Logs the browser in and sends it to its agencies.
fn logged_in(headers: &HeaderMap, new: agency_runtime::accounts::NewSession) -> Response {
    let cookie = session_cookie(headers, new.token.expose_secret(), new.expires_at);
    ([(header::SET_COOKIE, cookie)], Redirect::to("/agencies")).into_response()
}

async fn sign_up(
    State(s): State<AppState>,
    headers: HeaderMap,
    ClientAddr(client): ClientAddr,
    Form(f): Form<CredentialsForm>,
) -> Response {
    if !same_origin(&headers) {
        return cross_site();
    }
    match s.rt.accounts().sign_up(&f.email, &f.password, client).await {
        Ok(new) => logged_in(&headers, new),
        Err(e) => {
            let mut page = LoginPage::new("signup");
            page.email = f.email;
            match ApiError::from(e) {
                ApiError::Fields(v) => {
                    page.email_error = field_error(&v, "email");
                    page.password_error = field_error(&v, "password");
                }
                other => page.error = other.to_string(),
            }
            (StatusCode::UNPROCESSABLE_ENTITY, render(&page)).into_response()
        }
    }
}

async fn log_in(
    State(s): State<AppState>,
    headers: HeaderMap,
    ClientAddr(client): ClientAddr,
    Form(f): Form<CredentialsForm>,
) -> Response {
    if !same_origin(&headers) {
        return cross_site();
    }
    match s.rt.accounts().log_in(&f.email, &f.password, client).await {
        Ok(new) => logged_in(&headers, new),
        Err(e) => {
            let wait = match &e {
                agency_runtime::RuntimeError::TooManyAttempts(wait) => Some(*wait),
                _ => None,
            };
            let e = ApiError::from(e);
            let mut page = LoginPage::new("login");
            page.email = f.email;
            page.error = e.to_string();
            let mut response = (e.status_code(), render(&page)).into_response();
            if let Some(wait) = wait {
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, crate::error::retry_after(wait));
            }
            response
        }
    }
}

#[derive(Deserialize)]
struct CsrfForm {
    csrf_token: String,
}

async fn log_out(
    State(s): State<AppState>,
    Page(session): Page,
    Form(f): Form<CsrfForm>,
) -> Response {
    if !session.csrf_ok(&f.csrf_token) {
        return ApiError::Forbidden("this form's CSRF token is not this session's".into())
            .into_response();
    }
    if let Err(e) = s.rt.accounts().log_out(&session.token).await {
        return ApiError::from(e).into_response();
    }
    (
        [(header::SET_COOKIE, cleared_cookie())],
        Redirect::to("/login"),
    )
        .into_response()
}

// ---- The user's agencies ----

struct AgencyRow {
    id: String,
    name: String,
    agents: usize,
    published: Option<u32>,
}

#[derive(Template)]
#[template(path = "home.html")]
struct HomePage {
    layout: Layout,
    agencies: Vec<AgencyRow>,
    name: String,
    name_error: String,
}

async fn home_page(s: &AppState, session: &Session) -> Result<HomePage, ApiError> {
    let agencies =
        s.rt.agencies()
            .list(&session.owner())
            .await?
            .into_iter()
            .map(|a| AgencyRow {
                id: a.agency.id.to_string(),
                name: a.agency.name,
                agents: a.agency.agents.len(),
                published: a.published,
            })
            .collect();
    Ok(HomePage {
        layout: Layout::of(session),
        agencies,
        name: String::new(),
        name_error: String::new(),
    })
}

async fn home(State(s): State<AppState>, Page(session): Page) -> Response {
    match home_page(&s, &session).await {
        Ok(page) => render(&page),
        Err(e) => error_page(&session, e),
    }
}

#[derive(Deserialize)]
struct NewAgencyForm {
    csrf_token: String,
    name: String,
}

/// A new agency's first draft: one manager on the rules model, ready to edit.
fn starter(name: &str) -> agency_core::AgencyDraft {
    agency_core::AgencyDraft {
        name: name.trim().to_string(),
        protocol: "json".into(),
        manager: "manager".into(),
        agents: vec![agency_core::AgentDraft {
            name: "manager".into(),
            role: Some("talks to the user".into()),
            model: "builtin/rules".into(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// Creates an agency from its name and opens it in the editor.
async fn new_agency(
    State(s): State<AppState>,
    Page(session): Page,
    Form(f): Form<NewAgencyForm>,
) -> Response {
    if !session.csrf_ok(&f.csrf_token) {
        return ApiError::Forbidden("this form's CSRF token is not this session's".into())
            .into_response();
    }
    let draft = starter(&f.name);
    match s.rt.agencies().create(&session.owner(), &draft).await {
        Ok(a) => Redirect::to(&format!("/agencies/{}", a.id)).into_response(),
        Err(e) => {
            let error = match ApiError::from(e) {
                ApiError::Fields(v) => field_error(&v, "name"),
                other => other.to_string(),
            };
            match home_page(&s, &session).await {
                Ok(mut page) => {
                    page.name = f.name;
                    page.name_error = if error.is_empty() {
                        "this name cannot be used".into()
                    } else {
                        error
                    };
                    (StatusCode::UNPROCESSABLE_ENTITY, render(&page)).into_response()
                }
                Err(e) => e.into_response(),
            }
        }
    }
}

// ---- Pages that our script fills in ----

#[derive(Template)]
#[template(path = "agency.html")]
struct AgencyPage {
    layout: Layout,
    id: String,
    name: String,
}

async fn agency_page(
    State(s): State<AppState>,
    Page(session): Page,
    Path(agency): Path<String>,
) -> Response {
    match crate::manage::agency_of(&s, &session, &agency).await {
        Ok(a) => render(&AgencyPage {
            layout: Layout::of(&session),
            id: a.id.to_string(),
            name: a.name.clone(),
        }),
        Err(e) => error_page(&session, e),
    }
}

#[derive(Template)]
#[template(path = "playground.html")]
struct PlaygroundPage {
    layout: Layout,
    id: String,
    name: String,
    published: Option<u32>,
}

async fn playground_page(
    State(s): State<AppState>,
    Page(session): Page,
    Path(agency): Path<String>,
) -> Response {
    let a = match s.rt.agencies().info(&session.owner(), &agency).await {
        Ok(a) => a,
        Err(e) => return error_page(&session, e.into()),
    };
    render(&PlaygroundPage {
        layout: Layout::of(&session),
        id: a.agency.id.to_string(),
        name: a.agency.name,
        published: a.published,
    })
}

#[derive(Template)]
#[template(path = "version.html")]
struct VersionPage {
    layout: Layout,
    id: String,
    name: String,
    version: u32,
}

async fn version_page(
    State(s): State<AppState>,
    Page(session): Page,
    Path((agency, version)): Path<(String, u32)>,
) -> Response {
    match crate::manage::agency_of(&s, &session, &agency).await {
        Ok(a) => render(&VersionPage {
            layout: Layout::of(&session),
            id: a.id.to_string(),
            name: a.name.clone(),
            version,
        }),
        Err(e) => error_page(&session, e),
    }
}

#[derive(Template)]
#[template(path = "conversation.html")]
struct ConversationPage {
    layout: Layout,
    id: String,
}

async fn conversation_page(Page(session): Page, Path(id): Path<String>) -> Response {
    // The script reads it through the API, which answers 404 for anyone else's.
    render(&ConversationPage {
        layout: Layout::of(&session),
        id,
    })
}

/// A conversation in the list of conversations.
struct ConversationRow {
    id: String,
    /// RFC 3339, for `<time datetime>`.
    at: String,
    /// To the minute, in UTC.
    when: String,
    /// `on the draft`, `on version 2`.
    on: String,
}

/// An agency's conversations, newest first.
struct AgencyConversations {
    id: String,
    name: String,
    conversations: Vec<ConversationRow>,
}

#[derive(Template)]
#[template(path = "conversations.html")]
struct ConversationsPage {
    layout: Layout,
    agencies: Vec<AgencyConversations>,
}

/// The signed-in account's conversations, by agency: the conversation browser's list.
async fn conversations_page(State(s): State<AppState>, Page(session): Page) -> Response {
    match conversations_by_agency(&s, &session).await {
        Ok(agencies) => render(&ConversationsPage {
            layout: Layout::of(&session),
            agencies,
        }),
        Err(e) => error_page(&session, e),
    }
}

async fn conversations_by_agency(
    s: &AppState,
    session: &Session,
) -> Result<Vec<AgencyConversations>, ApiError> {
    let owner = session.owner();
    let mut agencies = Vec::new();
    for a in s.rt.agencies().list(&owner).await? {
        let id = a.agency.id.to_string();
        let conversations = s.rt.conversations().list(&owner, &id).await?;
        agencies.push(AgencyConversations {
            conversations: conversations
                .iter()
                .map(|c| ConversationRow {
                    id: c.id.to_string(),
                    at: c.created_at.to_rfc3339(),
                    when: c.created_at.format("%Y-%m-%d %H:%M UTC").to_string(),
                    on: c
                        .version
                        .map_or("on the draft".into(), |v| format!("on version {v}")),
                })
                .collect(),
            id,
            name: a.agency.name,
        });
    }
    Ok(agencies)
}

#[derive(Template)]
#[template(path = "settings.html")]
struct SettingsPage {
    layout: Layout,
}

async fn settings_page(Page(session): Page) -> Response {
    render(&SettingsPage {
        layout: Layout::of(&session),
    })
}

#[derive(Template)]
#[template(path = "approvals.html")]
struct ApprovalsPage {
    layout: Layout,
}

/// Every tool call waiting for a person in the account's agencies (the script reads them).
async fn approvals_page(Page(session): Page) -> Response {
    render(&ApprovalsPage {
        layout: Layout::of(&session),
    })
}

#[derive(Template)]
#[template(path = "rooms.html")]
struct RoomsPage {
    layout: Layout,
}

async fn rooms_page(Page(session): Page) -> Response {
    render(&RoomsPage {
        layout: Layout::of(&session),
    })
}

#[derive(Template)]
#[template(path = "room.html")]
struct RoomPage {
    layout: Layout,
    id: String,
    /// The longest message the server takes, in characters (the core's rule, not a copy).
    max_chars: usize,
}

async fn room_page(Page(session): Page, Path(id): Path<String>) -> Response {
    // The script reads the room through the API, which answers 404 for anyone else's.
    render(&RoomPage {
        layout: Layout::of(&session),
        id,
        max_chars: agency_core::room::MAX_MESSAGE_CHARS,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(header::HeaderName, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(k.clone(), HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn pre_login_forms_must_come_from_this_host() {
        let host = (header::HOST, "127.0.0.1:8080");
        assert!(same_origin(&headers(&[
            host.clone(),
            (header::ORIGIN, "http://127.0.0.1:8080")
        ])));
        assert!(same_origin(&headers(&[
            host.clone(),
            (header::REFERER, "http://127.0.0.1:8080/login?x=1")
        ])));
        assert!(!same_origin(&headers(&[
            host.clone(),
            (header::ORIGIN, "https://evil.example")
        ])));
        assert!(!same_origin(&headers(&[
            host.clone(),
            (header::ORIGIN, "null")
        ])));
        assert!(!same_origin(&headers(&[
            host.clone(),
            (header::REFERER, "http://127.0.0.1:8080.evil.example/")
        ])));
        // Not a browser posting another site's page.
        assert!(same_origin(&headers(&[host])));
        assert!(!same_origin(&headers(&[])));
    }

    #[tokio::test]
    async fn modules_are_served_as_javascript_and_asked_for_again() {
        for file in ["js/room.js", "js/api.js", "app.css"] {
            let r = asset(Path(file.to_string())).await;
            assert_eq!(r.status(), StatusCode::OK, "{file}");
            let js = file.ends_with(".js");
            assert_eq!(
                r.headers()[header::CONTENT_TYPE],
                if js {
                    "text/javascript; charset=utf-8"
                } else {
                    "text/css; charset=utf-8"
                },
                "{file}"
            );
            assert_eq!(r.headers()[header::CACHE_CONTROL], "no-cache", "{file}");
        }
        let missing = asset(Path("js/nothing.js".to_string())).await;
        assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    }

    /// The embedded text of `js/<name>`, which must exist.
    fn module(name: &str) -> String {
        let f = Assets::get(&format!("js/{name}")).unwrap_or_else(|| panic!("no js/{name}"));
        String::from_utf8(f.data.into_owned()).unwrap()
    }

    /// What a page or a module loads resolves to an embedded module: every
    /// `<script type="module" src="/static/js/...">` of the templates and every relative
    /// `import ... from "./x.js"` (`import("./x.js")` in a JSDoc type included), so a renamed or
    /// missing module fails here rather than in a browser.
    #[test]
    fn every_script_and_import_resolves_to_an_embedded_module() {
        let templates = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("templates");
        let mut pages = 0;
        for entry in std::fs::read_dir(templates).unwrap() {
            let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
            for (i, _) in text.match_indices("<script") {
                let tag = &text[i..i + text[i..].find('>').unwrap()];
                assert!(tag.contains(r#"type="module""#), "{tag}");
                let src = tag.split(r#"src="/static/js/"#).nth(1).unwrap();
                module(&src[..src.find('"').unwrap()]);
                pages += 1;
            }
        }
        assert!(
            pages >= 7,
            "the pages that fill themselves in load their modules"
        );
        let mut imports = 0;
        for file in Assets::iter().filter(|f| f.starts_with("js/")) {
            let text = module(&file["js/".len()..]);
            assert!(text.starts_with("// @ts-check"), "{file} is type-checked");
            for (i, _) in text.match_indices("\"./") {
                let name = &text[i + 3..];
                module(&name[..name.find('"').unwrap()]);
                imports += 1;
            }
        }
        assert!(imports > 0);
    }
}
