"""What the integrations need of the library beyond its public API: the one seam between
``joblocks`` and ``joblocks.contrib``.

Every module of ``joblocks.contrib`` imports the library only from here and from the
public ``joblocks`` / ``joblocks.aio`` API, so what an integration may rely on is this
list (an integration needing more adds it here, not a private import of its own):

- validating arguments before anything else: :data:`Duration` (ms as an ``int``, or a
  ``timedelta``), :func:`duration_ms`, :func:`lock_key`, :class:`LeaseOptions` (the
  lease options, validated once), :func:`check_cancel_on_loss`, :func:`check_options`
  (the model options of ``configure``);
- lock keys from a job's arguments: :class:`KeyTemplate` (a ``str.format`` template
  checked against the function's signature);
- running under a lease: :func:`run_leased` (``(taken, result)``, the lease released
  quietly afterwards), :func:`try_lease_async` (an asyncio lease of options checked
  once), :class:`SingleInstance` (the decorator's wrapper, also the
  APScheduler executor's), :func:`is_async_callable` (which face runs a function);
- :func:`unique_holder`: a holder of its own for every run (this process's worker id
  and a random suffix), so that a lease kept by ``min_hold`` shuts out later runs;
- the default model: :func:`get_model` (sync, as set by :func:`configure`);
  :func:`wrong_face`, the one error for a model of the other face;
- :data:`log`: the library's logger (``"joblocks"``);
- what a take gave (``run_leased``'s ``taken``): :class:`Skipped` (``schedule=``: the
  start's slot was already run), else :class:`Taken` or :class:`Acquired`;
- ``schedule=``: :func:`schedule_option` (check a schedule and its time zone).
"""

from __future__ import annotations

# Re-exported with ``as`` (mypy's explicit re-export) and without ``__all__``: the names
# are for the integrations, not a public API of their own.
from typing import TYPE_CHECKING

from .._core.base import log as log
from .._core.base import wrong_face as wrong_face
from .._core.options import LeaseOptions as LeaseOptions
from .._core.options import check_cancel_on_loss as check_cancel_on_loss
from .._core.options import schedule_option as schedule_option
from .._core.registry import check_options as check_options
from .._core.state import Skipped as Skipped
from .._decorator import KeyTemplate as KeyTemplate
from .._decorator import SingleInstance as SingleInstance
from .._decorator import is_async_callable as is_async_callable
from .._decorator import run_leased as run_leased
from .._decorator import unique_holder as unique_holder
from .._sync.run import configure as configure
from .._sync.run import get_model as get_model
from .._util.validate import Duration as Duration
from .._util.validate import duration_ms as duration_ms
from .._util.validate import lock_key as lock_key

if TYPE_CHECKING:
    from .. import aio


async def try_lease_async(
    model: aio.JobLockModel, key: str, options: LeaseOptions
) -> aio.Lease | None:
    """``model.try_lease`` of a key and options already checked (``options.for_run``
    gives a run its holder)."""
    return (await model._take(key, options)).lease
