#!python
# The `blockfs` command of the wheel that `make wheel` builds: scripts/wheel.sh puts this file in
# the wheel as blockfs-VERSION.data/scripts/blockfs, and pip installs it on the environment's PATH
# (bin/) with its first line pointing at the environment's python. It runs the binary inside the
# installed blockfs package (blockfs/_bin/blockfs, which blockfs.Mount runs too unless $BLOCKFS_BIN
# names another), found without importing the package, which would import numpy: the command costs
# the interpreter's start and needs nothing but Python. The binary replaces this process (exec), so
# signals reach it directly.
import importlib.util
import os
import sys

spec = importlib.util.find_spec("blockfs")
exe = os.path.join(os.path.dirname(spec.origin), "_bin", "blockfs") if spec and spec.origin else ""
if not exe or not os.access(exe, os.X_OK):
    where = exe or f"no blockfs package for {sys.executable}"
    sys.exit(f"blockfs: the blockfs package has no binary ({where}): reinstall the wheel (make wheel; pip install dist/blockfs-*.whl)")
os.execv(exe, [exe] + sys.argv[1:])
