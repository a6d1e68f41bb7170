-- The answer of a batch claim (see _claim_next_ctes.sql), unordered: each claimed job with
-- its position, then each buried one. Columns as in _complete_many_answer.sql.
SELECT * FROM claimed
UNION ALL
SELECT * FROM buried
