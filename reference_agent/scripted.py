"""A scripted Strands model provider: a fixed reply streamed with a realistic rhythm, fully offline.

Tests, the demo and the benchmark need an LLM that needs no AWS account and answers the same way every
time. :class:`ScriptedModel` is a :class:`strands.models.Model` whose :meth:`~ScriptedModel.stream`
yields Bedrock ConverseStream-shaped events (``messageStart``, ``contentBlockStart``,
``contentBlockDelta {"delta": {"text": ...}}``, ``contentBlockStop``, ``messageStop``, ``metadata``),
the shapes Strands' event loop consumes (``strands/event_loop/streaming.py`` in strands-agents 1.62;
REFERENCE.md §5). The reply arrives word by word: the first after ``first_token_s``, then one every
``1 / tokens_per_s`` seconds, which is what makes bidi's head start measurable.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import AsyncGenerator, AsyncIterable, Awaitable, Callable
from typing import Any

from strands.models import Model

__all__ = ["DEFAULT_REPLY", "ScriptedModel", "rhythm", "tokenize"]

DEFAULT_REPLY = (
    "Good question. "
    "Streaming speech lets a voice agent start talking as soon as its first sentence is written, "
    "instead of waiting for the whole answer. "
    "Each sentence goes to the speech model while the next one is still being generated. "
    "The listener hears the reply sooner, and nothing else changes."
)
"""Four sentences, about the length of the AWS sample's 267-character benchmark text (REFERENCE.md §3).

