"""Tests of ``joblocks.contrib.celery``."""
