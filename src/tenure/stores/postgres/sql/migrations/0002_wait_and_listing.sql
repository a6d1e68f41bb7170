-- tenure schema, version 2 (issue #17): waiting for a job, and listing in pages.

-- Listing pages walk submission order from a cursor (list_page.sql). seq never changes,
-- but every update that moves a job (claim, renew, complete) is already a non-HOT update
-- (it changes available_at, a column of tenure_jobs_claimable), so this index costs one
-- more index entry per such update: measured in docs/benchmarks.md.
CREATE INDEX tenure_jobs_by_seq ON {schema}.tenure_jobs (seq);

-- store.wait LISTENs on "tenure_end_<schema>"; a job that finishes (done, dead, or any
-- final state: whatever is neither ready nor leased) notifies its id. Any writer is
-- covered (complete, fail, a claim that buries, SQL of the user's own).
CREATE FUNCTION {schema}.tenure_notify_ended() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('tenure_end_' || TG_TABLE_SCHEMA, NEW.job_id);
    RETURN NULL;
END
$$;

CREATE TRIGGER tenure_jobs_ended
    AFTER UPDATE OF state ON {schema}.tenure_jobs
    FOR EACH ROW WHEN (NEW.state NOT IN ('ready', 'leased') AND OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION {schema}.tenure_notify_ended();
