"""Integrations of joblocks with schedulers and frameworks.

Each integration is a module of its own that imports the library it integrates with;
``import joblocks`` imports none of them.

- :mod:`joblocks.contrib.apscheduler` — APScheduler 3.x: ``LockedExecutor`` (every job
  of the executor runs once per fire across replicas) and ``locked_job``.
- :mod:`joblocks.contrib.celery` — Celery: ``SingleInstanceTask``, a task base class.
- :mod:`joblocks.contrib.starlette` — Starlette / FastAPI: ``singleton_loop``, a
  lifespan that runs a background loop in one replica at a time.
- :mod:`joblocks.contrib.django` — Django: the lock table in your project's database.

For any other function, use :func:`joblocks.single_instance`.
"""
