// Package journal is the agent's run journal: the on-disk record that makes a
// dispatch request run at most once on its host, across restarts. Each run key (the
// dispatch request id) has one file, written atomically and fsynced before the
// command's process starts and again with its result, and kept until Mandible has
// acknowledged the result and Retention has passed.
package journal

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

const (
	// Retention is how long a journal entry is kept after its last
	// change: longer than domain.DispatchRequestTTL, after which Mandible expires a dispatch
	// request, so no redelivery can outlive the record of its run.
	Retention = 48 * time.Hour
	// journalPruneEvery is how often a running agent prunes its journal.
	journalPruneEvery = time.Hour
	// journalExt names the journal's entry files.
	journalExt = ".json"
	// probeName is the file written and removed to check that the journal
	// directory takes writes.
	probeName = ".probe"
)

// ErrUnavailable wraps every failure to write the run journal. The
// agent refuses new work while it cannot journal it: running a command it
// could not record would break at-most-once after a restart.
var ErrUnavailable = errors.New("journal unavailable")

// RestartedError is the error of a run the agent journaled as started but
// not finished before it restarted: its outcome is unknown, and it is not run
// again, since a dispatch request runs at most once on the host.
const RestartedError = "agent restarted while the command was running; not run again"

// Journal is the agent's on-disk record of its runs, one file per run key
// (the dispatch request id), written atomically and fsynced. It records that
// a run started before its process starts, then its result, and which
// commands still wait for that result to be acknowledged. It never holds a
// command's text or environment, only its ids and its result.
type Journal struct {
	dir string
	now func() time.Time

	mu         sync.Mutex
	entries    map[string]*journalEntry
	lastPruned time.Time
}

// journalEntry is one run as stored on disk.
type journalEntry struct {
	Key               string            `json:"key"`
	DispatchRequestID string            `json:"dispatch_request_id,omitempty"`
	Deliveries        []journalDelivery `json:"deliveries"`
	StartedAt         time.Time         `json:"started_at"`
	UpdatedAt         time.Time         `json:"updated_at"`
	// Result is nil while the run is under way.
	Result *journalResult `json:"result,omitempty"`
}

// journalDelivery is one command that delivered the run's request: its
// result is reported under its id and lease until Thorax acknowledges it.
type journalDelivery struct {
	CommandID    string `json:"command_id"`
	LeaseEpoch   int64  `json:"lease_epoch"`
	Acknowledged bool   `json:"acknowledged,omitempty"`
}

// journalResult is a CommandResult as stored on disk; Output is the bounded
// tail the runner kept, as bytes.
type journalResult struct {
	ExitCode        int32     `json:"exit_code"`
	Output          []byte    `json:"output,omitempty"`
	OutputTruncated bool      `json:"output_truncated,omitempty"`
	TimedOut        bool      `json:"timed_out,omitempty"`
	Cancelled       bool      `json:"cancelled,omitempty"`
	Error           string    `json:"error,omitempty"`
	StartedAt       time.Time `json:"started_at"`
	FinishedAt      time.Time `json:"finished_at"`
}

// PendingReport is a finished run's result that a command still waits to
// have acknowledged by Thorax.
type PendingReport struct {
	Key               string
	CommandID         string
	LeaseEpoch        int64
	DispatchRequestID string
	Result            *mantisv1.CommandResult
}

// Open opens the journal in dir, creating it, with now as its clock
// (time.Now when nil). It prunes entries older than Retention and
// settles runs left unfinished by an earlier agent as failed with
// RestartedError. Errors wrap ErrUnavailable.
func Open(dir string, now func() time.Time) (*Journal, error) {
	if now == nil {
		now = time.Now
	}
	j := &Journal{dir: dir, now: now, entries: map[string]*journalEntry{}}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, unavailable("creating journal directory", err)
	}
	if err := j.probe(); err != nil {
		return nil, err
	}
	if err := j.load(); err != nil {
		return nil, err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.pruneLocked()
	for _, e := range j.entries {
		if e.Result != nil {
			continue
		}
		t := j.now()
		e.Result = &journalResult{ExitCode: -1, Error: RestartedError, StartedAt: e.StartedAt, FinishedAt: t}
		if err := j.writeLocked(e); err != nil {
			return nil, err
		}
	}
	return j, nil
}

// Dir returns the journal's directory.
func (j *Journal) Dir() string { return j.dir }

// load reads every entry file of the directory.
func (j *Journal) load() error {
	files, err := filepath.Glob(filepath.Join(j.dir, "*"+journalExt))
	if err != nil {
		return unavailable("listing journal", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return unavailable("reading journal entry", err)
		}
		var e journalEntry
		if err := json.Unmarshal(b, &e); err != nil || e.Key == "" {
			// A torn file cannot come from the atomic writes; one that does
			// not parse is not ours to trust, and is left for an operator.
			continue
		}
		j.entries[e.Key] = &e
	}
	return nil
}

// Lookup returns the stored result of the run key, if it finished.
func (j *Journal) Lookup(key string) (*mantisv1.CommandResult, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	e, ok := j.entries[key]
	if !ok || e.Result == nil {
		return nil, false
	}
	return e.Result.proto(), true
}

// Begin records, durably, that the run key starts for cmd. The caller starts
// the process only once Begin has returned nil.
func (j *Journal) Begin(key string, cmd *mantisv1.Command) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.now().Sub(j.lastPruned) >= journalPruneEvery {
		j.pruneLocked()
	}
	e := &journalEntry{
		Key:               key,
		DispatchRequestID: cmd.GetDispatchRequestId(),
		Deliveries:        []journalDelivery{{CommandID: cmd.GetId(), LeaseEpoch: cmd.GetLeaseEpoch()}},
		StartedAt:         j.now(),
	}
	if err := j.writeLocked(e); err != nil {
		return err
	}
	j.entries[key] = e
	return nil
}

