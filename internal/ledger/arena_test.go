package ledger

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// oneHash gives every key the same hash: every key collides with every
// other, so only the keys kept in the arena tell them apart.
func oneHash(string) uint64 { return 0x5eed_0f_c011_1510 }

// memoryValue is an encoded entry value of transaction id, made at at
// (Unix ms), settled or not; ref varies the bytes (and the length).
func memoryValue(t testing.TB, id string, settled bool, at int64, ref string) string {
	t.Helper()
	return topicValue(t, "loyalty.purchase", id, settled, at, ref)
}

// topicValue is memoryValue of input topic topic.
func topicValue(t testing.TB, topic, id string, settled bool, at int64, ref string) string {
	t.Helper()
	e := Entry{Kind: Accrual, TransactionID: id, State: Intent, At: time.UnixMilli(at), Topic: topic, BitReference: ref}
	if settled {
		e.State, e.Outcome = Settled, "APPLIED"
	}
	v, err := e.encode()
	if err != nil {
		t.Fatal(err)
	}
	return string(v)
}

// The memory store's operations through the backend interface, each case
// run with maphash and with every key colliding.
func TestMemory(t *testing.T) {
	const t0 = 1_795_000_000_000
	hour := time.Hour.Milliseconds()
	intent := func(t testing.TB, id string, at int64) string { return memoryValue(t, id, false, at, "") }
	settled := func(t testing.TB, id string, at int64, ref string) string { return memoryValue(t, id, true, at, ref) }
	add := func(t testing.TB, m *memory, entries ...kv) {
		t.Helper()
		if err := m.add(entries, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		// run does the operations and returns what the store must hold.
		run func(t testing.TB, m *memory) map[string]string
	}{
		{"add and get", func(t testing.TB, m *memory) map[string]string {
			a, r := intent(t, "1", t0), settled(t, "1", t0, "B1")
			add(t, m, kv{"a/1", a}, kv{"r/1", r})
			return map[string]string{"a/1": a, "r/1": r}
		}},
		{"a settled value replaces an intent", func(t testing.TB, m *memory) map[string]string {
			s := settled(t, "1", t0+1, "B1")
			add(t, m, kv{"a/1", intent(t, "1", t0)})
			add(t, m, kv{"a/1", s})
			return map[string]string{"a/1": s}
		}},
		{"a late intent never hides a settled value", func(t testing.TB, m *memory) map[string]string {
			s := settled(t, "1", t0, "B1")
			add(t, m, kv{"a/1", s})
			add(t, m, kv{"a/1", intent(t, "1", t0+1)})
			return map[string]string{"a/1": s}
		}},
		{"nor in one batch", func(t testing.TB, m *memory) map[string]string {
			s := settled(t, "1", t0, "B1")
			add(t, m, kv{"a/1", s}, kv{"a/1", intent(t, "1", t0+1)})
			return map[string]string{"a/1": s}
		}},
		{"a later intent replaces an intent, a later settled value a settled one", func(t testing.TB, m *memory) map[string]string {
			i, s := intent(t, "1", t0+1), settled(t, "2", t0+1, "B22")
			add(t, m, kv{"a/1", intent(t, "1", t0)}, kv{"a/2", settled(t, "2", t0, "B2")})
			add(t, m, kv{"a/1", i}, kv{"a/2", s})
			return map[string]string{"a/1": i, "a/2": s}
		}},
		{"forget drops what was made before since, not at it", func(t testing.TB, m *memory) map[string]string {
			at := intent(t, "2", t0)
			add(t, m, kv{"a/1", intent(t, "1", t0-1)}, kv{"a/2", at}, kv{"a/3", settled(t, "3", t0-hour, "B3")})
			m.forget(t0)
			return map[string]string{"a/2": at}
		}},
		{"forget keeps an entry written again since", func(t testing.TB, m *memory) map[string]string {
			s := settled(t, "1", t0+hour, "B1")
			add(t, m, kv{"a/1", intent(t, "1", t0-hour)}, kv{"a/2", intent(t, "2", t0-hour)})
			add(t, m, kv{"a/1", s})
			m.forget(t0)
			return map[string]string{"a/1": s}
		}},
		{"wipe drops every entry; the store takes more after it", func(t testing.TB, m *memory) map[string]string {
			s := settled(t, "3", t0, "B3")
			add(t, m, kv{"a/1", intent(t, "1", t0)}, kv{"a/2", intent(t, "2", t0)})
			if err := m.wipe(); err != nil {
				t.Fatal(err)
			}
			add(t, m, kv{"a/3", s})
			return map[string]string{"a/3": s}
		}},
		{"values of another topic are kept whole, the store's without it", func(t testing.TB, m *memory) map[string]string {
			want := map[string]string{}
			for i, topic := range []string{"loyalty.purchase", "other", "", "loyalty.purchase", "loyalty.purchasE", "loyalty.purchase2"} {
				id := strconv.Itoa(i)
				want["a/"+id] = topicValue(t, topic, id, i%2 == 0, t0, "B"+id)
				add(t, m, kv{"a/" + id, want["a/"+id]})
			}
			if m.inUse >= len(want["a/0"])*len(want) {
				t.Errorf("%d bytes kept: no topic left out", m.inUse)
			}
			return want
		}},
		{"keys of one hash are each kept and found", func(t testing.TB, m *memory) map[string]string {
			m.hash = oneHash
			want := map[string]string{}
			for i := range 100 {
				id := strconv.Itoa(i)
				want["a/"+id], want["r/"+id] = intent(t, id, t0), settled(t, id, t0, "B"+id)
				add(t, m, kv{"a/" + id, want["a/"+id]}, kv{"r/" + id, want["r/"+id]})
			}
			// Deleting from the middle of the one cluster keeps the rest
			// found.
			for i := 0; i < 100; i += 3 {
				add(t, m, kv{"a/" + strconv.Itoa(i), intent(t, strconv.Itoa(i), t0-1)})
				delete(want, "a/"+strconv.Itoa(i))
			}
			m.forget(t0)
			return want
		}},
		{"compaction keeps every live entry byte for byte", func(t testing.TB, m *memory) map[string]string {
			want := map[string]string{}
			for round := range 6 {
				for i := range 2000 {
					id := fmt.Sprintf("%016d", i)
					v := settled(t, id, t0+int64(round), fmt.Sprintf("BIT-%d-%d", round, i))
					if round == 0 {
						v = intent(t, id, t0)
					}
					add(t, m, kv{"a/" + id, v})
					want["a/"+id] = v
				}
			}
			if len(m.free) == 0 {
				t.Error("no chunk was evacuated")
			}
			if g := m.garbage(); g > max(m.inUse/2, m.floor) {
				t.Errorf("%d bytes of garbage over %d live", g, m.inUse)
			}
			return want
		}},
		{"compaction after forget keeps every live entry byte for byte", func(t testing.TB, m *memory) map[string]string {
			want := map[string]string{}
			for i := range 4000 {
				id := fmt.Sprintf("%016d", i)
				v := settled(t, id, t0-1, "BIT-"+id)
				if i%4 == 0 {
					v = settled(t, id, t0, "BIT-"+id)
					want["a/"+id] = v
				}
				add(t, m, kv{"a/" + id, v})
			}
			m.forget(t0) // three quarters of the bytes garbage
			if len(m.free) == 0 {
				t.Error("no chunk was evacuated")
			}
			return want
		}},
	} {
		for _, h := range []struct {
			name string
			hash func(string) uint64
		}{{"maphash", nil}, {"one hash", oneHash}} {
			t.Run(tc.name+"/"+h.name, func(t *testing.T) {
				m := newMemory()
				m.hash = h.hash
				want := tc.run(t, m)
				checkMemory(t, m, want)
			})
		}
	}
}

// The index grows by splitting tables of maxTable slots, so that growing
// moves at most maxTable entries; keys of one hash, which no split
// separates, stay in one table that doubles.
func TestMemoryIndexSplits(t *testing.T) {
	const t0 = 1_795_000_000_000
	for _, tc := range []struct {
		name   string
		hash   func(string) uint64
		n      int
		tables func(int) bool
	}{
		{"maphash", nil, 20_000, func(n int) bool { return n >= 20_000/maxTable }},
		{"one hash", oneHash, 2_000, func(n int) bool { return n <= 2 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMemory()
			m.hash = tc.hash
			want := map[string]string{}
			for i := range tc.n {
				id := strconv.Itoa(i)
				want["a/"+id] = memoryValue(t, id, true, t0, "")
				if err := m.add([]kv{{"a/" + id, want["a/"+id]}}, nil); err != nil {
					t.Fatal(err)
				}
			}
			checkMemory(t, m, want)
			if !tc.tables(len(m.tables)) {
				t.Errorf("%d tables", len(m.tables))
			}
			for i, tab := range m.tables {
				if tc.hash == nil && len(tab) > maxTable {
					t.Errorf("table %d has %d slots", i, len(tab))
				}
			}
		})
	}
}

// checkMemory fails t unless m holds exactly want.
func checkMemory(t testing.TB, m *memory, want map[string]string) {
	t.Helper()
	if n, err := m.size(); err != nil || n != len(want) {
		t.Errorf("size %d (%v), want %d", n, err, len(want))
	}
	for k, w := range want {
		v, found, err := m.get(k)
		if err != nil || !found || string(v) != w {
			t.Errorf("get(%q) = %x, %v, %v; want %x", k, v, found, err, w)
		}
		if ok, err := m.holds([]byte(k), []byte(w)); err != nil || !ok {
			t.Errorf("holds(%q, its value) = %v, %v", k, ok, err)
		}
		if ok, _ := m.holds([]byte(k), []byte(w+"x")); ok {
			t.Errorf("holds(%q, another value) = true", k)
		}
		// The same value of another topic (a store leaves its own out).
		if at, ok := topicAt(w); ok && at+1 < len(w) && w[at] > 0 {
			other := []byte(w)
			other[at+1]++
			if ok, _ := m.holds([]byte(k), other); ok {
				t.Errorf("holds(%q, its value of another topic) = true", k)
			}
		}
	}
	for _, k := range []string{"a/missing", "", "a/1x"} {
		if _, ok := want[k]; ok {
			continue
		}
		if v, found, _ := m.get(k); found {
			t.Errorf("get(%q) found %x", k, v)
		}
	}
}

// The memory store answers as a map of strings with the put rule does,
// over random operations (keys of one hash half the time; compaction at
// any garbage).
func TestMemoryAgainstAMap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		ops := make([]byte, 4000)
		for i := range ops {
			ops[i] = byte(r.Uint32())
		}
		checkAgainstMap(t, ops)
	}
}

