-- Does the schema exist; has it been migrated; to which version; and the store's id.
SELECT
    EXISTS (SELECT FROM pg_namespace WHERE nspname = {schema_name}),
    to_regclass({migrations_table}) IS NOT NULL,
    to_regclass({jobs_table}) IS NOT NULL
