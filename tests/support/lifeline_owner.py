"""``python -m support.lifeline_owner run|service``: a process that records children, then waits to be killed.

With ``run`` it begins a run (``procs.begin_run``), with ``service`` it
records under a state file of its own (``procs.owned_by``, as the warm
Spark application is).  Either way it starts a group leader that has a
child of its own (unrecorded, as Spark's JVM has ``window_job.py``) and a
plain child in its own process group, prints one JSON line with their
PIDs, and blocks on standard input; the lifeline tests kill it there.
"""
from __future__ import annotations

import json
import subprocess
import sys
from contextlib import nullcontext

from testbed.emulation import procs

#: A leader that starts a child and lives on, as Spark's JVM does when the run dies; the child is in its group.
LEADER = "import subprocess, time; print(subprocess.Popen(['sleep', '300']).pid, flush=True); time.sleep(300)"


def main() -> None:
    mode = sys.argv[1]
    if mode == "run":
        procs.begin_run("owner-run")
    scope = procs.owned_by("owner-service", "a service") if mode == "service" else nullcontext()
    with scope:
        # close_fds=False: even a child that keeps every inheritable descriptor must not hold the lifeline
        leader = subprocess.Popen([sys.executable, "-c", LEADER], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  text=True, start_new_session=True, close_fds=False)
        member = int(leader.stdout.readline())
        leader.stdout.close()
        procs.register_pid(leader.pid, "a group leader")
        plain = subprocess.Popen(["sleep", "300"], close_fds=False)
        procs.register_pid(plain.pid, "a plain child")
    print(json.dumps({"leader": leader.pid, "member": member, "plain": plain.pid}), flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    main()
