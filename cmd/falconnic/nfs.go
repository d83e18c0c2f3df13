package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"falconnic/internal/control"
	"falconnic/qemu"
)

func init() {
	register("nfs", "write, remount and read back a file on NFSv4 over RDMA (nfsd's svcrdma → xprtrdma) between two VMs on falconnic NICs (falconnic nfs -h)", runNFS)
}

const nfsUsage = `usage: falconnic nfs [--daemons 1|2] [--loss PCT] [--mib N] [--keep] [--state DIR] [--cache DIR]
Starts falconnic daemon(s) and two guests A and B with falconnic NICs, waits
until falcon0 is ACTIVE in both, makes B an NFSv4 server with one RDMA
listener (port 20049) and no TCP one, exporting a tmpfs as the NFSv4 root to
A's address (the guest has no nfs-utils: the guest program nfsrdma fills the
kernel's export caches and starts nfsd itself), mounts it on A with
proto=rdma, writes N MiB of random data to a file and fsyncs it, unmounts,
mounts again and reads the file back, then reads it on B too. Exits non-zero
unless all three SHA-256 sums agree and A's mount is an RDMA one. Prints
the write and read rates, A's RPC transport statistics and the daemons'
busiest counters. On failure it prints both guests' kernel logs. Examples:
  falconnic nfs
  falconnic nfs --daemons 2 --loss 1 --mib 16`

// NFS pair constants.
const (
	nfsPort      = "20049" // NFS/RDMA's IANA port
	nfsExportDir = "/srv/nfs"
	nfsMountDir  = "/mnt/nfs"
	nfsFile      = "data"
	// nfsGrace is the server's NFSv4 grace and lease time (the kernel's
	// minimum): A's first OPEN waits until the grace period is over.
	nfsGrace = 10 * time.Second
	// nfsSetupLimit bounds each setup step in a guest (serve, mount,
	// umount); nfsMBpsFloor sets each transfer's limit from its size.
	nfsSetupLimit = 2 * time.Minute
	nfsMBpsFloor  = 0.25 // MB/s: below this a transfer counts as stalled
)

// nfsResult is a parsed "nfsrdma: write|read bytes= sha256= seconds= MBps="
// line of the guest program.
type nfsResult struct {
	bytes   int64
	sum     string
	seconds float64
	mbps    float64
}

var nfsResultLine = regexp.MustCompile(`nfsrdma: (?:write|read) bytes=(\d+) sha256=([0-9a-f]{64}) seconds=([0-9.]+) MBps=([0-9.]+)`)

// parseNFSResult finds the result line in a guest program's output.
func parseNFSResult(out string) (nfsResult, error) {
	m := nfsResultLine.FindStringSubmatch(out)
	if m == nil {
		return nfsResult{}, fmt.Errorf("no result line in %q", strings.TrimSpace(out))
	}
	var r nfsResult
	r.bytes, _ = strconv.ParseInt(m[1], 10, 64)
	r.sum = m[2]
	r.seconds, _ = strconv.ParseFloat(m[3], 64)
	r.mbps, _ = strconv.ParseFloat(m[4], 64)
	return r, nil
}

// nfsMountStats is the part of /proc/self/mountstats about the NFS mount
// on nfsMountDir: its opts line and its xprt line.
type nfsMountStats struct {
	opts, xprt string
}

// parseNFSMountStats finds the device mounted on dir in a mountstats
// file and returns its opts: and xprt: lines.
func parseNFSMountStats(s, dir string) (nfsMountStats, error) {
	var st nfsMountStats
	in := false
	for _, l := range strings.Split(s, "\n") {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "device ") {
			in = strings.Contains(t, " mounted on "+dir+" ")
			continue
		}
		if !in {
			continue
		}
		switch {
		case strings.HasPrefix(t, "opts:"):
			st.opts = t
		case strings.HasPrefix(t, "xprt:"):
			st.xprt = t
		}
	}
	if st.opts == "" || st.xprt == "" {
		return st, fmt.Errorf("no NFS mount on %s in mountstats", dir)
	}
	return st, nil
}

