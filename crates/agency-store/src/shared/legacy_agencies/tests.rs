//! A database at the schema before agencies' bodies (SQLite 24, PostgreSQL 26), with agencies
//! as that schema's code wrote them, brought up to date: every agency loads as it was saved.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use agency_core::{Agency as Domain, AgencyDraft, AgencyId};
use uuid::Uuid;

use crate::{Store, StoreError};

/// An `agencies` row as the code before 0025 (SQLite) / 0027 (PostgreSQL) wrote it.
struct Agency {
    id: &'static str,
    owner: &'static str,
    name: &'static str,
    handle: Option<&'static str>,
    protocol: &'static str,
    manager: i64,
    max_hops: i64,
    deadline_ms: i64,
    providers: &'static str,
    mcp_servers: &'static str,
    budget_usd: Option<i64>,
    budget_period: &'static str,
    max_turn_cost_usd: Option<i64>,
}

/// An `agents` row, likewise.
struct Agent {
    agency_id: &'static str,
    id: i64,
    position: i64,
    name: &'static str,
    handle: Option<&'static str>,
    role: Option<&'static str>,
    model: &'static str,
    sampling: &'static str,
    blocks: &'static str,
}

/// Written by that code (`save_agency`) for [`expected`]'s agencies: several agents, rules
/// with recipients and tool calls, providers with prices, MCP servers, memory settings, tools,
/// approval policies (one without tools to approve yet), a budget and a turn's cost cap; and
/// an account's agency with nothing but defaults.
const AGENCIES: &[Agency] = &[
    Agency {
        id: "0192f0c4-6d1e-7a3b-9c2d-4e5f60718293",
        owner: "local",
        name: "studio",
        handle: Some("STUDIO-7"),
        protocol: "directives",
        manager: 4522,
        max_hops: 9,
        deadline_ms: 120000,
        providers: r#"[{"name":"own","kind":"openai","base_url":"http://127.0.0.1:11434/v1","api_key_env":"OWN_KEY","max_concurrency":3,"requests_per_minute":90,"prices":[["small",150000,600000],["big",2500000,10000000]]},{"name":"claude","kind":"anthropic","base_url":null,"api_key_env":null,"prices":[["sonnet",3000000,15000000]]}]"#,
        mcp_servers: r#"[{"name":"web","url":"https://mcp.example.com/mcp","timeout_secs":30,"max_concurrency":4},{"name":"docs","url":"http://127.0.0.1:9/mcp"}]"#,
        budget_usd: Some(12500000),
        budget_period: "week",
        max_turn_cost_usd: Some(750000),
    },
    Agency {
        id: "0192f0c4-6d1e-7a3b-9c2d-4e5f60718294",
        owner: "acct-1",
        name: "solo",
        handle: None,
        protocol: "json",
        manager: 1,
        max_hops: 16,
        deadline_ms: 300000,
        providers: r#"[]"#,
        mcp_servers: r#"[]"#,
        budget_usd: None,
        budget_period: "month",
        max_turn_cost_usd: None,
    },
];

const AGENTS: &[Agent] = &[
    Agent {
        agency_id: "0192f0c4-6d1e-7a3b-9c2d-4e5f60718293",
        id: 4522,
        position: 0,
        name: "boss",
        handle: Some("BOSS-1"),
        role: Some("runs the team"),
        model: "builtin/rules",
        sampling: r#"{"temperature":0.3,"top_p":0.95,"max_tokens":700,"reflection_threshold":1.5,"reflection_half_life_hours":6.0,"observe_chats":true,"tools":["web/search","builtin/now","docs/*"],"approve":["web/search","docs/*"],"approve_timeout_secs":300,"approve_on_timeout":"approve","approve_edits":true}"#,
        blocks: r#"[{"type":"text","text":"Line one.\nLine two: {{x}}."},{"type":"rule","when":0,"action":"Found {{result}} for {{message}}","send_to":[143,1],"call":{"tool":"web/search","with":{"deep":{"list":[1,"x",null,2.5]},"n":2,"q":"{{message}}"}}},{"type":"rule","when":143,"action":"{{message}}","send_to":[0]},{"type":"rule","when":1,"action":"Review: {{message}}","send_to":[143,0]}]"#,
    },
    Agent {
        agency_id: "0192f0c4-6d1e-7a3b-9c2d-4e5f60718293",
        id: 143,
        position: 1,
        name: "coder",
        handle: None,
        role: Some("writes code"),
        model: "own/small",
        sampling: r#"{"temperature":0.2,"tools":["docs/*"],"approve_timeout_secs":60}"#,
        blocks: r#"[{"type":"rule","when":-1,"action":"read {{result}}","send_to":[4522],"call":{"tool":"docs/read","with":{}}}]"#,
    },
    Agent {
        agency_id: "0192f0c4-6d1e-7a3b-9c2d-4e5f60718293",
        id: 1,
        position: 2,
        name: "reviewer",
        handle: None,
        role: None,
        model: "claude/sonnet",
        sampling: r#"{"max_tokens":4096,"approve_on_timeout":"approve"}"#,
        blocks: r#"[{"type":"text","text":"Be strict."},{"type":"rule","when":4522,"action":"ok: {{message}}","send_to":[4522]}]"#,
    },
    Agent {
        agency_id: "0192f0c4-6d1e-7a3b-9c2d-4e5f60718294",
        id: 1,
        position: 0,
        name: "only",
        handle: None,
        role: None,
        model: "builtin/rules",
        sampling: r#"{}"#,
        blocks: r#"[]"#,
    },
];

