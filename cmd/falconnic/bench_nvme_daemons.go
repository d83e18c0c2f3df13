package main

import (
	"fmt"

	"falconnic/device"
)

// nvmeBenchTwoDaemons returns bench nvme's configs for two daemons: the
// initiator's (disk d0 on NIC ini) and the target's (NIC tgt exporting
// the namespace to ini), joined by the UDP fabric on loopback, sealed
// with a key file in dir unless insecure.
func nvmeBenchTwoDaemons(dir, backing string, size int64, blockSize int, direct bool, aio string, queues int, insecure bool) ([]string, error) {
	ports, err := freeUDPPorts(2)
	if err != nil {
		return nil, err
	}
	key, err := fabricKeyFile(dir, insecure)
	if err != nil {
		return nil, err
	}
	sec := fmt.Sprintf(`"key_file": %q`, key)
	if insecure {
		sec = `"insecure": true`
	}
	fab := func(i int) string {
		return fmt.Sprintf(`"fabric": {"listen": %q, "peers": [%q], %s}`, ports[i], ports[1-i], sec)
	}
	ini := fmt.Sprintf(`{"control": "c.sock",
	  "nics": [{"name": "ini", "socket": "ini.sock", "mac": "52:54:00:fb:00:01"}], %s,
	  "nvme": {"disks": [{"name": "d0", "socket": "d0.sock", "nic": "ini", "target": "52:54:00:fb:00:02", "nsid": 1,
	                      "serial": "fn-bench", "queues": %d}]}}`, fab(0), queues)
	tgt := fmt.Sprintf(`{"control": "c.sock",
	  "nics": [{"name": "tgt", "socket": "tgt.sock", "mac": "52:54:00:fb:00:02"}], %s,
	  "nvme": {"namespaces": [{"nic": "tgt", "nsid": 1, "backing": %q, "size": %d, "block_size": %d, "direct": %t, "aio": %q,
	                           "allow": ["52:54:00:fb:00:01"]}]}}`, fab(1), backing, size, blockSize, direct, aio)
	return []string{ini, tgt}, nil
}

// nvmeBenchDaemons describes bench nvme's daemons in its report.
func nvmeBenchDaemons(n int, insecure bool) string {
	switch {
	case n == 1:
		return "one: the initiator and target NICs"
	case insecure:
		return "two, one NIC each, joined by the UDP fabric on loopback in plaintext (insecure)"
	}
	return "two, one NIC each, joined by the UDP fabric on loopback, PSP-sealed (AES-GCM-128)"
}

// daemonSet is bench nvme's daemons, for diagnosis: Status reports each.
type daemonSet []*device.Daemon

// Status returns every daemon's status (one: that daemon's).
func (s daemonSet) Status() any {
	if len(s) == 1 {
		return s[0].Status()
	}
	var out []device.Status
	for _, d := range s {
		out = append(out, d.Status())
	}
	return out
}
