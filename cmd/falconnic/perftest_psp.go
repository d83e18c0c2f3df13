package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"falconnic/device"
	"falconnic/internal/control"
)

// fabricReport tells how the two daemons' fabric was secured and what its
// PSP counters say (sealed, opened, refused), so a run shows that its
// RDMA traffic crossed the fabric encrypted.
func (p *rdmaPair) fabricReport(ctx context.Context) {
	if len(p.dlogs) < 2 {
		return
	}
	for _, l := range p.dlogs {
		sock := filepath.Join(filepath.Dir(l), "control.sock")
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		var st device.Status
		err := control.Call(cctx, sock, "status", nil, &st)
		cancel()
		switch {
		case err != nil:
			fmt.Fprintf(p.o.log, "perftest: %s: status: %v\n", sock, err)
		case st.Security == nil:
			fmt.Fprintf(p.o.log, "perftest: %s: fabric without security status\n", sock)
		case st.Security.Mode != "psp":
			fmt.Fprintf(p.o.log, "perftest: %s: fabric %s\n", filepath.Base(filepath.Dir(l)), st.Security.Mode)
		default:
			var sealed, opened, refused uint64
			for _, n := range st.Security.NICs {
				for k, v := range n.Counters {
					switch {
					case k == "psp_tx_sealed":
						sealed += v
					case k == "psp_rx_opened":
						opened += v
					case len(k) > 7 && k[:7] == "psp_rx_":
						refused += v
					}
				}
			}
			fmt.Fprintf(p.o.log, "perftest: %s: fabric psp: %d datagrams sealed, %d opened, %d refused\n",
				filepath.Base(filepath.Dir(l)), sealed, opened, refused)
		}
	}
}
