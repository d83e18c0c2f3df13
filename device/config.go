package device

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"falconnic/device/ether"
	"falconnic/device/fabric"
	"falconnic/device/port"
	"falconnic/device/vsock"
)

// DefaultControlSocket is where the daemon listens for the CLI when the
// config does not say.
var DefaultControlSocket = filepath.Join(os.TempDir(), "falconnic", "control.sock")

// Config is the daemon's configuration file: JSON, unknown fields rejected.
//
// Schema (every field but nics[].name/socket/mac is optional):
//
//	{
//	  "control": "/run/falconnic/control.sock",   // CLI socket; default DefaultControlSocket
//	  "nics": [                                    // one entry per guest NIC
//	    {
//	      "name": "n0",                            // [A-Za-z0-9_.-]{1,32}, unique
//	      "socket": "n0.sock",                     // vhost-user socket path, unique
//	      "mac": "52:54:00:12:34:56",              // unicast, not all-zero, unique
//	      "queue_pairs": 1,                        // 1..16; default 1
//	      "dial": false,                           // true: connect to QEMU (server=on) instead of listening
//	      "any_source_mac": false,                 // true: accept frames from other source MACs than mac
//	      "firmware": {"name": "swift"},           // the NIC's RUE: swift (default) or fixed, and its
//	                                               // parameters (port.FirmwareSpec); swap at run time
//	                                               // with the nic.firmware control method
//	      "multipath": {"flows": 4}                // flows per Falcon connection (1..4, default 1; flow i
//	                                               // leaves from fabric path i mod paths), "policy"
//	                                               // (round-robin, weighted, max-open: default) and
//	                                               // "reroute" (protective reroute, default true)
//	    }
//	  ],
//	  "switch": {
//	    "mac_age": "300s",                         // Go duration; default 300s
//	    "max_macs": 4096                           // default 4096
//	  },
//	  "fabric": {                                  // absent: this daemon is alone
//	    "listen": "0.0.0.0:7471",                  // local UDP address (IP literal)
//	    "peers": ["192.0.2.2:7471", "host-b:7471"],// other daemons' listen addresses
//	    "paths": 1,                                // UDP source ports per daemon, 1..16; same on every daemon
//	    "loss_percent": 0,                         // egress impairment for experiments
//	    "reorder_percent": 0,
//	    "seed": 1
//	  },
//	  "metrics": {                                 // absent: no Prometheus endpoint (serve --metrics ADDR also sets it)
//	    "listen": "127.0.0.1:9477",                // HTTP address serving /metrics
//	    "top_conns": 8                             // connections per NIC exported one by one (the busiest); 0..256, default 8
//	  },
//	  "port_cores": 1                              // goroutines running the NICs' Falcon ports, 0..64; default 1 (Config.PortCores)
//	}
//
// The fabric section also takes "key_file" (the fabric's deployment
// secret, mode 0600), or "insecure": true, and "id": see config_secure.go.
//
// Peers recognise a daemon by the source IP of its datagrams and a source
// port in [listen port, listen port + paths), so on a host with several
// addresses, listen on the address the peers list rather than 0.0.0.0.
//
// A guest frame crosses the fabric in one UDP datagram: a 1,514-byte frame
// becomes 1,526 bytes of UDP payload, 1,554 bytes of IPv4 packet. On an
// underlay with a 1,500-byte MTU the kernel fragments it; give guests an
// MTU of 1,446 (1,500 - 54 bytes of IPv4, UDP, fabric and Ethernet
// headers), or the underlay jumbo frames, to avoid that.
//
// Relative paths (control, nics[].socket) are relative to the directory of
// the config file when it is read with LoadConfig, which makes them absolute.
type Config struct {
	Control string      `json:"control,omitempty"`
	NICs    []NICSpec   `json:"nics"`
	Switch  SwitchSpec  `json:"switch,omitzero"`
	Fabric  *FabricSpec `json:"fabric,omitempty"`
	// Vsock lists vhost-user-vsock devices (one per VM that wants the guest
	// agent over vsock), each bridged to host unix sockets.
	Vsock []vsock.Config `json:"vsock,omitempty"`
	// NVMe declares exported namespaces and vhost-user-blk disks (NVMeSpec).
	NVMe *NVMeSpec `json:"nvme,omitempty"`
	// Metrics serves the counters in the Prometheus format (MetricsSpec).
	Metrics *MetricsSpec `json:"metrics,omitempty"`
	// PortCores is how many goroutines (the NIC cores) run the NICs'
	// Falcon ports; 0 means nvme.cores if that is set, else 1. The NICs
	// spread over them in order: those with NVMe functions first (as
	// nvme.cores places them), then the others in config order. On one
	// goroutine, frames between two NICs of the daemon pass without waking
	// another thread: an RDMA round trip between two guests of one daemon
	// is shorter, and costs less CPU, than with a goroutine per NIC
	// (README, Measured). A host with cores to spare and several busy NICs
	// sets more, up to one per NIC.
	PortCores int `json:"port_cores,omitempty"`
}

