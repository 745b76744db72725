"""Cron schedules as slots: the period between two fire times of a cron expression.

``Schedule.parse("*/5 * * * *")`` is the schedule; ``slot(now_ms)`` is the half-open
interval ``[start_ms, end_ms)`` (epoch milliseconds, UTC) from the last fire time at or
before ``now_ms`` to the next one after it. ``schedule=`` runs a job at most once per
slot (``_slots``); the run ledger labels runs by slot.

The cron expressions are read by `cronsim <https://pypi.org/project/cronsim/>`_ (the
parser of the Healthchecks cron monitor: pure Python, no dependencies, BSD licence).
It follows Debian's cron, DST included: in a local-time schedule (``timezone=``), a job
at a fixed time that falls into the hour skipped in spring runs right after the skip,
and one in the hour repeated in autumn runs once, not twice (croniter 7 runs it twice;
docs/howto/cron-once-per-tick.md has the comparison). Five fields (minute hour
day-of-month month day-of-week), or six with seconds first (cronsim >= 2.7), and the
aliases ``@hourly``, ``@daily``/``@midnight``, ``@weekly``, ``@monthly``,
``@yearly``/``@annually``.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone, tzinfo
from typing import Any

__all__ = ["Schedule"]

_UTC = timezone.utc
_EPOCH = datetime(1970, 1, 1, tzinfo=_UTC)

#: The aliases of Vixie/Debian cron (``@reboot`` has no slots, so it is not one).
ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

#: How many fire times a slot computation may step over before giving up (a guard:
#: the DST corrections below step over at most one or two).
_MAX_STEPS = 8


def _cronsim() -> Any:
    try:
        from cronsim import CronSim, CronSimError
    except ImportError as exc:  # pragma: no cover - a core dependency
        raise ImportError(
            "schedule= needs the cron parser cronsim: pip install cronsim "
            "(a dependency of joblocks; was it installed without dependencies?)"
        ) from exc
    return CronSim, CronSimError


def _zone(value: object) -> tuple[str | None, tzinfo]:
    """The timezone's IANA name (None for none given) and its tzinfo."""
    if value is None:
        return None, _UTC
    if isinstance(value, str):
        name = value.strip()
        if not name:
            raise ValueError("timezone must not be empty")
    elif isinstance(value, tzinfo):
        if value is _UTC:
            name = "UTC"
        else:
            # zoneinfo.ZoneInfo has .key, pytz zones have .zone: the IANA name, so that a
            # schedule can be written down (the run ledger) and read back.
            found = getattr(value, "key", None) or getattr(value, "zone", None)
            if not isinstance(found, str):
                raise ValueError(
                    f"timezone {value!r} has no IANA name; give one such as 'Europe/Berlin' "
                    "(a str or a zoneinfo.ZoneInfo)"
                )
            name = found
    else:
        raise TypeError(
            f"timezone must be a str (an IANA name such as 'Europe/Berlin'), a tzinfo "
            f"or None, not {type(value).__name__}"
        )
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        zone = ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"timezone {name!r} is not a known IANA time zone") from exc
    return name, zone


def _to_ms(moment: datetime) -> int:
    return (moment - _EPOCH) // timedelta(milliseconds=1)


