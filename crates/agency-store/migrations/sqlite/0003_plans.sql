-- Plans (spec 002): what an agent means to do after a reflection; at most one active plan per
-- agent. Tasks in order; each task's actions are PDDL ground actions.
CREATE TABLE plans (
    id            BLOB PRIMARY KEY NOT NULL,
    agency_id     BLOB NOT NULL REFERENCES agencies (id) ON DELETE CASCADE,
    agent_id      INTEGER NOT NULL,
    reflection_id BLOB REFERENCES memories (id) ON DELETE SET NULL,
    status        TEXT NOT NULL,
    active        INTEGER NOT NULL,
    pddl          TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL
);
CREATE UNIQUE INDEX plans_active ON plans (agency_id, agent_id) WHERE active;

CREATE TABLE plan_tasks (
    id          BLOB PRIMARY KEY NOT NULL,
    plan_id     BLOB NOT NULL REFERENCES plans (id) ON DELETE CASCADE,
    position    INTEGER NOT NULL,
    description TEXT NOT NULL,
    status      TEXT NOT NULL
);
CREATE INDEX plan_tasks_plan ON plan_tasks (plan_id, position);

-- parameters: a JSON array of PDDL symbols.
CREATE TABLE plan_actions (
    task_id    BLOB NOT NULL REFERENCES plan_tasks (id) ON DELETE CASCADE,
    position   INTEGER NOT NULL,
    name       TEXT NOT NULL,
    parameters TEXT NOT NULL,
    PRIMARY KEY (task_id, position)
);
