package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"falconnic/device"
	"falconnic/device/ether"
	"falconnic/device/fabric"
	"falconnic/device/port"
	"falconnic/internal/control"
)

func init() {
	register("status", "show a running daemon's NICs, switch and fabric", statusCmd)
}

func statusCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fl := flag.NewFlagSet("status", flag.ContinueOnError)
	fl.SetOutput(stderr)
	socket := fl.String("socket", device.DefaultControlSocket, "daemon control socket `PATH`")
	asJSON := fl.Bool("json", false, "print the raw status as JSON")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: falconnic status [--socket PATH] [--json]")
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fl.NArg() != 0 {
		fl.Usage()
		return fmt.Errorf("%w: status takes no arguments", errUsage)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var raw json.RawMessage
	if err := control.Call(ctx, *socket, "status", nil, &raw); err != nil {
		return controlError(*socket, err)
	}
	if *asJSON {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return err
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	var st device.Status
	if err := json.Unmarshal(raw, &st); err != nil {
		return fmt.Errorf("daemon sent a status this CLI cannot read: %w", err)
	}
	return printStatus(stdout, st)
}

// controlError turns a failed control call into one line that says what to do.
func controlError(socket string, err error) error {
	var opErr *net.OpError
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("no daemon at %s (is `falconnic serve` running? use --socket PATH)", socket)
	case errors.As(err, &opErr):
		return fmt.Errorf("cannot reach the daemon at %s: %v", socket, opErr.Err)
	}
	return fmt.Errorf("daemon at %s: %v", socket, err)
}

func printStatus(w io.Writer, st device.Status) error {
	fmt.Fprintf(w, "daemon up %s, control %s\n\n", st.Uptime.Round(time.Second), st.Control)
	printSecurity(w, st.Security)

	devs := make([]ether.Status, len(st.NICs))
	for i, n := range st.NICs {
		json.Unmarshal(n.Device, &devs[i]) // absent or foreign: columns stay empty
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NIC\tMAC\tSESSION\tQP\tRX-FRAMES\tRX-BYTES\tTX-FRAMES\tTX-BYTES\tDROPS\tSOCKET")
	for i, n := range st.NICs {
		session := devs[i].Session
		if session == "" {
			session = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", n.Name, n.MAC, session, n.QueuePairs,
			n.Port["rx_frames"], n.Port["rx_bytes"], n.Port["tx_frames"], n.Port["tx_bytes"], drops(n.Port), n.Socket)
	}
	tw.Flush()
	for i, n := range st.NICs {
		if n.Error != "" {
			fmt.Fprintf(w, "  %s: error: %s\n", n.Name, n.Error)
		}
		for _, q := range devs[i].Queues {
			state := "stopped"
			if q.Running {
				state = "running"
			}
			if !q.Enabled {
				state += ",disabled"
			}
			fmt.Fprintf(w, "  %s %s: size %d, last avail %d, %s", n.Name, q.Role, q.Size, q.LastAvail, state)
			if q.Waiting > 0 {
				fmt.Fprintf(w, ", %d frames waiting", q.Waiting)
			}
			fmt.Fprintln(w)
		}
		if len(devs[i].Counters) > 0 {
			fmt.Fprintf(w, "  %s counters: %s\n", n.Name, nonZero(devs[i].Counters))
		}
		if f := n.Falcon; f != nil {
			fmt.Fprintf(w, "  %s falcon port: rdma conns %d, nvme conns %d; %s\n", n.Name, f.Conns["rdma"], f.Conns["nvme"], nonZero(f.Counters))
			if fw := f.Firmware; fw != nil {
				printFirmware(w, n.Name, fw)
			}
		}
	}

	fmt.Fprintf(w, "\nswitch: %s\n", nonZero(st.Switch.Counters))
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PORT\tRX-FRAMES\tRX-BYTES\tTX-FRAMES\tTX-BYTES\tDROPS")
	for _, p := range st.Switch.Ports {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\n", p.Name, p.Counters["rx_frames"], p.Counters["rx_bytes"],
			p.Counters["tx_frames"], p.Counters["tx_bytes"], dropList(p.Counters))
	}
	tw.Flush()
	printMACs(w, "PORT", st.Switch.MACs)

	if f := st.Fabric; f != nil {
		fmt.Fprintf(w, "\nfabric: listen %s, %d path(s)", f.Listen, f.Paths)
		if f.Impairment.Active() {
			fmt.Fprintf(w, ", impairment loss %g%% reorder %g%% seed %d", f.Impairment.LossPercent, f.Impairment.ReorderPercent, f.Impairment.Seed)
		}
		fmt.Fprintf(w, "\n  counters: %s\n", nonZero(f.Counters))
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "PEER\tRX-DATAGRAMS\tRX-BYTES\tTX-DATAGRAMS\tTX-BYTES\tLAST-RX")
		for _, p := range f.Peers {
			last := "never"
			if p.LastRx != nil {
				last = p.LastRx.Round(time.Millisecond).String() + " ago"
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\n", p.Addr, p.Counters["rx_datagrams"], p.Counters["rx_bytes"],
				p.Counters["tx_datagrams"], p.Counters["tx_bytes"], last)
		}
		tw.Flush()
		printMACs(w, "PEER", f.MACs)
	} else {
		fmt.Fprintln(w, "\nfabric: none")
	}
	return nil
}

