"""Server settings: bind address, backend and the protocol limits, from the environment and the command line.

Every limit of PROTOCOL.md §10 is a setting here, with the protocol's default (the reasons for each
default are in :class:`protocol.limits.Limits`). A value comes from, in order of precedence: a command-line
flag, an environment variable, the default. Environment variables let a container (SageMaker passes
``Environment`` from the model definition) change a limit without a new image.

The server binds 127.0.0.1 unless told otherwise (§13): listening on every interface is a decision the
deployer makes, as the container does with ``--host 0.0.0.0``.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from protocol.limits import AUDIO_FRAME_HARD_LIMIT, Limits
from protocol.logs import LOG_FORMATS, LOG_LEVELS
from reference_server.backends.onnx_backend import GRAPHS, OPTIMIZATIONS, SPINNINGS, PassSettings

__all__ = [
    "ABORT_ON_CANCELS",
    "BACKENDS",
    "DEFAULT_HOST",
    "DEFAULT_MAX_HEADER_BYTES",
    "DEFAULT_ONNX_PASS",
    "DEFAULT_PORT",
    "ENV_PREFIX",
    "LEAD_INS",
    "LOOPBACK_HOSTS",
    "OPENAI_MODES",
    "PLAYGROUND_MODES",
    "SCHEDULINGS",
    "SEGMENTATIONS",
    "UTTERANCE_RELEASES",
    "Settings",
    "SettingsError",
    "build_parser",
    "load_settings",
]

DEFAULT_HOST = "127.0.0.1"
"""Loopback only: a development server is not reachable from the network by accident (§13)."""
DEFAULT_PORT = 8080
"""The port SageMaker sends traffic to (REFERENCE.md §1, PROTOCOL.md §2)."""
BACKENDS = ("onnx", "torch", "tone")
"""``onnx``: the int8 ONNX on onnxruntime (the CPU image); ``torch``: ``kokoro.KModel``, CUDA if any;
``tone``: no model, a tone per word (:mod:`reference_server.backends.tone`), to test the shipped code."""
SEGMENTATIONS = ("deadline", "sentence")
"""How request text is cut into synthesis segments (:attr:`Settings.segmentation`, PROTOCOL.md §10.1)."""
SCHEDULINGS = ("deadline", "fifo")
"""The order sessions get the model in (:attr:`Settings.scheduling`, PROTOCOL.md §10.2)."""
UTTERANCE_RELEASES = ("deadline", "sentence")
"""When an utterance's unfinished sentence may be spoken (:attr:`Settings.utterance_release`, §15.3)."""
LEAD_INS = ("early", "off")
"""When a speech's lead-in silence is sent (:attr:`Settings.lead_in`, PROTOCOL.md §10.1)."""
ABORT_ON_CANCELS = ("yes", "no")
"""Whether a cancel aborts the model pass running for the request (:attr:`Settings.abort_on_cancel`)."""
ENV_PREFIX = "KOKORO_"
"""Every setting ``name`` is read from the environment variable ``KOKORO_<NAME>``."""
PLAYGROUND_MODES = ("auto", "on", "off")
"""Values of :attr:`Settings.playground`; the command line and ``KOKORO_PLAYGROUND`` also read 1/0."""
OPENAI_MODES = PLAYGROUND_MODES
"""Values of :attr:`Settings.openai`, read as the playground's (``KOKORO_OPENAI`` also reads 1/0)."""
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})
"""Addresses only this machine can reach: the playground and the OpenAI routes are served there unless
turned off."""

