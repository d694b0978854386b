//! Spend against budgets on PostgreSQL: every server on the database reserves against the
//! same rows. A reservation is one transaction of conditional upserts, each of which locks its
//! row and reads it again once another transaction holding it commits, so no two servers can
//! both take the last of a budget; lines are taken in the order given (key, end user, agency),
//! the same everywhere, so transactions do not deadlock.

use async_trait::async_trait;

use super::PostgresStore;
use crate::shared::spend;
use crate::{Result, SpendLine, SpendRow, SpendStore};

#[async_trait]
impl SpendStore for PostgresStore {
    async fn reserve(&self, lines: &[SpendLine], amount: i64) -> Result<Option<usize>> {
        let mut tx = self.pool.begin().await?;
        for (i, l) in lines.iter().enumerate() {
            let done = sqlx::query(spend::RESERVE)
                .bind(&l.scope)
                .bind(l.period_start)
                .bind(amount)
                .bind(l.limit)
                .execute(&mut *tx)
                .await?;
            if done.rows_affected() == 0 {
                tx.rollback().await?;
                return Ok(Some(i));
            }
        }
        tx.commit().await?;
        Ok(None)
    }

    async fn settle(
        &self,
        lines: &[SpendLine],
        reserved: i64,
        cost: i64,
        tokens: i64,
    ) -> Result<Vec<i64>> {
        let mut tx = self.pool.begin().await?;
        let mut spent = Vec::with_capacity(lines.len());
        for l in lines {
            let now: Option<i64> = sqlx::query_scalar(spend::SETTLE)
                .bind(reserved)
                .bind(cost)
                .bind(tokens)
                .bind(&l.scope)
                .bind(l.period_start)
                .fetch_optional(&mut *tx)
                .await?;
            spent.push(now.unwrap_or(0));
        }
        tx.commit().await?;
        Ok(spent)
    }

    async fn spent(&self, scope: &str, period_start: i64) -> Result<SpendRow> {
        let row: Option<spend::Row> = sqlx::query_as(spend::SPENT)
            .bind(scope)
            .bind(period_start)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map_or_else(|| spend::nothing(scope, period_start), spend::row))
    }

    async fn spend(&self, prefix: &str, limit: u32) -> Result<Vec<SpendRow>> {
        let rows: Vec<spend::Row> = sqlx::query_as(spend::SPEND_OF_PREFIX)
            .bind(prefix)
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.into_iter().map(spend::row).collect())
    }
}
