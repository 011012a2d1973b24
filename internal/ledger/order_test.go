package ledger_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/ledger"
)

// watch consults l for accrual id of the input record at partition 0,
// offset 1, and watches it until the test ends.
func (w world) watch(t *testing.T, l *ledger.Ledger, id string) (*ledger.Entry, *ledger.Watch) {
	t.Helper()
	e, wt, err := l.Watch(ctxT(t), w.rec(0, 1), 1, ledger.Accrual, id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wt.Close)
	return e, wt
}

// intendHeed writes an intent through wt and returns what it must heed,
// within 10 s.
func intendHeed(t *testing.T, wt *ledger.Watch, id string) ledger.Heed {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctxT(t), 10*time.Second)
	defer cancel()
	o, err := wt.Intend(ctx, ledger.Entry{Kind: ledger.Accrual, TransactionID: id})
	if err != nil {
		t.Fatal(err)
	}
	h, err := wt.Heed(ctx, o)
	if err != nil && !errors.Is(err, ledger.ErrLate) { // late on a busy machine: what to heed is still exact
		t.Fatalf("heed the intent at %d: %v", o, err)
	}
	return h
}

// Log order decides: of two processes that found no entry and both
// intend one transaction, the one whose intent is later in the ledger
// sees the other's (and sends nothing now); the earlier sees nothing of
// the later. An intent heeded is not heeded again; a settled entry of the
// other's answers; the process's own entries are never heeded.
func TestWatchHeedsTheEarlierWriter(t *testing.T) {
	w := cluster(t)
	a, acl := w.open(t, nil)
	b, _ := w.open(t, nil)
	if e, _ := w.watch(t, a, "p-1"); e != nil {
		t.Fatalf("a found %+v before anything was written", e)
	}
	_, wa := w.watch(t, a, "p-1")
	e, wb := w.watch(t, b, "p-1")
	if e != nil {
		t.Fatalf("b found %+v before anything was written", e)
	}

	if h := intendHeed(t, wa, "p-1"); h.Intent != nil || h.Settled != nil {
		t.Fatalf("the first intent must heed nothing; got %+v", h)
	}
	h := intendHeed(t, wb, "p-1")
	if h.Intent == nil || h.Settled != nil {
		t.Fatalf("the second intent must heed the first's; got %+v", h)
	}
	if h := intendHeed(t, wb, "p-1"); h.Intent != nil || h.Settled != nil {
		t.Fatalf("an intent heeded once is heeded again: %+v", h)
	}
	// a's own second intent: b's intents are below it, its own are not
	// heeded.
	if h := intendHeed(t, wa, "p-1"); h.Intent == nil || h.Settled != nil {
		t.Fatalf("a's second intent must heed b's; got %+v", h)
	}
	points := int64(70)
	r, err := a.Settle(w.rec(0, 1), ledger.Entry{Kind: ledger.Accrual, TransactionID: "p-1", Outcome: "APPLIED", Points: &points})
	if err != nil {
		t.Fatal(err)
	}
	if err := acl.ProduceSync(ctxT(t), r).FirstErr(); err != nil {
		t.Fatal(err)
	}
	h = intendHeed(t, wb, "p-1")
	if h.Settled == nil || h.Settled.Points == nil || *h.Settled.Points != 70 {
		t.Fatalf("b's intent after a's settled entry: %+v, want a's settled entry", h)
	}
	// Another transaction's entries are not this one's.
	_, wc := w.watch(t, b, "p-2")
	if h := intendHeed(t, wc, "p-2"); h.Intent != nil || h.Settled != nil {
		t.Fatalf("p-2 heeds %+v", h)
	}
}

// An entry written before entries named their writer (no header) is
// another writer's: heeded.
func TestWatchHeedsAnEntryWithoutWriter(t *testing.T) {
	w := cluster(t)
	a, acl := w.open(t, nil)
	_, wa := w.watch(t, a, "p-1")
	r, err := a.Settle(w.rec(0, 1), ledger.Entry{Kind: ledger.Accrual, TransactionID: "p-1", Outcome: "APPLIED"})
	if err != nil {
		t.Fatal(err)
	}
	r.Headers = nil
	if err := acl.ProduceSync(ctxT(t), r).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if h := intendHeed(t, wa, "p-1"); h.Settled == nil {
		t.Fatalf("an entry without a writer is not heeded: %+v", h)
	}
}

