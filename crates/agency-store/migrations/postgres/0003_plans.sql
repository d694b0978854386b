-- Plans (spec 002): what an agent means to do after a reflection; at most one active plan per
-- agent. Tasks in order; each task's actions are PDDL ground actions.
CREATE TABLE plans (
    id            UUID PRIMARY KEY NOT NULL,
    agency_id     UUID NOT NULL REFERENCES agencies (id) ON DELETE CASCADE,
    agent_id      BIGINT NOT NULL,
    reflection_id UUID REFERENCES memories (id) ON DELETE SET NULL,
    status        TEXT NOT NULL,
    active        BOOLEAN NOT NULL,
    pddl          TEXT NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL,
    updated_at    TIMESTAMPTZ NOT NULL
);
CREATE UNIQUE INDEX plans_active ON plans (agency_id, agent_id) WHERE active;

CREATE TABLE plan_tasks (
    id          UUID PRIMARY KEY NOT NULL,
    plan_id     UUID NOT NULL REFERENCES plans (id) ON DELETE CASCADE,
    position    BIGINT NOT NULL,
    description TEXT NOT NULL,
    status      TEXT NOT NULL
);
CREATE INDEX plan_tasks_plan ON plan_tasks (plan_id, position);

-- parameters: a JSON array of PDDL symbols.
CREATE TABLE plan_actions (
    task_id    UUID NOT NULL REFERENCES plan_tasks (id) ON DELETE CASCADE,
    position   BIGINT NOT NULL,
    name       TEXT NOT NULL,
    parameters TEXT NOT NULL,
    PRIMARY KEY (task_id, position)
);