func FuzzMemory(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{1, 0x10, 0x31, 0x52, 0x10, 0xf3, 0x14, 0x35, 0xff, 0x10})
	f.Fuzz(func(t *testing.T, ops []byte) { checkAgainstMap(t, ops) })
}

// checkAgainstMap runs the operations ops spells on a memory store and on
// a map of strings, and fails t where their answers differ. ops[0] odd:
// every key has one hash. Then two bytes an operation: the first's low
// bits say which (add, forget, wipe), the rest and the second which key,
// whether settled, when made.
func checkAgainstMap(t *testing.T, ops []byte) {
	if len(ops) == 0 {
		return
	}
	const t0 = 1_795_000_000_000
	m := newMemory()
	m.floor = 0
	if ops[0]&1 == 1 {
		m.hash = oneHash
	}
	model := map[string]string{}
	for ops = ops[1:]; len(ops) >= 2; ops = ops[2:] {
		op, arg := ops[0], ops[1]
		at := t0 + int64(arg>>4)
		switch op % 16 {
		case 0:
			m.forget(at)
			for k, v := range model {
				if valueAt(v) < at {
					delete(model, k)
				}
			}
		case 1:
			if err := m.wipe(); err != nil {
				t.Fatal(err)
			}
			clear(model)
		default:
			id := strconv.Itoa(int(op>>4)<<2 | int(arg&3))
			k := string("arf"[op%3]) + "/" + id
			topic := "loyalty.purchase"
			if op%16 >= 9 {
				topic = "loyalty.refund-redemption"
			}
			v := topicValue(t, topic, id, arg&4 != 0, at, string(make([]byte, arg&8*3)))
			if err := m.add([]kv{{k, v}}, nil); err != nil {
				t.Fatal(err)
			}
			if old, ok := model[k]; !ok || !keepsOlder(old, v) {
				model[k] = v
			}
		}
		checkMemory(t, m, model)
		if t.Failed() {
			t.FailNow()
		}
	}
}

