//! Spend limits (issue 35): the budgets a turn's model calls are paid from — its API key's, the
//! key's end user's, its agency's — checked before a turn begins (`Runtime::begin`) and
//! reserved before each model call (`call::paid`), then settled to the exact cost.
//!
//! A call reserves its prompt at the input price and its largest output at the output price
//! on every budget it is paid from, all or none, atomically in the store (so every process on
//! a shared database sees one amount); a reservation is refused once what a budget spent and
//! holds reaches its limit, so a budget is passed by at most one call's reservation however
//! many calls race for its last cent. A turn paid by nobody ([`Payer::of`] is `None`) costs
//! nothing here: no store round trip.

use std::sync::{Arc, RwLock};

use agency_core::spend::{self, Budget, Period};
use agency_core::{Agency, ApiKey, Cost, Price};
use agency_store::{SpendLine, SpendRow, Store};
use chrono::{DateTime, Utc};

use crate::RuntimeError;

/// What the time is, for budgets' periods (tests set their own).
pub type Clock = Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>;

/// The longest end user name a budget is kept under (longer names are cut).
const MAX_END_USER: usize = 256;

/// Whose budget a line is.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Whose {
    Key(String),
    EndUser(String),
    Agency(String),
}

/// The budgets a turn's calls are paid from, in the order they are reserved (the same
/// everywhere: key, end user, agency).
#[derive(Clone, Debug)]
pub struct Payer {
    budgets: Vec<(String, Budget, Whose)>,
}

impl Payer {
    /// Who pays for calls made for `key` (when an API key asks) and its `end_user`, in
    /// `agency`; `None` when no budget applies.
    pub fn of(key: Option<&ApiKey>, end_user: Option<&str>, agency: &Agency) -> Option<Arc<Self>> {
        let mut budgets = Vec::new();
        if let Some(key) = key {
            if let Some(b) = key.budgets.key() {
                budgets.push((format!("key:{}", key.id), b, Whose::Key(key.name.clone())));
            }
            if let (Some(b), Some(user)) = (key.budgets.user(), end_user) {
                let user: String = user.chars().take(MAX_END_USER).collect();
                budgets.push((user_scope(key.id, &user), b, Whose::EndUser(user.clone())));
            }
        }
        if let Some(b) = agency.limits.budget {
            budgets.push((
                agency_scope(agency.id),
                b,
                Whose::Agency(agency.name.clone()),
            ));
        }
        (!budgets.is_empty()).then(|| Arc::new(Self { budgets }))
    }
}

/// The scope of a key's budget.
pub fn key_scope(key: uuid::Uuid) -> String {
    format!("key:{key}")
}

/// The scope of an end user's budget of a key; every end user of the key begins with
/// [`user_scope_prefix`].
pub fn user_scope(key: uuid::Uuid, user: &str) -> String {
    format!("{}{user}", user_scope_prefix(key))
}

pub fn user_scope_prefix(key: uuid::Uuid) -> String {
    format!("user:{key}:")
}

pub fn agency_scope(agency: agency_core::AgencyId) -> String {
    format!("agency:{}", agency.0)
}

/// A call to be paid: who pays, at what price, and how large it may be.
pub(crate) struct Paid {
    pub payer: Arc<Payer>,
    pub price: Option<Price>,
    /// Characters of the context the model reads.
    pub prompt_chars: usize,
    /// The most tokens it may answer.
    pub max_output: u32,
}

impl Paid {
    /// A call of `model` (priced `price`, answering at most `max_tokens`) on `context`.
    pub(crate) fn of(
        payer: Arc<Payer>,
        price: Option<Price>,
        context: &[agency_core::Message],
        max_tokens: Option<u32>,
    ) -> Self {
        Self {
            payer,
            price,
            prompt_chars: context.iter().map(|m| m.text.len()).sum(),
            max_output: max_tokens.unwrap_or(spend::DEFAULT_MAX_OUTPUT),
        }
    }
}

/// A call's reservation, to settle once the call ended.
#[must_use]
pub(crate) struct Reservation {
    lines: Vec<SpendLine>,
    limits: Vec<Cost>,
    amount: i64,
    payer: Arc<Payer>,
}

/// What a process spends through: its store and its clock.
pub struct Spending {
    store: Arc<dyn Store>,
    clock: RwLock<Clock>,
}

fn pico(c: Cost) -> i64 {
    i64::try_from(c.0).unwrap_or(i64::MAX)
}

impl Spending {
    pub(crate) fn new(store: Arc<dyn Store>) -> Self {
        Self {
            store,
            clock: RwLock::new(Arc::new(Utc::now) as Clock),
        }
    }

    pub(crate) fn set_clock(&self, clock: Clock) {
        match self.clock.write() {
            Ok(mut c) => *c = clock,
            Err(poisoned) => *poisoned.into_inner() = clock,
        }
    }

