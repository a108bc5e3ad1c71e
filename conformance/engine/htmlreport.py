"""The human side of ``--report DIR``: a self-contained ``index.html`` that names defects, a page per case,
and a JUnit XML file (no I/O beyond reading the report's JSON and writing its files).

``index.html`` opens from disk with no network and no script: inline CSS, ``<details>`` to expand. On top,
like Autobahn|Testsuite's and h2spec's summaries, **"N distinct defects"**: one entry per requirement of
spec/PROTOCOL.md that the server breaks (its id, level and sentence, the cases that show it, one example
wire excerpt); then every case, by section, with its verdict, linked to ``cases/<id>.html`` (requirement,
expectation, failure message, observations, the client's log and the simulator's wire log).

What makes a defect: when the run's ``index.json`` carries ``defects`` (a list of ``{"clause", "failed",
"cases", "message", "excerpt", ...}``: the lenient observer's findings grouped by clause) or its cases carry
``findings`` (``{"clause", "message", ...}``), those clauses; otherwise each
``FAILED`` case counts against the first requirement id it declares (``Case.requirements``; its section
when it declares none), so cases that fail for one broken rule are listed once.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from conformance.engine.ids import label
from conformance.engine.replay import replay_command, replayable
from conformance.engine.shipped import MATRIX, load_matrix, section_titles

__all__ = ["Defect", "defects", "render_case", "render_index", "write", "write_junit"]

_VERDICT_ORDER = ("FAILED", "NON-STRICT", "INFORMATIONAL", "UNIMPLEMENTED", "SKIPPED", "OK")
_WIRE_LINES = 14
_NOTES_SHOWN = 20
_LOG_ROWS = 400


@dataclass
class Defect:
    """One broken requirement and what shows it.

    Attributes:
        clause: the requirement id (``"R6.1-1"``) or, for cases that declare none, their section.
        level: MUST, SHOULD or MAY (of the requirement, else of the worst case).
        sentence: the requirement's sentence from the spec ('' when unknown).
        cases: ids of the cases that show it, in run order.
        message: the first case's failure message (or the finding's).
        excerpt: lines of wire log around the failure (``C:``/``S:`` lines).
        verdict: the clause's run-level verdict (``FAILED``, ``NON-STRICT``, ``INFORMATIONAL``; '' when
            the run's index does not give one).
        seen: case id -> findings it saw, for a clause that no case of its own failed: where the defect
            was observed (each a note on that case).
        owners: the cases of the run that test the clause.
    """

    clause: str
    level: str
    sentence: str
    cases: list[str] = field(default_factory=list)
    message: str = ""
    excerpt: list[str] = field(default_factory=list)
    verdict: str = ""
    seen: dict[str, int] = field(default_factory=dict)
    owners: list[str] = field(default_factory=list)


def _short(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _log_line(entry: Mapping[str, Any]) -> str:
    direction = entry.get("dir")
    if direction == "end":
        return f"   {entry.get('note', 'end')}"
    who = "C:" if direction == "send" else "S:"
    if "json" in entry:
        return f"{who} {_short(entry['json'])}"
    kind = entry.get("kind", "message")
    return f"{who} <{kind} {entry.get('bytes', '?')} bytes, {entry.get('data_type') or 'no DataType'}>"


def excerpt(case: Mapping[str, Any], lines: int = _WIRE_LINES) -> list[str]:
    """The last ``lines`` client-log lines of the case's last session (where it failed), as ``C:``/``S:``."""
    sessions = [s for s in case.get("client_log", []) if s.get("entries")]
    if not sessions:
        return []
    session = sessions[-1]
    rows = [_log_line(e) for e in session["entries"]]
    head = [f"# session {session.get('session', '?')}" + (" (…)" if len(rows) > lines else "")]
    return head + rows[-lines:]