class Schedule:
    """A cron expression (and the time zone it is read in) as a sequence of slots.

    Frozen and hashable; equal when expression (whitespace normalised) and timezone
    are. ``timezone`` is None for UTC (no zone given), else the IANA name.
    """

    __slots__ = ("_cron", "_zone", "expression", "timezone")

    expression: str
    timezone: str | None
    _cron: str
    _zone: tzinfo

    def __init__(self, expression: str, timezone: str | tzinfo | None = None) -> None:
        """Same as :meth:`parse` (``name="schedule"``)."""
        self._setup(expression, timezone, "schedule")

    @classmethod
    def parse(
        cls, expression: str, timezone: str | tzinfo | None = None, *, name: str = "schedule"
    ) -> Schedule:
        """Read a cron expression; ``timezone``: the IANA zone its times are in (None:
        UTC). ``TypeError``/``ValueError`` naming ``name`` (or ``timezone``) when bad,
        including an expression that never fires."""
        self = cls.__new__(cls)
        self._setup(expression, timezone, name)
        return self

    def _setup(self, expression: object, zone: object, name: str) -> None:
        if not isinstance(expression, str):
            raise TypeError(
                f"{name} must be a str (a cron expression such as '*/5 * * * *'), "
                f"not {type(expression).__name__}"
            )
        text = " ".join(expression.split())
        if not text:
            raise ValueError(f"{name} must not be empty (a cron expression such as '*/5 * * * *')")
        cron = ALIASES.get(text.lower(), text)
        if cron.startswith("@"):
            raise ValueError(
                f"{name} {expression!r}: unknown alias (known: {', '.join(sorted(ALIASES))})"
            )
        zone_name, zone_info = _zone(zone)
        cronsim, error = _cronsim()
        fields = len(cron.split())
        if fields not in (5, 6):
            raise ValueError(
                f"{name} {expression!r} has {fields} fields; a cron expression has 5 "
                "(minute hour day-of-month month day-of-week) or 6 (seconds first)"
            )
        try:
            cronsim(cron, datetime.now(_UTC))
        except error as exc:
            if fields == 6 and "number of fields" in str(exc):
                raise ValueError(
                    f"{name} {expression!r}: a seconds field needs cronsim >= 2.7 (Python >= 3.10)"
                ) from exc
            raise ValueError(
                f"{name} {expression!r} is not a valid cron expression: {exc}"
            ) from exc
        set_ = object.__setattr__
        set_(self, "expression", text)
        set_(self, "timezone", zone_name)
        set_(self, "_cron", cron)
        set_(self, "_zone", zone_info)
        try:
            self.slot(_to_ms(datetime.now(_UTC)))
        except ValueError:
            raise ValueError(
                f"{name} {expression!r} never fires (no fire time within 50 years)"
            ) from None

    def __setattr__(self, attr: str, value: object) -> None:
        raise AttributeError(f"Schedule is frozen; cannot set {attr}")

    def __delattr__(self, attr: str) -> None:
        raise AttributeError(f"Schedule is frozen; cannot delete {attr}")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Schedule):
            return NotImplemented
        return (self.expression, self.timezone) == (other.expression, other.timezone)

    def __hash__(self) -> int:
        return hash((Schedule, self.expression, self.timezone))

    def __repr__(self) -> str:
        zone = "" if self.timezone is None else f", timezone={self.timezone!r}"
        return f"Schedule({self.expression!r}{zone})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Schedule, (self.expression, self.timezone))

    # -- slots ---------------------------------------------------------------------------

    def slot(self, now_ms: int) -> tuple[int, int]:
        """The slot containing ``now_ms``: ``(start_ms, end_ms)``, epoch milliseconds
        (UTC), ``start_ms <= now_ms < end_ms``; start and end are consecutive fire times.

        Every instant of a slot gives the same slot. ``ValueError`` when there is no
        fire time within 50 years on either side (cronsim's horizon).
        """
        if isinstance(now_ms, bool) or not isinstance(now_ms, int):
            raise TypeError(
                f"now_ms must be an int (epoch milliseconds), not {type(now_ms).__name__}"
            )
        cronsim, _ = _cronsim()
        now = (_EPOCH + timedelta(milliseconds=now_ms)).astimezone(self._zone)
        try:
            forward = cronsim(self._cron, now)
            # The next fire time after now. In the hour repeated in autumn, cronsim reads
            # a fixed-time job by the wall clock (the first of the two readings): a fire
            # time before now can come back, stepped over here.
            for _ in range(_MAX_STEPS):
                end = next(forward)
                end_ms = _to_ms(end)
                if end_ms > now_ms:
                    break
            else:  # pragma: no cover - guard
                raise ValueError(f"no fire time after {now.isoformat()} found")
            backward = cronsim(self._cron, end, reverse=True)
            for _ in range(_MAX_STEPS):
                start_ms = _to_ms(next(backward))
                if start_ms <= now_ms:
                    break
            else:  # pragma: no cover - guard
                raise ValueError(f"no fire time at or before {now.isoformat()} found")
        except StopIteration:
            raise ValueError(
                f"schedule {self.expression!r} has no fire time within 50 years of "
                f"{now.isoformat()}"
            ) from None
        return start_ms, end_ms

    def previous_slot(self, now_ms: int) -> tuple[int, int]:
        """The slot before the one containing ``now_ms`` (it ends where that one starts)."""
        start_ms, _ = self.slot(now_ms)
        return self.slot(start_ms - 1)
