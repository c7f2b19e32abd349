"""Prebuilt frames handed to the kernel many at a time, with sendmmsg(2).

A source written in Python spends about as long in its loop around one
``send()`` as the kernel spends sending the frame: near 100,000 frames a
second it, not the switch, sets the pace, and a capacity measured there is
only the source's.  ``FrameBurst`` holds a stream's frames in one buffer
with a ready ``mmsghdr`` per frame, so ``send(fd, first, count)`` is one
system call for a whole burst.  Python's socket module has no sendmmsg, so
it is called through ctypes; the arrays are laid out with numpy, checked
against ctypes' own idea of the structures.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os

import numpy as np


class _IoVec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


class _MsgHdr(ctypes.Structure):
    _fields_ = [("msg_name", ctypes.c_void_p), ("msg_namelen", ctypes.c_uint32),
                ("msg_iov", ctypes.c_void_p), ("msg_iovlen", ctypes.c_size_t),
                ("msg_control", ctypes.c_void_p), ("msg_controllen", ctypes.c_size_t),
                ("msg_flags", ctypes.c_int)]


class _MMsgHdr(ctypes.Structure):
    _fields_ = [("msg_hdr", _MsgHdr), ("msg_len", ctypes.c_uint)]


WORD = 8
#: Where msg_iov and msg_iovlen sit in an mmsghdr, in 8-byte words (LP64 Linux).
IOV_AT, IOVLEN_AT = _MsgHdr.msg_iov.offset // WORD, _MsgHdr.msg_iovlen.offset // WORD
MMSG_WORDS = ctypes.sizeof(_MMsgHdr) // WORD
#: The kernel takes at most this many messages per call (UIO_MAXIOV).
MAX_PER_CALL = 1024

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.sendmmsg.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int]
_libc.sendmmsg.restype = ctypes.c_int


class FrameBurst:
    """A list of frames, sent any run of them at once by one sendmmsg call."""

    def __init__(self, frames: list[bytes]):
        assert ctypes.sizeof(_MMsgHdr) % WORD == 0 and ctypes.sizeof(_IoVec) == 2 * WORD
        lengths = np.fromiter((len(f) for f in frames), dtype=np.uint64, count=len(frames))
        self._data = ctypes.create_string_buffer(b"".join(frames), max(1, int(lengths.sum())))
        offsets = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.uint64) if len(frames) else lengths
        self._iov = np.empty((len(frames), 2), dtype=np.uint64)
        self._iov[:, 0] = ctypes.addressof(self._data) + offsets
        self._iov[:, 1] = lengths
        self._msgs = np.zeros((len(frames), MMSG_WORDS), dtype=np.uint64)
        self._msgs[:, IOV_AT] = self._iov.ctypes.data + np.arange(len(frames), dtype=np.uint64) * 2 * WORD
        self._msgs[:, IOVLEN_AT] = 1
        self._base = self._msgs.ctypes.data

    def __len__(self) -> int:
        return len(self._msgs)

    def send(self, fd: int, first: int, count: int) -> None:
        """Send frames ``first`` .. ``first + count - 1`` on the socket ``fd``
        (blocking: a full send buffer makes the caller wait, not fail)."""
        done = 0
        while done < count:
            n = _libc.sendmmsg(fd, self._base + (first + done) * MMSG_WORDS * WORD, min(count - done, MAX_PER_CALL), 0)
            if n < 0:
                err = ctypes.get_errno()
                if err == errno.EINTR:
                    continue
                raise OSError(err, os.strerror(err))
            done += n