def defects(
    index: Mapping[str, Any], cases: Mapping[str, Mapping[str, Any]], matrix: Mapping[str, Mapping[str, Any]]
) -> list[Defect]:
    """The distinct defects of a run, worst level first (see the module docstring for what counts).

    Args:
        index: the run's ``index.json``.
        cases: case id -> its ``cases/<id>.json`` content (for messages and logs).
        matrix: :func:`load_matrix`.
    """
    found: dict[str, Defect] = {}

    def add(clause: str, case_id: str, level: str, message: str, lines: list[str]) -> None:
        row = matrix.get(clause, {})
        defect = found.get(clause)
        if defect is None:
            defect = found[clause] = Defect(clause, row.get("level", level), row.get("text", ""))
            defect.message, defect.excerpt = message, lines
        if case_id not in defect.cases:
            defect.cases.append(case_id)

    listed = index.get("defects")
    if isinstance(listed, list) and listed:
        for item in listed:
            clause = str(item.get("clause") or item.get("id") or "?")
            # "failed": the cases whose verdict the defect decided; "cases": every case that saw it.
            for case_id in item.get("failed") or item.get("cases", []):
                case = cases.get(case_id, {})
                level = str(item.get("level") or case.get("level", "MUST"))
                add(clause, case_id, level, str(item.get("message", "")), excerpt(case))
            given = item.get("excerpt")
            if given and clause in found:
                lines = given.splitlines() if isinstance(given, str) else [str(x) for x in given]
                found[clause].excerpt = lines
            if clause in found:
                defect = found[clause]
                defect.level = str(item.get("level") or defect.level)
                defect.verdict = str(item.get("verdict") or "")
                defect.owners = [str(c) for c in item.get("owners", [])]
                if not item.get("failed"):
                    per_case = item.get("per_case") or dict.fromkeys(item.get("cases", []), 1)
                    defect.seen = {str(c): int(n) for c, n in per_case.items()}
    else:
        entries = index.get("cases", {})
        chosen = _explain(entries, cases)
        for case_id, entry in entries.items():
            if entry.get("verdict") != "FAILED":
                continue
            case = cases.get(case_id, {})
            declared = _declared(entry, case)
            findings = [f for f in case.get("findings", []) if declared and f.get("clause") in declared]
            message = str(case.get("message") or "")
            fallback = chosen.get(case_id) or entry.get("section", "?")
            clauses = [str(f["clause"]) for f in findings] or [fallback]
            for clause in dict.fromkeys(clauses):
                detail = next((str(f.get("message", "")) for f in findings if f["clause"] == clause), message)
                add(clause, case_id, entry.get("level", "MUST"), detail, excerpt(case))
    order = {"MUST": 0, "SHOULD": 1, "MAY": 2}
    return sorted(
        found.values(), key=lambda d: (_rank(d.verdict or "FAILED"), order.get(d.level, 3), -len(d.cases))
    )


def _declared(entry: Mapping[str, Any], case: Mapping[str, Any]) -> list[str]:
    return list(case.get("requirements") or entry.get("clauses") or entry.get("requirements") or [])


def _explain(
    entries: Mapping[str, Mapping[str, Any]], cases: Mapping[str, Mapping[str, Any]]
) -> dict[str, str]:
    """Failed case id -> the one declared requirement that best explains it, found greedily: the id that
    explains the most failed cases not yet explained, ties going to the id whose cases failed at the highest
    rate (the most specific). One broken rule then shows as one defect, not one per case."""
    declared = {cid: _declared(e, cases.get(cid, {})) for cid, e in entries.items()}
    failed = {cid for cid, e in entries.items() if e.get("verdict") == "FAILED" and declared[cid]}
    total: dict[str, int] = {}
    broken: dict[str, int] = {}
    for cid, ids in declared.items():
        for rid in ids:
            total[rid] = total.get(rid, 0) + 1
            broken[rid] = broken.get(rid, 0) + (cid in failed)
    chosen: dict[str, str] = {}
    open_cases = set(failed)
    while open_cases:
        counts: dict[str, int] = {}
        for cid in open_cases:
            for rid in declared[cid]:
                counts[rid] = counts.get(rid, 0) + 1
        best = max(counts, key=lambda rid: (counts[rid], broken[rid] / total[rid], -len(rid), rid))
        for cid in [c for c in open_cases if best in declared[c]]:
            chosen[cid] = best
            open_cases.discard(cid)
    return chosen


# -- HTML ------------------------------------------------------------------------------------------------

