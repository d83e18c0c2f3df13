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
