"""The kernel's table of this process's mounts (/proc/self/mountinfo): what is mounted where,
read without touching the mount points themselves (a stat of a mount whose daemon is stopped
or hung waits for that daemon), and which user made a blockfs mount."""
from __future__ import annotations

import os
import re
from typing import List, Optional, Tuple

from ._files import mount_path
from ._types import MountPath


def mountinfo() -> Optional[List[Tuple[str, str, str]]]:
    """This process's mounts, from /proc/self/mountinfo in its order (a later one over an earlier
    at the same point): each one's mount point (octal escapes such as \\040 decoded), file
    system type and superblock options; None where it cannot be read."""
    try:
        with open("/proc/self/mountinfo", "rb") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    out: List[Tuple[str, str, str]] = []
    for line in lines:
        fields = line.split(b" ")
        sep = fields.index(b"-", 6) if b"-" in fields[6:] else -1
        if sep < 0 or len(fields) < sep + 4:
            continue
        out.append((unescape_mountinfo(fields[4]), os.fsdecode(fields[sep + 1]), os.fsdecode(fields[sep + 3])))
    return out


def unescape_mountinfo(field: bytes) -> str:
    """A mountinfo field with its octal escapes (\\040 for a space) decoded."""
    return os.fsdecode(re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m.group(1), 8)]), field))


def blockfs_owner(path: MountPath) -> Optional[int]:
    """The uid that made the blockfs mount at path (its FUSE connection's user_id), or -1 where
    path is no fuse.blockfs mount (a folder whose .blockfs/info.json anyone who can write
    there could have made); None where /proc/self/mountinfo cannot be read."""
    entries = mountinfo()
    if entries is None:
        return None
    real = os.path.realpath(mount_path(path))
    at = [e for e in entries if e[0] == real]
    if not at or at[-1][1] != "fuse.blockfs":
        return -1
    for opt in at[-1][2].split(","):
        if opt.startswith("user_id=") and opt[8:].isdigit():
            return int(opt[8:])
    return -1
