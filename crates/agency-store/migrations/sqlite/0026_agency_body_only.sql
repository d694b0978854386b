-- What the agency's body (0025) replaces. `name` and `handle` stay beside it: queries find
-- an agency by name, and names are unique per owner.
DROP TABLE agents;
ALTER TABLE agencies DROP COLUMN protocol;
ALTER TABLE agencies DROP COLUMN manager;
ALTER TABLE agencies DROP COLUMN max_hops;
ALTER TABLE agencies DROP COLUMN deadline_ms;
ALTER TABLE agencies DROP COLUMN providers;
ALTER TABLE agencies DROP COLUMN mcp_servers;
ALTER TABLE agencies DROP COLUMN budget_usd;
ALTER TABLE agencies DROP COLUMN budget_period;
ALTER TABLE agencies DROP COLUMN max_turn_cost_usd;