// isRDMA tells whether the mount's options and transport are RDMA ones.
func (st nfsMountStats) isRDMA() bool {
	f := strings.Fields(st.xprt)
	return strings.Contains(st.opts, "proto=rdma") && len(f) > 1 && f[1] == "rdma"
}

// nfsXprtRDMA are the counters of an xprt: rdma line that show how the
// data moved (net/sunrpc/xprtrdma/transport.c xprt_rdma_print_stats:
// after "rdma", port, bind, connect, connect time, idle, sends, recvs,
// bad xids, req_u, bklog_u, then xprtrdma's own).
type nfsXprtRDMA struct {
	sends, recvs uint64
	// readChunks are requests whose payload the server pulled with RDMA
	// READ (NFS WRITE); writeChunks and replyChunks are replies the server
	// pushed with RDMA WRITE (NFS READ, long replies).
	readChunks, writeChunks, replyChunks uint64
	// rdmaRequest is the bytes registered for write and reply chunks
	// (read chunks are not counted); rdmaReply the bytes that arrived in
	// write chunks.
	rdmaRequest, rdmaReply uint64
}

// rdmaCounters parses the xprt line's RDMA counters.
func (st nfsMountStats) rdmaCounters() (nfsXprtRDMA, error) {
	f := strings.Fields(st.xprt)
	if len(f) < 17 || f[1] != "rdma" {
		return nfsXprtRDMA{}, fmt.Errorf("not an xprtrdma statistics line: %q", st.xprt)
	}
	var v [17]uint64
	for _, i := range []int{7, 8, 12, 13, 14, 15, 16} {
		n, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			return nfsXprtRDMA{}, fmt.Errorf("xprt field %d: %w", i, err)
		}
		v[i] = n
	}
	return nfsXprtRDMA{sends: v[7], recvs: v[8], readChunks: v[12], writeChunks: v[13], replyChunks: v[14],
		rdmaRequest: v[15], rdmaReply: v[16]}, nil
}

func (x nfsXprtRDMA) String() string {
	return fmt.Sprintf("%d sends, %d recvs, %d read chunks, %d write chunks, %d reply chunks, %d bytes registered for replies, %d bytes RDMA-written by the server",
		x.sends, x.recvs, x.readChunks, x.writeChunks, x.replyChunks, x.rdmaRequest, x.rdmaReply)
}

// transferLimit is a guest deadline for moving mib MiB.
func transferLimit(mib int) time.Duration {
	return nfsSetupLimit + time.Duration(float64(mib)*1.048576/nfsMBpsFloor*float64(time.Second))
}

// pairNICStatus is the part of a NIC's entry in a daemon's status that
// the pair reads: its Falcon port's counters and its Ethernet function's
// (with the upper functions', prefixed "rdma.").
type pairNICStatus struct {
	Falcon *struct {
		Counters map[string]uint64 `json:"counters"`
		Firmware *struct {
			Counters map[string]uint64 `json:"counters"`
		} `json:"firmware"`
	} `json:"falcon_port"`
	Device *struct {
		Counters map[string]uint64 `json:"counters"`
	} `json:"device"`
}

// nicStatuses asks every daemon for its status and returns its NICs'
// entries (none for daemons that did not answer).
func (p *rdmaPair) nicStatuses(ctx context.Context) []pairNICStatus {
	var nics []pairNICStatus
	for _, l := range p.dlogs {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		var st struct {
			NICs []pairNICStatus `json:"nics"`
		}
		err := control.Call(cctx, filepath.Join(filepath.Dir(l), "control.sock"), "status", nil, &st)
		cancel()
		if err != nil {
			fmt.Fprintf(p.o.log, "%s: daemon status: %v\n", p.o.prefix(), err)
			continue
		}
		nics = append(nics, st.NICs...)
	}
	return nics
}

// firmwareCounterPrefix marks the firmware's own counters (Swift's window
// cuts, pacing) among a port's in daemonCounters.
const firmwareCounterPrefix = "firmware."

