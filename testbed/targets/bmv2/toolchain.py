"""Find the P4 toolchain and compile ``p4/splitter.p4`` for bmv2.

The tools are looked up on ``PATH`` first, then under ``$P4_PREFIX``
(default ``/opt/p4``), the one variable that points the project at a
toolchain installed outside ``PATH``:

- ``$P4_PREFIX/bin``: ``p4c-bm2-ss`` (or the ``p4c`` driver) and ``simple_switch``;
- ``$P4_PREFIX/lib/python3*/site-packages`` (or ``dist-packages``): bmv2's
  Thrift client modules (``bm_runtime``, ``sswitch_runtime``, ...).

The compiled program goes to ``build/splitter.json`` (bmv2 JSON) and
``build/splitter.p4info.txt`` (P4Runtime info, for reference); a compile is
skipped while both exist and ``build/splitter.sources.sha256`` holds the
digest of the ``.p4`` files in the program's folder as they are now.
``FORWARD_PROGRAM`` (``p4/baseline/forward.p4``), the plain forwarding
baseline of the latency experiment, compiles the same way into
``build/forward.json``.

``python -m testbed.targets.bmv2.toolchain`` compiles the splitter's builds,
the forwarding baseline and the bench's baselines (``PROGRAMS``), or only the
programs named on its command line, and prints their paths, or exits
non-zero with a one-line reason.

The versions and build flags the project is tested with are ``PINS``, read
from ``toolchain.toml`` beside this module: the file ``make toolchain``
(``scripts/toolchain.py``) builds from.
"""
from __future__ import annotations

import argparse
import fcntl
import glob
import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import Optional

from testbed import ROOT

P4_DIR = ROOT / "p4"
PROGRAM = P4_DIR / "splitter.p4"
#: The same program built to take batches too (docs/p4.md, "Batches"): a
#: topology with a batched stream runs on it.
BATCH_PROGRAM = P4_DIR / "splitter_batches.p4"
#: The same program with the CEP stage (docs/cep.md; docs/p4.md, "The CEP stage").
CEP_PROGRAM = P4_DIR / "splitter_cep.p4"
#: The same program without changes mid-stream (docs/p4.md, "A build without changes"): a
#: topology that changes no stream runs on it.
FIXED_PROGRAM = P4_DIR / "splitter_fixed.p4"


def splitter_program(batches: bool, cep: bool = False, changes: bool = True) -> Path:
    """The splitter build a run needs: batches, the CEP stage or changes
    mid-stream only when it must.  No build has both batches and the CEP stage
    (the CEP stage takes events one frame at a time); only the build without
    either leaves out changes."""
    if batches and cep:
        raise ValueError("no splitter build takes batches and runs the CEP stage at once")
    if cep:
        return CEP_PROGRAM
    if batches:
        return BATCH_PROGRAM
    return PROGRAM if changes else FIXED_PROGRAM
FORWARD_PROGRAM = P4_DIR / "baseline" / "forward.p4"
#: The programs of ``p4/baseline/`` that only ``make bench`` runs, counted
#: beside the splitter's builds (testbed.experiments.bench.instructions):
#: forwarding that reads the event, and the least CEP stage and splitter.
BENCH_BASELINES = tuple(P4_DIR / "baseline" / f"{name}.p4" for name in ("forward_events", "cep_floor",
                                                                       "splitter_floor"))
SPLITTER_FLOOR_PROGRAM = BENCH_BASELINES[-1]
#: Every program the testbed runs, in the order ``python -m testbed.targets.bmv2.toolchain`` (``make p4``)
#: compiles them when no program is named.
PROGRAMS = (PROGRAM, FIXED_PROGRAM, BATCH_PROGRAM, CEP_PROGRAM, FORWARD_PROGRAM) + BENCH_BASELINES
BUILD_DIR = ROOT / "build"
PREFIX_VAR = "P4_PREFIX"
DEFAULT_PREFIX = "/opt/p4"
#: Compilers in order of preference: the bmv2 back end itself, then the driver.
COMPILERS = ("p4c-bm2-ss", "p4c")
SWITCH = "simple_switch"
#: bmv2's runtime CLI for simple_switch, over Thrift (``testbed switch-cli`` runs it).
SWITCH_CLI = "simple_switch_CLI"
#: A bmv2 Thrift module that must be importable to drive the switch.
THRIFT_CLIENT_MODULE = "bm_runtime"
VERSION_PATTERN = re.compile(r"\d+\.\d+\.\d+")
#: The pinned versions, commits and build flags (docs/p4.md, "Toolchain").
PINS_FILE = Path(__file__).with_name("toolchain.toml")
with open(PINS_FILE, "rb") as _pins:
    PINS: dict = tomllib.load(_pins)
