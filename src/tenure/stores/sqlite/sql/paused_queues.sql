-- paused_queues: the names of the paused queues, in order.
SELECT queue FROM tenure_queues WHERE paused ORDER BY queue
