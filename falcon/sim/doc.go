// Package sim runs many Falcon endpoints on an emulated fabric
// (falcon/fabric), one endpoint per host, on one manual clock: the
// harness for Falcon's experiments (`falconnic bench`).
//
// Sim advances time straight to the next due event — a fabric event, an
// endpoint deadline or a generator event — runs everything due at that
// instant, and moves on; nothing polls connections. A QP is one
// initiator connection with its operations: an operation of Size bytes is
// split into transactions of at most the MTU (pushes for Write, pulls for
// Read) and completes when all of them have. Generators are driven by
// completions and Xon callbacks: Closed keeps k operations outstanding,
// Poisson makes them arrive open-loop. A Recorder collects per-operation
// latency (arrival to last completion, flow-control waits included),
// operations and bytes. A host's ULP acknowledges pushes at once, or at
// its Drain rate (host congestion), and answers pulls with zeros.
//
// Each connection gets its own flow labels (its index shifted left by two,
// the flow id in the low two bits), so ECMP spreads connections and their
// flows over the spines.
//
// Pair is the smaller peer: two endpoints over link.Mem with one
// connection, the test peer of Falcon's users (verbs, nvme, firmware).
//
// The experiments behind `falconnic bench` live here, each a Run function
// returning JSON-ready points: RunIncast (S senders × Q QPs into one
// host), RunMultipath (Poisson writes rack to rack, 1 vs 4 flows),
// RunLinkFail (a leaf–spine link fails under permutation traffic),
// RunHostCong (a receiver's ULP slows down for a window), RunLatency
// (unloaded latency against the ideal) and RunLoss (one connection over a
// lossy or reordering link, three recovery modes). The command adds the
// goals (Doc, Goal), the flags and the plots. The firmware is injected
// (Common.RUE): the package imports no firmware.
package sim
