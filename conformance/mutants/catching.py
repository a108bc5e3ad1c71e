"""Which cases must catch a mutant: computed from the requirement and condition ids it breaks (issue 31).

A mutant names what it breaks, never the cases that must report it: those are every case citing one of its
ids (``requirements=`` of :func:`conformance.engine.case.case`), so a finer condition or a new case changes
the set without touching the mutant's row. :mod:`conformance.mutants.teeth` runs them; the traceability
matrix shows them.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

__all__ = ["must_catch"]


@functools.lru_cache(maxsize=1)
def _citations() -> dict[str, tuple[str, ...]]:
    """Requirement or condition id -> the ids of the cases that cite it, in catalogue order."""
    from conformance.engine.case import catalogue

    cited: dict[str, list[str]] = {}
    for case in catalogue():
        for rid in case.requirements:
            cited.setdefault(rid, []).append(case.id)
    return {rid: tuple(ids) for rid, ids in cited.items()}


def must_catch(
    requirements: Sequence[str], observed_by: Sequence[str] = (), where: Sequence[str] = ()
) -> tuple[str, ...]:
    """The cases that must report ``FAILED`` (``NON-STRICT`` for a SHOULD case,
    :func:`conformance.mutants.teeth.caught_verdict`) a mutant that breaks ``requirements`` (requirement or
    condition ids): every case that cites one of them, each once, in catalogue order.

    ``where`` narrows a defect that shows only where other conditions apply too (it stalls only after it
    refuses a speed: it breaks "the session continues", R6.3-2c, where "out of range: invalid_speed",
    R4.1-5h, applies): then only the cases that also cite every id of ``where``. Empty for a conforming server
    (no requirements) and for a mutant caught by the run only (``observed_by``: it breaks its clauses on a
    path their own cases do not take)."""
    if observed_by:
        return ()
    cited = _citations()
    found = dict.fromkeys(case for rid in requirements for case in cited.get(rid, ()))
    if where:
        found = {case: None for case in found if all(case in cited.get(rid, ()) for rid in where)}
    return tuple(found)
