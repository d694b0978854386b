-- API keys' requests per minute, counted by every server on this database (per-key rate
-- limits hold across servers). Only the current and the previous minute are kept.
-- Unlogged: counts need not outlive the database server, and are written on every request.
CREATE UNLOGGED TABLE key_requests (
    key_id UUID NOT NULL,
    minute BIGINT NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (key_id, minute)
);
