-- complete.sql for many jobs in one statement (see _complete_many_ctes.sql). One answer row
-- per completion, in input order (position).
{include:_clock},
{include:_complete_many_ctes}
{include:_batch_answer}
ORDER BY position
