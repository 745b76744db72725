"""Tests of ``joblocks.contrib.apscheduler``."""
