package vhostuser

// WatchdogCheck runs one watchdog look at the server's current session,
// so that tests drive the watchdog without its ticker.
func (s *Server) WatchdogCheck() {
	s.mu.Lock()
	cur := s.cur
	s.mu.Unlock()
	if cur != nil {
		cur.watchdogCheck()
	}
}

// WakePending reports whether queue idx of the current session has a wake
// its worker has not taken yet.
func (s *Server) WakePending(idx int) bool {
	s.mu.Lock()
	cur := s.cur
	s.mu.Unlock()
	if cur == nil || idx >= len(cur.queues) {
		return false
	}
	return len(cur.queues[idx].wake) > 0
}
