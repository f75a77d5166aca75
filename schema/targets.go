package schema

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/safetext"
	"github.com/mantis-deploy/mantis/schema/internal/dbsqlc"
)

// Target modes: how Thorax hands a target's commands to its agent.
const (
	ModePoll   = "poll"
	ModeListen = "listen"
)

// Modes lists every target mode (targets.mode, command_queue.mode).
var Modes = []string{ModePoll, ModeListen}

// Target is a registered target: a host Mantis runs commands on.
type Target struct {
	ID   uuid.UUID
	Name string
	Mode string
	// Address is the listen-mode agent's gRPC endpoint; nil for poll mode.
	Address *string
	Labels  map[string]string
	// AssignedInstanceID is the Thorax instance a listen-mode target is pinned to.
	AssignedInstanceID *uuid.UUID
	CreatedAt          time.Time
	UpdatedAt          time.Time
}

// NewTarget is a target to register.
type NewTarget struct {
	Name string
	Mode string
	// Address is the listen-mode agent's gRPC endpoint (host:port); poll-mode agents have none.
	Address string
	Labels  map[string]string
}

var targetName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// Bounds on a target's labels.
const (
	maxLabels     = 64
	maxLabelBytes = 1024
)

// listenAddressProblem says what is wrong with a listen agent's address, or "".
func listenAddressProblem(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if len(addr) > 300 || err != nil || host == "" {
		return fmt.Sprintf("must be host:port, got %q", safetext.Bound(safetext.DisplayString(addr), 300))
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Sprintf("port must be 1-65535, got %q", port)
	}
	if p := safetext.Unstorable(host, 255); p != "" {
		return "host " + p
	}
	return ""
}

// Validate lists every problem with t by field.
func (t NewTarget) Validate() error {
	var problems domain.Problems
	if !targetName.MatchString(t.Name) {
		problems.Addf("name", "must match %s, got %q", targetName, t.Name)
	}
	switch t.Mode {
	case ModePoll:
		if t.Address != "" {
			problems.Add("address", "poll-mode targets have no address (their agent connects to Thorax)")
		}
	case ModeListen:
		if t.Address == "" {
			problems.Add("address", "required for listen-mode targets")
		} else if p := listenAddressProblem(t.Address); p != "" {
			problems.Add("address", p)
		}
	default:
		problems.Addf("mode", "must be poll or listen, got %q", t.Mode)
	}
	if len(t.Labels) > maxLabels {
		problems.Addf("labels", "at most %d, got %d", maxLabels, len(t.Labels))
	}
	for _, k := range slices.Sorted(maps.Keys(t.Labels)) {
		field := "labels." + safetext.Bound(safetext.DisplayString(k), 64)
		if k == "" {
			problems.Add("labels", "keys must not be empty")
		} else if p := safetext.Unstorable(k+t.Labels[k], maxLabelBytes); p != "" {
			problems.Add(field, p)
		}
	}
	return problems.Err()
}

// RegisterTarget registers t, or updates the target of that name (registering it again
// if it was deregistered). A listen-mode target is pinned to the live Thorax instance
// with the fewest targets, if there is one; the assignment is kept on update while
// that instance lives.
func RegisterTarget(ctx context.Context, db DB, t NewTarget, heartbeatTimeout time.Duration) (Target, error) {
	if err := t.Validate(); err != nil {
		return Target{}, err
	}
	labels := t.Labels
	if labels == nil {
		labels = map[string]string{}
	}
	labelJSON, err := json.Marshal(labels)
	if err != nil {
		return Target{}, err
	}
	row, err := queries.RegisterTarget(ctx, db, dbsqlc.RegisterTargetParams{
		Name: t.Name, Mode: t.Mode, Address: nullString(t.Address), Labels: labelJSON,
		HeartbeatTimeoutSeconds: heartbeatTimeout.Seconds(),
	})
	if err != nil {
		return Target{}, fmt.Errorf("registering target %s: %w", t.Name, notFound(err))
	}
	return targetOf(row)
}

// targetOf is the Target a targets row holds.
func targetOf(r dbsqlc.Target) (Target, error) {
	t := Target{
		ID: r.ID, Name: r.Name, Mode: r.Mode, Address: r.Address,
		AssignedInstanceID: r.AssignedInstanceID, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
	if err := json.Unmarshal(r.Labels, &t.Labels); err != nil {
		return Target{}, fmt.Errorf("target %s labels: %w", t.Name, err)
	}
	return t, nil
}

// TargetFilter selects a page of registered targets.
type TargetFilter struct {
	// Selector keeps the targets whose labels hold every key=value of it; empty
	// keeps every target.
	Selector map[string]string
	// After keeps the targets named after it (the last name of the previous
	// page); empty starts from the first.
	After string
	// Limit is the page's size: DefaultTargetsListed when 0, at most
	// MaxTargetsListed.
	Limit int
}

// Bounds on how many targets ListTargets returns.
const (
	DefaultTargetsListed = 100
	MaxTargetsListed     = 1000
)

// ListTargets returns a page of the registered targets f selects, by name.
func ListTargets(ctx context.Context, db DB, f TargetFilter) ([]Target, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultTargetsListed
	}
	sel := f.Selector
	if sel == nil {
		sel = map[string]string{}
	}
	selJSON, err := json.Marshal(sel)
	if err != nil {
		return nil, err
	}
	rows, err := queries.ListTargets(ctx, db, dbsqlc.ListTargetsParams{
		After: f.After, Selector: selJSON, MaxRows: int32(min(limit, MaxTargetsListed)),
	})
	if err != nil {
		return nil, fmt.Errorf("listing targets: %w", err)
	}
	return convertRows(rows, targetOf)
}

// GetTarget returns the registered target named name; ErrNotFound when no
// registered target has that name.
func GetTarget(ctx context.Context, db DB, name string) (Target, error) {
	r, err := queries.GetTarget(ctx, db, name)
	if err != nil {
		return Target{}, fmt.Errorf("reading target %s: %w", name, notFound(err))
	}
	return targetOf(r)
}

// IsTargetName reports whether s may name a target.
func IsTargetName(s string) bool { return targetName.MatchString(s) }

// DeregisterTarget marks the named target deregistered; its history stays. It returns
// ErrNotFound when no registered target has that name.
func DeregisterTarget(ctx context.Context, db DB, name string) error {
	n, err := queries.DeregisterTarget(ctx, db, name)
	return touched(n, err, "deregistering target "+name)
}
