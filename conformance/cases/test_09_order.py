"""§9.2 order of checks on the messages the bad-input table does not send: those of OPTIONAL features.

The table (:mod:`conformance.engine.badinputs`) sends every row to every server, so its rows hold only
messages every server reads. A ``lexicon`` message (§4.5) is read only by a server that lists the feature
``lexicon``; the cases here ask first and are UNIMPLEMENTED elsewhere (§1.7).
"""

from __future__ import annotations

from conformance.engine.case import Level, case
from conformance.engine.describe import ask, require_features
from conformance.engine.observer import Answer, ErrorView
from conformance.engine.probe import Probe
from conformance.engine.texts import FAST, SHORT


@case(
    "9.2.9",
    "§9.2",
    Level.MUST,
    requirements=("R9.2-1f",),
    requirement="A message can break several rules; the server MUST answer with the **first** failure in "
    "this order, so that every implementation gives the same code",
    description="describe (UNIMPLEMENTED without the feature lexicon); send a lexicon message whose "
    "request_id is a number and whose lexicon has an entry of another shape (a number); then a valid "
    "request",
    expectation="exactly one error frame: invalid_field (request_id is checked before lexicon, step 6), "
    "naming no request; no bracket for it; the valid request completes",
)
def test_lexicon_message_checks_request_id_first(conf: Probe) -> None:
    async def scenario() -> tuple[list[ErrorView], Answer]:
        async with conf.session("order-lexicon") as s:
            offer = await ask(s, "order-caps")
            require_features(None if offer is None else offer.features, "lexicon")
            mark = s.observer.fed
            await s.send(b'{"type": "lexicon", "request_id": 5, "lexicon": {"Kokoro": 5}}')
            await s.request(SHORT, request_id="after", speed=FAST)
            after = await s.answer("after")
            await s.close()
            await s.drain()
            return s.observer.errors_since(mark), after

    errors, after = conf.run(scenario())
    seen = [(e.code, e.request_id) for e in errors]
    conf.observe(errors=seen)
    assert seen == [("invalid_field", None)], (
        f"error frames {seen}; expected one invalid_field naming no request (request_id before lexicon)"
    )
    assert after.complete is not None, "the request after the refusal was not answered"


LONGEST_ID = "r" * 128
"""The longest valid ``request_id`` (§4.1: 1 to 128 characters)."""


@case(
    "9.2.10",
    "§9.2",
    Level.MUST,
    requirements=("R6.3-3b",),
    requirement="the `error` frame's `request_id` is the message's `request_id` whenever that was a valid "
    "id, and `null` otherwise",
    description="send a message of an unknown type whose request_id has 128 characters (the longest valid "
    "id), then one whose request_id has 129; then a valid request",
    expectation="two error frames unknown_type (type is checked before the members, step 5): the first "
    "names the 128-character id, the second names no request (129 characters is no valid id); the valid "
    "request completes",
)
def test_refusal_names_the_longest_valid_id(conf: Probe) -> None:
    async def scenario() -> tuple[list[ErrorView], Answer]:
        async with conf.session("order-longest-id") as s:
            mark = s.observer.fed
            await s.send(f'{{"type": "nope", "request_id": "{LONGEST_ID}"}}'.encode())
            await s.send(f'{{"type": "nope", "request_id": "{LONGEST_ID}r"}}'.encode())
            await s.request(SHORT, request_id="after", speed=FAST)
            after = await s.answer("after")
            await s.close()
            await s.drain()
            return s.observer.errors_since(mark), after

    errors, after = conf.run(scenario())
    seen = [(e.code, e.request_id) for e in errors]
    conf.observe(errors=[(code, None if rid is None else f"{len(rid)} characters") for code, rid in seen])
    assert [code for code, _ in seen] == ["unknown_type", "unknown_type"], seen
    conf.check(
        "R6.3-3",
        seen[0][1] == LONGEST_ID,
        "the refusal of a message whose request_id has 128 characters (a valid id) does not name it",
    )
    assert seen[1][1] is None, "the refusal of a message whose request_id has 129 characters names it"
    assert after.complete is not None, "the request after the refusals was not answered"