_CSS = """
:root { --fail:#b42318; --fail-bg:#fef3f2; --ok:#067647; --ok-bg:#ecfdf3; --warn:#b54708; --warn-bg:#fffaeb;
  --muted:#475467; --line:#eaecf0; --code:#f9fafb; --ink:#101828; }
* { box-sizing: border-box; }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink);
  margin: 0; background: #fff; }
main { max-width: 1180px; margin: 0 auto; padding: 28px 32px 64px; }
h1 { font-size: 24px; margin: 0 0 4px; } h1 .badge svg { vertical-align: middle; margin-left: 10px; }
h2 { font-size: 19px; margin: 36px 0 12px; }
h3 { font-size: 16px; margin: 0; }
.meta { color: var(--muted); font-size: 13px; margin: 0 0 20px; overflow-wrap: anywhere; }
.summary { display: flex; gap: 24px; align-items: center; border: 1px solid var(--line); border-radius: 12px;
  padding: 20px 24px; margin-bottom: 8px; }
.summary.bad { background: var(--fail-bg); border-color: #fecdca; }
.summary.good { background: var(--ok-bg); border-color: #abefc6; }
.big { font-size: 44px; font-weight: 700; line-height: 1; }
.bad .big { color: var(--fail); } .good .big { color: var(--ok); }
.headline { font-size: 22px; font-weight: 600; }
.pills { display: flex; flex-wrap: wrap; gap: 8px; margin-top: 8px; }
.pill { border-radius: 999px; padding: 2px 10px; font-size: 13px; font-weight: 600; border: 1px solid; }
.v-FAILED { color: var(--fail); background: var(--fail-bg); border-color: #fecdca; }
.v-OK { color: var(--ok); background: var(--ok-bg); border-color: #abefc6; }
.v-NON-STRICT, .v-INFORMATIONAL { color: var(--warn); background: var(--warn-bg); border-color: #fedf89; }
.v-UNIMPLEMENTED, .v-SKIPPED { color: var(--muted); background: #f2f4f7; border-color: #d0d5dd; }
.defect { border: 1px solid #fecdca; border-left: 5px solid var(--fail); border-radius: 10px;
  padding: 14px 18px; margin: 12px 0; }
.defect.lvl-SHOULD, .defect.lvl-MAY { border-color: #fedf89; border-left-color: var(--warn); }
.clause { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-weight: 700; }
.sentence { margin: 6px 0; } .why { color: var(--muted); font-size: 13px; margin: 4px 0; }
pre { background: var(--code); border: 1px solid var(--line); border-radius: 8px; padding: 10px 12px;
  font: 12px/1.45 ui-monospace, SFMono-Regular, Menlo, monospace; overflow-x: auto; white-space: pre;
  margin: 8px 0 0; }
table { border-collapse: collapse; width: 100%; font-size: 14px; }
th, td { text-align: left; padding: 6px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-size: 12px; text-transform: uppercase; letter-spacing: .04em; color: var(--muted); }
td.id { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; white-space: nowrap; }
td.num { text-align: right; white-space: nowrap; color: var(--muted); }
details > summary { cursor: pointer; } details.sec { margin: 10px 0; }
details.sec > summary { font-weight: 600; font-size: 16px; padding: 6px 0; }
.counts { color: var(--muted); font-weight: 400; font-size: 13px; margin-left: 8px; }
a { color: #175cd3; text-decoration: none; } a:hover { text-decoration: underline; }
.msg { font-size: 13px; color: var(--fail); white-space: pre-wrap; margin-top: 4px; }
.reqs { font-family: ui-monospace, Menlo, monospace; font-size: 12px; color: var(--muted); }
dl { display: grid; grid-template-columns: 150px 1fr; gap: 6px 16px; } dt { color: var(--muted); }
dd { margin: 0; }
code { font: 13px ui-monospace, SFMono-Regular, Menlo, monospace; background: #f2f4f7; border-radius: 4px;
  padding: 0 3px; }
"""


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


_CODE = re.compile(r"`([^`]+)`")
_STRONG = re.compile(r"\*\*([^*]+)\*\*")


def _md(text: str) -> str:
    """A spec sentence as HTML: escaped, its code spans and bold kept (the only inline Markdown it uses)."""
    return _STRONG.sub(r"<strong>\1</strong>", _CODE.sub(r"<code>\1</code>", _e(text)))


def _page(title: str, body: str) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body><main>{body}</main></body></html>\n"
    )


