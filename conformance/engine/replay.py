"""``kokoro-conformance replay CASE.json``: send a recorded case's client side again and show what differs.

A case file of the report (``report/cases/<id>.json``, :mod:`conformance.engine.report`) keeps, per session,
the client log: every message the suite sent (with its bytes, ``payload``, base64) and a summary of every
message the server answered. Replaying opens the same sessions, through the simulator as the suite does,
to a server given by URL (or started by a command), sends each message again with its ``DataType`` and
``CompletionState``, in the recorded order: a message goes out no earlier than its recorded time after the
session opened and not before as many answers have arrived as had arrived when it was first sent. Then it
compares, frame by frame, the answers with the recorded ones: the kind (control or audio), a control
frame's ``type`` and the members that identify it (``request_id``, ``status``, ``code``, ``fatal``), and an
audio frame's length. Timings and measured values (``elapsed_s``, word times) are not compared.

Exit status: 0 when every frame agrees, 1 when one differs, 2 for bad input (no such file, not a case file,
a case file of another format, a session that cannot be replayed), always with one line saying why.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conformance.engine.report import CASE_FORMAT

__all__ = [
    "CASE_FORMAT",
    "Frame",
    "ReplayError",
    "compare",
    "frames",
    "load_case",
    "main",
    "replay_command",
    "replayable",
]

IDENTIFYING = ("type", "request_id", "status", "code", "fatal", "utterance_id")
"""Control-frame members compared on replay; the others carry timings or measurements."""

ANSWER_GRACE_S = 5.0
"""How long after the last recorded answer's time a replay waits for answers still missing."""


class ReplayError(Exception):
    """The file cannot be replayed; the message is the one line the command prints (exit status 2)."""


@dataclass(frozen=True)
class Frame:
    """One server message, as replay compares it: ``kind`` ``control`` or ``audio``, a short ``label``."""

    kind: str
    label: str

    def __str__(self) -> str:
        return self.label


def frame_of(entry: dict[str, Any]) -> Frame:
    """The comparable view of a client-log ``recv`` entry (written by ``ObservedStream._log_message``)."""
    if entry.get("kind") == "control" and isinstance(entry.get("json"), dict):
        body = entry["json"]
        members = ", ".join(f"{k}={body[k]!r}" for k in IDENTIFYING if k in body and k != "type")
        return Frame("control", f"{body.get('type', '?')}({members})")
    if entry.get("kind") == "control":
        return Frame("control", f"control of {entry.get('bytes')} bytes")
    return Frame("audio", f"audio of {entry.get('bytes')} bytes")


def frames(entries: list[dict[str, Any]]) -> list[Frame]:
    """The received messages of one session's client log, in order."""
    return [frame_of(e) for e in entries if e.get("dir") == "recv"]


def load_case(path: Path) -> dict[str, Any]:
    """Read a case file and check that this version can replay it.

    Raises:
        ReplayError: no such file, not JSON, not a case file, another format, or nothing to replay.
    """
    try:
        case = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ReplayError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReplayError(f"{path}: not a case file of a conformance report ({exc})") from None
    if not isinstance(case, dict) or "id" not in case or "client_log" not in case:
        raise ReplayError(f"{path}: not a case file of a conformance report (report/cases/<id>.json)")
    if case.get("format") != CASE_FORMAT:
        raise ReplayError(
            f"{path}: written by another version of the suite (format {case.get('format')!r}, this one "
            f"replays {CASE_FORMAT!r}): run the case again with this version"
        )
    if not replayable(case):
        raise ReplayError(
            f"{path}: case {case['id']} cannot be replayed: its sessions were shared recordings or sent "
            "messages too large to keep, so their bytes are not in the file"
        )
    return case


def replayable(case: dict[str, Any]) -> bool:
    """Whether a case file has a session :func:`replay` can send again (the report shows the command only
    then): sessions of shared recordings (``recorded``) and messages over 64 KiB keep no bytes."""
    return any(_replayable(s) for s in case.get("client_log", []))


def _replayable(session: dict[str, Any]) -> bool:
    entries = session.get("entries") or []
    sends = [e for e in entries if e.get("dir") == "send"]
    return bool(sends) and not session.get("recorded") and all("payload" in e for e in sends)


def compare(recorded: list[Frame], received: list[Frame]) -> list[str]:
    """One line per position where the two sequences differ (a missing or extra frame included)."""
    lines = []
    for i in range(max(len(recorded), len(received))):
        was = recorded[i] if i < len(recorded) else None
        now = received[i] if i < len(received) else None
        if was != now:
            lines.append(f"  frame {i}: recorded {was or 'nothing'}; now {now or 'nothing'}")
    return lines


