"""An unknown keyword argument names the public class or function it was given to and
suggests the closest argument, on both faces; nothing is touched before."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import joblocks
import joblocks.aio


@pytest.mark.parametrize(
    ("cls", "public"),
    [
        (joblocks.JobLockModel, "joblocks.JobLockModel()"),
        (joblocks.aio.JobLockModel, "joblocks.aio.JobLockModel()"),
    ],
)
@pytest.mark.parametrize(
    ("given", "meant"),
    [("table", "table_name"), ("tablename", "table_name"), ("Schema", "schema"),
     ("create_tables", "create_table"), ("timeout_ms", "timeout")],
)  # fmt: skip
def test_the_model_names_its_public_class_and_the_right_argument(
    tmp_path: Path, cls: Any, public: str, given: str, meant: str
) -> None:
    with pytest.raises(TypeError) as info:
        cls(f"sqlite:///{tmp_path / 'locks.db'}", **{given: "x"})
    text = str(info.value)
    assert text.startswith(f"{public} got an unexpected keyword argument {given!r}")
    assert f"did you mean {meant}=?" in text
    assert "ModelCore" not in text
    assert not (tmp_path / "locks.db").exists()


def test_a_second_positional_argument_names_the_keywords(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"joblocks\.JobLockModel\(\) takes one positional") as info:
        joblocks.JobLockModel(f"sqlite:///{tmp_path / 'locks.db'}", "my_locks")  # type: ignore[misc]
    assert "table_name" in str(info.value)


def test_a_subclass_is_named_as_itself(tmp_path: Path) -> None:
    class Locks(joblocks.JobLockModel):
        pass

    with pytest.raises(TypeError, match=r"^Locks\(\) got an unexpected keyword argument 'table'"):
        Locks(f"sqlite:///{tmp_path / 'locks.db'}", table="x")  # type: ignore[call-arg]


def test_options_and_configure_suggest_the_closest_name(tmp_path: Path) -> None:
    model = joblocks.JobLockModel(f"sqlite:///{tmp_path / 'locks.db'}")
    try:
        with pytest.raises(
            TypeError, match=r"run_with_lock\(\) .* 'keep_alive': did you mean keepalive="
        ):
            joblocks.run_with_lock("job", 1000, lambda: None, model=model, keep_alive=True)  # type: ignore[call-arg]
    finally:
        model.dispose()
    with pytest.raises(TypeError, match=r"configure\(\) .* 'tablename': did you mean table_name="):
        joblocks.configure("sqlite:///x.db", tablename="x")

    async def main() -> None:
        aio_model = joblocks.aio.JobLockModel(f"sqlite:///{tmp_path / 'locks.db'}")
        try:
            with pytest.raises(TypeError, match="did you mean keepalive="):
                await joblocks.aio.run_with_lock(
                    "job",
                    1000,
                    _work,
                    model=aio_model,
                    keep_alive=True,  # type: ignore[call-arg]
                )
        finally:
            await aio_model.dispose()

    asyncio.run(main())


async def _work() -> None:
    return None
