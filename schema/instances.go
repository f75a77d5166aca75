package schema

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema/internal/dbsqlc"
)

// NewInstance is a Thorax instance registering: its name and version, the name of the
// certificate it registers with (empty without identities), and that certificate's
// scope (nil: it may serve every target).
type NewInstance struct {
	Name, Version, CertName string
	Scope                   *InstanceScope
}

// InstanceScope is which targets an instance may serve: those whose name matches one
// of Names (patterns where * stands for any run of characters and ? for one), and
// those whose labels, as an admin set them, hold every pair of one of Labels. An empty
// scope serves nothing.
type InstanceScope struct {
	Names  []string
	Labels []map[string]string
}

// likePatterns turns the scope's name patterns into SQL LIKE patterns.
func (s InstanceScope) likePatterns() []string {
	out := make([]string, 0, len(s.Names))
	escape := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`, `*`, `%`, `?`, `_`)
	for _, n := range s.Names {
		out = append(out, escape.Replace(n))
	}
	return out
}

// RegisterInstance records a starting Thorax instance and returns its id; its
// certificate and scope are set with it, before it is given any target. Listen targets
// that no live instance serves and that it may serve become its own.
func RegisterInstance(ctx context.Context, db TxBeginner, in NewInstance) (uuid.UUID, error) {
	id := uuid.Must(uuid.NewV7())
	p := dbsqlc.RegisterInstanceParams{ID: id, Name: in.Name, Version: in.Version}
	if in.CertName != "" {
		p.CertName = &in.CertName
	}
	if in.Scope != nil {
		p.ScopePatterns = in.Scope.likePatterns()
		labels := in.Scope.Labels
		if labels == nil {
			labels = []map[string]string{}
		}
		b, err := json.Marshal(labels)
		if err != nil {
			return uuid.Nil, fmt.Errorf("encoding the scope of thorax instance %s: %w", in.Name, err)
		}
		p.ScopeLabels = b
	}
	if err := queries.RegisterInstance(ctx, db, p); err != nil {
		return uuid.Nil, fmt.Errorf("registering thorax instance %s: %w", in.Name, err)
	}
	// Listen targets that no live instance serves (their Thorax died while no other
	// was live) are this one's now: a target is never stranded.
	if _, err := AssignListenTargets(ctx, db); err != nil {
		return uuid.Nil, err
	}
	return id, nil
}

// InstanceMayReport says whether instance may store a result of command reported for
// target as far as its scope goes: it holds the command (whatever its scope says of
// the target now), or its scope lets it serve target.
func InstanceMayReport(ctx context.Context, db DB, instance, command uuid.UUID, target string) (bool, error) {
	ok, err := queries.InstanceMayReport(ctx, db, dbsqlc.InstanceMayReportParams{InstanceID: instance, CommandID: command, Target: target})
	if err != nil {
		return false, fmt.Errorf("reading the scope of thorax instance %s: %w", instance, err)
	}
	return ok, nil
}

// HeartbeatReply is what Mandible tells a Thorax instance on each heartbeat.
type HeartbeatReply struct {
	// ListenTargets are the listen-mode targets assigned to the instance.
	ListenTargets []string
	// Cancelled are commands the instance holds whose deployment was cancelled.
	Cancelled []uuid.UUID
}

// HeartbeatRequest is one heartbeat of a Thorax instance.
type HeartbeatRequest struct {
	Instance uuid.UUID
	// Replica is the Mandible replica that received the heartbeat.
	Replica     string
	PollTargets []string
	Draining    bool
}

// Heartbeat keeps instance live (or draining) and records the poll-mode targets whose
// agents poll it: unknown ones are registered as poll-mode targets, known ones move to
// this instance. A draining instance's listen targets move to a live instance at once,
// so their next commands do not wait for the drain. It returns ErrInstanceDead for an
// instance that must register again.
func Heartbeat(ctx context.Context, db TxBeginner, r HeartbeatRequest) (HeartbeatReply, error) {
	var reply HeartbeatReply
	err := inTx(ctx, db, func(tx pgx.Tx) error {
		status := domain.InstanceLive
		if r.Draining {
			status = domain.InstanceDraining
		}
		n, err := queries.RecordInstanceHeartbeat(ctx, tx, dbsqlc.RecordInstanceHeartbeatParams{ID: r.Instance, Status: status, Replica: r.Replica})
		if err != nil {
			return fmt.Errorf("recording heartbeat: %w", err)
		}
		if n == 0 {
			return ErrInstanceDead
		}
		for _, name := range r.PollTargets {
			if !targetName.MatchString(name) {
				return domain.Invalid("poll_targets", fmt.Sprintf("%q is not a valid target name", name))
			}
		}
		if len(r.PollTargets) > 0 {
			if err := queries.RecordPollTargets(ctx, tx, dbsqlc.RecordPollTargetsParams{InstanceID: r.Instance, Names: r.PollTargets}); err != nil {
				return fmt.Errorf("recording poll targets: %w", err)
			}
		}
		if r.Draining {
			if _, err := AssignListenTargets(ctx, tx); err != nil {
				return err
			}
		}
		if reply.ListenTargets, err = queries.ListenTargetsOf(ctx, tx, r.Instance); err != nil {
			return fmt.Errorf("listing listen targets of %s: %w", r.Instance, err)
		}
		if reply.Cancelled, err = queries.RecentlyCancelledCommandsOf(ctx, tx, r.Instance); err != nil {
			return fmt.Errorf("listing cancelled commands of %s: %w", r.Instance, err)
		}
		return nil
	})
	if err != nil {
		return HeartbeatReply{}, err
	}
	return reply, nil
}
