"""Helpers of the test suite (not tests, not fixtures; the fixtures are in tests/conftest.py).

- ``servers``: throwaway PostgreSQL, MariaDB and PgBouncer on loopback;
- ``matrix``: the backends × acquire paths, and skip-locally / fail-in-CI for servers;
- ``faces``: the sync and asyncio models as the tests drive them;
- ``pool``: spawned worker processes with start barriers (races, reliability);
- ``pooler_workers``: the processes of the pooler and serializable tests;
- ``aio``: asyncio waits that end when the awaited work fails;
- ``databases``: a fresh, empty database on a test server;
- ``contrib``: child processes and ``configured()`` for the integration tests.
"""
