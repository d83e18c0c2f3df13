#!/usr/bin/env bash
# deps.sh installs what falconnic's builds and tests need on a Debian 12 host:
# Debian packages (QEMU, kmod, cpio, kernel headers and make for the guest driver; promtool,
# tshark and tmux for the observability tests) and
# the Go modules. Idempotent; retries apt on lock contention.
set -euo pipefail

APT_PACKAGES=(
	qemu-system-x86   # the VMs (TCG only)
	qemu-utils
	kmod              # depmod for the guest image's modules.dep
	cpio
	iproute2
	iperf3
	linux-headers-6.1.0-56-amd64   # builds guest-driver/falconnic.ko (pulls in gcc-12)
	make                           # guest-driver/build.sh: kbuild (not a dependency of the headers)
	prometheus                     # promtool: the metrics test checks a scrape with it
	tshark                         # the Wireshark dissector test (tools/wireshark) decodes a capture with it
	tmux                           # the `falconnic top` test drives it in a terminal
)

need=()
for p in "${APT_PACKAGES[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done

# Image builds download Debian packages by name: make sure the package lists
# know the guest kernel even when nothing needs installing.
policy=$(apt-cache policy linux-image-6.1.0-56-amd64 2>/dev/null || true)
if ! grep -q 'Candidate: [0-9]' <<<"$policy"; then
	need_update=1
fi

if ((${#need[@]})) || [ -n "${need_update:-}" ]; then
	echo "deps: installing ${need[*]:-nothing (refreshing package lists)}" >&2
	SUDO=""
	[ "$(id -u)" -eq 0 ] || SUDO=sudo
	for try in 1 2 3 4 5; do
		if $SUDO apt-get update -q >/dev/null &&
			{ ((${#need[@]} == 0)) || DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q \
				-o DPkg::Lock::Timeout=120 "${need[@]}" >/dev/null; }; then
			break
		fi
		[ "$try" -eq 5 ] && { echo "deps: apt-get install failed" >&2; exit 1; }
		echo "deps: apt-get failed (try $try), retrying" >&2
		sleep $((try * 5))
	done
fi

cd "$(dirname "$0")/.."
go mod download
