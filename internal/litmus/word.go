package litmus

import "sync/atomic"

// loadWord and storeWord are the protocol's memory accesses: on amd64 a
// plain MOV for the load and XCHG (a full barrier) for the store.
func loadWord(w *uint64) uint64     { return atomic.LoadUint64(w) }
func storeWord(w *uint64, v uint64) { atomic.StoreUint64(w, v) }

// delay waits n steps, each an atomic load of w.
func delay(w *uint64, n uint64) {
	for i := uint64(0); i < n; i++ {
		loadWord(w)
	}
}

// hash spreads a round number over 32 bits (Fibonacci hashing).
func hash(n uint64) uint64 { return n * 0x9e3779b97f4a7c15 >> 32 }
