"""The settings an engine deals under, and a change of them between shoes.

Owns :class:`EngineSettings` (the profile, deck count, odds and advantage
threshold), the summary of them a ``shoe.started`` carries after a change
(``RulesInForce``), and the one rule of a change (``Engine.reconfigure``):
the shoe in progress finishes under the settings it started with, and the
new ones apply from the next shoe. Precisely: at once when no shoe has
started yet, or when the shoe loaded has had no card yet (nothing was dealt
under the old ones); otherwise when the next shoe starts (a NEWSHOE, or a
shoe the engine starts on its own after frames were lost). The first
``shoe.started`` under settings other than those of the last shoe announced
carries them (``rules``, with the keys that ``changed``).

Sans-IO: the settings are given compiled (a ``Profile``); ``doc`` is the
caller's own form of them (the daemon's journal keeps it), carried along
for the checkpoint and never read here.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from controller.cards import ShoeComposition
from controller.event_types import RulesInForce
from controller.rules import RULE_KEYS, Profile

if TYPE_CHECKING:
    from controller.engine.facade import Engine


@dataclass(frozen=True, slots=True, eq=False)
class EngineSettings:
    """What an engine deals under. Two settings are the same when their
    ``digest`` is (the profile's every table and payout included)."""

    profile: Profile
    decks: int
    odds: bool = False
    advantage_threshold: float = 0.0
    #: the caller's form of these settings (the daemon's journal entry), for
    #: the checkpoint; None for an engine that is never checkpointed with them
    doc: Mapping[str, Any] | None = None
    digest: str = field(init=False)

    def __post_init__(self) -> None:
        if not 1 <= self.decks <= 12:
            raise ValueError(f"decks must be 1..12, not {self.decks}")
        object.__setattr__(self, "digest", _digest(self))

    def summary(self) -> dict[str, Any]:
        """The settings as ``shoe.started``'s ``rules`` shows them (without ``changed``)."""
        rules = self.profile.rules
        out: dict[str, Any] = {
            "profile": self.profile.name,
            "decks": self.decks,
            "odds": self.odds,
            "advantage_threshold": self.advantage_threshold,
        }
        out.update({k: rules[k] for k in RULE_KEYS})
        out["digest"] = self.digest
        return out


def _digest(s: EngineSettings) -> str:
    """sha256 of the settings in a canonical form: the profile compiled
    (its tableau, every bet's conditions and payouts, its rules), the deck
    count, odds and threshold."""
    p = s.profile
    # a bet's conditions all hold together: their order is no difference;
    # the bets' order is (it is the order of the odds' bets)
    bets = [
        [
            name,
            [
                [
                    sorted([key, sorted(json.dumps(v) for v in allowed)] for key, allowed in rule.when),
                    str(rule.pays),
                ]
                for rule in rules
            ],
        ]
        for name, rules in p.bets.items()
    ]
    body = {
        "profile": p.name,
        "title": p.title,
        "tableau": dataclasses.astuple(p.tableau),
        "bets": bets,
        "rules": {k: p.rules[k] for k in sorted(p.rules)},
        "decks": s.decks,
        "odds": s.odds,
        "advantage_threshold": repr(float(s.advantage_threshold)),
    }
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


#: The engine's attributes that its settings make (``configure``).
CONFIG_ATTRS = (
    "settings",
    "profile",
    "decks",
    "odds",
    "advantage_threshold",
    "_calc",
    "rules",
    "tab",
    "deadline_s",
    "button",
    "_outcomes",
)


def configure(eng: Engine, s: EngineSettings) -> None:
    """Give ``eng`` the settings ``s`` (its constructor, and a change)."""
    eng.settings = s
    eng.profile = s.profile
    eng.decks = s.decks
    eng.odds = s.odds
    eng.advantage_threshold = s.advantage_threshold
    eng._calc = None
    if s.odds:
        from controller.odds import OddsCalculator  # tables built once per profile

        eng._calc = OddsCalculator.for_profile(s.profile)
    eng.rules = s.profile.rules
    eng.tab = s.profile.tableau
    eng.deadline_s = float(eng.rules["correction_deadline_s"])
    eng.button = eng.rules["coup_boundary"] == "button"
    eng._outcomes = {}  # settled outcomes: a function of the profile


def reconfigure(eng: Engine, s: EngineSettings) -> bool:
    """``Engine.reconfigure``: True if ``s`` applies at once."""
    shoe = eng.shoe
    if shoe is None or (not shoe.announced and not shoe.ending):
        eng._next_settings = None
        switch(eng, s)
        if shoe is not None:  # loaded, nothing dealt: it is dealt under ``s``
            shoe.comp = ShoeComposition(eng.decks)
        return True
    if s.digest == eng.settings.digest:
        eng._next_settings = None
        eng.settings = s  # the same, as the caller now keeps them
    else:
        eng._next_settings = s
    return False


def at_shoe_start(eng: Engine) -> None:
    """A shoe starts (``shoe.start_shoe``): settings waiting for it apply."""
    s = eng._next_settings
    if s is not None:
        eng._next_settings = None
        switch(eng, s)


def switch(eng: Engine, s: EngineSettings) -> None:
    """The engine takes ``s`` now. Analytics still queued (the shoe that
    just ended) are computed under the settings they were queued under."""
    if s.digest == eng.settings.digest:
        if s.doc is not None:
            eng.settings = s  # the same, as the caller now keeps them
        return
    if eng._deferred:
        before = {name: getattr(eng, name) for name in CONFIG_ATTRS}
        eng._deferred = [(shoe, functools.partial(_under, eng, before, fn)) for shoe, fn in eng._deferred]
    configure(eng, s)


def _under(eng: Engine, attrs: dict[str, Any], fn: Callable[[], None]) -> None:
    now = {name: getattr(eng, name) for name in CONFIG_ATTRS}
    for name, value in attrs.items():
        setattr(eng, name, value)
    try:
        fn()
    finally:
        for name, value in now.items():
            setattr(eng, name, value)


def rules_news(eng: Engine) -> RulesInForce | None:
    """At a shoe's ``shoe.started``: its settings, with the keys that
    changed, when they differ from those of the last shoe announced; None
    otherwise. Remembers them as announced."""
    now = eng.settings.summary()
    before, eng._announced = eng._announced, now
    if before is None or before["digest"] == now["digest"]:
        return None
    changed = [k for k in now if k != "digest" and now[k] != before.get(k)]
    # the same names and rules, other tables or payouts: the profile changed
    return cast(RulesInForce, {**now, "changed": changed or ["profile"]})
