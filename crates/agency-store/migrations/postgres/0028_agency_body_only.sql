-- What the agency's body (0027) replaces. `name` and `handle` stay beside it: queries find
-- an agency by name, and names are unique per owner.
ALTER TABLE agencies ALTER COLUMN body SET NOT NULL;
DROP TABLE agents;
ALTER TABLE agencies
    DROP COLUMN protocol,
    DROP COLUMN manager,
    DROP COLUMN max_hops,
    DROP COLUMN deadline_ms,
    DROP COLUMN providers,
    DROP COLUMN mcp_servers,
    DROP COLUMN budget_usd,
    DROP COLUMN budget_period,
    DROP COLUMN max_turn_cost_usd;
