"""The layering of docs/architecture.md, enforced: a line of code knows its room.

The codecs (``firmware_protocols``) are the bottom layer and import nothing
of the project above them; the drivers (transports) import no controller
code. The checks read the source (an AST walk over
every module, imports inside functions included), so a lazy import cannot
slip past, and nothing is imported to check it.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIRST_PARTY = ("controller", "drivers", "firmware_protocols")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(source: str, module: str, is_package: bool = False) -> list[tuple[str, int]]:
    """Every module ``source`` imports (absolute names, relative imports
    resolved against ``module``), with its line number."""
    out: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                if not is_package:
                    base = base[:-1]
                base = base[: len(base) - (node.level - 1)]
                name = ".".join([*base, *([node.module] if node.module else [])])
            else:
                name = node.module or ""
            out.append((name, node.lineno))
            # ``from pkg import mod`` may import a submodule
            out.extend((f"{name}.{alias.name}", node.lineno) for alias in node.names)
    return out


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def _violations(package: str, forbidden: tuple[str, ...]) -> list[str]:
    bad = []
    for path in _modules(package):
        module = _module_name(path)
        for name, line in imports_of(path.read_text(), module, path.name == "__init__.py"):
            if any(name == f or name.startswith(f + ".") for f in forbidden):
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    return bad


def test_the_checker_sees_every_kind_of_import() -> None:
    src = (
        "import controller.cards\n"
        "from controller import engine\n"
        "def f():\n"
        "    from ..controller import x\n"
        "from . import sibling\n"
    )
    found = {name for name, _ in imports_of(src, "firmware_protocols.codec")}
    assert "controller.cards" in found
    assert "controller.engine" in found
    assert "controller.x" in found  # lazy and relative, resolved
    assert "firmware_protocols.sibling" in found


def test_the_packages_are_where_the_checks_look() -> None:
    for package in FIRST_PARTY:
        assert len(_modules(package)) >= 3, package


def test_codecs_import_no_controller_or_driver_code() -> None:
    assert _violations("firmware_protocols", ("controller", "drivers")) == []


def test_drivers_import_no_controller_code() -> None:
    """A driver is a transport: it may speak a codec (the fake shoe does),
    never the game, the journal or a file format of the controller."""
    assert _violations("drivers", ("controller",)) == []


@pytest.mark.parametrize("module", ["shoe_ascii", "shoe_bin", "angel_eye"])
def test_codecs_take_cards_from_the_bottom_layer(module: str) -> None:
    path = ROOT / "firmware_protocols" / f"{module}.py"
    names = {name for name, _ in imports_of(path.read_text(), f"firmware_protocols.{module}")}
    assert "firmware_protocols.cards" in names


CODECS = ("shoe_ascii", "shoe_bin", "angel_eye")


@pytest.mark.parametrize("module", CODECS)
def test_a_codec_imports_no_other_codec(module: str) -> None:
    """What codecs share (sequence, checksum) lives in ``framing``; only the
    registry (``detect``) knows every codec."""
    path = ROOT / "firmware_protocols" / f"{module}.py"
    names = {name for name, _ in imports_of(path.read_text(), f"firmware_protocols.{module}")}
    others = {f"firmware_protocols.{m}" for m in CODECS if m != module}
    assert names & others == set()
    assert "firmware_protocols.framing" in names


# What a config must not load to be checked: the fake shoe's pseudo-terminal
# and threads, pyserial, pyusb. (``threading`` itself is loaded by pydantic,
# so the run-time check below leaves it to the static one.)
DRIVER_INTERNALS = ("termios", "tty", "pty", "fcntl", "threading", "serial", "usb")
DRIVER_MODULES = ("drivers.fake", "drivers.serial", "drivers.usb")


def _path_of(module: str) -> Path | None:
    base = ROOT.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def first_party_closure(module: str) -> dict[str, list[tuple[str, int]]]:
    """Every first-party module ``module`` loads (its packages included),
    each with the imports written in it."""
    seen: dict[str, list[tuple[str, int]]] = {}
    todo = [module]
    while todo:
        name = todo.pop()
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            mod = ".".join(parts[:i])
            path = _path_of(mod)
            if mod in seen or path is None:
                continue
            seen[mod] = imports_of(path.read_text(), mod, path.name == "__init__.py")
            todo.extend(n for n, _ in seen[mod] if n.split(".")[0] in FIRST_PARTY)
    return seen


def test_the_closure_follows_imports() -> None:
    closure = first_party_closure("controller.daemon")
    assert {"controller", "controller.engine", "drivers.base", "firmware_protocols.detect"} <= set(closure)


def test_config_loads_no_driver_internals() -> None:
    closure = first_party_closure("controller.config")
    assert set(closure) & set(DRIVER_MODULES) == set()
    bad = [
        f"{mod}:{line} imports {name}"
        for mod, names in closure.items()
        for name, line in names
        if name.split(".")[0] in DRIVER_INTERNALS
    ]
    assert bad == []


def test_config_loads_no_driver_internals_at_run_time() -> None:
    probe = (
        "import sys, controller.config\n"
        f"print(sorted(m for m in {DRIVER_INTERNALS + DRIVER_MODULES!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    loaded = set(ast.literal_eval(out.stdout))
    assert loaded - {"threading"} == set()


def _builds_a_paho_client(source: str) -> list[int]:
    """Lines of ``source`` that construct a paho client (``mqtt.Client(...)``,
    or ``Client(...)`` imported from paho)."""
    tree = ast.parse(source)
    from_paho = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("paho")
        for alias in node.names
        if alias.name == "Client"
    }
    # a class of the module's own that subclasses paho's Client builds one too
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and any(
            (isinstance(b, ast.Attribute) and b.attr == "Client")
            or (isinstance(b, ast.Name) and b.id in from_paho)
            for b in node.bases
        ):
            from_paho.add(node.name)
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        attribute = isinstance(f, ast.Attribute) and f.attr == "Client"
        if attribute or (isinstance(f, ast.Name) and f.id in from_paho):
            lines.append(node.lineno)
    return lines


def test_the_paho_client_check_can_fail() -> None:
    assert _builds_a_paho_client("import paho.mqtt.client as mqtt\nc = mqtt.Client(client_id='x')\n") == [2]
    assert _builds_a_paho_client("from paho.mqtt.client import Client as C\n\nc = C()\n") == [3]
    subclass = "import paho.mqtt.client as mqtt\nclass Mine(mqtt.Client):\n    pass\nc = Mine()\n"
    assert _builds_a_paho_client(subclass) == [4]


def test_one_mqtt_client_factory_builds_every_client() -> None:
    """The output, ``replay --out mqtt`` (through the output) and ``ctl``
    take their client from ``controller.mqtt_client``: one place for the
    protocol version, credentials, TLS and session rules."""
    builders = {
        str(path.relative_to(ROOT))
        for package in FIRST_PARTY
        for path in _modules(package)
        if _builds_a_paho_client(path.read_text())
    }
    assert builders == {"controller/mqtt_client.py"}
    for user in ("controller/outputs/mqtt.py", "controller/commands/ctl.py"):
        names = {name for name, _ in imports_of((ROOT / user).read_text(), _module_name(ROOT / user))}
        assert "controller.mqtt_client" in names, user


def test_the_engine_speaks_no_codec_wording() -> None:
    """A device error the game must act on (Angel Eye's unread card) is
    recognised by the frame (``Status.card_unread``), so the engine matches
    no codec's wording."""
    from firmware_protocols.angel_eye import ERROR_REASONS

    paths = sorted((ROOT / "controller" / "engine").glob("*.py"))
    assert len(paths) >= 3  # the package is where this looks
    trees = [ast.parse(path.read_text()) for path in paths]
    strings = [
        n.value
        for tree in trees
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str)
    ]
    assert [s for s in strings for words in ERROR_REASONS.values() if words in s] == []


@pytest.mark.parametrize(
    ("code", "text", "unread"),
    [
        ("ERROR", "unreadable card", True),
        ("ERROR", "unreadable card (in error mode)", True),
        ("ERROR", "draw timeout", False),
        ("OK", "error cleared: unreadable card", False),  # the card was counted when reported
        ("JAM", "", False),
    ],
)
def test_a_status_says_whether_it_reports_a_card_dealt_unread(code: str, text: str, unread: bool) -> None:
    from firmware_protocols.frames import Status

    assert Status(0.0, 1, code, text).card_unread is unread
