// Package link is the Falcon transport's only I/O: the Link interface the
// engines send packets on, and the links behind it.
//
// A Link takes one Falcon packet (header, payload and the ICV that
// wire.SealICV appends) plus a flow label, copies it and sends it on. The
// receiving side hands packets to a Receiver, valid only for the call.
//
// Mem is one direction of an in-memory link for tests and experiments. It
// has no goroutines and no timers of its own: Send stamps each packet with
// its delivery time on the injected clock (propagation Delay, serialization
// at RateBitsPerSec behind earlier packets, an optional reorder hold-back),
// and Poll delivers what is due at the clock's current time, NextDue telling
// the driver when to poll next. Loss, reordering, duplication, corruption (a
// flipped bit that the receiver's ICV check must catch) and tail drop at a
// queue limit are drawn from a PCG source seeded by MemConfig.Seed, so a run
// is reproducible. Each effect has its own counter in MemStats.
//
// The emulated datacenter fabric (racks, spines, ECMP, shared buffers,
// failures) is package falcon/fabric; falcon/sim puts endpoints on it.
//
// Capture wraps a Link and writes every sent packet to a pcapng stream in
// synthetic Ethernet/IPv6/UDP framing (UDP destination port 1000, the port
// Isekai and PSP use; IPv6 flow label = the packet's flow), timestamped by
// the clock, so Wireshark shows the outer stack. The package registers a
// gopacket layer, LayerTypeFalcon, on UDP port 1000, so captures decode in
// Go as well, and DumpCapture prints a capture as one line per packet
// (Wireshark has no Falcon dissector).
package link
