package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"falconnic/device"
	"falconnic/internal/control"
)

func init() {
	register("top", "a live view of a running daemon: per-NIC rates, the busiest connections, drops by cause", topCmd)
}

func topCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fl := flag.NewFlagSet("top", flag.ContinueOnError)
	fl.SetOutput(stderr)
	socket := fl.String("socket", device.DefaultControlSocket, "daemon control socket `PATH`")
	interval := fl.Duration("interval", time.Second, "refresh every `D`")
	iterations := fl.Int("n", 0, "stop after `N` refreshes (0: until interrupted)")
	conns := fl.Int("conns", 8, "show the `N` busiest connections of each NIC")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: falconnic top [--socket PATH] [--interval D] [--n N] [--conns N]   (Ctrl-C quits)")
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fl.NArg() != 0 || *interval <= 0 || *iterations < 0 {
		fl.Usage()
		return fmt.Errorf("%w: top takes no arguments and a positive interval", errUsage)
	}
	c, err := control.Dial(ctx, *socket)
	if err != nil {
		return controlError(*socket, err)
	}
	defer c.Close()
	var prev *topSample
	tick := time.NewTicker(*interval)
	defer tick.Stop()
	for i := 0; *iterations == 0 || i < *iterations; i++ {
		cur, err := takeSample(ctx, c, *conns)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return controlError(*socket, err)
		}
		var b strings.Builder
		b.WriteString("\x1b[H\x1b[2J") // home, clear
		renderTop(&b, prev, cur, *socket)
		if _, err := io.WriteString(stdout, b.String()); err != nil {
			return err
		}
		prev = cur
		if *iterations != 0 && i+1 == *iterations {
			break
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
	return nil
}

// topSample is one look at the daemon.
type topSample struct {
	at    time.Time
	st    device.Status
	conns []device.ConnReport
}

func takeSample(ctx context.Context, c *control.Client, conns int) (*topSample, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s := &topSample{}
	if err := c.Call(cctx, "status", nil, &s.st); err != nil {
		return nil, err
	}
	if err := c.Call(cctx, "conns", map[string]int{"top": conns}, &s.conns); err != nil {
		return nil, err
	}
	s.at = time.Now()
	return s, nil
}

// rate is (cur - prev) per second of dt; zero without a previous sample.
func rate(cur, prev uint64, dt float64, ok bool) float64 {
	if !ok || dt <= 0 || cur < prev {
		return 0
	}
	return float64(cur-prev) / dt
}

func sumRetx(m map[string]uint64) uint64 {
	var n uint64
	for k, v := range m {
		if strings.HasPrefix(k, "retx_") && k != "retx_deferred" {
			n += v
		}
	}
	return n
}

