"""The lock table in Alembic migrations, as docs/integrations/alembic.md says."""
