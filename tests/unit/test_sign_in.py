"""radstack/sign_in.py and ``radctl auth hash-password``: lock-out per user and address over a sliding
window, verified credentials that skip hashing, and weak passwords or iteration counts refused."""

from __future__ import annotations

import asyncio

import pytest
from typer.testing import CliRunner

from operations.cli import app
from radstack.passwords import MIN_ITERATIONS, hash_password, verify_password
from radstack.sign_in import FailedLogins, SignIn, TooManyAttempts


def test_failures_lock_a_key_until_the_oldest_leaves_the_window() -> None:
    now = [100.0]
    limits = FailedLogins(3, 60, clock=lambda: now[0])
    for _ in range(2):
        limits.failed(["user\0bob", "addr\0a"])
    assert limits.retry_after(["user\0bob"]) is None
    limits.failed(["user\0bob", "addr\0a"])
    assert limits.retry_after(["user\0bob"]) == pytest.approx(60)
    assert limits.retry_after(["addr\0a"]) == pytest.approx(60)
    assert limits.retry_after(["user\0ana", "addr\0b"]) is None  # others are not affected
    now[0] += 59.5
    assert limits.retry_after(["user\0bob"]) == pytest.approx(0.5)
    now[0] += 1
    assert limits.retry_after(["user\0bob"]) is None
    assert FailedLogins(0, 60).retry_after(["x"]) is None  # 0: no limit


def test_sign_in_locks_out_but_keeps_verified_credentials() -> None:
    sign_in = SignIn({"ana": hash_password("right-password", iterations=MIN_ITERATIONS)},
                     max_failed_logins=2, window_seconds=60)

    async def scenario() -> None:
        assert await sign_in.check("ana", "right-password", "10.0.0.1")
        assert not await sign_in.check("ana", "wrong", "10.0.0.2")
        assert not await sign_in.check("nobody", "wrong", "10.0.0.2")
        with pytest.raises(TooManyAttempts) as ei:  # the address failed twice
            await sign_in.check("ana", "wrong-again", "10.0.0.2")
        assert ei.value.retry_after >= 1
        assert await sign_in.check("ana", "right-password", "10.0.0.2")  # verified before: no hashing
        assert not await sign_in.check("ana", "another-guess", "10.0.0.3")  # ana's second failure
        with pytest.raises(TooManyAttempts):
            await sign_in.check("ana", "third-guess", "10.0.0.4")  # now the user is locked, from anywhere

    try:
        asyncio.run(scenario())
    finally:
        sign_in.close()


@pytest.mark.parametrize(("args", "message"), [
    (["--password", ""], "empty"),
    (["--password", "   "], "empty"),
    (["--password", "short"], "shorter than"),
    (["--password", "long-enough-password", "--iterations", "1000"], "too few"),
])
def test_hash_password_refuses_weak_input(args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["auth", "hash-password", *args])
    assert result.exit_code == 2 and message in result.output


def test_hash_password_prints_a_hash_that_verifies() -> None:
    result = CliRunner().invoke(app, ["auth", "hash-password", "--password", "long-enough-password"])
    assert result.exit_code == 0
    assert verify_password("long-enough-password", result.output.strip())
