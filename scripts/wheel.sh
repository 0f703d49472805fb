#!/usr/bin/env bash
# make wheel: a platform wheel of the Python package (python/) that carries the blockfs binary, so
# that `pip install dist/blockfs-*.whl` gives the `blockfs` command and blockfs.Mount with no Go
# toolchain on the machine that installs it.
#
#   scripts/wheel.sh [OUT_DIR]    writes OUT_DIR/blockfs-VERSION-py3-none-PLATFORM.whl (default dist/)
#
# The wheel is the one setuptools builds from python/ (pyproject.toml: name, version, dependencies,
# package files; the version is python/blockfs/__init__.py's), plus
#   blockfs/_bin/blockfs-tables      the same built with -tags tables: pack runs it for Parquet and Arrow
#   blockfs/_bin/blockfs             the binary: CGO_ENABLED=0 go build -trimpath, static and free of
#                                    this machine's paths, its --version the package's; blockfs.binary()
#                                    finds it
#   blockfs-VERSION.data/scripts/blockfs
#                                    the `blockfs` command (scripts/wheel-command.py): runs that binary
# and it is tagged py3-none-PLATFORM: any Python 3, one OS and CPU, the Go target's (go env GOOS
# GOARCH; GOARCH=arm64 make wheel cross-builds). Builds offline with Debian's python3-setuptools,
# python3-wheel and python3-pip ($PYTHON, default /usr/bin/python3). SOURCE_DATE_EPOCH (default: the
# last commit's time) dates the files, so the same tree gives the same wheel.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-dist}
GO=${GO:-go}
PYTHON=${PYTHON:-/usr/bin/python3}

fail() {
	echo "blockfs: $*" >&2
	exit 1
}

goos=$($GO env GOOS)
goarch=$($GO env GOARCH)
case "$goos/$goarch" in
linux/amd64) plat=linux_x86_64 ;;
linux/arm64) plat=linux_aarch64 ;;
linux/ppc64le) plat=linux_ppc64le ;;
linux/s390x) plat=linux_s390x ;;
linux/riscv64) plat=linux_riscv64 ;;
*) fail "make wheel builds for Linux on amd64, arm64, ppc64le, s390x or riscv64 (blockfs is a Linux FUSE filesystem), not $goos/$goarch" ;;
esac
"$PYTHON" -c 'import setuptools, wheel, pip' 2>/dev/null ||
	fail "make wheel needs setuptools, wheel and pip in $PYTHON (Debian: apt-get install python3-setuptools python3-wheel python3-pip; or PYTHON=...)"
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# setuptools builds inside its source tree (build/, *.egg-info), and would pack a stale build/lib:
# build from a clean copy.
cp -r python "$tmp/src"
rm -rf "$tmp/src/build" "$tmp"/src/*.egg-info
"$PYTHON" -m pip wheel --quiet --no-index --no-build-isolation --no-deps --wheel-dir "$tmp/pure" "$tmp/src"
"$PYTHON" -m wheel unpack --dest "$tmp/unpacked" "$tmp"/pure/blockfs-*-py3-none-any.whl >/dev/null
root=$(echo "$tmp"/unpacked/blockfs-*)
version=${root##*/blockfs-}

mkdir -p "$root/blockfs/_bin" "$root/blockfs-$version.data/scripts"
CGO_ENABLED=0 GOOS=$goos GOARCH=$goarch $GO build -trimpath -ldflags "-s -w -X main.version=$version" \
	-o "$root/blockfs/_bin/blockfs" ./cmd/blockfs
# blockfs-tables: the same command with apache/arrow-go linked in, which pack runs to read
# Parquet and Arrow (the daemon stays without its resident memory; pack/samplepipe.go).
CGO_ENABLED=0 GOOS=$goos GOARCH=$goarch $GO build -trimpath -tags tables -ldflags "-s -w -X main.version=$version" \
	-o "$root/blockfs/_bin/blockfs-tables" ./cmd/blockfs
install -m 0755 scripts/wheel-command.py "$root/blockfs-$version.data/scripts/blockfs"
# A platform wheel: its tag says where the binary runs, and it installs in platlib.
sed -i -e "s/^Tag: .*/Tag: py3-none-$plat/" -e "s/^Root-Is-Purelib: .*/Root-Is-Purelib: false/" \
	"$root/blockfs-$version.dist-info/WHEEL"

whl="$out/blockfs-$version-py3-none-$plat.whl"
mkdir -p "$out"
rm -f "$whl"
"$PYTHON" -m wheel pack --dest-dir "$out" "$root" >/dev/null # writes RECORD with every file's hash
[ -f "$whl" ] || fail "wheel pack did not write $whl"
echo "$whl ($(du -h "$whl" | cut -f1); blockfs $version for $goos/$goarch; pip install $whl)"
