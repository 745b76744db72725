"""Cron schedules as slots: the period between two fire times of a cron expression.

``Schedule.parse("*/5 * * * *")`` is the schedule; ``slot(now_ms)`` is the half-open
interval ``[start_ms, end_ms)`` (epoch milliseconds, UTC) from the last fire time at or
before ``now_ms`` to the next one after it. ``schedule=`` runs a job at most once per
slot (``_core.slots``); the run ledger labels runs by slot.

The cron expressions are read by `cronsim <https://pypi.org/project/cronsim/>`_ (the
parser of the Healthchecks cron monitor: pure Python, no dependencies, BSD licence).
It follows Debian's cron, DST included: in a local-time schedule (``timezone=``), a job
at a fixed time that falls into the hour skipped in spring runs right after the skip,
and one in the hour repeated in autumn runs once, not twice (croniter 7 runs it twice;
docs/howto/cron-once-per-tick.md has the comparison). cronsim walks naive wall-clock
times only; this module turns them into instants, because cronsim's own time-zone
arithmetic assumes whole-hour changes (at Pacific/Chatham's 45-minute offsets its
reverse walk never ends, at Australia/Lord_Howe's 30-minute change it skips fire
times; cronsim 2.9). The rules, for any size of change: a fixed-time job (five fields,
minute and hour not starting with "*") fires once at a repeated wall time (its first
reading) and at the change itself for a skipped one; any other job fires at every
instant whose wall clock matches. Five fields (minute hour
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

#: How many wall times matching the expression a slot computation may step over on
#: either side before giving up (a guard: it steps over one or two, more only through a
#: repeated or skipped hour, e.g. 7,200 for an every-second job in a repeated hour).
_MAX_STEPS = 100_000

_EPOCH_NAIVE = _EPOCH.replace(tzinfo=None)
_ONE_MS = timedelta(milliseconds=1)
_ZERO = timedelta(0)
_ONE_US = timedelta(microseconds=1)
_ONE_S = timedelta(seconds=1)


class _NoFireTime(ValueError):
    """No fire time within cronsim's horizon (50 years) of a time."""


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

    __slots__ = ("_cron", "_fixed_time", "_zone", "expression", "timezone")

    expression: str
    timezone: str | None
    _cron: str
    _fixed_time: bool
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
        # Debian cron's "fixed-time" jobs (minute and hour not starting with "*"; five
        # fields, as cronsim): run once in a repeated hour, right after a skipped one.
        minute, hour = cron.split()[:2]
        fixed = fields == 5 and not minute.startswith("*") and not hour.startswith("*")
        set_(self, "_fixed_time", fixed)
        try:
            self.slot(_to_ms(datetime.now(_UTC)))
        except _NoFireTime:
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

        Every instant of a slot gives the same slot, and the slots tile time (each ends
        where the next starts). ``ValueError`` naming the expression and the zone when
        there is no fire time within 50 years on either side (cronsim's horizon), or,
        as a guard, when more than 100,000 fire times lie around one time zone change.
        """
        if isinstance(now_ms, bool) or not isinstance(now_ms, int):
            raise TypeError(
                f"now_ms must be an int (epoch milliseconds), not {type(now_ms).__name__}"
            )
        cronsim, _ = _cronsim()
        wall = self._wall(now_ms)
        try:
            # cronsim walks the wall clock only (naive datetimes: no time zone, so no DST
            # arithmetic of its own); the wall times are turned into instants here.
            # 1. Back to an anchor: a wall time that exists once and fires at or before
            #    now. Fire times from it on come in wall-clock order but for the repeated
            #    hour, sorted below; none before it is later than it.
            backward = cronsim(self._cron, wall + _ONE_US, reverse=True)  # <= wall
            for _ in range(_MAX_STEPS):
                anchor = next(backward)
                fires, plain = self._fires(anchor)
                if plain and fires[0] <= now_ms:
                    break
            else:
                raise self._too_far(wall)
            # 2. Forward from the anchor (included) to the first fire time after now.
            forward = cronsim(self._cron, anchor - _ONE_S)
            start_ms = fires[0]
            pending: list[int] = []
            for _ in range(_MAX_STEPS):
                fires, plain = self._fires(next(forward))
                pending.extend(fires)
                if not plain:
                    continue  # a repeated (or skipped) wall time: its fire times wait
                # Every later fire time comes at or after this one: the pending are due.
                pending.sort()
                for fire in pending:
                    if fire > now_ms:
                        return start_ms, fire
                    start_ms = fire
                pending.clear()
            raise self._too_far(wall)
        except StopIteration:
            raise _NoFireTime(
                f"schedule {self.expression!r}{self._in_zone()} has no fire time within "
                f"50 years of {wall.isoformat()}"
            ) from None

    def previous_slot(self, now_ms: int) -> tuple[int, int]:
        """The slot before the one containing ``now_ms`` (it ends where that one starts)."""
        start_ms, _ = self.slot(now_ms)
        return self.slot(start_ms - 1)

    # -- wall clock and instants -----------------------------------------------------------

    def _wall(self, moment_ms: int) -> datetime:
        """The wall-clock reading of an instant in the schedule's zone (naive)."""
        moment = _EPOCH + timedelta(milliseconds=moment_ms)
        return moment.astimezone(self._zone).replace(tzinfo=None)

    def _fires(self, wall: datetime) -> tuple[list[int], bool]:
        """The fire times (epoch ms) of a matching wall time, and whether it is "plain":
        it exists exactly once, or (a fixed-time job) it is skipped and fires at the
        change. A wall time repeated by a change fires at both instants, or only at the
        first for a fixed-time job; one skipped by a change does not fire at all, except
        for a fixed-time job (right after the skip)."""
        at = (wall - _EPOCH_NAIVE) // _ONE_MS
        if self._zone is _UTC:
            return [at], True
        # A ZoneInfo always has an offset (the "or" is for the type checker).
        first = wall.replace(tzinfo=self._zone).utcoffset() or _ZERO
        second = wall.replace(tzinfo=self._zone, fold=1).utcoffset() or _ZERO
        if first == second:
            return [at - first // _ONE_MS], True
        if first > second:  # repeated: the first reading, then the second
            fires = [at - first // _ONE_MS]
            if not self._fixed_time:
                fires.append(at - second // _ONE_MS)
            return fires, False
        if not self._fixed_time:  # skipped
            return [], False
        # The change, between the instants of the wall time read by either offset.
        before, after = at - second // _ONE_MS, at - first // _ONE_MS
        while after - before > 1:
            middle = (before + after) // 2
            moment = _EPOCH + timedelta(milliseconds=middle)
            if moment.astimezone(self._zone).utcoffset() == second:
                after = middle
            else:
                before = middle
        return [after], True

    def _in_zone(self) -> str:
        return "" if self.timezone is None else f" (time zone {self.timezone})"

    def _too_far(self, wall: datetime) -> ValueError:
        return ValueError(
            f"schedule {self.expression!r}{self._in_zone()}: no slot found around "
            f"{wall.isoformat()} (wall clock) within {_MAX_STEPS} fire times; is the "
            "expression finer than the zone's clock changes?"
        )
