"""Every command line of the project reads as one product: plain-words help (no reStructuredText markup),
every option's default stated, every option's help present, usage lines naming the command as it was run.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator

import pytest


def _parsers() -> dict[str, Callable[[], argparse.ArgumentParser]]:
    from conformance.engine.replay import build_parser as replay
    from infra.agent_cli import build_parser as agent_infra
    from infra.speech_cli import build_parser as speech_infra
    from protocol.asyncapi import build_parser as asyncapi
    from reference_agent.__main__ import build_parser as agent
    from reference_agent.demo import build_parser as demo
    from reference_agent.local import build_parser as local
    from reference_server.assets import build_parser as assets
    from reference_server.settings import build_parser as server
    from simulator.__main__ import build_parser as simulator

    return {
        "python -m reference_server": server,
        "python -m reference_server.assets": assets,
        "python -m simulator": lambda: simulator({}),
        "python -m reference_agent": agent,
        "python -m reference_agent.local": local,
        "agent-infra demo": demo,
        "speech-infra": speech_infra,
        "agent-infra": agent_infra,
        "python locks/lock.py": _lock_parser,
        "kokoro-conformance replay": replay,
        "python -m protocol.asyncapi": asyncapi,
    }


def _lock_parser() -> argparse.ArgumentParser:
    from test_locks import lock

    return lock.build_parser()


def _walk(parser: argparse.ArgumentParser) -> Iterator[tuple[argparse.ArgumentParser, argparse.Action]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _walk(sub)
        else:
            yield parser, action


_NO_DEFAULT_NEEDED = (
    argparse._HelpAction,
    argparse._VersionAction,
    argparse._StoreTrueAction,
    argparse._StoreFalseAction,
    argparse._CountAction,
)


@pytest.mark.parametrize("name", list(_parsers()))
def test_help_is_plain_words_with_every_default(name: str) -> None:
    parser = _parsers()[name]()
    assert parser.prog == name
    problems: list[str] = []
    for owner in {id(o): o for o, _ in _walk(parser)}.values():
        if any(_markup(text) for text in (owner.description or "", owner.epilog or "")):
            problems.append(f"{owner.prog}: markup in its description")
    for owner, action in _walk(parser):
        where = f"{owner.prog} {'/'.join(action.option_strings) or action.dest}"
        if action.help == argparse.SUPPRESS:
            continue
        if not action.help:
            problems.append(f"{where}: no help")
        elif _markup(action.help):
            problems.append(f"{where}: markup in help")
        elif (
            action.option_strings
            and not isinstance(action, _NO_DEFAULT_NEEDED)
            and not action.required
            and "default" not in action.help
        ):
            problems.append(f"{where}: default not stated")
    assert problems == []


def _markup(text: str) -> bool:
    return "``" in text or ":func:" in text or ":class:" in text or ":mod:" in text
