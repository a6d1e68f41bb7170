-- Which migrations a schema has had. Created by the migrator, not by a migration.
CREATE TABLE IF NOT EXISTS {schema}.tenure_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
