package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
)

func TestParseHorizon(t *testing.T) {
	for _, c := range []struct {
		meta     string
		want     int64
		released bool
		ok       bool
	}{
		{horizonMetadata(0), 0, false, true},
		{releasedMetadata(77), 77, true, true},
		{horizonPrefix + "77/releasedx", 0, false, false},
		{horizonMetadata(1234), 1234, false, true},
		{"", 0, false, false},
		{"member-1-abc", 0, false, false}, // franz-go's default metadata: the member ID
		{horizonPrefix, 0, false, false},
		{horizonPrefix + "-5", 0, false, false},
		{horizonPrefix + "12x", 0, false, false},
		{horizonPrefix + "+12", 0, false, false}, // another writer's spelling
		{horizonPrefix + "012" + releasedSuffix, 0, false, false},
		{releasedSuffix, 0, false, false},
	} {
		got, released, ok := parseHorizon(c.meta)
		if got != c.want || released != c.released || ok != c.ok {
			t.Errorf("parseHorizon(%q) = %d, %v, %v; want %d, %v, %v", c.meta, got, released, ok, c.want, c.released, c.ok)
		}
	}
}

// committedMeta returns the group's committed offset and its metadata for
// partition 0 of the input topic.
func (e *env) committedMeta(group string) (int64, string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := e.adm.FetchOffsets(ctx, group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return -1, ""
	}
	if err != nil {
		e.t.Fatal(err)
	}
	o, ok := resp.Lookup(inTopic, 0)
	if !ok || o.Err != nil {
		return -1, ""
	}
	return o.At, o.Metadata
}

// freshLog records which offsets a handler saw, and which of them Fresh.
type freshLog struct {
	mu    sync.Mutex
	seen  map[int64]int
	fresh map[int64]bool
}

func newFreshLog() *freshLog {
	return &freshLog{seen: map[int64]int{}, fresh: map[int64]bool{}}
}

func (l *freshLog) note(r *kgo.Record, m Meta) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen[r.Offset]++
	if m.Fresh {
		l.fresh[r.Offset] = true
	}
}

func (l *freshLog) counts() (seen, fresh int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.seen), len(l.fresh)
}

