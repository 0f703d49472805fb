#!/usr/bin/env python3
"""Hostile and broken clients of the shared-memory path, written from docs/SHM.md alone (raw
packets, no blockfs code), run by test/shm_test.go (TestShmHostileClients):

  shm_hostile.py SOCKET MOUNT

Each case sends what a careless or malicious client might and checks the daemon's answer: a
buffer that is not a sealed memfd, one the daemon cannot seal, one whose pages are not there
(holes, pages only fallocated, pages fallocated past the end in place of the front's), a
hugetlb memfd, holes punched in a mapped buffer, descriptors sent with an empty packet, sizes and counts past the
bounds, reads outside a buffer or of paths outside the tree, malformed packets; then a flood of
connections past the daemon's bound. Afterwards a well-behaved client still reads the file's
bytes. Prints "ok ..." or exits non-zero with what went wrong.
"""
import ctypes
import errno
import fcntl
import json
import mmap
import os
import resource
import socket
import struct
import sys
import tempfile

MAGIC = 0x31534642
HDR = struct.Struct("<IIIIQQQ")
REP = struct.Struct("<IIQ")
FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE = 0x01, 0x02


def conn(addr):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect("\0" + addr[1:])
    return s


def ask(s, op, buf=0, a=0, b=0, c=0, path=b"", fds=None, raw=None):
    pkt = raw if raw is not None else HDR.pack(MAGIC, op, buf, len(path), a, b, c) + path
    if fds:
        s.sendmsg([pkt], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack(f"{len(fds)}i", *fds))])
    else:
        s.send(pkt)
    r = s.recv(4096)
    if not r:
        return None, 0, "closed"
    magic, err, n = REP.unpack_from(r)
    assert magic == MAGIC, hex(magic)
    return err, n, r[REP.size:].decode()


def memfd(size, seal=True, touch=True):
    fd = os.memfd_create("hostile", os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, size)
    if seal:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
    mm = mmap.mmap(fd, size)
    if touch:
        mm[::mmap.PAGESIZE] = b"\0" * len(range(0, size, mmap.PAGESIZE))
    return fd, mm


def expect(what, got, want_errno, words=""):
    err, _, msg = got
    assert err == want_errno, f"{what}: errno {err} ({msg}), want {want_errno}"
    assert words in msg, f"{what}: {msg!r} does not say {words!r}"


