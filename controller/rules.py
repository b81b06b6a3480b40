"""Rule profiles: the tableau, the payouts and the shoe procedure as data.

A profile is a YAML file (three ship as package data under
``controller/profiles/``; a user may give a path to their own). It is
validated here with messages that name the bad key, then compiled into
plain lookup tables the engine reads: the engine holds no variant's rules
in code.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from controller.errors import ConfigError
from controller.textsafe import visible

BUILTIN_PROFILES = ("punto_banco", "ez_baccarat", "baccarat_27")

#: Keys a profile's ``rules:`` section (and a config's ``rules:`` overrides,
#: and a capture's ``# key=value`` header) may set.
RULE_KEYS = (
    "burn",
    "cut_card_min",
    "after_cut",
    "coup_boundary",
    "demo_coups",
    "correction_deadline_s",
    "extra_card",
)

_BURN_RE = re.compile(r"^(first_card|decks|fixed:([1-8]))$")
_CONDITION_KEYS = {
    "winner",
    "player_total",
    "banker_total",
    "player_cards",
    "banker_cards",
    "player_pair",
    "banker_pair",
    "natural",
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TableauModel(_Strict):
    natural: list[int] = Field(min_length=1)
    player_draws_on: list[int]
    banker_draws_when_player_stood: list[int]
    banker_draws_when_player_drew: dict[int, list[int]]

    @field_validator("natural", "player_draws_on", "banker_draws_when_player_stood")
    @classmethod
    def _totals(cls, v: list[int]) -> list[int]:
        for x in v:
            if not 0 <= x <= 9:
                raise ValueError(f"{x} is not a hand total (0..9)")
        return v

    @field_validator("banker_draws_when_player_drew")
    @classmethod
    def _matrix(cls, v: dict[int, list[int]]) -> dict[int, list[int]]:
        for total, values in v.items():
            if not 0 <= total <= 9:
                raise ValueError(f"{total} is not a Banker total (0..9)")
            for x in values:
                if not 0 <= x <= 9:
                    raise ValueError(f"Banker {total}: {x} is not a card value (0..9)")
        return v


class BetRuleModel(_Strict):
    when: dict[str, Any] = Field(default_factory=dict)
    pays: float | int | str

    @field_validator("when")
    @classmethod
    def _conditions(cls, v: dict[str, Any]) -> dict[str, Any]:
        for key, want in v.items():
            if key not in _CONDITION_KEYS:
                raise ValueError(f"unknown condition {key!r} (one of {', '.join(sorted(_CONDITION_KEYS))})")
            if key == "winner" and want not in ("player", "banker", "tie"):
                raise ValueError(f"winner must be player, banker or tie, not {want!r}")
            if key in ("player_pair", "banker_pair", "natural") and not isinstance(want, bool):
                raise ValueError(f"{key} must be true or false")
            if key in ("player_total", "banker_total", "player_cards", "banker_cards"):
                vals = want if isinstance(want, list) else [want]
                if not all(isinstance(x, int) and not isinstance(x, bool) for x in vals):
                    raise ValueError(f"{key} must be an integer or a list of integers")
        return v

    @field_validator("pays")
    @classmethod
    def _pays(cls, v: float | int | str) -> float | int | str:
        try:
            f = Fraction(str(v))
        except (ValueError, ZeroDivisionError) as exc:
            raise ValueError(f"pays must be a number, not {v!r}") from exc
        if f < -1:
            raise ValueError("pays below -1 (a bet cannot lose more than its stake)")
        return v


class RulesModel(_Strict):
    burn: str = "first_card"
    cut_card_min: int = Field(default=12, ge=1, le=100)
    after_cut: Literal["one_more", "last"] = "one_more"
    coup_boundary: Literal["button", "auto"] = "button"
    demo_coups: int = Field(default=0, ge=0, le=3)
    correction_deadline_s: float = Field(default=120.0, gt=0, le=86400)
    extra_card: Literal["burn", "next_coup", "void"] = "burn"

    @field_validator("burn")
    @classmethod
    def _burn(cls, v: str) -> str:
        if not _BURN_RE.match(v):
            raise ValueError("burn must be first_card, decks or fixed:N with N in 1..8")
        return v


class ProfileModel(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    title: str = ""
    tableau: TableauModel
    bets: dict[str, list[BetRuleModel]] = Field(min_length=1)
    rules: RulesModel = Field(default_factory=RulesModel)

    @model_validator(mode="after")
    def _bets_total(self) -> ProfileModel:
        for name, rules in self.bets.items():
            if not re.match(r"^[a-z0-9_]{1,32}$", name):
                raise ValueError(f"bets.{name}: bet names are lower-case letters, digits and _")
            if not rules or rules[-1].when:
                raise ValueError(f"bets.{name}: the last rule must have no 'when' (what happens otherwise)")
        return self


# --- compiled form -----------------------------------------------------------

Outcome = Mapping[str, Any]
"""The facts of a coup a bet can depend on: winner, player_total,
banker_total, player_cards, banker_cards, player_pair, banker_pair, natural."""


@dataclass(frozen=True, slots=True)
class BetRule:
    when: tuple[tuple[str, frozenset[Any]], ...]
    pays: Fraction

    def matches(self, outcome: Outcome) -> bool:
        return all(outcome[key] in allowed for key, allowed in self.when)


@dataclass(frozen=True, slots=True)
class Tableau:
    """Third-card rules as lookup tables indexed by totals and values."""

    natural: tuple[bool, ...]  # [total] -> is a natural
    player_draws: tuple[bool, ...]  # [player total]
    banker_draws_stood: tuple[bool, ...]  # [banker total] when Player stood
    banker_draws: tuple[tuple[bool, ...], ...]  # [banker total][player third value]


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    title: str
    tableau: Tableau
    bets: dict[str, tuple[BetRule, ...]]
    rules: dict[str, Any]
    source: str

    @property
    def bet_names(self) -> tuple[str, ...]:
        return tuple(self.bets)

    def burn_count(self, first_card_burn_value: int, decks: int) -> int:
        """How many cards are burned face down after the exposed first card."""
        burn = str(self.rules["burn"])
        if burn == "first_card":
            return first_card_burn_value
        if burn == "decks":
            return decks
        return int(burn.split(":", 1)[1])

    def settle(self, outcome: Outcome) -> dict[str, Fraction]:
        """Net result per unit staked on every bet of the profile."""
        out: dict[str, Fraction] = {}
        for name, rules in self.bets.items():
            for rule in rules:
                if rule.matches(outcome):
                    out[name] = rule.pays
                    break
        return out


def _compile(model: ProfileModel, source: str) -> Profile:
    t = model.tableau
    drew = t.banker_draws_when_player_drew
    tableau = Tableau(
        natural=tuple(x in t.natural for x in range(10)),
        player_draws=tuple(x in t.player_draws_on for x in range(10)),
        banker_draws_stood=tuple(x in t.banker_draws_when_player_stood for x in range(10)),
        banker_draws=tuple(tuple(v in drew.get(b, []) for v in range(10)) for b in range(10)),
    )
    bets: dict[str, tuple[BetRule, ...]] = {}
    for name, rules in model.bets.items():
        compiled = []
        for r in rules:
            when = tuple(
                (key, frozenset(want if isinstance(want, list) else [want])) for key, want in r.when.items()
            )
            compiled.append(BetRule(when=when, pays=Fraction(str(r.pays))))
        bets[name] = tuple(compiled)
    return Profile(
        name=model.name,
        title=model.title or model.name,
        tableau=tableau,
        bets=bets,
        rules=model.rules.model_dump(),
        source=source,
    )


def format_validation_error(exc: ValidationError, prefix: str = "") -> str:
    """One line per problem, each naming the key path."""
    lines = []
    for err in exc.errors():
        path = ".".join(visible(p) for p in err["loc"])
        if prefix:
            path = f"{prefix}.{path}" if path else prefix
        msg = visible(err["msg"])
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        lines.append(f"{path or '(top level)'}: {msg}")
    return "; ".join(lines)


def _read_yaml(text: str, source: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ConfigError(f"{source}: not valid YAML{where}: {visible(exc.problem or exc.context)}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {visible(exc)}") from None
    except RecursionError:
        raise ConfigError(f"{source}: not valid YAML: nested too deeply") from None
    except (ValueError, TypeError, IndexError, KeyError, AttributeError, OverflowError) as exc:
        raise ConfigError(f"{source}: not valid YAML: a value cannot be read: {visible(exc)}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: a profile is a YAML mapping")
    from controller.config import yaml_value_problem  # here: the engine loads profiles, not the config

    unstorable = yaml_value_problem(data)
    if unstorable is not None:
        raise ConfigError(f"{source}: {unstorable}")
    return data


def coerce_rule_overrides(values: Mapping[str, Any], source: str) -> dict[str, Any]:
    """Validate ``rules`` overrides (from a config, a capture header or the
    command line); unknown keys are errors that name the key."""
    unknown = [k for k in values if k not in RULE_KEYS]
    if unknown:
        raise ConfigError(f"{source}: unknown rule setting {unknown[0]!r} (one of {', '.join(RULE_KEYS)})")
    try:
        RulesModel.model_validate(dict(values))
    except ValidationError as exc:
        raise ConfigError(f"{source}: {format_validation_error(exc, 'rules')}") from exc
    return dict(values)


#: Largest profile file read (a real one is a few KiB).
MAX_PROFILE_BYTES = 1 << 20


def load_profile(name_or_path: str, overrides: Mapping[str, Any] | None = None) -> Profile:
    """A built-in profile by name, or a profile YAML by path, with optional
    ``rules`` overrides. Raises ConfigError naming the bad key."""
    model, source = _load_model(name_or_path, overrides)
    return _compile(model, source)


def profile_document(name_or_path: str, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The profile ``load_profile`` gives, as JSON data: ``{"source",
    "profile"}`` (every table, payout and rule, overrides applied), from
    which ``profile_from_document`` compiles the same profile whatever
    becomes of the file since (the daemon's journal keeps it)."""
    model, source = _load_model(name_or_path, overrides)
    return {"source": source, "profile": model.model_dump(mode="json")}


