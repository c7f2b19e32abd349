"""The data-plane contract: one list of everything the targets share."""
import inspect

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from testbed.dataplane import contract
from testbed.dataplane.model import SplitterPipeline
from testbed.semantics.windows import DROP_REASONS, CountWindows, TimeWindows, windows_on_axis
from testbed.targets.embedded.client import EmbeddedAPI
from testbed.targets.embedded.server import SERVED


def test_the_model_serves_every_contract_method_with_its_signature():
    for name in contract.CONTROL_METHODS:
        ours = inspect.signature(getattr(SplitterPipeline, name))
        theirs = inspect.signature(getattr(contract.SwitchAPI, name))
        assert list(ours.parameters) == list(theirs.parameters), name


def test_the_embedded_server_serves_the_contract_and_refuses_the_rest():
    assert set(contract.CONTROL_METHODS) <= SERVED
    assert "table_add" in contract.CONTROL_METHODS and "__init__" not in contract.CONTROL_METHODS
    client = EmbeddedAPI.__new__(EmbeddedAPI)      # no connection needed to resolve names
    assert callable(client.table_add)
    with pytest.raises(AttributeError, match="serves no method 'shutdown'"):
        client.shutdown


def test_every_semantic_drop_reason_has_a_code():
    assert set(DROP_REASONS) < set(contract.DROP_CODES)
    codes = list(contract.DROP_CODES.values())
    assert len(set(codes)) == len(codes) and max(codes) < contract.DROP_SLOTS
    assert contract.drop_counter_index(3, contract.UNKNOWN_STREAM) == 3 * contract.DROP_SLOTS + 4


@pytest.mark.parametrize("text,kind,value", [
    ("02:00:00:00:00:0a", "mac", 0x02000000000A), ("10.0.0.2", "ip", 0x0A000002), ("0x1f", "int", 31),
    ("12", "int", 12), ("aa:bb:cc:dd:ee:ff", None, 0xAABBCCDDEEFF), ("10.1.2.3", None, 0x0A010203), (7, "mac", 7)])
def test_codecs_read_text_as_the_switch_stores_it(text, kind, value):
    assert contract.to_int(text, kind) == value


def test_to_bytes_refuses_what_does_not_fit():
    assert contract.to_bytes(511, 9, "port") == b"\x01\xff"
    with pytest.raises(ValueError, match="port: 512 does not fit in 9 bits"):
        contract.to_bytes(512, 9, "port")


@given(size=st.integers(1, 40), slide=st.integers(1, 40), n=st.integers(1, 7),
       xs=st.lists(st.integers(-5, 500), min_size=1, max_size=40))
def test_assign_many_is_assign(size, slide, n, xs):
    """The vectorised assignment the Spark job uses is the oracle's, event by event."""
    for assigner, origin in ((CountWindows(size, slide), 0), (TimeWindows(size, slide), 3)):
        index = np.array(xs)
        ts = index + origin
        owners = np.array([x % (n + 1) - 1 for x in xs])          # includes -1: not an operator
        whole = assigner.assign_many(index, ts, origin)
        owned = assigner.assign_many(index, ts, origin, owners, n)
        for x, w, mine, owner in zip(xs, whole, owned, owners.tolist()):
            expect = windows_on_axis(x, size, slide)
            assert list(w) == list(expect)
            assert list(mine) == ([j for j in expect if j % n == owner] if owner >= 0 else [])


def test_the_limits_are_the_widths_the_contract_declares():
    """semantics.limits declares the widths; the action parameters that carry them agree."""
    from testbed.dataplane.contract import param_bits
    from testbed.semantics import limits

    assert limits.WINDOWS_PER_EVENT_BITS == param_bits("window_spec", "set_count_window", "cap")
    assert limits.WINDOWS_PER_EVENT_BITS == param_bits("window_spec", "set_count_window", "full")
    assert limits.GROUP_ID_BITS == param_bits("multicast", "to_group", "mgid")
