package service

// ReadyChecks is how many readiness checks s has run.
func ReadyChecks(s *Service) int64 { return s.ready.checks.Load() }
