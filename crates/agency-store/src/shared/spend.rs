//! Spend against budgets: the SQL both backends run.

/// Reserves `$3` on a line unless what it spent and holds reaches its limit `$4`. A line's
/// first reservation in a period makes its row (a limit is never 0 here: the runtime refuses
/// a budget of 0 itself). No row changed: refused.
pub(crate) const RESERVE: &str = "INSERT INTO spend (scope, period_start, spent, reserved, tokens) \
     VALUES ($1, $2, 0, $3, 0) \
     ON CONFLICT (scope, period_start) DO UPDATE SET reserved = spend.reserved + excluded.reserved \
     WHERE spend.spent + spend.reserved < $4";
/// Settles a reservation of `$1` to a cost `$2` and `$3` tokens.
pub(crate) const SETTLE: &str = "UPDATE spend SET reserved = reserved - $1, spent = spent + $2, \
     tokens = tokens + $3 WHERE scope = $4 AND period_start = $5 RETURNING spent";
pub(crate) const SPENT: &str = "SELECT scope, period_start, spent, reserved, tokens FROM spend \
     WHERE scope = $1 AND period_start = $2";
pub(crate) const SPEND_OF_PREFIX: &str = "SELECT scope, period_start, spent, reserved, tokens \
     FROM spend WHERE substr(scope, 1, length($1)) = $1 \
     ORDER BY period_start DESC, scope LIMIT $2";

/// A row of [`SPENT`] or [`SPEND_OF_PREFIX`].
pub(crate) type Row = (String, i64, i64, i64, i64);

pub(crate) fn row((scope, period_start, spent, reserved, tokens): Row) -> crate::SpendRow {
    crate::SpendRow {
        scope,
        period_start,
        spent,
        reserved,
        tokens,
    }
}

/// The row of a scope without spend in a period.
pub(crate) fn nothing(scope: &str, period_start: i64) -> crate::SpendRow {
    crate::SpendRow {
        scope: scope.to_string(),
        period_start,
        spent: 0,
        reserved: 0,
        tokens: 0,
    }
}
