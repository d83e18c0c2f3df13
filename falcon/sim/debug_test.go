package sim

import (
	"fmt"
	"os"
	"testing"
	"time"

	"falconnic/falcon/rue"
	"falconnic/firmware"
)

func TestDebugIncast(t *testing.T) {
	if os.Getenv("DBG") == "" {
		t.Skip()
	}
	qps := envInt("QPS", 10)
	var engs []*firmware.Swift
	fc := DefaultFabric(1, 6, 1, 1)
	fc.SampleEvery = 50 * time.Microsecond
	cc := DefaultConn()
	cc.TxWindow, cc.MaxTxns = IncastTable, IncastTable
	if v := envInt("INIT", 0); v > 0 {
		cc.InitFcwnd = rue.Fixed(v)
	}
	cc.RACK, cc.TLP = os.Getenv("RT") != "", os.Getenv("RT") != ""
	if v := envInt("IRTO", 0); v > 0 {
		cc.InitRTO = time.Duration(v) * time.Microsecond
	}
	s := New(Config{Fabric: fc, Conn: cc, RUE: func(int) rue.Engine {
		e := firmware.NewSwift(firmware.SwiftConfig{MinRTO: 250 * time.Microsecond, SubOneGain: float64(envInt("SUB", 0)) / 100,
			FSRange: time.Duration(envInt("FS", 20)) * time.Microsecond, BaseTarget: time.Duration(envInt("BT", 10)) * time.Microsecond})
		engs = append(engs, e)
		return e
	}, Seed: 1})
	var rec Recorder
	for src := 1; src <= 5; src++ {
		for j := 0; j < qps; j++ {
			qp, _ := s.Connect(src, 0, 1)
			qp.Closed(Write, 1<<20, 1, -1, 5*time.Millisecond, &rec)
		}
	}
	down := s.Fabric.Down(0)
	s.Fabric.Watch(down)
	for step := 0; step < envInt("STEPS", 40); step++ {
		s.Run(s.Now() + time.Duration(envInt("DT", 100))*time.Microsecond)
		var sum, mn, mx float64
		mn = 1e9
		rto := uint64(0)
		ge1 := 0
		for _, q := range s.QPs {
			w := q.Conn.Fcwnd().Float()
			if w >= 1 {
				ge1++
			}
			sum += w
			mn, mx = min(mn, w), max(mx, w)
			rto += q.Conn.Stats.RetxRTO.Load()
		}
		m := s.Fabric.Metrics(down)
		q := 0
		if len(m.Series) > 0 {
			q = m.Series[len(m.Series)-1].QueueBytes
		}
		if step%envInt("EVERY", 1) != 0 {
			continue
		}
		fmt.Printf("ge1=%d t=%v fcwnd sum %.2f min %.3f max %.3f q=%d maxq=%d drops=%v rto=%d srtt=%v rto=%v\n", ge1, s.Now(), sum, mn, mx, q, m.MaxQueueBytes, FabricDrops(s.Fabric), rto, s.QPs[0].Conn.SmoothedRTT(), s.QPs[0].Conn.RTO())
	}
	for i, e := range engs {
		fmt.Printf("host %d %+v\n", i, e.Stats)
	}
}

func envInt(k string, d int) int {
	var v int
	if _, err := fmt.Sscan(os.Getenv(k), &v); err != nil {
		return d
	}
	return v
}
