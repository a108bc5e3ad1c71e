"""The agent's conversation across turns, kept to what its listener heard (barge-in).

A voice agent that is interrupted must remember what it *said*, not what it *wrote*: a model that
believes the listener heard a whole reply answers the next turn as if they had. Only the client knows
how far its player got, so the barge-in brings the player's position: "the listener spoke over the reply
after N ms of its audio". The TTS says what its audio spoke: each answered request's
``synthesis_complete`` carries word timings, also for a request the barge-in cancelled, where they cover
only the audio that was sent (PROTOCOL.md §4.2, §5.3 ``cancel_words``). :func:`heard_reply` lays the
requests end to end, as the agent's audio stream does, and keeps the text of the words played to their
end (:func:`protocol.heard.heard_of`).

:class:`Conversation` holds the history as Bedrock Converse messages (``{"role", "content": [{"text"}]}``,
what a Strands ``Agent`` keeps in ``agent.messages``). :func:`reference_agent.pipeline.run_agent` runs
one turn on it; :meth:`Conversation.barge_in`, during the turn or after it, trims the reply in the
history to what was heard. A reply of which nothing was heard leaves no assistant message: the user's
next words join the same user message, so the roles still alternate as Converse requires.
"""

from __future__ import annotations

import asyncio
import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from protocol.heard import NoWordTimings, heard_of
from protocol.messages import SynthesisComplete

__all__ = ["MAX_HISTORY_MESSAGES", "Conversation", "Turn", "heard_reply"]

MAX_HISTORY_MESSAGES = 100
"""Messages a conversation keeps (50 turns); older ones are dropped, oldest first, a turn at a time."""


def heard_reply(spoken: Sequence[tuple[str, SynthesisComplete]], played_ms: float) -> str:
    """The text a listener heard of a reply spoken as TTS requests played one after the other.

    Args:
        spoken: each answered request of the reply, in order: the text sent and its ``synthesis_complete``
            (§5.3). Request ``i``'s audio starts where the audio of the requests before it ends (the sum
            of their ``total_duration_s``): the order the agent streams the audio in.
        played_ms: milliseconds of the reply's audio the player had played, from its first sample.

    Returns:
        The heard parts of the requests joined by one space (``""`` when none was heard). A request played
        in part keeps its words played to their end (:func:`protocol.heard.heard_of`) and ends the text:
        nothing after it was heard. A request played in part without word timings keeps nothing, since
        what was heard of it cannot be told.

    Raises:
        ValueError: ``played_ms`` is negative or not a number.
    """
    if isinstance(played_ms, bool) or not isinstance(played_ms, int | float) or not played_ms >= 0:
        raise ValueError(f"played_ms must be a number >= 0, not {played_ms!r}")
    parts: list[str] = []
    start_ms = 0.0
    for text, complete in spoken:
        local_ms = played_ms - start_ms
        if local_ms <= 0:
            break
        try:
            heard = heard_of(text, complete, local_ms)
        except NoWordTimings:
            break
        if heard.heard.strip():
            parts.append(heard.heard.strip())
        if heard.not_heard.strip():
            break
        start_ms += complete.total_duration_s * 1000.0
    return " ".join(parts)


@dataclass
class Turn:
    """One user prompt and the agent's reply, as :func:`~reference_agent.pipeline.run_agent` runs it.

    Attributes:
        prompt: what the model is asked: the user's words, after any words of theirs that got no heard
            answer (see :class:`Conversation`).
        written: the reply as the model wrote it so far.
        spoken: the reply's answered TTS requests, in order (see :func:`heard_reply`).
        played_ms: the player's position at the barge-in, or ``None`` if the reply was not interrupted.
        running: whether the pipeline is still running the turn.
        interrupted: set by :meth:`Conversation.barge_in` while the turn runs: the pipeline stops the
            model and cancels the TTS requests not yet answered.
        ended: set by :meth:`Conversation.end`.
    """

    prompt: str
    written: str = ""
    spoken: list[tuple[str, SynthesisComplete]] = field(default_factory=list)
    played_ms: float | None = None
    running: bool = True
    interrupted: asyncio.Event = field(default_factory=asyncio.Event)
    ended: asyncio.Event = field(default_factory=asyncio.Event)


