#!/usr/bin/env sh
# Installs the Debian packages of scripts/deps.txt (the one list of what the tests need) that
# are missing. As root with apt-get it installs them; otherwise it names the missing ones and
# the tests that need them skip saying so (or, under BLOCKFS_REQUIRE_FUSE=1, fail).
#   scripts/deps.sh          install what is missing (root), else name it
#   scripts/deps.sh --list   print the packages, one a line
set -eu
list="$(dirname "$0")/deps.txt"
pkgs="$(sed -e 's/#.*//' "$list" | awk 'NF { print $1 }')"
if [ "${1:-}" = "--list" ]; then
	echo "$pkgs"
	exit 0
fi
missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
	echo "installing Debian packages (scripts/deps.txt):$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends $missing >/dev/null
else
	echo "blockfs: the tests use these Debian packages (scripts/deps.txt), not installed here:$missing (apt-get install them as root)"
fi
