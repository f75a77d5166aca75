// Package scale measures how a Mantis cluster scales out: `make scale` (TestScale)
// runs one PostgreSQL, RabbitMQ and production Temporal server and, in turn, 1, 2 and
// 4 Mandible replicas with 2 Thorax instances and a fleet of poll agents, drains a
// fixed dispatch workload at each size and prints, side by side, throughput, wasted
// claims, latency, PostgreSQL connections and each tier's CPU per request, then fits
// a cost model to them. The probes, the model and the report live here so that they
// are tested on their own.
package scale

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// userHZ is the unit of the CPU times in /proc/<pid>/stat (USER_HZ, 100 on Linux).
const userHZ = 100

// statFields are the fields read of a /proc/<pid>/stat line: ppid is the 4th,
// utime..cstime the 14th to the 17th.
const (
	statPPid   = 4
	statUtime  = 14
	statCstime = 17
)

// ProcStat is what ParseStat reads of one /proc/<pid>/stat line.
type ProcStat struct {
	Pid, PPid int
	// Own is the process's user and system time; Children that of its children it
	// has waited for (so that a short-lived command's CPU counts for its parent).
	Own, Children time.Duration
}

// ParseStat reads the ids and the CPU times of a /proc/<pid>/stat line. The command
// name may hold spaces and parentheses, so fields are counted from the last ')'.
func ParseStat(line []byte) (ProcStat, error) {
	open, end := bytes.IndexByte(line, '('), bytes.LastIndexByte(line, ')')
	if open < 0 || end < open {
		return ProcStat{}, fmt.Errorf("parsing a process stat line: no command name in %q", line)
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(line[:open])))
	if err != nil {
		return ProcStat{}, fmt.Errorf("parsing the pid of a process stat line: %w", err)
	}
	// Fields after the name start at the 3rd (state).
	fields := bytes.Fields(line[end+1:])
	if len(fields) < statCstime-2 {
		return ProcStat{}, fmt.Errorf("parsing a process stat line: %d fields after the name", len(fields))
	}
	var vals [statCstime + 1]int64
	for _, n := range []int{statPPid, statUtime, statUtime + 1, statUtime + 2, statCstime} {
		v, err := strconv.ParseInt(string(fields[n-3]), 10, 64)
		if err != nil {
			return ProcStat{}, fmt.Errorf("parsing field %d of a process stat line: %w", n, err)
		}
		vals[n] = v
	}
	return ProcStat{
		Pid: pid, PPid: int(vals[statPPid]),
		Own:      ticks(vals[statUtime] + vals[statUtime+1]),
		Children: ticks(vals[statUtime+2] + vals[statCstime]),
	}, nil
}

func ticks(n int64) time.Duration { return time.Duration(n) * time.Second / userHZ }

// Snapshot is every process's CPU times at one moment.
type Snapshot struct {
	procs    map[int]ProcStat
	children map[int][]int
}

// ReadSnapshot reads /proc/<pid>/stat of every process.
func ReadSnapshot() (Snapshot, error) {
	paths, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return Snapshot{}, fmt.Errorf("listing processes: %w", err)
	}
	stats := make([]ProcStat, 0, len(paths))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the process ended since the listing
		}
		st, err := ParseStat(b)
		if err != nil {
			return Snapshot{}, fmt.Errorf("reading %s: %w", p, err)
		}
		stats = append(stats, st)
	}
	return NewSnapshot(stats), nil
}

// NewSnapshot indexes stats by pid and by parent.
func NewSnapshot(stats []ProcStat) Snapshot {
	s := Snapshot{procs: map[int]ProcStat{}, children: map[int][]int{}}
	for _, st := range stats {
		s.procs[st.Pid] = st
		s.children[st.PPid] = append(s.children[st.PPid], st.Pid)
	}
	return s
}

// Tree is the CPU time of root and of every live descendant, their reaped children
// included. The difference of two readings is what the tree used in between: a
// member that exits is reaped by its parent, whose children's time then holds all
// of it. A tree is followed by parent rather than by process group because
// PostgreSQL's backends each start a session of their own.
func (s Snapshot) Tree(root int) time.Duration {
	st, ok := s.procs[root]
	if !ok {
		return 0
	}
	total := st.Own + st.Children
	for _, child := range s.children[root] {
		if child != root {
			total += s.Tree(child)
		}
	}
	return total
}

// OwnCPU is the user and system time of the calling process alone (not of the
// processes it started).
func OwnCPU() (time.Duration, error) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, fmt.Errorf("reading the own process stat: %w", err)
	}
	st, err := ParseStat(b)
	return st.Own, err
}
