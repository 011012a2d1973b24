package benchkit

import (
	"context"
	"fmt"
	"io"
	"time"
)

// rolling restarts a scenario's bridge processes one after another while
// they work, as a rolling deploy with no surge does (Scenario.RollingRestart):
// once (i+1)/(len+1) of the records are answered and every process is
// ready (/readyz: a deploy waits for the last replacement's readiness
// before it stops the next), process i is stopped (SIGTERM: the bridge
// drains, commits and releases its partitions) and, once it has exited,
// a new process takes its place.
type rolling struct {
	current []*proc // the processes running now, by replica
	started []*proc // the replacements, in order: one per restart
	err     error
	done    chan struct{} // closed when run returns; then the fields are the caller's
}

// stopGrace is how long a replaced process may take to drain and stop
// before it is killed (the bridge's own drain timeout is shorter).
const stopGrace = 45 * time.Second

// rollingOptions are a rolling restart's hooks into the run.
type rollingOptions struct {
	// answered is how many of the n records are answered so far.
	answered func() int
	n        int
	// ready reports whether replica i's process serves /readyz with 200.
	ready func(ctx context.Context, replica int) bool
	// relaunch starts replica i's replacement.
	relaunch func(replica int) (*proc, error)
	log      io.Writer
}

// startRolling restarts procs in turn, as o says when. It stops when
// every process has been restarted, a stop or a start fails, or ctx ends.
func startRolling(ctx context.Context, procs []*proc, o rollingOptions) *rolling {
	r := &rolling{current: append([]*proc(nil), procs...), done: make(chan struct{})}
	go r.run(ctx, o)
	return r
}

func (r *rolling) run(ctx context.Context, o rollingOptions) {
	defer close(r.done)
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	allReady := func() bool {
		for i := range r.current {
			if !o.ready(ctx, i) {
				return false
			}
		}
		return true
	}
	for i := range r.current {
		threshold := (i + 1) * o.n / (len(r.current) + 1)
		for o.answered() < threshold || !allReady() {
			if o.answered() >= o.n {
				return // all answered: a restart now would measure nothing
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
		old := r.current[i]
		t0 := time.Now()
		if err := old.stop(stopGrace); err != nil {
			r.err = fmt.Errorf("rolling restart of %s: %w", old.name, err)
			return
		}
		p, err := o.relaunch(i)
		if err != nil {
			r.err = fmt.Errorf("rolling restart of %s: start its replacement: %w", old.name, err)
			return
		}
		r.current[i], r.started = p, append(r.started, p)
		fmt.Fprintf(o.log, "  %s restarted at %d answered (stopped in %.1fs)\n", old.name, o.answered(), time.Since(t0).Seconds())
	}
}

// exited is closed once the restarts are over and every process then
// running has exited: the collector's sign that nothing more will come.
func (r *rolling) exited() <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		<-r.done
		for _, p := range r.current {
			<-p.exited
		}
		close(ch)
	}()
	return ch
}

// wait waits for run to return (the caller ends its ctx first) and
// returns every process started, replacements included, and the
// restarts' error.
func (r *rolling) wait(procs []*proc) ([]*proc, error) {
	<-r.done
	return append(procs, r.started...), r.err
}
