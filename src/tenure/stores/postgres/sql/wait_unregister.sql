DELETE FROM {schema}.tenure_waiters WHERE waiter = %(waiter)s
