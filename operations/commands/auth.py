"""``radctl auth hash-password``: the ``password_hash`` value for ``server.auth`` / ``receiver.auth`` users."""

from __future__ import annotations

import typer

from radstack.passwords import (
    ITERATIONS,
    MIN_ITERATIONS,
    MIN_PASSWORD_CHARS,
    check_new_password,
    hash_password,
)

auth_app = typer.Typer(help="Credentials for server.auth and receiver.auth.", no_args_is_help=True)


@auth_app.command("hash-password")
def hash_password_command(
    password: str = typer.Option(..., prompt=True, hide_input=True, confirmation_prompt=True,
                                 help=f"The password (prompted for, unless given or piped; at least {MIN_PASSWORD_CHARS} characters)."),
    iterations: int = typer.Option(ITERATIONS, help=f"PBKDF2 iterations (at least {MIN_ITERATIONS:,})."),
) -> None:
    """Print a PBKDF2-SHA256 hash to put in a user's password_hash."""
    try:
        check_new_password(password, iterations)
    except ValueError as e:
        typer.echo(f"refused: {e}", err=True)
        raise typer.Exit(2) from e
    typer.echo(hash_password(password, iterations=iterations))
