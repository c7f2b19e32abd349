"""A count stream in the build without changes (p4/counts.p4, testbed.dataplane.model.counts).

The build keeps a count stream's state in a cell of ``count_state`` and in
``newest_window``, and steps it in window_spec's action.  The model writes
the same cell from its own tracker, and ``counts.step`` is the action's
algorithm: both are held here to the slide tracker and the oracle, for
every (size, slide, N) hypothesis draws, gaps between windows among them.
"""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support import topologies
from support.changes import HOSTS
from testbed.dataplane.contract import COUNT_STATE, FIXED_REGISTERS, REGISTERS, build_registers
from testbed.dataplane.control import Controller
from testbed.dataplane.model import SplitterPipeline
from testbed.dataplane.model.counts import FILL_BITS, NEWEST_BITS, CountCell, step
from testbed.semantics.limits import MAX_EVENTS, N_INSTANCES
from testbed.semantics.plan import SplitterPlan

pytestmark = pytest.mark.unit


def harness(window: dict, n_ops: int):
    topo = topologies.build([topologies.stream(1, window, HOSTS[:n_ops])], ["h1", *HOSTS])
    plan = SplitterPlan(topo)
    pipe = SplitterPipeline()
    Controller(pipe).install(plan)
    return topo.streams[0], pipe


@settings(max_examples=60, deadline=None)
@given(size=st.integers(1, 12), slide=st.integers(1, 12), n_ops=st.integers(1, 5), events=st.integers(1, 80))
def test_the_action_steps_the_cell_as_the_tracker_moves_the_stream(size, slide, n_ops, events):
    """``step``, event by event, keeps the cell and the newest window the
    model writes, and gives the tracker's operator and window count: 0
    exactly where the event falls in a gap, as the oracle says."""
    stream, pipe = harness({"kind": "count", "size": size, "slide": slide}, n_ops)
    oracle = stream.oracle()
    full, extra = size // slide, size % slide
    cell = window = 0
    for seq in range(events):
        decision = pipe.ingress(1, 0)
        cell, window, newest, active = step(cell, window, slide, full, extra, n_ops)
        assert (cell, window) == (pipe.register_read(COUNT_STATE, 1), pipe.register_read("newest_window", 1))
        verdict = oracle.step(seq, 0)
        assert (active == 0) == bool(verdict.dropped) == (decision.drop is not None)
        if active:
            assert active == len(verdict.windows)
            assert newest == decision.copy.verdict.newest
            assert window == max(verdict.windows)


def test_the_cell_holds_its_fields_at_their_limits():
    """A stream's events fit the fill (all 2^32 of them in one slide), an
    operator index the operator field, and each field comes back as it went in."""
    assert 1 << FILL_BITS > MAX_EVENTS and 1 << NEWEST_BITS >= N_INSTANCES
    assert FILL_BITS + NEWEST_BITS == FIXED_REGISTERS[COUNT_STATE]
    for fill, newest in [(0, 0), (MAX_EVENTS, N_INSTANCES - 1), (7, 3)]:
        cell = CountCell(fill, newest).pack()
        assert CountCell.unpack(cell) == (fill, newest) and cell < 1 << FIXED_REGISTERS[COUNT_STATE]


def test_a_count_streams_first_event_needs_no_case_of_its_own():
    """All zero is the state before the first event: slide 0, operator 0,
    window 0, one window begun; after it the cell has counted one event."""
    cell, window, newest, active = step(0, 0, slide=3, full=2, extra=1, n_ops=4)
    assert (CountCell.unpack(cell), window, newest, active) == ((1, 0), 0, 0, 1)


def test_the_model_writes_the_cell_for_count_streams_only():
    _stream, pipe = harness({"kind": "time", "size": 10, "slide": 5}, 2)
    for ts in range(0, 40, 3):
        pipe.ingress(1, ts)
    assert pipe.register_read(COUNT_STATE, 1) == 0 and pipe.register_read("newest_window", 1) > 0


def test_each_build_names_the_registers_it_writes_per_kind():
    assert build_registers("splitter_fixed.json", "count") == (COUNT_STATE, "newest_window")
    assert build_registers("splitter_fixed.json", "time") == tuple(REGISTERS)
    for program in ("splitter.json", "splitter_batches.json", "splitter_cep.json"):
        assert build_registers(program, "count") == build_registers(program, "time") == tuple(REGISTERS)
    assert set(build_registers(None, "count")) == set(REGISTERS) | set(FIXED_REGISTERS)
