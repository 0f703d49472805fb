#!/usr/bin/env sh
# Installs the Debian packages the tests use, if any is missing: fuse3 (fusermount3 for
# non-root mounts), python3 with numpy and torch (the PyTorch tests), venv, pip, setuptools and wheel
# (the Python package and its wheel installed with no index), h5py (blockfs.hdf5), dask and distributed (blockfs.pack_parallel's
# LocalCluster tests), mypy (make typecheck) and dataset-fashion-mnist
# (the order-quality experiment). As root with apt-get it installs them; otherwise it says which
# are missing and the tests that need them skip (or, under BLOCKFS_REQUIRE_FUSE=1, fail).
set -eu
pkgs="fuse3 python3 python3-numpy python3-torch python3-h5py python3-dask python3-distributed python3-mypy python3-venv python3-pip python3-setuptools python3-wheel dataset-fashion-mnist"
missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
	echo "installing Debian packages:$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends $missing >/dev/null
else
	echo "blockfs: the tests use these Debian packages, not installed here:$missing (apt-get install them as root)"
fi
