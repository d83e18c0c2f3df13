package tl

import "math/bits"

// Pool is one carved region of a resource pool: Cap units, of which the last
// Reserve may only be taken by a head-of-line request [S §8.2, CR#3].
type Pool struct {
	Cap, Reserve, Used int
	Peak               int
	// EMAShift smooths the occupancy the receiver reports [S §10.2]: on
	// every change ema += (used − ema) / 2^EMAShift. 0 is the coefficient
	// 1 of Isekai's default (the EMA is the occupancy itself).
	EMAShift uint8
	ema      int // occupancy EMA, fixed point with 8 fractional bits
}

// EMA returns the smoothed occupancy.
func (p *Pool) EMA() int { return p.ema >> 8 }

// Level quantises the smoothed occupancy into the 32 levels of the ACKs'
// rx-buffer field [S §10.2]: 31 equal steps of the capacity.
func (p *Pool) Level() uint8 {
	if p.Cap <= 0 {
		return 0
	}
	return uint8(min(p.EMA()*32/p.Cap, 31))
}

func (p *Pool) changed() {
	p.ema += (p.Used<<8 - p.ema) >> p.EMAShift
}

// Take allocates n units; hol requests may dip into the reserve. It reports
// success.
func (p *Pool) Take(n int, hol bool) bool {
	limit := p.Cap - p.Reserve
	if hol {
		limit = p.Cap
	}
	if p.Used+n > limit {
		return false
	}
	p.Used += n
	if p.Used > p.Peak {
		p.Peak = p.Used
	}
	p.changed()
	return true
}

// Give returns n units.
func (p *Pool) Give(n int) {
	p.Used -= n
	if p.Used < 0 {
		p.Used = 0
	}
	p.changed()
}

// Free returns the units available to a non-HoL request.
func (p *Pool) Free() int { return p.Cap - p.Reserve - p.Used }

// Region pairs a packet pool with a buffer pool (cells of CellSize bytes).
type Region struct {
	Pkt, Buf Pool
}

// Take charges one packet and cells cells, all or nothing.
func (r *Region) Take(cells int, hol bool) bool {
	if !r.Pkt.Take(1, hol) {
		return false
	}
	if !r.Buf.Take(cells, hol) {
		r.Pkt.Give(1)
		return false
	}
	return true
}

// Give returns one packet and cells cells.
func (r *Region) Give(cells int) {
	r.Pkt.Give(1)
	r.Buf.Give(cells)
}

// Limits sizes the regions of a Resources.
type Limits struct {
	CellSize   int // bytes per buffer cell (N of ⌈L/N⌉)
	TxReqPkts  int // ULP-request region of the Tx pools (initiator)
	TxReqCells int
	TxDataPkts int // ULP-data region of the Tx pools (target Pull Data)
	TxDataCell int
	RxReqPkts  int // ULP-request region of the Rx pools (Pull Data pre-allocation)
	RxReqCells int
	RxNetPkts  int // network-request region of the Rx pools (target admission)
	RxNetCells int
	HoLPkts    int // of RxNet, reserved for head-of-line requests
	HoLCells   int
	// RxEMAShift smooths the network-request pools' occupancy before it
	// is reported in ACKs (see Pool.EMAShift; 0: unsmoothed).
	RxEMAShift uint8
	// Alpha enables per-connection dynamic thresholds (Isekai's alpha
	// carving, digest §8): a connection may hold at most Alpha × the free
	// Tx request packets (at least one) before it is Xoff'ed. 0 disables.
	Alpha float64
}

// DefaultLimits are generous pools for one NIC.
func DefaultLimits() Limits {
	return Limits{CellSize: 256,
		TxReqPkts: 8192, TxReqCells: 8192 * 17, TxDataPkts: 8192, TxDataCell: 8192 * 17,
		RxReqPkts: 8192, RxReqCells: 8192 * 17, RxNetPkts: 8192, RxNetCells: 8192 * 17,
		HoLPkts: 64, HoLCells: 64 * 17}
}

// Resources is a NIC's carved pools.
type Resources struct {
	CellSize int
	TxReq    Region
	TxData   Region
	RxReq    Region
	RxNet    Region
	Alpha    float64
}

// NewResources carves pools per l.
func NewResources(l Limits) *Resources {
	if l.CellSize <= 0 {
		l.CellSize = 256
	}
	return &Resources{
		CellSize: l.CellSize,
		Alpha:    l.Alpha,
		TxReq:    Region{Pkt: Pool{Cap: l.TxReqPkts}, Buf: Pool{Cap: l.TxReqCells}},
		TxData:   Region{Pkt: Pool{Cap: l.TxDataPkts}, Buf: Pool{Cap: l.TxDataCell}},
		RxReq:    Region{Pkt: Pool{Cap: l.RxReqPkts}, Buf: Pool{Cap: l.RxReqCells}},
		RxNet: Region{Pkt: Pool{Cap: l.RxNetPkts, Reserve: l.HoLPkts, EMAShift: l.RxEMAShift},
			Buf: Pool{Cap: l.RxNetCells, Reserve: l.HoLCells, EMAShift: l.RxEMAShift}},
	}
}

// Admit reports whether a connection already holding held Tx request
// packets may take another under the dynamic threshold: its own alpha
// when the RUE gave it one (alpha > 0), else the NIC's.
func (r *Resources) Admit(held int, alpha float64) bool {
	if alpha <= 0 {
		alpha = r.Alpha
	}
	if alpha <= 0 {
		return true
	}
	return float64(held) < max(alpha*float64(r.TxReq.Pkt.Free()), 1)
}

// Cells returns ⌈n/CellSize⌉, at least 1. A power-of-two cell size
// (the default) divides by a shift: every submission and admission asks.
func (r *Resources) Cells(n int) int {
	cs := r.CellSize
	var c int
	if cs > 0 && cs&(cs-1) == 0 {
		c = (n + cs - 1) >> bits.TrailingZeros(uint(cs))
	} else {
		c = (n + cs - 1) / cs
	}
	if c < 1 {
		c = 1
	}
	return c
}
