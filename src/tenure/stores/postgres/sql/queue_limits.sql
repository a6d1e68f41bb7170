-- queue_limits: each limited queue and its max_leased, in order.
SELECT queue, max_leased FROM {schema}.tenure_queues
WHERE max_leased IS NOT NULL ORDER BY queue
