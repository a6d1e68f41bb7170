-- tenure schema, version 3 (issue #17): waiting for a job, and listing in pages.

-- Listing pages walk submission order from a cursor (list_page.sql). seq never changes,
-- but every update that moves a job (claim, renew, complete) is already a non-HOT update
-- (it changes available_at, a column of tenure_jobs_claimable), so this index costs one
-- more index entry per such update: measured in docs/benchmarks.md.
CREATE INDEX tenure_jobs_by_seq ON {schema}.tenure_jobs (seq);

-- store.wait registers in tenure_waiters and LISTENs on "tenure_end_<schema>"; a job that
-- finishes (done, dead, or any final state: whatever is neither ready nor leased) notifies
-- its id, only when someone waits for it: a notification serialises its transaction's
-- commit with every other notifying commit of the cluster, so completions send none
-- unless waited for. Any writer is covered (complete, fail, a claim that buries, SQL of
-- the user's own). `until`: when a waiter that vanished stops counting (server time).
CREATE TABLE {schema}.tenure_waiters (
    waiter text PRIMARY KEY,
    job_id text COLLATE "C" NOT NULL,
    until  double precision NOT NULL
);
CREATE INDEX tenure_waiters_job ON {schema}.tenure_waiters (job_id);

CREATE FUNCTION {schema}.tenure_notify_ended() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT FROM {schema}.tenure_waiters WHERE job_id = NEW.job_id) THEN
        PERFORM pg_notify('tenure_end_' || TG_TABLE_SCHEMA, NEW.job_id);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER tenure_jobs_ended
    AFTER UPDATE OF state ON {schema}.tenure_jobs
    FOR EACH ROW WHEN (NEW.state NOT IN ('ready', 'leased') AND OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION {schema}.tenure_notify_ended();