class Conversation:
    """The history of one conversation, each reply kept to what the listener heard.

    Use from the event loop that runs the turns: :func:`~reference_agent.pipeline.run_agent` calls
    :meth:`begin` and :meth:`end`; the caller calls :meth:`barge_in` when the listener speaks over a reply.

    Attributes:
        messages: the history as Converse messages, oldest first; the model of the next turn sees them.
    """

    def __init__(self, max_messages: int = MAX_HISTORY_MESSAGES) -> None:
        if max_messages < 2:
            raise ValueError(f"max_messages must be >= 2, got {max_messages}")
        self.max_messages = max_messages
        self.messages: list[dict[str, Any]] = []
        self.turn: Turn | None = None
        """The turn running now, or the last one."""

    def context(self) -> list[dict[str, Any]]:
        """A copy of the history before the running turn's prompt: what its model is given."""
        messages = self.messages
        if self.turn is not None and self.turn.running and messages and messages[-1]["role"] == "user":
            messages = messages[:-1]
        return copy.deepcopy(messages)

    def begin(self, prompt: str) -> Turn:
        """Start a turn for the user's ``prompt``; call inside the event loop that runs it.

        A user message with no assistant answer after it (the last reply was interrupted before a word of
        it was heard) takes ``prompt`` as a second line: the user said both.

        Raises:
            RuntimeError: a turn is already running.
        """
        if self.turn is not None and self.turn.running:
            raise RuntimeError("a turn is already running in this conversation")
        if self.messages and self.messages[-1]["role"] == "user":
            last = self.messages[-1]
            last["content"].append({"text": prompt})
            prompt = "\n".join(block["text"] for block in last["content"] if "text" in block)
        else:
            self.messages.append({"role": "user", "content": [{"text": prompt}]})
        self.turn = Turn(prompt)
        return self.turn

    def end(self, turn: Turn) -> None:
        """The pipeline finished ``turn`` (completed, interrupted or failed): record its reply."""
        turn.running = False
        self._settle(turn)
        turn.ended.set()

    async def idle(self) -> None:
        """Return once no turn is running (at once when none is): turns of one conversation take turns."""
        while self.turn is not None and self.turn.running:
            await self.turn.ended.wait()

    def barge_in(self, played_ms: float) -> None:
        """The listener spoke over the reply after the player had played ``played_ms`` ms of its audio.

        During a turn, the pipeline stops the model, cancels the TTS requests not yet answered (§4.2) and
        records the reply when they are answered; after it, the recorded reply is trimmed at once. In both
        cases the reply in :attr:`messages` becomes the text heard (:func:`heard_reply`).

        Raises:
            ValueError: ``played_ms`` is negative or not a finite number.
            RuntimeError: there is no reply to interrupt.
        """
        if (
            isinstance(played_ms, bool)
            or not isinstance(played_ms, int | float)
            or not math.isfinite(played_ms)
        ):
            raise ValueError(f"played_ms must be a finite number >= 0, not {played_ms!r}")
        if played_ms < 0:
            raise ValueError(f"played_ms must be >= 0, not {played_ms!r}")
        turn = self.turn
        if turn is None:
            raise RuntimeError("no reply to interrupt: the conversation has no turn yet")
        turn.played_ms = played_ms if turn.played_ms is None else min(turn.played_ms, played_ms)
        if turn.running:
            turn.interrupted.set()
        else:
            self._settle(turn)

    @property
    def last_reply(self) -> str | None:
        """The last turn's reply as the history keeps it, or ``None`` when it keeps none."""
        last = self.messages[-1] if self.messages else None
        if last is None or last["role"] != "assistant":
            return None
        return "".join(block.get("text", "") for block in last["content"])

    def _settle(self, turn: Turn) -> None:
        if turn is not self.turn:
            return
        reply = turn.written.strip() if turn.played_ms is None else heard_reply(turn.spoken, turn.played_ms)
        if self.messages and self.messages[-1]["role"] == "assistant":
            self.messages.pop()
        if reply:
            self.messages.append({"role": "assistant", "content": [{"text": reply}]})
        # Oldest turns first, whole: the history still starts with a user message.
        while len(self.messages) > self.max_messages:
            del self.messages[0]
            while self.messages and self.messages[0]["role"] != "user":
                del self.messages[0]