def profile_from_document(doc: Mapping[str, Any]) -> Profile:
    """The profile of a ``profile_document``; ConfigError if it is not one."""
    source = doc.get("source")
    data = doc.get("profile")
    if not isinstance(source, str) or not isinstance(data, dict):
        raise ConfigError("not a profile document (source and profile)")
    try:
        model = ProfileModel.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{source}: {format_validation_error(exc)}") from exc
    return _compile(model, source)


def _load_model(name_or_path: str, overrides: Mapping[str, Any] | None) -> tuple[ProfileModel, str]:
    if name_or_path in BUILTIN_PROFILES:
        source = f"profile {name_or_path}"
        text = resources.files("controller").joinpath("profiles", f"{name_or_path}.yaml").read_text("utf-8")
    else:
        path = Path(name_or_path)
        if not path.is_file():
            raise ConfigError(
                f"profile {name_or_path!r}: neither a built-in profile ({', '.join(BUILTIN_PROFILES)}) "
                "nor a readable file"
            )
        source = visible(str(path))
        try:
            with open(path, "rb") as f:
                raw = f.read(MAX_PROFILE_BYTES + 1)
            if len(raw) > MAX_PROFILE_BYTES:
                raise ConfigError(f"{source}: larger than {MAX_PROFILE_BYTES} bytes: not a profile")
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{source}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        except OSError as exc:
            raise ConfigError(f"{source}: cannot read: {exc.strerror or exc}") from None
    data = _read_yaml(text, source)
    if overrides:
        rules = dict(data.get("rules") or {})
        rules.update(coerce_rule_overrides(overrides, source))
        data["rules"] = rules
    try:
        model = ProfileModel.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{source}: {format_validation_error(exc)}") from exc
    return model, source


def outcome_of(
    player: list[int], banker: list[int], player_pair: bool, banker_pair: bool, natural: bool
) -> dict[str, Any]:
    """The facts a bet may depend on, from the two hands' card values."""
    p = sum(player) % 10
    b = sum(banker) % 10
    winner = "player" if p > b else "banker" if b > p else "tie"
    return {
        "winner": winner,
        "player_total": p,
        "banker_total": b,
        "player_cards": len(player),
        "banker_cards": len(banker),
        "player_pair": player_pair,
        "banker_pair": banker_pair,
        "natural": natural,
    }


def tags_of(outcome: Outcome) -> list[str]:
    """Facts of the coup whatever the profile (docs/events.md), sorted."""
    tags = []
    if outcome["winner"] == "banker":
        if outcome["banker_total"] == 2:
            tags.append("banker2")
        if outcome["banker_total"] == 7:
            tags.append("banker7")
            if outcome["banker_cards"] == 3:
                tags.append("dragon7")
    if outcome["winner"] == "player" and outcome["player_total"] == 8 and outcome["player_cards"] == 3:
        tags.append("panda8")
    return sorted(tags)