const STUDIO: &str = "0192f0c4-6d1e-7a3b-9c2d-4e5f60718293";
const SOLO: &str = "0192f0c4-6d1e-7a3b-9c2d-4e5f60718294";

/// The agencies those rows hold, as they were saved.
fn expected() -> Vec<Domain> {
    let id = |s: &str| AgencyId(s.parse().unwrap());
    let studio: AgencyDraft = serde_json::from_str(include_str!("studio.json")).unwrap();
    let solo: AgencyDraft = serde_json::from_str(
        r#"{"name": "solo", "manager": "only", "agents": [{"name": "only", "model": "builtin/rules"}]}"#,
    )
    .unwrap();
    vec![
        studio.validate(id(STUDIO), "local", &|_| true).unwrap(),
        solo.validate(id(SOLO), "acct-1", &|_| true).unwrap(),
    ]
}

fn uuid(s: &str) -> Uuid {
    s.parse().unwrap()
}

/// Every agency loads as it was saved, by id, by name and in its owner's list, with its
/// revision and published version; the old columns and the `agents` table are gone.
async fn loads_as_saved(s: &dyn Store, columns: Vec<String>) {
    for want in expected() {
        assert_eq!(s.agency(want.id).await.unwrap().as_ref(), Some(&want));
        let by_name = s.agency_by_name(&want.owner, &want.name).await.unwrap();
        assert_eq!(by_name.as_ref(), Some(&want));
        let listed = s.list_agencies(&want.owner).await.unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].0, want);
        assert_eq!(Some(listed[0].1), s.agency_state(want.id).await.unwrap());
    }
    let studio = s
        .agency_state(AgencyId(uuid(STUDIO)))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((studio.revision, studio.published), (3, Some(1)));
    let mut columns = columns;
    columns.sort();
    assert_eq!(
        columns,
        [
            "body",
            "created_at",
            "handle",
            "id",
            "name",
            "owner",
            "revision",
            "updated_at"
        ]
    );
    s.ready().await.unwrap();
}

/// A body that no longer reads, or no longer validates, is an error naming the agency.
async fn a_bad_body_is_corrupt(s: &dyn Store, set_body: impl AsyncFn(&str)) {
    let id = AgencyId(uuid(SOLO));
    for (body, says) in [
        ("{not json", "is not an agency draft"),
        (
            r#"{"name": "solo", "manager": "nobody", "agents": []}"#,
            "no longer validates",
        ),
    ] {
        set_body(body).await;
        for e in [
            s.agency(id).await.unwrap_err(),
            s.agency_by_name("acct-1", "solo").await.unwrap_err(),
            s.list_agencies("acct-1").await.unwrap_err(),
        ] {
            let StoreError::Corrupt(m) = &e else {
                panic!("{e:?}")
            };
            assert!(
                m.contains("`solo`") && m.contains(SOLO) && m.contains(says),
                "{m}"
            );
        }
    }
    // The others still load.
    assert_eq!(
        s.agency(expected()[0].id).await.unwrap(),
        Some(expected()[0].clone())
    );
}

mod on_sqlite {
    use super::*;
    use crate::sqlite::migrate::migrate_to;
    use rusqlite::{Connection, params};

