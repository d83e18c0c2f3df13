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
package fabric
