"""Which blockfs executable the package runs (blockfs.Mount, and the wheel's `blockfs` command)."""
from __future__ import annotations

import os
import shutil

# Where the wheel that `make wheel` builds puts the binary, inside the package; a source install
# (pip install ./python) has none there.
PACKAGED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_bin", "blockfs")


def binary() -> str:
    """The blockfs executable that Mount runs, the first of:

    1. ``$BLOCKFS_BIN``, when it is set (it must be an executable file);
    2. the binary shipped inside the package, ``blockfs/_bin/blockfs``: the wheel that
       ``make wheel`` builds carries it, and its ``blockfs`` command runs the same file;
    3. ``blockfs`` on PATH.

    Returns
    -------
    str
        The executable's path.

    Raises
    ------
    FileNotFoundError
        When ``$BLOCKFS_BIN`` or the shipped binary is not executable, or when there is none
        (a source install, ``pip install ./python``, carries no binary): the message says to
        install the wheel or put blockfs on PATH.
    """
    b = os.environ.get("BLOCKFS_BIN")
    if b:
        if not os.access(b, os.X_OK):
            raise FileNotFoundError(f"BLOCKFS_BIN={b} is not an executable file")
        return b
    if os.path.exists(PACKAGED):
        if not os.access(PACKAGED, os.X_OK):
            raise FileNotFoundError(f"{PACKAGED} is not executable (the wheel was unpacked without its modes?): reinstall the wheel with pip")
        return PACKAGED
    b = shutil.which("blockfs")
    if not b:
        raise FileNotFoundError("no blockfs executable: this blockfs package carries none (a source install); install the wheel "
                                "(make wheel; pip install dist/blockfs-*.whl), put blockfs on PATH (make build writes bin/blockfs) "
                                "or set BLOCKFS_BIN")
    return b
