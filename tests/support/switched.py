"""Deliveries as the splitter makes them, without a network: events through
the pipeline model, each copy recorded as an operator host's receiver would
(its event fields and its Windows header), for tests of what comes after the
switch (the Spark job, the checks)."""
from __future__ import annotations

from typing import Any, Callable, Optional

import pandas as pd

from testbed.dataplane.control import Controller
from testbed.dataplane.model import SplitterPipeline
from testbed.dataplane.wire import EVENT_OFFSET, FrameTemplate, parse_event, parse_windows
from testbed.emulation.receiver import HEADER_COLUMNS
from testbed.semantics.plan import SplitterPlan
from testbed.semantics.topology import SPLITTER_IP, Topology


def through_model(topo: Topology, sources: pd.DataFrame,
                  before: Optional[Callable[[Controller, SplitterPlan, Any], None]] = None,
                  model: Optional[SplitterPipeline] = None) -> pd.DataFrame:
    """Every row of ``sources`` (stream, seq, ts, key, value, send_ns), in
    send order, through a model switch holding ``topo``'s plan; one row per
    copy.  ``before(controller, plan, row)`` runs before each event, so a
    test can reconfigure a stream while events flow.  ``model`` is a switch
    that holds the plan already (a new one is made and programmed if not)."""
    plan = SplitterPlan(topo)
    controller = Controller(model if model is not None else SplitterPipeline())
    if model is None:
        controller.install(plan)
    model = controller.api
    host_of = plan.host_of_port()
    templates = {}
    for s in topo.streams:
        ip, mac = plan.addresses[s.source]
        templates[s.id] = FrameTemplate(mac, "02:00:00:00:00:fe", ip, SPLITTER_IP, s.id)
    rows = []
    for row in sources.sort_values("send_ns", kind="stable").itertuples(index=False):
        if before is not None:
            before(controller, plan, row)
        frame = templates[row.stream].frame(row.seq, row.ts, row.key, row.value)
        for port, copy in model.process(frame):
            stream, seq, ts, key, value = parse_event(copy[EVENT_OFFSET:])
            header = parse_windows(copy[EVENT_OFFSET:])
            rows.append({"stream": stream, "seq": seq, "ts": ts, "key": row.key, "value": value,
                         "recv_ns": row.send_ns + 1000, "operator": host_of[port],
                         **dict(zip(HEADER_COLUMNS, header))})
    return pd.DataFrame(rows)
