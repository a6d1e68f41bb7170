-- tenure schema, version 6: store schedules (issue #18, `tenure schedules`). Each row is a
-- periodic job that every worker serving its queue runs as it runs its own
-- @worker.periodic ones (one job per tick across the fleet: the tick's job id is derived
-- from the name). Times are store time (seconds since the epoch).
CREATE TABLE {schema}.tenure_schedules (
    name         text COLLATE "C" PRIMARY KEY,
    cron         text NOT NULL,
    queue        text NOT NULL,
    payload      text,
    timezone     text NOT NULL,
    catch_up     text NOT NULL CHECK (catch_up IN ('skip', 'once')),
    max_attempts integer NOT NULL,
    created_at   double precision NOT NULL,
    updated_at   double precision NOT NULL
);
