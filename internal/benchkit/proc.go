package benchkit

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
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
}

// startProc starts argv with this process's environment minus any
// LOYALTY_BRIDGE_* variable (so the operator's settings cannot change what
// is measured) and stdin.
func startProc(name string, argv []string, stdin []byte, logPath string) (*proc, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	p := &proc{name: name, logPath: logPath, exited: make(chan struct{})}
	p.cmd = exec.Command(argv[0], argv[1:]...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LOYALTY_BRIDGE_") {
			p.cmd.Env = append(p.cmd.Env, kv)
		}
	}
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
	return p, nil
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

// usage is the process's rusage; valid once it has exited.
func (p *proc) usage() usage {
	if p.cmd.ProcessState == nil {
		return usage{}
	}
	return usage{cpu: p.cmd.ProcessState.UserTime() + p.cmd.ProcessState.SystemTime(),
		maxRSS: maxRSS(p.cmd.ProcessState)}
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
