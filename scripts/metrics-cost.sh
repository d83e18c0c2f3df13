#!/usr/bin/env bash
# metrics-cost.sh measures the CPU a Prometheus scrape costs the daemon:
# `falconnic serve` with two NICs, a namespace and a disk, 60 s idle, then
# 60 s with one scrape of /metrics a second; the difference of the
# process's CPU time (utime+stime) is the scrapes' share of a core.
#
#   scripts/metrics-cost.sh [PORT]
set -euo pipefail
cd "$(dirname "$0")/.."
port=${1:-19478}
dir=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
go build -o "$dir/falconnic" ./cmd/falconnic
cat >"$dir/cfg.json" <<JSON
{
  "control": "ctl.sock",
  "nics": [
    {"name": "host", "socket": "host.sock", "mac": "52:54:00:00:00:01"},
    {"name": "store", "socket": "store.sock", "mac": "52:54:00:00:00:02"}
  ],
  "nvme": {
    "namespaces": [{"nic": "store", "nsid": 1, "backing": "memory", "size": 4194304}],
    "disks": [{"name": "d0", "socket": "d0.sock", "nic": "host", "target": "store", "nsid": 1}]
  },
  "metrics": {"listen": "127.0.0.1:$port"}
}
JSON
"$dir/falconnic" serve --config "$dir/cfg.json" >"$dir/serve.log" 2>&1 &
pid=$!
sleep 5
cpu() { awk '{print $14+$15}' "/proc/$pid/stat"; }
hz=$(getconf CLK_TCK)
a=$(cpu); sleep 60; b=$(cpu)
for _ in $(seq 60); do curl -s -o /dev/null "127.0.0.1:$port/metrics"; sleep 1; done
c=$(cpu)
echo "daemon CPU: idle 60 s $((b - a)) ticks, 60 s with 60 scrapes $((c - b)) ticks (CLK_TCK $hz)"
awk -v i=$((b - a)) -v s=$((c - b)) -v hz="$hz" 'BEGIN { printf "scrapes at 1/s: %.3f %% of a core\n", 100 * (s - i) / hz / 60 }'
