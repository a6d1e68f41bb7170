-- pause_queue / resume_queue: set the queue's paused flag (idempotent).
INSERT INTO tenure_queues (queue, paused) VALUES (:queue, :paused)
ON CONFLICT (queue) DO UPDATE SET paused = excluded.paused