    /// The schema before agencies' bodies.
    const BEFORE: usize = 24;

    fn old_database(path: &std::path::Path) -> Connection {
        let mut conn = Connection::open(path).unwrap();
        conn.execute_batch("PRAGMA foreign_keys = ON;").unwrap();
        migrate_to(&mut conn, BEFORE).unwrap();
        let now = chrono::Utc::now();
        for a in AGENCIES {
            conn.execute(
                "INSERT INTO agencies (id, owner, name, handle, protocol, manager, max_hops, \
                 deadline_ms, revision, providers, mcp_servers, budget_usd, budget_period, \
                 max_turn_cost_usd, created_at, updated_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 2, ?9, ?10, ?11, ?12, ?13, ?14, ?14)",
                params![
                    uuid(a.id),
                    a.owner,
                    a.name,
                    a.handle,
                    a.protocol,
                    a.manager,
                    a.max_hops,
                    a.deadline_ms,
                    a.providers,
                    a.mcp_servers,
                    a.budget_usd,
                    a.budget_period,
                    a.max_turn_cost_usd,
                    now
                ],
            )
            .unwrap();
        }
        for a in AGENTS {
            conn.execute(
                "INSERT INTO agents (agency_id, id, position, name, handle, role, model, \
                 sampling, blocks) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![
                    uuid(a.agency_id),
                    a.id,
                    a.position,
                    a.name,
                    a.handle,
                    a.role,
                    a.model,
                    a.sampling,
                    a.blocks
                ],
            )
            .unwrap();
        }
        // Published once (which moved the revision), so its version must survive too.
        conn.execute(
            "INSERT INTO agency_versions (agency_id, version, body, published_at) \
             VALUES (?1, 1, 'name: studio', ?2)",
            params![uuid(STUDIO), now],
        )
        .unwrap();
        conn.execute(
            "UPDATE agencies SET revision = 3 WHERE id = ?1",
            [uuid(STUDIO)],
        )
        .unwrap();
        conn
    }

    fn columns(path: &std::path::Path) -> Vec<String> {
        let conn = Connection::open(path).unwrap();
        let mut s = conn
            .prepare("SELECT name FROM pragma_table_info('agencies')")
            .unwrap();
        let tables: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE name = 'agents'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(tables, 0, "the agents table is dropped");
        s.query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    #[tokio::test]
    async fn every_agency_loads_as_saved_after_the_upgrade() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.db");
        drop(old_database(&path));
        let s = crate::open(&format!("sqlite://{}", path.display()))
            .await
            .unwrap();
        loads_as_saved(&*s, columns(&path)).await;
        let versions = s.versions(AgencyId(uuid(STUDIO))).await.unwrap();
        assert_eq!(versions.len(), 1);
        a_bad_body_is_corrupt(&*s, async |body: &str| {
            Connection::open(&path)
                .unwrap()
                .execute(
                    "UPDATE agencies SET body = ?1 WHERE id = ?2",
                    params![body, uuid(SOLO)],
                )
                .unwrap();
        })
        .await;
    }

    /// A row the old code could not read either stops the upgrade, naming the agency; the
    /// database is left as it was.
    #[tokio::test]
    async fn an_unreadable_agency_stops_the_upgrade_and_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.db");
        let conn = old_database(&path);
        conn.execute(
            "UPDATE agencies SET protocol = 'smoke' WHERE id = ?1",
            [uuid(SOLO)],
        )
        .unwrap();
        drop(conn);
        let url = format!("sqlite://{}", path.display());
        let e = crate::open(&url).await.err().expect("the upgrade stops");
        let m = e.to_string();
        assert!(
            m.contains("`solo`") && m.contains(SOLO) && m.contains("smoke"),
            "{m}"
        );
        let conn = Connection::open(&path).unwrap();
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, BEFORE as i64);
        let agents: i64 = conn
            .query_row("SELECT COUNT(*) FROM agents", [], |r| r.get(0))
            .unwrap();
        assert_eq!(agents, AGENTS.len() as i64);
    }
}

mod on_postgres {
    use super::*;
    use crate::postgres::migrate::{AGENCY_BODY, MIGRATOR};
    use sqlx::PgPool;

