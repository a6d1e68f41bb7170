INSERT INTO {schema}.tenure_migrations (version, name) VALUES ({version}, {name})
