//! The management API: accounts, agencies (drafts, publishing, versions), their API keys, and
//! the provider keys a user stores. Everything here acts for the logged-in user and sees only
//! what is theirs: another user's ids answer 404, as if they did not exist.

use agency_core::{ValidationError, ValidationErrors};
use agency_runtime::RuntimeError;
use axum::Json;
use axum::extract::rejection::{JsonRejection, StringRejection};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use secrecy::{ExposeSecret, SecretString};

use crate::auth::{Account, ClientAddr, Session, cleared_cookie, session_cookie};
use crate::documented::{Documented, documented};
use crate::{ApiError, AppState, wire};

/// Every route here, as its handler's `#[utoipa::path]` declares it.
pub fn routes() -> Documented {
    documented![
        sign_up,
        log_in,
        log_out,
        me,
        change_password,
        list_agencies,
        create_agency,
        import_agency,
        preview,
        examples,
        providers,
        get_agency,
        update_agency,
        delete_agency,
        export_agency,
        publish,
        versions,
        tools,
        version,
        list_keys,
        create_key,
        change_key,
        key_spend,
        agency_spend,
        revoke_key,
        list_provider_keys,
        put_provider_key,
        delete_provider_key,
        list_mcp_credentials,
        put_mcp_credentials,
        delete_mcp_credentials,
    ]
}

fn me_of(session: &Session) -> wire::Me {
    wire::Me {
        id: session.user.id.to_string(),
        email: session.user.email.to_string(),
        created_at: session.user.created_at,
        csrf_token: session.csrf_token(),
    }
}

/// A new login: the cookie, and who is logged in.
fn logged_in(
    headers: &HeaderMap,
    status: StatusCode,
    new: agency_runtime::accounts::NewSession,
) -> Response {
    let token = new.token.expose_secret().to_string();
    let cookie = session_cookie(headers, &token, new.expires_at);
    let me = me_of(&Session {
        user: new.user,
        token,
    });
    (status, [(header::SET_COOKIE, cookie)], Json(me)).into_response()
}

/// Makes an account and logs it in (sets the session cookie).
#[utoipa::path(post, path = "/api/auth/signup", tag = "accounts", request_body = wire::Credentials,
    responses((status = 201, body = wire::Me), (status = 422, description = "A field is not valid (`fields` names it)"),
        (status = 401, description = "The email has an account and this is not its password (answered as a log-in would)"),
        (status = 429, description = "Too many failed log-ins for this email from this address, or from this address")))]
pub async fn sign_up(
    State(s): State<AppState>,
    headers: HeaderMap,
    ClientAddr(client): ClientAddr,
    body: Result<Json<wire::Credentials>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(c) = body?;
    let new =
        s.rt.accounts()
            .sign_up(&c.email, &c.password, client)
            .await?;
    Ok(logged_in(&headers, StatusCode::CREATED, new))
}

/// Logs in (sets the session cookie).
#[utoipa::path(post, path = "/api/auth/login", tag = "accounts", request_body = wire::Credentials,
    responses((status = 200, body = wire::Me), (status = 401, description = "Wrong email or password"),
        (status = 429, description = "Too many failed log-ins for this email or from this address; `Retry-After` says when to try again")))]
pub async fn log_in(
    State(s): State<AppState>,
    headers: HeaderMap,
    ClientAddr(client): ClientAddr,
    body: Result<Json<wire::Credentials>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(c) = body?;
    let new =
        s.rt.accounts()
            .log_in(&c.email, &c.password, client)
            .await?;
    Ok(logged_in(&headers, StatusCode::OK, new))
}

/// Ends this session.
#[utoipa::path(post, path = "/api/auth/logout", tag = "accounts", responses((status = 204)))]
pub async fn log_out(
    State(s): State<AppState>,
    Account(session): Account,
) -> Result<Response, ApiError> {
    s.rt.accounts().log_out(&session.token).await?;
    Ok((
        StatusCode::NO_CONTENT,
        [(header::SET_COOKIE, cleared_cookie())],
    )
        .into_response())
}

/// The logged-in user and the session's CSRF token.
#[utoipa::path(get, path = "/api/auth/me", tag = "accounts",
    responses((status = 200, body = wire::Me), (status = 401, description = "Not logged in")))]
