"""``python -m operations`` runs ``radctl`` (the console script is the usual way in)."""

from operations.cli import app

app()