It opens with a short sentence, as a voice assistant's reply often does (the system prompt asks for
short spoken sentences): that is the sentence bidi speaks while the rest is still being written.
"""

DEFAULT_FIRST_TOKEN_S = 0.35
"""Time to first token, seconds: in the range a hosted model answers a short prompt."""

DEFAULT_TOKENS_PER_S = 40.0
"""Words per second after the first (about 50-60 subword tokens per second)."""

_TOKEN = re.compile(r"\S+\s*|\s+")


def tokenize(text: str) -> list[str]:
    """Cut ``text`` into the pieces the scripted model streams: each word with its trailing space.

    The pieces concatenate back to ``text`` exactly.
    """
    return _TOKEN.findall(text)


def rhythm(reply: str, first_sentence_s: float, whole_reply_s: float) -> tuple[float, float]:
    """The ``(first_token_s, tokens_per_s)`` that release ``reply``'s first sentence to the TTS after
    ``first_sentence_s`` and its last piece after ``whole_reply_s`` (the AWS sample's benchmark rhythm is
    0.6 s and 5 s, REFERENCE.md §3).

    :class:`ScriptedModel` streams word pieces (:func:`tokenize`), the first after ``first_token_s`` and
    one every ``1 / tokens_per_s`` after; the bidi chunker releases a sentence when the first character
    after it arrives, so the first sentence leaves at the arrival of piece ``k`` (the next sentence's
    first word).

    Raises:
        ValueError: the reply has a single sentence, or its first sentence is too long to arrive that
            soon at a steady rate (the time to first token would be negative).
    """
    from speech.chunker import IncrementalSentenceChunker

    pieces = tokenize(reply)
    chunker = IncrementalSentenceChunker()
    release = next((index for index, piece in enumerate(pieces) if chunker.feed(piece)), None)
    if release is None:
        raise ValueError("the reply must have more than one sentence")
    last = len(pieces) - 1
    if last <= release or whole_reply_s <= first_sentence_s:
        raise ValueError("the whole reply must end after the first sentence")
    tokens_per_s = (last - release) / (whole_reply_s - first_sentence_s)
    first_token_s = first_sentence_s - release / tokens_per_s
    if first_token_s < 0:
        raise ValueError(f"the first sentence ({release} pieces) cannot arrive within {first_sentence_s} s")
    return round(first_token_s, 4), round(tokens_per_s, 4)


class ScriptedModel(Model):
    """A model provider that streams a fixed reply with a first-token delay and a steady rate.

    Args:
        reply: the text every call answers with, whatever the prompt.
        first_token_s: seconds before the first piece (time to first token).
        tokens_per_s: pieces per second after the first (a piece is a word, see :func:`tokenize`).
        fail_after: if set, raise ``failure`` after this many pieces have been streamed (0: before
            the first), to exercise an agent's error path the way a dropped Bedrock stream would.
        failure: the exception raised at ``fail_after``; default ``RuntimeError``.
        sleep: the coroutine used to wait; injectable for tests.

    Raises:
        ValueError: ``tokens_per_s`` is not positive or ``first_token_s`` is negative.
    """

    def __init__(
        self,
        reply: str = DEFAULT_REPLY,
        *,
        first_token_s: float = DEFAULT_FIRST_TOKEN_S,
        tokens_per_s: float = DEFAULT_TOKENS_PER_S,
        fail_after: int | None = None,
        failure: Exception | None = None,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> None:
        if not (tokens_per_s > 0 and math.isfinite(tokens_per_s)):
            raise ValueError(f"tokens_per_s must be positive, got {tokens_per_s!r}")
        if not first_token_s >= 0:
            raise ValueError(f"first_token_s must be >= 0, got {first_token_s!r}")
        self.config: dict[str, Any] = {
            "reply": reply,
            "first_token_s": first_token_s,
            "tokens_per_s": tokens_per_s,
            "fail_after": fail_after,
        }
        self.failure = failure
        self._sleep = sleep

    def update_config(self, **model_config: Any) -> None:
        """Change ``reply``, ``first_token_s``, ``tokens_per_s`` or ``fail_after``."""
        unknown = set(model_config) - set(self.config)
        if unknown:
            raise TypeError(f"unknown ScriptedModel settings: {sorted(unknown)}")
        self.config.update(model_config)

    def get_config(self) -> dict[str, Any]:
        """The current settings (a copy)."""
        return dict(self.config)

    async def structured_output(
        self, output_model: Any, prompt: Any, system_prompt: str | None = None, **kwargs: Any
    ) -> AsyncGenerator[dict[str, Any], None]:
        """Not supported: a scripted reply cannot fill an arbitrary schema.

        Raises:
            NotImplementedError: always.
        """
        raise NotImplementedError("ScriptedModel produces free text only")
        yield {}  # pragma: no cover - makes this an async generator, as the base class declares

    async def stream(
        self,
        messages: Any,
        tool_specs: Any = None,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> AsyncIterable[dict[str, Any]]:
        """Stream the reply as Bedrock ConverseStream events (see the module docstring).

        Raises:
            Exception: ``failure`` once ``fail_after`` pieces were streamed, if configured.
        """
        config = self.config
        pieces = tokenize(config["reply"])
        interval = 1.0 / config["tokens_per_s"]
        fail_after = config["fail_after"]
        yield {"messageStart": {"role": "assistant"}}
        await self._sleep(config["first_token_s"])
        yield {"contentBlockStart": {"start": {}}}
        for index, piece in enumerate(pieces):
            if fail_after is not None and index >= fail_after:
                raise self.failure or RuntimeError(f"scripted model failure after {index} pieces")
            if index:
                await self._sleep(interval)
            yield {"contentBlockDelta": {"delta": {"text": piece}}}
        if fail_after is not None and fail_after >= len(pieces):
            raise self.failure or RuntimeError(f"scripted model failure after {len(pieces)} pieces")
        yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "end_turn"}}
        prompt_chars = sum(len(block.get("text", "")) for message in messages for block in message["content"])
        input_tokens, output_tokens = math.ceil(prompt_chars / 4), len(pieces)
        yield {
            "metadata": {
                "usage": {
                    "inputTokens": input_tokens,
                    "outputTokens": output_tokens,
                    "totalTokens": input_tokens + output_tokens,
                },
                "metrics": {"latencyMs": round(1000 * (config["first_token_s"] + interval * len(pieces)))},
            }
        }


def add_scripted_options(parser: Any) -> None:
    """The scripted model's command-line options (``--reply``, ``--first-token-ms``, ``--tokens-per-s``),
    shared by ``python -m reference_agent`` and ``python -m reference_agent.local``."""
    parser.add_argument(
        "--reply", help="scripted model: the reply text (default: a short paragraph about streaming)"
    )
    parser.add_argument(
        "--first-token-ms",
        type=float,
        help=f"scripted model: milliseconds to the first token (default {DEFAULT_FIRST_TOKEN_S * 1000:g})",
    )
    parser.add_argument(
        "--tokens-per-s",
        type=float,
        help=f"scripted model: words written per second (default {DEFAULT_TOKENS_PER_S:g})",
    )