pub async fn me(session: Session) -> Json<wire::Me> {
    Json(me_of(&session))
}

/// Changes the password and ends the user's other sessions.
#[utoipa::path(post, path = "/api/auth/password", tag = "accounts", request_body = wire::PasswordChange,
    responses((status = 204), (status = 422, description = "Wrong current password, or a new one too short")))]
pub async fn change_password(
    State(s): State<AppState>,
    Account(session): Account,
    body: Result<Json<wire::PasswordChange>, JsonRejection>,
) -> Result<StatusCode, ApiError> {
    let Json(c) = body?;
    s.rt.accounts()
        .change_password(
            &session.user,
            &session.token,
            &c.current_password,
            &c.new_password,
        )
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The user's agency named by id or name (its draft).
pub(crate) async fn agency_of(
    s: &AppState,
    session: &Session,
    agency: &str,
) -> Result<agency_core::Agency, ApiError> {
    Ok(s.rt.agencies().get(&session.owner(), agency).await?)
}

/// The user's agencies, by name.
#[utoipa::path(get, path = "/api/agencies", tag = "agencies",
    responses((status = 200, body = Vec<wire::AgencyDetail>)))]
pub async fn list_agencies(
    State(s): State<AppState>,
    session: Session,
) -> Result<Json<Vec<wire::AgencyDetail>>, ApiError> {
    let agencies = s.rt.agencies().list(&session.owner()).await?;
    Ok(Json(
        agencies.iter().map(wire::AgencyDetail::from).collect(),
    ))
}

/// Creates an agency: a draft, not reachable through its API until it is published.
#[utoipa::path(post, path = "/api/agencies", tag = "agencies", request_body = agency_core::AgencyDraft,
    responses((status = 201, body = wire::AgencyDetail), (status = 422, description = "Problems, each with the path of its field")))]
pub async fn create_agency(
    State(s): State<AppState>,
    Account(session): Account,
    body: Result<Json<agency_core::AgencyDraft>, JsonRejection>,
) -> Result<(StatusCode, Json<wire::AgencyDetail>), ApiError> {
    let Json(draft) = body?;
    let a = s.rt.agencies().create(&session.owner(), &draft).await?;
    Ok((
        StatusCode::CREATED,
        Json(wire::AgencyDetail::from(
            &agency_runtime::agencies::AgencyInfo {
                agency: a,
                published: None,
            },
        )),
    ))
}

/// An agency's draft and the version its API serves.
#[utoipa::path(get, path = "/api/agencies/{agency}", tag = "agencies",
    params(("agency" = String, Path, description = "The agency's id or name")),
    responses((status = 200, body = wire::AgencyDetail), (status = 404)))]
pub async fn get_agency(
    State(s): State<AppState>,
    session: Session,
    Path(agency): Path<String>,
) -> Result<Json<wire::AgencyDetail>, ApiError> {
    let a = s.rt.agencies().info(&session.owner(), &agency).await?;
    Ok(Json(wire::AgencyDetail::from(&a)))
}

/// Replaces the draft (agents in the order given); the published version stays.
#[utoipa::path(put, path = "/api/agencies/{agency}", tag = "agencies", request_body = agency_core::AgencyDraft,
    params(("agency" = String, Path, description = "The agency's id or name")),
    responses((status = 200, body = wire::AgencyDetail), (status = 404), (status = 422)))]
pub async fn update_agency(
    State(s): State<AppState>,
    Account(session): Account,
    Path(agency): Path<String>,
    body: Result<Json<agency_core::AgencyDraft>, JsonRejection>,
) -> Result<Json<wire::AgencyDetail>, ApiError> {
    let Json(draft) = body?;
    let id = agency_of(&s, &session, &agency).await?.id;
    let a = s.rt.agencies().update(&session.owner(), id, &draft).await?;
    Ok(Json(wire::AgencyDetail::from(
        &s.rt.agencies().with_state(a).await?,
    )))
}

/// Deletes the agency with its versions, conversations and keys.
#[utoipa::path(delete, path = "/api/agencies/{agency}", tag = "agencies",
    params(("agency" = String, Path, description = "The agency's id or name")),
    responses((status = 204), (status = 404)))]
