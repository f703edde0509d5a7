"""Every answer of ``POST /v1/events/{topic}``, built here and rendered by :func:`response`: a refusal is
raised as :class:`Refusal` anywhere below the route and answered by the app's one handler."""

from __future__ import annotations

from typing import Any

import orjson
from fastapi.responses import Response

#: at most this many rejected events are listed in an answer (``rejectedCount`` has them all)
MAX_REPORTED_REJECTIONS = 1000


class Refusal(Exception):
    """The request is refused: ``status``, the JSON ``body`` (its ``error`` names why) and headers."""

    def __init__(self, status: int, error: str, *, headers: dict[str, str] | None = None, **fields: Any) -> None:
        super().__init__(error)
        self.status = status
        self.body = {"error": error, **fields}
        self.headers = headers


def response(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(body), status_code=status, media_type="application/json", headers=headers)


def refusal_response(r: Refusal) -> Response:
    return response(r.status, r.body, r.headers)


def unavailable(reason: str, accepted: int = 0) -> Refusal:
    """Kafka cannot take the events now (the spool is off): retry."""
    return Refusal(503, "Kafka unavailable", reason=reason, accepted=accepted, headers={"Retry-After": "1"},
                   message="retry the request" + (f"; {accepted} event(s) of it were already delivered"
                                                  if accepted else ""))


def too_large(rejected: list[dict[str, Any]], accepted: int, max_event: int, detail: str | None = None) -> Refusal:
    """Events larger than Kafka or the receiver takes: retrying cannot help."""
    return Refusal(413, "event too large", accepted=accepted, rejectedCount=len(rejected),
                   rejected=rejected[:MAX_REPORTED_REJECTIONS], max_event_bytes=max_event,
                   message=(detail or f"events larger than {max_event:,} bytes are refused")
                   + "; retrying cannot help: split or shrink them"
                   + (f"; {accepted} other event(s) of this request were delivered" if accepted else ""))


def unknown_topic(topic: str, message: str | None = None) -> Refusal:
    return Refusal(404, "unknown topic", topic=topic, accepted=0, **({"message": message} if message else {}))


def delivered(accepted: int, rejected: list[dict[str, Any]], max_event: int, spooled: int = 0) -> Response:
    """The answer once the valid events are in Kafka (or, ``spooled``, in the spool): 200, 202, or 400/413
    listing the rejected ones (the valid ones of the same request were delivered: the body says so)."""
    if rejected and all(r.get("tooLarge") for r in rejected):
        return refusal_response(too_large(rejected, accepted, max_event))
    where = "accepted into the spool (delivered to Kafka when it takes them)" if spooled else "delivered"
    if rejected:
        return response(400, {
            "error": "invalid events",
            "accepted": accepted,
            **({"spooled": spooled} if spooled else {}),
            "rejectedCount": len(rejected),
            "rejected": rejected[:MAX_REPORTED_REJECTIONS],
            "message": (f"{accepted} valid event(s) of this request were {where}; "
                        f"{len(rejected)} rejected event(s) were not: fix and resend only those"),
        })
    if spooled:
        return response(202, {"accepted": accepted, "spooled": spooled, "message": (
            "Kafka is unavailable or slow: the events are in the receiver's spool and are delivered "
            "in order, exactly once, as soon as Kafka takes them; do not resend")})
    return response(200, {"accepted": accepted})
