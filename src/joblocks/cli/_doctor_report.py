"""The report of ``joblocks doctor``: one :class:`Check` per line, filled in by the
checks of :mod:`._checks` and printed by :mod:`.doctor`."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Check:
    """One line of the report."""

    name: str
    status: str  # "ok", "warn" or "fail"
    detail: str
    fix: str | None = None

    def text(self) -> str:
        return self.detail if self.fix is None else f"{self.detail}: {self.fix}"


@dataclass
class Report:
    """Everything ``doctor`` found."""

    database: str | None = None
    source: str | None = None
    table: str | None = None
    server: str | None = None
    round_trip_ms: float | None = None
    pooler: str | None = None
    """PostgreSQL: ``"transaction"`` when a pooler shares server connections between
    clients, ``"session"`` when one sits in between but does not, None without one."""
    clock_offset_ms: float | None = None
    checks: list[Check] = field(default_factory=list)

    def add(self, name: str, status: str, detail: str, fix: str | None = None) -> bool:
        self.checks.append(Check(name, status, detail, fix))
        return status != "fail"

    @property
    def problems(self) -> list[Check]:
        return [check for check in self.checks if check.status == "fail"]
