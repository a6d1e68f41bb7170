-- Run on each new pooled connection. tenure's statements are prepared once per connection;
-- left to its heuristics, PostgreSQL keeps re-planning them (custom plans), which costs
-- several times their execution. Their generic plans are the good ones (the plans the
-- tests/postgres/test_plans.py checks), so use them.
SET plan_cache_mode = force_generic_plan