def main(addr, mount):
    size = 1 << 20
    s = conn(addr)
    expect("hello", ask(s, 4), 0)
    fd, _ = memfd(size, seal=False)
    expect("unsealed memfd", ask(s, 1, 1, size, fds=[fd]), errno.EINVAL, "sealed with F_SEAL_SHRINK")
    with tempfile.TemporaryFile() as f:
        f.truncate(size)
        expect("a regular file", ask(s, 1, 1, size, fds=[f.fileno()]), errno.EINVAL, "not a memfd")
    fd, _ = memfd(size, touch=False)
    expect("pages not there", ask(s, 1, 1, size, fds=[fd]), errno.EINVAL, "not all in memory")
    libc = ctypes.CDLL(None, use_errno=True)
    fd, _ = memfd(size, touch=False)
    os.posix_fallocate(fd, 0, size)
    expect("pages fallocated, never written", ask(s, 1, 1, size, fds=[fd]), errno.EINVAL, "byte 0 of")
    # Blocks enough, but past the end: the buffer's own bytes a hole the daemon would fill.
    fd = os.memfd_create("hostile", os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, size)
    r = libc.fallocate(fd, FALLOC_FL_KEEP_SIZE, ctypes.c_long(size), ctypes.c_long(size))
    assert r == 0, f"fallocate past the end: {os.strerror(ctypes.get_errno())}"
    mm = mmap.mmap(fd, size)
    mm[size // 2:size:mmap.PAGESIZE] = b"\0" * len(range(size // 2, size, mmap.PAGESIZE))
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)
    assert os.fstat(fd).st_blocks * 512 >= size
    expect("a hole in front, pages past the end", ask(s, 1, 1, size, fds=[fd]), errno.EINVAL, "byte 0 of")
    fd = os.memfd_create("hostile", os.MFD_ALLOW_SEALING | os.MFD_HUGETLB)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)
    os.ftruncate(fd, 2 << 20)
    expect("a hugetlb memfd", ask(s, 1, 1, 2 << 20, fds=[fd]), errno.EINVAL, "not of shared memory")
    fd, _ = memfd(size)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SEAL)
    expect("a memfd sealed with F_SEAL_SEAL (the daemon could not seal it)", ask(s, 1, 1, size, fds=[fd]), errno.EINVAL,
           "leave those to the daemon")
    fd, mm = memfd(size)
    expect("no descriptor", ask(s, 1, 1, size), errno.EINVAL, "0 descriptors")
    expect("larger than the memfd", ask(s, 1, 1, 2 * size, fds=[fd]), errno.EINVAL, "fewer than")
    expect("0 bytes", ask(s, 1, 1, 0, fds=[fd]), errno.ENOSPC)
    expect("past the bound", ask(s, 1, 1, 5 << 30, fds=[fd]), errno.ENOSPC, "at most")
    expect("two descriptors", ask(s, 1, 1, size, fds=[fd, fd]), errno.EINVAL, "2 descriptors")
    os.lseek(fd, 123, os.SEEK_SET)
    expect("map", ask(s, 1, 1, size, fds=[fd]), 0)
    assert os.lseek(fd, 0, os.SEEK_CUR) == 123, "the daemon's checks moved the memfd's file offset"
    # Mapped, the buffer is sealed against future writers: its pages cannot be freed, so the
    # daemon's copies never allocate them again (charged to the daemon). The client's own
    # mapping, made before, still writes.
    r = libc.fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, ctypes.c_long(0), ctypes.c_long(size))
    assert r == -1 and ctypes.get_errno() == errno.EPERM, f"punching a hole in a mapped buffer: {r}, {os.strerror(ctypes.get_errno())}"
    try:
        mm.madvise(mmap.MADV_REMOVE)
        raise AssertionError("MADV_REMOVE freed a mapped buffer's pages")
    except PermissionError:
        pass
    assert os.fstat(fd).st_blocks * 512 >= size, "the mapped buffer lost pages"
    mm[0:4] = b"mine"
    expect("the same buffer again", ask(s, 1, 1, size, fds=[fd]), errno.EEXIST)
    for i in range(2, 9):
        f2, _ = memfd(4096)
        expect(f"buffer {i}", ask(s, 1, i, 4096, fds=[f2]), 0)
        os.close(f2)
    f2, _ = memfd(4096)
    expect("a ninth buffer", ask(s, 1, 9, 4096, fds=[f2]), errno.ENOSPC, "buffers mapped")
    expect("read past the buffer", ask(s, 3, 1, size - 10, 0, 100, b"epoch-0000"), errno.EINVAL, "do not fit")
    expect("read with a wrapping length", ask(s, 3, 1, 10, 0, 2**64 - 5, b"epoch-0000"), errno.EINVAL, "do not fit")
    expect("read into no buffer", ask(s, 3, 77, 0, 0, 10, b"epoch-0000"), errno.ENOENT)
    for p in (b"../epoch-0000", b"/etc/passwd", b".blockfs/info.json", b"shard-0-of-0/epoch-0000", b"shard-1-of-1/epoch-0000",
              b"epoch-00000", b"epoch-0000/x", b"shard-0-of-2/shard-0-of-2/epoch-0000", b"epoch-0000\0"):
        expect(f"read {p!r}", ask(s, 3, 1, 0, 0, 10, p), errno.ENOENT, "no such file")
    expect("read past the file's end", ask(s, 3, 1, 0, 1 << 40, 10, b"epoch-0000"), 0)
    expect("unmap an unknown buffer", ask(s, 2, 99), errno.ENOENT)
    expect("unknown op", ask(s, 42), errno.EINVAL, "unknown op")
    expect("a path longer than the packet says", ask(s, 0, raw=HDR.pack(MAGIC, 3, 1, 5, 0, 0, 10) + b"epoch-0000"),
           errno.EINVAL, "malformed")
    assert s.recv(4096) == b"", "the daemon closes a connection that sent a malformed packet"
    s = conn(addr)
    expect("bad magic", ask(s, 0, raw=struct.pack("<I", 0xdead) + bytes(36)), errno.EINVAL, "magic")
    s = conn(addr)
    expect("a short packet", ask(s, 0, raw=b"BFS1"), errno.EINVAL, "malformed")

    # Descriptors sent with an empty packet (which the daemon reads as the end): closed, not kept.
    def open_fds():
        with open(os.path.join(mount, ".blockfs", "stats.json")) as f:
            return json.load(f)["open_fds"]
    before = open_fds()
    for _ in range(40):
        c = conn(addr)
        fds = [memfd(4096)[0] for _ in range(8)]
        c.sendmsg([b""], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("8i", *fds))])
        for fd in fds:
            os.close(fd)
        c.settimeout(5)
        assert c.recv(4096) == b"", "the daemon answered an empty packet"
        c.close()
    after = open_fds()
    assert after < before + 40, f"the daemon's open descriptors went from {before} to {after}: empty packets' kept"

    # A flood of connections: past the daemon's bound they are closed at once, and it serves on.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    flood = []
    for _ in range(1100):
        try:
            flood.append(conn(addr))
        except OSError:
            break
    refused = 0
    for c in flood:
        c.settimeout(5)
        try:
            err, _, _ = ask(c, 4)
            refused += err is None
        except OSError:
            refused += 1
    for c in flood:
        c.close()
    assert refused >= len(flood) - 1024, f"{refused} of {len(flood)} connections refused"

    # A well-behaved client still reads the file's bytes.
    s = conn(addr)
    fd, mm = memfd(size)
    expect("map", ask(s, 1, 0, size, fds=[fd]), 0)
    err, n, msg = ask(s, 3, 0, 100, 12345, 5000, b"epoch-0001")
    assert err == 0 and n == 5000, (err, n, msg)
    with open(os.path.join(mount, "epoch-0001"), "rb") as f:
        f.seek(12345)
        assert mm[100:5100] == f.read(5000), "the bytes differ from the file's"
    print(f"ok: every hostile request refused with its errno; {refused} of {len(flood)} flood connections refused; "
          "the path serves on")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
