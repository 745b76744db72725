"""Tests of ``joblocks.contrib.django``."""
