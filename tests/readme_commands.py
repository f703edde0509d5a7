"""The commands the README shows, read from README.md itself (so the tests follow the text)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"

__all__ = ["ROOT", "README", "shell_blocks", "block_commands", "tour_block", "tour_commands", "inline_commands"]


def shell_blocks(text: str | None = None) -> list[tuple[str, str]]:
    """``(section heading, body)`` of every fenced ```bash block."""
    text = README.read_text() if text is None else text
    out: list[tuple[str, str]] = []
    heading = ""
    for part in re.split(r"(^#+ .*$)", text, flags=re.M):
        if part.startswith("#"):
            heading = part.lstrip("# ").strip()
            continue
        out += [(heading, b) for b in re.findall(r"```bash\n(.*?)```", part, flags=re.S)]
    return out


def _strip_comment(line: str) -> str:
    """Drop a trailing ``  # comment`` outside quotes."""
    quote: str | None = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def block_commands(body: str) -> list[str]:
    """One command per logical line (backslash continuations joined, comments dropped)."""
    joined = re.sub(r"\\\n\s*", "", body)
    return [c for c in (_strip_comment(line).strip() for line in joined.splitlines()) if c]


def tour_block() -> str:
    """The tour's block as it is pasted: the whole text, comments and continuations included."""
    return next(b for h, b in shell_blocks() if h == "A 5-minute tour")


def tour_commands() -> list[str]:
    return block_commands(tour_block())


def inline_commands(text: str | None = None) -> list[str]:
    """Commands quoted inline in the prose (`radctl …`, `make …`)."""
    text = README.read_text() if text is None else text
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    return sorted({m for m in re.findall(r"`((?:radctl|make) [^`]+)`", prose)})
