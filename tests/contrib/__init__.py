"""Tests of the integrations: Django, Alembic, metrics, the test kit."""
