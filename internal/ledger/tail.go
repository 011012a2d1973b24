package ledger

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// tail keeps reading the ledger partitions the process has read, from
// where their restore ended, with one client for all of them: what other
// writers add (a replay beside the live bridge, a previous owner's last
// writes) reaches the stores, and a write's intent is known to have been
// read back (with everything below it) before the write is sent
// (order.go). It reads read_uncommitted: an exactly-once member's own open
// transaction holds settled entries below its intents, and read_committed
// would wait for a round that waits for the intent's record.
type tail struct {
	l *Ledger

	mu     sync.Mutex
	cl     *kgo.Client // nil until the first partition is followed
	cancel context.CancelFunc
	done   chan struct{} // closed when the poll loop has returned
	closed bool
	parts  map[int32]*followed
}

// followed is one ledger partition the tail reads.
type followed struct {
	// pos is the next ledger offset to read: every record below it has
	// reached the stores and the watches.
	pos int64
	// stores are the stores of the input partitions whose entries live
	// here (one per input topic), by input topic.
	stores map[string]*store
	// watches are the records waiting on a transaction's entries, by
	// record key.
	watches map[string][]*Watch
	// moved is closed, and replaced, when pos advances or the partition
	// stops being followed (gone).
	moved chan struct{}
	gone  bool
}

// follow makes the tail read s's ledger partition and deliver s's
// entries, from next if it does not read the partition yet. It returns
// the partition's read position: when it is past next, entries of s below
// it were read before s was delivered to, and the caller reads them.
func (t *tail) follow(s *store, next int64) (int64, error) {
	topic, partition := s.key()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return 0, errUnfollowed
	}
	t.l.mu.Lock()
	current := t.l.stores[s.name] == s
	t.l.mu.Unlock()
	if !current {
		return 0, errUnfollowed // forgotten while it was read
	}
	if f := t.parts[partition]; f != nil {
		f.stores[topic] = s
		return f.pos, nil
	}
	if t.parts == nil {
		t.parts = map[int32]*followed{}
	}
	at := map[string]map[int32]kgo.Offset{t.l.o.Topic: {partition: kgo.NewOffset().At(next)}}
	if t.cl == nil {
		opts := append([]kgo.Opt{
			kgo.ConsumePartitions(at),
			kgo.FetchIsolationLevel(kgo.ReadUncommitted()),
			// Waits for new entries at most this long per fetch; a new
			// entry is answered as soon as it is in the log.
			kgo.FetchMaxWait(500 * time.Millisecond),
			// No fetch session: franz-go v1.22.2's Close kills an open
			// session while a partition just added starts its first
			// fetch (a data race the race detector reports); a fetch
			// listing the few partitions a member owns costs little.
			kgo.DisableFetchSessions(),
		}, t.l.o.ReaderOpts...)
		t.l.newClient.Lock()
		cl, err := kgo.NewClient(opts...)
		t.l.newClient.Unlock()
		if err != nil {
			return 0, fmt.Errorf("ledger: follow %s/%d: %w", t.l.o.Topic, partition, err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		t.cl, t.cancel, t.done = cl, cancel, make(chan struct{})
		go t.poll(ctx, cl)
	} else {
		t.cl.AddConsumePartitions(at)
	}
	t.parts[partition] = &followed{pos: next, stores: map[string]*store{topic: s}, watches: map[string][]*Watch{}, moved: make(chan struct{})}
	return next, nil
}

// unfollow stops delivering to s, and stops reading its partition when no
// other store of it is left.
func (t *tail) unfollow(s *store) {
	topic, partition := s.key()
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.parts[partition]
	if f == nil || f.stores[topic] != s {
		return
	}
	delete(f.stores, topic)
	if len(f.stores) > 0 {
		return
	}
	delete(t.parts, partition)
	f.gone = true
	close(f.moved)
	t.cl.RemoveConsumePartitions(map[string][]int32{t.l.o.Topic: {partition}})
}

// close stops the tail and waits for its poll loop.
func (t *tail) close() {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	t.closed = true
	cl, cancel, done := t.cl, t.cancel, t.done
	for p, f := range t.parts {
		f.gone = true
		close(f.moved)
		delete(t.parts, p)
	}
	t.mu.Unlock()
	if cl == nil {
		return
	}
	cancel()
	<-done
	cl.Close()
}

// poll reads until ctx ends.
func (t *tail) poll(ctx context.Context, cl *kgo.Client) {
	defer close(t.done)
	var lastWarn time.Time
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		fs.EachError(func(topic string, p int32, err error) {
			// The client retries; a waiting write waits (and says so).
			if time.Since(lastWarn) > time.Minute {
				lastWarn = time.Now()
				t.l.log.Warn("ledger tail: fetch failed; retrying", zap.String("topic", topic), zap.Int32("partition", p), zap.Error(err))
			}
		})
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			if len(fp.Records) > 0 {
				t.deliver(fp.Partition, fp.Records)
			}
		})
	}
}

