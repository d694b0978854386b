-- Where an agency's approvals are announced (issue 36): an endpoint of its owner's, called
-- with each call that starts waiting. Its signing secret is stored nowhere: it is derived from
-- the master key and `id`, which a change of the URL replaces.
CREATE TABLE approval_webhooks (
    agency_id  UUID PRIMARY KEY NOT NULL REFERENCES agencies (id) ON DELETE CASCADE,
    id         UUID NOT NULL,
    url        TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
);