DEFAULT_ONNX_PASS = PassSettings(threads=None, spinning="pass", graph="auto", optimization="all")
"""How the onnx backend runs Kokoro's pass unless told otherwise (:class:`PassSettings`; the ``--onnx-*``
settings override each field). ``bench/pass_settings.py`` measures the candidates and prints this line
for its winner: changing the server's default is changing this one line.

Chosen from bench §1d (bench/RESULTS.md, 2026-12-07, two idle cores, medians of 9 interleaved rounds):
spinning during a pass only (``pass``) gave the fastest passes, 0.212 s for "Sure thing." and 0.400-0.405 s
for a 2.75 s sentence, against 0.226 s and 0.427 s for the former default (idle threads always asleep):
6 % sooner first audio. The bench's own pick ran the whole graph; the split graph with the same spinning
came within 1 % (0.212 s, 0.405 s), inside the spread between rounds, and keeps what only the split graph
offers (``--lead-in early``, :meth:`OnnxBackend.align`), so ``auto`` (split where ``onnx`` is installed)
stays. One thread is 60 % slower; fp32 (exported from the int8 weights) 23 % slower; the optimization
levels differ by less than the noise. With ``pass`` the threads stop spinning as soon as a pass returns,
so the event loop keeps its budgets: ``/ping`` p95 4.1 ms and WebSocket accepts p95 11.3 ms while the
server synthesized back to back."""

DEFAULT_MAX_HEADER_BYTES = 16_384
"""Largest request head read (request line plus headers), bytes: h11's and Node's default; PROTOCOL.md §13."""
_MIN_HEADER_BYTES = 1024
# Below this an ordinary browser request to the playground would not fit.

_DEFAULT_LIMITS = Limits()
# 1 MiB: sixteen times the default message limit, so a client that overshoots gets an answer, while
# one message can never make the server buffer more than this.
_DEFAULT_TRANSPORT_MAX = AUDIO_FRAME_HARD_LIMIT


