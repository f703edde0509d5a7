"""radstack/sign_in.py and ``radctl auth hash-password``: lock-out per user and address over a sliding
window, verified credentials that skip hashing, and weak passwords or iteration counts refused."""

from __future__ import annotations

import asyncio

import pytest
from typer.testing import CliRunner

from operations.cli import app
from radstack.passwords import MIN_ITERATIONS, hash_password, verify_password
from radstack.sign_in import FailedLogins, SignIn, TooManyAttempts


def test_attempts_lock_a_key_until_the_oldest_leaves_the_window() -> None:
    now = [100.0]
    limits = FailedLogins(3, 60, clock=lambda: now[0])
    bob_a = {"user\0bob": 3, "addr\0a": 3}
    for _ in range(3):
        assert limits.reserve(bob_a) is None  # counted before any hashing
    assert limits.retry_after({"user\0bob": 3}) == pytest.approx(60)
    assert limits.retry_after({"addr\0a": 3}) == pytest.approx(60)
    assert limits.reserve(bob_a) == pytest.approx(60)  # locked: not counted again
    assert limits.retry_after({"user\0ana": 3, "addr\0b": 3}) is None  # others are not affected
    now[0] += 59.5
    assert limits.retry_after({"user\0bob": 3}) == pytest.approx(0.5)
    now[0] += 1
    assert limits.retry_after({"user\0bob": 3}) is None
    limits.release(bob_a)  # a right password takes its count back
    assert FailedLogins(0, 60).retry_after({"x": 0}) is None  # 0: no limit


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
        assert not await sign_in.check("ana", "another-guess", "10.0.0.3")
        assert not await sign_in.check("ana", "a-third-guess", "10.0.0.3")
        with pytest.raises(TooManyAttempts):
            await sign_in.check("ana", "fourth-guess", "10.0.0.3")  # ana from this address is locked

    try:
        asyncio.run(scenario())
    finally:
        sign_in.close()


def test_parallel_guesses_are_counted_before_the_hash() -> None:
    """#50: 60 wrong passwords at once for one user were all hashed (the count came after); now at most
    ``max_failed_logins`` are, the rest answer 429 at once."""
    sign_in = SignIn({"admin": hash_password("right-password", iterations=MIN_ITERATIONS)},
                     max_failed_logins=10, window_seconds=60)
    hashed = []
    real = sign_in._verify
    sign_in._verify = lambda n, p: hashed.append(p) or real(n, p)  # type: ignore[method-assign]

    async def scenario() -> list[object]:
        return await asyncio.gather(*(sign_in.check("admin", f"guess-{i}", "10.0.0.9") for i in range(60)),
                                    return_exceptions=True)

    try:
        results = asyncio.run(scenario())
    finally:
        sign_in.close()
    assert len(hashed) == 10
    assert sum(isinstance(r, TooManyAttempts) for r in results) == 50 and results.count(False) == 10


def test_a_flood_from_one_address_does_not_lock_the_user_out_elsewhere() -> None:
    sign_in = SignIn({"admin": hash_password("right-password", iterations=MIN_ITERATIONS)},
                     max_failed_logins=3, window_seconds=60)

    async def scenario() -> None:
        for i in range(3):
            assert not await sign_in.check("admin", f"guess-{i}", "203.0.113.7")
        with pytest.raises(TooManyAttempts):
            await sign_in.check("admin", "guess-again", "203.0.113.7")
        assert await sign_in.check("admin", "right-password", "10.0.0.5")  # the real admin, elsewhere
        for addr in range(9):  # many addresses together still hit the user-wide limit (10 x 3 = 30)
            for i in range(3):
                assert not await sign_in.check("admin", f"g{addr}-{i}", f"198.51.100.{addr}")
        with pytest.raises(TooManyAttempts):  # the 31st failure, from a fresh address
            await sign_in.check("admin", "one-more", "192.0.2.1")

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
