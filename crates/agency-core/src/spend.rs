//! Budgets: what an API key, each end user of a key, or an agency may spend in a period, and
//! what a model call reserves of them before it runs. Pure: the time is always given.

use chrono::{DateTime, Datelike, Duration, NaiveTime, TimeZone, Utc};

use crate::price::{AmountError, Cost, Price};

/// How often a budget renews (at midnight UTC; a week starts on Monday).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, utoipa::ToSchema)]
#[schema(rename_all = "lowercase")]
pub enum Period {
    Day,
    Week,
    #[default]
    Month,
    /// Never: the budget is for the whole life of what it is on.
    Total,
}

impl Period {
    pub fn as_str(self) -> &'static str {
        match self {
            Period::Day => "day",
            Period::Week => "week",
            Period::Month => "month",
            Period::Total => "total",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s.trim() {
            "day" => Period::Day,
            "week" => Period::Week,
            "month" => Period::Month,
            "total" => Period::Total,
            _ => return None,
        })
    }

    /// The start of the period `now` is in (the Unix epoch for [`Period::Total`]).
    pub fn start(self, now: DateTime<Utc>) -> DateTime<Utc> {
        let midnight = |d: chrono::NaiveDate| Utc.from_utc_datetime(&d.and_time(NaiveTime::MIN));
        let today = now.date_naive();
        match self {
            Period::Day => midnight(today),
            Period::Week => {
                midnight(today - Duration::days(i64::from(today.weekday().num_days_from_monday())))
            }
            Period::Month => midnight(today.with_day(1).unwrap_or(today)),
            Period::Total => DateTime::UNIX_EPOCH,
        }
    }

    /// When the period `now` is in ends and the budget renews; never for [`Period::Total`].
    pub fn renews(self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let start = self.start(now);
        match self {
            Period::Day => Some(start + Duration::days(1)),
            Period::Week => Some(start + Duration::days(7)),
            Period::Month => start.checked_add_months(chrono::Months::new(1)),
            Period::Total => None,
        }
    }
}

/// An amount of dollars per period.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Budget {
    /// In micro-dollars (`5.00` dollars is `5_000_000`).
    pub usd: u64,
    pub period: Period,
}

impl Budget {
    /// The amount as a cost (pico-dollars).
    pub fn limit(&self) -> Cost {
        Cost(self.usd.saturating_mul(1_000_000))
    }
}

/// The largest budget accepted, in dollars.
pub const MAX_BUDGET_DOLLARS: u64 = 1_000_000_000;

/// A budget's amount, written as dollars (`5`, `0.01`), in micro-dollars.
pub fn parse_budget(text: &str) -> Result<u64, AmountError> {
    crate::price::parse_micro(text, MAX_BUDGET_DOLLARS)
}

/// The output a call reserves when its agent sets no `max_tokens`.
pub const DEFAULT_MAX_OUTPUT: u32 = 4096;

/// Tokens a text of `chars` characters is estimated to take: one per three characters,
/// rounded up, a little more than most tokenizers count, since a reservation should not be
/// short. The reservation is settled to the exact count the model reports.
pub fn estimate_tokens(chars: usize) -> u32 {
    u32::try_from(chars.div_ceil(3)).unwrap_or(u32::MAX)
}

/// What a call reserves before it runs: its prompt at the input price and its largest output
/// at the output price.
pub fn reservation(price: Price, prompt_tokens: u32, max_output: u32) -> Cost {
    price.cost(crate::price::Usage {
        prompt_tokens,
        completion_tokens: max_output,
    })
}

/// Whether spending `spent` of `budget` has just passed 80% (the warning's threshold) with a
/// call that cost `cost`.
pub fn crossed_warning(budget: Cost, spent_before: Cost, cost: Cost) -> bool {
    let threshold = budget.0 / 5 * 4 + budget.0 % 5 * 4 / 5;
    spent_before.0 < threshold && spent_before.0.saturating_add(cost.0) >= threshold
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn periods_start_and_renew_at_midnight_utc() {
        let now = at("2026-02-18T15:30:00Z"); // a Wednesday
        assert_eq!(Period::Day.start(now), at("2026-02-18T00:00:00Z"));
        assert_eq!(Period::Day.renews(now), Some(at("2026-02-19T00:00:00Z")));
        assert_eq!(Period::Week.start(now), at("2026-02-16T00:00:00Z"));
        assert_eq!(Period::Week.renews(now), Some(at("2026-02-23T00:00:00Z")));
        assert_eq!(Period::Month.start(now), at("2026-02-01T00:00:00Z"));
        assert_eq!(Period::Month.renews(now), Some(at("2026-03-01T00:00:00Z")));
        assert_eq!(Period::Total.start(now), DateTime::UNIX_EPOCH);
        assert_eq!(Period::Total.renews(now), None);
        let end = at("2026-12-31T23:59:59Z");
        assert_eq!(Period::Month.renews(end), Some(at("2027-01-01T00:00:00Z")));
        for p in [Period::Day, Period::Week, Period::Month, Period::Total] {
            assert_eq!(Period::parse(p.as_str()), Some(p));
        }
        assert_eq!(Period::parse("year"), None);
    }

    #[test]
    fn a_call_reserves_its_prompt_and_its_largest_output() {
        let price = Price {
            input: 1_000_000,
            output: 2_000_000,
        };
        // 300 characters ≈ 100 tokens at $1/M, 50 tokens out at $2/M.
        let r = reservation(price, estimate_tokens(300), 50);
        assert_eq!(r, Cost(100 * 1_000_000 + 50 * 2_000_000));
        assert_eq!(parse_budget("0.01"), Ok(10_000));
        assert_eq!(
            Budget {
                usd: 10_000,
                period: Period::Day
            }
            .limit(),
            Cost(10_000_000_000)
        );
        assert!(parse_budget("-1").is_err());
        assert_eq!(parse_budget("50000"), Ok(50_000_000_000));
    }

    #[test]
    fn the_warning_is_given_once_at_eighty_percent() {
        let budget = Cost(100);
        assert!(!crossed_warning(budget, Cost(10), Cost(69)));
        assert!(crossed_warning(budget, Cost(10), Cost(70)));
        assert!(!crossed_warning(budget, Cost(80), Cost(5)));
    }
}
