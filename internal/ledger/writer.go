package ledger

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// writer gives intents to the client from one long-lived goroutine and
// hands each acknowledgement back to the record that waits for it.
//
// Why not ProduceSync on the record's own goroutine: the bridge ran a
// goroutine per record, started with a small stack, and the client's
// produce path (partitioning, buffering, starting the linger timer) is
// the deepest the record reaches. A CPU profile of loyalty-bench at 256 in
// flight had the record's stack grown there, for 4.6% of the bridge's CPU
// (runtime.newstack under kgo's produce path, where without the ledger
// the stack grew once, in the partner call, for 3.3%); the writer's stack
// grows once, and the record only waits on a channel. The pipeline now
// keeps its workers and their stacks; producing on the record's goroutine
// instead was tried (2026-11-28) and saved nothing loyalty-bench could
// tell from its runs' noise, so the writer stays.
type writer struct {
	cl    *kgo.Client
	queue chan *pending // unbuffered: a pending taken is a pending produced
	quit  chan struct{} // closed by close
	start sync.Once
	stop  sync.Once
	wg    sync.WaitGroup
}

// pending is one intent on its way: done receives its produce result.
type pending struct {
	ctx  context.Context
	rec  *kgo.Record
	done chan produced // capacity 1: the promise never blocks
}

// produced is an intent's produce result: its offset, once acknowledged.
type produced struct {
	offset int64
	err    error
}

func newWriter(cl *kgo.Client) *writer {
	return &writer{cl: cl, queue: make(chan *pending), quit: make(chan struct{})}
}

// write produces r and returns its offset once Kafka has acknowledged
// it, or ctx ended (the intent may still land: an intent without its
// write only makes a later copy look before writing).
func (w *writer) write(ctx context.Context, r *kgo.Record) (int64, error) {
	w.start.Do(func() { w.wg.Go(w.run) })
	p := &pending{ctx: ctx, rec: r, done: make(chan produced, 1)}
	select {
	case w.queue <- p:
	case <-w.quit:
		return 0, errClosed
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	// Taken, so given to the client, whose promise always runs (with
	// kgo.ErrClientClosed at the latest).
	select {
	case res := <-p.done:
		return res.offset, res.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func (w *writer) run() {
	for {
		select {
		case p := <-w.queue:
			w.cl.Produce(p.ctx, p.rec, func(r *kgo.Record, err error) { p.done <- produced{r.Offset, err} })
		case <-w.quit:
			return
		}
	}
}

// close stops the goroutine and waits for it; intents not yet taken fail
// with errClosed.
func (w *writer) close() {
	w.start.Do(func() {}) // none starts after this
	w.stop.Do(func() { close(w.quit) })
	w.wg.Wait()
}