pub async fn delete_agency(
    State(s): State<AppState>,
    Account(session): Account,
    Path(agency): Path<String>,
) -> Result<StatusCode, ApiError> {
    let id = agency_of(&s, &session, &agency).await?.id;
    s.rt.agencies().delete(&session.owner(), id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The system prompt each agent of a draft would get (nothing is saved).
#[utoipa::path(post, path = "/api/agencies/preview", tag = "agencies", request_body = agency_core::AgencyDraft,
    responses((status = 200, body = wire::Preview), (status = 422)))]
pub async fn preview(
    State(s): State<AppState>,
    Account(session): Account,
    body: Result<Json<agency_core::AgencyDraft>, JsonRejection>,
) -> Result<Json<wire::Preview>, ApiError> {
    let Json(draft) = body?;
    let preview = s.rt.agencies().preview(&session.owner(), &draft)?;
    Ok(Json(wire::Preview::from(&preview)))
}

/// The server's providers, for an agent's `model`: the models to suggest, and whether each has
/// a key (the server's, or one the account stored).
#[utoipa::path(get, path = "/api/providers", tag = "agencies",
    responses((status = 200, body = Vec<wire::ProviderStatus>)))]
pub async fn providers(
    State(s): State<AppState>,
    session: Session,
) -> Result<Json<Vec<wire::ProviderStatus>>, ApiError> {
    let list = s.rt.settings().provider_catalog(&session.owner()).await?;
    Ok(Json(list.into_iter().map(Into::into).collect()))
}

/// The example agencies every account may start from (each runs offline, on the built-in rules
/// model): "Use this" imports its `file` through `POST /api/agencies/import`.
#[utoipa::path(get, path = "/api/examples", tag = "agencies",
    responses((status = 200, body = Vec<wire::Example>)))]
pub async fn examples(_session: Session) -> Result<Json<Vec<wire::Example>>, ApiError> {
    let mut out = Vec::new();
    for e in agency_file::examples::EXAMPLES {
        let file = agency_file::AgencyFile::parse(e.name, e.file)
            .map_err(|err| ApiError::Internal(format!("example {}: {err}", e.name)))?;
        out.push(wire::Example {
            name: e.name.to_string(),
            title: e.title.to_string(),
            summary: e.summary.to_string(),
            manager: file.draft.manager.clone(),
            agents: file.draft.agents.iter().map(|a| a.name.clone()).collect(),
            file: e.file.to_string(),
        });
    }
    Ok(Json(out))
}

/// Publishes the draft as the agency's next version, the one its API serves from now on.
#[utoipa::path(post, path = "/api/agencies/{agency}/publish", tag = "agencies",
    params(("agency" = String, Path, description = "The agency's id or name")),
    responses((status = 201, body = wire::Version), (status = 404)))]
pub async fn publish(
    State(s): State<AppState>,
    Account(session): Account,
    Path(agency): Path<String>,
) -> Result<(StatusCode, Json<wire::Version>), ApiError> {
    let id = agency_of(&s, &session, &agency).await?.id;
    let p = s.rt.agencies().publish(&session.owner(), id).await?;
    Ok((StatusCode::CREATED, Json(wire::Version::from(&p))))
}

/// The MCP servers the agency may use (`builtin`, its own, the server's) and the tools each
/// lists: what its agents' `tools` may name.
#[utoipa::path(get, path = "/api/agencies/{agency}/tools", tag = "agencies",
    params(("agency" = String, Path, description = "The agency's id or name")),
    responses((status = 200, body = Vec<wire::ToolServer>), (status = 404)))]
pub async fn tools(
    State(s): State<AppState>,
    session: Session,
    Path(agency): Path<String>,
) -> Result<Json<Vec<wire::ToolServer>>, ApiError> {
    let id = agency_of(&s, &session, &agency).await?.id;
    let servers =
        s.rt.agencies()
            .available_tools(&session.owner(), id)
            .await?;
    Ok(Json(
        servers.into_iter().map(wire::ToolServer::from).collect(),
    ))
}

/// The published versions, newest first.
#[utoipa::path(get, path = "/api/agencies/{agency}/versions", tag = "agencies",
    params(("agency" = String, Path, description = "The agency's id or name")),
    responses((status = 200, body = Vec<wire::Version>), (status = 404)))]
