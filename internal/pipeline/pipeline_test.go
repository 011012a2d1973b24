package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/ordering"
	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
)

func TestNewValidatesEverything(t *testing.T) {
	_, err := New(Options{MaxInFlight: -1, Topics: []string{""}, DrainTimeout: -time.Second})
	if err == nil {
		t.Fatal("New accepted empty options")
	}
	for _, want := range []string{"no brokers", "no consumer group", "empty topic name", "no handler",
		"MaxInFlight must not be negative", "DrainTimeout must not be negative"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	_, err = New(Options{Brokers: []string{"x"}, Group: "g", Topics: []string{"t"}, Handler: echo(nil),
		MaxInFlight: 4, MaxInFlightPerPartition: 8, MaxBuffered: 2})
	for _, want := range []string{"MaxInFlightPerPartition 8 exceeds MaxInFlight 4", "MaxBuffered 2 is below MaxInFlight 4"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not mention %q", err, want)
		}
	}
	p, err := New(Options{Brokers: []string{"x"}, Group: "g", Topics: []string{"t"}, Handler: echo(nil)})
	if err != nil {
		t.Fatal(err)
	}
	o := p.o
	if o.Mode != ordering.Key || o.MaxInFlight != 256 || o.MaxInFlightPerPartition != 256 || o.MaxBuffered != 1024 ||
		o.MaxBufferedPerPartition != 512 || o.HorizonStep != 256 || o.Linger != 2*time.Millisecond ||
		o.CommitInterval != time.Second || o.DrainTimeout != 10*time.Second {
		t.Errorf("defaults: %+v", o)
	}
}

// TestEveryRecordOnceInOrder: every input gets exactly its output, the
// group's commits reach the end offsets, records of one key run one at a
// time in offset order, and the modes give the concurrency they promise.
func TestEveryRecordOnceInOrder(t *testing.T) {
	for _, mode := range []ordering.Mode{ordering.Key, ordering.Partition, ordering.Unordered} {
		t.Run(mode.String(), func(t *testing.T) {
			e := newEnv(t, 3)
			const n = 3000
			e.produce(n, func(i int) string { return fmt.Sprintf("k%d", i%37) }, func(i int) int32 { return int32(i % 3) })
			c := newCounter()
			// Offsets 0 and 1 of partition 0 have different keys: in key
			// and unordered mode each waits until the other has started.
			overlap := make(chan struct{})
			var arrived atomic.Int32
			h := echo(func(ctx context.Context, rec *kgo.Record, _ Meta) error {
				key := fmt.Sprintf("key/%d/%s", rec.Partition, rec.Key)
				part := fmt.Sprintf("part/%d", rec.Partition)
				c.enter(rec.Offset, key, part)
				defer c.leave(key, part)
				if mode != ordering.Partition && rec.Partition == 0 && rec.Offset <= 1 {
					if arrived.Add(1) == 2 {
						close(overlap)
					}
					select {
					case <-overlap:
					case <-time.After(10 * time.Second):
						t.Errorf("offsets 0 and 1 of partition 0 did not run concurrently")
					}
				}
				return nil
			})
			o := e.opts("g", h)
			o.Mode = mode
			o.MaxInFlight = 32
			o.MaxInFlightPerPartition = 16
			r := start(t, o)
			e.checkOutputs(e.outputs(outTopic, n), true)
			e.waitCommittedToEnd("g")
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}

			c.mu.Lock()
			defer c.mu.Unlock()
			for name, starts := range c.starts {
				isKey := strings.HasPrefix(name, "key/")
				if isKey && mode != ordering.Unordered {
					if c.max[name] != 1 {
						t.Errorf("%s ran %d at once", name, c.max[name])
					}
					if !slices.IsSorted(starts) {
						t.Errorf("%s started out of offset order", name)
					}
				}
				if !isKey {
					switch {
					case mode == ordering.Partition && c.max[name] != 1:
						t.Errorf("partition mode: %s ran %d at once", name, c.max[name])
					case mode == ordering.Partition && !slices.IsSorted(starts):
						t.Errorf("partition mode: %s started out of offset order", name)
					case mode != ordering.Partition && name == "part/0" && c.max[name] < 2:
						t.Errorf("%s mode: %s never ran records concurrently", mode, name)
					}
					if c.max[name] > 16 {
						t.Errorf("%s ran %d at once, above MaxInFlightPerPartition 16", name, c.max[name])
					}
				}
			}
		})
	}
}

