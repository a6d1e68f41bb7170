SELECT value FROM {schema}.tenure_meta WHERE key = 'store_id'