func printMACs(w io.Writer, where string, macs []fabric.MACStatus) {
	if len(macs) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "MAC\t%s\tAGE\n", where)
	for _, m := range macs {
		age := m.Age.Round(time.Millisecond).String()
		if m.Static {
			age = "static"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", m.MAC, m.Port, age)
	}
	tw.Flush()
}

// isTraffic reports whether a port counter counts traffic rather than drops.
func isTraffic(name string) bool {
	switch name {
	case "rx_frames", "rx_bytes", "tx_frames", "tx_bytes":
		return true
	}
	return false
}

func drops(c map[string]uint64) uint64 {
	var n uint64
	for k, v := range c {
		if !isTraffic(k) {
			n += v
		}
	}
	return n
}

// dropList names the non-zero drop counters ("-" when none).
func dropList(c map[string]uint64) string {
	var parts []string
	for k, v := range c {
		if !isTraffic(k) && v != 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", k, v))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

func nonZero(c map[string]uint64) string {
	var parts []string
	for k, v := range c {
		if v != 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", k, v))
		}
	}
	if len(parts) == 0 {
		return "all counters zero"
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// printFirmware prints a port's firmware and its busiest connections'
// congestion state, a line per flow.
func printFirmware(w io.Writer, nic string, fw *port.FirmwareStatus) {
	fmt.Fprintf(w, "  %s firmware %s: %s\n", nic, fw.Firmware.Name, nonZero(fw.Counters))
	if len(fw.Conns) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "    CONN\tPROTO\tFCWND\tNCWND\tRTT\tRTO\tIN-FLIGHT\tREPATHS\tFLOW\tLABEL\tFLOW-FCWND\tFLOW-RTT\tDELAY\tTARGET\n")
	for _, c := range fw.Conns {
		for i, f := range c.Flows {
			head := "    \t\t\t\t\t\t\t\t"
			if i == 0 {
				head = fmt.Sprintf("    %d\t%s\t%.2f\t%d\t%v\t%v\t%d\t%d+%d\t", c.SCID, c.Protocol, c.Fcwnd, c.Ncwnd,
					c.RTT.Round(time.Microsecond), c.RTO.Round(time.Microsecond), c.InFlight, c.Repaths, c.Reroutes)
			}
			fmt.Fprintf(tw, "%s%d\t%#x\t%.2f\t%v\t%v\t%v\n", head, i, f.Label, f.Fcwnd,
				f.RTT.Round(time.Microsecond), f.Delay.Round(time.Microsecond), f.Target.Round(time.Microsecond))
		}
	}
	tw.Flush()
	if fw.ConnsTotal > len(fw.Conns) {
		fmt.Fprintf(w, "    (%d more connections)\n", fw.ConnsTotal-len(fw.Conns))
	}
}
