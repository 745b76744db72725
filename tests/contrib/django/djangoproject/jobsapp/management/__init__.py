"""Management commands of the test app."""