// daemonCounters sums every daemon's Falcon port counters over its NICs,
// the firmware's (prefixed firmwareCounterPrefix) among them.
func (p *rdmaPair) daemonCounters(ctx context.Context) map[string]uint64 {
	sum := map[string]uint64{}
	for _, n := range p.nicStatuses(ctx) {
		if n.Falcon != nil {
			for k, v := range n.Falcon.Counters {
				sum[k] += v
			}
			if fw := n.Falcon.Firmware; fw != nil {
				for k, v := range fw.Counters {
					sum[firmwareCounterPrefix+k] += v
				}
			}
		}
	}
	return sum
}

// nicCounters sums the counters of every daemon's NICs whose names start
// with prefix (e.g. "rdma." for the RDMA functions: doorbells, verbs).
func (p *rdmaPair) nicCounters(ctx context.Context, prefix string) map[string]uint64 {
	sum := map[string]uint64{}
	for _, n := range p.nicStatuses(ctx) {
		if n.Device == nil {
			continue
		}
		for k, v := range n.Device.Counters {
			if strings.HasPrefix(k, prefix) {
				sum[k] += v
			}
		}
	}
	return sum
}

// counterDeltas lists the n counters that grew most from a to b.
func counterDeltas(a, b map[string]uint64, n int) []string {
	type kv struct {
		k string
		d uint64
	}
	var ds []kv
	for k, v := range b {
		if v > a[k] {
			ds = append(ds, kv{k, v - a[k]})
		}
	}
	sort.Slice(ds, func(i, j int) bool {
		if ds[i].d != ds[j].d {
			return ds[i].d > ds[j].d
		}
		return ds[i].k < ds[j].k
	})
	var out []string
	for i := 0; i < len(ds) && i < n; i++ {
		out = append(out, fmt.Sprintf("%s +%d", ds[i].k, ds[i].d))
	}
	return out
}

