package ledger

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// DefaultWindow is the default dedup window: how long an entry is kept,
// and so how far apart two copies of one event may arrive and still be
// recognised. A day covers an upstream producer's retries and a
// redelivery after a day's outage, and the `offsets reset --to-time`
// spans operators use (hours); the memory it costs is measured in
// docs/guarantees.md (The transaction ledger).
const DefaultWindow = 24 * time.Hour

// DefaultSkew is how much an input record's timestamp may be ahead of the
// clock of the process that reads it. Entries are kept for the window from
// when they were written, which is after their record's timestamp, so a
// record younger than the window minus this has its entries kept.
const DefaultSkew = 5 * time.Minute

// Options configures New. Client and Topic are required.
type Options struct {
	// Client writes intents (acks=all; not transactional: an intent must
	// be durable before its write is sent, whatever becomes of the
	// transaction around the record) and answers offset queries. It must
	// partition the ledger topic by Record.Partition
	// (kgo.RecordPartitioner(ledger.Partitioner(topic)) or
	// kgo.ManualPartitioner()).
	Client *kgo.Client
	// ReaderOpts build the client that reads a partition back on
	// assignment (brokers, TLS, SASL); the ledger adds what it consumes.
	ReaderOpts []kgo.Opt
	// Topic is the ledger topic.
	Topic string
	// Window is how long entries are kept (DefaultWindow).
	Window time.Duration
	// Dir, when set, keeps the entries on disk (Pebble) under this
	// directory, with a checkpoint of how far each partition was read, so
	// that a partition assigned again (after a restart, a rebalance or
	// Forget) reads only what was written since. Empty: in memory, read
	// from the log start on the process's first assignment of each
	// partition.
	Dir string
	// CacheSize is the disk store's block cache in bytes, shared by its
	// partitions (DefaultCacheSize); MemTableSize the size of each of its
	// memtables (DefaultMemTableSize). Unused without Dir.
	CacheSize    int64
	MemTableSize int64
	// Logger (nil: none) and Now (nil: time.Now).
	Logger *zap.Logger
	Now    func() time.Time
}

// Ledger reads and writes the ledger topic for one process. Safe for
// concurrent use.
type Ledger struct {
	o   Options
	log *zap.Logger
	w   *writer // intents' produce path (writer.go)

	mu     sync.Mutex
	stores map[storeKey]*store
	disk   *disk // nil: the entries are kept in memory
	// newClient serialises building readers: kgo.NewClient rewrites
	// slices inside the options it is given (the compression codecs), so
	// two restores building clients from ReaderOpts at once race.
	newClient sync.Mutex
	// writer is this Ledger's writer id (WriterIDLen random bytes), in a
	// header of every entry it makes; tail reads on after restores
	// (tail.go, order.go).
	writer []byte
	// headers are every entry's headers (the writer's): shared by all of
	// them, read-only (capacity 1, so an append copies).
	headers []kgo.RecordHeader
	tail    tail
}

type storeKey struct {
	topic     string
	partition int32
}