// TestBlockedRecordHoldsCommit: a handler stuck on one offset holds that
// partition's commit point just below it while later offsets finish, pauses
// only that partition once its buffer is full, and everything completes once
// it is released.
func TestBlockedRecordHoldsCommit(t *testing.T) {
	e := newEnv(t, 2)
	const n, blocked = 400, 10
	e.produce(n, strconv.Itoa, func(i int) int32 { return int32(i % 2) })
	release := make(chan struct{})
	rec := newRecorder()
	o := e.opts("g", echo(func(ctx context.Context, r *kgo.Record, _ Meta) error {
		if r.Partition == 0 && r.Offset == blocked {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}))
	o.Observer = rec
	o.MaxInFlight = 16
	o.MaxInFlightPerPartition = 8
	o.MaxBuffered = 64
	o.MaxBufferedPerPartition = 32
	start(t, o)

	testkit.Eventually(t, 30*time.Second, func() (bool, string) {
		got := e.committed("g")
		return got[0] == blocked && got[1] == n/2, fmt.Sprintf("committed %v", got)
	})
	rec.mu.Lock()
	paused, maxBuffered := rec.paused, rec.maxBuffered
	rec.mu.Unlock()
	if paused == 0 {
		t.Error("partition 0 was never paused while its buffer was full")
	}
	if maxBuffered > 64 {
		t.Errorf("buffered %d records, above MaxBuffered 64", maxBuffered)
	}
	if done := rec.doneCount(Processed); done >= n-1 {
		t.Errorf("%d records done while partition 0 was blocked; its buffer should have stopped it", done)
	}
	close(release)
	e.checkOutputs(e.outputs(outTopic, n), true)
	e.waitCommittedToEnd("g")
}

// TestInFlightLimits: the global and per-partition limits on handler calls
// hold; records whose outputs are not yet acknowledged stay within
// MaxBuffered.
func TestInFlightLimits(t *testing.T) {
	e := newEnv(t, 4)
	const n = 1000
	e.produce(n, strconv.Itoa, func(i int) int32 { return int32(i % 4) })
	c := newCounter()
	rec := newRecorder()
	o := e.opts("g", echo(func(_ context.Context, r *kgo.Record, _ Meta) error {
		part := fmt.Sprintf("part/%d", r.Partition)
		c.enter(r.Offset, "all", part)
		defer c.leave("all", part)
		time.Sleep(100 * time.Microsecond) // work, so that records overlap
		return nil
	}))
	o.Observer = rec
	o.MaxInFlight = 6
	o.MaxInFlightPerPartition = 2
	r := start(t, o)
	e.checkOutputs(e.outputs(outTopic, n), true)
	e.waitCommittedToEnd("g")
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.max["all"] > 6 {
		t.Errorf("max handlers %d; limit 6", c.max["all"])
	}
	if limit := 4 * 6; rec.maxInFlight > limit {
		t.Errorf("max in flight (handling or unacknowledged) %d; MaxBuffered %d", rec.maxInFlight, limit)
	}
	if rec.maxInFlight < 2 {
		t.Errorf("max in flight %d: records never overlapped", rec.maxInFlight)
	}
	for p := range 4 {
		if m := c.max[fmt.Sprintf("part/%d", p)]; m > 2 {
			t.Errorf("partition %d ran %d at once; limit 2", p, m)
		}
	}
}

// gate is a Gate closed until open is closed.
type gate struct {
	open  chan struct{}
	waits atomic.Int32
}

func (g *gate) Ready(ctx context.Context) error {
	select {
	case <-g.open:
		return nil
	default:
	}
	g.waits.Add(1)
	select {
	case <-g.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestGateHoldsRecords: while the gate blocks nothing is dispatched and the
// buffer stays bounded; once it opens everything completes.
func TestGateHoldsRecords(t *testing.T) {
	e := newEnv(t, 2)
	const n = 500
	e.produce(n, strconv.Itoa, func(i int) int32 { return int32(i % 2) })
	c := newCounter()
	rec := newRecorder()
	g := &gate{open: make(chan struct{})}
	o := e.opts("g", echo(func(_ context.Context, r *kgo.Record, _ Meta) error {
		c.enter(r.Offset, "all")
		c.leave("all")
		return nil
	}))
	o.Observer = rec
	o.Gate = g
	o.MaxInFlight = 8
	o.MaxBuffered = 40
	start(t, o)
	testkit.Eventually(t, 30*time.Second, func() (bool, string) {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return rec.buffered == 40 && g.waits.Load() > 0, fmt.Sprintf("buffered %d, gate waits %d", rec.buffered, g.waits.Load())
	})
	if got := c.count(); got != 0 {
		t.Fatalf("%d records dispatched through a closed gate", got)
	}
	rec.mu.Lock()
	if rec.maxBuffered > 40 {
		t.Errorf("buffered %d records behind the gate; MaxBuffered 40", rec.maxBuffered)
	}
	rec.mu.Unlock()
	close(g.open)
	e.checkOutputs(e.outputs(outTopic, n), true)
	e.waitCommittedToEnd("g")
}

func TestFallback(t *testing.T) {
	e := newEnv(t, 2)
	const n = 400
	e.produce(n, strconv.Itoa, func(i int) int32 { return int32(i % 2) })
	rec := newRecorder()
	var mu sync.Mutex
	causes := map[string]error{}
	o := e.opts("g", echo(func(_ context.Context, r *kgo.Record, _ Meta) error {
		switch r.Offset % 10 {
		case 3:
			return errTest
		case 7:
			panic("boom")
		}
		return nil
	}))
	o.Observer = rec
	o.Fallback = func(r *kgo.Record, cause error) ([]*kgo.Record, error) {
		mu.Lock()
		causes[coord(r)] = cause
		mu.Unlock()
		return []*kgo.Record{{Topic: errTopic, Value: []byte(coord(r))}}, nil
	}
	start(t, o)
	e.waitCommittedToEnd("g")
	outs := e.outputs(outTopic, n*8/10)
	errs := e.outputs(errTopic, n*2/10)
	for c, k := range errs {
		outs[c] += k
	}
	e.checkOutputs(outs, true)
	mu.Lock()
	defer mu.Unlock()
	for c, cause := range causes {
		off, _ := strconv.Atoi(c[strings.LastIndex(c, "/")+1:])
		switch off % 10 {
		case 3:
			if !errors.Is(cause, errTest) {
				t.Errorf("%s: cause %v", c, cause)
			}
		case 7:
			if !strings.Contains(fmt.Sprint(cause), "panic: boom") {
				t.Errorf("%s: cause %v", c, cause)
			}
		default:
			t.Errorf("%s went to the fallback: %v", c, cause)
		}
	}
	if fb := rec.doneCount(FellBack); fb != n*2/10 {
		t.Errorf("%d records fell back, want %d", fb, n*2/10)
	}
}

// TestProduceFailureFallsBack: an output that cannot be produced goes to
// the fallback with ErrProduce.
func TestProduceFailureFallsBack(t *testing.T) {
	e := newEnv(t, 1)
	const n, bad = 20, 5
	e.produce(n, strconv.Itoa, func(int) int32 { return 0 })
	var cause atomic.Pointer[error]
	o := e.opts("g", func(_ context.Context, r *kgo.Record, _ Meta) ([]*kgo.Record, error) {
		topic := outTopic
		if r.Offset == bad {
			topic = "no-such-topic"
		}
		return []*kgo.Record{{Topic: topic, Value: []byte(coord(r))}}, nil
	})
	o.ClientOpts = append(o.ClientOpts, kgo.UnknownTopicRetries(0))
	o.Fallback = func(r *kgo.Record, err error) ([]*kgo.Record, error) {
		cause.Store(&err)
		return []*kgo.Record{{Topic: errTopic, Value: []byte(coord(r))}}, nil
	}
	start(t, o)
	e.waitCommittedToEnd("g")
	errs := e.outputs(errTopic, 1)
	if want := fmt.Sprintf("%s/0/%d", inTopic, bad); errs[want] != 1 {
		t.Errorf("error outputs %v, want %s", errs, want)
	}
	if c := cause.Load(); c == nil || !errors.Is(*c, ErrProduce) {
		t.Errorf("fallback cause %v, want ErrProduce", c)
	}
}

// TestFailureStops: without a fallback (or when it fails) Run stops with a
// RecordError and commits nothing at or after the failed record.
func TestFailureStops(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fallback Fallback
	}{
		{"no fallback", nil},
		{"fallback fails", func(*kgo.Record, error) ([]*kgo.Record, error) { return nil, errors.New("fallback broken") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 1)
			const n, bad = 100, 50
			e.produce(n, strconv.Itoa, func(int) int32 { return 0 })
			o := e.opts("g", echo(func(_ context.Context, r *kgo.Record, _ Meta) error {
				if r.Offset == bad {
					return errTest
				}
				return nil
			}))
			o.Fallback = tc.fallback
			o.Mode = ordering.Partition
			err := start(t, o).wait(t)
			var re *RecordError
			if !errors.As(err, &re) || re.Offset != bad || re.Partition != 0 || !errors.Is(err, errTest) {
				t.Fatalf("Run = %v, want RecordError at offset %d wrapping the handler error", err, bad)
			}
			if got := e.committed("g"); got[0] != bad {
				t.Errorf("committed %d, want %d", got[0], bad)
			}
		})
	}
}

// The takeover wait and the lease count a call as landed CallTimeout plus
// ApplyWindow after its start: it is sent within the first and applied
// within the second of its sending.
func TestApplyWindowAddsToCallTimeout(t *testing.T) {
	p, err := New(Options{Brokers: []string{"x"}, Group: "g", Topics: []string{"t"}, Handler: echo(nil),
		CallTimeout: 3 * time.Second, ApplyWindow: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.o.TakeoverWait, 5*time.Second+DefaultTakeoverMargin; got != want {
		t.Errorf("TakeoverWait %v, want %v", got, want)
	}
	if got := p.o.landed(); got != 5*time.Second {
		t.Errorf("landed %v, want 5s (the lease's call duration)", got)
	}
	if _, err := New(Options{Brokers: []string{"x"}, Group: "g", Topics: []string{"t"}, Handler: echo(nil), ApplyWindow: -time.Second}); err == nil ||
		!strings.Contains(err.Error(), "ApplyWindow") {
		t.Errorf("negative ApplyWindow: %v", err)
	}
}