    /// A fresh schema at the version before agencies' bodies, with [`AGENCIES`] in it.
    async fn old_database() -> Option<(String, PgPool)> {
        let url = crate::testing::postgres_url().await?;
        let pool = PgPool::connect(&url).await.unwrap();
        MIGRATOR.run_to(AGENCY_BODY - 1, &pool).await.unwrap();
        let now = chrono::Utc::now();
        for a in AGENCIES {
            sqlx::query(
                "INSERT INTO agencies (id, owner, name, handle, protocol, manager, max_hops, \
                 deadline_ms, revision, providers, mcp_servers, budget_usd, budget_period, \
                 max_turn_cost_usd, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 3, $9, $10, $11, $12, $13, $14, $14)",
            )
            .bind(uuid(a.id))
            .bind(a.owner)
            .bind(a.name)
            .bind(a.handle)
            .bind(a.protocol)
            .bind(a.manager)
            .bind(a.max_hops)
            .bind(a.deadline_ms)
            .bind(a.providers)
            .bind(a.mcp_servers)
            .bind(a.budget_usd)
            .bind(a.budget_period)
            .bind(a.max_turn_cost_usd)
            .bind(now)
            .execute(&pool)
            .await
            .unwrap();
        }
        for a in AGENTS {
            sqlx::query(
                "INSERT INTO agents (agency_id, id, position, name, handle, role, model, \
                 sampling, blocks) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            )
            .bind(uuid(a.agency_id))
            .bind(a.id)
            .bind(a.position)
            .bind(a.name)
            .bind(a.handle)
            .bind(a.role)
            .bind(a.model)
            .bind(a.sampling)
            .bind(a.blocks)
            .execute(&pool)
            .await
            .unwrap();
        }
        sqlx::query(
            "INSERT INTO agency_versions (agency_id, version, body, published_at) \
             VALUES ($1, 1, 'name: studio', $2)",
        )
        .bind(uuid(STUDIO))
        .bind(now)
        .execute(&pool)
        .await
        .unwrap();
        Some((url, pool))
    }

    async fn columns(pool: &PgPool) -> Vec<String> {
        sqlx::query_scalar(
            "SELECT column_name::text FROM information_schema.columns \
             WHERE table_schema = current_schema() AND table_name = 'agencies'",
        )
        .fetch_all(pool)
        .await
        .unwrap()
    }

    #[tokio::test]
    async fn every_agency_loads_as_saved_after_the_upgrade() {
        let Some((url, pool)) = old_database().await else {
            return;
        };
        let s = crate::open(&url).await.unwrap();
        let agents: Option<String> = sqlx::query_scalar("SELECT to_regclass('agents')::text")
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(agents, None, "the agents table is dropped");
        loads_as_saved(&*s, columns(&pool).await).await;
        a_bad_body_is_corrupt(&*s, async |body: &str| {
            sqlx::query("UPDATE agencies SET body = $1 WHERE id = $2")
                .bind(body)
                .bind(uuid(SOLO))
                .execute(&pool)
                .await
                .unwrap();
        })
        .await;
        // Opened again, there is nothing left to convert.
        crate::open(&url).await.unwrap().ready().await.unwrap();
    }

    /// A row the old code could not read either stops the upgrade, naming the agency; the
    /// schema is left as it was.
    #[tokio::test]
    async fn an_unreadable_agency_stops_the_upgrade_and_changes_nothing() {
        let Some((url, pool)) = old_database().await else {
            return;
        };
        sqlx::query("UPDATE agencies SET protocol = 'smoke' WHERE id = $1")
            .bind(uuid(SOLO))
            .execute(&pool)
            .await
            .unwrap();
        let before = columns(&pool).await;
        let e = crate::open(&url).await.err().expect("the upgrade stops");
        let m = e.to_string();
        assert!(
            m.contains("`solo`") && m.contains(SOLO) && m.contains("smoke"),
            "{m}"
        );
        let version: i64 = sqlx::query_scalar("SELECT MAX(version) FROM _sqlx_migrations")
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(version, AGENCY_BODY - 1);
        assert_eq!(columns(&pool).await, before);
        assert!(!before.contains(&"body".to_string()));
    }
}

#[test]
fn a_difference_is_shown_where_it_is() {
    let saved = expected().remove(0);
    let mut back = saved.clone();
    back.agents[2].approve.on_timeout = agency_core::OnTimeout::Deny;
    let m = super::difference(&saved, &back);
    assert!(
        m.contains("on_timeout: Approve") && m.contains("on_timeout: Deny"),
        "{m}"
    );
    assert!(m.len() < 600, "{m}");
}
