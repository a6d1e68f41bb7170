-- Run on each new pooled connection (and by benchmarks/postgres_cycle.py's raw loop).
-- plan_cache_mode: tenure's statements are prepared once per connection; left to its
-- heuristics, PostgreSQL keeps re-planning them (custom plans), which costs several times
-- their execution. Their generic plans are the good ones (tests/postgres/test_plans.py).
-- jit: a generic plan's cost estimate on a large table can pass jit_above_cost, and JIT
-- compiling costs tens of milliseconds per execution of a statement that runs in a fraction
-- of one: never worth it for single-row statements.
SET plan_cache_mode = force_generic_plan;
SET jit = off
