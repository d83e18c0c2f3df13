package vhostuser

import "encoding/binary"

// Memory, config and inflight handlers.

// setMem installs a new memory table and nudges workers onto it; the old
// table is unmapped once the last worker lets go.
func (s *Session) setMem(t *MemTable) {
	s.c.MemTables.Inc()
	t.onFree = s.c.MemTablesFreed.Inc
	old := s.mem.Swap(t)
	if u, ok := s.dev.(MemTableUser); ok {
		u.SetMemTable(t)
	}
	if old != nil {
		old.Release()
	}
	for _, q := range s.queues {
		if q.running {
			q.nudge()
		} else {
			s.tryStart(q)
		}
	}
}

func (s *Session) setMemTable(m *Msg) ([]byte, []int, error) {
	defer closeFDs(m.FDs)
	var regions []*Region
	fail := func(err error) ([]byte, []int, error) {
		for _, r := range regions {
			r.m.release()
		}
		return nil, nil, err
	}
	for i, r := range MemTableRegions(m.Payload) {
		reg, err := MapRegion(m.FDs[i], r.GPA(), r.Size(), r.UVA(), r.MmapOffset())
		if err != nil {
			return fail(err)
		}
		regions = append(regions, reg)
	}
	t, err := NewMemTable(regions)
	if err != nil {
		return fail(err)
	}
	s.setMem(t)
	return nil, nil, nil
}

func (s *Session) addMemReg(m *Msg) ([]byte, []int, error) {
	defer closeFDs(m.FDs)
	r := MemRegion(m.Payload[8:])
	if t := s.mem.Load(); t != nil {
		for _, old := range t.regions {
			if old.same(r.GPA(), r.Size(), r.UVA(), r.MmapOffset()) {
				old.dups++ // another vhost_dev (queue pair) adds it too
				s.c.DupMemRegions.Inc()
				return nil, nil, nil
			}
		}
	}
	reg, err := MapRegion(m.FDs[0], r.GPA(), r.Size(), r.UVA(), r.MmapOffset())
	if err != nil {
		return nil, nil, err
	}
	t, err := s.mem.Load().With(reg)
	if err != nil {
		reg.m.release()
		return nil, nil, err
	}
	s.setMem(t)
	return nil, nil, nil
}

func (s *Session) remMemReg(m *Msg) ([]byte, []int, error) {
	closeFDs(m.FDs)
	r := MemRegion(m.Payload[8:])
	if t := s.mem.Load(); t != nil {
		for _, old := range t.regions {
			if old.same(r.GPA(), r.Size(), r.UVA(), r.MmapOffset()) && old.dups > 0 {
				old.dups--
				return nil, nil, nil
			}
		}
	}
	t, err := s.mem.Load().Without(r.GPA(), r.Size())
	if err != nil {
		return nil, nil, err
	}
	s.setMem(t)
	return nil, nil, nil
}

func (s *Session) getConfig(m *Msg) ([]byte, []int, error) {
	c := ConfigMsg(m.Payload)
	out := s.replyB[:12]
	copy(out, m.Payload[:12])
	data, err := s.dev.GetConfig(c.Offset(), c.Size())
	if err != nil || uint32(len(data)) != c.Size() {
		// An empty config answer tells QEMU the read failed.
		binary.LittleEndian.PutUint32(out[4:], 0)
		if err == nil {
			err = ErrBadPayload
		}
		return out, nil, err
	}
	out = s.replyB[:12+len(data)]
	copy(out[12:], data)
	return out, nil, nil
}

func (s *Session) setConfig(m *Msg) ([]byte, []int, error) {
	c := ConfigMsg(m.Payload)
	return nil, nil, s.dev.SetConfig(c.Offset(), c.Data())
}

func (s *Session) getInflightFD(m *Msg) ([]byte, []int, error) {
	in := InflightMsg(m.Payload)
	fd, size, err := allocInflight(int(in.NumQueues()), int(in.QueueSize()))
	if err != nil {
		return nil, nil, err
	}
	out := s.replyB[:24]
	PutInflight(out, size, 0, in.NumQueues(), in.QueueSize())
	return out, []int{fd}, nil
}

func (s *Session) setInflightFD(m *Msg) ([]byte, []int, error) {
	defer closeFDs(m.FDs)
	r, err := mapInflight(m.FDs[0], InflightMsg(m.Payload))
	if err != nil {
		return nil, nil, err
	}
	var restart []*Queue
	for _, q := range s.queues {
		if q.running {
			s.stopQueue(q)
			restart = append(restart, q)
		}
	}
	s.inflight.unmap()
	s.inflight = r
	for _, q := range restart {
		s.tryStart(q)
	}
	return nil, nil, nil
}