// deliver hands one partition's records, in offset order, to its stores
// and watches, and moves its read position past them.
func (t *tail) deliver(partition int32, recs []*kgo.Record) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.parts[partition]
	if f == nil {
		return // unfollowed meanwhile: a fetch already under way
	}
	for _, r := range recs {
		if r.Offset < f.pos {
			continue
		}
		f.pos = r.Offset + 1
		if !validKey(r.Key) {
			continue
		}
		// Entries past the window are left to the store, which forgets
		// them when it is read (Options.Now is the reader's clock). The
		// topic is looked at in place, not copied: the tail reads every
		// entry, the process's own included.
		topic, ok := valueTopicBytes(r.Value)
		if !ok {
			continue
		}
		own := bytes.Equal(writerOf(r), t.l.writer)
		if s := f.stores[string(topic)]; s != nil {
			// Every entry in log order, the process's own intents
			// included (Watch.Intend leaves them to this); its settled
			// entries were put when made, and are not copied again.
			s.putNew(t.l, r.Key, r.Value)
		}
		if own {
			continue
		}
		for _, w := range f.watches[string(r.Key)] {
			if w.topic == string(topic) {
				w.foreign = append(w.foreign, foreignEntry{offset: r.Offset, value: string(r.Value)})
			}
		}
	}
	for _, s := range f.stores {
		s.advance(f.pos)
	}
	close(f.moved)
	f.moved = make(chan struct{})
}

// watch registers w on its partition and key: every foreign entry read
// from now on reaches it. It returns the read position then, below which
// the store already holds what was read.
func (t *tail) watch(w *Watch) (int64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.parts[w.partition]
	if f == nil || f.stores[w.topic] == nil {
		return 0, errUnfollowed
	}
	f.watches[w.key] = append(f.watches[w.key], w)
	w.f = f
	return f.pos, nil
}

// unwatch removes w.
func (t *tail) unwatch(w *Watch) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if w.f == nil {
		return
	}
	ws := w.f.watches[w.key]
	for i, x := range ws {
		if x == w {
			ws = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) == 0 {
		delete(w.f.watches, w.key)
	} else {
		w.f.watches[w.key] = ws
	}
	w.f, w.foreign = nil, nil
}

// writerHeader names the record header that carries an entry's writer:
// WriterIDLen random bytes made once per Ledger. A header rather than a
// field of the value: the processes' stores keep values, and the writer is
// needed only while reading; and members of an older version read the
// values as before.
const writerHeader = "w"

// WriterIDLen is the size of a writer id: two processes drawing the same
// one would take each other's entries for their own.
const WriterIDLen = 8

// writerOf is r's writer id, or nil (an entry made before writers were
// recorded: foreign to everyone).
func writerOf(r *kgo.Record) []byte {
	for _, h := range r.Headers {
		if h.Key == writerHeader && len(h.Value) == WriterIDLen {
			return h.Value
		}
	}
	return nil
}

// advance records that the tail has read s's ledger partition up to next.
func (s *store) advance(next int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next = max(s.next, next)
}

// follow hands s, read up to next, to the tail, and reads what the tail
// had read of its partition before s was handed to it (the partition
// followed for another input topic's store already). It returns how far
// s has been read.
func (l *Ledger) follow(ctx context.Context, s *store, next int64) (int64, error) {
	pos, err := l.tail.follow(s, next)
	if err != nil || pos <= next {
		return next, err
	}
	_, more, _, err := l.read(ctx, s)
	return max(more, pos), err
}

// putNew keeps value as key's latest state, unless it is that already (no
// copy, no write to a disk store). The store is a copy of the topic: a
// value it fails to keep is read again from the topic by the next
// restore, so the failure is only logged.
func (s *store) putNew(l *Ledger, key, value []byte) {
	if same, err := s.b.holds(key, value); err == nil && same {
		return
	}
	if err := s.add([]kv{{string(key), string(value)}}, 0, false); err != nil {
		l.log.Warn("ledger store: an entry read by the tail not kept", zap.String("partition", s.topic()), zap.Error(err))
	}
}
