"""What every harness shares: choosing between atheris and the plain
random-mutation mode, and that mode itself.

A harness module does::

    from fuzz import _harness

    with _harness.instrumented():
        from controller import ...   # the code under test, instrumented

    def test_one_input(data: bytes) -> None: ...

    if __name__ == "__main__":
        _harness.main(test_one_input, seeds=corpus.decoder_seeds, tokens=TOKENS)

Command line (a subset of libFuzzer's, understood by both modes)::

    python -m fuzz.fuzz_engine [-max_total_time=S] [-runs=N] [-seed=N]
        [-timeout=S] [-artifact_prefix=DIR/] [CORPUS_DIR ...] [FILE ...]

Given files (not directories), each is run once, as a reproducer. Without
atheris, a crash or a hang is written to ``<artifact_prefix>crash-<sha1>``
(``timeout-<sha1>``), its path printed, and the exit status is 1, as
libFuzzer does.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

try:  # optional: only `make fuzz` installs it
    import atheris
except ImportError:  # pragma: no cover - depends on the environment
    atheris = None

#: Packages whose code the coverage-guided mode instruments.
INSTRUMENT = ("controller", "firmware_protocols", "drivers")

MAX_LEN = 4096


def using_atheris() -> bool:
    return atheris is not None and os.environ.get("FUZZ_MODE", "") != "random"


def _running_a_harness() -> bool:
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return spec is not None and spec.name.startswith("fuzz.fuzz_")


def instrumented() -> contextlib.AbstractContextManager[Any]:
    """Around the imports of the code under test: instruments them for
    coverage when a harness runs under atheris (``python -m fuzz.<harness>``);
    does nothing otherwise, e.g. when a test imports a harness."""
    if using_atheris() and _running_a_harness():
        manager: contextlib.AbstractContextManager[Any] = atheris.instrument_imports(include=list(INSTRUMENT))
        return manager
    return contextlib.nullcontext()


def ignoring_known(test_one_input: Callable[[bytes], None]) -> Callable[[bytes], None]:
    """``FUZZ_IGNORE=code,ExceptionName,...``: treat these failures (an
    invariant's code, or an exception's class name) as passes, to look for
    other bugs past a known one. Unset (the default), nothing is ignored."""
    ignored = {x.strip() for x in os.environ.get("FUZZ_IGNORE", "").split(",") if x.strip()}
    if not ignored:
        return test_one_input

    def guarded(data: bytes) -> None:
        try:
            test_one_input(data)
        except Exception as exc:
            if getattr(exc, "code", None) in ignored or type(exc).__name__ in ignored:
                return
            raise

    return guarded


def main(
    test_one_input: Callable[[bytes], None],
    seeds: Callable[[], list[bytes]],
    tokens: Sequence[bytes] = (),
    argv: list[str] | None = None,
) -> None:
    args = list(sys.argv if argv is None else argv)
    test_one_input = ignoring_known(test_one_input)
    if using_atheris():
        atheris.Setup(args, test_one_input)
        atheris.Fuzz()
        return
    sys.exit(_random_mode(test_one_input, seeds, tokens, args[1:]))


# --- the plain random-mutation mode -----------------------------------------


class _Hang(Exception):
    pass


def _options(args: list[str]) -> tuple[dict[str, str], list[str]]:
    opts: dict[str, str] = {}
    paths: list[str] = []
    for arg in args:
        if arg.startswith("-") and "=" in arg:
            key, _, value = arg.lstrip("-").partition("=")
            opts[key] = value
        elif not arg.startswith("-"):
            paths.append(arg)
    return opts, paths


def _write_artifact(prefix: str, kind: str, data: bytes) -> str:
    path = f"{prefix}{kind}-{hashlib.sha1(data).hexdigest()}"
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_bytes(data)
    return path


@contextlib.contextmanager
def _time_limit(seconds: int) -> Iterator[None]:
    def on_alarm(signum: int, frame: FrameType | None) -> None:
        raise _Hang(f"one input ran longer than {seconds} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _run_one(test_one_input: Callable[[bytes], None], data: bytes, timeout: int, prefix: str | None) -> bool:
    """Runs one input; False if it failed, with the input written under
    ``prefix`` (not when None: a reproducer is already a file)."""
    try:
        with _time_limit(timeout):
            test_one_input(data)
    except _Hang:
        print(f"==== TIMEOUT: one input ran longer than {timeout} s", file=sys.stderr)
        if prefix is not None:
            path = _write_artifact(prefix, "timeout", data)
            print(f"artifact_prefix='{prefix}'; Test unit written to {path}", file=sys.stderr)
        return False
    except BaseException as exc:  # a harness failure of any kind is the finding
        if isinstance(exc, KeyboardInterrupt):
            raise
        print("=== Uncaught Python exception: ===", file=sys.stderr)
        traceback.print_exc()
        if prefix is not None:
            path = _write_artifact(prefix, "crash", data)
            print(f"artifact_prefix='{prefix}'; Test unit written to {path}", file=sys.stderr)
        return False
    return True


class Mutator:
    """libFuzzer-style byte mutations, seeded: flips, random bytes, inserts,
    deletions, copies within the input, splices with another seed and the
    harness's dictionary tokens, stacked one to six deep."""

    def __init__(self, rng: random.Random, corpus: list[bytes], tokens: Sequence[bytes]) -> None:
        self.rng = rng
        self.corpus = corpus or [b""]
        self.tokens = list(tokens) or [b"\x00", b"\xff"]

    def mutate(self, data: bytes) -> bytes:
        rng = self.rng
        buf = bytearray(data)
        for _ in range(rng.randint(1, 6)):
            op = rng.randrange(9)
            n = len(buf)
            if op == 0 and n:  # flip a bit
                i = rng.randrange(n)
                buf[i] ^= 1 << rng.randrange(8)
            elif op == 1 and n:  # random byte
                buf[rng.randrange(n)] = rng.randrange(256)
            elif op == 2 and n:  # small arithmetic
                i = rng.randrange(n)
                buf[i] = (buf[i] + rng.randint(-35, 35)) & 0xFF
            elif op == 3:  # insert random bytes
                i = rng.randint(0, n)
                buf[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
            elif op == 4 and n:  # delete a range
                i = rng.randrange(n)
                del buf[i : i + rng.randint(1, 16)]
            elif op == 5 and n:  # duplicate a range in place
                i = rng.randrange(n)
                j = min(n, i + rng.randint(1, 32))
                k = rng.randint(0, n)
                buf[k:k] = buf[i:j]
            elif op == 6:  # splice with another input
                other = rng.choice(self.corpus)
                if other:
                    i = rng.randrange(len(other))
                    piece = other[i : i + rng.randint(1, 64)]
                    k = rng.randint(0, n)
                    buf[k : k + rng.randint(0, len(piece))] = piece
            elif op == 7:  # a dictionary token
                k = rng.randint(0, n)
                buf[k:k] = rng.choice(self.tokens)
            elif op == 8 and n:  # truncate
                del buf[rng.randint(0, n - 1) :]
        return bytes(buf[:MAX_LEN])


def _load(paths: list[str]) -> tuple[list[bytes], list[Path]]:
    corpus: list[bytes] = []
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            corpus += [f.read_bytes() for f in sorted(p.iterdir()) if f.is_file()]
        elif p.is_file():
            files.append(p)
    return corpus, files


def _random_mode(
    test_one_input: Callable[[bytes], None],
    seeds: Callable[[], list[bytes]],
    tokens: Sequence[bytes],
    args: list[str],
) -> int:
    opts, paths = _options(args)
    prefix = opts.get("artifact_prefix", "./")
    timeout = int(opts.get("timeout", "10"))
    corpus, files = _load(paths)
    if files:  # reproducers: run each once
        ok = all([_run_one(test_one_input, f.read_bytes(), timeout, None) for f in files])
        print(f"Executed {len(files)} inputs", file=sys.stderr)
        return 0 if ok else 1
    seed = int(opts.get("seed", "0")) or int.from_bytes(os.urandom(4), "little")
    rng = random.Random(seed)
    corpus = corpus or seeds()
    max_time = float(opts.get("max_total_time", "0")) or float("inf")
    runs = int(opts.get("runs", "-1"))
    mutator = Mutator(rng, corpus, tokens)
    print(f"INFO: random-mutation mode (no atheris), seed {seed}, {len(corpus)} seed inputs", file=sys.stderr)
    start = time.monotonic()
    executed = 0
    for data in corpus:  # every seed once, unmutated
        if not _run_one(test_one_input, data, timeout, prefix):
            return 1
        executed += 1
    while executed != runs and time.monotonic() - start < max_time:
        data = (
            mutator.mutate(rng.choice(corpus)) if rng.random() < 0.9 else rng.randbytes(rng.randint(0, 256))
        )
        if not _run_one(test_one_input, data, timeout, prefix):
            return 1
        executed += 1
    elapsed = max(time.monotonic() - start, 1e-9)
    print(f"Done {executed} runs in {int(elapsed)} second(s)", file=sys.stderr)
    print(f"stat::number_of_executed_units: {executed}", file=sys.stderr)
    print(f"stat::average_exec_per_sec:     {int(executed / elapsed)}", file=sys.stderr)
    return 0
