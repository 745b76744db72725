"""Reports the lock it runs under (explicit key), so the test can check it from inside."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from joblocks.contrib.django import get_model, single_instance_command


class Command(BaseCommand):
    help = "A job with an explicit lock key."

    @single_instance_command(ttl=60_000, key="nightly:named")
    def handle(self, *args: Any, **options: Any) -> str:
        row = get_model().peek("nightly:named")
        assert row is not None
        return f"held by {row.holder} fence {row.fence}"
