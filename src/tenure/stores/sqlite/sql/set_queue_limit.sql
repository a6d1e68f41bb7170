-- set_queue_limit: set (or with NULL clear) the queue's max_leased (idempotent).
INSERT INTO tenure_queues (queue, paused, max_leased) VALUES (:queue, 0, :max_leased)
ON CONFLICT (queue) DO UPDATE SET max_leased = excluded.max_leased
