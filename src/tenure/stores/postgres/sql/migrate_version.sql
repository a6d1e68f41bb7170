SELECT coalesce(max(version), 0) FROM {schema}.tenure_migrations