    fn now(&self) -> DateTime<Utc> {
        match self.clock.read() {
            Ok(c) => c(),
            Err(poisoned) => poisoned.into_inner()(),
        }
    }

    fn lines(&self, payer: &Payer) -> (Vec<SpendLine>, DateTime<Utc>) {
        let now = self.now();
        let lines = payer
            .budgets
            .iter()
            .map(|(scope, b, _)| SpendLine {
                scope: scope.clone(),
                period_start: b.period.start(now).timestamp(),
                limit: pico(b.limit()),
            })
            .collect();
        (lines, now)
    }

    /// Refuses a turn up front when a budget it would be paid from is spent.
    pub(crate) async fn check(&self, payer: &Payer) -> Result<(), RuntimeError> {
        let (lines, now) = self.lines(payer);
        for (i, line) in lines.iter().enumerate() {
            let row = self.store.spent(&line.scope, line.period_start).await?;
            if line.limit <= 0 || row.spent.saturating_add(row.reserved) >= line.limit {
                return Err(exhausted(&payer.budgets[i], now));
            }
        }
        Ok(())
    }

    /// Reserves what the call `paid` of `model` may cost at most on every budget of its payer,
    /// or says which one ran out. A model without a price cannot be paid from a budget: refused.
    pub(crate) async fn reserve(
        &self,
        paid: &Paid,
        model: &agency_core::ModelRef,
    ) -> Result<Reservation, RuntimeError> {
        let payer = &paid.payer;
        let Some(price) = paid.price else {
            return Err(RuntimeError::Budget(format!(
                "model `{model}` has no price, so the budget this request is paid from cannot be kept: give it a price in the agency's `prices`"
            )));
        };
        let amount = pico(spend::reservation(
            price,
            spend::estimate_tokens(paid.prompt_chars),
            paid.max_output,
        ));
        let (lines, now) = self.lines(payer);
        if let Some(i) = lines.iter().position(|l| l.limit <= 0) {
            return Err(exhausted(&payer.budgets[i], now));
        }
        match self.store.reserve(&lines, amount).await? {
            Some(i) => Err(exhausted(&payer.budgets[i], now)),
            None => Ok(Reservation {
                limits: payer.budgets.iter().map(|(_, b, _)| b.limit()).collect(),
                lines,
                amount,
                payer: payer.clone(),
            }),
        }
    }

    /// Settles `r` to what the call cost (nothing when it failed) and the tokens it used;
    /// warns once a budget passes 80%.
    pub(crate) async fn settle(&self, r: Reservation, cost: Cost, tokens: u32) {
        let cost = pico(cost);
        let done = self
            .store
            .settle(&r.lines, r.amount, cost, i64::from(tokens))
            .await;
        match done {
            Ok(spent) => {
                for ((now, limit), (_, _, whose)) in
                    spent.iter().zip(&r.limits).zip(&r.payer.budgets)
                {
                    let now = Cost(u64::try_from(*now).unwrap_or(0));
                    let before = Cost(now.0.saturating_sub(u64::try_from(cost).unwrap_or(0)));
                    if spend::crossed_warning(*limit, before, Cost(now.0 - before.0)) {
                        tracing::warn!(
                            budget = %describe(whose),
                            spent = %now,
                            limit = %limit,
                            "a budget is 80% spent"
                        );
                    }
                }
            }
            Err(e) => tracing::error!(error = %e, "cannot settle a model call's reservation"),
        }
    }

    /// What scopes beginning with `prefix` spent, newest period first.
    pub(crate) async fn spend_of(
        &self,
        prefix: &str,
        limit: u32,
    ) -> Result<Vec<SpendRow>, RuntimeError> {
        Ok(self.store.spend(prefix, limit).await?)
    }
}

/// Who a budget is of, as a person reads it.
fn describe(whose: &Whose) -> String {
    match whose {
        Whose::Key(name) => format!("API key `{name}`'s budget"),
        Whose::EndUser(user) => format!("end user `{user}`'s budget on this API key"),
        Whose::Agency(name) => format!("agency `{name}`'s budget"),
    }
}

/// The refusal of `budget`: which ran out, and when it renews.
fn exhausted((_, budget, whose): &(String, Budget, Whose), now: DateTime<Utc>) -> RuntimeError {
    let renews = match budget.period.renews(now) {
        Some(at) => format!("it renews at {}", at.format("%Y-%m-%d %H:%M UTC")),
        None => "it is a total budget and does not renew; raise it to go on".to_string(),
    };
    let period = match budget.period {
        Period::Total => String::new(),
        p => format!(" a {}", p.as_str()),
    };
    RuntimeError::Budget(format!(
        "You exceeded your current quota: {} of ${}{period} is spent; {renews}.",
        describe(whose),
        agency_core::price::format_dollars(budget.usd)
    ))
}

