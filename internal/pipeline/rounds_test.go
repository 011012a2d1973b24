package pipeline

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func eosPipeline(t *testing.T, opts Options) (*Pipeline, *exactlyOnce) {
	t.Helper()
	opts.Delivery, opts.TransactionalID = ExactlyOnce, "m-1"
	p := modePipeline(t, opts)
	return p, p.mode.(*exactlyOnce)
}

// TestExactlyOnceRound: a poll is a round; its records start at once,
// the first MaxBuffered of a new partition Fresh (a previous owner can
// have done one uncommitted round); each is counted out of the round
// once, when its outputs are ready; and the partition is never paused.
func TestExactlyOnceRound(t *testing.T) {
	p, e := eosPipeline(t, Options{MaxInFlight: 4, MaxBuffered: 4, MaxBufferedPerPartition: 4})
	part := assign(p, 0)
	if pause := p.enqueue(polled(0, 0, 6, distinctKeys), false); pause != nil || part.paused {
		t.Fatalf("a round paused %v", pause)
	}
	p.mu.Lock()
	left, taken := e.roundLeft, eosState(part).taken
	p.mu.Unlock()
	if left != 6 || taken != 6 {
		t.Fatalf("round counts %d left, %d taken; want 6 and 6", left, taken)
	}
	started := startAll(t, p)
	if want := []int64{0, 1, 2, 3}; !slices.Equal(offsets(started), want) {
		t.Fatalf("started %v, want %v (MaxInFlight 4)", offsets(started), want)
	}
	for _, j := range started {
		if !j.fresh {
			t.Errorf("offset %d not fresh", j.rec.Offset)
		}
	}
	out := []*kgo.Record{{Topic: outTopic}}
	e.produce(started[0], out)
	p.finish(started[0], Processed) // as after the round's commit: counted out once only
	p.mu.Lock()
	checkCounters(t, p)
	r := roundOf(started[0])
	left = e.roundLeft
	p.mu.Unlock()
	if !r.ready || len(r.outs) != 1 || left != 5 {
		t.Fatalf("after one record's outputs: ready %v with %d outputs, %d left; want ready, 1, 5", r.ready, len(r.outs), left)
	}
	for _, j := range started[1:] {
		e.produce(j, nil)
	}
	rest := startAll(t, p)
	if want := []int64{4, 5}; !slices.Equal(offsets(rest), want) {
		t.Fatalf("then started %v, want %v", offsets(rest), want)
	}
	for _, j := range rest {
		if j.fresh {
			t.Errorf("offset %d fresh, want only the first 4 (MaxBuffered)", j.rec.Offset)
		}
		e.produce(j, nil)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	checkCounters(t, p)
	if e.roundLeft != 0 || e.doomed {
		t.Fatalf("every record ready: %d left, doomed %v", e.roundLeft, e.doomed)
	}
}

// TestExactlyOnceAbandonedRecordDoomsTheRound: a record abandoned (its
// partition lost, a drain timeout) dooms its round, which then starts
// nothing more; a record of a round already over is abandoned when its
// outputs come, and counts in no later round.
func TestExactlyOnceAbandonedRecordDoomsTheRound(t *testing.T) {
	p, e := eosPipeline(t, Options{MaxInFlight: 1, MaxBuffered: 4})
	part := assign(p, 0)
	p.enqueue(polled(0, 0, 3, distinctKeys), false)
	first := startAll(t, p)
	p.finish(first[0], Abandoned)
	p.mu.Lock()
	doomed, mayStart := e.doomed, e.mayStartLocked(part)
	p.mu.Unlock()
	if !doomed || mayStart {
		t.Fatalf("after an abandoned record: doomed %v, may start %v", doomed, mayStart)
	}
	if got := startAll(t, p); len(got) != 0 {
		t.Fatalf("a doomed round started %v", offsets(got))
	}

	p, e = eosPipeline(t, Options{MaxInFlight: 1, MaxBuffered: 4})
	assign(p, 0)
	p.enqueue(polled(0, 0, 2, distinctKeys), false)
	late := startAll(t, p)[0]
	p.mu.Lock()
	e.closeRoundLocked() // the round ended (aborted) while late ran
	p.mu.Unlock()
	e.produce(late, []*kgo.Record{{Topic: outTopic}})
	p.mu.Lock()
	defer p.mu.Unlock()
	checkCounters(t, p)
	if roundOf(late).ready || e.roundLeft != 0 || late.p.abandoned != 1 || p.count.inFlight != 0 {
		t.Fatalf("a late record: ready %v, %d left in the new round, %d abandoned, %d in flight; want it abandoned alone",
			roundOf(late).ready, e.roundLeft, late.p.abandoned, p.count.inFlight)
	}
}

// TestExactlyOnceRevokedPartitionStartsNothing: a revoked partition's
// records are rolled back with the round, never drained.
func TestExactlyOnceRevokedPartitionStartsNothing(t *testing.T) {
	p, _ := eosPipeline(t, Options{})
	part := assign(p, 0)
	p.enqueue(polled(0, 0, 2, distinctKeys), false)
	p.mu.Lock()
	part.revoking = true
	p.mu.Unlock()
	if got := startAll(t, p); len(got) != 0 {
		t.Fatalf("a revoking partition started %v", offsets(got))
	}
}

// TestExactlyOnceStoppedWhenHandlersReturn: a revoke waits on the
// partition's handlers (not its outputs), and an abort on all of them.
func TestExactlyOnceStoppedWhenHandlersReturn(t *testing.T) {
	p, e := eosPipeline(t, Options{MaxInFlight: 4, MaxBuffered: 4})
	part := assign(p, 0)
	p.enqueue(polled(0, 0, 2, distinctKeys), false)
	started := startAll(t, p)
	p.mu.Lock()
	stopped := make(chan struct{})
	eosState(part).stopped = stopped
	p.mu.Unlock()
	e.produce(started[0], nil)
	select {
	case <-stopped:
		t.Fatal("stopped closed with a handler still running")
	default:
	}
	// The round ends before the last handler returns, so that its
	// record is counted out of no round: what wakes the round then is
	// the handlers' end alone.
	p.mu.Lock()
	e.closeRoundLocked()
	p.mu.Unlock()
	select {
	case <-e.roundWake:
	default:
	}
	e.produce(started[1], nil)
	select {
	case <-stopped:
	default:
		t.Fatal("stopped not closed once every handler returned")
	}
	select {
	case <-e.roundWake:
	default:
		t.Fatal("the round not woken once every handler returned")
	}
}

// TestExactlyOncePriorFailure: a record whose outputs failed in an aborted
// round brings the failure once, to the next time it is taken.
func TestExactlyOncePriorFailure(t *testing.T) {
	p, e := eosPipeline(t, Options{})
	part := assign(p, 0)
	cause := errors.New("outputs failed")
	e.outFailed[part.tp] = map[int64]outFailure{1: {err: cause, fellBack: true}}
	j := &job{p: part, rec: &kgo.Record{Topic: inTopic, Offset: 1}}
	if f, ok := e.priorFailure(j); !ok || !errors.Is(f.err, cause) || !f.fellBack {
		t.Fatalf("prior failure %+v, %v; want the recorded one", f, ok)
	}
	if _, ok := e.priorFailure(j); ok {
		t.Fatal("the failure came twice")
	}
	if _, ok := e.outFailed[part.tp]; ok {
		t.Fatal("an empty failure map kept")
	}
}

// TestExactlyOnceAssignmentWaits: a newly assigned partition's records wait
// TakeoverWait: the previous owner's cut calls may still land.
func TestExactlyOnceAssignmentWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const wait = 5 * time.Second
		p, e := eosPipeline(t, Options{TakeoverWait: wait})
		claimed(p, e, assign(p, 0))
		p.enqueue(polled(0, 0, 2, distinctKeys), false)
		if got := startAll(t, p); len(got) != 0 {
			t.Fatalf("started %v before the takeover wait", offsets(got))
		}
		time.Sleep(wait)
		if got := startAll(t, p); len(got) != 2 {
			t.Fatalf("started %v after the takeover wait, want both", offsets(got))
		}
	})
}

