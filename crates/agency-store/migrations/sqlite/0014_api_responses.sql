-- Responses API responses an agency's keys stored (`store: true`): what `GET /v1/responses/{id}`
-- returns, what `previous_response_id` continues (its conversation, after its turn), and the
-- request's input items.
CREATE TABLE api_responses (
    id              TEXT PRIMARY KEY NOT NULL,
    agency_id       BLOB NOT NULL REFERENCES agencies (id) ON DELETE CASCADE,
    conversation_id BLOB NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    turn_number     INTEGER NOT NULL,
    created_at      TEXT NOT NULL,
    body            TEXT NOT NULL,
    input           TEXT NOT NULL
);
CREATE INDEX api_responses_conversation ON api_responses (conversation_id);
