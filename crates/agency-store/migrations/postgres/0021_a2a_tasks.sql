-- A2A tasks (issue 34): each message an agency's key sent over A2A is a task, the turn it ran
-- in its conversation (the task's context). Stored so that a task's state survives a restart
-- and any server answers for it. `ended` is set with a final state; an ended task is not
-- changed again. The conversation is not a foreign key: a new one is written with its first
-- turn, after its task.
CREATE TABLE a2a_tasks (
    id              UUID PRIMARY KEY NOT NULL,
    agency_id       UUID NOT NULL REFERENCES agencies (id) ON DELETE CASCADE,
    conversation_id UUID NOT NULL,
    state           TEXT NOT NULL,
    ended           BOOLEAN NOT NULL,
    turn_number     BIGINT,
    message_id      TEXT NOT NULL,
    request         TEXT NOT NULL,
    answer          TEXT NOT NULL,
    note            TEXT NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL
);
CREATE INDEX a2a_tasks_agency ON a2a_tasks (agency_id, created_at);
CREATE INDEX a2a_tasks_conversation ON a2a_tasks (conversation_id);
