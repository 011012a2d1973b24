package ledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Watch is one record's view of its transaction in the ledger while the
// record is handled: what the process knew when the record consulted the
// ledger (Ledger.Watch), and what other writers have added since, so that
// a write goes out only when no other process may be sending it (the
// package doc, "Log order decides"). A Watch is used by one goroutine at a
// time; Close it when the record is done.
type Watch struct {
	l         *Ledger
	rec       *kgo.Record
	topic     string
	partition int32
	key       string

	// f is the followed partition (nil once closed); foreign, the entries
	// of other writers read since the watch began (guarded by the tail's
	// mutex); past, the ledger offset below which the record has heeded
	// them all.
	f       *followed
	foreign []foreignEntry
	past    int64
	// at is the At of the watch's last intent.
	at time.Time
}

type foreignEntry struct {
	offset int64
	value  string
}

// Heed is what other writers wrote about a transaction below an intent of
// this process's, which the record has not heeded yet. Both nil: nothing,
// the write may be sent.
type Heed struct {
	// Settled is another writer's settled entry: the transaction has its
	// answer, and the record is answered from it, nothing sent.
	Settled *Entry
	// Intent is another writer's intent, the latest made (At) of those
	// found: its write may be under way. Nothing is sent now; the record
	// looks the transaction up once that write has settled (At, plus a
	// call's time, plus the apply window), and intends again if it was
	// not applied.
	Intent *Entry
}

var errUnfollowed = errors.New("ledger: partition no longer read (forgotten, or the ledger closed)")

// SendWithin bounds how long after its intent's At a write may still be
// sent: Heed reports ErrLate past it, and the writer intends again rather
// than send. So a write is sent by At + SendWithin or not at all, and
// lands by At + SendWithin + the call timeout + the apply window or never:
// what a process that finds the intent waits before it looks (the
// package doc, "Log order decides"). Reading an intent back takes a fetch
// round trip (milliseconds); the rest is a Kafka that answers slowly.
const SendWithin = 5 * time.Second

// ErrLate is Heed's answer when the intent it read back is older than
// SendWithin: its write must not be sent; intend again.
var ErrLate = errors.New("ledger: intent read back too late to send its write")

// SendBy is when the write of the watch's last intent must have been sent
// by (its At plus SendWithin): the caller passes it to the partner client
// (loyalty.WithSendBy), which sends no attempt later.
func (w *Watch) SendBy() time.Time { return w.at.Add(SendWithin) }

// Watch consults the ledger for kind and transactionID of the input record
// rec, as Lookup does, and begins watching the transaction: the Watch's
// Intend reports what other writers write about it from now on. The
// entry is nil when the ledger has none.
func (l *Ledger) Watch(ctx context.Context, rec *kgo.Record, assignment uint64, kind Kind, transactionID string) (*Entry, *Watch, error) {
	w := &Watch{l: l, rec: rec, topic: rec.Topic, partition: rec.Partition, key: Key(kind, transactionID)}
	for range 3 {
		if _, err := l.Lookup(ctx, rec, assignment, kind, transactionID); err != nil {
			return nil, nil, err
		}
		// The read position first, the entry second: everything below the
		// position is in the store when the entry is read, and everything
		// from it on reaches the watch.
		past, err := l.tail.watch(w)
		if errors.Is(err, errUnfollowed) {
			continue // forgotten between the two: read again
		}
		if err != nil {
			return nil, nil, err
		}
		w.past = past
		e, err := l.Lookup(ctx, rec, assignment, kind, transactionID)
		if err != nil {
			w.Close()
			return nil, nil, err
		}
		return e, w, nil
	}
	return nil, nil, fmt.Errorf("ledger: watch %s: %w", w.key, errUnfollowed)
}

// Close ends the watch.
func (w *Watch) Close() { w.l.tail.unwatch(w) }

// Intend writes e's intent, as Ledger.Intend does, and returns its ledger
// offset, for Heed.
func (w *Watch) Intend(ctx context.Context, e Entry) (int64, error) {
	// Not put in the store now: the tail puts it in log order, so that an
	// acknowledgement slower than the tail never puts it over another
	// writer's later entry (Heed waits for the tail to pass it).
	offset, at, err := w.l.intend(ctx, w.rec, e, false)
	w.at = at
	return offset, err
}

// Heed waits until the process has read its ledger partition past the
// intent at offset, and returns the entries other writers made about the
// transaction below it that the record has not heeded yet; they count as
// heeded from then on. It fails when ctx ends or the topic cannot be read,
// and with ErrLate (and what to heed) when the watch's last intent is
// older than SendWithin by then.
func (w *Watch) Heed(ctx context.Context, offset int64) (h Heed, err error) {
	return w.HeedWithin(ctx, offset, 0)
}

