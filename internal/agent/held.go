package agent

import (
	"sync"

	"github.com/google/uuid"
)

// MaxHeldNames is the most command ids a poll names in held_command_ids; an agent
// that holds more names none and says so (names_held false).
const MaxHeldNames = 1024

// heldCommands are the commands polls handed to the agent that it still owes an
// acknowledged result for: from their arrival (or, after a restart, from the
// journal) until Thorax takes or refuses their result for good. Each poll names
// them, so that Thorax hands again a command whose answer never arrived.
type heldCommands struct {
	mu  sync.Mutex
	ids map[string]struct{}
}

func newHeldCommands() *heldCommands {
	return &heldCommands{ids: map[string]struct{}{}}
}

func (h *heldCommands) add(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ids[id] = struct{}{}
}

func (h *heldCommands) remove(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.ids, id)
}

// names returns the held ids and whether they are all of them: false, with no
// ids, when there are more than MaxHeldNames or one is not a UUID (Thorax would
// refuse the poll).
func (h *heldCommands) names() ([]string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.ids) > MaxHeldNames {
		return nil, false
	}
	out := make([]string, 0, len(h.ids))
	for id := range h.ids {
		if _, err := uuid.Parse(id); err != nil {
			return nil, false
		}
		out = append(out, id)
	}
	return out, true
}
