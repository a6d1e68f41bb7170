-- tenure schema, version 11: fleet-wide queue rates (issue #18). A queue with
-- rate_per_second set starts at most that many leases a second, for every process using
-- the file: a token bucket of at most rate_burst tokens, refilled at rate_per_second
-- tokens a second by the store's clock. rate_tokens is what it held at store time rate_at;
-- each lease granted takes one (pick.sql finds nothing in a queue without a whole token,
-- spend_token.sql debits it in the claim's own write transaction). NULL: no rate.
ALTER TABLE tenure_queues ADD COLUMN rate_per_second REAL CHECK (rate_per_second > 0);
ALTER TABLE tenure_queues ADD COLUMN rate_burst INTEGER CHECK (rate_burst >= 1);
ALTER TABLE tenure_queues ADD COLUMN rate_tokens REAL;
ALTER TABLE tenure_queues ADD COLUMN rate_at REAL;
