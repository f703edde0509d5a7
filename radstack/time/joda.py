"""Joda-Time ``DateTimeFormat`` patterns, as Druid uses them.

Druid reads and writes timestamps with Joda patterns in many places: ``timestampSpec.format``, the SQL
functions ``TIME_FORMAT`` / ``TIME_PARSE``, the expression functions ``timestamp_format`` /
``timestamp_parse`` and the ``timeFormat`` extraction function. This module understands the common
subset of those patterns and offers three views of one pattern:

* :func:`joda_to_strftime` — DuckDB ``strftime`` / ``strptime`` codes;
* :func:`joda_to_spark` — Spark's (java.time) datetime pattern;
* :func:`format_millis` / :func:`parse_to_millis` — a pure-Python formatter / parser.

Supported letters (Joda's meaning): ``G`` era, ``y``/``Y`` year (``yy`` = two digits, pivot like
Joda's), ``x`` week-year, ``w`` week of week-year, ``M`` month (``MMM`` short and ``MMMM`` long names),
``d`` day of month, ``D`` day of year, ``e`` day of week (1 = Monday), ``E`` day-of-week name
(``EEEE`` long), ``a`` AM/PM, ``H`` hour 0-23, ``k`` hour 1-24, ``K`` hour 0-11, ``h`` hour 1-12,
``m`` minute, ``s`` second, ``S`` fraction of second, ``Z`` offset (``+0800``), ``ZZ`` offset with a
colon (``+08:00``), ``ZZZ`` zone id, ``z`` zone short name. Text in single quotes is literal
(``''`` is a quote); any other non-letter is literal. Other letters raise :class:`ValueError`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = [
    "ISO_PATTERN",
    "Token",
    "tokenize",
    "joda_to_strftime",
    "joda_to_spark",
    "format_millis",
    "parse_to_millis",
    "zone",
]

#: The pattern Druid's ISO formatter corresponds to (used when no pattern is given).
ISO_PATTERN = "yyyy-MM-dd'T'HH:mm:ss.SSSZZ"

_SUPPORTED = set("GyYxwMdDeEaHkKhmsSZz")
_NUMERIC = set("yYxwMdDeHkKhmsS")
_MONTHS = [
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
]  # fmt: skip
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Token:
    """One pattern element: a field letter repeated ``count`` times, or literal text (letter "")."""

    letter: str
    count: int = 0
    text: str = ""

    @property
    def is_literal(self) -> bool:
        return not self.letter

    @property
    def is_numeric(self) -> bool:
        return self.letter in _NUMERIC and not (self.letter == "M" and self.count >= 3)


@lru_cache(maxsize=256)
def tokenize(pattern: str) -> tuple[Token, ...]:
    """Split a Joda pattern into field and literal tokens (quotes resolved, literals merged)."""
    out: list[Token] = []
    lit = ""
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "'":
            if i + 1 < n and pattern[i + 1] == "'":
                lit += "'"
                i += 2
                continue
            j = i + 1
            buf = ""
            while j < n:
                if pattern[j] == "'":
                    if j + 1 < n and pattern[j + 1] == "'":
                        buf += "'"
                        j += 2
                        continue
                    break
                buf += pattern[j]
                j += 1
            if j >= n:
                raise ValueError(f"unterminated quote in pattern {pattern!r}")
            lit += buf
            i = j + 1
            continue
        if ("a" <= c <= "z") or ("A" <= c <= "Z"):
            if c not in _SUPPORTED:
                raise ValueError(f"unsupported letter {c!r} in date-time pattern {pattern!r}")
            j = i
            while j < n and pattern[j] == c:
                j += 1
            if lit:
                out.append(Token("", 0, lit))
                lit = ""
            out.append(Token(c, j - i))
            i = j
            continue
        lit += c
        i += 1
    if lit:
        out.append(Token("", 0, lit))
    return tuple(out)


# ---- DuckDB strftime ---------------------------------------------------------------------------


def _strftime_code(t: Token) -> str:
    c, k = t.letter, t.count
    pad = k >= 2
    simple = {
        "d": ("%-d", "%d"),
        "H": ("%-H", "%H"),
        "h": ("%-I", "%I"),
        "m": ("%-M", "%M"),
        "s": ("%-S", "%S"),
    }
    if c in simple:
        return simple[c][1 if pad else 0]
    if c in "yY":
        return "%y" if k == 2 else "%Y"
    if c == "x":
        return "%G"
    if c == "w":
        if k < 2:
            raise ValueError("unsupported letter 'w' (unpadded) for strftime; use 'ww'")
        return "%V"
    if c == "M":
        return {1: "%-m", 2: "%m", 3: "%b"}.get(k, "%B")
    if c == "D":
        return "%j" if k >= 3 else "%-j"
    if c == "e":
        return "%u"
    if c == "E":
        return "%A" if k >= 4 else "%a"
    if c == "a":
        return "%p"
    if c == "S":
        codes = {3: "%g", 6: "%f", 9: "%n"}
        if k not in codes:
            raise ValueError(f"unsupported letter 'S' x{k} for strftime (use S, SSS, SSSSSS or 9 x S)")
        return codes[k]
    if c == "Z":
        return "%z" if k <= 2 else "%Z"
    if c == "z":
        return "%Z"
    raise ValueError(f"unsupported letter {c!r} for strftime")


def joda_to_strftime(pattern: str) -> str:
    """Joda pattern → DuckDB ``strftime``/``strptime`` format (``%`` in literals doubled).

    DuckDB has no code for one or two fraction digits, nor for ``G``, ``k`` and ``K``: those raise
    :class:`ValueError`. ``Z`` and ``ZZ`` both become ``%z`` (DuckDB prints ``+00`` for UTC; SQL
    generators that need Joda's exact ``+0000`` / ``+00:00`` render the offset themselves).
    """
    out = []
    for t in tokenize(pattern):
        if t.is_literal:
            out.append(t.text.replace("%", "%%"))
        elif t.letter in ("G", "k", "K"):
            raise ValueError(f"unsupported letter {t.letter!r} for strftime")
        else:
            out.append(_strftime_code(t))
    return "".join(out)


# ---- Spark ------------------------------------------------------------------------------------


def joda_to_spark(pattern: str) -> str:
    """Joda pattern → Spark 3+ datetime pattern (``date_format``, ``to_timestamp``)."""
    out = []
    for t in tokenize(pattern):
        if t.is_literal:
            out.append("'" + t.text.replace("'", "''") + "'" if any(ch.isalpha() or ch == "'" for ch in t.text)
                       else t.text)
            continue
        c, k = t.letter, t.count
        if c in "YxweG":
            raise ValueError(f"unsupported letter {c!r} for Spark datetime patterns")
        if c == "Z":
            out.append("xx" if k == 1 else "xxx" if k == 2 else "VV")
        elif c == "z":
            out.append("zzzz" if k >= 4 else "z")
        elif c == "E":
            out.append("EEEE" if k >= 4 else "EEE")
        elif c == "S":
            out.append("S" * min(k, 9))
        elif c == "y":
            out.append("yy" if k == 2 else "y" * max(k, 4) if k >= 3 else "y")
        else:
            out.append(c * k)
    return "".join(out)


# ---- time zones -------------------------------------------------------------------------------


_FIXED_OFFSET = re.compile(r"(?:UTC|GMT)?([+-])(\d{1,2})(?::?(\d{2}))?")


def canonical_zone(name: str) -> str:
    """A zone name every engine here reads alike: a fixed offset (``-08:00``, ``+0530``, ``UTC+2``) as
    ``GMT-08:00`` (ICU's and Java's spelling; DuckDB refuses a bare offset), ``UTC`` for a zero one;
    an IANA id as it is."""
    m = _FIXED_OFFSET.fullmatch(name.strip())
    if not m:
        return name
    hours, minutes = int(m.group(2)), int(m.group(3) or 0)
    if hours == 0 and minutes == 0:
        return "UTC"
    return f"GMT{m.group(1)}{hours:02d}:{minutes:02d}"


@lru_cache(maxsize=128)
def zone(name: str | None) -> tzinfo:
    """A Druid/Joda time-zone name (IANA id, ``UTC``, or a fixed offset ``+05:30``) → tzinfo."""
    if name is None or name.upper() in ("UTC", "Z", "GMT", "ETC/UTC", "UCT"):
        return UTC
    m = _FIXED_OFFSET.fullmatch(name.strip())
    if m:
        sign = -1 if m.group(1) == "-" else 1
        return timezone(sign * timedelta(hours=int(m.group(2)), minutes=int(m.group(3) or 0)))
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as e:
        raise ValueError(f"unknown time zone {name!r}") from e


def _zone_id(dt: datetime) -> str:
    tz = dt.tzinfo
    if tz is UTC:
        return "UTC"
    if isinstance(tz, ZoneInfo):
        return tz.key
    return _offset(dt, True)


def _offset(dt: datetime, colon: bool) -> str:
    off = dt.utcoffset() or timedelta(0)
    secs = int(off.total_seconds())
    sign = "-" if secs < 0 else "+"
    hh, mm = divmod(abs(secs) // 60, 60)
    return f"{sign}{hh:02d}:{mm:02d}" if colon else f"{sign}{hh:02d}{mm:02d}"


# ---- pure-Python formatting ---------------------------------------------------------------------


def _format_token(t: Token, dt: datetime, millis: int) -> str:
    c, k = t.letter, t.count
    if c in "yY":
        return f"{dt.year % 100:02d}" if k == 2 else f"{dt.year:0{k}d}"
    if c == "x":
        return f"{dt.isocalendar().year:0{k}d}" if k != 2 else f"{dt.isocalendar().year % 100:02d}"
    if c == "w":
        return f"{dt.isocalendar().week:0{k}d}"
    if c == "M":
        if k >= 4:
            return _MONTHS[dt.month - 1]
        if k == 3:
            return _MONTHS[dt.month - 1][:3]
        return f"{dt.month:0{k}d}"
    if c == "d":
        return f"{dt.day:0{k}d}"
    if c == "D":
        return f"{dt.timetuple().tm_yday:0{k}d}"
    if c == "e":
        return f"{dt.isoweekday():0{k}d}"
    if c == "E":
        name = _DAYS[dt.weekday()]
        return name if k >= 4 else name[:3]
    if c == "a":
        return "AM" if dt.hour < 12 else "PM"
    if c == "H":
        return f"{dt.hour:0{k}d}"
    if c == "k":
        return f"{dt.hour or 24:0{k}d}"
    if c == "K":
        return f"{dt.hour % 12:0{k}d}"
    if c == "h":
        return f"{dt.hour % 12 or 12:0{k}d}"
    if c == "m":
        return f"{dt.minute:0{k}d}"
    if c == "s":
        return f"{dt.second:0{k}d}"
    if c == "S":
        digits = f"{millis:03d}"
        return digits[:k] if k <= 3 else digits + "0" * (k - 3)
    if c == "Z":
        return _offset(dt, k == 2) if k <= 2 else _zone_id(dt)
    if c == "z":
        return dt.tzname() or _zone_id(dt)
    if c == "G":
        return "AD" if dt.year > 0 else "BC"
    raise ValueError(f"unsupported letter {c!r}")


def format_millis(ms: int, pattern: str | None = None, tz: str | None = "UTC") -> str:
    """Epoch millis → text, formatted like Joda's ``DateTimeFormat.forPattern(pattern).withZone(tz)``.

    Without a pattern the ISO form is used (``2000-01-02T03:04:05.006Z`` in UTC, else ``…+08:00``),
    like Druid's ``timestamp_format`` / ``TIME_FORMAT`` defaults.
    """
    dt = (_EPOCH + timedelta(milliseconds=int(ms))).astimezone(zone(tz))
    millis = int(ms) % 1000
    if pattern is None:
        off = dt.utcoffset() or timedelta(0)
        suffix = "Z" if not off else _offset(dt, True)
        return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{millis:03d}" + suffix
    return "".join(
        t.text if t.is_literal else _format_token(t, dt, millis) for t in tokenize(pattern)
    )


# ---- pure-Python parsing ----------------------------------------------------------------------


def _numeric_regex(t: Token, next_numeric: bool) -> str:
    c, k = t.letter, t.count
    if c in "yYx":
        if k == 2:
            return r"(\d{2})" if next_numeric else r"([+-]?\d{1,9})"
        return rf"(\d{{{k}}})" if next_numeric else r"([+-]?\d{1,9})"
    if c == "S":
        return rf"(\d{{1,{k}}})"
    width = 3 if c == "D" else 1 if c == "e" else 2
    if next_numeric:
        return rf"(\d{{{max(k, 1)},{max(k, width)}}})"
    return rf"(\d{{1,{max(k, width)}}})"


@lru_cache(maxsize=256)
def _parser(pattern: str) -> tuple[re.Pattern[str], tuple[Token, ...]]:
    tokens = tokenize(pattern)
    parts: list[str] = []
    fields: list[Token] = []
    for i, t in enumerate(tokens):
        if t.is_literal:
            parts.append(re.escape(t.text))
            continue
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        next_numeric = nxt is not None and nxt.is_numeric
        if t.is_numeric:
            parts.append(_numeric_regex(t, next_numeric))
        elif t.letter == "M":
            parts.append("(" + "|".join(m if t.count >= 4 else m[:3] for m in _MONTHS) + "|"
                         + "|".join(m[:3] for m in _MONTHS) + ")")
        elif t.letter == "E":
            parts.append("(" + "|".join(_DAYS) + "|" + "|".join(d[:3] for d in _DAYS) + ")")
        elif t.letter == "a":
            parts.append("(AM|PM)")
        elif t.letter == "G":
            parts.append("(AD|BC|CE|BCE)")
        elif t.letter == "Z" and t.count <= 2:
            parts.append(r"(Z|[+-]\d{2}(?::?\d{2})?)")
        elif t.letter in "Zz":
            parts.append(r"([A-Za-z_]+(?:/[A-Za-z_+\-0-9]+)*|[+-]\d{2}:?\d{2})")
        else:  # pragma: no cover - tokenize guards the letters
            raise ValueError(f"unsupported letter {t.letter!r}")
        fields.append(t)
    return re.compile("".join(parts), re.IGNORECASE), tuple(fields)


def _two_digit_year(yy: int) -> int:
    pivot = datetime.now(UTC).year - 30  # Joda: DateTimeFormat uses (current year - 30) as pivot
    low = pivot - 50
    year = (low // 100) * 100 + yy
    if year < low:
        year += 100
    return year


def parse_to_millis(text: str, pattern: str | None = None, tz: str | None = "UTC") -> int | None:
    """Text → epoch millis with a Joda pattern (the whole text must match); ``None`` if it doesn't.

    Fields missing from the pattern default to 1970-01-01T00:00:00.000 in ``tz``; an offset or zone
    in the text wins over ``tz``. Without a pattern, an ISO date or date-time (``T`` or space) is read,
    as Druid's ``TIME_PARSE`` does.
    """
    if text is None:
        return None
    if pattern is None:
        return _parse_iso(text, tz)
    rx, fields = _parser(pattern)
    m = rx.fullmatch(text)
    if not m:
        return None
    year, month, day, hour, minute, second, frac = 1970, 1, 1, 0, 0, 0, 0
    yday: int | None = None
    pm: bool | None = None
    half_hour: int | None = None
    tzi = zone(tz)
    for t, raw in zip(fields, m.groups(), strict=True):
        c, k = t.letter, t.count
        if c in "yY":
            v = int(raw)
            year = _two_digit_year(v) if k == 2 and len(raw) == 2 else v
        elif c == "M":
            if raw.isdigit():
                month = int(raw)
            else:
                month = [mo[:3].lower() for mo in _MONTHS].index(raw[:3].lower()) + 1
        elif c == "d":
            day = int(raw)
        elif c == "D":
            yday = int(raw)
        elif c in "Hk":
            hour = int(raw) % 24
        elif c in "Kh":
            half_hour = int(raw) % 12
        elif c == "a":
            pm = raw.upper() == "PM"
        elif c == "m":
            minute = int(raw)
        elif c == "s":
            second = int(raw)
        elif c == "S":
            frac = int((raw + "000")[:3])
        elif c == "Z" and k <= 2 or (c in "Zz" and raw[0] in "+-"):
            tzi = UTC if raw.upper() == "Z" else zone(raw if ":" in raw or len(raw) <= 3 else raw[:3] + ":" + raw[3:])
        elif c in "Zz":
            try:
                tzi = zone(raw)
            except ValueError:
                return None
        # x, w, e, E, G are read and ignored (as far as the result goes), like most Joda uses.
    if half_hour is not None:
        hour = half_hour + (12 if pm else 0)
    elif pm is not None and hour < 12 and pm:
        hour += 12
    try:
        if yday is not None:
            base = datetime(year, 1, 1) + timedelta(days=yday - 1)
            month, day = base.month, base.day
        local = datetime(year, month, day, hour, minute, second, frac * 1000)
    except ValueError:
        return None
    aware = local.replace(tzinfo=tzi)
    delta = aware - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


_ISO_RX = re.compile(
    r"([+-]?\d{4,9})(?:-(\d{1,2})(?:-(\d{1,2}))?)?"
    r"(?:[T ](\d{1,2})(?::(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?)?)?"
    r"\s*(Z|[+-]\d{2}(?::?\d{2})?)?"
)


def _parse_iso(text: str, tz: str | None) -> int | None:
    m = _ISO_RX.fullmatch(text.strip())
    if not m:
        return None
    y, mo, d, h, mi, s, f, off = m.groups()
    try:
        local = datetime(
            int(y), int(mo or 1), int(d or 1), int(h or 0), int(mi or 0), int(s or 0),
            int(((f or "") + "000")[:3]) * 1000,
        )
    except ValueError:
        return None
    if off:
        tzi = UTC if off.upper() == "Z" else zone(off if ":" in off or len(off) <= 3 else off[:3] + ":" + off[3:])
    else:
        tzi = zone(tz)
    delta = local.replace(tzinfo=tzi) - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000
