#!/usr/bin/env bash
# demo.sh shows falconnic end to end on one machine: it installs what is
# needed, builds falconnic and the guest image, starts a falconnic daemon
# with two NICs, boots two QEMU guests (TCG) on them and has them talk:
# ping, iperf3 and a 100 MB TCP transfer checked with SHA-256. Then RDMA:
# `falconnic perftest` boots two fresh guests whose falconnic.ko drives the
# NIC's RDMA function and runs unmodified perftest (ib_write_bw 64 KiB and
# ib_write_lat) between them, and `falconnic nvmf` runs the guest kernel's
# own RDMA consumers on it: an NVMe-oF target (nvmet-rdma) in one guest,
# nvme connect -t rdma and fio with verification in the other. Then NVMe
# over Falcon: NIC b0 exports a file as namespace 1, NIC a0 serves it as a
# vhost-user-blk disk; a guest makes an ext4 file system on it, writes a
# file, remounts and checks it, and runs fio with verification and a
# sequential read.
#
#   scripts/demo.sh            # the demo
#   scripts/demo.sh --stream   # the same over a plain QEMU stream link (baseline)
#
# If the daemon cannot serve NICs yet, the demo says so and uses the stream
# link. Everything it starts is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

link=falconnic
case "${1:-}" in
--stream) link=stream ;;
"") ;;
*) echo "usage: $0 [--stream]" >&2; exit 2 ;;
esac

say() { printf '\n== %s\n' "$*"; }