#: Appended to every reason that a tool is missing: the one command that builds them.
BUILD_HINT = "`make toolchain` builds p4c and bmv2"


class P4BuildError(RuntimeError):
    """The compiler is missing or rejected the program; ``str()`` is the reason."""


def prefix() -> Path:
    return Path(os.environ.get(PREFIX_VAR) or DEFAULT_PREFIX)


def find_tool(name: str) -> Optional[str]:
    """Path of an executable named ``name``: on PATH, else in ``$P4_PREFIX/bin``."""
    found = shutil.which(name)
    if found:
        return found
    cand = prefix() / "bin" / name
    if cand.is_file() and os.access(cand, os.X_OK):
        return str(cand)
    return None


def find_compiler() -> Optional[str]:
    for name in COMPILERS:
        path = find_tool(name)
        if path:
            return path
    return None


def bmv2_python_path() -> Optional[str]:
    """Directory holding bmv2's Thrift client modules, or ``None``.

    An installed ``bm_runtime`` that Python already finds wins; otherwise
    the directories under ``$P4_PREFIX/lib`` are searched, this
    interpreter's version first.
    """
    spec = importlib.util.find_spec(THRIFT_CLIENT_MODULE)
    if spec is not None and spec.submodule_search_locations:
        return str(Path(list(spec.submodule_search_locations)[0]).parent)
    lib = prefix() / "lib"
    ours = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [lib / ours / sub for sub in ("site-packages", "dist-packages")]
    candidates += [Path(p) for p in sorted(glob.glob(str(lib / "python3*" / "*-packages")))]
    for cand in candidates:
        if (cand / THRIFT_CLIENT_MODULE / "__init__.py").is_file():
            return str(cand)
    return None


def add_bmv2_python_path() -> str:
    """Make bmv2's Thrift modules importable; return their directory."""
    path = bmv2_python_path()
    if path is None:
        raise P4BuildError(f"bmv2's Python Thrift modules ({THRIFT_CLIENT_MODULE}) not found "
                           f"(looked in sys.path and ${PREFIX_VAR}/lib/python3*/)")
    if path not in sys.path:
        sys.path.append(path)
    return path


def compiler_missing() -> Optional[str]:
    if find_compiler() is None:
        return (f"p4c not found: none of {', '.join(COMPILERS)} on PATH or in "
                f"${PREFIX_VAR}/bin ({prefix() / 'bin'}); {BUILD_HINT}")
    return None


def toolchain_missing() -> Optional[str]:
    """``None`` when p4c, simple_switch and the Thrift client all exist,
    else a one-line reason naming what is missing."""
    reason = compiler_missing()
    if reason:
        return reason
    if find_tool(SWITCH) is None:
        return f"{SWITCH} not found on PATH or in ${PREFIX_VAR}/bin ({prefix() / 'bin'}); {BUILD_HINT}"
    if importlib.util.find_spec("thrift") is None:
        return "Python module 'thrift' missing (Debian: apt-get install python3-thrift)"
    if bmv2_python_path() is None:
        return (f"bmv2's Python Thrift modules ({THRIFT_CLIENT_MODULE}) not found in sys.path "
                f"or ${PREFIX_VAR}/lib/python3*/; {BUILD_HINT}")
    return None


def outputs(out_dir: Path = BUILD_DIR, program: Path = PROGRAM) -> tuple[Path, Path]:
    """``(bmv2 JSON, p4info)`` paths for the program."""
    return out_dir / f"{program.stem}.json", out_dir / f"{program.stem}.p4info.txt"


def sources(program: Path = PROGRAM) -> list[Path]:
    """The files a program is built from: every ``.p4`` in its folder."""
    return sorted(program.parent.glob("*.p4"))


def sources_digest(program: Path = PROGRAM) -> str:
    """SHA-256 over the names and bytes of the program's sources: what its outputs were built from."""
    h = hashlib.sha256()
    for src in sources(program):
        h.update(src.name.encode() + b"\0" + src.read_bytes() + b"\0")
    return h.hexdigest()


def digest_path(out_dir: Path = BUILD_DIR, program: Path = PROGRAM) -> Path:
    return out_dir / f"{program.stem}.sources.sha256"


