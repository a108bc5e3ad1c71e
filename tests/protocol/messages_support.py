"""Shared by the tests of protocol.messages (tests/protocol/test_messages_*.py): a fixed clock and code_of."""

from __future__ import annotations

import pytest

from protocol.errors import ErrorCode, ProtocolError
from protocol.messages import parse_client_message

NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z


def code_of(data: bytes | str, **kwargs: object) -> ErrorCode:
    with pytest.raises(ProtocolError) as info:
        parse_client_message(data, **kwargs)  # type: ignore[arg-type]
    return info.value.code