pub async fn versions(
    State(s): State<AppState>,
    session: Session,
    Path(agency): Path<String>,
) -> Result<Json<Vec<wire::Version>>, ApiError> {
    let id = agency_of(&s, &session, &agency).await?.id;
    let v = s.rt.agencies().versions(&session.owner(), id).await?;
    Ok(Json(v.iter().map(wire::Version::from).collect()))
}

/// One published version, as it was published.
#[utoipa::path(get, path = "/api/agencies/{agency}/versions/{version}", tag = "agencies",
    params(("agency" = String, Path, description = "The agency's id or name"), ("version" = u32, Path)),
    responses((status = 200, body = wire::VersionDetail), (status = 404)))]
pub async fn version(
    State(s): State<AppState>,
    session: Session,
    Path((agency, version)): Path<(String, String)>,
) -> Result<Json<wire::VersionDetail>, ApiError> {
    let a = agency_of(&s, &session, &agency).await?;
    let n: u32 = version
        .parse()
        .map_err(|_| ApiError::NotFound(format!("agency `{agency}` has no version `{version}`")))?;
    let (p, published, _) = s.rt.agencies().version(&session.owner(), a.id, n).await?;
    Ok(Json(wire::VersionDetail {
        version: p.version,
        published_at: p.published_at,
        agency: published.to_draft(),
        file: agency_runtime::agencies::file_of(&published),
    }))
}

/// The draft as an agency file (YAML), the format `agency import` reads.
#[utoipa::path(get, path = "/api/agencies/{agency}/export", tag = "agencies",
    params(("agency" = String, Path, description = "The agency's id or name")),
    responses((status = 200, content_type = "application/yaml", body = Object,
        description = "The agency file: a YAML mapping of `name`, `manager`, `agents`, ..."), (status = 404)))]
pub async fn export_agency(
    State(s): State<AppState>,
    session: Session,
    Path(agency): Path<String>,
) -> Result<Response, ApiError> {
    let a = agency_of(&s, &session, &agency).await?;
    let disposition = format!("attachment; filename=\"{}.yaml\"", a.name);
    Ok((
        [
            (
                header::CONTENT_TYPE,
                "application/yaml; charset=utf-8".to_string(),
            ),
            (header::CONTENT_DISPOSITION, disposition),
        ],
        agency_runtime::agencies::file_of(&a),
    )
        .into_response())
}

/// Imports an agency file (YAML or JSON, as `agency import` reads): creates the agency or
/// replaces the draft of the one with its name, and publishes it (the file is the release).
#[utoipa::path(post, path = "/api/agencies/import", tag = "agencies",
    request_body(content = String, content_type = "application/yaml"),
    responses((status = 201, body = wire::AgencyDetail), (status = 422, description = "Problems, each with its line and column")))]
pub async fn import_agency(
    State(s): State<AppState>,
    Account(session): Account,
    body: Result<String, StringRejection>,
) -> Result<(StatusCode, Json<wire::AgencyDetail>), ApiError> {
    let file = agency_file::AgencyFile::parse("agency file", &body?).map_err(file_problems)?;
    let a = match s.rt.agencies().save(&file.draft, &session.owner()).await {
        Err(RuntimeError::Validation(v)) => return Err(file_problems(file.locate(v))),
        other => other?,
    };
    Ok((
        StatusCode::CREATED,
        Json(wire::AgencyDetail::from(
            &s.rt.agencies().with_state(a).await?,
        )),
    ))
}

/// An agency file's problems, each with its place.
fn file_problems(e: agency_file::FileError) -> ApiError {
    ApiError::Fields(ValidationErrors(
        e.problems
            .into_iter()
            .map(|p| ValidationError {
                message: match (p.line, p.column) {
                    (Some(l), Some(c)) => format!("line {l}, column {c}: {}", p.message),
                    (Some(l), None) => format!("line {l}: {}", p.message),
                    _ => p.message,
                },
                path: p.path,
            })
            .collect(),
    ))
}

/// The agency's API keys, revoked ones too (never the keys themselves).
#[utoipa::path(get, path = "/api/agencies/{agency}/keys", tag = "keys",
    params(("agency" = String, Path, description = "The agency's id or name")),
    responses((status = 200, body = Vec<wire::ApiKey>), (status = 404)))]
