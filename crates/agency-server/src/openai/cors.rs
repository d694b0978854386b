//! Browsers' cross-origin calls to the OpenAI endpoints (CORS), for the origins the operator
//! allows (`agency serve --cors-origin`). None by default: only pages of the server's own
//! origin may call it. A preflight is answered `204` either way — with CORS headers for an
//! allowed origin, without any otherwise, so the browser refuses the call cleanly (not with a
//! 405).
//!
//! Keys travel in the `Authorization` header, never in cookies, so no credentials are allowed
//! and any request header the page asks for may be sent (the SDKs send `openai-*` and
//! `x-stainless-*` ones, and add more over versions).

use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue, Method, StatusCode};
use axum::middleware::{Next, from_fn};
use axum::response::Response;
use tower_http::cors::{AllowHeaders, AllowOrigin, CorsLayer};

use crate::AppState;

/// How long a browser may keep a preflight's answer.
const MAX_AGE: Duration = Duration::from_secs(3600);

/// Which web origins may call the OpenAI endpoints from a browser: the operator's choice.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum CorsOrigins {
    /// Same-origin pages only: no CORS headers.
    #[default]
    None,
    /// Any origin (`*`).
    Any,
    /// These origins, as browsers send them (`https://app.example.com`), lowercase.
    Only(Vec<String>),
}

impl CorsOrigins {
    /// The `--cors-origin` values, each an origin (`scheme://host[:port]`, as a browser sends it
    /// in `Origin`) or `*`, or several separated by commas.
    pub fn parse<S: AsRef<str>>(values: &[S]) -> Result<Self, String> {
        let mut origins = Vec::new();
        for value in values {
            for origin in value.as_ref().split(',').map(str::trim) {
                match origin {
                    "" => {}
                    "*" => return Ok(Self::Any),
                    origin => {
                        let origin = checked(origin)?;
                        if !origins.contains(&origin) {
                            origins.push(origin);
                        }
                    }
                }
            }
        }
        Ok(if origins.is_empty() {
            Self::None
        } else {
            Self::Only(origins)
        })
    }
}

/// An origin as browsers send it: `scheme://host[:port]`, lowercase, without a path (a trailing
/// `/` is forgiven).
fn checked(origin: &str) -> Result<String, String> {
    let refused = |why: &str| {
        Err(format!(
            "`{origin}` is not an origin: {why} (an origin is scheme://host[:port], such as https://app.example.com, or `*` for any)"
        ))
    };
    let lower = origin.to_ascii_lowercase();
    let lower = lower.strip_suffix('/').unwrap_or(&lower);
    let Some((scheme, host)) = lower.split_once("://") else {
        return refused("no scheme");
    };
    if scheme.is_empty()
        || !scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
    {
        return refused("not a scheme");
    }
    if host.is_empty() {
        return refused("no host");
    }
    if host
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || "/?#@\\,".contains(c))
    {
        return refused("a path, query or user is not part of an origin");
    }
    Ok(lower.to_string())
}

/// The OpenAI routes with the CORS of `origins`.
pub(super) fn apply(router: Router<AppState>, origins: &CorsOrigins) -> Router<AppState> {
    let allow_origin = match origins {
        CorsOrigins::None => return router,
        CorsOrigins::Any => AllowOrigin::any(),
        CorsOrigins::Only(list) => {
            AllowOrigin::list(list.iter().filter_map(|o| HeaderValue::from_str(o).ok()))
        }
    };
    let layer = CorsLayer::new()
        .allow_origin(allow_origin)
        .allow_methods([Method::GET, Method::POST])
        .allow_headers(AllowHeaders::mirror_request())
        .expose_headers([
            HeaderName::from_static(super::REQUEST_ID_HEADER),
            HeaderName::from_static(super::CONVERSATION_HEADER),
            axum::http::header::RETRY_AFTER,
        ])
        .max_age(MAX_AGE);
    router.layer(layer).layer(from_fn(no_content))
}

/// A preflight the CORS layer did not answer (no origin is allowed): no CORS header, so the
/// browser refuses the call.
pub(super) async fn preflight() -> StatusCode {
    StatusCode::NO_CONTENT
}

/// A preflight's answer has no body: 204 (tower-http says 200, which browsers take too).
async fn no_content(request: Request, next: Next) -> Response {
    let preflight = request.method() == Method::OPTIONS;
    let mut response = next.run(request).await;
    if preflight && response.status() == StatusCode::OK {
        *response.status_mut() = StatusCode::NO_CONTENT;
    }
    response
}

#[cfg(test)]
mod tests {
    use super::CorsOrigins;

    #[test]
    fn origins_are_parsed_as_browsers_send_them() {
        assert_eq!(CorsOrigins::parse::<&str>(&[]), Ok(CorsOrigins::None));
        assert_eq!(CorsOrigins::parse(&["", " "]), Ok(CorsOrigins::None));
        assert_eq!(
            CorsOrigins::parse(&["https://App.example.com/", "http://localhost:5173"]),
            Ok(CorsOrigins::Only(vec![
                "https://app.example.com".into(),
                "http://localhost:5173".into()
            ]))
        );
        assert_eq!(
            CorsOrigins::parse(&["https://a.example, https://b.example,https://a.example"]),
            Ok(CorsOrigins::Only(vec![
                "https://a.example".into(),
                "https://b.example".into()
            ]))
        );
        assert_eq!(
            CorsOrigins::parse(&["https://a.example", "*"]),
            Ok(CorsOrigins::Any)
        );
        for bad in [
            "app.example.com",
            "https://",
            "https://app.example.com/chat",
            "https://user@app.example.com",
            "ht tp://x",
        ] {
            let e = CorsOrigins::parse(&[bad]).unwrap_err();
            assert!(e.contains(bad), "{e}");
        }
    }
}
