-- queue_rates: each rate-limited queue, its rate_per_second and rate_burst, in order.
SELECT queue, rate_per_second, rate_burst FROM {schema}.tenure_queues
WHERE rate_per_second IS NOT NULL ORDER BY queue