class SettingsError(ValueError):
    """A setting has a value that cannot be used; the message names the setting and where it came from."""


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything a server process is configured with.

    Attributes:
        host: address to bind; default 127.0.0.1.
        port: TCP port; default 8080 (0 picks a free port).
        backend: ``"onnx"``, ``"torch"`` or ``"tone"`` (no model: the shipped server for tests).
        model_dir: folder holding the Kokoro weights and voices; ``None`` lets the backend use its own
            default (the asset cache, or ``/opt/ml/model`` in the containers).
        synthesis_workers: segments synthesized at the same time across all sessions. Default 1: on a
            CPU one synthesis already uses every core, and on one GPU running segments one after another
            keeps latency predictable; sessions take turns segment by segment, so none starves.
        transport_max_message_bytes: largest WebSocket message the transport accepts at all. Messages
            above ``limits.max_message_bytes`` but below this get a ``message_too_large`` error frame and
            the session lives on (§9); above it the transport closes with 1009, since the server will not
            buffer arbitrary amounts to answer politely (§10). ``None`` (default): 1 MiB, or
            ``max_message_bytes`` if that is larger; see :attr:`ws_max_size`.
        log_level: logging level name (:data:`protocol.logs.LOG_LEVELS`); ``KOKORO_LOG_LEVEL``, shared with
            every piece of the project.
        log_format: ``"text"`` (default) or ``"json"`` (:mod:`protocol.logs`); ``KOKORO_LOG_FORMAT``.
        metrics_port: serve Prometheus metrics on this port of ``host`` (``GET /metrics``); ``None``
            (default): no metrics endpoint. 0 picks a free port. See reference_server/README.md.
        playground: serve the playground page at ``/playground/`` (:mod:`reference_server.playground`):
            ``"on"``, ``"off"`` or ``"auto"`` (default): only when ``host`` is a loopback address, i.e.
            for ``python -m reference_server`` on a developer's machine but not in the containers, which
            bind 0.0.0.0 and serve SageMaker's routes only unless ``KOKORO_PLAYGROUND=1``. See
            :attr:`serves_playground`.
        openai: serve the OpenAI-compatible speech routes under ``/v1``
            (:mod:`reference_server.openai_speech`: ``POST /v1/audio/speech``, ``GET /v1/models``,
            ``GET /v1/audio/voices``): ``"on"``, ``"off"`` or ``"auto"`` (default): only when ``host``
            is a loopback address, like :attr:`playground`, since the routes check no credentials; the
            containers serve them only with ``KOKORO_OPENAI=1``. See :attr:`serves_openai`.
        segmentation: ``"deadline"`` (default): sentences are cut into segments that fit the audio
            queued ahead of the listener (PROTOCOL.md §10.1); ``"sentence"``: each sentence is one
            segment whatever its length (the server before §10.1, kept to compare against).
        scheduling: ``"deadline"`` (default): the session whose listener runs out of audio first is
            synthesized first, new speech first of all (§10.2); ``"fifo"``: sessions take turns in the
            order they asked.
        first_audio_target_s: the synthesis time a speech's first segment may take; with a model that
            fast (a GPU) the whole first sentence is one segment, otherwise the first segment is a few
            words at a natural break (default 0.15 s).
        lead_in: ``"off"`` (default): each segment's audio goes out in one piece once it is synthesized;
            ``"early"``: a speech's first segment sends part of Kokoro's lead-in silence as soon as the
            text side has predicted its length, and the rest of the segment once the decoder has run (onnx
            backend with ``onnx`` installed; not for requests that ask for marks). The voice starts
            0.15-0.23 s sooner, but a client sees its first audio while the decoder still runs and then a
            wait, inside the silence, that a player counts as an underrun; so it is not the default.
        utterance_release: ``"deadline"`` (default): an utterance's sentence that is still being written
            is cut early, at a clause or word boundary of the words received, when its listener would
            otherwise run out of audio before the sentence's end arrives (PROTOCOL.md §15.3, §10.1);
            ``"sentence"``: the text waits for its sentence's end (or flush, end), the server before
            that, kept to compare against. Only with ``deadline`` segmentation.
        allowed_origins: origins (``scheme://host[:port]``) whose pages may open a WebSocket session,
            besides the server's own (the playground it serves); ``("*",)`` allows every origin. A
            handshake with any other ``Origin`` is refused with 403 (PROTOCOL.md §13); clients that are
            not browsers send none. Default: none. See :class:`reference_server.edges.HostOriginGuard`.
        allowed_hosts: host names accepted in ``Host`` besides the loopback ones when ``host`` is a
            loopback address (a name of your own for 127.0.0.1); ``("*",)`` turns the check off. Other
            names get 421, the defence against DNS rebinding (§13). Default: none.
        max_header_bytes: largest request head (request line and headers) read, in bytes; a larger one
            gets 431 ``headers_too_large`` (§13). Default 16,384.
        abort_on_cancel: ``"yes"`` (default): a cancel, a disconnect or a failed session aborts the model
            pass running for the request (onnxruntime's ``RunOptions.terminate``, torch between layers), so
            the next request gets the model at once (PROTOCOL.md §4.2, §7.4); ``"no"``: the pass finishes
            and its audio is dropped, the server before issue #26, kept to compare against.
        onnx_threads: the onnx backend's intra-op threads; ``None``: every CPU the process may use.
        onnx_spinning: how its idle intra-op threads wait: ``off`` (sleep), ``on`` (spin before
            sleeping, during and after a pass) or ``pass`` (spin only during a pass)
            (:data:`~reference_server.backends.onnx_backend.SPINNINGS`). Spinning threads hold a core that
            the event loop needs to answer ``/ping`` and accept sessions.
        onnx_graph: ``split`` (text side and decoder as two sessions; needed for ``lead_in`` early and
            timings before the decoder), ``whole`` (one session) or ``auto`` (split when ``onnx`` is
            installed).
        onnx_optimization: onnxruntime's graph optimization level: ``basic``, ``extended`` or ``all``.
            The four ``onnx_*`` defaults are :data:`DEFAULT_ONNX_PASS`; ``bench/pass_settings.py``
            measures them (bench/RESULTS.md).
        limits: the protocol limits of §10.
    """

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    backend: str = "onnx"
    model_dir: Path | None = None
    synthesis_workers: int = 1
    transport_max_message_bytes: int | None = None
    log_level: str = "info"
    log_format: str = "text"
    metrics_port: int | None = None
    playground: str = "auto"
    openai: str = "auto"
    segmentation: str = "deadline"
    scheduling: str = "deadline"
    first_audio_target_s: float = 0.15
    lead_in: str = "off"
    utterance_release: str = "deadline"
    allowed_origins: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = ()
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES
    abort_on_cancel: str = "yes"
    onnx_threads: int | None = DEFAULT_ONNX_PASS.threads
    onnx_spinning: str = DEFAULT_ONNX_PASS.spinning
    onnx_graph: str = DEFAULT_ONNX_PASS.graph
    onnx_optimization: str = DEFAULT_ONNX_PASS.optimization
    limits: Limits = field(default_factory=Limits)

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise SettingsError(f"backend must be one of {', '.join(BACKENDS)}, not {self.backend!r}")
        for name in ("port", "metrics_port"):
            value = getattr(self, name)
            if value is not None and not 0 <= value <= 65535:
                raise SettingsError(f"{name} must be from 0 to 65535, not {value}")
        if self.playground not in PLAYGROUND_MODES:
            raise SettingsError(
                f"playground must be one of {', '.join(PLAYGROUND_MODES)}, not {self.playground!r}"
            )
        if self.openai not in OPENAI_MODES:
            raise SettingsError(f"openai must be one of {', '.join(OPENAI_MODES)}, not {self.openai!r}")
        if self.segmentation not in SEGMENTATIONS:
            raise SettingsError(
                f"segmentation must be one of {', '.join(SEGMENTATIONS)}, not {self.segmentation!r}"
            )
        if self.scheduling not in SCHEDULINGS:
            raise SettingsError(
                f"scheduling must be one of {', '.join(SCHEDULINGS)}, not {self.scheduling!r}"
            )
        if self.utterance_release not in UTTERANCE_RELEASES:
            choices = ", ".join(UTTERANCE_RELEASES)
            raise SettingsError(f"utterance_release must be one of {choices}, not {self.utterance_release!r}")
        if self.abort_on_cancel not in ABORT_ON_CANCELS:
            choices = ", ".join(ABORT_ON_CANCELS)
            raise SettingsError(f"abort_on_cancel must be one of {choices}, not {self.abort_on_cancel!r}")
        try:
            self.onnx_pass  # noqa: B018 (PassSettings checks its fields)
        except ValueError as exc:
            raise SettingsError(f"onnx_{exc}") from None
        if self.lead_in not in LEAD_INS:
            raise SettingsError(f"lead_in must be one of {', '.join(LEAD_INS)}, not {self.lead_in!r}")
        if not self.first_audio_target_s >= 0:
            raise SettingsError(f"first_audio_target_s must not be negative, not {self.first_audio_target_s}")
        if self.max_header_bytes < _MIN_HEADER_BYTES:
            raise SettingsError(
                f"max_header_bytes must be at least {_MIN_HEADER_BYTES}, not {self.max_header_bytes}"
            )
        if self.synthesis_workers < 1:
            raise SettingsError(f"synthesis_workers must be at least 1, not {self.synthesis_workers}")
        limit = self.transport_max_message_bytes
        if limit is not None and limit < self.limits.max_message_bytes:
            raise SettingsError(
                f"transport_max_message_bytes ({limit}) must be at least "
                f"max_message_bytes ({self.limits.max_message_bytes})"
            )

    @property
    def onnx_pass(self) -> PassSettings:
        """The onnx backend's session options from the four ``onnx_*`` settings.

        Raises:
            ValueError: one is out of its range.
        """
        return PassSettings(self.onnx_threads, self.onnx_spinning, self.onnx_graph, self.onnx_optimization)

    @property
    def serves_playground(self) -> bool:
        """Whether ``/playground/`` is served: on, off, or with auto whether ``host`` is loopback."""
        if self.playground == "auto":
            return self.host in LOOPBACK_HOSTS
        return self.playground == "on"

    @property
    def serves_openai(self) -> bool:
        """Whether the OpenAI routes under ``/v1`` are served: on, off, or with auto whether ``host`` is
        loopback."""
        if self.openai == "auto":
            return self.host in LOOPBACK_HOSTS
        return self.openai == "on"

    @property
    def ws_max_size(self) -> int:
        """The WebSocket transport's message ceiling in bytes (uvicorn's ``ws_max_size``)."""
        if self.transport_max_message_bytes is not None:
            return self.transport_max_message_bytes
        return max(_DEFAULT_TRANSPORT_MAX, self.limits.max_message_bytes)


@dataclass(frozen=True, slots=True)
class _Option:
    """One setting as the command line and the environment see it."""

    name: str
    parse: Callable[[str], Any]
    help: str
    choices: Sequence[str] | None = None
    limit: bool = False  # a field of Limits rather than of Settings

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.name.upper()

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


class _OnOffAutoError(argparse.ArgumentTypeError, ValueError):
    """A bad on/off/auto word: argparse shows its message as is (a plain ValueError would show the
    function's name); it is a ValueError for the environment variables' parsing."""


def _on_off_auto(raw: str) -> str:
    """``on`` (also ``1/true/yes``), ``off`` (also ``0/false/no``) or ``auto``."""
    word = raw.strip().lower()
    if word in ("1", "true", "yes", "on"):
        return "on"
    if word in ("0", "false", "no", "off"):
        return "off"
    if word == "auto":
        return "auto"
    raise _OnOffAutoError(f"use on, off or auto, not {raw!r}")


def _names(raw: str) -> tuple[str, ...]:
    """A comma-separated list (``a,b``), blanks dropped."""
    return tuple(part.strip() for part in raw.split(",") if part.strip())


def _limit(name: str, what: str, parse: Callable[[str], Any] = int) -> _Option:
    default = getattr(_DEFAULT_LIMITS, name)
    return _Option(name, parse, f"{what} (default {default}; PROTOCOL.md §10)", limit=True)


_OPTIONS: tuple[_Option, ...] = (
    _Option("host", str, f"address to bind (default {DEFAULT_HOST}; the container passes 0.0.0.0)"),
    _Option("port", int, f"TCP port (default {DEFAULT_PORT})"),
    _Option(
        "backend",
        str,
        "synthesis backend (default onnx; tone: no model, a tone per word, to test the server's code)",
        choices=BACKENDS,
    ),
    _Option("model_dir", Path, "folder with the Kokoro weights and voices (default: the backend's own)"),
    _Option("synthesis_workers", int, "segments synthesized at once across all sessions (default 1)"),
    _Option(
        "transport_max_message_bytes",
        int,
        "largest WebSocket message read at all; larger closes with 1009 "
        f"(default {_DEFAULT_TRANSPORT_MAX} or max_message_bytes if larger)",
    ),
    _Option("log_level", str, "how much to log (default info)", choices=LOG_LEVELS),
    _Option(
        "log_format",
        str,
        "text lines for people, or one JSON object per line (default text)",
        choices=LOG_FORMATS,
    ),
    _Option(
        "metrics_port",
        int,
        "serve Prometheus metrics at http://HOST:PORT/metrics (default: off; 0 = any free port)",
    ),
    _Option(
        "playground",
        _on_off_auto,
        "serve the playground page at http://HOST:PORT/playground/: on, off or auto (default auto: on "
        "when HOST is loopback, off otherwise, so the containers serve it only with KOKORO_PLAYGROUND=1)",
    ),
    _Option(
        "openai",
        _on_off_auto,
        "serve OpenAI-compatible speech at http://HOST:PORT/v1 (POST /v1/audio/speech, GET /v1/models, "
        "GET /v1/audio/voices; no credentials checked): on, off or auto (default auto: on when HOST is "
        "loopback, off otherwise, so the containers serve it only with KOKORO_OPENAI=1)",
    ),
    _Option(
        "segmentation",
        str,
        "deadline: cut sentences to fit the audio queued ahead of the listener; sentence: one segment per "
        "sentence, the old way (default deadline; PROTOCOL.md §10.1)",
        choices=SEGMENTATIONS,
    ),
    _Option(
        "scheduling",
        str,
        "deadline: the listener that runs out of audio first is served first; fifo: take turns "
        "(default deadline; PROTOCOL.md §10.2)",
        choices=SCHEDULINGS,
    ),
    _Option(
        "first_audio_target_s",
        float,
        "synthesis time a speech's first segment may take, in seconds (default 0.15)",
    ),
    _Option(
        "lead_in",
        str,
        "early: send a speech's lead-in silence before its first segment is decoded; off: with the "
        "segment (default off; PROTOCOL.md §10.1)",
        choices=LEAD_INS,
    ),
    _Option(
        "utterance_release",
        str,
        "deadline: speak the start of an utterance's unfinished sentence when the listener would otherwise "
        "run out of audio; sentence: wait for the sentence's end (default deadline; PROTOCOL.md §15.3)",
        choices=UTTERANCE_RELEASES,
    ),
    _Option(
        "allowed_origins",
        _names,
        "comma-separated origins (scheme://host:port) whose web pages may open a WebSocket session besides "
        "the server's own playground; * allows any (default: none; other origins get 403, PROTOCOL.md §13)",
    ),
    _Option(
        "allowed_hosts",
        _names,
        "comma-separated host names accepted in Host besides 127.0.0.1, localhost and [::1] when bound to "
        "loopback; * turns the check off (default: none; others get 421, the DNS-rebinding defence, §13)",
    ),
    _Option(
        "max_header_bytes",
        int,
        f"largest request line plus headers in bytes; larger gets 431 (default {DEFAULT_MAX_HEADER_BYTES}; "
        "PROTOCOL.md §13)",
    ),
    _Option(
        "abort_on_cancel",
        str,
        "yes: a cancel or disconnect aborts the model pass running for the request; no: the pass "
        "finishes and its audio is dropped (default yes; PROTOCOL.md §4.2)",
        choices=ABORT_ON_CANCELS,
    ),
    _Option(
        "onnx_threads",
        int,
        "onnx backend: intra-op threads of a model pass (default: every CPU this process may use)",
    ),
    _Option(
        "onnx_spinning",
        str,
        "onnx backend: idle intra-op threads sleep (off), spin (on) or spin only during a pass (pass) "
        f"(default {DEFAULT_ONNX_PASS.spinning}; bench/RESULTS.md, the pass settings)",
        choices=SPINNINGS,
    ),
    _Option(
        "onnx_graph",
        str,
        "onnx backend: run the text side and the decoder as two sessions (split) or one (whole); auto: "
        f"split when the onnx package is installed (default {DEFAULT_ONNX_PASS.graph})",
        choices=GRAPHS,
    ),
    _Option(
        "onnx_optimization",
        str,
        f"onnx backend: onnxruntime's graph optimization level (default {DEFAULT_ONNX_PASS.optimization})",
        choices=OPTIMIZATIONS,
    ),
    _limit("max_message_bytes", "longest client message in bytes"),
    _limit("max_text_chars", "longest text in characters"),
    _limit("max_queue", "requests queued plus active per session"),
    _limit("max_sessions", "concurrent sessions"),
    _limit("max_audio_frame_bytes", "longest audio frame in bytes"),
    _limit("max_request_age_s", "oldest request_timestamp accepted, in seconds", float),
    _limit("close_timeout_s", "wait for the client's close frame, in seconds", float),
    _limit("lookahead", "requests synthesized ahead of the one being sent"),
    _limit("max_json_depth", "deepest JSON nesting"),
    _limit("utterance_idle_timeout_s", "longest wait for an utterance's next message, in seconds", float),
    _limit(
        "first_audio_budget_s",
        "latest first audio the server may promise, in seconds; later work is refused with server_busy",
        float,
    ),
    _limit("max_output_bytes", "output bytes waiting for a client before its messages are not read"),
    _limit("send_timeout_s", "longest wait for a client to read queued output, in seconds", float),
    _limit("max_parse_cpu_share", "share of one core a session's message parsing may use", float),
    _limit("session_idle_timeout_s", "longest a session may stay idle, in seconds", float),
    _limit("idle_eviction_s", "idle seconds after which a session yields its slot to a new one", float),
    _limit("max_invocations", "concurrent POST /invocations requests"),
    _limit(
        "max_lexicon_entries", "most words in a pronunciation lexicon, and inline pronunciations in a text"
    ),
)

assert {o.name for o in _OPTIONS if o.limit} == {f.name for f in fields(Limits)}, "every limit is a setting"


def build_parser(prog: str = "python -m reference_server") -> argparse.ArgumentParser:
    """The command line of ``python -m reference_server``: one flag per setting, each naming its variable.

    Flags default to ``None`` so that :func:`load_settings` can tell "not given" from a value.
    """
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Kokoro-82M reference server for the bidirectional TTS protocol (spec/PROTOCOL.md).",
        epilog=f"Every flag can also be set with the environment variable {ENV_PREFIX}<NAME>, "
        f"e.g. {ENV_PREFIX}MAX_SESSIONS=8; a flag wins over the environment.",
    )
    # SageMaker starts a hosting container as `docker run <image> serve` (its BYOC contract): with the
    # server as the image's ENTRYPOINT the word arrives here as an argument, and means "serve".
    parser.add_argument("command", nargs="?", choices=["serve"], help="optional; what SageMaker passes")
    for option in _OPTIONS:
        parser.add_argument(
            option.flag,
            dest=option.name,
            type=option.parse,
            choices=option.choices,
            metavar="{on,off,auto}" if option.parse is _on_off_auto else None,
            default=None,
            help=f"{option.help} [env {option.env}]",
        )
    return parser


def load_settings(argv: Sequence[str] | None = (), environ: Mapping[str, str] | None = None) -> Settings:
    """Settings from command-line arguments over environment variables over defaults.

    Args:
        argv: arguments without the program name; ``None`` reads ``sys.argv[1:]``; the default ``()``
            uses no arguments.
        environ: the environment; ``None`` reads ``os.environ``.

    Raises:
        SystemExit: a flag is malformed (argparse prints the usage, exit status 2).
        SettingsError: an environment variable is malformed, or a value is out of its range.
    """
    environ = os.environ if environ is None else environ
    given = vars(build_parser().parse_args(argv))
    values: dict[str, Any] = {}
    limits: dict[str, Any] = {}
    for option in _OPTIONS:
        value = given[option.name]
        if value is None and option.env in environ:
            raw = environ[option.env]
            try:
                value = option.parse(raw)
            except ValueError:
                raise SettingsError(f"{option.env}={raw!r} is not a valid {option.name}") from None
            if option.choices is not None and value not in option.choices:
                raise SettingsError(f"{option.env} must be one of {', '.join(option.choices)}, not {raw!r}")
        if value is not None:
            (limits if option.limit else values)[option.name] = value
    try:
        return replace(Settings(), **values, limits=replace(_DEFAULT_LIMITS, **limits))
    except SettingsError:
        raise
    except ValueError as exc:  # Limits' own range checks
        raise SettingsError(str(exc)) from None
