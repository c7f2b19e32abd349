"""Heartbeats and failure detection against the pipeline model."""
from testbed.dataplane.liveness import HeartbeatMonitor, detection_bound
from testbed.dataplane.model import SplitterPipeline
from testbed.dataplane.wire import heartbeat_frame, is_event_frame, is_heartbeat_frame

SWITCH = ("02:00:00:00:00:fe", "10.0.0.254")


def beat(pipe, port, seq=0):
    frame = heartbeat_frame(f"02:00:00:00:00:0{port}", SWITCH[0], f"10.0.0.{port}", SWITCH[1], seq)
    return pipe.process(frame, port)


def test_heartbeats_are_counted_per_port_and_dropped():
    pipe = SplitterPipeline()
    for seq in range(3):
        assert beat(pipe, 2, seq) == []
    assert beat(pipe, 5) == []
    assert pipe.counter_read("heartbeats", 2)[1] == 3
    assert pipe.counter_read("heartbeats", 5)[1] == 1
    assert pipe.counter_read("heartbeats", 3)[1] == 0
    assert pipe.counter_read("non_event", 0)[1] == 0     # a heartbeat is not a stray frame


def test_a_heartbeat_is_not_an_event():
    frame = heartbeat_frame("02:00:00:00:00:02", SWITCH[0], "10.0.0.2", SWITCH[1], 7)
    assert is_heartbeat_frame(frame) and not is_event_frame(frame)


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_monitor_declares_a_silent_port_failed_once_and_alive_again():
    pipe, clock = SplitterPipeline(), Clock()
    failures, recoveries = [], []
    monitor = HeartbeatMonitor(pipe, [2, 3, 4], timeout=0.3, on_failure=failures.append,
                               on_recovery=recoveries.append, clock=clock)
    for step in range(40):                     # 2 and 3 beat every 50 ms; 4 never starts
        clock.now = step * 0.05
        beat(pipe, 2)
        if step < 10:
            beat(pipe, 3)
        monitor.poll()
    assert [d.port for d in failures] == [3]
    (d,) = failures
    assert d.last_heartbeat == 0.45 and 0.3 < d.detected - d.last_heartbeat <= 0.35 + 1e-9
    assert monitor.failed() == [3]             # 4 never beat: starting, not failed
    clock.now = 2.0
    beat(pipe, 2)
    beat(pipe, 3)
    monitor.poll()
    assert recoveries == [3] and monitor.failed() == []


def test_on_a_busy_machine_the_silence_stretches_with_the_other_ports_heartbeats():
    """Heartbeats every 200 ms instead of 50: port 3's silence of 0.3 s is no
    failure while port 2 beat fewer than 5 times meanwhile; the fifth makes it one."""
    pipe, clock = SplitterPipeline(), Clock()
    failures = []
    monitor = HeartbeatMonitor(pipe, [2, 3], timeout=0.3, on_failure=failures.append, clock=clock)
    assert monitor.beats == 5
    beat(pipe, 2), beat(pipe, 3)
    monitor.poll()
    for step in range(1, 5):                   # 0.8 s: port 2 beat 4 times, port 3 is silent
        clock.now = step * 0.2
        beat(pipe, 2)
        monitor.poll()
    assert failures == [] and monitor.failed() == []
    clock.now = 1.0
    beat(pipe, 2)
    monitor.poll()
    (d,) = failures
    assert (d.port, d.last_heartbeat, d.detected, d.others_beats) == (3, 0.0, 1.0, 5)


def test_with_no_other_port_heard_the_seconds_decide():
    """All ports silent (failed together, or one operator host alone): nothing
    to measure the silence with, so 0.3 s of it is a failure as before."""
    for ports in ([2, 3], [2]):
        pipe, clock = SplitterPipeline(), Clock()
        monitor = HeartbeatMonitor(pipe, ports, timeout=0.3, clock=clock)
        for port in ports:
            beat(pipe, port)
        monitor.poll()
        clock.now = 0.3
        monitor.poll()
        assert monitor.failed() == []
        clock.now = 0.35
        monitor.poll()
        assert monitor.failed() == ports and {d.others_beats for d in monitor.detections} == {0}


def test_detection_bound_of_the_defaults_is_within_half_a_second():
    assert detection_bound() <= 0.5


class GoneSwitch:
    """A switch that stopped answering its control channel."""

    def counter_read(self, name, index):
        raise ConnectionResetError("switch closed the control connection")


def test_a_monitor_whose_switch_stops_answering_stops_and_says_why():
    monitor = HeartbeatMonitor(GoneSwitch(), [2], poll=0.01).start()
    monitor._thread.join(timeout=5)
    assert not monitor._thread.is_alive()
    assert monitor.error == "ConnectionResetError: switch closed the control connection"
    monitor.stop()
