"""Command-line conventions of ``python -m simulator`` (their one user), the ones every piece follows.

* :func:`program_name`: the name a usage line shows: the console script's own name when the command was
  started as one (``sagemaker-simulator``), else ``python -m <module>``.
* :func:`read_environment`: every option of a command can also come from an environment variable
  ``<PREFIX><OPTION>`` (``--startup-timeout-s`` ↔ ``SAGEMAKER_SIMULATOR_STARTUP_TIMEOUT_S``), the way the
  reference server reads ``KOKORO_<NAME>``; a flag wins over the variable, the variable over the default,
  and each option's help names its variable.

Standard library only.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator, Mapping

__all__ = ["TRUE_WORDS", "program_name", "read_environment"]

TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off", ""})


def program_name(module: str, script: str | None = None) -> str:
    """``script`` when the process was started as that console script, else ``python -m <module>``."""
    started_as = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return script if script is not None and started_as == script else f"python -m {module}"


def _options(parser: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _options(sub)
        elif action.option_strings and action.dest not in ("help", "version"):
            yield action


def read_environment(
    parser: argparse.ArgumentParser,
    prefix: str,
    environ: Mapping[str, str] | None = None,
    *,
    skip: frozenset[str] = frozenset(),
) -> None:
    """Let every option of ``parser`` (and its sub-commands) default to ``<prefix><DEST>`` when that is set.

    Values are parsed as the option would parse them; a boolean flag reads ``1/true/yes/on`` or
    ``0/false/no/off``; a repeatable option reads a comma-separated list. Each option's help gains
    ``[env NAME]``. Options in ``skip`` (by ``dest``) are left alone (for example the log options, which
    every piece reads from ``KOKORO_LOG_*``).

    A malformed value makes the command exit with status 2 and a message naming the variable, as a bad
    flag does.
    """
    environ = os.environ if environ is None else environ
    for action in _options(parser):
        if action.dest in skip:
            continue
        name = prefix + action.dest.upper()
        action.help = f"{action.help or ''} [env {name}]".strip()
        if name not in environ:
            continue
        raw = environ[name]
        try:
            action.default = _parse(action, raw)
        except (ValueError, TypeError, argparse.ArgumentTypeError) as exc:
            parser.exit(2, f"{parser.prog}: error: {name}={raw!r}: {exc}\n")


def _parse(action: argparse.Action, raw: str) -> object:
    if isinstance(action, argparse._StoreTrueAction | argparse._StoreFalseAction):
        word = raw.strip().lower()
        if word not in TRUE_WORDS | FALSE_WORDS:
            raise ValueError(f"use one of {', '.join(sorted(TRUE_WORDS | FALSE_WORDS - {''}))}")
        return (word in TRUE_WORDS) == isinstance(action, argparse._StoreTrueAction)
    convert = action.type or str
    if isinstance(action, argparse._AppendAction):
        return [_check_choice(action, convert(part.strip())) for part in raw.split(",") if part.strip()]
    return _check_choice(action, convert(raw))  # type: ignore[operator]


def _check_choice(action: argparse.Action, value: object) -> object:
    if action.choices is not None and value not in action.choices:
        raise ValueError(f"choose from {', '.join(map(str, action.choices))}")
    return value
