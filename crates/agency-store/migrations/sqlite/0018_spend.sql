-- Spend limits (issue 35). A key's budget (micro-dollars, per period) and each of its end
-- users'; an agency's budget and its turns' cost cap.
ALTER TABLE api_keys ADD COLUMN budget_usd INTEGER;
ALTER TABLE api_keys ADD COLUMN user_budget_usd INTEGER;
ALTER TABLE api_keys ADD COLUMN budget_period TEXT NOT NULL DEFAULT 'month';
ALTER TABLE agencies ADD COLUMN budget_usd INTEGER;
ALTER TABLE agencies ADD COLUMN budget_period TEXT NOT NULL DEFAULT 'month';
ALTER TABLE agencies ADD COLUMN max_turn_cost_usd INTEGER;
-- What each budgeted scope (`key:ID`, `user:KEY:END USER`, `agency:ID`) spent in each period
-- (its start in Unix seconds; 0 for a total budget), in pico-dollars: settled, and reserved by
-- the calls still running.
CREATE TABLE spend (
    scope TEXT NOT NULL,
    period_start INTEGER NOT NULL,
    spent INTEGER NOT NULL DEFAULT 0,
    reserved INTEGER NOT NULL DEFAULT 0,
    tokens INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (scope, period_start)
);