async def _replay_session(target: Any, session: dict[str, Any]) -> list[Frame]:
    from conformance.engine.stream import open_stream

    entries = session["entries"]
    recorded = frames(entries)
    last_answer_t = max((e["t"] for e in entries if e.get("dir") == "recv"), default=0.0)
    async with open_stream(target, session["session"]) as s:
        started = time.monotonic()
        reader = asyncio.create_task(_read(s, len(recorded)))
        seen = 0
        for entry in entries:
            if entry.get("dir") == "recv":
                seen += 1
                continue
            if entry.get("dir") != "send":
                continue
            while len(s.messages) < seen and not s.ended:
                await asyncio.sleep(0.005)
            delay = entry["t"] - (time.monotonic() - started)
            if delay > 0:
                await asyncio.sleep(delay)
            await s.send(
                base64.b64decode(entry["payload"]),
                data_type=entry.get("data_type"),
                completion_state=entry.get("completion_state"),
            )
        remaining = last_answer_t + ANSWER_GRACE_S - (time.monotonic() - started)
        try:
            await asyncio.wait_for(reader, max(remaining, ANSWER_GRACE_S))
        except TimeoutError:
            pass
        return frames(s.log)


async def _read(session: Any, count: int) -> None:
    while len(session.messages) < count or count == 0:
        if await session.receive() is None:
            return


def replay(case: dict[str, Any], container_url: str, out: Any = sys.stdout) -> int:
    """Replay every bidirectional session of ``case`` against the server at ``container_url``.

    Returns 0 when every session's answers agree with the recording, 1 otherwise; prints one block per
    session to ``out``.
    """
    from conformance.engine.loop import LoopThread
    from conformance.engine.target import SimulatorTarget

    target = SimulatorTarget(container_url)
    loop = LoopThread("conformance-replay")
    status = 0
    try:
        for session in case["client_log"]:
            if not _replayable(session):
                if session.get("entries"):
                    print(
                        f"session {session.get('session')}: not replayed (no sent bytes recorded)", file=out
                    )
                continue
            recorded = frames(session["entries"])
            budget = max((e["t"] for e in session["entries"]), default=0.0) + 2 * ANSWER_GRACE_S + 30
            try:
                received = loop.run(_replay_session(target, session), budget)
            except TimeoutError:
                print(f"session {session['session']}: no end within {budget:g} s", file=out)
                status = 1
                continue
            differences = compare(recorded, received)
            verdict = "same answers" if not differences else f"{len(differences)} frame(s) differ"
            print(
                f"session {session['session']}: {len(recorded)} frames recorded, {len(received)} now: "
                f"{verdict}",
                file=out,
            )
            for line in differences:
                print(line, file=out)
            status = status or int(bool(differences))
    finally:
        loop.stop()
        target.stop()
    return status


def replay_command(case_path: str) -> str:
    """The command line that replays a case file (shown on the report's case page)."""
    return f"kokoro-conformance replay {case_path} --container-url http://127.0.0.1:8080"


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``kokoro-conformance replay``."""
    parser = argparse.ArgumentParser(
        prog="kokoro-conformance replay",
        description="Send a recorded case's client messages to a server again and print, frame by frame, "
        "where its answers differ from the recording. Exit status 0 same, 1 different, 2 bad input.",
    )
    parser.add_argument("case", help="a case file of a report: report/cases/<id>.json")
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--container-url", default="http://127.0.0.1:8080", help="the server (default: http://127.0.0.1:8080)"
    )
    where.add_argument("--container-cmd", help="a command that starts the server on {port} (default: none)")
    return parser


def main(argv: list[str]) -> int:
    """``kokoro-conformance replay ...``; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        case = load_case(Path(args.case))
    except ReplayError as exc:
        print(f"kokoro-conformance replay: {exc}", file=sys.stderr)
        return 2
    process = None
    url = args.container_url
    if args.container_cmd:
        import tempfile

        from conformance.engine.target import ContainerProcess, ContainerStartError

        log = Path(tempfile.mkdtemp(prefix="kokoro-replay-")) / "container.log"
        process = ContainerProcess(args.container_cmd, log)
        try:
            process.start()
        except ContainerStartError as exc:
            print(
                f"kokoro-conformance replay: the server did not start: {exc} (its output: {log})",
                file=sys.stderr,
            )
            return 2
        url = process.url
    try:
        if not _answers_ping(url):
            print(
                f"kokoro-conformance replay: {url}/ping does not answer 200: is the server running?",
                file=sys.stderr,
            )
            return 2
        print(f"replaying case {case['id']} ({case.get('description', '')}) against {url}")
        return replay(case, url)
    finally:
        if process is not None:
            process.stop()


def _answers_ping(url: str) -> bool:
    import httpx

    try:
        return httpx.get(f"{url.rstrip('/')}/ping", timeout=5.0).status_code == 200
    except httpx.HTTPError:
        return False
