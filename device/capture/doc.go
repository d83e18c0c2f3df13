// Package capture records what a NIC of the daemon sends and receives on
// the UDP fabric and on the in-daemon links between Falcon ports, for
// `falconnic capture`: a Hub the daemon's send and receive paths report
// to, and capture sessions, each with a bounded buffer that a control
// client drains.
//
// Cost when nobody captures: Active is one atomic load; the daemon's hooks
// call it before anything else. While a session runs, each packet it
// takes is copied once into its buffer.
//
// Bounds: a session buffers at most MaxBuffer bytes of packets (its
// Buffer option; packets cut to its snap length); a packet that does not
// fit is dropped and counted (dropped_buffer_full), never waited for. A
// session whose client stops reading for IdleTimeout ends by itself
// (sessions_abandoned), and at most MaxSessions run at once.
//
// The daemon (device/capture.go) tells which NIC a packet belongs
// to and reports it with Hub.Report; a session takes the packets of its
// NIC. A packet between two NICs of the daemon is reported twice (out on
// the sender, in on the receiver); a session of every NIC takes it once
// (the Wire bit). PcapWriter turns records into pcapng for the CLI.
package capture