// maxPortCores bounds Config.PortCores.
const maxPortCores = 64

// portCores is the number of goroutines that run the NICs' ports.
func (cfg *Config) portCores() int {
	switch {
	case cfg.PortCores > 0:
		return cfg.PortCores
	case cfg.NVMe != nil && cfg.NVMe.Cores > 0:
		return cfg.NVMe.Cores
	}
	return 1
}

// MetricsSpec is the Prometheus endpoint in the config.
type MetricsSpec struct {
	Listen string `json:"listen"`
	// TopConns is how many connections per NIC are exported one by one,
	// the busiest first (DefaultTopConns when zero); the rest are counted.
	TopConns int `json:"top_conns,omitempty"`
}

// MaxTopConns bounds MetricsSpec.TopConns: per-connection series are
// capped.
const MaxTopConns = 256

func (m *MetricsSpec) check() error {
	if _, _, err := net.SplitHostPort(m.Listen); err != nil {
		return fmt.Errorf("metrics: listen %q: %v", m.Listen, err)
	}
	if m.TopConns < 0 || m.TopConns > MaxTopConns {
		return fmt.Errorf("metrics: top_conns %d out of range 0..%d", m.TopConns, MaxTopConns)
	}
	if m.TopConns == 0 {
		m.TopConns = DefaultTopConns
	}
	return nil
}

// NICSpec is one guest NIC in the config.
type NICSpec struct {
	Name       string `json:"name"`
	Socket     string `json:"socket"`
	MAC        string `json:"mac"`
	QueuePairs int    `json:"queue_pairs,omitempty"`
	Dial       bool   `json:"dial,omitempty"`
	// AnySourceMAC turns off the switch's source check: by default a NIC's
	// port accepts only frames from the NIC's own MAC, and that MAC is
	// pinned to the port (no other guest or peer can take it over).
	AnySourceMAC bool `json:"any_source_mac,omitempty"`
	// Firmware is the NIC's congestion control (nil: Swift at the
	// daemon's defaults).
	Firmware *port.FirmwareSpec `json:"firmware,omitempty"`
	// Multipath spreads each of the NIC's Falcon connections over several
	// flows (nil: one flow).
	Multipath *port.Multipath `json:"multipath,omitempty"`
	// IPs are the guest's addresses on this NIC (config_gids.go): given,
	// its UD sends may carry only the GIDs of its MAC and of these.
	IPs []string `json:"ips,omitempty"`
	// RDMA tunes the NIC's RDMA function (nil: defaults; config_rdma.go).
	RDMA *RDMASpec `json:"rdma,omitempty"`
}

// SwitchSpec tunes the in-daemon switch.
type SwitchSpec struct {
	MACAge  Duration `json:"mac_age,omitzero"`
	MaxMACs int      `json:"max_macs,omitempty"`
}

// FabricSpec is the UDP fabric port in the config.
type FabricSpec struct {
	Listen         string   `json:"listen"`
	Peers          []string `json:"peers,omitempty"`
	Paths          int      `json:"paths,omitempty"`
	LossPercent    float64  `json:"loss_percent,omitempty"`
	ReorderPercent float64  `json:"reorder_percent,omitempty"`
	Seed           uint64   `json:"seed,omitempty"`
	// KeyFile, Insecure and ID secure the fabric (config_secure.go).
	KeyFile  string `json:"key_file,omitempty"`
	Insecure bool   `json:"insecure,omitempty"`
	ID       string `json:"id,omitempty"`
	// RotateEvery is how often the NICs' master keys rotate on their own
	// (config_secure.go): a Go duration, or "off"; default
	// DefaultRotateEvery.
	RotateEvery string `json:"rotate_every,omitempty"`
}

// Duration is a time.Duration written as a Go duration string ("300s").
type Duration time.Duration

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string like \"300s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes a duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// ErrConfig marks an invalid configuration.
var ErrConfig = errors.New("config")

