package litmus

import "sync/atomic"

// loadWord and storeWord are the protocol's memory accesses: on amd64 a
// plain MOV for the load and XCHG (a full barrier) for the store.
func loadWord(w *uint64) uint64     { return atomic.LoadUint64(w) }
func storeWord(w *uint64, v uint64) { atomic.StoreUint64(w, v) }
