package agent

// SetRunnerMetrics makes r count its runs' results in m, as Run does.
func SetRunnerMetrics(r *Runner, m *Metrics) { r.metrics = m }