var nicName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,32}$`)

// LoadConfig reads and checks the config file at path, resolving relative
// paths against its directory.
func LoadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cfg, err := ParseConfig(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	cfg.resolve(dir)
	return cfg, nil
}

// ParseConfig decodes and checks a config, filling in defaults.
func ParseConfig(b []byte) (*Config, error) {
	var cfg Config
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data after the config object", ErrConfig)
	}
	if err := cfg.check(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	return &cfg, nil
}

func (cfg *Config) check() error {
	if cfg.Control == "" {
		cfg.Control = DefaultControlSocket
	}
	if cfg.Metrics != nil {
		if err := cfg.Metrics.check(); err != nil {
			return err
		}
	}
	if cfg.PortCores < 0 || cfg.PortCores > maxPortCores {
		return fmt.Errorf("port_cores %d out of range 0..%d", cfg.PortCores, maxPortCores)
	}
	names, sockets, macs := map[string]bool{}, map[string]bool{cfg.Control: true}, map[string]bool{}
	for i := range cfg.NICs {
		n := &cfg.NICs[i]
		if !nicName.MatchString(n.Name) {
			return fmt.Errorf("nics[%d]: name %q must match %s", i, n.Name, nicName)
		}
		if names[n.Name] {
			return fmt.Errorf("nics[%d]: name %q used twice", i, n.Name)
		}
		names[n.Name] = true
		if n.Socket == "" {
			return fmt.Errorf("nic %s: no socket", n.Name)
		}
		if sockets[n.Socket] {
			return fmt.Errorf("nic %s: socket %s used twice", n.Name, n.Socket)
		}
		sockets[n.Socket] = true
		hw, err := net.ParseMAC(n.MAC)
		if err != nil || len(hw) != 6 {
			return fmt.Errorf("nic %s: mac %q is not a 48-bit MAC address", n.Name, n.MAC)
		}
		if hw[0]&1 != 0 || bytes.Equal(hw, make([]byte, 6)) {
			return fmt.Errorf("nic %s: mac %s must be unicast and not zero", n.Name, hw)
		}
		n.MAC = hw.String()
		if macs[n.MAC] {
			return fmt.Errorf("nic %s: mac %s used twice", n.Name, n.MAC)
		}
		macs[n.MAC] = true
		if n.QueuePairs == 0 {
			n.QueuePairs = 1
		}
		if n.QueuePairs < 1 || n.QueuePairs > ether.MaxQueuePairs {
			return fmt.Errorf("nic %s: queue_pairs %d out of range 1..%d", n.Name, n.QueuePairs, ether.MaxQueuePairs)
		}
		if n.Firmware != nil {
			if err := n.Firmware.Check(); err != nil {
				return fmt.Errorf("nic %s: %v", n.Name, err)
			}
		}
		if n.Multipath != nil {
			if err := n.Multipath.Check(); err != nil {
				return fmt.Errorf("nic %s: %v", n.Name, err)
			}
		}
		if _, err := n.ips(); err != nil {
			return fmt.Errorf("nic %s: %w", n.Name, err)
		}
		if n.RDMA != nil {
			if err := n.RDMA.check(); err != nil {
				return fmt.Errorf("nic %s: %w", n.Name, err)
			}
		}
	}
	if err := cfg.checkVsock(names, sockets); err != nil {
		return err
	}
	if err := cfg.NVMe.check(cfg.NICs, sockets); err != nil {
		return err
	}
	if cfg.Switch.MACAge < 0 || cfg.Switch.MaxMACs < 0 {
		return errors.New("switch: mac_age and max_macs must not be negative")
	}
	if f := cfg.Fabric; f != nil {
		if _, err := netip.ParseAddrPort(f.Listen); err != nil {
			return fmt.Errorf("fabric: listen %q must be IP:port: %v", f.Listen, err)
		}
		for _, p := range f.Peers {
			if _, port, err := net.SplitHostPort(p); err != nil || port == "" || port == "0" {
				return fmt.Errorf("fabric: peer %q must be host:port", p)
			}
		}
		if f.Paths == 0 {
			f.Paths = 1
		}
		if f.Paths < 1 || f.Paths > fabric.MaxPaths {
			return fmt.Errorf("fabric: paths %d out of range 1..%d", f.Paths, fabric.MaxPaths)
		}
		if err := f.impairment().Validate(); err != nil {
			return err
		}
		if err := f.checkSecurity(); err != nil {
			return err
		}
	}
	return nil
}

func (cfg *Config) resolve(dir string) {
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	cfg.Control = abs(cfg.Control)
	for i := range cfg.NICs {
		cfg.NICs[i].Socket = abs(cfg.NICs[i].Socket)
	}
	for i := range cfg.Vsock {
		cfg.Vsock[i].ResolvePaths(dir)
	}
	cfg.NVMe.resolve(dir)
	if cfg.Fabric != nil {
		cfg.Fabric.KeyFile = abs(cfg.Fabric.KeyFile)
	}
}

func (f *FabricSpec) impairment() fabric.Impairment {
	return fabric.Impairment{LossPercent: f.LossPercent, ReorderPercent: f.ReorderPercent, Seed: f.Seed}
}

// hwAddr returns the NIC's MAC (checked by ParseConfig).
func (n NICSpec) hwAddr() net.HardwareAddr {
	hw, _ := net.ParseMAC(n.MAC)
	return hw
}

// resolvePeers turns the peer list into addresses, looking up host names.
func (f *FabricSpec) resolvePeers() ([]netip.AddrPort, error) {
	out := make([]netip.AddrPort, 0, len(f.Peers))
	for _, p := range f.Peers {
		if ap, err := netip.ParseAddrPort(p); err == nil {
			out = append(out, ap)
			continue
		}
		ua, err := net.ResolveUDPAddr("udp", p)
		if err != nil {
			return nil, fmt.Errorf("fabric: peer %s: %w", p, err)
		}
		out = append(out, ua.AddrPort())
	}
	return out, nil
}
