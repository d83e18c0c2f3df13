// Package firmware is the software of the NIC's embedded CPU: the Rate
// Update Engine (RUE, the paper's FAE) algorithms that sit behind falcon's
// rue.Engine seam, and later the connection manager.
//
// Fixed is the default RUE: it keeps every connection's fabric and NIC
// windows at configured values and only tracks the smoothed RTT to set the
// retransmission timeout (RTO = max(scalar × smoothed RTT, min RTO),
// [S §10.3.4]). Swift comes later behind the same interface.
//
// Async wraps any engine to answer later (as a firmware core with an event
// queue does): Handle queues a copy of the event and returns false; Drain
// computes the queued responses and hands them to the datapath.
package firmware