def _pill(verdict: str, count: int | None = None) -> str:
    label = verdict if count is None else f"{count} {verdict}"
    return f'<span class="pill v-{_e(verdict)}">{_e(label)}</span>'


def _section_key(section: str) -> tuple[int, ...]:
    digits = section.lstrip("§").split(".")
    return tuple(int(d) for d in digits if d.isdigit()) or (999,)


def render_index(
    index: Mapping[str, Any],
    cases: Mapping[str, Mapping[str, Any]],
    matrix: Mapping[str, Mapping[str, Any]],
    badge: str | None = None,
) -> str:
    """``index.html``: the defects on top, then the case table by section (see the module docstring).

    ``badge`` is the run's ``badge.svg`` text, drawn inline beside the title (the page loads nothing)."""
    found = defects(index, cases, matrix)
    counts: Mapping[str, int] = index.get("counts", {})
    total = sum(counts.values())
    target = index.get("container_cmd") or index.get("container_url") or index.get("endpoint_name") or "?"
    parts = [
        f'<h1>Conformance report <span class="badge">{_inline_svg(badge)}</span></h1>',
        f'<p class="meta">spec/PROTOCOL.md · target {_e(index.get("target", "?"))}: {_e(target)} · '
        f"started {_e(index.get('started', '?'))} · {_e(index.get('duration_s', '?'))} s · {total} cases"
        f"{' · strict' if index.get('strict') else ''}</p>",
    ]
    must = [d for d in found if (d.verdict == "FAILED" if d.verdict else d.level == "MUST")]
    unjudged = [d for d in must if d.seen]
    known = index.get("expectations")
    failed_run = index.get("passed") is False or (not known and counts.get("FAILED", 0) > 0)
    bad = bool(found) or failed_run
    headline = (
        f"{len(found)} distinct defect{'s' if len(found) != 1 else ''}"
        if found
        else "No defects: every case that ran met its expectation"
    )
    pills = "".join(_pill(v, counts[v]) for v in _VERDICT_ORDER if counts.get(v))
    elsewhere = f" ({len(unjudged)} seen only outside their own cases)" if unjudged else ""
    parts.append(
        f'<section class="summary {"bad" if bad else "good"}" id="summary">'
        f'<div class="big">{len(found)}</div><div><div class="headline">{_e(headline)}</div>'
        f'<div class="why">{len(must)} break a MUST{_e(elsewhere)} · {counts.get("FAILED", 0)} FAILED cases'
        f"{' · the run FAILED' if failed_run else ''}</div>"
        f'<div class="pills">{pills}</div></div></section>'
    )
    if known:
        parts.append(_expectations_section(known))
    if found:
        parts.append('<h2 id="defects">Defects</h2>')
        for d in found:
            sentence = f'<p class="sentence">{_md(d.sentence)}</p>' if d.sentence else ""
            wire = f"<pre>{_e(chr(10).join(d.excerpt))}</pre>" if d.excerpt else ""
            first = d.message.strip().splitlines()[0][:400] if d.message.strip() else ""
            message = f'<div class="msg">{_e(first)}</div>' if first else ""
            verdict = f" · {_pill(d.verdict)}" if d.verdict else ""
            if d.seen:
                # No case of the clause failed: the clause row itself is the verdict.
                known = index.get("cases", {})  # findings seen outside any case are listed where they were
                links = ", ".join(
                    (f'<a href="cases/{_e(c)}.html">{_e(c)}</a>' if c in known else _e(c)) + f" ({n})"
                    for c, n in d.seen.items()
                )
                owners = (
                    ", ".join(f'<a href="cases/{_e(c)}.html">{_e(c)}</a>' for c in d.owners) or "none ran"
                )
                why = (
                    f'<p class="why">observed in {len(d.seen)} case{"s" if len(d.seen) != 1 else ""}: '
                    f"{links}; its own cases: {owners} (the path that breaks it is not theirs)</p>"
                )
            else:
                links = ", ".join(f'<a href="cases/{_e(c)}.html">{_e(c)}</a>' for c in d.cases)
                plural = "s" if len(d.cases) != 1 else ""
                why = f'<p class="why">shown by {len(d.cases)} case{plural}: {links}</p>'
            parts.append(
                f'<article class="defect lvl-{_e(d.level)}" id="defect-{_e(d.clause)}">'
                f'<h3><span class="clause">{_e(d.clause)}</span> · {_e(d.level)}{verdict}</h3>{sentence}'
                f"{why}{message}{wire}</article>"
            )
    parts.append('<h2 id="cases">Cases by section</h2>')
    by_section: dict[str, list[tuple[str, Mapping[str, Any]]]] = {}
    for case_id, entry in index.get("cases", {}).items():
        top = entry.get("section", "§?").split(".")[0]
        by_section.setdefault(top if top.startswith("§") else "agent", []).append((case_id, entry))
    titles = section_titles()
    for section in sorted(by_section, key=_section_key):
        rows = by_section[section]
        tally: dict[str, int] = {}
        for _, entry in rows:
            tally[entry.get("verdict", "?")] = tally.get(entry.get("verdict", "?"), 0) + 1
        failing = any(v in ("FAILED", "NON-STRICT") for v in tally)
        title = titles.get(section.lstrip("§"), "")
        ordered = sorted(tally.items(), key=lambda kv: _rank(kv[0]))
        summary = ", ".join(f"{n} {v}" for v, n in ordered)
        body = "".join(_case_row(case_id, entry, cases.get(case_id, {})) for case_id, entry in rows)
        parts.append(
            f'<details class="sec"{" open" if failing else ""}><summary>{_e(section)} {_e(title)}'
            f'<span class="counts">{_e(summary)}</span></summary><table><thead><tr><th>Case</th>'
            f"<th>Level</th><th>Verdict</th><th>Time</th><th>What it does</th></tr></thead><tbody>{body}"
            "</tbody></table></details>"
        )
    return _page("Conformance report", "".join(parts))


