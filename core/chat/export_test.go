package chat

// ProgressEntries is how many jobs' progress s keeps.
func ProgressEntries(s *Service) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.progress)
}

// StatusEntries is how many jobs' last status write s remembers.
func StatusEntries(s *Service) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.statusAt)
}
