-- tenure schema, version 9: fleet-wide queue limits (issue #18). A queue with max_leased
-- set has at most that many running leases at once, for every process using the file:
-- claim_next, claim_many, complete_and_claim and claim of a named job take its jobs only
-- while fewer are leased (pick.sql, read in the claim's own write transaction, which
-- BEGIN IMMEDIATE serialises with every other write). NULL: no limit.
ALTER TABLE tenure_queues ADD COLUMN max_leased INTEGER CHECK (max_leased >= 1);
