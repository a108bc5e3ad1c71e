"""Pronunciation lexicons in the sans-I/O core (PROTOCOL.md §4.1, §4.5, §9.1, §9.2, §10, §14.3).

``protocol.lexicon`` checks lexicons and inline forms; ``ServerSession`` reads them only when it offers the
feature (a version 1.1 server without it answers the message ``unknown_type`` and ignores the member, §1.7),
gives each accepted request the session's lexicon under its own, and refuses bad ones with
``invalid_lexicon`` while the session goes on.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from protocol.client_session import ClientSession
from protocol.errors import ErrorCode
from protocol.lexicon import (
    INLINE_OPEN,
    PHONEMES,
    LexiconEntry,
    extract_inline,
    inline_close,
    parse_lexicon,
    strip_marks,
)
from protocol.limits import Limits
from protocol.messages import FEATURES, SessionLexicon, SynthesisRequest, parse_client_message
from protocol.server_session import RequestAccepted, ServerSession

ROOT = Path(__file__).resolve().parents[2]


def test_the_alphabet_is_kokoros_vocab() -> None:
    config = json.loads((ROOT / "reference_server/data/kokoro-v1_0.config.json").read_text(encoding="utf-8"))
    assert set(config["vocab"]) == PHONEMES and len(PHONEMES) == 114


def test_entries_take_three_shapes() -> None:
    entries = parse_lexicon(
        {"Kokoro": "kˈOkəɹO", "Nguyen": {"phonemes": " wˈɪn "}, "SQL": {"respell": "se  quel"}}, max_entries=3
    )
    assert entries == {
        "Kokoro": LexiconEntry("Kokoro", phonemes="kˈOkəɹO"),
        "Nguyen": LexiconEntry("Nguyen", phonemes="wˈɪn"),
        "SQL": LexiconEntry("SQL", respell="se quel"),
    }


def test_inline_forms_are_marked_in_order_and_other_links_stay_links() -> None:
    text = "I [read](/ɹˈɛd/) [the docs](https://x.y) and [read](/ɹˈiːd/)."
    marked, entries = extract_inline(text, max_entries=4)
    assert marked == (
        f"I {INLINE_OPEN}read{inline_close(0)} [the docs](https://x.y) "
        f"and {INLINE_OPEN}read{inline_close(1)}."
    )
    assert [e.phonemes for e in entries] == ["ɹˈɛd", "ɹˈiːd"]
    assert strip_marks(marked) == "I read [the docs](https://x.y) and read."
    assert extract_inline("No forms here.", max_entries=4) == ("No forms here.", ())


def _session(**kwargs: object) -> ServerSession:
    return ServerSession(limits=Limits(max_lexicon_entries=2), **kwargs)  # type: ignore[arg-type]


def _errors(session: ServerSession) -> list[dict]:
    return [json.loads(f) for f in session.data_to_send() if isinstance(f, str)]


def test_the_session_lexicon_applies_to_later_requests_under_their_own() -> None:
    server = _session(lexicon=True)
    (before,) = server.receive_frame(json.dumps({"text": "Kokoro.", "request_id": "a"}))
    assert (
        server.receive_frame(json.dumps({"type": "lexicon", "lexicon": {"Kokoro": "kO", "SQL": "sikwəl"}}))
        == []
    )
    (after,) = server.receive_frame(
        json.dumps({"text": "Kokoro.", "request_id": "b", "lexicon": {"SQL": {"respell": "sequel"}}})
    )
    assert isinstance(before, RequestAccepted) and before.request.lexicon is None
    assert isinstance(after, RequestAccepted)
    assert after.request.lexicon == {
        "Kokoro": LexiconEntry("Kokoro", phonemes="kO"),
        "SQL": LexiconEntry("SQL", respell="sequel"),
    }
    # A bad lexicon message changes nothing; {} clears.
    server.receive_frame(json.dumps({"type": "lexicon", "lexicon": {"Kokoro": "k9"}, "request_id": "m"}))
    (error,) = _errors(server)
    assert error["code"] == "invalid_lexicon" and error["request_id"] == "m" and not error["fatal"]
    assert server.lexicon == {
        "Kokoro": LexiconEntry("Kokoro", phonemes="kO"),
        "SQL": LexiconEntry("SQL", phonemes="sikwəl"),
    }
    server.receive_frame(json.dumps({"type": "lexicon", "lexicon": {}}))
    (cleared,) = server.receive_frame(json.dumps({"text": "Kokoro.", "request_id": "c"}))
    assert cleared.request.lexicon is None


@pytest.mark.parametrize(
    ("message", "code", "names"),
    [
        ({"text": "Hi", "lexicon": {"a": "b", "c": "d", "e": "f"}}, "invalid_lexicon", "limit is 2"),
        ({"text": "Hi", "lexicon": {"K" * 65: "kO"}}, "invalid_lexicon", "limit is 64"),
        ({"text": "Hi", "lexicon": {"Kokoro": "k" * 129}}, "invalid_lexicon", "limit is 128"),
        ({"text": "Hi", "lexicon": {"...": "kO"}}, "invalid_lexicon", "no letter or digit"),
        ({"text": "Hi", "lexicon": ["Kokoro"]}, "invalid_field", "lexicon must be an object"),
        ({"text": "Hi [Ko ko](/kO/)", "lexicon": {}}, "invalid_lexicon", "inline pronunciation 1"),
        ({"text": "Hi [](/kO/)"}, "invalid_lexicon", "the word is empty"),
        ({"text": "Hi [a](/b/) [c](/d/) [e](/f/)"}, "invalid_lexicon", "more than 2"),
        # §9.2: the lexicon is checked after every other member.
        ({"text": "Hi", "speed": 9, "lexicon": {"": ""}}, "invalid_speed", "speed"),
    ],
)
def test_bad_pronunciations_are_refused_with_a_code_naming_them(message: dict, code: str, names: str) -> None:
    server = _session(lexicon=True)
    assert server.receive_frame(json.dumps(message)) == []
    (error,) = _errors(server)
    assert error["code"] == code and names in error["message"] and not error["fatal"]
    (accepted,) = server.receive_frame(json.dumps({"text": "Still here."}))
    assert isinstance(accepted, RequestAccepted)


def test_a_server_without_the_feature_reads_as_version_1_did() -> None:
    server = _session(lexicon=False)
    (accepted,) = server.receive_frame(json.dumps({"text": "Hi [x](/9/)", "lexicon": "not even an object"}))
    assert isinstance(accepted, RequestAccepted) and accepted.request.lexicon is None
    server.receive_frame(json.dumps({"type": "lexicon", "lexicon": {}}))
    assert [e["code"] for e in _errors(server)] == [ErrorCode.UNKNOWN_TYPE]
    assert "lexicon" in FEATURES


def test_messages_round_trip() -> None:
    message = SessionLexicon({"SQL": LexiconEntry("SQL", respell="sequel")}, request_id="m1")
    assert parse_client_message(message.to_json(), lexicon=True) == message
    request = SynthesisRequest(
        "Hi.", request_id="r", lexicon={"Kokoro": LexiconEntry("Kokoro", phonemes="kO")}
    )
    assert parse_client_message(request.to_json(), lexicon=True) == request
    built = ClientSession.lexicon({"SQL": {"respell": "sequel"}}, request_id="m1")
    assert parse_client_message(built, lexicon=True) == message
