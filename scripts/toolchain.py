#!/usr/bin/python3
"""Build p4c and bmv2 at the project's pins into a prefix (``make toolchain``).

The versions, flags and Debian packages come from
``testbed/targets/bmv2/toolchain.toml``, the file the project reads too.
Sources come from upstream git, or with ``--sources DIR`` (``P4_SOURCES``)
from local clones: ``DIR/p4c``, ``DIR/behavioral-model`` and
``DIR/p4runtime`` (each a clone or a bare repository; ``NAME.git`` works
too), so that the build runs offline.

Each tool already in the prefix at its pinned commit, built with the pinned
flags (as ``BUILD-INFO.txt`` there records), is skipped.  Progress is one
plain line per step; each step's output goes to a log under the work
directory, and a failing step prints the end of its log.

It runs with Debian's Python (stdlib only), before the project's virtual
environment exists.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parent.parent
PINS_FILE = ROOT / "testbed" / "targets" / "bmv2" / "toolchain.toml"
INFO_NAME = "BUILD-INFO.txt"
DEFAULT_PREFIX = "/opt/p4"
DEFAULT_WORK = ROOT / "build" / "toolchain"
#: Local clone names under P4_SOURCES, per component.
SOURCE_NAMES = {"p4c": "p4c", "bmv2": "behavioral-model", "p4runtime": "p4runtime"}
#: p4c puts ``git rev-parse --short HEAD`` into its version; a shallow clone
#: would abbreviate to 7 digits, a full one to 10.  Fixing it at 10 makes the
#: version read the same whichever way the sources came.
P4C_ABBREV = "10"


class BuildError(RuntimeError):
    """A step failed; ``str()`` says which and why."""


def load_pins(path: Path = PINS_FILE) -> dict:
    with open(path, "rb") as f:
        return tomllib.load(f)


# ---------------------------------------------------------------- build record

def component_record(pins: dict, name: str) -> dict:
    """What BUILD-INFO.txt records of a component: everything that decides
    its binary.  A tool is rebuilt whenever this differs from the record."""
    if name == "p4c":
        p = pins["p4c"]
        return {"version": p["version"], "commit": p["commit"],
                "p4runtime_commit": pins["p4runtime"]["commit"],
                "targets": list(p["targets"]), "cmake": list(p["cmake"])}
    p = pins["bmv2"]
    return {"version": p["version"], "commit": p["commit"], "configure": list(p["configure"]),
            "cxxflags": p["cxxflags"], "python": p["python"]}


def _toml_value(value) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    # A TOML basic string: JSON's escapes are among those TOML accepts.
    return json.dumps(str(value))


def render_info(records: dict[str, dict], built: dict[str, str]) -> str:
    """BUILD-INFO.txt: TOML, so that a person reads it and this script parses it."""
    lines = ["# Written by `make toolchain` (scripts/toolchain.py) of the in-network stream",
             "# splitting testbed.  A tool whose section matches the pins is not rebuilt.", ""]
    for name, record in records.items():
        lines.append(f"[{name}]")
        for key, value in record.items():
            lines.append(f"{key} = {_toml_value(value)}")
        if name in built:
            lines.append(f"built = {_toml_value(built[name])}")
        lines.append("")
    return "\n".join(lines)


def read_info(prefix: Path) -> dict:
    try:
        with open(prefix / INFO_NAME, "rb") as f:
            return tomllib.load(f)
    except (FileNotFoundError, tomllib.TOMLDecodeError):
        return {}


def recorded_matches(info: dict, pins: dict, name: str) -> bool:
    have = {k: v for k, v in info.get(name, {}).items() if k != "built"}
    return have == component_record(pins, name)


# ---------------------------------------------------------------- versions

def tool_output(path: Path) -> Optional[str]:
    if not (path.is_file() and os.access(path, os.X_OK)):
        return None
    try:
        res = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return res.stdout + res.stderr


def p4c_version_ok(output: Optional[str], pins: dict) -> bool:
    """p4c-bm2-ss prints ``Version 1.2.4.1 (SHA: b9775ee382 BUILD: Release)``."""
    if not output:
        return False
    p = pins["p4c"]
    for line in output.splitlines():
        head = f"Version {p['version']} (SHA: "
        if line.startswith(head):
            sha = line[len(head):].split()[0] if line[len(head):].split() else ""
            return len(sha) >= 7 and p["commit"].startswith(sha)
    return False


def bmv2_version_ok(output: Optional[str], pins: dict) -> bool:
    """simple_switch prints ``1.15.5-693e69e6``: the version, then 8 digits of the commit."""
    if not output:
        return False
    p = pins["bmv2"]
    return output.strip() == f"{p['version']}-{p['commit'][:8]}"


# ---------------------------------------------------------------- steps

class Steps:
    """Runs commands with their output in a log per step, and prints one
    plain line as each step starts and ends."""

    def __init__(self, total: int, logs: Path) -> None:
        self.total, self.done, self.logs = total, 0, logs
        self.start = time.monotonic()

    def _stamp(self) -> str:
        m, s = divmod(int(time.monotonic() - self.start), 60)
        return f"{m:3d}:{s:02d}"

    def say(self, text: str) -> None:
        print(f"toolchain {self._stamp()}  {text}", flush=True)

    def step(self, text: str) -> None:
        self.done += 1
        self.say(f"[{self.done}/{self.total}] {text}")

    def run(self, log_name: str, cmd: list[str], cwd: Optional[Path] = None,
            env: Optional[dict] = None) -> None:
        """Run ``cmd`` (an argument list, never through a shell)."""
        self.logs.mkdir(parents=True, exist_ok=True)
        log = self.logs / f"{log_name}.log"
        with open(log, "a") as out:
            out.write(f"$ {' '.join(cmd)}  (in {cwd or os.getcwd()})\n")
            out.flush()
            res = subprocess.run(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL)
        if res.returncode != 0:
            tail = log.read_text(errors="replace").splitlines()[-25:]
            raise BuildError(f"{cmd[0]} exited {res.returncode} (log: {log}):\n" + "\n".join(tail))


def local_source(sources: Path, name: str) -> str:
    for cand in (sources / name, sources / f"{name}.git"):
        if cand.is_dir():
            return str(cand)
    raise BuildError(f"no local clone of {name} in {sources} (looked for {name} and {name}.git)")


def git_head(dest: Path) -> Optional[str]:
    if not (dest / ".git").exists():
        return None
    res = subprocess.run(["git", "-C", str(dest), "rev-parse", "HEAD"], capture_output=True, text=True)
    return res.stdout.strip() if res.returncode == 0 else None


def checkout(steps: Steps, log: str, source: str, local: bool, dest: Path, commit: str,
             tag: Optional[str] = None, skip_paths: tuple[str, ...] = (),
             abbrev: Optional[str] = None) -> None:
    """``dest`` holds ``commit`` checked out, without ``skip_paths``.

    A local source is cloned whole (git copies its objects, so a file its
    snapshot lacks is never read); an upstream one is fetched at the one
    commit.  Either way the checkout is sparse, leaving ``skip_paths`` out.
    """
    if git_head(dest) == commit:
        steps.say(f"    {dest.name}: already at {commit[:10]}")
        return
    if dest.exists():
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    if local:
        steps.run(log, ["git", "clone", "--quiet", "--no-checkout", source, str(dest)])
        if tag is not None:
            res = subprocess.run(["git", "-C", str(dest), "rev-parse", "--verify", "--quiet",
                                  f"refs/tags/{tag}^{{commit}}"], capture_output=True, text=True)
            if res.returncode == 0 and res.stdout.strip() != commit:
                raise BuildError(f"{source}: tag {tag} is {res.stdout.strip()[:10]}, "
                                 f"the pin says {commit[:10]}")
    else:
        steps.run(log, ["git", "init", "--quiet", str(dest)])
        steps.run(log, ["git", "-C", str(dest), "remote", "add", "origin", source])
        steps.run(log, ["git", "-C", str(dest), "fetch", "--quiet", "--depth", "1", "origin", commit])
    if abbrev is not None:
        steps.run(log, ["git", "-C", str(dest), "config", "core.abbrev", abbrev])
    if skip_paths:
        patterns = ["/*"] + [f"!/{p}" for p in skip_paths]
        steps.run(log, ["git", "-C", str(dest), "sparse-checkout", "set", "--no-cone", *patterns])
    steps.run(log, ["git", "-C", str(dest), "-c", "advice.detachedHead=false", "checkout",
                    "--quiet", "--detach", commit])
    if git_head(dest) != commit:
        raise BuildError(f"{dest}: checkout of {commit[:10]} did not happen")
    # git checks out a commit whose file content the source lacks with an
    # error message but exit status 0, leaving the file out of the tree.
    res = subprocess.run(["git", "-C", str(dest), "ls-files", "--deleted"], capture_output=True, text=True)
    absent = res.stdout.split()
    if res.returncode != 0 or absent:
        raise BuildError(f"{source} lacks the content of {', '.join(absent[:5]) or 'some files'} "
                         f"at {commit[:10]}: an incomplete snapshot")


def install_file(src: Path, dst: Path) -> None:
    """Copy then rename, so that a running tool is never overwritten in place."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.new")
    shutil.copy2(src, tmp)
    os.replace(tmp, dst)