// BenchmarkMemoryChurn puts LEDGER_ENTRIES (default 1,000,000)
// transactions into a memory store as the bridge does: each one's intent,
// and its settled outcome 256 transactions later (in flight meanwhile).
// It reports the chunks' bytes per entry kept (garbage included, bounded
// by compaction), the index's, the heap's, the longest add (a compaction
// step runs inside one, under the store's lock), the time of a forget
// that drops a 24th of the entries (a scan of all), and the longest a
// lookup beside it waited (the forget takes the lock a chunk at a time).
func BenchmarkMemoryChurn(b *testing.B) {
	n := 1_000_000
	if s := os.Getenv("LEDGER_ENTRIES"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			b.Fatal(err)
		}
	}
	const t0, lag = 1_795_000_000_000, 256
	value := func(i int, st State) string {
		points := int64(100 + i%900)
		e := Entry{Kind: Accrual, TransactionID: fmt.Sprintf("%016d", i), State: st, At: time.UnixMilli(t0 + int64(i)), Topic: "loyalty.purchase", Offset: int64(i)}
		if st == Settled {
			e.Outcome, e.Points = "APPLIED", &points
			e.BitReference, e.RequestID, e.APITimestamp = fmt.Sprintf("BIT%012d", i), fmt.Sprintf("req-%012d", i), "2026-11-27T10:00:00.000Z"
		}
		v, err := e.encode()
		if err != nil {
			b.Fatal(err)
		}
		return string(v)
	}
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		m := newMemory()
		var longest time.Duration
		put := func(i int, st State) {
			e := []kv{{Key(Accrual, fmt.Sprintf("%016d", i)), value(i, st)}}
			start := time.Now()
			if err := m.add(e, nil); err != nil {
				b.Fatal(err)
			}
			longest = max(longest, time.Since(start))
		}
		for i := range n + lag {
			if i < n {
				put(i, Intent)
			}
			if i >= lag {
				put(i-lag, Settled)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		if m.n != n {
			b.Fatalf("%d entries kept, want %d", m.n, n)
		}
		b.ReportMetric(float64(m.arena)/float64(n), "chunk-bytes/entry")
		b.ReportMetric(float64(m.inUse)/float64(n), "live-bytes/entry")
		slots := 0
		for _, tab := range m.tables {
			slots += len(tab)
		}
		b.ReportMetric(float64(8*slots+4*len(m.dir))/float64(n), "table-bytes/entry")
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(n), "heap-bytes/entry")
		b.ReportMetric(float64(longest.Microseconds())/1000, "longest-add-ms")
		// A lookup beside the forget waits for what it holds the lock for.
		done, waited := make(chan struct{}), make(chan time.Duration)
		go func() {
			var longest time.Duration
			for i := 0; ; i++ {
				select {
				case <-done:
					waited <- longest
					return
				default:
				}
				start := time.Now()
				if _, _, err := m.get(Key(Accrual, fmt.Sprintf("%016d", i*7919%n))); err != nil {
					b.Error(err)
				}
				longest = max(longest, time.Since(start))
			}
		}()
		start := time.Now()
		m.forget(t0 + int64(n)/24) // an hour of a day's entries
		b.ReportMetric(float64(time.Since(start).Microseconds())/1000, "forget-ms")
		close(done)
		b.ReportMetric(float64((<-waited).Microseconds())/1000, "longest-get-in-forget-ms")
		runtime.KeepAlive(m)
	}
}