def _rank(verdict: str) -> int:
    return _VERDICT_ORDER.index(verdict) if verdict in _VERDICT_ORDER else len(_VERDICT_ORDER)


def _case_row(case_id: str, entry: Mapping[str, Any], case: Mapping[str, Any]) -> str:
    verdict = entry.get("verdict", "?")
    reqs = " ".join(_declared(entry, case))
    message = case.get("message") if verdict not in ("OK",) else None
    detail = f'<div class="msg">{_e(str(message).splitlines()[0][:300])}</div>' if message else ""
    return (
        f'<tr><td class="id"><a href="cases/{_e(case_id)}.html">{_e(case_id)}</a></td>'
        f"<td>{_e(entry.get('level', ''))}</td><td>{_pill(verdict)}</td>"
        f'<td class="num">{float(entry.get("duration_s", 0)):.2f} s</td>'
        f"<td>{_e(entry.get('description', ''))}{detail}"
        f"{f'<div class=reqs>{_e(reqs)}</div>' if reqs else ''}</td></tr>"
    )


def _inline_svg(svg: str | None) -> str:
    """An SVG document's ``<svg>`` element, to place in HTML (its XML declaration dropped); "" for none."""
    if not svg or "<svg" not in svg:
        return ""
    return svg[svg.index("<svg") :]


def _expectations_section(known: Mapping[str, Any]) -> str:
    """The run held against ``--expect`` (``index["expectations"]``): what failed as listed, what failed
    unlisted, what was listed and passed."""

    def item(case_or_clause: str, entry: Mapping[str, Any] | None) -> str:
        link = f'<a href="cases/{_e(case_or_clause)}.html">{_e(case_or_clause)}</a>'
        if case_or_clause.startswith("R"):
            link = f'<a href="#defect-{_e(case_or_clause)}">{_e(case_or_clause)}</a>'
        if entry is None:
            return f"<li>{link}</li>"
        issue = entry.get("issue")
        tracked = f' (<a href="{_e(issue)}">{_e(issue)}</a>)' if issue else ""
        return f"<li>{link}: {_e(entry.get('reason', ''))}{tracked}</li>"

    expected = "".join(item(i, e) for i, e in known.get("expected", {}).items())
    unexpected = "".join(item(i, None) for i in known.get("unexpected_failures", []))
    passes = "".join(item(i, e) for i, e in known.get("unexpected_passes", {}).items())
    verdict = "passes: exactly the listed ones failed" if known.get("passed") else "FAILED"
    return (
        f'<section class="expectations" id="expectations"><h2>Expectations</h2>'
        f"<p>Held against <code>{_e(known.get('file', '?'))}</code>: the run {verdict}.</p>"
        + (f"<h3>Expected failures</h3><ul>{expected}</ul>" if expected else "")
        + (f"<h3>Unexpected failures</h3><ul>{unexpected}</ul>" if unexpected else "")
        + (f"<h3>Unexpected passes (remove them from the file)</h3><ul>{passes}</ul>" if passes else "")
        + "</section>"
    )