// errHeedTimeout ends a HeedWithin whose bound passed.
var errHeedTimeout = fmt.Errorf("ledger: intent not read back in time: %w", context.DeadlineExceeded)

// HeedWithin is Heed, giving up (an error matching
// context.DeadlineExceeded) once within has passed while it waits for the
// tail; 0: no bound but ctx's. A timer rather than a context with a
// deadline, which cost a record about 2% of the bridge's CPU in a profile
// (finding the parent's canceler through the handler's context values).
func (w *Watch) HeedWithin(ctx context.Context, offset int64, within time.Duration) (h Heed, err error) {
	defer func() {
		if err == nil && w.l.o.Now().Sub(w.at) > SendWithin {
			err = fmt.Errorf("ledger: %s: intent made at %s: %w", w.key, w.at.UTC().Format(time.RFC3339Nano), ErrLate)
		}
	}()
	t := &w.l.tail
	var timeout <-chan time.Time // made at the first wait
	for {
		t.mu.Lock()
		f := w.f
		if f == nil || f.gone {
			t.mu.Unlock()
			// Forgotten (a revocation forgets its partitions before it
			// drains their records) or closed: the gap is read alone,
			// within the bound (rare: a context is cheap enough here).
			if within > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, within)
				defer cancel()
			}
			return w.gap(ctx, offset)
		}
		if f.pos > offset {
			defer t.mu.Unlock()
			return w.take(offset)
		}
		moved := f.moved
		t.mu.Unlock()
		if within > 0 && timeout == nil {
			timer := time.NewTimer(within)
			defer timer.Stop()
			timeout = timer.C
		}
		select {
		case <-moved:
		case <-ctx.Done():
			return Heed{}, ctx.Err()
		case <-timeout:
			return Heed{}, errHeedTimeout
		}
	}
}

// take collects the foreign entries in [past, offset) and moves past
// beyond offset. The caller holds the tail's mutex.
func (w *Watch) take(offset int64) (Heed, error) {
	var h Heed
	keep := w.foreign[:0]
	for _, fe := range w.foreign {
		switch {
		case fe.offset < w.past:
			continue
		case fe.offset > offset:
			keep = append(keep, fe)
			continue
		}
		kind, id, err := parseKey([]byte(w.key))
		if err != nil {
			return Heed{}, err
		}
		e, err := decodeValue(kind, id, []byte(fe.value))
		if err != nil {
			continue // only values valueTopic read reach a watch
		}
		switch e.State {
		case Settled:
			h.Settled = e
		case Intent:
			if h.Intent == nil || e.At.After(h.Intent.At) {
				h.Intent = e
			}
		}
	}
	clear(w.foreign[len(keep):])
	w.foreign = keep
	w.past = offset + 1
	return h, nil
}

// gap reads the ledger partition from the watch's past to offset with a
// reader of its own, for a watch whose partition the tail no longer
// reads, and heeds what it found.
func (w *Watch) gap(ctx context.Context, offset int64) (Heed, error) {
	l := w.l
	opts := append([]kgo.Opt{
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{l.o.Topic: {w.partition: kgo.NewOffset().At(w.past)}}),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()),
	}, l.o.ReaderOpts...)
	l.newClient.Lock()
	cl, err := kgo.NewClient(opts...)
	l.newClient.Unlock()
	if err != nil {
		return Heed{}, fmt.Errorf("ledger: read %s/%d: %w", l.o.Topic, w.partition, err)
	}
	defer cl.Close()
	var found []foreignEntry
	for next := w.past; next <= offset; {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return Heed{}, err
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, e error) { ferr = e })
		if ferr != nil {
			return Heed{}, fmt.Errorf("ledger: read %s/%d: %w", l.o.Topic, w.partition, ferr)
		}
		fs.EachRecord(func(r *kgo.Record) {
			next = max(next, r.Offset+1)
			if r.Offset > offset || string(r.Key) != w.key || bytes.Equal(writerOf(r), l.writer) {
				return
			}
			if topic, ok := valueTopic(r.Value); ok && topic == w.topic {
				found = append(found, foreignEntry{offset: r.Offset, value: string(r.Value)})
			}
		})
	}
	t := &l.tail
	t.mu.Lock()
	defer t.mu.Unlock()
	w.foreign = append(w.foreign, found...)
	return w.take(offset)
}
