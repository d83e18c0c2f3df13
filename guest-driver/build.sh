#!/bin/sh
# build.sh builds falconnic.ko against Debian's linux-headers-6.1.0-56-amd64
# (the guest kernel) and prints the path of the module.  Warnings are errors.
# Usage: guest-driver/build.sh [OUTDIR]   (default: build in place)
set -eu
KVER=${KVER:-6.1.0-56-amd64}
KDIR=${KDIR:-/usr/src/linux-headers-$KVER}
SRC=$(cd "$(dirname "$0")" && pwd)
if [ ! -d "$KDIR" ]; then
	echo "build.sh: $KDIR missing; install linux-headers-$KVER (scripts/deps.sh)" >&2
	exit 1
fi
OUT=${1:-$SRC}
if [ "$OUT" != "$SRC" ]; then
	# Build in a copy so the source tree stays clean.
	mkdir -p "$OUT"
	cp "$SRC"/Kbuild "$SRC"/*.c "$SRC"/*.h "$OUT"/
	mkdir -p "$OUT/include/uapi"
	cp "$SRC"/include/uapi/falconnic.h "$OUT/include/uapi/"
fi
make -s -C "$KDIR" M="$OUT" modules >&2
echo "$OUT/falconnic.ko"