pub async fn list_keys(
    State(s): State<AppState>,
    session: Session,
    Path(agency): Path<String>,
) -> Result<Json<Vec<wire::ApiKey>>, ApiError> {
    let a = agency_of(&s, &session, &agency).await?;
    let keys = s.auth.keys(a.id).await?;
    let mut listed = Vec::with_capacity(keys.len());
    for k in &keys {
        let mut w = wire::ApiKey::from(k);
        if !k.budgets.is_none() {
            let start = s.rt.spend().period_start(k.budgets.period);
            let (own, _) = s.rt.spend().of_key(k).await?;
            let now = own.iter().find(|p| p.period_start == start);
            w.spent_usd = Some(now.map_or(0.0, |p| wire::dollars(p.spent)));
        }
        listed.push(w);
    }
    Ok(Json(listed))
}

/// Changes a live key's budgets, at once: a field left out stays, `null` removes it.
#[utoipa::path(patch, path = "/api/agencies/{agency}/keys/{name}", tag = "keys", request_body = wire::KeyChange,
    params(("agency" = String, Path, description = "The agency's id or name"), ("name" = String, Path)),
    responses((status = 200, body = wire::ApiKey), (status = 404),
        (status = 422, description = "A budget is not an amount of dollars, or its period not one of `day`, `week`, `month`, `total` (`fields` names it)")))]
pub async fn change_key(
    State(s): State<AppState>,
    Account(session): Account,
    Path((agency, name)): Path<(String, String)>,
    body: Result<Json<wire::KeyChange>, JsonRejection>,
) -> Result<Json<wire::ApiKey>, ApiError> {
    let Json(change) = body?;
    let a = agency_of(&s, &session, &agency).await?;
    let keys = s.auth.keys(a.id).await?;
    let missing = || {
        ApiError::NotFound(format!(
            "agency `{}` has no live key named `{name}`",
            a.name
        ))
    };
    let key = keys
        .iter()
        .find(|k| k.name == name && k.revoked_at.is_none())
        .ok_or_else(missing)?;
    let b = key.budgets;
    let text = |v: Option<u64>| v.map(agency_core::price::format_dollars);
    let usd = change.budget_usd.unwrap_or_else(|| text(b.usd));
    let user = change.user_budget_usd.unwrap_or_else(|| text(b.user_usd));
    let period = change
        .budget_period
        .unwrap_or_else(|| b.period.as_str().to_string());
    let budgets =
        agency_runtime::spend::key_budgets(usd.as_deref(), Some(&period), user.as_deref())?;
    let key = s
        .auth
        .set_budgets(a.id, &name, budgets)
        .await?
        .ok_or_else(missing)?;
    Ok(Json(wire::ApiKey::from(&key)))
}

/// What a key spent, and each of its end users, newest period first (counted where the key
/// has a budget).
#[utoipa::path(get, path = "/api/agencies/{agency}/keys/{name}/spend", tag = "keys",
    params(("agency" = String, Path, description = "The agency's id or name"), ("name" = String, Path)),
    responses((status = 200, body = wire::KeySpend), (status = 404)))]
pub async fn key_spend(
    State(s): State<AppState>,
    session: Session,
    Path((agency, name)): Path<(String, String)>,
) -> Result<Json<wire::KeySpend>, ApiError> {
    let a = agency_of(&s, &session, &agency).await?;
    let keys = s.auth.keys(a.id).await?;
    // The live key of that name, else the latest revoked one.
    let key = keys
        .iter()
        .rev()
        .filter(|k| k.name == name)
        .min_by_key(|k| k.revoked_at.is_some())
        .ok_or_else(|| {
            ApiError::NotFound(format!("agency `{}` has no key named `{name}`", a.name))
        })?;
    let (own, users) = s.rt.spend().of_key(key).await?;
    Ok(Json(wire::KeySpend {
        periods: own.iter().map(wire::Spent::from).collect(),
        users: users
            .iter()
            .map(|(user, spent)| wire::UserSpent {
                user: user.clone(),
                spent: spent.into(),
            })
            .collect(),
    }))
}