// An exactly-once member's round holds its settled entries in an open
// transaction below the intents of the round's later records: reading up
// to an intent must not wait for that transaction (which waits for the
// record), so the tail reads read_uncommitted. And an entry of another
// writer's aborted transaction is still heeded: it tells a partner answer.
func TestHeedDoesNotWaitForAnOpenTransaction(t *testing.T) {
	w := cluster(t)
	a, _ := w.open(t, nil)
	b, _ := w.open(t, nil)
	_, wa := w.watch(t, a, "p-1")
	_, wb := w.watch(t, b, "p-2")
	tx := w.client(t, kgo.TransactionalID(w.topic+"-open"))
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	// a's own settled entry of another transaction, in its open round.
	r, err := a.Settle(w.rec(0, 0), ledger.Entry{Kind: ledger.Accrual, TransactionID: "p-0", Outcome: "APPLIED"})
	if err != nil {
		t.Fatal(err)
	}
	// b's settled entry of p-1 (another writer's, aborted below).
	rb, err := b.Settle(w.rec(0, 1), ledger.Entry{Kind: ledger.Accrual, TransactionID: "p-1", Outcome: "APPLIED"})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.ProduceSync(ctxT(t), r, rb).FirstErr(); err != nil {
		t.Fatal(err)
	}
	h := intendHeed(t, wa, "p-1") // fails within 10 s if it waits for the round
	if h.Settled == nil {
		t.Fatalf("another writer's settled entry in an open transaction: %+v, want it heeded", h)
	}
	if err := tx.EndTransaction(ctxT(t), kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	if h := intendHeed(t, wb, "p-2"); h.Intent != nil || h.Settled != nil {
		t.Fatalf("p-2 heeds %+v", h)
	}
}

// A record whose partition was forgotten while it ran (a handler that
// outlived its revocation's drain timeout, a lost partition's handler
// being cut) still heeds the other writers' entries below its intent
// (read alone, the tail no longer reading the partition).
func TestHeedAfterForget(t *testing.T) {
	w := cluster(t)
	a, _ := w.open(t, nil)
	b, _ := w.open(t, nil)
	_, wa := w.watch(t, a, "p-1")
	_, wb := w.watch(t, b, "p-1")
	a.Forget(w.input, 0)
	intendHeed(t, wb, "p-1")
	if h := intendHeed(t, wa, "p-1"); h.Intent == nil {
		t.Fatalf("after Forget, the other writer's intent below is not heeded: %+v", h)
	}
	// Read alone again, from past the intent just heeded: what was heeded
	// is not heeded twice.
	if h := intendHeed(t, wa, "p-1"); h.Intent != nil || h.Settled != nil {
		t.Fatalf("after Forget, an entry heeded already is heeded again: %+v", h)
	}
}

// An intent read back later than SendWithin after it was made sends
// nothing: another process that finds it waits for a write sent by then.
// Read back exactly SendWithin after, it is still in time.
func TestHeedOfALateIntent(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after time.Duration // from the intent's At to its Heed
		late  bool
	}{
		{"exactly SendWithin", ledger.SendWithin, false},
		{"past SendWithin", ledger.SendWithin + time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := cluster(t)
			base := time.Now()
			var shift atomic.Int64
			a, _ := w.open(t, func() time.Time { return base.Add(time.Duration(shift.Load())) })
			_, wa := w.watch(t, a, "p-1")
			o, err := wa.Intend(ctxT(t), ledger.Entry{Kind: ledger.Accrual, TransactionID: "p-1"})
			if err != nil {
				t.Fatal(err)
			}
			shift.Store(int64(tc.after))
			if _, err := wa.Heed(ctxT(t), o); errors.Is(err, ledger.ErrLate) != tc.late {
				t.Fatalf("Heed %s after the intent: %v, want late %v", tc.after, err, tc.late)
			}
		})
	}
}

// HeedWithin waits for the tail to pass an offset not written yet until
// its bound passes (an error matching context.DeadlineExceeded, its
// context still alive); with no bound of its own (0), until its context
// ends, with the context's error.
func TestHeedWithinWaitsForItsBound(t *testing.T) {
	for _, tc := range []struct {
		name        string
		within, ctx time.Duration
		ctxEnded    bool // when HeedWithin returns
	}{
		{"no bound: the context's", 0, 300 * time.Millisecond, true},
		{"a bound shorter than the context", 50 * time.Millisecond, 3 * time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := cluster(t)
			a, _ := w.open(t, nil)
			_, wa := w.watch(t, a, "p-1")
			o, err := wa.Intend(ctxT(t), ledger.Entry{Kind: ledger.Accrual, TransactionID: "p-1"})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(ctxT(t), tc.ctx)
			defer cancel()
			_, err = wa.HeedWithin(ctx, o+1, tc.within)
			if (ctx.Err() != nil) != tc.ctxEnded || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("HeedWithin of an offset not written: %v, returned with its context ended %v; want %v", err, ctx.Err() != nil, tc.ctxEnded)
			}
		})
	}
}
