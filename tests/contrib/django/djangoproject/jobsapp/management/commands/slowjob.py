"""Holds its lock until the file named by ``--release`` exists, then prints ``ran``.

Before waiting it creates the file ``--started``, so the test knows it holds the lock.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from joblocks.contrib.django import single_instance_command


class Command(BaseCommand):
    help = "A job that must run on one worker at a time."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--started", required=True)
        parser.add_argument("--release", required=True)

    @single_instance_command(ttl=60_000)
    def handle(self, *args: Any, **options: Any) -> str:
        Path(options["started"]).touch()
        deadline = time.monotonic() + 60
        while not Path(options["release"]).exists():
            if time.monotonic() > deadline:
                raise TimeoutError("the test never released the job")
            time.sleep(0.02)
        return "ran"
