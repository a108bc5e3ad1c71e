"""Mutation testing of the shipped server (conformance/mutation): the mutated tree, the triage, the score,
the command line's refusals, and one real sample certified end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.mutation import ROOT
from conformance.mutation.report import Triage, TriageError, load_triage, summarize, toml_entry, triage_key
from conformance.mutation.runner import Outcome, server_command
from conformance.mutation.tree import Mutant, build, load_or_build

TOY = """
def add(a, b):
    return a + b


class Gate:
    def opens(self, n):
        return n > 2
"""


def _toy_checkout(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    (root / "toy").mkdir(parents=True)
    (root / "spec").mkdir()
    (root / "toy" / "__init__.py").write_text("")
    (root / "toy" / "core.py").write_text(TOY)
    (root / "pyproject.toml").write_text('[tool.mutmut]\nsource_paths = ["toy"]\n')
    return root


def _call(tree: Path, mutant: str | None, expression: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "MUTANT_UNDER_TEST"}
    env["PYTHONPATH"] = str(tree)
    if mutant is not None:
        env["MUTANT_UNDER_TEST"] = mutant
    code = "import toy.core as c\ntry:\n    print(EXPR)\nexcept Exception as e:\n    print(type(e).__name__)"
    code = code.replace("EXPR", expression)
    done = subprocess.run(
        [sys.executable, "-P", "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_one_tree_holds_every_mutant_and_the_variable_picks_one(tmp_path: Path) -> None:
    root = _toy_checkout(tmp_path)
    tree = tmp_path / "tree"
    mutants = build(["toy/core.py"], tree, root=root).mutants
    names = {m.name for m in mutants}
    assert "toy.core.x_add__mutmut_1" in names and "toy.core.xǁGateǁopens__mutmut_1" in names
    add = next(m for m in mutants if m.name == "toy.core.x_add__mutmut_1")
    assert add.function == "add" and add.line == 2 and "-    return a + b\n+    return a - b" in add.diff
    gate = next(m for m in mutants if m.function == "Gate.opens")
    assert gate.line == 7
    assert _call(tree, None, "c.add(2, 3)") == "5", "no variable: the original"
    assert _call(tree, add.name, "c.add(2, 3)") == "-1", "the mutant, chosen at call time"
    assert _call(tree, add.name, "c.Gate().opens(3)") == "True", "other functions stay original"
    assert _call(tree, "fail", "c.add(2, 3)") == "MutmutProgrammaticFailException"
    assert (tree / "spec").is_dir(), "the schemas the server reads travel with the tree"


def test_a_tree_is_rebuilt_only_when_its_sources_change(tmp_path: Path) -> None:
    root = _toy_checkout(tmp_path)
    tree = tmp_path / "tree"
    first = load_or_build(["toy/core.py"], tree, root=root).mutants
    (tree / "toy" / "core.py").write_text("# not rebuilt\n")
    assert load_or_build(["toy/core.py"], tree, root=root).mutants == first
    assert (tree / "toy" / "core.py").read_text() == "# not rebuilt\n"
    (root / "toy" / "core.py").write_text(TOY + "\n\ndef sub(a, b):\n    return a - b\n")
    again = load_or_build(["toy/core.py"], tree, root=root).mutants
    assert len(again) > len(first) and "# not rebuilt" not in (tree / "toy" / "core.py").read_text()


def test_the_server_command_runs_the_tree_not_the_checkout() -> None:
    command = server_command(Path("/t"), "protocol.frames.x_a__mutmut_1")
    assert command.startswith(f"env PYTHONPATH=/t:{ROOT} MUTANT_UNDER_TEST=protocol.frames.x_a__mutmut_1 ")
    assert " -P -m reference_server " in command and "--backend tone" in command
    assert command.endswith("--port {port}")


def test_only_the_lines_the_suite_runs_are_mutated_and_the_rest_is_counted(tmp_path: Path) -> None:
    root = _toy_checkout(tmp_path)
    tree = build(["toy/core.py"], tmp_path / "tree", root=root, covered={"toy/core.py": [3]})
    assert {m.function for m in tree.mutants} == {"add"}, "line 3 is add's body"
    assert (
        set(tree.not_run["toy/core.py"]) == {"Gate.opens"} and tree.not_run["toy/core.py"]["Gate.opens"] > 0
    )


def _toml(where: str, change: str, status: str, extra: str) -> str:
    return f"[[survivor]]\nfunction = {where!r}\nchange = '''\n{change}'''\nstatus = {status!r}\n{extra}\n"


def test_triage_is_found_by_function_and_change_and_checked(tmp_path: Path) -> None:
    mutant = Mutant(
        "toy.core.x_add__mutmut_7", "toy/core.py", "add", 2, "@@ -1 +1 @@\n-    a + b\n+    a - b\n"
    )
    path = tmp_path / "survivors.toml"
    path.write_text(
        toml_entry(mutant)
        .replace("equivalent | unobservable | killed", "equivalent")
        .replace('reason = ""', 'reason = "same bytes"')
    )
    assert load_triage(path) == {triage_key(mutant): Triage("equivalent", "same bytes")}
    renumbered = Mutant(
        "toy.core.x_add__mutmut_2", "toy/core.py", "add", 9, "@@ -5 +5 @@\n-    a + b\n+    a - b"
    )
    assert triage_key(renumbered) in load_triage(path), "mutmut's numbers and the hunk's place do not matter"
    change = "-    a + b\n+    a - b"
    for body, message in [
        (_toml("toy/core.py add", change, "fine", ""), "status must be one of"),
        (_toml("toy/core.py add", change, "equivalent", ""), "needs a reason"),
        (_toml("toy/core.py add", change, "unobservable", ""), "needs a reason"),
        (_toml("toy/core.py add", change, "killed", ""), "names the case"),
        ("[[survivor]]\nstatus = 'killed'\ncase = '1.1.1'\n", "needs function and change"),
        (_toml("toy/core.py add", change, "killed", "case = '4.2.1'") * 2, "triaged twice"),
        ("[[survivor\n", "survivors.toml"),
    ]:
        path.write_text(body)
        with pytest.raises(TriageError, match=message):
            load_triage(path)
    assert load_triage(tmp_path / "absent.toml") == {}
    load_triage()  # the checked-in file is valid


def test_the_score_leaves_equivalent_mutants_out_and_reports_lost_catches() -> None:
    def mutant(i: int) -> Mutant:
        return Mutant(f"m.x_f__mutmut_{i}", "m.py", "f", 1, f"-    x = {i}\n+    x = None")

    mutants = [mutant(i) for i in range(1, 7)]
    outcomes = [
        Outcome(None, "survived"),  # a control: not a mutant of the report
        Outcome("m.x_f__mutmut_1", "killed", ("4.2.1",)),
        Outcome("m.x_f__mutmut_2", "timeout"),
        Outcome("m.x_f__mutmut_3", "survived"),
        Outcome("m.x_f__mutmut_4", "survived"),
        Outcome("m.x_f__mutmut_5", "survived"),
    ]
    triage = {
        triage_key(mutants[3]): Triage("equivalent", "r"),
        triage_key(mutants[4]): Triage("killed", case="4.2.9"),
    }
    report = summarize(mutants, outcomes, triage, {"m.py": {"g": 4}, "n.py": {"h": 2}})
    assert report["modules"]["m.py"] == {
        "not_run": 4,
        "mutants": 6,
        "run": 5,
        "killed": 2,
        "survived": 3,
        "equivalent": 1,
        "unobservable": 0,
        "untriaged": 1,
        "lost": 1,
        "errors": 0,
        "score": 0.5,
    }
    assert report["modules"]["n.py"]["not_run"] == 2 and report["modules"]["n.py"]["score"] is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sample", "0"], "must be at least 1"),
        (["--module", "no/such.py"], "not a Python file"),
        (["--jobs", "0"], "must be at least 1"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "conformance.mutation", *args], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr


def test_a_bad_triage_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text('[[survivor]]\nfunction = "a.py f"\nchange = "-x"\nstatus = "fine"\n')
    done = subprocess.run(
        [sys.executable, "-m", "conformance.mutation", "--triage", str(tmp_path / "bad.toml"), "--list"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and "status must be one of" in done.stderr and "Traceback" not in done.stderr


KILLED = (
    "protocol.messages.server.xǁServerFrameǁto_json__mutmut_1",
    "protocol.messages.server.xǁServerFrameǁto_dict__mutmut_1",
)
"""Two mutants every run must kill (every server frame is ``null``, or has no ``type``): catches that must
stay."""


def test_mutants_of_the_shipped_server_are_certified_with_their_controls(tmp_path: Path) -> None:
    """The real thing on two mutants: the controls (the unmutated tree passes, ``fail`` is killed), each
    mutant's outcome and the report."""
    report = tmp_path / "report"
    # Every line: the coverage run (one more whole suite) is the full command's, not this test's.
    args = ["--module", "protocol/messages/server.py", "--every-line", "--report", str(report)]
    args += [f"--mutant={name}" for name in KILLED]
    done = subprocess.run(
        [sys.executable, "-m", "conformance.mutation", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    index = json.loads((report / "index.json").read_text())
    assert sorted(index["mutants"]) == sorted(KILLED) and index["run"] == 2
    assert all(entry["status"] == "killed" and entry["killed_by"] for entry in index["mutants"].values())
    assert index["modules"]["protocol/messages/server.py"]["score"] == 1.0
    assert "-        return compact_json(self.to_dict())" in index["mutants"][KILLED[0]]["diff"]
    assert "Mutation testing of the shipped server" in (report / "index.html").read_text()


def test_a_suite_past_its_limit_is_interrupted_so_it_can_stop_its_server(tmp_path: Path) -> None:
    """A run past its limit gets SIGINT, not SIGKILL: pytest then tears its fixtures down, which stops the
    mutant server it started in a session of its own (a killed suite left such servers running)."""
    from conformance.mutation.runner import _run_suite

    pid_file = tmp_path / "server.pid"
    suite = (
        "import os, signal, subprocess, sys, time\n"
        "sleeper = [sys.executable, '-c', 'import time; time.sleep(60)']\n"
        "server = subprocess.Popen(sleeper, start_new_session=True)\n"
        f"open({str(pid_file)!r}, 'w').write(str(server.pid))\n"
        "try:\n"
        "    time.sleep(60)\n"
        "except KeyboardInterrupt:\n"
        "    os.killpg(server.pid, signal.SIGTERM)\n"
        "    server.wait()\n"
    )
    assert _run_suite([sys.executable, "-c", suite], dict(os.environ), timeout_s=2.0) is None
    server = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(server, 0)
