"""Which acceptance criteria a verification judges, and how (T8–T10).

A reviewer can only judge what belongs to the change in front of it:

- a **task** is judged against the spec's own text of every criterion its acceptance items cite,
  with the planner's checks under each (never the planner's paraphrase alone);
- a **component** against the criteria its tasks cite and those its description names (the spec's
  assignment, e.g. "SLUG-01 to SLUG-06"); the other criteria are listed, labelled with the component
  that owns them, as not expected in this change;
- the **module** against every criterion.

Criteria ids are the bracketed ids of the spec's Acceptance Criteria (``[SLUG-05]``); an item may
cite one as ``[SLUG-05]`` or name it bare (``SLUG-05``).
"""

from __future__ import annotations

import re

import msgspec

from events.fold import ModuleState
from lopen.documents.criteria import Criterion

_RANGE = re.compile(r"([A-Za-z][\w.-]*\d)\s*(?:to|through|–|—|\.\.)\s*([A-Za-z][\w.-]*\d)")


class CriterionCheck(msgspec.Struct, frozen=True):
    """One criterion to judge: the spec's id and text, and the planner's checks that cite it."""

    id: str
    text: str
    checks: tuple[str, ...] = ()


class Rubric(msgspec.Struct, frozen=True):
    """What one verification judges: ``criteria`` (each to be called met or not met), ``checks`` the
    planner's items that cite no criterion, ``others`` the criteria other scopes own (label lines)."""

    criteria: tuple[CriterionCheck, ...] = ()
    checks: tuple[str, ...] = ()
    others: tuple[str, ...] = ()

    @property
    def ids(self) -> list[str]:
        return [c.id for c in self.criteria]


def cited(text: str, known: list[str]) -> list[str]:
    """The known criterion ids ``text`` names (bracketed or bare, ranges "A-01 to A-04" expanded), in
    the spec's order."""
    found: set[str] = set()
    for start, end in _RANGE.findall(text):
        if start in known and end in known:
            i, j = sorted((known.index(start), known.index(end)))
            found.update(known[i : j + 1])
    for ident in known:
        if re.search(rf"(?<![\w.-]){re.escape(ident)}(?![\w-])", text):
            found.add(ident)
    return [i for i in known if i in found]


def rubric(state: ModuleState, criteria: list[Criterion], scope: str, target: str) -> Rubric:
    """The rubric of ``scope`` ``target`` from the module's folded plan and the approved spec's criteria."""
    by_id = {c.id: c for c in criteria if c.id}
    known = list(by_id)
    if scope == "module":
        return Rubric(criteria=tuple(CriterionCheck(id=c.id or "", text=c.text) for c in criteria))
    if scope == "task":
        task = state.tasks.get(target)
        items = list(task.acceptance) if task else []
        return _from_items(items, by_id, known)
    owners = _owners(state, known)
    mine = [i for i in known if target in owners.get(i, ())]
    component = state.components.get(target)
    items = [a for t in state.component_tasks(target) for a in t.acceptance]
    built = _from_items(items, by_id, known, extra=mine if component else [])
    others = tuple(
        f"[{i}] {by_id[i].text} — " + (f"component {', '.join(owners[i])}" if owners.get(i) else "not planned yet")
        for i in known
        if i not in built.ids
    )
    return msgspec.structs.replace(built, others=others)


def _owners(state: ModuleState, known: list[str]) -> dict[str, list[str]]:
    """Which components each criterion belongs to: cited by their tasks or named in their description."""
    owners: dict[str, list[str]] = {}
    for slug, component in state.components.items():
        texts = [component.description, *(a for t in state.component_tasks(slug) for a in t.acceptance)]
        for ident in cited("\n".join(texts), known):
            owners.setdefault(ident, []).append(slug)
    return owners


def _from_items(
    items: list[str], by_id: dict[str, Criterion], known: list[str], extra: list[str] | None = None
) -> Rubric:
    checks: dict[str, list[str]] = {i: [] for i in extra or []}
    loose: list[str] = []
    for item in items:
        ids = cited(item, known)
        for ident in ids:
            checks.setdefault(ident, []).append(item)
        if not ids:
            loose.append(item)
    ordered = [i for i in known if i in checks]
    return Rubric(
        criteria=tuple(CriterionCheck(id=i, text=by_id[i].text, checks=tuple(checks[i])) for i in ordered),
        checks=tuple(loose),
    )