// New checks o.
func New(o Options) (*Ledger, error) {
	var errs []error
	if o.Client == nil {
		errs = append(errs, errors.New("option Client is required"))
	}
	if o.Topic == "" {
		errs = append(errs, errors.New("option Topic is required"))
	}
	if o.Window < 0 {
		errs = append(errs, fmt.Errorf("Window %s: must not be negative", o.Window))
	}
	if o.CacheSize < 0 || o.MemTableSize < 0 {
		errs = append(errs, fmt.Errorf("CacheSize %d, MemTableSize %d: must not be negative", o.CacheSize, o.MemTableSize))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("ledger: %w", errors.Join(errs...))
	}
	if o.Window == 0 {
		o.Window = DefaultWindow
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.CacheSize == 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.MemTableSize == 0 {
		o.MemTableSize = DefaultMemTableSize
	}
	writer := make([]byte, WriterIDLen)
	_, _ = rand.Read(writer) // never fails (crypto/rand)
	l := &Ledger{o: o, log: o.Logger.Named("ledger"), w: newWriter(o.Client), stores: map[storeKey]*store{}, writer: writer}
	l.headers = []kgo.RecordHeader{{Key: writerHeader, Value: writer}}
	l.tail.l = l
	if o.Dir != "" {
		var err error
		if l.disk, err = openDisk(o, l.log); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// Close stops the goroutine that produces intents (started by the first
// Intend) and the tail that follows the partitions read, and waits for
// them, so that an Intend or a Watch after Close fails, and closes the
// disk store (Options.Dir), keeping what it holds for the next process.
// Call it once every Lookup, Intend and Settle has returned (the pipeline
// has stopped). It does not close Options.Client, the caller's.
func (l *Ledger) Close() error {
	l.tail.close()
	l.w.close()
	if l.disk == nil {
		return nil
	}
	return l.disk.close()
}

// Topic is the ledger topic's name.
func (l *Ledger) Topic() string { return l.o.Topic }

// Window is how long entries are kept.
func (l *Ledger) Window() time.Duration { return l.o.Window }

// Lookup returns the entry of kind and transactionId for the input record
// rec, or nil when the ledger has none. assignment names the assignment
// of rec's partition the caller works under (pipeline.Meta.Assignment): the
// first Lookup under a new one reads what other processes wrote to the
// partition since this process last read it, and every Lookup of the
// partition waits for that. It fails only when ctx ends or the topic
// cannot be read for a reason retrying does not cure.
func (l *Ledger) Lookup(ctx context.Context, rec *kgo.Record, assignment uint64, kind Kind, transactionID string) (*Entry, error) {
	s := l.store(rec.Topic, rec.Partition)
	if err := l.restore(ctx, s, assignment); err != nil {
		return nil, err
	}
	e, err := s.get(Key(kind, transactionID), l.o.Now().Add(-l.o.Window), l.o.Window)
	if err != nil {
		return nil, fmt.Errorf("ledger: lookup %s in %s: %w", Key(kind, transactionID), s.topic(), err)
	}
	return e, nil
}

// Intend records that a write of e's transaction is about to be sent, and
// returns once Kafka has acknowledged it: a write is sent only after its
// intent is durable. e.Kind, TransactionID and ClawbackID (a refund's
// slot) are the caller's; the rest is filled in from rec.
func (l *Ledger) Intend(ctx context.Context, rec *kgo.Record, e Entry) error {
	_, _, err := l.intend(ctx, rec, e, true)
	return err
}

// intend is Intend, returning the intent's ledger offset and At. keep puts
// the intent in the store now; without it, the tail puts it once read
// back, in log order.
func (l *Ledger) intend(ctx context.Context, rec *kgo.Record, e Entry, keep bool) (int64, time.Time, error) {
	e.State, e.At = Intent, l.o.Now()
	r, err := l.record(rec, &e)
	if err != nil {
		return 0, e.At, err
	}
	offset, err := l.w.write(ctx, r)
	if err != nil {
		return 0, e.At, fmt.Errorf("ledger: intent of %s: %w", Key(e.Kind, e.TransactionID), err)
	}
	if keep {
		if err := l.store(rec.Topic, rec.Partition).add([]kv{{string(r.Key), string(r.Value)}}, 0, false); err != nil {
			return offset, e.At, fmt.Errorf("ledger: intent of %s: keep: %w", Key(e.Kind, e.TransactionID), err)
		}
	}
	return offset, e.At, nil
}

// Settle records e's result and returns the ledger record that carries it,
// for the caller to produce with the record's outputs (in exactly-once
// mode, in the same transaction). Until that record is acknowledged, a
// restart finds the intent, and guards.
func (l *Ledger) Settle(rec *kgo.Record, e Entry) (*kgo.Record, error) {
	e.State, e.At = Settled, l.o.Now()
	r, err := l.record(rec, &e)
	if err != nil {
		return nil, err
	}
	if err := l.store(rec.Topic, rec.Partition).add([]kv{{string(r.Key), string(r.Value)}}, 0, false); err != nil {
		return nil, fmt.Errorf("ledger: settled %s: keep: %w", Key(e.Kind, e.TransactionID), err)
	}
	return r, nil
}

// WriteSettled writes settled entries (records Settle returned) outside
// any transaction, through Options.Client, and returns once Kafka has
// acknowledged them all, or ctx ended (they may still land). It is for an
// exactly-once round that aborts after its writes were answered: the
// transaction that would have carried the entries does not commit, and
// without them the records, run again (here or by the partition's next
// owner, which reads the ledger read_committed when the partition is
// assigned), would find only their intents and wait for those writes to
// settle. An entry is true whatever became of the round: it records a
// partner answer. An entry of another topic is refused, and nothing is
// written.
func (l *Ledger) WriteSettled(ctx context.Context, rs []*kgo.Record) error {
	for _, r := range rs {
		if r.Topic != l.o.Topic {
			return fmt.Errorf("ledger: a settled entry for topic %q, not the ledger topic %q", r.Topic, l.o.Topic)
		}
	}
	// Not ProduceSync: a record already sent waits for its answer
	// whatever ctx says, and a member cut off from Kafka would wait for
	// ever (the chaos suite's killed members did). An entry that lands
	// after ctx ended is as true as one before.
	results := make(chan error, len(rs))
	for _, r := range rs {
		l.o.Client.Produce(ctx, r, func(_ *kgo.Record, err error) { results <- err })
	}
	for range rs {
		select {
		case err := <-results:
			if err != nil {
				return fmt.Errorf("ledger: write %d settled entries: %w", len(rs), err)
			}
		case <-ctx.Done():
			return fmt.Errorf("ledger: write %d settled entries: %w", len(rs), ctx.Err())
		}
	}
	return nil
}

func (l *Ledger) record(rec *kgo.Record, e *Entry) (*kgo.Record, error) {
	e.Topic, e.Partition, e.Offset = rec.Topic, rec.Partition, rec.Offset
	v, err := e.encode()
	if err != nil {
		return nil, err
	}
	// The record's timestamp is the producer's clock, not Options.Now:
	// Kafka refuses records stamped over an hour ahead
	// (message.timestamp.after.max.ms), and retention counts from it.
	key := make([]byte, 0, 2+len(e.TransactionID)) // Key's bytes, built once
	key = append(append(key, byte(e.Kind), '/'), e.TransactionID...)
	return &kgo.Record{Topic: l.o.Topic, Partition: rec.Partition, Key: key, Value: v, Headers: l.headers[:1:1]}, nil
}

// RolloutMargin is how long after a partition's first entry its ledger is
// taken to speak for every member: a rolling deploy that turns the ledger
// on is over by then, so no member without it sends the partition's
// records any more.
const RolloutMargin = time.Hour

// Covers reports whether the ledger's silence about rec's transactions
// means they were never sent: rec's partition was read (Lookup) and has
// entries since before rec was produced, by RolloutMargin, so every
// member that may have sent rec wrote its intents; and rec is younger
// than the window less DefaultSkew, so none of them has been deleted.
// When it does not, no entry means nothing either way.
func (l *Ledger) Covers(rec *kgo.Record) bool {
	if l.o.Now().Sub(rec.Timestamp) >= l.o.Window-DefaultSkew {
		return false
	}
	s := l.store(rec.Topic, rec.Partition)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restored && s.firstAt != 0 && rec.Timestamp.UnixMilli() > s.firstAt+RolloutMargin.Milliseconds()
}

func (l *Ledger) store(topic string, partition int32) *store {
	k := storeKey{topic, partition}
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.stores[k]
	if s == nil {
		s = &store{name: k}
		if l.disk != nil {
			s.b = l.disk.partition(topic, partition)
		} else {
			s.b = newMemory()
		}
		l.stores[k] = s
	}
	return s
}

// Forget drops what the process keeps in memory of an input partition (it
// was revoked or lost), so that memory holds the windows of the
// partitions the process owns, not of every one it ever did. A later
// Lookup reads the partition again: in memory from the start; on disk,
// whose entries and checkpoint stay, from the checkpoint.
func (l *Ledger) Forget(topic string, partition int32) {
	l.mu.Lock()
	s := l.stores[storeKey{topic, partition}]
	delete(l.stores, storeKey{topic, partition})
	l.mu.Unlock()
	if s != nil {
		l.tail.unfollow(s)
	}
}

// Size is the number of entries kept for an input partition (on disk: a
// scan of them; 0 when the store cannot be read).
func (l *Ledger) Size(topic string, partition int32) int {
	n, err := l.store(topic, partition).b.size()
	if err != nil {
		l.log.Warn("ledger: size", zap.String("partition", topic+"/"+strconv.Itoa(int(partition))), zap.Error(err))
	}
	return n
}

// restore brings s up to the topic's end once per assignment.
func (l *Ledger) restore(ctx context.Context, s *store, assignment uint64) error {
	for {
		s.mu.Lock()
		if s.restored && s.assignment == assignment {
			s.mu.Unlock()
			return nil
		}
		if s.running != nil {
			wait := s.running
			s.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		done := make(chan struct{})
		s.running = done
		s.mu.Unlock()

		from, next, n, err := l.read(ctx, s)
		if err == nil {
			next, err = l.follow(ctx, s, next)
		}
		s.mu.Lock()
		s.running = nil
		if err == nil {
			s.restored, s.assignment = true, assignment
		}
		s.mu.Unlock()
		close(done)
		if err != nil {
			return err
		}
		l.log.Debug("ledger partition read", zap.String("topic", s.topic()), zap.Int64("from", from), zap.Int64("to", next), zap.Int("records", n))
	}
}

// load sets s's position from its backend's checkpoint, the first time:
// a disk store's partition continues where it stopped; one whose
// checkpoint does not read is wiped and read again from the start.
func (l *Ledger) load(s *store) error {
	s.mu.Lock()
	loaded := s.loaded
	s.mu.Unlock()
	if loaded {
		return nil
	}
	cp, err := s.b.saved()
	if errors.Is(err, errBadCheckpoint) {
		l.log.Warn("ledger store: checkpoint unreadable, partition wiped and read again from the topic", zap.String("partition", s.topic()))
		cp, err = checkpoint{}, s.b.wipe()
	}
	if err != nil {
		return fmt.Errorf("ledger: %s: checkpoint: %w", s.topic(), err)
	}
	s.mu.Lock()
	s.loaded, s.next, s.firstAt, s.topicID = true, cp.next, cp.firstAt, cp.topicID
	s.mu.Unlock()
	return nil
}

// wipe drops s's entries and position: what it holds is not of the topic
// there now.
func (l *Ledger) wipe(s *store, why string, fields ...zap.Field) error {
	l.log.Warn("ledger store: partition wiped, read again from the topic: "+why, append(fields, zap.String("partition", s.topic()))...)
	if err := s.b.wipe(); err != nil {
		return fmt.Errorf("ledger: %s: wipe: %w", s.topic(), err)
	}
	s.mu.Lock()
	s.next, s.firstAt = 0, 0
	s.mu.Unlock()
	return nil
}

// read reads the ledger partition of s's input partition from where s
// stopped to the end it has when read starts, adding the entries of s's
// topic, each fetch's with the checkpoint past them. The end is the high
// watermark, read with read_committed: an open transaction (an
// exactly-once member's round) is waited for, so an intent written after
// it is not missed. from is where it started, next where it stopped,
// records how many it read.
func (l *Ledger) read(ctx context.Context, s *store) (from, next int64, records int, err error) {
	topic, partition := s.key()
	if err := l.load(s); err != nil {
		return 0, 0, 0, err
	}
	start, end, id, err := l.bounds(ctx, partition)
	if err != nil {
		return 0, 0, 0, err
	}
	s.mu.Lock()
	from, had := s.next, s.topicID
	s.mu.Unlock()
	switch {
	case had != ([16]byte{}) && id != ([16]byte{}) && had != id:
		// Deleted and created again: the entries kept are the old
		// topic's, and its offsets mean nothing in the new one.
		if err := l.wipe(s, "the ledger topic was created again", zap.Stringer("was", kadm.TopicID(had)), zap.Stringer("is", kadm.TopicID(id))); err != nil {
			return 0, 0, 0, err
		}
		from = 0
	case from > end:
		// Past the end: the topic is not the one read (created again by
		// a broker without topic ids, or its records deleted).
		if err := l.wipe(s, "its checkpoint is past the partition's end", zap.Int64("checkpoint", from), zap.Int64("end", end)); err != nil {
			return 0, 0, 0, err
		}
		from = 0
	}
	s.mu.Lock()
	s.topicID = id
	s.mu.Unlock()
	if from < start {
		// Deleted by retention: nothing to read below the log start
		// (and a partition wholly deleted has nothing at all); what was
		// deleted was past the window.
		from = start
	}
	if from >= end {
		s.mu.Lock()
		s.next = max(s.next, from)
		s.mu.Unlock()
		return from, from, 0, nil
	}
	opts := append([]kgo.Opt{
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{l.o.Topic: {partition: kgo.NewOffset().At(from)}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// The markers that end transactions, as records: a partition
		// ending in one (exactly-once mode's settled entries) would
		// otherwise never show its last offset, and the read would wait
		// for a record after it — every member restoring would wait for
		// the others, and nobody would write. Aborted records are still
		// left out; the marker after them is not.
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(100 * time.Millisecond),
		// A restore reads one partition as fast as it can: large fetches
		// (the defaults, 1 MiB a partition, take a round trip per 5,000
		// entries).
		kgo.FetchMaxPartitionBytes(16 << 20),
		kgo.FetchMaxBytes(32 << 20),
	}, l.o.ReaderOpts...)
	l.newClient.Lock()
	cl, err := kgo.NewClient(opts...)
	l.newClient.Unlock()
	if err != nil {
		return from, from, 0, fmt.Errorf("ledger: read %s/%d: %w", l.o.Topic, partition, err)
	}
	defer cl.Close()
	next = from
	since := l.o.Now().Add(-l.o.Window).UnixMilli()
	var batch []kv
	for next < end {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return from, next, records, err
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, e error) { ferr = e })
		if ferr != nil {
			return from, next, records, fmt.Errorf("ledger: read %s/%d: %w", l.o.Topic, partition, ferr)
		}
		batch = batch[:0]
		at := next
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			for _, r := range fp.Records {
				next = r.Offset + 1
				records++
				// A transaction marker, another input topic's entry, one
				// past the window, or not ours to read (a newer
				// version's): skipped.
				if r.Attrs.IsControl() {
					continue
				}
				if !validKey(r.Key) || !valueOf(r.Value, topic, since) {
					continue
				}
				batch = append(batch, kv{string(r.Key), string(r.Value)})
			}
		})
		if next == at {
			continue
		}
		// The entries and the checkpoint past them go in at once: a
		// checkpoint never runs ahead of what the store holds.
		if err := s.add(batch, next, true); err != nil {
			return from, at, records, fmt.Errorf("ledger: %s: keep: %w", s.topic(), err)
		}
		s.mu.Lock()
		s.next = next
		s.mu.Unlock()
	}
	return from, next, records, nil
}

// bounds are the ledger partition's log start and high watermark, and the
// ledger topic's id (zero when the brokers have none).
func (l *Ledger) bounds(ctx context.Context, partition int32) (start, end int64, id [16]byte, err error) {
	adm := kadm.NewClient(l.o.Client)
	td, err := adm.ListTopics(ctx, l.o.Topic)
	if err == nil {
		err = td.Error()
	}
	if err != nil {
		return 0, 0, id, fmt.Errorf("ledger: metadata of %s: %w", l.o.Topic, err)
	}
	id = td[l.o.Topic].ID
	lookup := func(what string, list func(context.Context, ...string) (kadm.ListedOffsets, error)) (int64, error) {
		offs, err := list(ctx, l.o.Topic)
		if err != nil {
			return 0, fmt.Errorf("ledger: %s of %s/%d: %w", what, l.o.Topic, partition, err)
		}
		o, ok := offs.Lookup(l.o.Topic, partition)
		if !ok {
			return 0, fmt.Errorf("ledger: %s of %s/%d: no such partition (the ledger topic needs at least as many partitions as every input topic)", what, l.o.Topic, partition)
		}
		if o.Err != nil {
			return 0, fmt.Errorf("ledger: %s of %s/%d: %w", what, l.o.Topic, partition, o.Err)
		}
		return o.Offset, nil
	}
	if end, err = lookup("end", adm.ListEndOffsets); err != nil {
		return 0, 0, id, err
	}
	start, err = lookup("start", adm.ListStartOffsets)
	return start, end, id, err
}