def build_p4c(steps: Steps, pins: dict, prefix: Path, work: Path, sources: Optional[Path],
              jobs: int) -> None:
    p, rt = pins["p4c"], pins["p4runtime"]
    src, bld = work / "p4c", work / "p4c-build"
    steps.step(f"p4c {p['version']}: sources at {p['commit'][:10]}")
    checkout(steps, "p4c-sources", local_source(sources, SOURCE_NAMES["p4c"]) if sources else p["repository"],
             sources is not None, src, p["commit"], tag=p["tag"], skip_paths=tuple(p["skip_paths"]),
             abbrev=P4C_ABBREV)
    checkout(steps, "p4c-sources",
             local_source(sources, SOURCE_NAMES["p4runtime"]) if sources else rt["repository"],
             sources is not None, src / rt["path"], rt["commit"])
    steps.step("p4c: cmake")
    # CMAKE_INSTALL_PREFIX is compiled in: p4c looks for p4include under
    # <prefix>/share/p4c, where the install step below puts it.
    steps.run("p4c-cmake", ["cmake", "-S", str(src), "-B", str(bld), f"-DCMAKE_INSTALL_PREFIX={prefix}",
                            f"-DPYTHON_EXECUTABLE={pins['bmv2']['python']}", *p["cmake"]])
    steps.step(f"p4c: build {', '.join(p['targets'])} ({jobs} jobs; the longest step)")
    steps.run("p4c-build", ["cmake", "--build", str(bld), "--parallel", str(jobs),
                            "--target", *p["targets"]])
    steps.step(f"p4c: install into {prefix}")
    # cmake's own install wants every back end built; only the pinned
    # targets are, so they are installed here with the headers every P4
    # program includes.
    for target in p["targets"]:
        install_file(bld / "backends" / "bmv2" / target, prefix / "bin" / target)
    share = prefix / "share" / "p4c" / "p4include"
    if share.exists():
        shutil.rmtree(share)
    shutil.copytree(src / "p4include", share)
    # p4c also looks for p4include next to its binary: this keeps the prefix
    # working after it is moved or unpacked elsewhere.
    link = prefix / "bin" / "p4include"
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(Path("..") / "share" / "p4c" / "p4include")
    if not p4c_version_ok(tool_output(prefix / "bin" / "p4c-bm2-ss"), pins):
        raise BuildError(f"{prefix}/bin/p4c-bm2-ss does not report version {p['version']} at {p['commit'][:10]}")


