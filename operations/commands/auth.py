"""``radctl auth hash-password``: the ``password_hash`` value for ``server.auth`` / ``receiver.auth`` users."""

from __future__ import annotations

import typer

from radstack.passwords import hash_password

auth_app = typer.Typer(help="Credentials for server.auth and receiver.auth.", no_args_is_help=True)


@auth_app.command("hash-password")
def hash_password_command(
    password: str = typer.Option(..., prompt=True, hide_input=True, confirmation_prompt=True,
                                 help="The password (prompted for, unless given or piped)."),
) -> None:
    """Print a PBKDF2-SHA256 hash to put in a user's password_hash."""
    typer.echo(hash_password(password))
