"""Passwords never printed: in URL query parameters, in URLs that do not parse, in
exception texts of both faces, and in what the ledger keeps."""

from __future__ import annotations

import asyncio

import pytest

import joblocks
import joblocks.aio
from joblocks._core.ledger import error_text
from joblocks._util.validate import mask_text
from joblocks._util.validate import mask_url as mask

# Each parameter name of the documented list (case ignored), with a distinct secret.
SECRET_PARAMS = {
    "password": "s3cr-pw",
    "sslpassword": "s3cr-sslpw",
    "PassWord": "s3cr-upper",
    "passwd": "s3cr-passwd",
    "ssl_key_password": "s3cr-sslkey",
    "PWD": "s3cr-odbc",
    "auth_token": "s3cr-token",
    "client_secret": "s3cr-client",
}
SECRETS = ("s3cr", "hunter2")


def shows_no_secret(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, text


def query_of(params: dict[str, str]) -> str:
    return "&".join(f"{name}={value}" for name, value in params.items())


@pytest.mark.parametrize(("name", "value"), SECRET_PARAMS.items())
def test_every_password_like_query_parameter_is_masked(name: str, value: str) -> None:
    shown = mask(f"postgresql://app@db/app?{name}={value}&application_name=nightly")
    shows_no_secret(shown)
    assert f"{name}=***" in shown
    assert "application_name=nightly" in shown


def test_a_multi_host_url_is_shown_readably_with_every_password_hidden() -> None:
    url = (
        "postgresql://u:hunter2@/db?host=a:5432,b:5432&target_session_attrs=read-write"
        "&password=s3cr-a&sslpassword=s3cr-b"
    )
    shown = mask(url)
    assert shown == (
        "postgresql://u:***@/db?host=a:5432,b:5432&password=***&sslpassword=***"
        "&target_session_attrs=read-write"
    )


@pytest.mark.parametrize(
    "url",
    [
        "u:hunter2@db/app",  # no scheme
        "postgres ql://u:hunter2@db/app",  # a space in the scheme
        "postgresql://u:hunt@er2@db:54x/app",  # the port is not a number, '@' in it
        "postgresql://u:hunter2@db:54x/app?password=s3cr-q",
    ],
)
def test_a_url_that_does_not_parse_is_masked_as_text(url: str) -> None:
    shown = mask(url)
    shows_no_secret(shown)
    assert "u:***@" in shown


def test_free_text_is_masked() -> None:
    text = (
        "connect failed: postgresql://u:hunter2@db/app?password=s3cr-x: refused; "
        "dsn host=db password='s3cr y' user=u"
    )
    masked = mask_text(text)
    shows_no_secret(masked)
    assert "refused" in masked
    assert "user=u" in masked


def test_the_ledger_keeps_no_password() -> None:
    text = error_text(RuntimeError("failed on mysql://u@db/app?passwd=s3cr-led,x"))
    shows_no_secret(text)


# What each driver accepts in the URL's query (an unknown parameter is its own error).
DRIVER_PARAMS = {
    "postgresql": {"password": "s3cr-pw", "sslpassword": "s3cr-sslpw"},
    "mysql": {"password": "s3cr-pw"},
}


def unreachable(scheme: str) -> str:
    return f"{scheme}://u:hunter2@127.0.0.1:1/db?{query_of(DRIVER_PARAMS[scheme])}"


@pytest.mark.parametrize("scheme", ["postgresql", "mysql"])
def test_exceptions_of_the_sync_face_show_no_password(scheme: str) -> None:
    model = joblocks.JobLockModel(unreachable(scheme))
    try:
        with pytest.raises(joblocks.LockBackendError) as info:
            model.acquire("job", 1000, "w1")
    finally:
        model.dispose()
    shows_no_secret(str(info.value))
    shows_no_secret(info.value.database)
    shows_no_secret(info.value.detail)
    assert "***" in str(info.value)


@pytest.mark.parametrize("scheme", ["postgresql", "mysql"])
def test_exceptions_of_the_asyncio_face_show_no_password(scheme: str) -> None:
    async def main() -> joblocks.LockBackendError:
        model = joblocks.aio.JobLockModel(unreachable(scheme))
        try:
            with pytest.raises(joblocks.LockBackendError) as info:
                await model.acquire("job", 1000, "w1")
        finally:
            await model.dispose()
        return info.value

    error = asyncio.run(main())
    shows_no_secret(str(error))
    assert "***" in str(error)


def test_a_bad_url_argument_shows_no_password() -> None:
    with pytest.raises(ValueError, match="database") as info:
        joblocks.JobLockModel("postgresql://u:hunter2@db:54x/app?password=s3cr-bad")
    shows_no_secret(str(info.value))
