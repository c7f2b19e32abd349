"""``FrameBurst``: one sendmmsg call hands the kernel a run of prebuilt frames, in order."""
import socket
import threading

import pytest

from testbed.emulation.burst import MAX_PER_CALL, FrameBurst

pytestmark = pytest.mark.unit


def received(sock: socket.socket, count: int) -> tuple[threading.Thread, list[bytes]]:
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.extend(sock.recv(4096) for _ in range(count)))
    reader.start()
    return reader, got


@pytest.mark.parametrize("first, count", [(0, 1), (7, 300), (3, MAX_PER_CALL + 476)])
def test_a_burst_sends_exactly_its_frames_in_order(first, count):
    frames = [bytes([i % 251]) * (60 + i % 13) + i.to_bytes(4, "big") for i in range(2000)]
    burst = FrameBurst(frames)
    sender, receiver = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    with sender, receiver:
        reader, got = received(receiver, count)
        burst.send(sender.fileno(), first, count)      # blocks while the reader drains: all or an error
        reader.join(timeout=30)
        assert got == frames[first:first + count]
        receiver.setblocking(False)
        with pytest.raises(BlockingIOError):
            receiver.recv(4096)                        # nothing beyond the run


def test_a_closed_socket_is_an_error_not_a_silent_loss():
    burst = FrameBurst([b"x" * 60] * 4)
    sender, receiver = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    receiver.close()
    with sender, pytest.raises(OSError):
        burst.send(sender.fileno(), 0, 4)
