package main

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// config is what the kernel command line asks of uinit.
type config struct {
	hostname string
	nics     []nicConfig
	// noload names modules (file name without .ko) not to load at boot.
	noload map[string]bool
}

// nicConfig configures one NIC. An empty mac means the first Ethernet NIC.
type nicConfig struct {
	mac  string
	cidr string
	mtu  string
}

// parseCmdline reads the falconnic.* parameters; other parameters are
// ignored. Bad values are reported and skipped.
func parseCmdline(s string) (config, []error) {
	var c config
	var errs []error
	for _, f := range strings.Fields(s) {
		key, val, _ := strings.Cut(f, "=")
		switch key {
		case "falconnic.noload":
			for _, m := range strings.Split(val, ",") {
				if m == "" {
					continue
				}
				if c.noload == nil {
					c.noload = map[string]bool{}
				}
				c.noload[m] = true
			}
		case "falconnic.hostname":
			c.hostname = val
		case "falconnic.ip":
			if _, _, err := net.ParseCIDR(val); err != nil {
				errs = append(errs, fmt.Errorf("falconnic.ip=%s: %v", val, err))
				continue
			}
			c.nics = append(c.nics, nicConfig{cidr: val})
		case "falconnic.net":
			n, err := parseNet(val)
			if err != nil {
				errs = append(errs, fmt.Errorf("falconnic.net=%s: %v", val, err))
				continue
			}
			c.nics = append(c.nics, n)
		}
	}
	return c, errs
}

// parseNet parses MAC[,CIDR][,mtu=N].
func parseNet(s string) (nicConfig, error) {
	parts := strings.Split(s, ",")
	hw, err := net.ParseMAC(parts[0])
	if err != nil {
		return nicConfig{}, err
	}
	n := nicConfig{mac: hw.String()}
	for _, p := range parts[1:] {
		if v, ok := strings.CutPrefix(p, "mtu="); ok {
			if m, err := strconv.Atoi(v); err != nil || m < 68 || m > 65535 {
				return nicConfig{}, fmt.Errorf("bad mtu %q", v)
			}
			n.mtu = v
			continue
		}
		if _, _, err := net.ParseCIDR(p); err != nil {
			return nicConfig{}, err
		}
		n.cidr = p
	}
	return n, nil
}
