"""What runs leave on the machine, counted: for the soak, the scale runs and the fault tests.

A caller starts ``testbed run`` with ``TESTBED_TAG=<tag>`` in its
environment.  Every process a run starts inherits it (Mininet's shells,
the switch, sources, receivers, tcpdump, Spark's JVM and its Python
workers), so ``tagged_processes`` finds them all, wherever they were
reparented, without touching anyone else's.  ``Footprint`` is a snapshot
of the rest: interfaces and named network namespaces in the root
namespace, mounts, and the files under the folders a run may write
temporaries to; ``leaks`` compares two snapshots.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import psutil

TAG_ENV = "TESTBED_TAG"


def tagged_processes(tag: str) -> list[psutil.Process]:
    """Live processes whose environment carries ``TESTBED_TAG=tag`` (zombies excluded)."""
    found = []
    for proc in psutil.process_iter(["environ", "status"]):
        env = proc.info.get("environ") or {}
        if env.get(TAG_ENV) == tag and proc.info.get("status") != psutil.STATUS_ZOMBIE:
            found.append(proc)
    return found


def memory_of(tag: str) -> int:
    """Memory of every tagged process together, in bytes (0 for those that vanish meanwhile).

    Proportional set sizes: a page shared by several processes (the Python
    interpreter and libraries of 64 receivers) counts once in all, where
    adding up resident sizes would count it in each.
    """
    total = 0
    for proc in tagged_processes(tag):
        try:
            total += proc.memory_full_info().pss
        except psutil.Error:
            pass
    return total


def _names(folder: str) -> set[str]:
    try:
        return set(os.listdir(folder))
    except OSError:
        return set()


def _files(folders: Iterable[Path]) -> set[str]:
    out = set()
    for folder in folders:
        for root, dirs, files in os.walk(folder):
            out.update(os.path.join(root, name) for name in dirs + files)
    return out


@dataclass
class Footprint:
    """One snapshot of what a run can leave behind, outside its processes."""

    interfaces: set[str] = field(default_factory=set)     # root namespace
    namespaces: set[str] = field(default_factory=set)     # named: /run/netns
    mounts: set[str] = field(default_factory=set)         # mount points of this mount namespace
    files: set[str] = field(default_factory=set)          # under the watched folders

    @classmethod
    def take(cls, folders: Iterable[Path] = ()) -> "Footprint":
        mounts = set()
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            mounts.add(line.split()[4])
        return cls(_names("/sys/class/net"), _names("/run/netns"), mounts, _files(folders))


def leaks(before: Footprint, after: Footprint, tags: Iterable[str]) -> dict[str, list]:
    """What ``after`` has that ``before`` had not, plus the processes of ``tags`` still alive."""
    out: dict[str, list] = {"processes": [f"{p.pid} {' '.join(p.cmdline())[:120]}"
                                          for tag in tags for p in tagged_processes(tag)]}
    for name in ("interfaces", "namespaces", "mounts", "files"):
        out[name] = sorted(getattr(after, name) - getattr(before, name))
    return out
