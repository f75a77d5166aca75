package scale

// Line is cost(n) = Base + PerReplica·(n-1), fitted over replica counts n.
type Line struct {
	Base, PerReplica float64
}

// At is the line's value at n replicas.
func (l Line) At(n int) float64 { return l.Base + l.PerReplica*float64(n-1) }

// FitLine fits y = a + b·(x-1) by least squares. With fewer than two distinct x it
// returns the mean and no slope.
func FitLine(xs []int, ys []float64) Line {
	if len(xs) == 0 || len(xs) != len(ys) {
		return Line{}
	}
	var mx, my float64
	for i := range xs {
		mx += float64(xs[i] - 1)
		my += ys[i]
	}
	n := float64(len(xs))
	mx, my = mx/n, my/n
	var sxy, sxx float64
	for i := range xs {
		dx := float64(xs[i]-1) - mx
		sxy += dx * (ys[i] - my)
		sxx += dx * dx
	}
	if sxx == 0 {
		return Line{Base: my}
	}
	b := sxy / sxx
	return Line{Base: my - b*mx, PerReplica: b}
}

// TierModel is one tier's fitted costs.
type TierModel struct {
	// PerRequest is the marginal CPU seconds per request against the replica count;
	// a tier the replicas do not contend in has a slope near 0.
	PerRequest Line
	// IdlePerProcess is CPU seconds per second per process with no load (per agent
	// for the agents, per replica for Mandible, per instance for Thorax, the whole
	// server otherwise).
	IdlePerProcess float64
}

// Model is the fitted cost of every tier.
type Model map[Tier]TierModel

// contending are the tiers whose per-request cost may grow with the replica count:
// Mandible itself, and the servers every replica claims and schedules through.
var contending = map[Tier]bool{TierMandible: true, TierPostgres: true, TierTemporal: true}

// Fit fits each tier's marginal per-request cost against the replica count and
// averages its idle cost per process. A tier the replicas do not contend in, or
// whose slope comes out negative (noise: contention does not make work cheaper),
// keeps the mean as its cost.
func Fit(sizes []Size) Model {
	m := Model{}
	for _, t := range Tiers {
		var xs []int
		var ys []float64
		var idle float64
		for _, s := range sizes {
			xs = append(xs, s.Replicas)
			ys = append(ys, s.MarginalPerRequest(t))
			idle += s.IdleRate(t) / float64(max(processes(s, t), 1))
		}
		line := FitLine(xs, ys)
		if !contending[t] || line.PerReplica < 0 {
			line = FitLine(make([]int, len(ys)), ys)
		}
		m[t] = TierModel{PerRequest: line, IdlePerProcess: idle / float64(max(len(sizes), 1))}
	}
	return m
}

// processes is how many processes of tier t a size ran, for the idle cost per
// process; a server counts as one.
func processes(s Size, t Tier) int {
	switch t {
	case TierMandible:
		return s.Replicas
	case TierThorax:
		return s.Thoraxes
	case TierAgents:
		return s.Agents
	default:
		return 1
	}
}

// Fleet is a deployment the model is projected onto.
type Fleet struct {
	Replicas, Thoraxes, Agents int
	// Rate is the dispatch requests per second to hold.
	Rate float64
}

// Cores is what each tier of fleet needs by the model: its per-request cost at the
// fleet's replica count times the rate, plus the idle cost of its processes.
func (m Model) Cores(f Fleet) map[Tier]float64 {
	out := map[Tier]float64{}
	for t, tm := range m {
		if t == TierHarness {
			continue
		}
		n := processes(Size{Replicas: f.Replicas, Thoraxes: f.Thoraxes, Agents: f.Agents}, t)
		out[t] = tm.PerRequest.At(f.Replicas)*f.Rate + tm.IdlePerProcess*float64(n)
	}
	return out
}
