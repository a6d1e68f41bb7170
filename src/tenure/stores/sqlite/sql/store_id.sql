-- The store's id, to tell a connection to this store's file from one to another file.
SELECT value FROM tenure_meta WHERE key = 'store_id'