/// What the agency spent against its budget (`budget_usd`), newest period first.
#[utoipa::path(get, path = "/api/agencies/{agency}/spend", tag = "agencies",
    params(("agency" = String, Path, description = "The agency's id or name")),
    responses((status = 200, body = Vec<wire::Spent>), (status = 404)))]
pub async fn agency_spend(
    State(s): State<AppState>,
    session: Session,
    Path(agency): Path<String>,
) -> Result<Json<Vec<wire::Spent>>, ApiError> {
    let a = agency_of(&s, &session, &agency).await?;
    let spent = s.rt.spend().of_agency(a.id).await?;
    Ok(Json(spent.iter().map(wire::Spent::from).collect()))
}

/// Makes an API key for the agency; the answer holds the key, shown this once.
#[utoipa::path(post, path = "/api/agencies/{agency}/keys", tag = "keys", request_body = wire::NewKey,
    params(("agency" = String, Path, description = "The agency's id or name")),
    responses((status = 201, body = wire::CreatedKey), (status = 400), (status = 404), (status = 409, description = "A live key has that name"),
        (status = 422, description = "A budget is not an amount of dollars, or its period not one of `day`, `week`, `month`, `total` (`fields` names it)")))]
pub async fn create_key(
    State(s): State<AppState>,
    Account(session): Account,
    Path(agency): Path<String>,
    body: Result<Json<wire::NewKey>, JsonRejection>,
) -> Result<(StatusCode, Json<wire::CreatedKey>), ApiError> {
    let Json(k) = body?;
    let a = agency_of(&s, &session, &agency).await?;
    let expires_in = match k
        .expires_in
        .as_deref()
        .map(str::trim)
        .filter(|e| !e.is_empty())
    {
        None => None,
        Some(e) => Some(agency_core::apikey::parse_duration(e).ok_or_else(|| {
            ApiError::BadRequest(format!(
                "`{e}` is not a duration: write a number and a unit, e.g. 15m, 2h, 30d, 1w"
            ))
        })?),
    };
    let budgets = agency_runtime::spend::key_budgets(
        k.budget_usd.as_deref(),
        k.budget_period.as_deref(),
        k.user_budget_usd.as_deref(),
    )?;
    let (key, plain) = s
        .auth
        .create_key(&a, &k.name, expires_in, k.rate_limit_per_minute, budgets)
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(wire::CreatedKey {
            key: plain.expose_secret().to_string(),
            info: wire::ApiKey::from(&key),
        }),
    ))
}

/// Revokes the agency's live key of that name: requests with it are refused from now on.
#[utoipa::path(delete, path = "/api/agencies/{agency}/keys/{name}", tag = "keys",
    params(("agency" = String, Path, description = "The agency's id or name"), ("name" = String, Path)),
    responses((status = 204), (status = 404)))]
pub async fn revoke_key(
    State(s): State<AppState>,
    Account(session): Account,
    Path((agency, name)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let a = agency_of(&s, &session, &agency).await?;
    if !s.auth.revoke(a.id, &name).await? {
        return Err(ApiError::NotFound(format!(
            "agency `{}` has no live key named `{name}`",
            a.name
        )));
    }
    Ok(StatusCode::NO_CONTENT)
}

/// The provider keys the user stored, masked.
#[utoipa::path(get, path = "/api/provider-keys", tag = "provider keys",
    responses((status = 200, body = Vec<wire::ProviderKey>)))]
pub async fn list_provider_keys(
    State(s): State<AppState>,
    session: Session,
) -> Result<Json<Vec<wire::ProviderKey>>, ApiError> {
    let keys = s.rt.settings().provider_keys(&session.owner()).await?;
    Ok(Json(
        keys.iter()
            .map(|k| wire::ProviderKey {
                provider: k.provider.clone(),
                masked: format!("…{}", k.suffix),
                created_at: k.created_at,
            })
            .collect(),
    ))
}

/// Stores (or replaces) the user's key for a provider, sealed at rest; it is never shown again.
#[utoipa::path(put, path = "/api/provider-keys/{provider}", tag = "provider keys", request_body = wire::PutProviderKey,
    params(("provider" = String, Path, pattern = r"^[A-Za-z0-9_.-]{1,64}$",
        description = "A provider's name, as agencies name it (`openai`): letters, digits, `_`, `-` and `.`")),
    responses((status = 200, body = wire::ProviderKey), (status = 400)))]