// Attach records that cmd delivered the run key again: its result is owed
// under cmd's id and lease too.
func (j *Journal) Attach(key string, cmd *mantisv1.Command) error {
	return j.update(key, func(e *journalEntry) bool {
		for _, d := range e.Deliveries {
			if d.CommandID == cmd.GetId() {
				return false
			}
		}
		e.Deliveries = append(e.Deliveries, journalDelivery{CommandID: cmd.GetId(), LeaseEpoch: cmd.GetLeaseEpoch()})
		return true
	})
}

// Finish records the result of the run key.
func (j *Journal) Finish(key string, res *mantisv1.CommandResult) error {
	return j.update(key, func(e *journalEntry) bool {
		e.Result = storedResult(res)
		return true
	})
}

// Acknowledge records that Thorax took the result of the run key for the
// command commandID (or refused it for good): it is not reported again.
func (j *Journal) Acknowledge(key, commandID string) error {
	return j.update(key, func(e *journalEntry) bool {
		for i := range e.Deliveries {
			if e.Deliveries[i].CommandID == commandID && !e.Deliveries[i].Acknowledged {
				e.Deliveries[i].Acknowledged = true
				return true
			}
		}
		return false
	})
}

// update applies change to the entry key and writes it when change says it
// changed something. A key with no entry is no error: nothing is owed.
func (j *Journal) update(key string, change func(*journalEntry) bool) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	e, ok := j.entries[key]
	if !ok {
		return nil
	}
	next := *e
	next.Deliveries = append([]journalDelivery(nil), e.Deliveries...)
	if !change(&next) {
		return nil
	}
	if err := j.writeLocked(&next); err != nil {
		return err
	}
	j.entries[key] = &next
	return nil
}

// Pending returns every finished result some command still waits to have
// acknowledged, oldest run first.
func (j *Journal) Pending() []PendingReport {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []PendingReport
	for _, e := range j.entries {
		if e.Result == nil {
			continue
		}
		for _, d := range e.Deliveries {
			if !d.Acknowledged {
				out = append(out, PendingReport{Key: e.Key, CommandID: d.CommandID, LeaseEpoch: d.LeaseEpoch,
					DispatchRequestID: e.DispatchRequestID, Result: e.Result.proto()})
			}
		}
	}
	slices.SortStableFunc(out, func(a, b PendingReport) int {
		return j.entries[a.Key].StartedAt.Compare(j.entries[b.Key].StartedAt)
	})
	return out
}

// Prune removes the entries unchanged for Retention.
func (j *Journal) Prune() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.pruneLocked()
}

func (j *Journal) pruneLocked() {
	now := j.now()
	j.lastPruned = now
	for key, e := range j.entries {
		if now.Sub(e.UpdatedAt) < Retention {
			continue
		}
		if err := os.Remove(j.path(key)); err != nil && !errors.Is(err, os.ErrNotExist) {
			continue // kept in memory too, so it is tried again
		}
		delete(j.entries, key)
	}
}

// writeLocked writes e atomically: a temporary file, fsynced, renamed over
// the entry's file, and the directory fsynced, so that after a crash the
// entry is either the old one or the new one, and is there.
func (j *Journal) writeLocked(e *journalEntry) error {
	e.UpdatedAt = j.now()
	b, err := json.Marshal(e)
	if err != nil {
		return unavailable("encoding journal entry", err)
	}
	if err := writeDurably(j.dir, j.path(e.Key), b); err != nil {
		return unavailable("writing journal entry", err)
	}
	return nil
}

// probe checks that the directory takes a durable write.
func (j *Journal) probe() error {
	p := filepath.Join(j.dir, probeName)
	if err := writeDurably(j.dir, p, []byte("ok")); err != nil {
		return unavailable("writing to journal directory", err)
	}
	if err := os.Remove(p); err != nil {
		return unavailable("writing to journal directory", err)
	}
	return nil
}

// writeDurably replaces path with b through a fsynced temporary file in dir.
func writeDurably(dir, path string, b []byte) error {
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op once renamed
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// safeName is a key that can serve as a file name as it is.
var safeName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// path returns the file of the run key: the key itself when it is a plain
// name (a UUID), else its SHA-256. Temporary and probe files start with a
// dot, so they never take an entry's name.
func (j *Journal) path(key string) string {
	name := key
	if !safeName.MatchString(key) {
		sum := sha256.Sum256([]byte(key))
		name = hex.EncodeToString(sum[:])
	}
	return filepath.Join(j.dir, name+journalExt)
}

func unavailable(doing string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, doing, err)
}

// storedResult is res as the journal keeps it.
func storedResult(res *mantisv1.CommandResult) *journalResult {
	return &journalResult{
		ExitCode:        res.GetExitCode(),
		Output:          res.GetOutput(),
		OutputTruncated: res.GetOutputTruncated(),
		TimedOut:        res.GetTimedOut(),
		Cancelled:       res.GetCancelled(),
		Error:           res.GetError(),
		StartedAt:       res.GetStartedAt().AsTime(),
		FinishedAt:      res.GetFinishedAt().AsTime(),
	}
}

// proto returns the stored result as a CommandResult.
func (r *journalResult) proto() *mantisv1.CommandResult {
	return &mantisv1.CommandResult{
		ExitCode:        r.ExitCode,
		Output:          append([]byte(nil), r.Output...),
		OutputTruncated: r.OutputTruncated,
		TimedOut:        r.TimedOut,
		Cancelled:       r.Cancelled,
		Error:           r.Error,
		StartedAt:       timestamppb.New(r.StartedAt),
		FinishedAt:      timestamppb.New(r.FinishedAt),
	}
}
