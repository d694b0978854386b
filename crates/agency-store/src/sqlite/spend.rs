//! Spend against budgets on SQLite: one process has the file, and each reservation is one
//! transaction under the connection's lock.

use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};

use super::SqliteStore;
use crate::shared::spend;
use crate::{Result, SpendLine, SpendRow, SpendStore};

#[async_trait]
impl SpendStore for SqliteStore {
    async fn reserve(&self, lines: &[SpendLine], amount: i64) -> Result<Option<usize>> {
        self.with(|conn| {
            let tx = conn.transaction()?;
            let mut refused = None;
            {
                let mut reserve = tx.prepare_cached(spend::RESERVE)?;
                for (i, l) in lines.iter().enumerate() {
                    if reserve.execute(params![l.scope, l.period_start, amount, l.limit])? == 0 {
                        refused = Some(i);
                        break;
                    }
                }
            }
            match refused {
                None => tx.commit()?,
                Some(_) => tx.rollback()?,
            }
            Ok(refused)
        })
    }

    async fn settle(
        &self,
        lines: &[SpendLine],
        reserved: i64,
        cost: i64,
        tokens: i64,
    ) -> Result<Vec<i64>> {
        self.with(|conn| {
            let tx = conn.transaction()?;
            let mut spent = Vec::with_capacity(lines.len());
            {
                let mut settle = tx.prepare_cached(spend::SETTLE)?;
                for l in lines {
                    let now: Option<i64> = settle
                        .query_row(
                            params![reserved, cost, tokens, l.scope, l.period_start],
                            |r| r.get(0),
                        )
                        .optional()?;
                    spent.push(now.unwrap_or(0));
                }
            }
            tx.commit()?;
            Ok(spent)
        })
    }

    async fn spent(&self, scope: &str, period_start: i64) -> Result<SpendRow> {
        let row: Option<spend::Row> = self.with(|conn| {
            conn.prepare_cached(spend::SPENT)?
                .query_row(params![scope, period_start], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
                })
                .optional()
        })?;
        Ok(row.map_or_else(|| spend::nothing(scope, period_start), spend::row))
    }

    async fn spend(&self, prefix: &str, limit: u32) -> Result<Vec<SpendRow>> {
        let rows: Vec<spend::Row> = self.with(|conn| {
            conn.prepare_cached(spend::SPEND_OF_PREFIX)?
                .query_map(params![prefix, i64::from(limit)], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
                })?
                .collect()
        })?;
        Ok(rows.into_iter().map(spend::row).collect())
    }
}
