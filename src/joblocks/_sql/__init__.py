"""SQL: each family's profile, session set-up, the table's schema, the statements."""