def render_case(case: Mapping[str, Any], matrix: Mapping[str, Mapping[str, Any]]) -> str:
    """``cases/<id>.html``: one case with its verdict, message, observations and logs."""
    case_id = case.get("id", "?")
    requirements = "".join(
        f'<li><span class="clause">{_e(r)}</span> {_md(matrix.get(r, {}).get("text", ""))}</li>'
        for r in case.get("requirements", [])
    )
    findings = "".join(
        f"<li><span class=clause>{_e(f.get('clause', '?'))}</span> {_e(f.get('message', ''))}</li>"
        for f in case.get("findings", [])
    )
    # Findings on clauses the case does not own: not its verdict, but the run's (each links to its defect).
    notes = "".join(
        f'<li><a class=clause href="../index.html#defect-{_e(f.get("clause", "?"))}">'
        f"{_e(f.get('clause', '?'))}</a> {_e(f.get('message', ''))}"
        + (f" [{_e(f.get('session', ''))} #{_e(f['index'])}]" if f.get("index") is not None else "")
        + (f"<br><code>{_e(f['excerpt'])}</code>" if f.get("excerpt") else "")
        + "</li>"
        for f in case.get("notes", [])[:_NOTES_SHOWN]
    )
    more_notes = len(case.get("notes", [])) + int(case.get("notes_omitted", 0)) - _NOTES_SHOWN
    if more_notes > 0:
        notes += f"<li>… and {more_notes} more (cases/{_e(case_id)}.json has them)</li>"
    client = []
    for session in case.get("client_log", []):
        lines = [f"# session {session.get('session', '?')}"]
        lines += [f"{e.get('t', 0):9.3f}  {_log_line(e)}" for e in session.get("entries", [])[:_LOG_ROWS]]
        client.append("\n".join(lines))
    wire = []
    for session in case.get("wire_log", []):
        lines = [f"# {session.get('api', '?')} {session.get('session_id', '')}: {session.get('outcome', '')}"]
        for r in session.get("records", [])[:_LOG_ROWS]:
            lines.append(
                f"{r.get('t', 0):9.3f}  {r.get('leg', ''):9} {r.get('direction', ''):3} "
                f"{r.get('event', ''):14} "
                f"{r.get('length', ''):>7}  {r.get('data_type') or ''} {r.get('completion_state') or ''} "
                f"{r.get('note') or r.get('head') or ''}"
            )
        if session.get("records_omitted"):
            lines.append(f"… {session['records_omitted']} more records")
        wire.append("\n".join(lines))
    observations = json.dumps(case.get("observations", {}), indent=1, ensure_ascii=False)
    body = (
        f'<p class="meta"><a href="../index.html">← report</a></p>'
        f"<h1>{_e(label(case_id))} {_pill(case.get('verdict') or '?')}</h1>"
        f'<p class="meta">{_e(case.get("section", ""))} · {_e(case.get("level", ""))} · '
        f"{float(case.get('duration_s', 0)):.2f} s · {_e(case.get('nodeid', ''))}</p><dl>"
        f"<dt>Requirement</dt><dd>{_e(case.get('requirement', ''))}</dd>"
        f"<dt>Does</dt><dd>{_e(case.get('description', ''))}</dd>"
        f"<dt>Expects</dt><dd>{_e(case.get('expectation', ''))}</dd>"
        + (f"<dt>Expectations file</dt><dd>{_e(case['known'])}</dd>" if case.get("known") else "")
        + (
            f"<dt>Replay</dt><dd><code>{_e(replay_command(f'cases/{case_id}.json'))}</code> (from the "
            "report's folder: sends this case's client messages again and shows where the answers differ)"
            "</dd>"
            if replayable(case)
            else ""
        )
        + (f"<dt>Message</dt><dd><pre>{_e(case['message'])}</pre></dd>" if case.get("message") else "")
        + (f"<dt>Tests</dt><dd><ul>{requirements}</ul></dd>" if requirements else "")
        + (f"<dt>Findings</dt><dd><ul>{findings}</ul></dd>" if findings else "")
        + (f"<dt>Notes (judged by the run, on their clauses)</dt><dd><ul>{notes}</ul></dd>" if notes else "")
        + f"<dt>Observations</dt><dd><pre>{_e(observations)}</pre></dd></dl>"
        + (f"<h2>Client log</h2><pre>{_e(chr(10).join(client))}</pre>" if client else "")
        + (f"<h2>Simulator wire log</h2><pre>{_e(chr(10).join(wire))}</pre>" if wire else "")
    )
    return _page(f"{case_id}: conformance case", body)