// A forget takes the lock a chunk at a time, so adds, lookups and
// compactions run between its chunks: none of them may lose a new entry or
// keep a stale slot, and an old entry a compaction moved past the forget
// is gone after the next one. Run with -race.
func TestMemoryForgetBesideAdds(t *testing.T) {
	const t0, n = 1_795_000_000_000, 20_000
	for _, h := range []struct {
		name string
		hash func(string) uint64
	}{{"maphash", nil}, {"one hash", oneHash}} {
		t.Run(h.name, func(t *testing.T) {
			count := n
			if h.hash != nil {
				count = 600 // every key in one table: each lookup scans them all
			}
			m := newMemory()
			m.hash, m.floor = h.hash, 0
			for i := range count {
				id := strconv.Itoa(i)
				if err := m.add([]kv{{"a/" + id, memoryValue(t, id, false, t0, "")}}, nil); err != nil {
					t.Fatal(err)
				}
			}
			// The adds settle the old intents (new values of old keys,
			// garbage that compaction evacuates) and add new keys.
			want := map[string]string{}
			added := make(chan error, 1)
			go func() {
				for i := range count {
					id := strconv.Itoa(i)
					for _, e := range []kv{{"a/" + id, memoryValue(t, id, true, t0+10, "B"+id)}, {"r/" + id, memoryValue(t, id, false, t0+10, "")}} {
						if err := m.add([]kv{e}, nil); err != nil {
							added <- err
							return
						}
					}
				}
				added <- nil
			}()
			for i := range count {
				id := strconv.Itoa(i)
				want["a/"+id] = memoryValue(t, id, true, t0+10, "B"+id)
				want["r/"+id] = memoryValue(t, id, false, t0+10, "")
			}
			for range 3 {
				m.forget(t0 + 1)
			}
			if err := <-added; err != nil {
				t.Fatal(err)
			}
			m.forget(t0 + 1)
			checkMemory(t, m, want)
		})
	}
}

