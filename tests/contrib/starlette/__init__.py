"""Tests of ``joblocks.contrib.starlette``."""