def pin_interpreter(bindir: Path, python: str) -> list[Path]:
    """Point bmv2's Python scripts in ``bindir`` at ``python``; return those changed.

    They start with ``#!/usr/bin/env python3``: whatever python3 comes first
    on PATH (a virtual environment's, pyenv's), which need not see Debian's
    python3-thrift that the CLIs import.
    """
    changed = []
    for path in sorted(bindir.iterdir()):
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        first, sep, rest = data.partition(b"\n")
        if first.startswith(b"#!") and first.split()[-1:] == [b"python3"]:
            mode = path.stat().st_mode
            tmp = path.with_name(f".{path.name}.new")
            tmp.write_bytes(b"#!" + python.encode() + sep + rest)
            os.chmod(tmp, mode)
            os.replace(tmp, path)
            changed.append(path)
    return changed


def build_bmv2(steps: Steps, pins: dict, prefix: Path, work: Path, sources: Optional[Path],
               jobs: int) -> None:
    p = pins["bmv2"]
    src = work / "behavioral-model"
    steps.step(f"bmv2 {p['version']}: sources at {p['commit'][:10]}")
    checkout(steps, "bmv2-sources", local_source(sources, SOURCE_NAMES["bmv2"]) if sources else p["repository"],
             sources is not None, src, p["commit"], tag=p["tag"])
    steps.step(f"bmv2: configure {' '.join(p['configure'])}")
    steps.run("bmv2-configure", ["./autogen.sh"], cwd=src)
    steps.run("bmv2-configure", ["./configure", f"--prefix={prefix}", *p["configure"],
                                 f"CXXFLAGS={p['cxxflags']}", f"PYTHON={p['python']}"], cwd=src)
    steps.step(f"bmv2: build ({jobs} jobs)")
    steps.run("bmv2-build", ["make", f"-j{jobs}"], cwd=src)
    steps.step(f"bmv2: install into {prefix}")
    steps.run("bmv2-install", ["make", "install"], cwd=src)
    pin_interpreter(prefix / "bin", p["python"])
    if not bmv2_version_ok(tool_output(prefix / "bin" / "simple_switch"), pins):
        raise BuildError(f"{prefix}/bin/simple_switch does not report {p['version']}-{p['commit'][:8]}")
    cli = prefix / "bin" / "simple_switch_CLI"
    first = cli.read_text(errors="replace").splitlines()[0] if cli.is_file() else ""
    if first != f"#!{p['python']}":
        raise BuildError(f"{cli} starts with {first!r}, not #!{p['python']}")