pub async fn put_provider_key(
    State(s): State<AppState>,
    Account(session): Account,
    Path(provider): Path<String>,
    body: Result<Json<wire::PutProviderKey>, JsonRejection>,
) -> Result<Json<wire::ProviderKey>, ApiError> {
    let Json(k) = body?;
    let valid = !provider.is_empty()
        && provider.len() <= 64
        && provider
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if !valid {
        return Err(ApiError::BadRequest(format!(
            "`{provider}` is not a provider name: letters, digits, `_`, `-` and `.`"
        )));
    }
    let sealed =
        s.rt.settings()
            .put_provider_key(&session.owner(), &provider, &SecretString::from(k.key))
            .await?;
    Ok(Json(wire::ProviderKey {
        provider: sealed.provider.clone(),
        masked: format!("…{}", sealed.suffix),
        created_at: sealed.created_at,
    }))
}

/// Deletes the user's key for a provider.
#[utoipa::path(delete, path = "/api/provider-keys/{provider}", tag = "provider keys",
    params(("provider" = String, Path)),
    responses((status = 204), (status = 404)))]
pub async fn delete_provider_key(
    State(s): State<AppState>,
    Account(session): Account,
    Path(provider): Path<String>,
) -> Result<StatusCode, ApiError> {
    let deleted =
        s.rt.settings()
            .delete_provider_key(&session.owner(), &provider)
            .await?;
    if deleted {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::NotFound(format!(
            "no stored key for `{provider}`"
        )))
    }
}

fn mcp_credentials(c: agency_runtime::tools::StoredCredentials) -> wire::McpCredentials {
    wire::McpCredentials {
        server: c.server,
        headers: c.headers,
        created_at: c.created_at,
    }
}

/// The credentials the user stored for the MCP servers its agencies declare: only the
/// headers' names.
#[utoipa::path(get, path = "/api/mcp-credentials", tag = "provider keys",
    responses((status = 200, body = Vec<wire::McpCredentials>)))]
pub async fn list_mcp_credentials(
    State(s): State<AppState>,
    session: Session,
) -> Result<Json<Vec<wire::McpCredentials>>, ApiError> {
    let stored = s.rt.settings().mcp_credentials(&session.owner()).await?;
    Ok(Json(stored.into_iter().map(mcp_credentials).collect()))
}

/// Stores (or replaces) the headers sent to the user's HTTP MCP server named `server` (as its
/// agencies' `mcp_servers` name it), sealed at rest; their values are never shown again.
#[utoipa::path(put, path = "/api/mcp-credentials/{server}", tag = "provider keys",
    request_body = wire::PutMcpCredentials,
    params(("server" = String, Path, pattern = r"^[a-z0-9_-]{1,40}$",
        description = "The MCP server's name in the agency file: lower-case letters, digits, `-` and `_`")),
    responses((status = 200, body = wire::McpCredentials), (status = 400), (status = 422)))]
pub async fn put_mcp_credentials(
    State(s): State<AppState>,
    Account(session): Account,
    Path(server): Path<String>,
    body: Result<Json<wire::PutMcpCredentials>, JsonRejection>,
) -> Result<Json<wire::McpCredentials>, ApiError> {
    let Json(c) = body?;
    let headers = c
        .headers
        .into_iter()
        .map(|(name, value)| (name, SecretString::from(value)))
        .collect();
    let stored =
        s.rt.settings()
            .put_mcp_credentials(&session.owner(), &server, headers)
            .await?;
    Ok(Json(mcp_credentials(stored)))
}

/// Deletes the user's credentials for an MCP server.
#[utoipa::path(delete, path = "/api/mcp-credentials/{server}", tag = "provider keys",
    params(("server" = String, Path)),
    responses((status = 204), (status = 404)))]
pub async fn delete_mcp_credentials(
    State(s): State<AppState>,
    Account(session): Account,
    Path(server): Path<String>,
) -> Result<StatusCode, ApiError> {
    if s.rt
        .settings()
        .delete_mcp_credentials(&session.owner(), &server)
        .await?
    {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::NotFound(format!(
            "no stored credentials for `{server}`"
        )))
    }
}
