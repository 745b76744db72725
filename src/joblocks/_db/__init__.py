"""Databases: engines, connections kept, sending statements, deadlines, records."""
