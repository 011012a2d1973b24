package ledger

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// writer gives intents to the client on the caller's goroutine and waits
// for each acknowledgement.
//
// An earlier writer handed every intent to one long-lived goroutine, so
// that the client's produce path (the deepest a record reached) did not
// grow the stack of a goroutine started per record. The pipeline now runs
// records on workers it keeps (their stacks stay grown), and the hand-off
// cost a channel exchange and a goroutine wake-up per intent.
type writer struct {
	cl *kgo.Client

	mu     sync.RWMutex // held for reading while an intent is given to the client
	closed bool
}

// produced is an intent's produce result: its offset, once acknowledged.
type produced struct {
	offset int64
	err    error
}

func newWriter(cl *kgo.Client) *writer { return &writer{cl: cl} }

// write produces r and returns its offset once Kafka has acknowledged
// it, or ctx ended (the intent may still land: an intent without its
// write only makes a later copy look before writing).
func (w *writer) write(ctx context.Context, r *kgo.Record) (int64, error) {
	done := make(chan produced, 1) // the promise never blocks
	w.mu.RLock()
	if w.closed {
		w.mu.RUnlock()
		return 0, errClosed
	}
	// Given to the client, whose promise always runs (with
	// kgo.ErrClientClosed at the latest).
	w.cl.Produce(ctx, r, func(r *kgo.Record, err error) { done <- produced{r.Offset, err} })
	w.mu.RUnlock()
	select {
	case res := <-done:
		return res.offset, res.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// close makes every later write fail with errClosed, once the writes
// giving their intents to the client now have done so.
func (w *writer) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
}
