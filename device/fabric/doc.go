// Package fabric is what connects a daemon's NICs: the in-process L2
// learning switch (Switch, one SwitchPort per NIC and one for the fabric
// port) and the fabric port that reaches other daemons over UDP (Fabric),
// which carries Ethernet frames, Falcon packets and connection-manager
// messages, each kind in its own fabric header (wire.go). Frames are
// package l2's; both learn MAC addresses in the same aging table
// (switch_mac.go). Control-channel frames (EtherType 0x88B5) never cross
// either. Everything a datagram carries is hostile until decoded, and
// every drop is counted by cause. Loss and reordering can be injected on
// the way out (Impairment).
//
// The UDP datapath moves datagrams in batches (outbox.go, rx.go): a port
// sends through an Outbox it owns, which copies each datagram (or lets a
// sealer build it in place, Link.Reserve) into an arena and hands the
// burst to the kernel at the port's end of a burst of work with one
// sendmmsg per path, each run of equal-sized datagrams to one peer as one
// UDP GSO send (UDP_SEGMENT). Each socket's read goroutine takes up to
// rxBatch receives per recvmmsg into preallocated buffers, with UDP GRO
// on, and splits a coalesced receive at its segment size; every datagram
// of a batch, and every segment of a receive, is decoded and counted on
// its own. Options.NoOffload turns GSO and GRO off.
package fabric