// isDropCounter tells the counters that count packets, frames or messages
// lost or refused, by the names the counter tables give their causes.
func isDropCounter(name string) bool {
	for _, w := range []string{"drop", "full", "bad", "short", "runt", "unknown", "no_", "too_", "error", "err", "spoofed", "invalid", "fail", "exhausted", "fatal"} {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}

// dropCounters lists every drop counter of the status, by where it is.
func dropCounters(st device.Status) map[string]uint64 {
	m := map[string]uint64{}
	add := func(where string, c map[string]uint64) {
		for k, v := range c {
			if isDropCounter(k) {
				m[where+" "+k] = v
			}
		}
	}
	add("switch", st.Switch.Counters)
	for _, p := range st.Switch.Ports {
		add("switch/"+p.Name, p.Counters)
	}
	if st.Fabric != nil {
		add("fabric", st.Fabric.Counters)
	}
	add("cm", st.CM)
	for _, n := range st.NICs {
		if n.Falcon != nil {
			add(n.Name+" falcon", n.Falcon.Counters)
		}
	}
	return m
}

func renderTop(w io.Writer, prev, cur *topSample, socket string) {
	dt, ok := 0.0, prev != nil
	if ok {
		dt = cur.at.Sub(prev.at).Seconds()
	}
	fmt.Fprintf(w, "falconnic top — %s, daemon up %s, control %s (Ctrl-C quits)\n\n", cur.at.Format("15:04:05"),
		cur.st.Uptime.Round(time.Second), socket)
	prevNIC := map[string]device.NICReport{}
	if ok {
		for _, n := range prev.st.NICs {
			prevNIC[n.Name] = n
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "NIC\tETH-RX/s\tETH-TX/s\tFALCON-RX/s\tFALCON-TX/s\tMB/s-IN\tMB/s-OUT\tTXNS/s\tRETX/s\tCONNS\t")
	for _, n := range cur.st.NICs {
		p, had := prevNIC[n.Name]
		had = had && ok
		fc, pc := map[string]uint64{}, map[string]uint64{}
		conns := 0
		if n.Falcon != nil {
			fc = n.Falcon.Counters
			for _, v := range n.Falcon.Conns {
				conns += v
			}
		}
		if had && p.Falcon != nil {
			pc = p.Falcon.Counters
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.0f\t%.0f\t%.2f\t%.2f\t%.0f\t%.0f\t%d\t\n", n.Name,
			rate(n.Port["tx_frames"], p.Port["tx_frames"], dt, had), // the switch port's tx is toward the NIC
			rate(n.Port["rx_frames"], p.Port["rx_frames"], dt, had),
			rate(fc["rx_frames"], pc["rx_frames"], dt, had), rate(fc["tx_frames"], pc["tx_frames"], dt, had),
			(rate(n.Port["tx_bytes"], p.Port["tx_bytes"], dt, had)+rate(fc["rx_bytes"], pc["rx_bytes"], dt, had))/1e6,
			(rate(n.Port["rx_bytes"], p.Port["rx_bytes"], dt, had)+rate(fc["tx_bytes"], pc["tx_bytes"], dt, had))/1e6,
			rate(fc["txn_completed"], pc["txn_completed"], dt, had), rate(sumRetx(fc), sumRetx(pc), dt, had), conns)
	}
	tw.Flush()

	fmt.Fprintln(w)
	prevConn := map[[2]any]device.ConnReport{}
	if ok {
		for _, c := range prev.conns {
			prevConn[[2]any{c.NIC, c.CID}] = c
		}
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "NIC\tCID\tPROTO\tPKTS/s\tFCWND\tNCWND\tRTT\tRTO\tOUTST\tRETX\tRETX/s\tREPATHS\t")
	for _, c := range cur.conns {
		p, had := prevConn[[2]any{c.NIC, c.CID}]
		had = had && ok
		pkts := c.Counters["tx_txn_packets"] + c.Counters["rx_txn_packets"]
		ppkts := p.Counters["tx_txn_packets"] + p.Counters["rx_txn_packets"]
		fmt.Fprintf(tw, "%s\t%d\t%s\t%.0f\t%.2f\t%d\t%s\t%s\t%d\t%d\t%.0f\t%d\t\n", c.NIC, c.CID, c.Protocol,
			rate(pkts, ppkts, dt, had), c.Fcwnd, c.Ncwnd, time.Duration(c.RTTNs).Round(time.Microsecond),
			time.Duration(c.RTONs).Round(time.Microsecond), c.Outstand, sumRetx(c.Counters),
			rate(sumRetx(c.Counters), sumRetx(p.Counters), dt, had), c.Counters["plb_repath"]+c.Counters["reroute"])
	}
	if len(cur.conns) == 0 {
		fmt.Fprintln(tw, "(no connections)\t")
	}
	tw.Flush()

	fmt.Fprintln(w, "\nDROPS by cause (non-zero, since start; +N in the last interval)")
	drops := dropCounters(cur.st)
	var pd map[string]uint64
	if ok {
		pd = dropCounters(prev.st)
	}
	var names []string
	for k, v := range drops {
		if v != 0 {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		fmt.Fprintln(w, "  none")
	}
	for _, k := range names {
		d := uint64(0)
		if pd != nil && drops[k] >= pd[k] {
			d = drops[k] - pd[k]
		}
		fmt.Fprintf(w, "  %-48s %10d  +%d\n", k, drops[k], d)
	}
}
