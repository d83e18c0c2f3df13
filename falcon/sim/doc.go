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
package sim
