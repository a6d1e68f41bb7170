-- tenure schema, version 2: job control (cancel, requeue, delete, purge).
-- A new final state, cancelled. The check is replaced in place (same name as schema.sql's):
-- NOT VALID then VALIDATE, so the scan of existing rows does not block writers for long.
ALTER TABLE {schema}.tenure_jobs DROP CONSTRAINT tenure_jobs_state_check;
ALTER TABLE {schema}.tenure_jobs ADD CONSTRAINT tenure_jobs_state_check
    CHECK (state IN ('ready', 'leased', 'done', 'dead', 'cancelled')) NOT VALID;
ALTER TABLE {schema}.tenure_jobs VALIDATE CONSTRAINT tenure_jobs_state_check;

-- The generation floor: the highest generation of any job deleted or purged. A claim takes
-- greatest(generation, floor) + 1, so a job id submitted again after its job was deleted
-- never gets a token the deleted job had.
CREATE TABLE {schema}.tenure_floor (
    id         integer PRIMARY KEY CHECK (id = 0),
    generation bigint NOT NULL CHECK (generation >= 0)
);
INSERT INTO {schema}.tenure_floor (id, generation) VALUES (0, 0);

-- purge.sql walks this index, oldest finished job first. Its key, updated_at, changes on
-- every claim and renewal, but those updates cannot be HOT anyway: they change available_at
-- (and claims the state), which tenure_jobs_claimable indexes already.
CREATE INDEX tenure_jobs_finished
    ON {schema}.tenure_jobs (updated_at)
    WHERE state IN ('done', 'dead', 'cancelled');
