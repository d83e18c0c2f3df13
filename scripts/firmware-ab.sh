#!/usr/bin/env bash
# firmware-ab.sh compares two firmwares on the same pair of guests: each
# round swaps both NICs' firmware at run time (falconnic control
# nic.firmware) to A, runs one perftest program, then to B and runs it
# again; the order alternates from round to round, so drift on a shared
# host falls on both sides. It prints one line per run: the round, the
# firmware, perftest's result line and what the Falcon ports' counters did
# (resends on RTO, spurious RTO episodes, deadlines restarted after host
# stalls, late timer wakes, busy goroutines the host stopped, delay
# samples kept from the RUE for a stall, Swift's window cuts, duplicates
# the receiver dropped).
#
#   falconnic perftest --keep --state DIR -- ib_write_bw -s 65536 -n 500 &   # a kept pair (one daemon)
#   scripts/firmware-ab.sh DIR 6 swift fixed -- ib_write_bw -s 65536 -n 5000
#   scripts/firmware-ab.sh DIR 6 fixed:1 fixed:2 -- ib_write_bw -s 65536 -n 5000   # A/A: the host's noise
#
# A firmware is swift or fixed; a suffix after ":" only labels it (A/A
# runs). LABEL=JSON gives the firmware object itself (port.FirmwareSpec),
# e.g. 'swift32={"name": "swift", "max_fcwnd": 32}'. FALCONNIC names the falconnic binary (default: falconnic on PATH,
# else ./falconnic). Each run has a 3-minute deadline.
set -euo pipefail

if [ $# -lt 6 ] || [ "$5" != "--" ]; then
	echo "usage: $0 STATE_DIR ROUNDS FIRMWARE_A FIRMWARE_B -- PROGRAM ARGS..." >&2
	exit 2
fi
state=$1 rounds=$2 fw_a=$3 fw_b=$4
shift 5
fn=${FALCONNIC:-$(command -v falconnic || echo ./falconnic)}
vms=$state/vms
# The daemons of the pair: one (d1, both NICs) or two (d1 with a0, d2 with b0).
socks=("$state/d1/control.sock")
[ -S "$state/d2/control.sock" ] && socks+=("$state/d2/control.sock")
for s in "${socks[@]}"; do
	[ -S "$s" ] || { echo "$0: no daemon at $s: start a kept pair first (falconnic perftest --keep --state $state)" >&2; exit 1; }
done
counters=(retx_rto rto_spurious rto_resumed port_timer_late port_busy_stalls delay_stalled decreases rx_drop_dup_old)

# snapshot prints the sum over every NIC of each counter, one per line.
snapshot() {
	for s in "${socks[@]}"; do "$fn" control --socket "$s" status; done |
		awk -v names="${counters[*]}" '
			BEGIN { n = split(names, k, " ") }
			{ for (i = 1; i <= n; i++) while (match($0, "\"" k[i] "\": *[0-9]+")) {
				v = substr($0, RSTART, RLENGTH); sub(/.*: */, "", v); sum[i] += v
				$0 = substr($0, RSTART + RLENGTH) } }
			END { for (i = 1; i <= n; i++) print sum[i] + 0 }'
}

swap() {
	local spec="{\"name\": \"${1%%:*}\"}" nic sock
	[[ $1 == *=* ]] && spec=${1#*=}
	for nic in a0 b0; do
		sock=${socks[0]}
		[ ${#socks[@]} -gt 1 ] && [ $nic = b0 ] && sock=${socks[1]}
		"$fn" control --socket "$sock" nic.firmware "{\"nic\": \"$nic\", \"firmware\": $spec}" >/dev/null
	done
}

for ((r = 1; r <= rounds; r++)); do
	order=("$fw_a" "$fw_b")
	((r % 2)) || order=("$fw_b" "$fw_a")
	for fw in "${order[@]}"; do
		swap "$fw"
		mapfile -t before < <(snapshot)
		srvlog=$(mktemp "${TMPDIR:-/tmp}/firmware-ab-server.XXXXXX")
		timeout 180 "$fn" vm exec B --state "$vms" --timeout 170s -- "$@" >"$srvlog" 2>&1 &
		server=$!
		sleep 2
		out=$(timeout 180 "$fn" vm exec A --state "$vms" --timeout 170s -- "$@" 10.0.0.2 2>&1) || true
		wait $server || true
		mapfile -t after < <(snapshot)
		line=$(grep -E '^ +[0-9]+ +[0-9]+ ' <<<"$out" | tail -1 | tr -s ' \t' ' ' || true)
		if [ -z "$line" ]; then
			# Keep what the client said: a failure is a finding, not a sample to drop.
			log=$(mktemp "${TMPDIR:-/tmp}/firmware-ab.XXXXXX")
			printf '%s\n' "$out" >"$log"
			line="FAILED (client output: $log, server output: $srvlog; last lines: $(tail -1 <<<"$out") / $(tail -1 "$srvlog"))"
		else
			rm -f "$srvlog"
		fi
		deltas=""
		for i in "${!counters[@]}"; do deltas+=" ${counters[$i]}=$((after[i] - before[i]))"; done
		echo "round $r ${fw%%=*} $1 |$line |$deltas"
	done
done
