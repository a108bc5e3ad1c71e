"""Reading server control frames off the wire (PROTOCOL.md §5): leniently (every problem listed) or strictly.

:func:`read_server_control` is the one home of the §5 frame rules for a reader: it validates an object
against its frame's schema, then builds the typed frame with the frame's own ``from_dict``
(:mod:`protocol.messages.server`, :mod:`protocol.messages.capabilities`). :func:`parse_server_control`
is its strict form, raising :class:`InvalidServerFrame` on the first problem.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from protocol import schemas
from protocol.messages.capabilities import Capabilities
from protocol.messages.jsontext import is_number, show
from protocol.messages.server import ErrorFrame, Marks, ServerFrame, SynthesisComplete, SynthesisStart

__all__ = [
    "ControlReading",
    "InvalidServerFrame",
    "ServerControl",
    "UnknownFrameType",
    "parse_server_control",
    "read_server_control",
]

ServerControl = SynthesisStart | SynthesisComplete | ErrorFrame | Capabilities | Marks
"""A server control frame of this version (§5)."""

_FRAMES: dict[str, type[ServerFrame]] = {
    frame.type: frame for frame in (SynthesisStart, SynthesisComplete, ErrorFrame, Capabilities, Marks)
}
"""Each frame class by its ``type``, which is also the name of its schema in spec/schemas."""


class InvalidServerFrame(ValueError):
    """A server control frame breaks its schema or a rule of §5 (from :func:`parse_server_control`)."""


class UnknownFrameType(InvalidServerFrame):
    """A server control frame has a ``type`` this version does not know.

    A client SHOULD ignore such a frame (§5): a newer server may send frame types added later.
    """


@dataclass(frozen=True, slots=True)
class ControlReading:
    """A server control frame read leniently: every rule of §5 it breaks is listed, nothing is raised.

    The one home of the §5 frame rules: :func:`parse_server_control` (strict: raises on the first problem)
    and lenient readers such as the conformance observer both go through :func:`read_server_control`.

    Attributes:
        obj: the decoded JSON object, as received.
        kind: ``"synthesis_start"``, ``"synthesis_complete"`` or ``"error"``; ``None`` when ``type`` is
            missing, not a string, or names no server frame of this version (see :attr:`known`).
        frame: the typed frame when the object is valid, else ``None``.
        problems: what breaks the frame's schema or a rule of §5, one sentence each (empty when valid).
    """

    obj: dict[str, Any]
    kind: str | None
    frame: ServerControl | None
    problems: tuple[str, ...] = ()

    @property
    def known(self) -> bool:
        """Whether ``type`` names a server frame of this version."""
        return self.kind is not None

    def string(self, member: str) -> str | None:
        """``obj[member]`` when it is a non-empty string, else ``None``."""
        value = self.obj.get(member)
        return value if isinstance(value, str) and value else None

    def number(self, member: str) -> float | None:
        """``obj[member]`` when it is a finite JSON number (never a boolean), else ``None``."""
        value = self.obj.get(member)
        return float(value) if is_number(value) and math.isfinite(value) else None

    def integer(self, member: str) -> int | None:
        """``obj[member]`` when it is an integral JSON number (§1.4: ``24000.0`` counts), else ``None``."""
        value = self.number(member)
        return int(value) if value is not None and value.is_integer() else None


def read_server_control(obj: dict[str, Any]) -> ControlReading:
    """Read a server control frame, already classified as a JSON object (§3.4), without raising (§5).

    Args:
        obj: the decoded JSON object.

    Returns:
        A :class:`ControlReading`: its ``frame`` is the typed frame when ``obj`` is valid; its ``problems``
        name every schema failure (each with the member concerned) and every rule of §5 it breaks.
    """
    kind = obj.get("type")
    frame_class = _FRAMES.get(kind) if isinstance(kind, str) else None
    if frame_class is None:
        return ControlReading(obj, None, None, (f"unknown server frame type {show(kind)}",))
    name = frame_class.type
    errors = sorted(
        schemas.validator(name).iter_errors(obj), key=lambda e: (list(e.absolute_path), e.message)
    )
    problems = tuple(f"{'/'.join(map(str, e.absolute_path)) or 'frame'}: {e.message[:200]}" for e in errors)
    if problems:
        return ControlReading(obj, name, None, problems)
    try:
        frame = frame_class.from_dict(obj)
    except (ValueError, KeyError, TypeError) as exc:
        return ControlReading(obj, name, None, (str(exc),))
    return ControlReading(obj, name, frame)  # type: ignore[arg-type]


def parse_server_control(obj: dict[str, Any]) -> ServerControl:
    """Validate a server control frame, already classified as a JSON object (§3.4), and type it (§5).

    Strict form of :func:`read_server_control`.

    Args:
        obj: the decoded JSON object.

    Returns:
        :class:`SynthesisStart`, :class:`SynthesisComplete`, :class:`ErrorFrame`,
        :class:`Capabilities` or :class:`Marks`. Unknown members are ignored.

    Raises:
        UnknownFrameType: ``type`` names no server frame of this version (a client SHOULD ignore it).
        InvalidServerFrame: the frame breaks its schema or a rule of §5 (the first problem is named).
    """
    if not isinstance(obj, dict):
        raise InvalidServerFrame(f"a control frame is a JSON object, not {type(obj).__name__}")
    reading = read_server_control(obj)
    if not reading.known:
        raise UnknownFrameType(reading.problems[0])
    if reading.frame is None:
        raise InvalidServerFrame(f"{reading.kind}: {reading.problems[0]}")
    return reading.frame