work=$(mktemp -d /tmp/falconnic-demo.XXXXXX)
pids=()
cleanup() {
	set +e
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say "installing dependencies (scripts/deps.sh: QEMU, kmod, cpio, Go modules)"
scripts/deps.sh

say "building falconnic"
go build -o "$work/falconnic" ./cmd/falconnic
fn="$work/falconnic"
state="$work/vms"

say "building the guest image (Debian kernel + u-root + rdma-core, perftest, fio, iperf3...; cached after the first time)"
"$fn" image build

macA=52:54:00:de:00:0a
macB=52:54:00:de:00:0b
nicA=() nicB=()
if [ "$link" = falconnic ]; then
	say "starting the falconnic daemon with two NICs"
	cat >"$work/daemon.json" <<JSON
{
  "control": "control.sock",
  "nics": [
    {"name": "a0", "socket": "a0.sock", "mac": "$macA"},
    {"name": "b0", "socket": "b0.sock", "mac": "$macB"}
  ],
  "nvme": {
    "namespaces": [{"nic": "b0", "nsid": 1, "backing": "$work/ns.img", "size": 268435456, "direct": true}],
    "disks": [{"name": "d0", "socket": "d0.sock", "nic": "a0", "target": "b0", "nsid": 1, "serial": "demo-d0"}]
  }
}
JSON
	"$fn" serve --config "$work/daemon.json" >"$work/daemon.log" 2>&1 &
	dpid=$!
	pids+=("$dpid")
	for _ in $(seq 1 100); do
		[ -S "$work/a0.sock" ] && [ -S "$work/b0.sock" ] && break
		kill -0 "$dpid" 2>/dev/null || break
		sleep 0.1
	done
	if [ -S "$work/a0.sock" ] && [ -S "$work/b0.sock" ]; then
		echo "daemon up (pid $dpid): $work/a0.sock $work/b0.sock"
		nicA=(--nic "$work/a0.sock,mac=$macA,ip=10.0.0.1/24")
		nicB=(--nic "$work/b0.sock,mac=$macB,ip=10.0.0.2/24")
	else
		echo "the daemon could not serve NICs:"
		sed 's/^/  /' "$work/daemon.log"
		echo "falling back to a plain QEMU stream link"
		link=stream
	fi
fi
if [ "$link" = stream ]; then
	nicA=(--net-stream "$work/link.sock,mac=$macA,ip=10.0.0.1/24,server=on")
	nicB=(--net-stream "$work/link.sock,mac=$macB,ip=10.0.0.2/24,server=off")
fi

# boot NAME ARGS...: start a VM in the background and wait until it is ready.
boot() {
	local name=$1
	shift
	"$fn" vm run --name "$name" --state "$state" "$@" >"$work/$name.log" 2>&1 &
	pids+=("$!")
	local pid=$!
	while ! grep -q "ready in" "$work/$name.log" 2>/dev/null; do
		if ! kill -0 "$pid" 2>/dev/null; then
			cat "$work/$name.log"
			exit 1
		fi
		sleep 0.2
	done
	grep "ready in" "$work/$name.log"
}

say "booting guests A and B under TCG (about 10 s each; link: $link)"
boot A "${nicA[@]}"
boot B "${nicB[@]}"

say "A pings B"
"$fn" vm exec A --state "$state" -- ping -c 3 10.0.0.2

say "iperf3 from A to B (5 s)"
"$fn" vm exec B --state "$state" -- iperf3 -s -1 -D
sleep 1
"$fn" vm exec A --state "$state" -- iperf3 -c 10.0.0.2 -t 5 | grep -E 'sender|receiver'

say "100 MB TCP transfer A → B, checked with SHA-256"
"$fn" vm exec B --state "$state" -- xfer recv -l :5001 >"$work/recv.out" &
rpid=$!
sent=$("$fn" vm exec A --state "$state" -- xfer send -n 104857600 10.0.0.2:5001)
wait "$rpid"
got=$(cat "$work/recv.out")
echo "sender:   $sent"
echo "receiver: $got"
if [ "$(echo "$sent" | awk '{print $2}')" != "$(echo "$got" | awk '{print $2}')" ]; then
	echo "demo: checksums differ" >&2
	exit 1
fi

say "results"
echo "link: $link; ping ok; transfer intact ($(echo "$got" | awk '{print $3}') on the receiver)"
"$fn" vm ls --state "$state"

if [ "$link" = falconnic ]; then
	say "RDMA: unmodified perftest between two guests on falconnic NICs (falconnic perftest)"
	# Free the CPU for the RDMA guests: stop A and B first.
	"$fn" vm stop A --state "$state" >/dev/null
	"$fn" vm stop B --state "$state" >/dev/null
	"$fn" perftest --state "$work/perftest" -- ib_write_bw -s 65536 -- ib_write_lat | tee "$work/perftest.out"
	bw=$(awk '$1 == 65536 && NF == 5 {print $4}' "$work/perftest.out")
	lat=$(awk '$1 == 2 && NF >= 9 {print $5}' "$work/perftest.out")
	say "RDMA results"
	echo "ib_write_bw 64 KiB: ${bw:-?} MB/s average; ib_write_lat 2 B: ${lat:-?} µs typical"
	echo "(Soft-RoCE between the same two TCG guests: about 22 MB/s and 455 µs; falconnic bench perftest measures both side by side)"

	say "NVMe-oF over RDMA: the guest kernel's nvmet-rdma target in B, nvme connect -t rdma in A, fio with verify (falconnic nvmf)"
	"$fn" nvmf --state "$work/nvmf" | tee "$work/nvmf.out" | grep -E 'IOPS=|err='
	if ! grep -q 'err= 0' "$work/nvmf.out"; then
		echo "demo: fio verification over nvme-rdma failed" >&2
		exit 1
	fi
	echo "nvme-rdma, 4 KiB randwrite QD16 with crc32c verify: write $(grep -o 'write: IOPS=[^,]*' "$work/nvmf.out" | head -1 | cut -d' ' -f2), read back $(grep -o 'read: IOPS=[^,]*' "$work/nvmf.out" | head -1 | cut -d' ' -f2), no errors"

	say "NVMe over Falcon: guest D's disk is namespace 1 of NIC b0 (a 256 MiB file), reached through NIC a0"
	boot D --disk "$work/d0.sock"
	"$fn" vm exec D --state "$state" -- sh -c "mkfs.ext4 -F -q /dev/vda && mkdir -p /mnt/d && mount -t ext4 /dev/vda /mnt/d &&
		head -c 33554432 /dev/urandom > /mnt/d/f && shasum -a 256 /mnt/d/f && umount /mnt/d &&
		echo 3 > /proc/sys/vm/drop_caches && mount -t ext4 /dev/vda /mnt/d && shasum -a 256 /mnt/d/f && umount /mnt/d" |
		tee "$work/ext4.out"
	if [ "$(awk 'length($1) == 64 {print $1}' "$work/ext4.out" | sort -u | wc -l)" != 1 ]; then
		echo "demo: the file on the NVMe disk read back differently after a remount" >&2
		exit 1
	fi
	"$fn" vm exec D --state "$state" -- fio --name=verify --filename=/dev/vda --direct=1 --ioengine=libaio \
		--rw=randwrite --bs=4k --iodepth=16 --size=32M --verify=crc32c --do_verify=1 | tee "$work/fio-verify.out" | grep -E 'IOPS=|err='
	if ! grep -q 'err= 0' "$work/fio-verify.out"; then
		echo "demo: fio verification on the NVMe disk failed" >&2
		exit 1
	fi
	"$fn" vm exec D --state "$state" -- fio --name=seqread --filename=/dev/vda --direct=1 --ioengine=libaio \
		--rw=read --bs=128k --iodepth=32 --size=256M --runtime=5 --time_based | tee "$work/fio-read.out" | grep -E 'IOPS='
	say "NVMe results"
	echo "ext4 on the NVMe-over-Falcon disk: 32 MiB file intact after a remount ($(awk 'length($1) == 64 {print substr($1, 1, 16); exit}' "$work/ext4.out")…)"
	echo "fio 4 KiB randwrite QD16 with crc32c verify: write $(grep -o 'write: IOPS=[^,]*' "$work/fio-verify.out" | head -1 | cut -d' ' -f2), read back $(grep -o 'read: IOPS=[^,]*' "$work/fio-verify.out" | head -1 | cut -d' ' -f2), no errors"
	echo "fio 128 KiB sequential read QD32: $(grep -o 'BW=[^ ]*' "$work/fio-read.out" | head -1)"
	echo "(falconnic bench nvme compares the disk with QEMU's own virtio-blk on the same file)"
fi
say "stopping guests$([ "$link" = falconnic ] && echo " and the daemon")"
