package ledger

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)


// writer gives intents to the client from one long-lived goroutine and
// hands each acknowledgement back to the record that waits for it.
//
// Why not ProduceSync on the record's own goroutine: the bridge runs a
// goroutine per record, started with a small stack, and the client's
// produce path (partitioning, buffering, starting the linger timer) is
// the deepest the record reaches. A CPU profile of loyalty-bench at 256 in
// flight had the record's stack grown there, for 4.6% of the bridge's CPU
// (runtime.newstack under kgo's produce path, where without the ledger
// the stack grew once, in the partner call, for 3.3%); the writer's stack
// grows once, and the record only waits on a channel.
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
	done chan error // capacity 1: the promise never blocks
}

func newWriter(cl *kgo.Client) *writer {
	return &writer{cl: cl, queue: make(chan *pending), quit: make(chan struct{})}
}

// write produces r and returns once Kafka has acknowledged it, or ctx
// ended (the intent may still land: an intent without its write only
// makes a later copy look before writing).
func (w *writer) write(ctx context.Context, r *kgo.Record) error {
	w.start.Do(func() { w.wg.Go(w.run) })
	p := &pending{ctx: ctx, rec: r, done: make(chan error, 1)}
	select {
	case w.queue <- p:
	case <-w.quit:
		return errClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	// Taken, so given to the client, whose promise always runs (with
	// kgo.ErrClientClosed at the latest).
	select {
	case err := <-p.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (w *writer) run() {
	for {
		select {
		case p := <-w.queue:
			w.cl.Produce(p.ctx, p.rec, func(_ *kgo.Record, err error) { p.done <- err })
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
