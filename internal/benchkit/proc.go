package benchkit

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// usage is a process's resource use.
type usage struct {
	cpu    time.Duration // user + system
	maxRSS int64         // bytes; 0 when unknown
}

// proc is a contestant's child process. Its stderr goes to a log file,
// its stdout is kept for the worker's result.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	stdout  bytes.Buffer
	exited  chan struct{}
	waitErr error
	launch  time.Time
	// hwm is the highest VmHWM sampled from /proc (bytes); see peakRSS.
	hwm     atomic.Int64
	sampled chan struct{} // closed when sampling has stopped
}

// startProc starts argv with this process's environment minus any
// LOYALTY_BRIDGE_* variable (so the operator's settings cannot change what
// is measured), plus env, and stdin.
func startProc(name string, argv, env []string, stdin []byte, logPath string) (*proc, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	p := &proc{name: name, logPath: logPath, exited: make(chan struct{}), sampled: make(chan struct{})}
	p.cmd = exec.Command(argv[0], argv[1:]...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LOYALTY_BRIDGE_") {
			p.cmd.Env = append(p.cmd.Env, kv)
		}
	}
	p.cmd.Env = append(p.cmd.Env, env...)
	p.cmd.Stdin = bytes.NewReader(stdin)
	p.cmd.Stdout = &p.stdout
	p.cmd.Stderr = logf
	p.launch = time.Now()
	if err := p.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		logf.Close()
		close(p.exited)
	}()
	go p.sampleRSS()
	return p, nil
}

// sampleRSS polls the child's peak RSS until it exits.
//
// Its rusage cannot tell: Go starts children with vfork semantics (the
// child shares the parent's memory until exec) and Linux carries that
// memory's high-water mark into the child's ru_maxrss at exec, so every
// child would report at least the bench's own peak (Kafka, simulator).
// VmHWM belongs to the child's own address space.
func (p *proc) sampleRSS() {
	defer close(p.sampled)
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		if v := vmHWM(p.cmd.Process.Pid); v > p.hwm.Load() {
			p.hwm.Store(v)
		}
		select {
		case <-p.exited:
			return
		case <-t.C:
		}
	}
}

// stop asks the process to end (SIGTERM), waits up to grace, then kills
// it. It returns the exit error, if any.
func (p *proc) stop(grace time.Duration) error {
	select {
	case <-p.exited:
		return p.exitErr()
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.exited:
		return p.exitErr()
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("%s did not stop within %s of SIGTERM and was killed", p.name, grace)
	}
}

// wait waits for the process to exit on its own, or ctx to end (then it
// is killed).
func (p *proc) wait(ctx context.Context) error {
	select {
	case <-p.exited:
		return p.exitErr()
	case <-ctx.Done():
		_ = p.cmd.Process.Kill()
		<-p.exited
		return ctx.Err()
	}
}

func (p *proc) exitErr() error {
	if p.waitErr == nil {
		return nil
	}
	return fmt.Errorf("%s: %w%s", p.name, p.waitErr, p.logTail())
}

// usage is the process's CPU time (rusage) and peak RSS (sampled, or
// rusage where /proc is missing); valid once it has exited.
func (p *proc) usage() usage {
	if p.cmd.ProcessState == nil {
		return usage{}
	}
	<-p.sampled
	u := usage{cpu: p.cmd.ProcessState.UserTime() + p.cmd.ProcessState.SystemTime(), maxRSS: p.hwm.Load()}
	if u.maxRSS == 0 {
		u.maxRSS = maxRSS(p.cmd.ProcessState)
	}
	return u
}

// vmHWM reads the peak resident set of process pid from /proc, in bytes;
// 0 if unavailable.
func vmHWM(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	_, rest, ok := bytes.Cut(b, []byte("VmHWM:"))
	if !ok {
		return 0
	}
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	f := strings.Fields(string(line)) // "12345 kB"
	if len(f) != 2 || f[1] != "kB" {
		return 0
	}
	kb, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return 0
	}
	return kb * 1024
}

// logTail is the end of the process's stderr, for error messages.
func (p *proc) logTail() string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	const tail = 2000
	if st, err := f.Stat(); err == nil && st.Size() > tail {
		_, _ = f.Seek(-tail, io.SeekEnd)
	}
	b, _ := io.ReadAll(f)
	if len(b) == 0 {
		return ""
	}
	return fmt.Sprintf("\n--- end of %s ---\n%s", p.logPath, strings.TrimRight(string(b), "\n"))
}

// cpuTimes reads the machine-wide busy and total CPU time from /proc/stat
// (in clock ticks); ok is false where there is no /proc.
func cpuTimes() (busy, total uint64, ok bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0, false
	}
	for i, v := range f[1:] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, 0, false
		}
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, total, true
}