// claimed makes part's offset read and this member's claim on it
// committed, as onFetched and claim do, with a commit that lifts no wait.
func claimed(p *Pipeline, e *exactlyOnce, part *partition) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(e.inheriting, part.tp)
	delete(e.claimAt, part.tp)
}

// TestExactlyOnceUnclaimedDooms: records of a partition this member has
// not claimed yet (onFetched pauses it, so they are not expected) never
// start, and their round aborts instead of committing their offsets.
func TestExactlyOnceUnclaimedDooms(t *testing.T) {
	p, e := eosPipeline(t, Options{TakeoverWait: time.Second})
	part := assign(p, 0)
	part.guardAfter = time.Time{} // as if its commit were a release
	p.enqueue(polled(0, 0, 2, distinctKeys), false)
	if got := startAll(t, p); len(got) != 0 {
		t.Fatalf("started %v of a partition not claimed", offsets(got))
	}
	p.mu.Lock()
	doomed := e.doomed
	p.mu.Unlock()
	if !doomed {
		t.Fatal("the round with records of a partition not claimed is not doomed")
	}
}

// A commit's End error leaves the outcome unknown unless Kafka answered
// it definitely; a stop asked for is no such error.
func TestUnconfirmedEnd(t *testing.T) {
	closed := &net.OpError{Op: "write", Net: "tcp", Err: net.ErrClosed}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"connection closed during EndTxn", closed, true},
		{"a retriable code that outlived its retries", kerr.CoordinatorNotAvailable, true},
		{"unknown server error", kerr.UnknownServerError, true},
		{"an answer franz-go cannot read", errors.New("invalid response"), true},
		{"fenced", kerr.ProducerFenced, false},
		{"offsets refused, then aborted", fmt.Errorf("unable to commit transaction offsets: %w", errors.Join(kerr.GroupAuthorizationFailed)), false},
		{"the stop", context.Canceled, false},
		{"a deadline", fmt.Errorf("flush: %w", context.DeadlineExceeded), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := unconfirmedEnd(tc.err); got != tc.want {
				t.Errorf("unconfirmedEnd(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