/// An agency with a budget or a turn cap whose agent's model has no price (neither among the
/// agency's own providers' `prices` nor the server's) cannot keep it: refused at that agent's
/// `model`.
pub(crate) fn unpriced(
    agency: &Agency,
    server: &agency_providers::Providers,
) -> Result<(), agency_core::ValidationErrors> {
    if agency.limits.budget.is_none() && agency.limits.max_turn_cost.is_none() {
        return Ok(());
    }
    let own = |m: &agency_core::ModelRef| {
        agency
            .providers
            .iter()
            .find(|p| p.name == m.provider)
            .map(|p| p.prices.iter().any(|(name, _)| *name == m.model))
    };
    let problems: Vec<_> = agency
        .agents
        .iter()
        .enumerate()
        .filter(|(_, a)| !own(&a.model).unwrap_or_else(|| server.price(&a.model).is_some()))
        .map(|(i, a)| agency_core::ValidationError {
            path: format!("agents[{i}].model"),
            message: format!(
                "`{}` has no price, and the agency has a budget (`budget_usd` or `max_turn_cost_usd`) it could not keep: give it a price in its provider's `prices`",
                a.model
            ),
        })
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(agency_core::ValidationErrors(problems))
    }
}

/// What a budgeted scope spent in one period (spend is counted only where a budget is set).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spent {
    /// The period's start (the Unix epoch for a total budget).
    pub period_start: DateTime<Utc>,
    /// What the calls that ended cost.
    pub spent: Cost,
    /// Held by calls still running.
    pub reserved: Cost,
    pub tokens: u64,
}

/// Periods reported at most, newest first.
const MAX_PERIODS: u32 = 24;
/// End users reported at most.
const MAX_USERS: u32 = 1000;

fn spent_of(row: &SpendRow) -> Spent {
    Spent {
        period_start: DateTime::from_timestamp(row.period_start, 0).unwrap_or_default(),
        spent: Cost(u64::try_from(row.spent).unwrap_or(0)),
        reserved: Cost(u64::try_from(row.reserved).unwrap_or(0)),
        tokens: u64::try_from(row.tokens).unwrap_or(0),
    }
}

/// Spend against budgets: what a key, its end users and an agency spent, period by period.
/// Reached through [`Runtime::spend`](crate::Runtime::spend).
pub struct Spend<'a> {
    pub(crate) rt: &'a crate::Runtime,
}

impl Spend<'_> {
    /// Sets the clock budgets' periods are read by (tests move it to see periods roll over).
    pub fn set_clock(&self, clock: Clock) {
        self.rt.spending.set_clock(clock);
    }

    /// What `key` spent, newest period first, and what each of its end users spent (their
    /// name, newest period first). The caller has the key from its agency's list.
    pub async fn of_key(
        &self,
        key: &ApiKey,
    ) -> Result<(Vec<Spent>, Vec<(String, Spent)>), RuntimeError> {
        let own = self
            .rt
            .spending
            .spend_of(&key_scope(key.id), MAX_PERIODS)
            .await?;
        let prefix = user_scope_prefix(key.id);
        let users = self.rt.spending.spend_of(&prefix, MAX_USERS).await?;
        Ok((
            own.iter().map(spent_of).collect(),
            users
                .iter()
                .map(|r| (r.scope[prefix.len()..].to_string(), spent_of(r)))
                .collect(),
        ))
    }

    /// What the agency spent against its budget, newest period first.
    pub async fn of_agency(
        &self,
        agency: agency_core::AgencyId,
    ) -> Result<Vec<Spent>, RuntimeError> {
        let rows = self
            .rt
            .spending
            .spend_of(&agency_scope(agency), MAX_PERIODS)
            .await?;
        Ok(rows.iter().map(spent_of).collect())
    }

    /// The start of the current period of `period` (by the spend clock).
    pub fn period_start(&self, period: Period) -> DateTime<Utc> {
        period.start(self.rt.spending.now())
    }
}

/// A key's budgets as a person gives them (`budget_usd`, `budget_period`, `user_budget_usd`:
/// dollars, and `day`, `week`, `month` or `total`), each problem at its field.
pub fn key_budgets(
    usd: Option<&str>,
    period: Option<&str>,
    user_usd: Option<&str>,
) -> Result<agency_core::KeyBudgets, RuntimeError> {
    let dollars = |field: &str, text: Option<&str>| {
        text.map(|t| spend::parse_budget(t).map_err(|e| RuntimeError::field(field, e)))
            .transpose()
    };
    let period = match period {
        None => Period::default(),
        Some(p) => Period::parse(p).ok_or_else(|| {
            RuntimeError::field(
                "budget_period",
                format!("`{p}` is not a period: use day, week, month or total"),
            )
        })?,
    };
    Ok(agency_core::KeyBudgets {
        usd: dollars("budget_usd", usd)?,
        user_usd: dollars("user_budget_usd", user_usd)?,
        period,
    })
}
