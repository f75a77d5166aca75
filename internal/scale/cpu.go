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

// statFields are the fields read after a /proc/<pid>/stat line's command name:
// pgrp is the 5th field of the line, utime..cstime the 14th to the 17th.
const (
	statPgrp   = 5
	statUtime  = 14
	statCstime = 17
)

// ProcStat is what ParseStat reads of one /proc/<pid>/stat line.
type ProcStat struct {
	Pgrp int
	// Own is the process's user and system time; Children that of its children it
	// has waited for (so that a short-lived command's CPU counts for its parent).
	Own, Children time.Duration
}

// ParseStat reads the process group and the CPU times of a /proc/<pid>/stat line.
// The command name may hold spaces and parentheses, so fields are counted from the
// last ')'.
func ParseStat(line []byte) (ProcStat, error) {
	end := bytes.LastIndexByte(line, ')')
	if end < 0 {
		return ProcStat{}, fmt.Errorf("parsing a process stat line: no command name in %q", line)
	}
	// Fields after the name start at the 3rd (state).
	fields := bytes.Fields(line[end+1:])
	if len(fields) < statCstime-2 {
		return ProcStat{}, fmt.Errorf("parsing a process stat line: %d fields after the name", len(fields))
	}
	num := func(n int) (int64, error) { return strconv.ParseInt(string(fields[n-3]), 10, 64) }
	var vals [statCstime + 1]int64
	for _, n := range []int{statPgrp, statUtime, statUtime + 1, statUtime + 2, statCstime} {
		v, err := num(n)
		if err != nil {
			return ProcStat{}, fmt.Errorf("parsing field %d of a process stat line: %w", n, err)
		}
		vals[n] = v
	}
	return ProcStat{
		Pgrp:     int(vals[statPgrp]),
		Own:      ticks(vals[statUtime] + vals[statUtime+1]),
		Children: ticks(vals[statUtime+2] + vals[statCstime]),
	}, nil
}

func ticks(n int64) time.Duration { return time.Duration(n) * time.Second / userHZ }

// GroupCPU returns, per process group, the CPU time its live members have used,
// their reaped children included. The difference of two readings is what the group
// used in between: a member that exits is reaped by its parent, whose children's
// time then holds all of it.
func GroupCPU() (map[int]time.Duration, error) {
	paths, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	out := map[int]time.Duration{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the process ended since the listing
		}
		st, err := ParseStat(b)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", p, err)
		}
		out[st.Pgrp] += st.Own + st.Children
	}
	return out, nil
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
