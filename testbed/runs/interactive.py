"""``testbed run --cli``: Mininet's CLI on a run's network, with the run's commands.

p4-utils' ``p4run`` and Mininet drop the user into Mininet's CLI, where
``src tcpdump -c 5 -i src-eth0`` or ``xterm op1`` work.  ``RunCLI`` is that
CLI on the run's network (plan installed, operators listening), plus:

- ``stream``: start the sources and follow them until streaming is over
  (with ``--cli``; with ``--cli=after`` the run streamed before the CLI opened);
- ``status``: events sent, copies received per operator, and the switch's
  counters per stream.

Leaving the CLI (``exit``, ``quit``, end of input) lets the run finish as
usual: collect, check, record.  Standard input may be a script; its lines
are then commands only, never input for a host's command.
"""
from __future__ import annotations

import signal
import sys
from typing import Any, Protocol, TextIO

from mininet.cli import CLI
from mininet.log import error, output

from testbed.dataplane.control import Controller
from testbed.rundir import RunDir, RunRecord, read_json
from testbed.runs.progress import live_line, operator_lag, seconds
from testbed.semantics.topology import Topology


class InteractiveRun(Protocol):
    """What the CLI uses of the run it is opened on (``testbed.runs.orchestrator.Run``)."""

    topo: Topology
    rundir: RunDir
    record: RunRecord
    network: Any         # its ``net`` is the Mininet network
    api: Any             # the switch's control API
    spark: Any           # the run's Spark application, or None

    def stream(self) -> None: ...

    def expected(self) -> int: ...

RUN_HELP = (
    "The run adds:\n"
    "  stream    start the sources and follow them (once per run)\n"
    "  status    events sent, copies received per operator, switch counters,\n"
    "            windows emitted and each operator's lag behind Spark\n"
    "The switch's own CLI: sh testbed switch-cli (from another shell: testbed switch-cli)\n"
    "Leaving the CLI (exit, quit, Ctrl-D) finishes the run: collect, check, record.\n\n"
)


class RunCLI(CLI):
    """Mininet's CLI on the network of ``run``; returns when the user leaves it."""

    helpStr = CLI.helpStr + "\n" + RUN_HELP

    def __init__(self, run: InteractiveRun, stdin: TextIO = sys.stdin):
        self.testbed_run = run    # before CLI.__init__, which runs the command loop (CLI.run is taken)
        # Ctrl-C stops the command at the prompt, as in Mininet, not the run.
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            super().__init__(run.network.net, stdin=stdin)
        finally:
            signal.signal(signal.SIGINT, previous)

    def do_stream(self, _line: str) -> None:
        """Start the sources and follow them until every expected copy arrived: stream"""
        if self.testbed_run.record.stream_end is not None:
            error(f"*** the run has streamed already ({self.testbed_run.record.stream_end})\n")
            return
        self.testbed_run.stream()

    def do_status(self, _line: str) -> None:
        """Events sent, copies received per operator, and the switch's counters per stream: status"""
        rundir, topo = self.testbed_run.rundir, self.testbed_run.topo
        sent = {}
        for host in topo.source_hosts():
            for sid, n in read_json(rundir.source_status(host)).get("sent", {}).items():
                sent[int(sid)] = n
        counters = Controller(self.testbed_run.api).stream_counters([s.id for s in topo.streams], [])
        for s in topo.streams:
            c = counters["streams"][s.id]
            dropped = ", ".join(f"{k}={v}" for k, v in c["dropped"].items() if v) or "none"
            output(f"stream {s.id}: sent {sent.get(s.id, 0)}/{s.events}; switch: in {c['in']}, "
                   f"copies out {c['out']}, dropped {dropped}\n")
        received = {h: read_json(rundir.receiver_status(h)).get("received", 0) for h in topo.operator_hosts()}
        output("received: " + ", ".join(f"{h} {n}" for h, n in received.items())
               + f" (expected in all: {self.testbed_run.expected()})\n")
        output(f"frames that were no event: {counters['non_event']}\n")
        if self.testbed_run.spark is not None:
            lags = operator_lag(rundir, topo.operator_hosts(), received_by_host=received)
            output(live_line(rundir, topo.operator_hosts(), lags) + "\n")
            for host, lag in lags.items():
                output(f"  {host}: received {lag.received}, processed by Spark {lag.processed}, "
                       f"lag {lag.lag_events} events, {seconds(lag.lag_s)}\n")

    def waitForNode(self, node) -> None:
        """A host's command runs to its end.  Mininet forwards standard input to
        it, which would feed the rest of a script to the command; from a script
        only the command's output is read."""
        if self.isatty():
            super().waitForNode(node)
            return
        while node.waiting:
            output(node.monitor())
