"""``python -m radstack`` runs ``radctl``."""

from radstack.operations.cli import app

app()