def install_debs(steps: Steps, packages: list[str]) -> None:
    steps.step(f"Debian packages ({len(packages)}, those missing)")
    # apt's own output goes to the log, so that progress stays one line a step.
    steps.run("debs", [str(ROOT / "scripts" / "install-debs.sh"), *packages])


def up_to_date(prefix: Path, pins: dict) -> dict[str, bool]:
    """Per tool: already in ``prefix`` at its pinned commit, and recorded
    there as built with the pinned flags.  A prefix without a record (made
    some other way) is rebuilt: a bmv2 of the right version built with its
    default flags is the slow build docs/p4.md warns about."""
    info = read_info(prefix)
    return {"p4c": p4c_version_ok(tool_output(prefix / "bin" / "p4c-bm2-ss"), pins)
            and recorded_matches(info, pins, "p4c"),
            "bmv2": bmv2_version_ok(tool_output(prefix / "bin" / "simple_switch"), pins)
            and recorded_matches(info, pins, "bmv2")}


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/toolchain.py", description=__doc__.splitlines()[0])
    ap.add_argument("--prefix", type=Path, default=Path(os.environ.get("P4_PREFIX") or DEFAULT_PREFIX),
                    help="where the tools go (default: $P4_PREFIX, else /opt/p4)")
    ap.add_argument("--sources", type=Path, default=os.environ.get("P4_SOURCES") or None,
                    help="a directory of local clones instead of upstream git (default: $P4_SOURCES)")
    ap.add_argument("--work", type=Path, default=DEFAULT_WORK,
                    help="sources and build trees (default: build/toolchain)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel compile jobs")
    ap.add_argument("--no-debs", action="store_true", help="do not install Debian packages")
    ap.add_argument("--only", choices=("p4c", "bmv2"), default=None,
                    help="build this tool alone; the other's record in BUILD-INFO.txt is kept as it is")
    ap.add_argument("--pins", type=Path, default=PINS_FILE, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    pins = load_pins(args.pins)
    prefix = args.prefix.resolve()
    work = args.work.resolve()
    sources = args.sources.resolve() if args.sources else None
    info = read_info(prefix)
    chosen = (args.only,) if args.only else ("p4c", "bmv2")
    ready = up_to_date(prefix, pins)
    total = (0 if args.no_debs else 1) + sum(0 if ready[name] else 4 for name in chosen)
    steps = Steps(max(total, 1), work / "logs")
    steps.say(f"prefix {prefix}; sources {sources or 'upstream git'}; work {work}")
    try:
        if not args.no_debs:
            install_debs(steps, list(pins["debian"]["build"]) + list(pins["debian"]["run"]))
        built = {k: v for k, v in ((n, info.get(n, {}).get("built")) for n in ("p4c", "bmv2")) if v}
        records = {}
        for name, build in (("p4c", build_p4c), ("bmv2", build_bmv2)):
            if name not in chosen:
                if name in info:
                    records[name] = {k: v for k, v in info[name].items() if k != "built"}
                continue
            if ready[name]:
                steps.say(f"{name}: already in {prefix} at the pinned version and flags")
            else:
                if name in info:
                    steps.say(f"{name}: {prefix}/{INFO_NAME} records another version or other flags; rebuilding")
                build(steps, pins, prefix, work, sources, args.jobs)
                built[name] = datetime.datetime.now(datetime.timezone.utc).strftime(
                    "%Y-%m-%d %H:%M UTC") + f" on {platform.platform()}"
            records[name] = component_record(pins, name)
            # Written after each tool, so that a later failure keeps the record
            # of what did get built.
            prefix.mkdir(parents=True, exist_ok=True)
            (prefix / INFO_NAME).write_text(render_info(records, built))
    except BuildError as err:
        steps.say(f"failed: {err}")
        return 1
    steps.say(f"done: {' and '.join(chosen)} in {prefix} ({INFO_NAME} there)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