func runNFS(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs := flag.NewFlagSet("nfs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, nfsUsage); fs.PrintDefaults() }
	daemons := fs.Int("daemons", 1, "1: both NICs on one daemon; 2: one daemon each, linked by the UDP fabric on loopback")
	loss := fs.Float64("loss", 0, "fabric loss in percent, each direction (needs --daemons 2)")
	mib := fs.Int("mib", 32, "size of the file written, MiB (B serves it from RAM)")
	keep := fs.Bool("keep", false, "keep the guests (A mounted) and daemons running at the end, until interrupted")
	state := fs.String("state", "", "work directory (default: a new temporary one, removed at the end unless --keep)")
	cache := fs.String("cache", qemu.DefaultCacheDir(), "guest image cache")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	if err := checkPairFabric(*daemons, *loss); err != nil {
		return err
	}
	if *mib < 1 || *mib > 256 {
		return fmt.Errorf("%w: --mib must be 1 to 256 (the file lives in B's 1 GiB of RAM)", errUsage)
	}
	if err := requireImageModules(*cache, "rpcrdma", "nfsd", "nfsv4"); err != nil {
		return err
	}
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	dir, done, err := pairWorkDir(*state, "fn-nfs-", *keep, stderr)
	if err != nil {
		return err
	}
	defer func() { done(err) }()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	p, err := startPair(ctx, pairOptions{kind: pairFalcon, daemons: *daemons, loss: *loss, dir: dir, cache: *cache,
		bin: bin, log: stderr, tag: "nfs"})
	if err != nil {
		return err
	}
	defer p.close()
	if err := nfsRun(ctx, p, *mib, start, stdout, stderr); err != nil {
		nvmfKernelLogs(ctx, p, stderr)
		return err
	}
	if *keep {
		fmt.Fprintf(stderr, "nfs: keeping guests A (%s on %s) and B (%s, server) until interrupted: falconnic vm exec A --state %s -- CMD\n",
			pairIPA, nfsMountDir, pairIPB, filepath.Join(dir, "vms"))
		<-ctx.Done()
	}
	return nil
}

// nfsRun is the NFS exchange on a running pair: serve from B, mount on A,
// write, remount, read back on A and on B, compare.
func nfsRun(ctx context.Context, p *rdmaPair, mib int, start time.Time, stdout, stderr io.Writer) error {
	before := p.daemonCounters(ctx)
	out, err := guestStep(ctx, p.b, nfsSetupLimit, stderr, "nfsrdma", "serve", "-client", pairIPA,
		"-dir", nfsExportDir, "-port", nfsPort, "-grace", strconv.Itoa(int(nfsGrace/time.Second)))
	if err != nil {
		return fmt.Errorf("server (B): %w", err)
	}
	graceEnd := time.Now().Add(nfsGrace + time.Second)
	fmt.Fprintf(stderr, "nfs: B: %s", out)
	mount := func() error {
		out, err := guestStep(ctx, p.a, nfsSetupLimit, stderr, "nfsrdma", "mount", "-server", pairIPB,
			"-client", pairIPA, "-port", nfsPort, nfsMountDir)
		if err != nil {
			return fmt.Errorf("client (A): %w", err)
		}
		fmt.Fprintf(stderr, "nfs: A: %s", out)
		return nil
	}
	if err := mount(); err != nil {
		return err
	}
	// The server refuses OPEN during its grace period (NFS4ERR_GRACE, which
	// the client retries): wait it out so that the write rate is the
	// transfer's.
	if d := time.Until(graceEnd); d > 0 {
		fmt.Fprintf(stderr, "nfs: waiting %.1fs for B's grace period to end\n", d.Seconds())
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	// The same write into A's RAM: how fast A's CPU makes and hashes the
	// data, the ceiling of the NFS rate in a TCG guest.
	out, err = guestStep(ctx, p.a, transferLimit(mib), stderr, "nfsrdma", "write", "-mib", strconv.Itoa(mib), "/tmp/nfs-local")
	if err != nil {
		return fmt.Errorf("local write (A): %w", err)
	}
	local, err := parseNFSResult(out)
	if err != nil {
		return fmt.Errorf("local write (A): %w", err)
	}
	if _, err := guestStep(ctx, p.a, nfsSetupLimit, stderr, "rm", "/tmp/nfs-local"); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "nfs: A's local baseline: the same write into its RAM runs at %.2f MB/s\n", local.mbps)
	file := nfsMountDir + "/" + nfsFile
	cpu0 := p.daemonCPU()
	out, err = guestStep(ctx, p.a, transferLimit(mib), stderr, "nfsrdma", "write", "-mib", strconv.Itoa(mib), file)
	if err != nil {
		return fmt.Errorf("write (A): %w", err)
	}
	w, err := parseNFSResult(out)
	if err != nil {
		return fmt.Errorf("write (A): %w", err)
	}
	fmt.Fprintf(stderr, "nfs: A wrote %d bytes in %.2fs (%.2f MB/s, fsync included), sha256 %s\n", w.bytes, w.seconds, w.mbps, w.sum)
	wx, err := nfsRDMAStats(ctx, p, stderr, "write")
	if err != nil {
		return err
	}
	if _, err := guestStep(ctx, p.a, nfsSetupLimit, stderr, "umount", nfsMountDir); err != nil {
		return fmt.Errorf("umount (A): %w", err)
	}
	if err := mount(); err != nil {
		return err
	}
	out, err = guestStep(ctx, p.a, transferLimit(mib), stderr, "nfsrdma", "read", file)
	if err != nil {
		return fmt.Errorf("read (A): %w", err)
	}
	r, err := parseNFSResult(out)
	if err != nil {
		return fmt.Errorf("read (A): %w", err)
	}
	fmt.Fprintf(stderr, "nfs: A read it back after remounting in %.2fs (%.2f MB/s), sha256 %s\n", r.seconds, r.mbps, r.sum)
	cpuXfer := p.daemonCPU() - cpu0
	rx, err := nfsRDMAStats(ctx, p, stderr, "read")
	if err != nil {
		return err
	}
	out, err = guestStep(ctx, p.b, transferLimit(mib), stderr, "nfsrdma", "read", nfsExportDir+"/"+nfsFile)
	if err != nil {
		return fmt.Errorf("read (B): %w", err)
	}
	s, err := parseNFSResult(out)
	if err != nil {
		return fmt.Errorf("read (B): %w", err)
	}
	fmt.Fprintf(stderr, "nfs: B read the exported file, sha256 %s\n", s.sum)
	if _, err := guestStep(ctx, p.a, nfsSetupLimit, stderr, "umount", nfsMountDir); err != nil {
		return fmt.Errorf("umount (A): %w", err)
	}
	for _, v := range []*qemu.VM{p.b, p.a} {
		out, err := guestStep(ctx, v, nfsSetupLimit, stderr, "sh", "-c",
			// u-root's grep takes Go regular expressions and has no -E.
			"dmesg | grep -i 'nfs|rpc|svcrdma' | tail -n 20; true")
		if err == nil && strings.TrimSpace(out) != "" {
			fmt.Fprintf(stderr, "nfs: %s kernel log (NFS/RPC lines):\n%s", v.Name, out)
		}
	}
	after := p.daemonCounters(ctx)
	if d := counterDeltas(before, after, 8); len(d) > 0 {
		fmt.Fprintf(stderr, "nfs: daemon Falcon counters, busiest: %s\n", strings.Join(d, ", "))
	}
	if d := counterDeltas(retxCounters(before), retxCounters(after), 8); len(d) > 0 {
		fmt.Fprintf(stderr, "nfs: daemon Falcon counters, resends: %s\n", strings.Join(d, ", "))
	}
	fmt.Fprintf(stderr, "nfs: daemon CPU %.2fs from the write to the end of the read back (%.1f ms per MiB moved), %.2fs over the whole run\n",
		cpuXfer, cpuXfer*1000/float64(2*mib), p.daemonCPU())

	want := int64(mib) << 20
	switch {
	case w.bytes != want || r.bytes != want || s.bytes != want:
		return fmt.Errorf("sizes differ: wrote %d, A read %d, B read %d, want %d", w.bytes, r.bytes, s.bytes, want)
	case r.sum != w.sum || s.sum != w.sum:
		return fmt.Errorf("SHA-256 differs: wrote %s, A read %s, B read %s", w.sum, r.sum, s.sum)
	case wx.readChunks < uint64(want>>20):
		// Each NFS WRITE of up to wsize (at most 1 MiB over RDMA) carries
		// its payload in one read chunk; xprtrdma does not add read
		// chunks to its byte counters.
		return fmt.Errorf("the write did not move its data in RDMA read chunks: %v", wx)
	case rx.writeChunks == 0 || rx.rdmaReply < uint64(want):
		return fmt.Errorf("the read did not move its data in RDMA write chunks: %v", rx)
	}
	fmt.Fprintf(stdout, "nfs: PASS %d MiB over NFSv4.2/RDMA: write %.2f MB/s (%.2fs), read %.2f MB/s (%.2fs), sha256 %s; %.1fs in all\n",
		mib, w.mbps, w.seconds, r.mbps, r.seconds, w.sum, time.Since(start).Seconds())
	return nil
}

// nfsRDMAStats reads A's mountstats for the NFS mount, prints its options
// and transport counters, and fails unless it is an RDMA mount.
func nfsRDMAStats(ctx context.Context, p *rdmaPair, stderr io.Writer, phase string) (nfsXprtRDMA, error) {
	ms, err := guestStep(ctx, p.a, nfsSetupLimit, stderr, "cat", "/proc/self/mountstats")
	if err != nil {
		return nfsXprtRDMA{}, fmt.Errorf("mountstats (A): %w", err)
	}
	st, err := parseNFSMountStats(ms, nfsMountDir)
	if err != nil {
		return nfsXprtRDMA{}, fmt.Errorf("mountstats (A): %w\n%s", err, ms)
	}
	fmt.Fprintf(stderr, "nfs: A mountstats after the %s: %s\nnfs: A mountstats after the %s: %s\n", phase, st.opts, phase, st.xprt)
	if !st.isRDMA() {
		return nfsXprtRDMA{}, fmt.Errorf("A's mount is not NFS over RDMA: %s / %s", st.opts, st.xprt)
	}
	x, err := st.rdmaCounters()
	if err != nil {
		return x, fmt.Errorf("mountstats (A): %w", err)
	}
	fmt.Fprintf(stderr, "nfs: xprtrdma after the %s: %v\n", phase, x)
	return x, nil
}

// retxCounters are the counters of m about resends (a lossy fabric's).
func retxCounters(m map[string]uint64) map[string]uint64 {
	r := map[string]uint64{}
	for k, v := range m {
		if strings.Contains(k, "retx") {
			r[k] = v
		}
	}
	return r
}
