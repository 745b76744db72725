"""Migrations of the joblocks Django app: the lock table and its fencing counter."""