// A memory store's chunks are mapped outside the heap: one the process
// drops (Forget) has them unmapped once it is unreachable, and a wiped
// one at once; evacuated chunks are unmapped as they go (the other tests
// read every entry after compactions, which would fault on an unmapped
// chunk still in use).
func TestMemoryUnmapsItsChunks(t *testing.T) {
	const t0 = 1_795_000_000_000
	fill := func(m *memory) {
		for i := range 5_000 {
			id := strconv.Itoa(i)
			if err := m.add([]kv{{"a/" + id, memoryValue(t, id, true, t0, "B"+id)}}, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	m := newMemory()
	fill(m)
	regions := func() (n int) {
		for _, r := range m.regions {
			if r != nil {
				n++
			}
		}
		return n
	}
	if n := regions(); n < 2 {
		t.Fatalf("%d chunks mapped for 5,000 entries, want several", n)
	}
	if err := m.wipe(); err != nil {
		t.Fatal(err)
	}
	if n := regions(); n != 0 {
		t.Fatalf("%d chunks mapped after wipe", n)
	}
	fill(m)
	p := m.mapped
	m = nil
	deadline := time.Now().Add(10 * time.Second)
	for !p.released.Load() {
		if time.Now().After(deadline) {
			t.Fatal("a dropped store's chunks were not unmapped within 10 s of collections")
		}
		runtime.GC()
		time.Sleep(time.Millisecond) // the cleanup runs on its own goroutine
	}
}
