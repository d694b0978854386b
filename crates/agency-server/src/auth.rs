//! Who is asking: the login session behind a request's cookie, and its CSRF check.
//!
//! A login is a random token in an HTTP-only, `SameSite=Lax` cookie (`Secure` when the request
//! came over HTTPS through a proxy that says so with `X-Forwarded-Proto`). Every request that
//! changes something must also carry the session's CSRF token — in the `x-csrf-token` header
//! (the JSON API, our pages' scripts) or a `csrf_token` form field (our pages' forms) — which a
//! page of another site cannot read.

use agency_core::User;
use agency_runtime::accounts::csrf_matches;
use agency_runtime::keys::AuthError;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, header};

use crate::{ApiError, AppState};

pub const SESSION_COOKIE: &str = "agency_session";
pub const CSRF_HEADER: &str = "x-csrf-token";

/// A value of the request's `Cookie` headers.
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

fn over_https(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("https"))
}

/// The `Set-Cookie` value that logs this browser in.
pub fn session_cookie(
    headers: &HeaderMap,
    token: &str,
    expires: chrono::DateTime<chrono::Utc>,
) -> HeaderValue {
    let secure = if over_https(headers) { "; Secure" } else { "" };
    let max_age = (expires - chrono::Utc::now()).num_seconds().max(0);
    HeaderValue::from_str(&format!(
        "{SESSION_COOKIE}={token}; Path=/; HttpOnly; SameSite=Lax; Max-Age={max_age}{secure}"
    ))
    .unwrap_or_else(|_| HeaderValue::from_static("agency_session=; Path=/; Max-Age=0"))
}

/// The `Set-Cookie` value that logs this browser out.
pub fn cleared_cookie() -> HeaderValue {
    HeaderValue::from_static("agency_session=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0")
}

/// The address a request came from, for limits on failed log-ins: the peer, or the client a
/// trusted proxy names (see [`crate::TrustedProxies`]). `None` when the server was not started
/// with connection info.
pub struct ClientAddr(pub Option<std::net::IpAddr>);

impl<S: Send + Sync> FromRequestParts<S> for ClientAddr {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(ClientAddr(
            parts
                .extensions
                .get::<crate::proxy::ClientIp>()
                .map(|c| c.0),
        ))
    }
}

/// A logged-in request, before any CSRF check (pages read with it; forms check their field).
pub struct Session {
    pub user: User,
    /// The session's token (the cookie), to check CSRF tokens against and to log out.
    pub token: String,
}

impl Session {
    /// The owner of what this user makes.
    pub fn owner(&self) -> String {
        self.user.owner()
    }

    /// Whether `given` is this session's CSRF token.
    pub fn csrf_ok(&self, given: &str) -> bool {
        csrf_matches(&self.token, given)
    }

    pub fn csrf_token(&self) -> String {
        agency_runtime::accounts::csrf_token(&self.token)
    }
}

impl FromRequestParts<AppState> for Session {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, s: &AppState) -> Result<Self, ApiError> {
        let token = cookie(&parts.headers, SESSION_COOKIE)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| ApiError::Unauthorized("log in first (POST /api/auth/login)".into()))?;
        let user =
            s.rt.accounts().session_user(token).await?.ok_or_else(|| {
                ApiError::Unauthorized("your session has ended: log in again".into())
            })?;
        Ok(Session {
            user,
            token: token.to_string(),
        })
    }
}

/// A logged-in request of the JSON API: a request that changes something must carry the
/// session's CSRF token in the `x-csrf-token` header.
pub struct Account(pub Session);

impl FromRequestParts<AppState> for Account {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, s: &AppState) -> Result<Self, ApiError> {
        let session = Session::from_request_parts(parts, s).await?;
        let safe = matches!(parts.method, Method::GET | Method::HEAD | Method::OPTIONS);
        if !safe {
            let given = parts
                .headers
                .get(CSRF_HEADER)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            if !session.csrf_ok(given) {
                return Err(ApiError::Forbidden(format!(
                    "send this session's CSRF token in the `{CSRF_HEADER}` header (GET /api/auth/me gives it)"
                )));
            }
        }
        Ok(Account(session))
    }
}

/// The API key a request carries (`Authorization: Bearer agk_…`), valid and within its rate
/// limit; its use is recorded. Refused, it answers as the management API does; the OpenAI
/// endpoint takes `Result<Key, KeyRefused>` and answers in OpenAI's shape.
pub struct Key(pub agency_core::ApiKey);

/// Why a request's key was refused.
pub struct KeyRefused(pub AuthError);

impl FromRequestParts<AppState> for Key {
    type Rejection = KeyRefused;

    async fn from_request_parts(parts: &mut Parts, s: &AppState) -> Result<Self, Self::Rejection> {
        let bearer = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(|v| {
                v.strip_prefix("Bearer ")
                    .or_else(|| v.strip_prefix("bearer "))
                    .unwrap_or(v)
            });
        s.auth
            .authenticate(bearer)
            .await
            .map(Key)
            .map_err(KeyRefused)
    }
}

impl axum::response::IntoResponse for KeyRefused {
    fn into_response(self) -> axum::response::Response {
        let e = self.0;
        match e {
            AuthError::RateLimited { retry_after, .. } => ApiError::TooManyRequests {
                message: e.to_string(),
                retry_after: Some(retry_after),
            },
            e => ApiError::Unauthorized(e.to_string()),
        }
        .into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_are_found_among_others() {
        let mut h = HeaderMap::new();
        h.append(
            header::COOKIE,
            HeaderValue::from_static("a=1; agency_session=ags_x"),
        );
        h.append(header::COOKIE, HeaderValue::from_static("b=2"));
        assert_eq!(cookie(&h, SESSION_COOKIE), Some("ags_x"));
        assert_eq!(cookie(&h, "b"), Some("2"));
        assert_eq!(cookie(&h, "agency"), None);
    }

    #[test]
    fn the_cookie_is_secure_behind_https() {
        let later = chrono::Utc::now() + chrono::Duration::days(1);
        let plain = session_cookie(&HeaderMap::new(), "t", later);
        let plain = plain.to_str().unwrap();
        assert!(plain.contains("HttpOnly") && plain.contains("SameSite=Lax"));
        assert!(!plain.contains("Secure"));
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-proto", HeaderValue::from_static("https"));
        assert!(
            session_cookie(&h, "t", later)
                .to_str()
                .unwrap()
                .ends_with("; Secure")
        );
    }
}
