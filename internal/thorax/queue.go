package thorax

// commandQueue holds commands waiting for their agent, high priority before
// normal before low and in arrival order within a priority.
type commandQueue struct {
	tiers [3][]*holding
}

// priorityRank orders the priorities of the contract; an unknown priority
// goes last.
func priorityRank(priority string) int {
	switch priority {
	case "high":
		return 0
	case "normal":
		return 1
	default:
		return 2
	}
}

func (q *commandQueue) push(h *holding) {
	r := priorityRank(h.cmd.GetPriority())
	q.tiers[r] = append(q.tiers[r], h)
}

// pushFront puts h back at the head of its priority, ahead of later arrivals.
func (q *commandQueue) pushFront(h *holding) {
	r := priorityRank(h.cmd.GetPriority())
	q.tiers[r] = append([]*holding{h}, q.tiers[r]...)
}

// pop removes and returns up to n commands, highest priority first.
func (q *commandQueue) pop(n int) []*holding {
	var out []*holding
	for r := range q.tiers {
		for n > len(out) && len(q.tiers[r]) > 0 {
			out = append(out, q.tiers[r][0])
			q.tiers[r][0] = nil
			q.tiers[r] = q.tiers[r][1:]
		}
	}
	return out
}

func (q *commandQueue) len() int {
	return len(q.tiers[0]) + len(q.tiers[1]) + len(q.tiers[2])
}

// removeIf removes and returns the commands drop selects, keeping the order
// of the others.
func (q *commandQueue) removeIf(drop func(*holding) bool) []*holding {
	var out []*holding
	for r, tier := range q.tiers {
		kept := tier[:0]
		for _, h := range tier {
			if drop(h) {
				out = append(out, h)
			} else {
				kept = append(kept, h)
			}
		}
		clear(tier[len(kept):])
		q.tiers[r] = kept
	}
	return out
}
