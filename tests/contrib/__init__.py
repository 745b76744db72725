"""Tests of the integrations (``joblocks.contrib``), one package per integration.

Each integration runs against the real library it integrates with; the multi-process
ones (APScheduler, Celery, Django) start real processes. Shared helpers are in
``tests.support.contrib`` and ``tests.support.databases``.
"""
