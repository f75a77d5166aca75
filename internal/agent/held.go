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
	mu sync.Mutex
	// ids maps each held id to whether it is a UUID (checked once, on arrival).
	ids map[string]bool
	// notUUID counts the held ids that are not: Thorax would refuse a poll naming them.
	notUUID int
}

func newHeldCommands() *heldCommands {
	return &heldCommands{ids: map[string]bool{}}
}

func (h *heldCommands) add(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.ids[id]; ok {
		return
	}
	_, err := uuid.Parse(id)
	h.ids[id] = err == nil
	if err != nil {
		h.notUUID++
	}
}

func (h *heldCommands) remove(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if valid, ok := h.ids[id]; ok {
		delete(h.ids, id)
		if !valid {
			h.notUUID--
		}
	}
}

// names returns the held ids and whether they are all of them: false, with no
// ids, when there are more than MaxHeldNames or one is not a UUID.
func (h *heldCommands) names() ([]string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.ids) > MaxHeldNames || h.notUUID > 0 {
		return nil, false
	}
	out := make([]string, 0, len(h.ids))
	for id := range h.ids {
		out = append(out, id)
	}
	return out, true
}