def up_to_date(out_dir: Path = BUILD_DIR, program: Path = PROGRAM) -> bool:
    """Both outputs exist and were compiled from the sources as they are now.

    By content, not by time: a ``build/`` copied beside sources of another
    revision has newer times than they, and was taken for up to date."""
    if not all(p.is_file() for p in outputs(out_dir, program)):
        return False
    try:
        return digest_path(out_dir, program).read_text().strip() == sources_digest(program)
    except FileNotFoundError:
        return False


def compile_command(compiler: str, json_out: Path, p4info_out: Path, program: Path = PROGRAM) -> list[str]:
    if Path(compiler).name == "p4c-bm2-ss":
        return [compiler, "--std", "p4-16", "--arch", "v1model", "-o", str(json_out),
                "--p4runtime-files", str(p4info_out), str(program)]
    # The p4c driver names the JSON after the program, in the output directory.
    return [compiler, "--target", "bmv2", "--arch", "v1model", "--std", "p4-16",
            "-o", str(json_out.parent), "--p4runtime-files", str(p4info_out), str(program)]


def compile_program(out_dir: Path = BUILD_DIR, force: bool = False, program: Path = PROGRAM) -> Path:
    """Compile ``program`` (default ``p4/splitter.p4``); return the bmv2 JSON path.

    The compiler writes into a scratch directory and the outputs are moved
    into place only on success, so a failed or concurrent compile never
    leaves a half-written JSON that looks up to date.  Compiles of one program
    into one folder take turns (a lock file beside the outputs): a second
    process asking for it, such as another pytest-xdist worker, waits for the
    first and then finds the outputs up to date instead of compiling again.
    """
    json_out, p4info_out = outputs(out_dir, program)
    if not force and up_to_date(out_dir, program):
        return json_out
    compiler = find_compiler()
    if compiler is None:
        raise P4BuildError(compiler_missing())
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / f".{program.stem}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)        # released when the file closes, or the process dies
        if not force and up_to_date(out_dir, program):
            return json_out
        with tempfile.TemporaryDirectory(dir=out_dir, prefix=".p4c-") as scratch:
            tmp_json, tmp_info = outputs(Path(scratch), program)
            cmd = compile_command(compiler, tmp_json, tmp_info, program)
            res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
            if res.returncode != 0 or not tmp_json.is_file():
                detail = (res.stderr or res.stdout).strip()
                shown = program.relative_to(ROOT) if program.is_relative_to(ROOT) else program
                raise P4BuildError(f"{Path(compiler).name} failed on {shown} "
                                   f"(exit {res.returncode}):\n{detail}")
            digest = Path(scratch) / digest_path(out_dir, program).name
            digest.write_text(sources_digest(program) + "\n")
            os.replace(tmp_info, p4info_out)
            os.replace(tmp_json, json_out)
            os.replace(digest, digest_path(out_dir, program))
    return json_out


def tool_version(tool: str) -> str:
    """The line of ``tool --version`` that holds a version number, or ``"unknown"``.

    p4c prints its own path first and ``Version 1.2.4.1 (SHA: ...)`` after
    it; simple_switch prints just ``1.15.5-<sha>``.
    """
    path = find_tool(tool)
    if path is None:
        return "missing"
    try:
        res = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    for line in (res.stdout + "\n" + res.stderr).splitlines():
        line = line.strip()
        if VERSION_PATTERN.search(line) and not line.startswith("/"):
            return line.removeprefix("Version ").strip()
    return "unknown"


def versions() -> dict[str, str]:
    compiler = find_compiler()
    return {"p4c": tool_version(Path(compiler).name) if compiler else "missing",
            "simple_switch": tool_version(SWITCH)}


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m testbed.targets.bmv2.toolchain", description=__doc__.splitlines()[0])
    ap.add_argument("--force", action="store_true", help="compile even if the outputs are up to date")
    ap.add_argument("--out-dir", type=Path, default=BUILD_DIR, help="where the outputs go (default: build/)")
    ap.add_argument("programs", nargs="*", type=Path, metavar="PROGRAM",
                    help="the .p4 files to compile (default: every program the testbed runs)")
    args = ap.parse_args(argv)
    reason = compiler_missing()
    if reason:
        print(f"p4 toolchain: {reason}", file=sys.stderr)
        return 1
    for program in [path.resolve() for path in args.programs] or PROGRAMS:
        try:
            compile_program(args.out_dir, force=args.force, program=program)
        except P4BuildError as err:
            print(f"p4 toolchain: {err}", file=sys.stderr)
            return 1
        for path in outputs(args.out_dir, program):
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
