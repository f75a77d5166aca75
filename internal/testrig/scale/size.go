package scale

import (
	"time"
)

// Tier is a kind of process whose CPU the rig adds up.
type Tier string

// The tiers, in the report's order. Agents include the commands they run; the
// harness is the test process (the enqueuer and the TCP proxies of every link).
const (
	TierMandible Tier = "mandible"
	TierThorax   Tier = "thorax"
	TierAgents   Tier = "agents"
	TierTemporal Tier = "temporal-server"
	TierPostgres Tier = "postgresql"
	TierRabbitMQ Tier = "rabbitmq"
	TierHarness  Tier = "harness"
)

// Tiers lists every tier in the report's order.
var Tiers = []Tier{TierMandible, TierThorax, TierAgents, TierTemporal, TierPostgres, TierRabbitMQ, TierHarness}

// Size is what one cluster size measured.
type Size struct {
	Replicas, Thoraxes, Agents int
	// Requests were enqueued at once; Succeeded of them had their command stored
	// succeeded within the window, NotSucceeded ended otherwise.
	Requests, Succeeded, NotSucceeded int
	// Drain is from the first request's created_at to the last success's finished_at.
	Drain time.Duration
	// P50 and P99 are of enqueue (created_at) to result stored (finished_at).
	P50, P99 time.Duration
	Claims   Claims
	// PeakConns is the peak of PostgreSQL sessions of each class over the size.
	PeakConns map[ConnClass]int
	// IdleCPU is each tier's CPU over IdleWindow, before the load; LoadCPU over
	// LoadWindow, from the first enqueue until the load drained.
	IdleCPU, LoadCPU       map[Tier]time.Duration
	IdleWindow, LoadWindow time.Duration
}

// Throughput is the requests that succeeded per second of the drain.
func (s Size) Throughput() float64 {
	if s.Drain <= 0 {
		return 0
	}
	return float64(s.Succeeded) / s.Drain.Seconds()
}

// Wasted is the share of claim attempts lost to another replica.
func (s Size) Wasted() float64 {
	if s.Claims.Won+s.Claims.Lost == 0 {
		return 0
	}
	return s.Claims.Lost / (s.Claims.Won + s.Claims.Lost)
}

// IdleRate is the CPU seconds per second the tier spends with no load.
func (s Size) IdleRate(t Tier) float64 {
	if s.IdleWindow <= 0 {
		return 0
	}
	return s.IdleCPU[t].Seconds() / s.IdleWindow.Seconds()
}

// PerRequest is the tier's CPU seconds per succeeded request during the load.
func (s Size) PerRequest(t Tier) float64 {
	if s.Succeeded == 0 {
		return 0
	}
	return s.LoadCPU[t].Seconds() / float64(s.Succeeded)
}

// MarginalPerRequest is PerRequest without what the tier would have spent idle
// over the load window: the cost the requests added.
func (s Size) MarginalPerRequest(t Tier) float64 {
	if s.Succeeded == 0 {
		return 0
	}
	extra := s.LoadCPU[t].Seconds() - s.IdleRate(t)*s.LoadWindow.Seconds()
	return max(extra, 0) / float64(s.Succeeded)
}
