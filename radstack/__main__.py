"""``python -m radstack`` runs ``radctl``."""

from radstack.cli import app

app()
