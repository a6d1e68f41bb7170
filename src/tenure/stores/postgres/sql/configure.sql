-- Run on each new pooled connection (and by benchmarks/postgres_cycle.py's raw loop).
-- plan_cache_mode: tenure's statements are prepared once per connection; left to its
-- heuristics, PostgreSQL keeps re-planning them (custom plans), which costs several times
-- their execution. Their generic plans are the good ones (tests/postgres/test_plans.py).
-- jit: a generic plan's cost estimate on a large table can pass jit_above_cost, and JIT
-- compiling costs tens of milliseconds per execution of a statement that runs in a fraction
-- of one: never worth it for single-row statements.
-- random_page_cost: the default (4) prices a primary-key probe as a read from a spinning
-- disk, so with a few thousand jobs the batch statements' generic plans read the whole
-- table (a hash join over a sequential scan) instead of probing the primary key ten
-- times: about twice the server's CPU per job. tenure's rows are hot in shared buffers;
-- 1.1 is the usual setting for such data (and for SSDs).
-- enable_bitmapscan: a bitmap scan cannot return rows in index order, so a claim's pick
-- done by one reads every ready job of the queue and sorts them to take ten. Its plan
-- looks cheapest only when the statistics say the table is (nearly) empty, as they do after
-- an analyze of a purged table; the generic plan made then stays for the session, and the
-- claims run at a twentieth of their speed (benchmarks/postgres_stale_stats.py). tenure's
-- statements walk or probe one index each, which plain index scans do.
SET plan_cache_mode = force_generic_plan;
SET jit = off;
SET random_page_cost = 1.1;
SET enable_bitmapscan = off
