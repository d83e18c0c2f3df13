package wire

import (
	"math/rand/v2"
	"testing"
)

// refBitmap is a slow reference model of Bitmap.
type refBitmap []bool

func TestBitmapAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{1, 63, 64, 65, 128, 200, 1000, 1024} {
		b := NewBitmap(size)
		ref := make(refBitmap, size)
		for step := 0; step < 3000; step++ {
			i := rng.IntN(size+20) - 10 // includes out-of-range indices
			switch rng.IntN(6) {
			case 0, 1:
				b.Set(i)
				if i >= 0 && i < size {
					ref[i] = true
				}
			case 2:
				b.Clear(i)
				if i >= 0 && i < size {
					ref[i] = false
				}
			case 3:
				n := rng.IntN(size/4 + 2)
				if rng.IntN(50) == 0 {
					n = size + rng.IntN(3)
				}
				b.ShiftDown(n)
				for j := 0; j < size; j++ {
					ref[j] = j+n < size && ref[j+n]
				}
			case 4:
				if rng.IntN(40) == 0 {
					b.Reset()
					clear(ref)
				}
			case 5:
				// fill a run from 0 to exercise TrailingOnes across words
				k := rng.IntN(size + 1)
				for j := 0; j < k; j++ {
					b.Set(j)
					ref[j] = true
				}
			}
			count, ones, high := 0, 0, -1
			for j, v := range ref {
				if v {
					count++
					high = j
				}
			}
			for ones < size && ref[ones] {
				ones++
			}
			if b.Count() != count || b.TrailingOnes() != ones || b.Highest() != high || b.IsZero() != (count == 0) || b.HasHole() != (count != ones) {
				t.Fatalf("size %d step %d: count %d/%d ones %d/%d high %d/%d", size, step, b.Count(), count, b.TrailingOnes(), ones, b.Highest(), high)
			}
			if j := rng.IntN(size); b.Test(j) != ref[j] {
				t.Fatalf("size %d step %d: Test(%d)", size, step, j)
			}
		}
	}
}

func TestBitmapOutOfRangeNeverPanics(t *testing.T) {
	b := NewBitmap(10)
	for _, i := range []int{-1, -1 << 40, 10, 11, 1 << 20, MaxBitmapBits} {
		b.Set(i)
		b.Clear(i)
		if b.Test(i) {
			t.Errorf("Test(%d) on out-of-range index", i)
		}
	}
	if b.Count() != 0 {
		t.Error("out-of-range Set changed the bitmap")
	}
	b.ShiftDown(-5)
	b.ShiftDown(1 << 40)
	if NewBitmap(-3).Size() != 0 || NewBitmap(5000).Size() != MaxBitmapBits {
		t.Error("sizes must clamp to [0, MaxBitmapBits]")
	}
	z := NewBitmap(0)
	z.Set(0)
	if z.Test(0) || z.TrailingOnes() != 0 || z.Highest() != -1 {
		t.Error("empty bitmap")
	}
}

func TestBitmapShiftDownIsWindowAdvance(t *testing.T) {
	// Receiver data window at base 300 holds 300, 301, 303 and 430: the base
	// advances by TrailingOnes() = 2, and 303 becomes bit 1.
	b := NewBitmap(DataBitmapBits)
	for _, psn := range []PSN{300, 301, 303, 427} {
		b.Set(int(psn.Sub(300)))
	}
	adv := b.TrailingOnes()
	if adv != 2 {
		t.Fatalf("TrailingOnes = %d", adv)
	}
	b.ShiftDown(adv)
	if !b.Test(1) || b.Test(0) || !b.Test(125) || b.Count() != 2 {
		t.Errorf("after advance: %s", b.String())
	}
	b.ShiftDown(64)
	if !b.Test(61) || b.Count() != 1 {
		t.Error("whole-word shift")
	}
}

func TestBitmapOr(t *testing.T) {
	a, o := NewBitmap(64), NewBitmap(128)
	a.Set(1)
	o.Set(2)
	o.Set(100) // beyond a's size: ignored
	a.Or(&o)
	if a.Count() != 2 || !a.Test(2) || a.Test(100) {
		t.Errorf("Or: %s", a.String())
	}
	s := NewBitmap(4)
	s.Set(0)
	s.Set(1)
	s.Set(2)
	if s.String() != "0111" {
		t.Errorf("String = %q", s.String())
	}
}

func TestBitmapIsAValue(t *testing.T) {
	a := NewBitmap(128)
	a.Set(5)
	b := a
	b.Set(6)
	if a.Test(6) {
		t.Error("copy shares bits")
	}
	allocs := testing.AllocsPerRun(100, func() {
		c := NewBitmap(1024)
		c.Set(1000)
		c.ShiftDown(3)
		_ = c.TrailingOnes() + c.Count()
	})
	if allocs != 0 {
		t.Errorf("bitmap allocates %v", allocs)
	}
}

func TestBitmapAccessorsOnBACK(t *testing.T) {
	a := AppendBACK(nil, &AckFields{CID: 1})
	var b Bitmap
	b.Set(0)
	a.DataAckBitmap(&b)
	a.DataRxBitmap(&b)
	a.ReqBitmap(&b)
	if b.Size() != ReqBitmapBits || !b.IsZero() {
		t.Error("a BACK has all-clear bitmaps")
	}
	src := NewBitmap(128)
	src.Set(3)
	a.SetDataAckBitmap(&src) // no room: ignored
	if len(a) != BACKLen {
		t.Error("BACK grew")
	}
}
