package qemu

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// HMP runs human monitor commands through the VM's QMP socket and returns
// their outputs in order. It ends at ctx's deadline (10 s without one).
func (v *VM) HMP(ctx context.Context, cmds ...string) ([]string, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", v.QMPSock())
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(10 * time.Second)
	}
	conn.SetDeadline(dl)
	q := &qmpConn{r: bufio.NewReaderSize(conn, 64<<10), w: conn}
	if _, err := q.next(); err != nil { // the greeting
		return nil, fmt.Errorf("qmp greeting: %w", err)
	}
	if _, err := q.call(map[string]any{"execute": "qmp_capabilities"}); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(cmds))
	for _, c := range cmds {
		ret, err := q.call(map[string]any{"execute": "human-monitor-command", "arguments": map[string]any{"command-line": c}})
		if err != nil {
			return out, fmt.Errorf("%s: %w", c, err)
		}
		var s string
		if err := json.Unmarshal(ret, &s); err != nil {
			return out, fmt.Errorf("%s: %w", c, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// maxQMPLine bounds one QMP message: QEMU is ours, but its answers are
// still read with a limit.
const maxQMPLine = 1 << 20

type qmpConn struct {
	r *bufio.Reader
	w net.Conn
}

// next reads one QMP message (one JSON object per line).
func (q *qmpConn) next() (map[string]json.RawMessage, error) {
	var line []byte
	for {
		part, isPrefix, err := q.r.ReadLine()
		if err != nil {
			return nil, err
		}
		line = append(line, part...)
		if len(line) > maxQMPLine {
			return nil, errors.New("qmp message too long")
		}
		if !isPrefix {
			break
		}
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		return nil, fmt.Errorf("qmp: %w", err)
	}
	return m, nil
}

// call sends cmd and returns its "return" value, skipping events.
func (q *qmpConn) call(cmd map[string]any) (json.RawMessage, error) {
	b, _ := json.Marshal(cmd)
	if _, err := q.w.Write(append(b, '\n')); err != nil {
		return nil, err
	}
	for {
		m, err := q.next()
		if err != nil {
			return nil, err
		}
		if ret, ok := m["return"]; ok {
			return ret, nil
		}
		if e, ok := m["error"]; ok {
			return nil, fmt.Errorf("qmp error: %s", e)
		}
	}
}

// virtioPathRE matches a line of HMP's "info virtio": a device's QOM path
// and its kind.
var virtioPathRE = regexp.MustCompile(`^(/\S+)\s+\[([^\]]+)\]`)

// vqCountRE matches the queue count in HMP's "info virtio-status".
var vqCountRE = regexp.MustCompile(`(?m)^\s*num_vqs:\s+(\d+)`)

// unusedRingRE matches the queue status of a ring the driver never set up.
var unusedRingRE = regexp.MustCompile(`(?m)^\s*desc:\s+0x0+\s*$`)

// Diagnose describes the VM's host side for a stall report: QEMU's
// threads (state, wait channel, kernel stack), its eventfds' counts, and
// through QMP every virtio device's status and queue indices (QEMU's view
// for devices it serves, the vhost-user device's view for ours). It never
// blocks past ctx (10 s per monitor session without a deadline) and
// reports what it could not read.
func (v *VM) Diagnose(ctx context.Context) string {
	var s strings.Builder
	pid, alive := v.Pid()
	if v.cmd != nil && v.cmd.Process != nil {
		pid, alive = v.cmd.Process.Pid, v.alive()
	}
	if !alive {
		fmt.Fprintf(&s, "QEMU for %s is not running%s\n", v.Name, v.exitStatus())
		return s.String()
	}
	fmt.Fprintf(&s, "== QEMU %s (pid %d): threads\n", v.Name, pid)
	s.WriteString(procThreads(pid))
	fmt.Fprintf(&s, "== QEMU threads' activity over 1 s (CPU, context switches, where 20 samples found them)\n")
	s.WriteString(threadActivity(ctx, pid, 20, 50*time.Millisecond))
	fmt.Fprintf(&s, "== QEMU eventfds (counts pending)\n")
	s.WriteString(procEventfds(pid))
	fmt.Fprintf(&s, "== QEMU unix sockets (bytes queued: Recv-Q, Send-Q)\n")
	s.WriteString(unixSockets(ctx, pid))
	fmt.Fprintf(&s, "== QEMU virtio queues (QMP)\n")
	s.WriteString(v.virtioQueues(ctx))
	// The CPU and its local APIC (an interrupt left in IRR while the CPU
	// halts with interrupts on is a lost wake-up in QEMU), and the
	// virtio-serial ports' host/guest/throttle state (the agent's channel).
	outs, err := v.HMP(ctx, "info registers", "info lapic", "info qtree")
	names := []string{"CPU registers", "local APIC", "virtio-serial ports and disks' PCI addresses (info qtree)"}
	for i, o := range outs {
		switch i {
		case 0:
			if j := strings.Index(o, "FCW="); j > 0 {
				o = o[:j] // the FPU and vector registers say nothing here
			}
		case 2:
			o = serialPortLines(o) + "\n" + diskAddrLines(o)
		}
		fmt.Fprintf(&s, "== QEMU %s\n%s", names[i], indent(o))
	}
	if err != nil {
		fmt.Fprintf(&s, "qmp: %v\n", err)
	}
	s.WriteString(v.ripSamples(ctx, 5, 200*time.Millisecond))
	return s.String()
}

// ripLineRE matches the line of HMP's "info registers" that says where the
// CPU is: RIP, RFLAGS (IF is 0x200), privilege level and whether it halts.
var ripLineRE = regexp.MustCompile(`RIP=[0-9a-f]+ RFL=[0-9a-f]+ \S+ CPL=\d .*HLT=\d`)

// ripSamples takes the CPUs' RIP line n times, gap apart: a guest halted
// with interrupts on is idle (waiting for an interrupt that does not come);
// one at the same few RIPs with interrupts off spins.
func (v *VM) ripSamples(ctx context.Context, n int, gap time.Duration) string {
	var s strings.Builder
	s.WriteString("== QEMU CPU samples (RIP RFL CPL HLT)\n")
	for i := 0; i < n; i++ {
		if i > 0 {
			select {
			case <-ctx.Done():
				return s.String()
			case <-time.After(gap):
			}
		}
		outs, err := v.HMP(ctx, "info registers -a")
		if err != nil || len(outs) == 0 {
			fmt.Fprintf(&s, "  qmp: %v\n", err)
			return s.String()
		}
		for _, l := range ripLineRE.FindAllString(outs[0], -1) {
			fmt.Fprintf(&s, "  %d: %s\n", i, l)
		}
	}
	return s.String()
}

// serialPortLines keeps the virtio-serial port lines of "info qtree"
// ("port N, guest on, host on, throttle off") with the name before them.
func serialPortLines(qtree string) string {
	var out []string
	lines := strings.Split(qtree, "\n")
	for i, l := range lines {
		if strings.Contains(l, ", throttle ") {
			if i > 0 && strings.Contains(lines[i-1], "name") {
				out = append(out, strings.TrimSpace(lines[i-1]))
			}
			out = append(out, strings.TrimSpace(l))
		}
	}
	return strings.Join(out, "\n")
}

// diskAddrLines keeps each disk device of "info qtree" with its PCI
// address ("dev: vhost-user-blk-pci" … "addr = 02.0"), which the guest's
// /sys/block/vdX path names.
func diskAddrLines(qtree string) string {
	var out []string
	dev := ""
	for _, l := range strings.Split(qtree, "\n") {
		t := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(t, "dev: "):
			dev = ""
			if strings.Contains(t, "blk-pci") {
				dev = t
			}
		case dev != "" && strings.HasPrefix(t, "addr = "):
			out = append(out, dev+" "+t)
			dev = ""
		}
	}
	return strings.Join(out, "\n")
}

// virtioQueues lists every virtio device's queues through HMP.
func (v *VM) virtioQueues(ctx context.Context) string {
	outs, err := v.HMP(ctx, "info virtio")
	if err != nil || len(outs) == 0 {
		return fmt.Sprintf("qmp: %v\n", err)
	}
	var s strings.Builder
	for _, line := range strings.Split(outs[0], "\n") {
		m := virtioPathRE.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		path, kind := m[1], m[2]
		st, err := v.HMP(ctx, "info virtio-status "+path)
		if err != nil || len(st) == 0 {
			fmt.Fprintf(&s, "%s [%s]: %v\n", path, kind, err)
			continue
		}
		n := 0
		if c := vqCountRE.FindStringSubmatch(st[0]); c != nil {
			n, _ = strconv.Atoi(c[1])
		}
		n = min(n, 64)
		vhost := strings.Contains(st[0], "vhost_started:           true") || strings.Contains(st[0], "VHost:")
		cmds := make([]string, 0, 2*n)
		for i := 0; i < n; i++ {
			cmds = append(cmds, fmt.Sprintf("info virtio-queue-status %s %d", path, i))
			if vhost {
				cmds = append(cmds, fmt.Sprintf("info virtio-vhost-queue-status %s %d", path, i))
			}
		}
		fmt.Fprintf(&s, "-- %s [%s], %d queues, status:\n%s", path, kind, n, indent(st[0]))
		qs, err := v.HMP(ctx, cmds...)
		per := 1
		if vhost {
			per = 2
		}
		for i := 0; i+per <= len(qs); i += per {
			if unusedRingRE.MatchString(qs[i]) {
				continue // a queue the driver never set up
			}
			for j := i; j < i+per; j++ {
				fmt.Fprintf(&s, "  %s:\n%s", cmds[j], indent(indent(qs[j])))
			}
			s.WriteString(v.ringWords(ctx, qs[i]))
		}
		if err != nil {
			fmt.Fprintf(&s, "  qmp: %v\n", err)
		}
	}
	return s.String()
}

// Ring addresses in HMP's "info virtio-queue-status": the ring size and
// the guest-physical addresses of its avail and used rings.
var (
	ringNumRE   = regexp.MustCompile(`(?m)^\s*num:\s+(\d+)`)
	ringAvailRE = regexp.MustCompile(`(?m)^\s*avail:\s+0x([0-9a-f]+)`)
	ringUsedRE  = regexp.MustCompile(`(?m)^\s*used:\s+0x([0-9a-f]+)`)
	xpWordRE    = regexp.MustCompile(`:\s+0x([0-9a-f]+)`)
)

// ringWords reads a split ring's shared words from guest memory (HMP xp):
// the driver's avail flags and idx and used_event, the device's used idx
// and avail_event. Beside QEMU's and the back-end's own indices they tell a
// lost kick (avail idx ahead of what the device took, with avail_event
// asking for a kick) from a lost call (used idx past used_event, the guest
// asleep) from a guest that never posted the request.
func (v *VM) ringWords(ctx context.Context, queueStatus string) string {
	num, avail, used := ringNumRE.FindStringSubmatch(queueStatus), ringAvailRE.FindStringSubmatch(queueStatus), ringUsedRE.FindStringSubmatch(queueStatus)
	if num == nil || avail == nil || used == nil {
		return ""
	}
	n, _ := strconv.ParseUint(num[1], 10, 16)
	a, _ := strconv.ParseUint(avail[1], 16, 64)
	u, _ := strconv.ParseUint(used[1], 16, 64)
	if n == 0 || a == 0 || u == 0 {
		return ""
	}
	addrs := []uint64{a, a + 2, a + 4 + 2*n, u + 2, u + 4 + 8*n}
	cmds := make([]string, len(addrs))
	for i, x := range addrs {
		cmds[i] = fmt.Sprintf("xp /1hx 0x%x", x)
	}
	outs, err := v.HMP(ctx, cmds...)
	if err != nil || len(outs) != len(addrs) {
		return fmt.Sprintf("    guest ring words: %v\n", err)
	}
	w := make([]uint64, len(outs))
	for i, o := range outs {
		m := xpWordRE.FindStringSubmatch(o)
		if m == nil {
			return fmt.Sprintf("    guest ring words: cannot parse %q\n", o)
		}
		w[i], _ = strconv.ParseUint(m[1], 16, 16)
	}
	return fmt.Sprintf("    guest ring words: avail.flags 0x%x avail.idx %d used_event %d | used.idx %d avail_event %d\n",
		w[0], w[1], w[2], w[3], w[4])
}

func indent(t string) string {
	t = strings.TrimRight(t, "\r\n")
	if t == "" {
		return ""
	}
	return "  " + strings.ReplaceAll(strings.ReplaceAll(t, "\r", ""), "\n", "\n  ") + "\n"
}

// procThreads lists a process's threads: name, state, wait channel and
// kernel stack (the stack needs root; it is left out otherwise).
func procThreads(pid int) string {
	var s strings.Builder
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	if err != nil || len(tasks) == 0 {
		return fmt.Sprintf("no threads readable: %v\n", err)
	}
	sort.Strings(tasks)
	for _, t := range tasks {
		comm := strings.TrimSpace(readSmall(filepath.Join(t, "comm")))
		state := ""
		if st := readSmall(filepath.Join(t, "stat")); st != "" {
			if i := strings.LastIndexByte(st, ')'); i >= 0 && i+3 <= len(st) {
				state = st[i+2 : i+3]
			}
		}
		wchan := readSmall(filepath.Join(t, "wchan"))
		fmt.Fprintf(&s, "thread %s %q state %s wchan %s\n", filepath.Base(t), comm, state, wchan)
		if stack := readSmall(filepath.Join(t, "stack")); stack != "" {
			s.WriteString(indent(stack))
		}
		if sc := strings.TrimSpace(readSmall(filepath.Join(t, "syscall"))); sc != "" {
			fmt.Fprintf(&s, "  syscall %s\n", sc)
		}
	}
	return s.String()
}

// threadSample is what /proc says of one thread at one moment.
type threadSample struct {
	ticks      uint64 // utime + stime, in clock ticks
	vol, invol uint64 // voluntary and involuntary context switches
}

func readThreadSample(task string) (threadSample, bool) {
	var ts threadSample
	st := readSmall(filepath.Join(task, "stat"))
	i := strings.LastIndexByte(st, ')')
	if i < 0 {
		return ts, false
	}
	f := strings.Fields(st[i+1:]) // state is f[0]; utime and stime are fields 14 and 15 of stat
	if len(f) < 13 {
		return ts, false
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	k, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return ts, false
	}
	ts.ticks = u + k
	for _, l := range strings.Split(readSmall(filepath.Join(task, "status")), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "voluntary_ctxt_switches":
			ts.vol = n
		case "nonvoluntary_ctxt_switches":
			ts.invol = n
		}
	}
	return ts, true
}

// threadActivity samples a process's threads n times, gap apart: the CPU
// each used (clock ticks, 100 per second), its context switches, and
// where each sample found it (running, or the syscall it waits in). A
// thread that holds a lock and keeps taking it again shows as running
// with many voluntary switches among the threads that wait for it (QEMU's
// main loop starved of its global lock by a vCPU thread); a guest that
// spins shows as a vCPU thread running with few switches.
func threadActivity(ctx context.Context, pid, n int, gap time.Duration) string {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	if err != nil || len(tasks) == 0 {
		return fmt.Sprintf("no threads readable: %v\n", err)
	}
	sort.Strings(tasks)
	first := make([]threadSample, len(tasks))
	ok := make([]bool, len(tasks))
	where := make([]map[string]int, len(tasks))
	for i, t := range tasks {
		first[i], ok[i] = readThreadSample(t)
		where[i] = map[string]int{}
	}
	start := time.Now()
	for k := 0; k < n; k++ {
		for i, t := range tasks {
			sc := strings.Fields(readSmall(filepath.Join(t, "syscall")))
			switch {
			case len(sc) == 0:
				where[i]["gone"]++
			case sc[0] == "running":
				where[i]["running"]++
			default:
				where[i]["syscall "+sc[0]]++
			}
		}
		select {
		case <-ctx.Done():
			k = n
		case <-time.After(gap):
		}
	}
	el := time.Since(start).Seconds()
	var s strings.Builder
	for i, t := range tasks {
		last, ok2 := readThreadSample(t)
		comm := strings.TrimSpace(readSmall(filepath.Join(t, "comm")))
		if !ok[i] || !ok2 {
			fmt.Fprintf(&s, "thread %s %q: gone\n", filepath.Base(t), comm)
			continue
		}
		keys := make([]string, 0, len(where[i]))
		for k := range where[i] {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var w []string
		for _, k := range keys {
			w = append(w, fmt.Sprintf("%s %d", k, where[i][k]))
		}
		fmt.Fprintf(&s, "thread %s %q: CPU %.2f s/s, %.0f voluntary and %.0f involuntary switches/s; %s\n",
			filepath.Base(t), comm, float64(last.ticks-first[i].ticks)/100/el,
			float64(last.vol-first[i].vol)/el, float64(last.invol-first[i].invol)/el, strings.Join(w, ", "))
	}
	return s.String()
}

// procEventfds lists a process's eventfds with a non-zero count.
func procEventfds(pid int) string {
	var s strings.Builder
	fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fdinfo/*", pid))
	total, pending := 0, 0
	for _, f := range fds {
		info := readSmall(f)
		i := strings.Index(info, "eventfd-count:")
		if i < 0 {
			continue
		}
		total++
		cnt := strings.Fields(info[i+len("eventfd-count:"):])
		if len(cnt) > 0 && strings.Trim(cnt[0], "0") != "" {
			pending++
			fmt.Fprintf(&s, "fd %s eventfd-count %s\n", filepath.Base(f), cnt[0])
		}
	}
	fmt.Fprintf(&s, "%d eventfds, %d with a pending count\n", total, pending)
	return s.String()
}

// unixSockets lists a process's unix sockets with the bytes queued on
// them (iproute2's ss): the vhost-user, agent and monitor channels.
func unixSockets(ctx context.Context, pid int) string {
	out, err := exec.CommandContext(ctx, "ss", "-xpn").Output()
	if err != nil {
		return fmt.Sprintf("ss: %v\n", err)
	}
	var s strings.Builder
	tag := fmt.Sprintf("pid=%d,", pid)
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "Netid") || strings.Contains(l, tag) {
			s.WriteString(l + "\n")
		}
	}
	return s.String()
}

// readSmall reads up to 64 KiB of a /proc file ("" on error).
func readSmall(p string) string {
	f, err := os.Open(p)
	if err != nil {
		return ""
	}
	defer f.Close()
	b := make([]byte, 64<<10)
	n, _ := f.Read(b)
	return string(b[:n])
}
