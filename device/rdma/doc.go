// Package rdma is a NIC's RDMA function: the
// control channel the guest driver speaks (package rdmauapi), the verbs
// engine and the DMA engine over the guest's memory, attached to the
// NIC's Falcon port (package port) as the ULP of protocol 2, and riding on
// the NIC's Ethernet function (an ether.Upper, wired by the daemon).
//
//	guest driver ──0x88B5 frames──▶ NIC TX path ─HandleControl─┐
//	                                                           ▼
//	fabric / local NICs ──▶ the NIC's Falcon port's work queue ──▶ port goroutine
//	                            owns: the endpoint, verbs.Engine (RDMA ULP), NVMe engine
//	guest RAM ◀── DMA (rdmaMem over vhostuser.MemTable, bounds checked) ──┘
//	driver ◀── replies and events (NIC.Deliver on the RX path)
//
// The NIC's port goroutine owns the verbs engine as it owns the Falcon
// endpoint: control frames, Falcon packets and connection-manager
// work all arrive through the port's one bounded queue; timers are the
// endpoint's deadlines on the port's clock. The NIC's connection-manager
// agent (package cm) sets up one ordered Falcon connection per peer NIC, port to
// port inside a daemon (Port.LinkTo) and over the fabric between
// daemons.
//
// Isolation: each NIC has its own engine, keys and memory; a packet can
// reach a NIC's guest memory only through an rkey that guest registered,
// and every DMA access is checked against that guest's memory table.
//
// The guest's memory table reaches the DMA engine through Func.SetMemTable,
// which the Ethernet function calls with each vhost-user session's table.
package rdma
