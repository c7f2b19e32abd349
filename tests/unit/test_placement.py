"""Where a timed switch and its sender run (testbed.emulation.placement): apart,
the switch's every thread on its CPUs, the sender's thread back where it was after."""
import os
import threading
import time
from pathlib import Path

import pytest

from testbed.emulation.placement import CpuPlacement, cpu_list, cpu_seconds, on_cpus, sending_on
from testbed.targets.embedded.process import EmbeddedProcess

pytestmark = pytest.mark.unit

CPUS = frozenset(os.sched_getaffinity(0))
two_cpus = pytest.mark.skipif(len(CPUS) < 2, reason="this process may use one CPU: nothing to keep apart")


def test_cpu_lists_are_written_as_taskset_reads_them():
    assert cpu_list(frozenset({0})) == "0"
    assert cpu_list(frozenset({0, 1, 2, 5, 7, 8})) == "0-2,5,7-8"
    assert on_cpus(frozenset({3, 1})) == ["taskset", "--cpu-list", "1,3"]


def test_a_process_cpu_time_counts_every_one_of_its_threads():
    """What another thread spends shows in its process's CPU seconds, to
    the thread's own nanosecond clock, not to a scheduler tick (10 ms)."""
    spent, done = {}, threading.Event()

    def spin() -> None:
        start = time.thread_time()
        while time.thread_time() - start < 0.03:
            pass
        spent["s"] = time.thread_time() - start
        spent["spun"] = True
        done.wait(10)                          # alive while it is measured

    before = cpu_seconds(os.getpid())
    worker = threading.Thread(target=spin)
    worker.start()
    while "spun" not in spent:
        time.sleep(0.001)
    used = cpu_seconds(os.getpid()) - before
    done.set()
    worker.join()
    assert spent["s"] >= 0.03 and spent["s"] <= used < spent["s"] + 1.0
    with pytest.raises(FileNotFoundError):
        cpu_seconds(2 ** 22 + 1)               # above any pid_max: no such process


def test_a_placement_keeps_the_switch_off_the_senders_cpus():
    with pytest.raises(ValueError, match="overlap"):
        CpuPlacement(switch=frozenset({0, 1}), sender=frozenset({1}))
    with pytest.raises(ValueError, match="needs CPUs"):
        CpuPlacement(switch=frozenset(), sender=frozenset({1}))
    placement = CpuPlacement.of_this_process()
    if len(CPUS) < 2:
        assert placement is None
    else:
        assert placement.sender == {max(CPUS)} and placement.switch == CPUS - {max(CPUS)}
        assert placement.record() == {"switch_cpus": cpu_list(CPUS - {max(CPUS)}), "sender_cpus": str(max(CPUS))}


@two_cpus
def test_the_sender_sends_from_its_cpus_and_goes_back_after():
    placement = CpuPlacement(switch=frozenset({min(CPUS)}), sender=frozenset({max(CPUS)}))
    with sending_on(placement):
        assert os.sched_getaffinity(0) == {max(CPUS)}
    assert os.sched_getaffinity(0) == CPUS
    with pytest.raises(RuntimeError), sending_on(placement):
        raise RuntimeError("the sender failed")
    assert os.sched_getaffinity(0) == CPUS
    with sending_on(None):
        assert os.sched_getaffinity(0) == CPUS


def test_a_switch_process_starts_on_its_cpus_only_when_given_them(tmp_path):
    plain = EmbeddedProcess({}, tmp_path, name="plain")
    assert plain.launch_command() == plain.command()
    pinned = EmbeddedProcess({}, tmp_path, name="pinned", cpus=frozenset({0}))
    assert pinned.launch_command() == ["taskset", "--cpu-list", "0", *pinned.command()]


@two_cpus
def test_every_thread_of_a_started_switch_runs_on_its_cpus(tmp_path):
    """The embedded switch, started on one CPU: each of its threads may run there only."""
    cpu = min(CPUS)
    with EmbeddedProcess({}, tmp_path, name="pinned", cpus=frozenset({cpu})) as proc:
        allowed = allowed_cpus(proc.proc.pid)
    assert len(allowed) >= 2 and set(allowed.values()) == {str(cpu)}


def allowed_cpus(pid: int) -> dict[str, str]:
    """Each thread's ``Cpus_allowed_list``, by thread id.  A thread that ends
    between the listing and the read of its status is left out: the switch
    starts and ends short-lived threads of its own."""
    allowed = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            status = (task / "status").read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue
        allowed[task.name] = next(line.split()[1] for line in status.splitlines()
                                  if line.startswith("Cpus_allowed_list:"))
    return allowed