# -- JUnit XML -------------------------------------------------------------------------------------------


def _clause_rows(index: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The run's clause rows (``index["defects"]``) that no ``FAILED`` case of their own carries and whose
    run-level verdict is not OK: each is a JUnit test case of its own."""
    listed = index.get("defects")
    if not isinstance(listed, list):
        return []
    return [d for d in listed if d.get("verdict") in ("FAILED", "NON-STRICT") and not d.get("carried", True)]


def junit(index: Mapping[str, Any], cases: Mapping[str, Mapping[str, Any]]) -> bytes:
    """JUnit XML of the run: FAILED is a failure; NON-STRICT, INFORMATIONAL, UNIMPLEMENTED and SKIPPED are
    skipped with the verdict in the message; every case names its requirement ids as properties.

    A clause whose findings were seen only outside its own cases (no ``FAILED`` case of its own shows it) is
    a test case of its own, ``conformance.clauses`` / ``R6.1-2 <sentence>``: a failure when its run-level
    verdict is ``FAILED``, skipped when ``NON-STRICT``; the message names where it was observed."""
    entries = index.get("cases", {})
    rows = _clause_rows(index)
    expectations = index.get("expectations") or {}
    passed_clauses = [c for c in expectations.get("unexpected_passes", {}) if c not in entries]

    def fails(verdict: Any, known: Any) -> bool:
        # --expect: a listed failure is skipped ("expected failure"), a listed pass fails ("unexpected pass")
        return known == "unexpected pass" or (verdict == "FAILED" and known != "expected failure")

    failures = sum(1 for e in entries.values() if fails(e.get("verdict"), e.get("known")))
    failures += sum(1 for d in rows if fails(d.get("verdict"), d.get("known"))) + len(passed_clauses)
    skipped = sum(
        1
        for e in entries.values()
        if e.get("verdict") != "OK" and not fails(e.get("verdict"), e.get("known"))
    )
    skipped += sum(1 for d in rows if not fails(d.get("verdict"), d.get("known")))
    suite = ElementTree.Element(
        "testsuite",
        name="conformance",
        tests=str(len(entries) + len(rows) + len(passed_clauses)),
        failures=str(failures),
        errors="0",
        skipped=str(skipped),
        time=str(index.get("duration_s", 0)),
        timestamp=str(index.get("started", "")),
    )
    for case_id, entry in entries.items():
        case = cases.get(case_id, {})
        element = ElementTree.SubElement(
            suite,
            "testcase",
            classname=f"conformance.{entry.get('section', '').lstrip('§') or 'agent'}",
            name=f"{case_id} {entry.get('description', '')}"[:200],
            time=str(entry.get("duration_s", 0)),
        )
        properties = ElementTree.SubElement(element, "properties")
        for name, value in (("level", entry.get("level", "")), ("verdict", entry.get("verdict", ""))):
            ElementTree.SubElement(properties, "property", name=name, value=str(value))
        for rid in case.get("requirements", []):
            ElementTree.SubElement(properties, "property", name="requirement", value=rid)
        verdict = entry.get("verdict")
        message = str(case.get("message") or "")
        expected = expectations.get("expected", {}).get(case_id) or expectations.get(
            "unexpected_passes", {}
        ).get(case_id)
        if entry.get("known") == "expected failure":
            ElementTree.SubElement(
                element, "skipped", message=f"expected failure ({expected['reason'] if expected else ''})"
            )
        elif entry.get("known") == "unexpected pass":
            reason = expected["reason"] if expected else ""
            failure = ElementTree.SubElement(
                element, "failure", message=f"unexpected pass: listed as failing ({reason})"[:500]
            )
            failure.text = (
                f"{label(case_id)} passed but {expectations.get('file')} lists it as failing: {reason}"
            )
        elif verdict == "FAILED":
            first = message.splitlines()[0][:500] if message.strip() else "FAILED"
            failure = ElementTree.SubElement(element, "failure", message=first)
            failure.text = message
        elif verdict != "OK":
            ElementTree.SubElement(
                element,
                "skipped",
                message=f"{verdict}: {message.splitlines()[0][:400]}" if message else str(verdict),
            )
    for row in rows:
        clause, verdict = str(row.get("clause", "?")), str(row.get("verdict"))
        element = ElementTree.SubElement(
            suite,
            "testcase",
            classname="conformance.clauses",
            name=f"{clause} {row.get('sentence', '')}"[:200],
        )
        properties = ElementTree.SubElement(element, "properties")
        for name, value in (("level", row.get("level", "")), ("verdict", verdict), ("requirement", clause)):
            ElementTree.SubElement(properties, "property", name=name, value=str(value))
        per_case = row.get("per_case") or dict.fromkeys(row.get("cases", []), 1)
        seen = ", ".join(f"{label(c)} ({n})" for c, n in per_case.items())
        first = f"{clause} ({row.get('level')}) observed in {seen}: {row.get('message', '')}"[:500]
        if row.get("known") == "expected failure":
            ElementTree.SubElement(element, "skipped", message=f"expected failure: {first}"[:500])
        elif verdict == "FAILED":
            failure = ElementTree.SubElement(element, "failure", message=first)
            failure.text = "\n".join(
                [first, f"its own cases: {', '.join(row.get('owners', [])) or 'none ran'}"]
                + ([f"wire: {row['excerpt']}"] if row.get("excerpt") else [])
            )
        else:
            ElementTree.SubElement(element, "skipped", message=f"{verdict}: {first}")
    for clause in passed_clauses:
        element = ElementTree.SubElement(suite, "testcase", classname="conformance.clauses", name=clause)
        reason = expectations["unexpected_passes"][clause].get("reason", "")
        ElementTree.SubElement(
            element, "failure", message=f"unexpected pass: listed as failing ({reason})"[:500]
        )
    ElementTree.indent(suite)
    return ElementTree.tostring(suite, encoding="utf-8", xml_declaration=True) + b"\n"


def _load_cases(directory: Path, index: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    out = {}
    for case_id, entry in index.get("cases", {}).items():
        try:
            out[case_id] = json.loads((directory / entry["report"]).read_text(encoding="utf-8"))
        except (OSError, ValueError, KeyError):
            out[case_id] = {}
    return out


def write_junit(directory: Path, index: Mapping[str, Any], cases: Mapping[str, Mapping[str, Any]]) -> Path:
    """Write ``directory/junit.xml``; return its path."""
    path = directory / "junit.xml"
    path.write_bytes(junit(index, cases))
    return path


def write(directory: Path, matrix_path: Path = MATRIX) -> Path:
    """Write ``index.html``, ``cases/<id>.html`` and ``junit.xml`` beside ``directory/index.json``.

    Returns:
        The path of ``index.html``.

    Raises:
        FileNotFoundError: ``directory/index.json`` does not exist.
    """
    index = json.loads((directory / "index.json").read_text(encoding="utf-8"))
    cases = _load_cases(directory, index)
    matrix = load_matrix(matrix_path)
    for case_id, case in cases.items():
        if case:
            page = directory / "cases" / f"{case_id}.html"
            page.write_text(render_case(case, matrix), encoding="utf-8", errors="backslashreplace")
    write_junit(directory, index, cases)
    path = directory / "index.html"
    badge_path = directory / "badge.svg"
    badge = badge_path.read_text(encoding="utf-8") if badge_path.exists() else None
    path.write_text(render_index(index, cases, matrix, badge), encoding="utf-8", errors="backslashreplace")
    return path
