"""Rule profiles: the shipped ones hold docs/dealing-errors.md, a custom one loads, and a
bad one is refused with a message naming the bad key."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest
import yaml

from controller.errors import ConfigError
from controller.rules import BUILTIN_PROFILES, load_profile, outcome_of


def test_builtin_profiles_load_with_their_bets() -> None:
    bets = {name: load_profile(name).bet_names for name in BUILTIN_PROFILES}
    assert bets == {
        "punto_banco": ("player", "banker", "tie", "player_pair", "banker_pair"),
        "ez_baccarat": ("player", "banker", "tie", "dragon7", "panda8"),
        "baccarat_27": ("player", "banker", "tie", "player_pair", "banker_pair", "b27"),
    }


def _settle(profile: str, player: list[int], banker: list[int], pp: bool = False, bp: bool = False) -> dict:  # type: ignore[type-arg]
    return load_profile(profile).settle(outcome_of(player, banker, pp, bp, natural=False))


def test_punto_banco_banker_pays_0_95_and_pushes_on_tie() -> None:
    assert _settle("punto_banco", [1, 2], [3, 4])["banker"] == Fraction(19, 20)
    assert _settle("punto_banco", [3, 4], [3, 4]) == {
        "player": 0,
        "banker": 0,
        "tie": 8,
        "player_pair": -1,
        "banker_pair": -1,
    }


def test_ez_banker_pushes_on_a_three_card_7_and_dragon_pays_40() -> None:
    s = _settle("ez_baccarat", [1, 5], [3, 3, 1])
    assert s["banker"] == 0 and s["dragon7"] == 40 and s["player"] == -1
    s = _settle("ez_baccarat", [1, 5], [3, 4])
    assert s["banker"] == 1 and s["dragon7"] == -1


def test_ez_panda_pays_25_on_a_player_three_card_8() -> None:
    assert _settle("ez_baccarat", [2, 3, 3], [6, 0])["panda8"] == 25
    assert _settle("ez_baccarat", [4, 4], [6, 0])["panda8"] == -1


def test_baccarat_27_banker_pays_2_to_1_on_2_and_1_to_2_on_7() -> None:
    assert _settle("baccarat_27", [0, 1], [1, 1])["banker"] == 2
    assert _settle("baccarat_27", [0, 6], [3, 4])["banker"] == Fraction(1, 2)
    assert _settle("baccarat_27", [0, 6], [4, 4])["banker"] == 1
    assert _settle("baccarat_27", [0, 6], [3, 4])["b27"] == 8
    assert _settle("baccarat_27", [0, 6], [4, 4])["b27"] == -1


def test_pairs_pay_11() -> None:
    assert _settle("punto_banco", [1, 1], [2, 3], pp=True)["player_pair"] == 11
    assert _settle("baccarat_27", [1, 2], [2, 2], bp=True)["banker_pair"] == 11


def _custom(tmp_path: Path, mutate: object = None) -> Path:
    from importlib import resources

    data = yaml.safe_load(resources.files("controller").joinpath("profiles", "punto_banco.yaml").read_text())
    data["name"] = "house_special"
    if callable(mutate):
        mutate(data)
    path = tmp_path / "house.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_custom_profile_file_loads(tmp_path: Path) -> None:
    def change(d: dict) -> None:  # type: ignore[type-arg]
        d["bets"]["tie"][0]["pays"] = 9
        d["rules"]["cut_card_min"] = 16

    p = load_profile(str(_custom(tmp_path, change)))
    assert p.name == "house_special" and p.rules["cut_card_min"] == 16
    assert p.settle(outcome_of([3, 4], [3, 4], False, False, False))["tie"] == 9


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(tablaeu={}), "tablaeu: unknown key"),
        (lambda d: d["tableau"].update(player_draws_on=[0, 11]), "tableau.player_draws_on"),
        (lambda d: d["rules"].update(burn="fixed:9"), "rules.burn"),
        (lambda d: d["rules"].update(after_cut="two_more"), "rules.after_cut"),
        (lambda d: d["rules"].update(demo_coups=4), "rules.demo_coups"),
        (
            lambda d: d["bets"]["tie"].insert(0, {"when": {"winer": "tie"}, "pays": 8}),
            "unknown condition 'winer'",
        ),
        (lambda d: d["bets"]["tie"].pop(), "the last rule must have no 'when'"),
        (lambda d: d["bets"]["tie"][0].update(pays="lots"), "pays must be a number"),
        (lambda d: d["bets"]["tie"][0].update(pays=-2), "below -1"),
    ],
)
def test_a_bad_custom_profile_names_the_bad_key(tmp_path: Path, mutate: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")) as exc:
        load_profile(str(_custom(tmp_path, mutate)))
    assert "house.yaml" in str(exc.value)


def test_unknown_profile_and_bad_yaml_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="neither a built-in profile"):
        load_profile("chemin_de_fer")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_profile(str(bad))


def test_rule_overrides_are_validated() -> None:
    assert load_profile("punto_banco", {"after_cut": "last"}).rules["after_cut"] == "last"
    with pytest.raises(ConfigError, match="unknown rule setting 'aftercut'"):
        load_profile("punto_banco", {"aftercut": "last"})
    with pytest.raises(ConfigError, match=r"rules\.extra_card"):
        load_profile("punto_banco", {"extra_card": "ignore"})