// TestHorizonCleanRun: a new group guards nothing; every commit carries a
// horizon at or past the commit point; a clean stop lowers the horizon to
// just past the last record dispatched, so a restart guards nothing either.
func TestHorizonCleanRun(t *testing.T) {
	e := newEnv(t, 1)
	const n = 300
	e.produce(n, strconv.Itoa, func(int) int32 { return 0 })
	log := newFreshLog()
	o := e.opts("g", echo(func(_ context.Context, r *kgo.Record, m Meta) error { log.note(r, m); return nil }))
	o.MaxInFlight, o.MaxBuffered = 8, 64 // a step of 16: many horizon moves
	r := start(t, o)
	e.waitCommittedToEnd("g")
	at, meta := e.committedMeta("g")
	if h, _, ok := parseHorizon(meta); !ok || h < at {
		t.Errorf("committed %d with metadata %q: want a horizon at or past it", at, meta)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if at, meta := e.committedMeta("g"); meta != releasedMetadata(n) || at != n {
		t.Errorf("after a clean stop: committed %d, metadata %q; want %d, %q", at, meta, n, releasedMetadata(n))
	}
	if seen, fresh := log.counts(); seen != n || fresh != 0 {
		t.Errorf("first run: handled %d of %d, %d fresh; want none fresh", seen, n, fresh)
	}

	e.produce(50, strconv.Itoa, func(int) int32 { return 0 })
	log2 := newFreshLog()
	o.Handler = echo(func(_ context.Context, r *kgo.Record, m Meta) error { log2.note(r, m); return nil })
	start(t, o)
	e.waitCommittedToEnd("g")
	if seen, fresh := log2.counts(); seen != 50 || fresh != 0 {
		t.Errorf("restart: handled %d of 50, %d fresh; want none fresh", seen, fresh)
	}
}

// TestHorizonAfterKill: a member dispatches about 2,000 records with
// nothing committed past the first (stuck) one, and dies. The next owner
// guards exactly the records between the committed offset and the horizon
// the dead one left, which covers everything it dispatched and at most a
// step more, and no record after.
func TestHorizonAfterKill(t *testing.T) {
	e := newEnv(t, 1, kfake.BrokerConfigs(map[string]string{"group.min.session.timeout.ms": "1000"}))
	const n, step, later = 2000, 50, 500
	e.produce(n, strconv.Itoa, func(int) int32 { return 0 })

	var handled atomic.Int32
	sw := &testkit.NetSwitch{}
	o := e.opts("g", echo(func(ctx context.Context, r *kgo.Record, _ Meta) error {
		if r.Offset == 0 { // holds the commit point at 0 until the kill
			<-ctx.Done()
			return ctx.Err()
		}
		handled.Add(1)
		return nil
	}))
	o.MaxInFlight, o.MaxBuffered, o.MaxBufferedPerPartition, o.HorizonStep = 64, 4096, 4096, step
	o.DrainTimeout = time.Second
	o.ClientOpts = append(o.ClientOpts, kgo.SessionTimeout(2*time.Second))
	first := o
	first.ClientOpts = append(append([]kgo.Opt(nil), o.ClientOpts...), kgo.Dialer(sw.Dial))
	r := start(t, first)
	testkit.Eventually(t, 30*time.Second, func() (bool, string) {
		return handled.Load() == n-1, fmt.Sprintf("handled %d of %d", handled.Load(), n-1)
	})
	at, meta := e.committedMeta("g")
	h, _, ok := parseHorizon(meta)
	if at != 0 || !ok || h < n || h > n+step {
		t.Fatalf("before the kill: committed %d, metadata %q; want 0 and a horizon in [%d, %d]", at, meta, n, n+step)
	}
	sw.Cut()
	_ = r.stop(t) // fails to commit or leave: the connections are gone

	e.produce(later, strconv.Itoa, func(int) int32 { return 0 })
	log := newFreshLog()
	o.Handler = echo(func(_ context.Context, r *kgo.Record, m Meta) error { log.note(r, m); return nil })
	start(t, o)
	e.waitCommittedToEnd("g")
	log.mu.Lock()
	defer log.mu.Unlock()
	for off := int64(0); off < n+later; off++ {
		if log.seen[off] == 0 {
			t.Fatalf("offset %d never handled by the next owner", off)
		}
		if want := off < h; log.fresh[off] != want {
			t.Errorf("offset %d: fresh %v, want %v (horizon %d)", off, log.fresh[off], want, h)
		}
	}
}

// TestHorizonLegacyCommit: a committed offset without a horizon (an older
// version, an offsets tool) gets the old guess: a partition buffer's worth
// of Fresh records.
func TestHorizonLegacyCommit(t *testing.T) {
	e := newEnv(t, 1)
	const n, from = 60, 10
	e.produce(n, strconv.Itoa, func(int) int32 { return 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: inTopic, Partition: 0, At: from, LeaderEpoch: -1, Metadata: "some-tool"})
	if _, err := e.adm.CommitOffsets(ctx, "g", offs); err != nil {
		t.Fatal(err)
	}
	log := newFreshLog()
	o := e.opts("g", echo(func(_ context.Context, r *kgo.Record, m Meta) error { log.note(r, m); return nil }))
	o.MaxInFlight, o.MaxBuffered = 2, 8 // MaxBufferedPerPartition 4
	start(t, o)
	e.waitCommittedToEnd("g")
	log.mu.Lock()
	defer log.mu.Unlock()
	for off := int64(from); off < n; off++ {
		if want := off < from+4; log.fresh[off] != want {
			t.Errorf("offset %d: fresh %v, want %v", off, log.fresh[off], want)
		}
	}
}

// TestHorizonBeforeDispatch: no record is dispatched before a horizon
// covering it is committed. While the broker refuses offset commits the
// records wait; once it accepts them they are processed.
func TestHorizonBeforeDispatch(t *testing.T) {
	e := newEnv(t, 1)
	const n = 20
	e.produce(n, strconv.Itoa, func(int) int32 { return 0 })
	var refuse atomic.Bool
	refuse.Store(true)
	var refused atomic.Int32
	e.c.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		e.c.KeepControl()
		if !refuse.Load() {
			return nil, nil, false
		}
		refused.Add(1)
		creq := req.(*kmsg.OffsetCommitRequest)
		resp := creq.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, rt := range creq.Topics {
			st := kmsg.NewOffsetCommitResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewOffsetCommitResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	var handled atomic.Int32
	o := e.opts("g", echo(func(context.Context, *kgo.Record, Meta) error { handled.Add(1); return nil }))
	start(t, o)
	testkit.Eventually(t, 30*time.Second, func() (bool, string) {
		return refused.Load() >= 3, fmt.Sprintf("%d commits refused", refused.Load())
	})
	if h := handled.Load(); h != 0 {
		t.Fatalf("%d records handled while no horizon could be committed", h)
	}
	refuse.Store(false)
	e.waitCommittedToEnd("g")
	if h := handled.Load(); h != n {
		t.Errorf("handled %d of %d", h, n)
	}
}

// TestHorizonInherited: a member that takes a partition with uncertain
// records (a crashed owner's horizon) and stops before finishing them
// hands the same uncertainty on: its final commit's horizon is never below
// the one it inherited, so the third owner still guards the records the
// first may have sent. The chaos suite against a partner without duplicate
// detection caught the horizon lowered to the second owner's last dispatch,
// and the third owner wrote again what the first had applied.
func TestHorizonInherited(t *testing.T) {
	e := newEnv(t, 1)
	const n, from, horizon, stuck = 100, 10, 60, 15
	e.produce(n, strconv.Itoa, func(int) int32 { return 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: inTopic, Partition: 0, At: from, LeaderEpoch: -1, Metadata: horizonMetadata(horizon)})
	if _, err := e.adm.CommitOffsets(ctx, "g", offs); err != nil {
		t.Fatal(err)
	}
	var handled atomic.Int32
	o := e.opts("g", echo(func(ctx context.Context, r *kgo.Record, _ Meta) error {
		if r.Offset >= stuck { // the second owner stops after a few records
			<-ctx.Done()
			return ctx.Err()
		}
		handled.Add(1)
		return nil
	}))
	o.DrainTimeout, o.MaxInFlight = 200*time.Millisecond, 2 // dispatches 15 and 16, below the inherited horizon
	r := start(t, o)
	testkit.Eventually(t, 30*time.Second, func() (bool, string) {
		return handled.Load() == stuck-from, fmt.Sprintf("handled %d of %d", handled.Load(), stuck-from)
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	at, meta := e.committedMeta("g")
	if h, released, ok := parseHorizon(meta); at != stuck || !ok || h < horizon || released {
		t.Fatalf("after the second owner: committed %d, metadata %q; want %d, a horizon of at least %d, not released (handlers were cut off)",
			at, meta, stuck, horizon)
	}

	log := newFreshLog()
	o.Handler = echo(func(_ context.Context, r *kgo.Record, m Meta) error { log.note(r, m); return nil })
	start(t, o)
	e.waitCommittedToEnd("g")
	log.mu.Lock()
	defer log.mu.Unlock()
	for off := int64(stuck); off < n; off++ {
		if want := off < horizon; log.fresh[off] != want {
			t.Errorf("third owner, offset %d: fresh %v, want %v", off, log.fresh[off], want)
		}
	}
}

// TestTakeoverWait: the guarded records of a partition whose previous
// owner did not release it wait TakeoverWait from the assignment (its last
// partner calls may still be landing); those of a partition released
// cleanly do not wait.
func TestTakeoverWait(t *testing.T) {
	e := newEnv(t, 2)
	const n, from, horizon = 40, 5, 30
	e.produce(n, strconv.Itoa, func(i int) int32 { return int32(i % 2) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: inTopic, Partition: 0, At: from, LeaderEpoch: -1, Metadata: horizonMetadata(horizon)})  // a crash
	offs.Add(kadm.Offset{Topic: inTopic, Partition: 1, At: from, LeaderEpoch: -1, Metadata: releasedMetadata(horizon)}) // a clean release
	if _, err := e.adm.CommitOffsets(ctx, "g", offs); err != nil {
		t.Fatal(err)
	}
	var handled [2]atomic.Int32
	o := e.opts("g", echo(func(_ context.Context, r *kgo.Record, m Meta) error {
		if m.Fresh != (r.Offset < horizon) {
			t.Errorf("partition %d offset %d: fresh %v", r.Partition, r.Offset, m.Fresh)
		}
		handled[r.Partition].Add(1)
		return nil
	}))
	o.TakeoverWait = time.Hour // longer than the test
	start(t, o)
	testkit.Eventually(t, 30*time.Second, func() (bool, string) {
		return handled[1].Load() == n/2-from, fmt.Sprintf("released partition: handled %d of %d", handled[1].Load(), n/2-from)
	})
	if h := handled[0].Load(); h != 0 {
		t.Errorf("partition taken over from a crash: %d records handled before TakeoverWait passed", h)
	}
}

// TestTakeoverWaitHandedOn: a member that takes a partition over from a
// crash and releases it before its takeover wait is over does not mark it
// released: the crashed owner's last calls may still be landing, and the
// next owner waits in turn.
func TestTakeoverWaitHandedOn(t *testing.T) {
	e := newEnv(t, 1)
	const n, from, horizon = 20, 5, 30
	e.produce(n, strconv.Itoa, func(int) int32 { return 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: inTopic, Partition: 0, At: from, LeaderEpoch: -1, Metadata: horizonMetadata(horizon)}) // a crash
	if _, err := e.adm.CommitOffsets(ctx, "g", offs); err != nil {
		t.Fatal(err)
	}
	var handled atomic.Int32
	o := e.opts("g", echo(func(context.Context, *kgo.Record, Meta) error { handled.Add(1); return nil }))
	o.TakeoverWait = time.Hour
	r := start(t, o)
	testkit.Eventually(t, 30*time.Second, func() (bool, string) {
		_, meta := e.committedMeta("g")
		return meta != horizonMetadata(horizon), "the member has not committed its own horizon yet"
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	at, meta := e.committedMeta("g")
	if h, released, ok := parseHorizon(meta); at != from || !ok || h < horizon || released || handled.Load() != 0 {
		t.Errorf("handed on within its takeover wait: committed %d, metadata %q, %d handled; want %d, a horizon of at least %d, not released, none handled",
			at, meta, handled.Load(), from, horizon)
	}
}
