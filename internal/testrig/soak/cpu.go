package soak

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of /proc's CPU times: USER_HZ, 100 on every Linux
// architecture Mantis builds for (sysconf(_SC_CLK_TCK)).
const clockTick = 10 * time.Millisecond

// procStat is the part of /proc/<pid>/stat the CPU account reads.
type procStat struct {
	ppid int
	cpu  time.Duration // user + system time of the process itself
}

// readProcStat parses /proc/<pid>/stat. The command name (field 2) may hold spaces
// and parentheses, so the fields are read after its last ')'.
func readProcStat(pid int) (procStat, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	i := strings.LastIndexByte(string(raw), ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("reading /proc/%d/stat: no command name", pid)
	}
	// After the name: state(3) ppid(4) ... utime(14) stime(15).
	f := strings.Fields(string(raw[i+1:]))
	if len(f) < 13 {
		return procStat{}, fmt.Errorf("reading /proc/%d/stat: %d fields after the name", pid, len(f))
	}
	ppid, err1 := strconv.Atoi(f[1])
	utime, err2 := strconv.ParseInt(f[11], 10, 64)
	stime, err3 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return procStat{}, fmt.Errorf("reading /proc/%d/stat: malformed ppid, utime or stime", pid)
	}
	return procStat{ppid: ppid, cpu: time.Duration(utime+stime) * clockTick}, nil
}

// ProcessCPU returns the CPU time (user + system) the process pid itself has used.
func ProcessCPU(pid int) (time.Duration, error) {
	st, err := readProcStat(pid)
	return st.cpu, err
}

// TreeCPU returns the CPU time (user + system) that the process pid and every live
// descendant have used. A server that forks a process per session (PostgreSQL) is
// counted whole; time of descendants that already exited is not, so compare two
// readings of long-lived trees only.
func TreeCPU(pid int) (time.Duration, error) {
	if pid <= 0 {
		return 0, fmt.Errorf("reading CPU of pid %d: not running", pid)
	}
	all, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return 0, err
	}
	stats := make(map[int]procStat, len(all))
	children := map[int][]int{}
	for _, path := range all {
		p, err := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		if err != nil {
			continue
		}
		st, err := readProcStat(p)
		if err != nil {
			continue // exited meanwhile
		}
		stats[p] = st
		children[st.ppid] = append(children[st.ppid], p)
	}
	if _, ok := stats[pid]; !ok {
		return 0, fmt.Errorf("reading CPU of pid %d: not running", pid)
	}
	var total time.Duration
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		total += stats[p].cpu
		queue = append(queue, children[p]...)
	}
	return total, nil
}

// MachineCPU returns the CPU time every core of the machine spent busy (anything
// but idle and I/O wait) since boot.
func MachineCPU() (time.Duration, error) {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return 0, fmt.Errorf("reading /proc/stat: unexpected first line %q", line)
	}
	var busy int64
	for i, v := range f[1:] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("reading /proc/stat: field %d: %w", i+1, err)
		}
		if i != 3 && i != 4 && i < 8 { // idle and iowait; guest times are inside user
			busy += n
		}
	}
	return time.Duration(busy) * clockTick, nil
}

// CPUGroup is a set of processes whose CPU time the soak adds up, e.g. every
// Mandible replica.
type CPUGroup struct {
	Name string
	Pids []func() int
}

// CPUReading is a group's CPU time at one moment.
type CPUReading map[string]time.Duration

// MachineGroup names the machine's whole busy time in a CPUReading.
const MachineGroup = "machine (all processes)"

// ReadCPU reads each group's CPU time and the machine's; a process that is not
// running counts nothing.
func ReadCPU(groups []CPUGroup) CPUReading {
	out := CPUReading{}
	for _, g := range groups {
		var sum time.Duration
		for _, pid := range g.Pids {
			if d, err := TreeCPU(pid()); err == nil {
				sum += d
			}
		}
		out[g.Name] = sum
	}
	if d, err := MachineCPU(); err == nil {
		out[MachineGroup] = d
	}
	return out
}

// CPUUse is what one group used while the load ran.
type CPUUse struct {
	Group string
	CPU   time.Duration
	// Cores is CPU divided by the wall time: how many cores the group kept busy.
	Cores float64
	// PerRequest is CPU divided by the dispatch requests that succeeded meanwhile.
	PerRequest time.Duration
}

// CPUUses compares two readings over wall time, with succeeded requests done in it,
// in groups' order, then the machine, then what is left of the machine's time
// (processes outside the groups: the load generator, builds, anything else running).
func CPUUses(groups []CPUGroup, before, after CPUReading, wall time.Duration, succeeded int) []CPUUse {
	use := func(name string, d time.Duration) CPUUse {
		u := CPUUse{Group: name, CPU: d, Cores: d.Seconds() / wall.Seconds()}
		if succeeded > 0 {
			u.PerRequest = d / time.Duration(succeeded)
		}
		return u
	}
	var out []CPUUse
	var ours time.Duration
	for _, g := range groups {
		d := after[g.Name] - before[g.Name]
		ours += d
		out = append(out, use(g.Name, d))
	}
	machine := after[MachineGroup] - before[MachineGroup]
	out = append(out, use(MachineGroup, machine), use("outside the cluster", max(machine-ours, 0)))
	return out
}
