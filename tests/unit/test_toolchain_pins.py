"""`make toolchain` (scripts/toolchain.py): one set of pins for the script, the project and the docs.

The pins live in ``testbed/targets/bmv2/toolchain.toml``.  These tests hold the
script and ``testbed.targets.bmv2.toolchain`` to that file, docs/p4.md's
"Toolchain" section and docs/targets.md to its versions and flags, and check
the script's decisions (what counts as built, the sparse checkout, the CLIs'
interpreter) without building anything.
"""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from testbed import ROOT
from testbed.targets.bmv2 import toolchain

pytestmark = pytest.mark.unit

SCRIPT = ROOT / "scripts" / "toolchain.py"


def _load_script():
    spec = importlib.util.spec_from_file_location("toolchain_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


script = _load_script()
PINS = toolchain.PINS


def _section(text: str, heading: str) -> str:
    start = text.index(heading + "\n")
    rest = text[start + len(heading) + 1:]
    end = re.search(r"^## ", rest, re.M)
    return rest[:end.start()] if end else rest


P4_DOC = _section((ROOT / "docs" / "p4.md").read_text(), "## Toolchain")
TARGETS_DOC = (ROOT / "docs" / "targets.md").read_text()
#: The one version in the docs' table that is Debian's, not a pin.
DEBIAN_THRIFT = "0.17.0"


def test_script_and_project_read_one_file():
    assert script.PINS_FILE.resolve() == toolchain.PINS_FILE.resolve()
    assert script.load_pins() == toolchain.PINS


def test_the_docs_name_every_pin():
    p4c, bmv2, rt = PINS["p4c"], PINS["bmv2"], PINS["p4runtime"]
    wanted = [p4c["version"], f"`{p4c['tag']}`", p4c["commit"][:10], rt["commit"][:8],
              bmv2["version"], f"`{bmv2['tag']}`", bmv2["commit"][:8], f"CXXFLAGS={bmv2['cxxflags']}",
              f"PYTHON={bmv2['python']}", *p4c["cmake"], *bmv2["configure"], *p4c["skip_paths"],
              *(f"`{t}`" for t in p4c["targets"])]
    missing = [w for w in wanted if w not in P4_DOC]
    assert not missing, f"docs/p4.md, Toolchain, does not name {missing}"


def test_the_docs_name_nothing_but_the_pins():
    """A version, commit or flag the docs state that the pins do not is a
    drifted doc (or a pin changed without its doc)."""
    pinned_versions = {PINS["p4c"]["version"], PINS["bmv2"]["version"], DEBIAN_THRIFT}
    for doc, text in (("docs/p4.md", P4_DOC), ("docs/targets.md", TARGETS_DOC)):
        versions = set(re.findall(r"(?<![\d.])\d+\.\d+\.\d+(?:\.\d+)?(?![\d.])", text))
        assert versions <= pinned_versions, f"{doc} states versions {versions - pinned_versions}"
    commits = [PINS[name]["commit"] for name in ("p4c", "bmv2", "p4runtime")]
    for token in re.findall(r"\b[0-9a-f]{7,40}\b", P4_DOC):
        if re.search(r"\d", token) and re.search(r"[a-f]", token):
            assert any(c.startswith(token) for c in commits), f"docs/p4.md names commit {token}"
    flags = set(re.findall(r"-D[A-Z0-9_]+=\w+", P4_DOC))
    assert flags == set(PINS["p4c"]["cmake"])
    # The one configure option the docs may name without it being a pin is the
    # one they warn against.
    options = set(re.findall(r"--(?:with|without|disable|enable)-[a-z-]+", P4_DOC)) - {"--without-pi", "--with-pi"}
    assert options == set(PINS["bmv2"]["configure"])


def test_the_pins_keep_the_pitfalls_out():
    # configure reads --without-pi as --with-pi: neither may be passed.
    assert not [f for f in PINS["bmv2"]["configure"] if "-pi" in f]
    debs = set(PINS["debian"]["build"])
    assert {"libxxhash-dev", "libjsoncpp-dev", "libgtest-dev"} <= debs
    assert {"python3-thrift", "python3-six"} <= set(PINS["debian"]["run"])
    assert PINS["bmv2"]["python"] == "/usr/bin/python3"
    assert "-DENABLE_GTESTS=OFF" in PINS["p4c"]["cmake"]


def test_the_makefile_passes_no_user_name_through_the_shell():
    recipe = re.search(r"^toolchain:\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.M)
    assert recipe, "no toolchain target in the Makefile"
    assert "$(" not in recipe.group(1), "P4_PREFIX and P4_SOURCES reach the script through the environment"
    assert re.search(r"^export P4_PREFIX P4_SOURCES$", (ROOT / "Makefile").read_text(), re.M)


# ---------------------------------------------------------------- the script's decisions

P4C_OUT = "/opt/p4/bin/p4c-bm2-ss\nVersion 1.2.4.1 (SHA: b9775ee382 BUILD: Release)\n"


@pytest.mark.parametrize("output, ok", [
    (P4C_OUT, True),
    ("Version 1.2.4.1 (SHA: b9775ee BUILD: Release)\n", True),           # a shorter abbreviation
    ("Version 1.2.4.1 (SHA: b9775ee383 BUILD: Release)\n", False),       # another commit
    ("Version 1.2.4.2 (SHA: b9775ee382 BUILD: Release)\n", False),
    ("Version 1.2.4.1 (SHA: b97 BUILD: Release)\n", False),              # too short to tell
    (None, False),
])
def test_p4c_version(output, ok):
    assert script.p4c_version_ok(output, PINS) is ok


@pytest.mark.parametrize("output, ok", [("1.15.5-693e69e6\n", True), ("1.15.5-693e69e7", False),
                                        ("1.15.4-693e69e6", False), ("", False)])
def test_bmv2_version(output, ok):
    assert script.bmv2_version_ok(output, PINS) is ok


def _fake_tool(path: Path, output: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\ncat <<'EOF'\n" + output + "\nEOF\n")
    path.chmod(0o755)


def test_built_means_the_pinned_version_and_the_recorded_flags(tmp_path):
    prefix = tmp_path / "p4"
    _fake_tool(prefix / "bin" / "p4c-bm2-ss", P4C_OUT)
    _fake_tool(prefix / "bin" / "simple_switch", "1.15.5-693e69e6")
    # The right versions without a record: made some other way, so built again.
    assert script.up_to_date(prefix, PINS) == {"p4c": False, "bmv2": False}
    records = {name: script.component_record(PINS, name) for name in ("p4c", "bmv2")}
    (prefix / script.INFO_NAME).write_text(script.render_info(records, {"bmv2": "today"}))
    assert script.up_to_date(prefix, PINS) == {"p4c": True, "bmv2": True}
    # Another flag on record: that tool alone is rebuilt.
    records["bmv2"]["cxxflags"] = "-O2"
    (prefix / script.INFO_NAME).write_text(script.render_info(records, {}))
    assert script.up_to_date(prefix, PINS) == {"p4c": True, "bmv2": False}
    # Another version in the prefix: rebuilt, whatever the record says.
    _fake_tool(prefix / "bin" / "p4c-bm2-ss", P4C_OUT.replace("1.2.4.1", "1.2.5.0"))
    assert script.up_to_date(prefix, PINS)["p4c"] is False


def test_a_prefix_up_to_date_is_left_alone(tmp_path, capsys):
    prefix = tmp_path / "p4"
    _fake_tool(prefix / "bin" / "p4c-bm2-ss", P4C_OUT)
    _fake_tool(prefix / "bin" / "simple_switch", "1.15.5-693e69e6")
    records = {name: script.component_record(PINS, name) for name in ("p4c", "bmv2")}
    (prefix / script.INFO_NAME).write_text(script.render_info(records, {"p4c": "then", "bmv2": "then"}))
    work = tmp_path / "work"
    assert script.main(["--prefix", str(prefix), "--work", str(work), "--no-debs",
                        "--sources", str(tmp_path / "none")]) == 0
    out = capsys.readouterr().out
    assert "p4c: already in" in out and "bmv2: already in" in out
    assert not (work / "p4c").exists() and not (work / "behavioral-model").exists()
    # The record keeps when each was built.
    assert script.read_info(prefix)["bmv2"]["built"] == "then"


def test_only_one_tool_keeps_the_others_record(tmp_path, capsys):
    prefix = tmp_path / "p4"
    _fake_tool(prefix / "bin" / "simple_switch", "1.15.5-693e69e6")
    records = {name: script.component_record(PINS, name) for name in ("p4c", "bmv2")}
    (prefix / script.INFO_NAME).write_text(script.render_info(records, {"p4c": "then", "bmv2": "then"}))
    work = tmp_path / "work"
    # p4c-bm2-ss is not there, but only bmv2 was asked for.
    assert script.main(["--prefix", str(prefix), "--work", str(work), "--no-debs", "--only", "bmv2",
                        "--sources", str(tmp_path / "none")]) == 0
    assert "p4c" not in capsys.readouterr().out.replace(str(tmp_path), "")
    assert not (work / "p4c").exists()
    info = script.read_info(prefix)
    assert info["p4c"]["built"] == "then" and script.recorded_matches(info, PINS, "p4c")


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                               "GIT_COMMITTER_EMAIL": "t@t", "HOME": str(cwd), "PATH": "/usr/bin:/bin"}
                          ).stdout.strip()


@pytest.fixture
def snapshot(tmp_path) -> tuple[Path, str]:
    """A bare repository like p4c's snapshot: a tagged commit whose one
    binary doc file's content is missing from the object store."""
    work = tmp_path / "upstream"
    (work / "docs").mkdir(parents=True)
    (work / "src.txt").write_text("code\n")
    (work / "docs" / "big.pptx").write_bytes(b"\x00binary\x01" * 100)
    _git("init", "-q", "-b", "main", cwd=work)
    _git("add", ".", cwd=work)
    _git("commit", "-q", "-m", "one", cwd=work)
    _git("tag", "v1", cwd=work)
    commit = _git("rev-parse", "HEAD", cwd=work)
    blob = _git("rev-parse", "HEAD:docs/big.pptx", cwd=work)
    bare = tmp_path / "sources" / "p4c"
    _git("clone", "-q", "--bare", str(work), str(bare), cwd=tmp_path)
    (bare / "objects" / blob[:2] / blob[2:]).unlink()
    return bare, commit


def test_a_checkout_leaves_out_the_file_the_snapshot_lacks(tmp_path, snapshot):
    bare, commit = snapshot
    dest = tmp_path / "work" / "p4c"
    steps = script.Steps(1, tmp_path / "logs")
    script.checkout(steps, "src", str(bare), True, dest, commit, tag="v1", skip_paths=("docs/big.pptx",))
    assert script.git_head(dest) == commit
    assert (dest / "src.txt").read_text() == "code\n"
    assert not (dest / "docs" / "big.pptx").exists()
    # A second run finds it there and leaves it.
    (dest / "build-output").write_text("kept")
    script.checkout(steps, "src", str(bare), True, dest, commit, tag="v1", skip_paths=("docs/big.pptx",))
    assert (dest / "build-output").exists()


def test_an_upstream_source_is_fetched_at_its_one_commit(tmp_path, snapshot):
    """Upstream is fetched over git's transport (here file://, as https
    would be): one commit, shallow, sparse, with p4c's 10-digit abbreviation."""
    _bare, commit = snapshot
    dest = tmp_path / "work" / "p4c"
    script.checkout(script.Steps(1, tmp_path / "logs"), "src", (tmp_path / "upstream").as_uri(), False, dest,
                    commit, skip_paths=("docs/big.pptx",), abbrev=script.P4C_ABBREV)
    assert script.git_head(dest) == commit
    assert _git("rev-parse", "--is-shallow-repository", cwd=dest) == "true"
    assert _git("rev-parse", "--short", "HEAD", cwd=dest) == commit[:10]
    assert not (dest / "docs" / "big.pptx").exists()


def test_a_full_checkout_of_that_snapshot_fails(tmp_path, snapshot):
    """Without the sparse checkout the missing file stops the build: the
    reason the pins name it."""
    bare, commit = snapshot
    with pytest.raises(script.BuildError):
        script.checkout(script.Steps(1, tmp_path / "logs"), "src", str(bare), True, tmp_path / "p4c", commit)


def test_a_tag_that_moved_stops_the_build(tmp_path, snapshot):
    bare, commit = snapshot
    other = "0" * 40
    with pytest.raises(script.BuildError, match="tag v1"):
        script.checkout(script.Steps(1, tmp_path / "logs"), "src", str(bare), True, tmp_path / "p4c", other,
                        tag="v1", skip_paths=("docs/big.pptx",))


def test_local_sources_are_found_by_name(tmp_path):
    (tmp_path / "behavioral-model.git").mkdir()
    assert script.local_source(tmp_path, "behavioral-model") == str(tmp_path / "behavioral-model.git")
    with pytest.raises(script.BuildError, match="no local clone of p4c"):
        script.local_source(tmp_path, "p4c")


def test_bmv2_clis_get_debians_python(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    cli = bindir / "simple_switch_CLI"
    cli.write_text("#!/usr/bin/env python3\nimport sys\n")
    cli.chmod(0o755)
    binary = bindir / "simple_switch"
    binary.write_bytes(b"\x7fELF\x02\x01python3\n")
    (bindir / "p4include").symlink_to(tmp_path)
    assert script.pin_interpreter(bindir, "/usr/bin/python3") == [cli]
    assert cli.read_text() == "#!/usr/bin/python3\nimport sys\n"
    assert cli.stat().st_mode & 0o777 == 0o755
    assert binary.read_bytes() == b"\x7fELF\x02\x01python3\n"


# ---------------------------------------------------------------- without the tools

@pytest.fixture
def no_tools(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty-path"))
    monkeypatch.setenv(toolchain.PREFIX_VAR, str(tmp_path / "no-prefix"))


def test_the_missing_tools_name_make_toolchain(no_tools):
    reason = toolchain.toolchain_missing()
    assert reason and "make toolchain" in reason and "\n" not in reason


def test_experiment_on_bmv2_without_the_tools_exits_2_naming_make_toolchain(no_tools, monkeypatch):
    import testbed.experiments.base as base
    import testbed.experiments.launch as launch
    from testbed.cli import main

    def started(*args, **kwargs):
        raise AssertionError("something was started")

    monkeypatch.setattr(launch, "launch", started)
    monkeypatch.setattr(base, "run_experiment", started)
    for name in ("cbsw1", "s4amp"):         # a scenario, and an experiment that lists both targets
        result = CliRunner().invoke(main, ["experiment", name, "--target", "bmv2"])
        assert result.exit_code == 2, result.output
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and "make toolchain" in lines[0]


def stand_in_compiler(tmp_path: Path, monkeypatch, seconds: float = 0.0) -> tuple[Path, Path]:
    """A p4c-bm2-ss on PATH that takes ``seconds``, writes its two outputs and counts
    its calls in a file; returns (that file, a program ``p4/p.p4`` to compile)."""
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls"
    bin_dir.mkdir()
    fake = bin_dir / "p4c-bm2-ss"
    fake.write_text(f"""#!{sys.executable}
import sys, time
args = sys.argv[1:]
time.sleep({seconds})
with open({str(calls)!r}, "a") as f:
    f.write("compiled\\n")
open(args[args.index("-o") + 1], "w").write('{{"program": "p.p4"}}')
open(args[args.index("--p4runtime-files") + 1], "w").write("info")
""")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    program = tmp_path / "p4" / "p.p4"
    program.parent.mkdir()
    program.write_text("// one revision\n")
    return calls, program


def test_two_compiles_of_one_program_at_once_run_the_compiler_once(tmp_path, monkeypatch):
    """Two processes (pytest-xdist workers) asking for one program at once: the
    second waits for the first's compile and takes its outputs, never compiling
    it again or reading half-written ones.  The compiler here is a stand-in
    that takes a second and counts its calls."""
    import threading

    calls, program = stand_in_compiler(tmp_path, monkeypatch, seconds=1)
    out, got = tmp_path / "build", []
    threads = [threading.Thread(target=lambda: got.append(toolchain.compile_program(out, program=program)))
               for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert got == [out / "p.json"] * 2 and (out / "p.json").read_text() == '{"program": "p.p4"}'
    assert calls.read_text() == "compiled\n"
    assert toolchain.compile_program(out, force=True, program=program) == out / "p.json"
    assert calls.read_text() == "compiled\n" * 2


def test_outputs_are_up_to_date_only_for_the_sources_they_were_built_from(tmp_path, monkeypatch):
    """Outputs newer than the sources but built from other ones (a build/ copied
    beside another revision) are compiled again; a source touched but unchanged is not."""
    calls, program = stand_in_compiler(tmp_path, monkeypatch)
    out = tmp_path / "build"
    toolchain.compile_program(out, program=program)
    assert toolchain.up_to_date(out, program=program)
    program.write_text("// another revision\n")
    for built in toolchain.outputs(out, program):
        os.utime(built, (built.stat().st_mtime + 60,) * 2)      # newer than the changed source
    assert not toolchain.up_to_date(out, program=program)
    toolchain.compile_program(out, program=program)
    program.touch()
    assert toolchain.up_to_date(out, program=program)
    assert calls.read_text() == "compiled\n" * 2
