package ordering

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestParseMode(t *testing.T) {
	for _, m := range []Mode{Key, Partition, Unordered} {
		got, err := ParseMode(m.String())
		if err != nil || got != m {
			t.Errorf("ParseMode(%q) = %v, %v", m, got, err)
		}
		var u Mode
		b, _ := m.MarshalText()
		if err := u.UnmarshalText(b); err != nil || u != m {
			t.Errorf("text round trip of %v = %v, %v", m, u, err)
		}
	}
	if _, err := ParseMode("keyed"); err == nil {
		t.Error("ParseMode(keyed) succeeded")
	}
	if _, err := Mode(9).MarshalText(); err == nil {
		t.Error("MarshalText of invalid mode succeeded")
	}
}

func TestTracker(t *testing.T) {
	type step struct {
		done     int64
		advanced bool
		next     int64 // -1: no commit point yet
		first    int64 // First() after the step; -1: none
	}
	tests := []struct {
		name  string
		added []int64
		steps []step
	}{
		{
			name:  "in order",
			added: []int64{0, 1, 2},
			steps: []step{{0, true, 1, 1}, {1, true, 2, 2}, {2, true, 3, -1}},
		},
		{
			name:  "gap holds the commit point",
			added: []int64{10, 11, 12, 13},
			steps: []step{{11, false, -1, 10}, {13, false, -1, 10}, {10, true, 12, 12}, {12, true, 14, -1}},
		},
		{
			name:  "non-consecutive offsets (compaction, markers)",
			added: []int64{3, 7, 8, 20},
			steps: []step{{7, false, -1, 3}, {3, true, 8, 8}, {20, false, 8, 8}, {8, true, 21, -1}},
		},
		{
			name:  "reverse order",
			added: []int64{0, 1, 2, 3},
			steps: []step{{3, false, -1, 0}, {2, false, -1, 0}, {1, false, -1, 0}, {0, true, 4, -1}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var tr Tracker
			for _, o := range tc.added {
				tr.Add(o, 5)
			}
			for _, s := range tc.steps {
				adv, err := tr.Done(s.done)
				if err != nil {
					t.Fatalf("Done(%d): %v", s.done, err)
				}
				if adv != s.advanced {
					t.Errorf("Done(%d) advanced = %v, want %v", s.done, adv, s.advanced)
				}
				if first, ok := tr.First(); ok != (s.first >= 0) || (ok && first != s.first) {
					t.Errorf("after Done(%d): First() = %d, %v; want %d", s.done, first, ok, s.first)
				}
				next, epoch, ok := tr.Commit()
				if s.next < 0 {
					if ok {
						t.Errorf("after Done(%d): commit point %d, want none", s.done, next)
					}
					continue
				}
				if !ok || next != s.next || epoch != 5 {
					t.Errorf("after Done(%d): Commit() = %d, %d, %v; want %d, 5, true", s.done, next, epoch, ok, s.next)
				}
			}
			if tr.Len() != 0 || tr.Pending() != 0 {
				t.Errorf("Len, Pending = %d, %d after all done", tr.Len(), tr.Pending())
			}
		})
	}
}

func TestTrackerErrors(t *testing.T) {
	var tr Tracker
	tr.Add(1, 0)
	tr.Add(2, 0)
	if _, err := tr.Done(5); err == nil {
		t.Error("Done of an offset never added succeeded")
	}
	if _, err := tr.Done(1); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Done(1); err == nil {
		t.Error("Done below the commit point succeeded")
	}
	tr.Add(3, 0)
	if _, err := tr.Done(3); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Done(3); err == nil {
		t.Error("second Done of the same offset succeeded")
	}
	if tr.Len() != 2 || tr.Pending() != 1 {
		t.Errorf("Len, Pending = %d, %d; want 2, 1", tr.Len(), tr.Pending())
	}
	defer func() {
		if recover() == nil {
			t.Error("Add of a lower offset did not panic")
		}
	}()
	tr.Add(3, 0)
}

// TestTrackerRandom completes offsets in random order and checks the commit
// point against a direct computation after every step.
func TestTrackerRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 50 {
		var tr Tracker
		n := 1 + r.IntN(300)
		offsets := make([]int64, n)
		off := int64(r.IntN(1000))
		for i := range offsets {
			off += 1 + int64(r.IntN(3))
			offsets[i] = off
			tr.Add(off, int32(i))
		}
		done := make([]bool, n)
		for _, i := range r.Perm(n) {
			if _, err := tr.Done(offsets[i]); err != nil {
				t.Fatal(err)
			}
			done[i] = true
			k := 0
			for k < n && done[k] {
				k++
			}
			next, epoch, ok := tr.Commit()
			if k == 0 {
				if ok {
					t.Fatalf("round %d: commit point %d with first offset not done", round, next)
				}
				continue
			}
			if !ok || next != offsets[k-1]+1 || epoch != int32(k-1) {
				t.Fatalf("round %d: Commit() = %d, %d, %v; want %d, %d", round, next, epoch, ok, offsets[k-1]+1, k-1)
			}
			if tr.Len() != n-k {
				t.Fatalf("round %d: Len = %d, want %d", round, tr.Len(), n-k)
			}
		}
	}
}

type rec struct {
	key    string
	offset int64
}

// run drives a scheduler with a simulated set of workers: each step either
// takes a task (if fewer than limit are running) or finishes a random running
// one. It returns the order in which tasks started and the maximum number
// running at once, overall and per key, and checks per-key order.
func run(t *testing.T, s *Scheduler[rec], recs []rec, limit int, r *rand.Rand) (started []int64, maxAll int, maxKey map[string]int) {
	t.Helper()
	for _, rc := range recs {
		s.Push(rc.offset, []byte(rc.key), rc)
	}
	var running []Task[rec]
	perKey := map[string]int{}
	maxKey = map[string]int{}
	lastByKey := map[string]int64{}
	for len(started) < len(recs) || len(running) > 0 {
		if len(running) == 0 || (len(running) < limit && r.IntN(3) > 0) {
			if task, ok := s.Next(); ok {
				started = append(started, task.Offset)
				k := task.Value.key
				if last, seen := lastByKey[k]; seen && last > task.Offset {
					t.Fatalf("key %q: offset %d started after %d", k, task.Offset, last)
				}
				lastByKey[k] = task.Offset
				perKey[k]++
				maxKey[k] = max(maxKey[k], perKey[k])
				running = append(running, task)
				maxAll = max(maxAll, len(running))
				continue
			}
			if len(running) == 0 {
				t.Fatalf("scheduler stalled: %d of %d started, nothing running", len(started), len(recs))
			}
		}
		i := r.IntN(len(running))
		task := running[i]
		running = slices.Delete(running, i, i+1)
		perKey[task.Value.key]--
		s.Done(task)
	}
	if s.Waiting() != 0 || s.InFlight() != 0 || s.Lanes() != 0 {
		t.Fatalf("Waiting, InFlight, Lanes = %d, %d, %d at the end", s.Waiting(), s.InFlight(), s.Lanes())
	}
	return started, maxAll, maxKey
}

func TestScheduler(t *testing.T) {
	const n = 2000
	mk := func(keys int) []rec {
		recs := make([]rec, n)
		for i := range recs {
			recs[i] = rec{key: fmt.Sprintf("k%d", i%keys), offset: int64(i * 2)}
		}
		return recs
	}
	tests := []struct {
		name       string
		mode       Mode
		keys       int
		wantMaxAll func(int) bool
		wantMaxKey int // 0: not checked
	}{
		{"key mode many keys", Key, 500, func(m int) bool { return m > 1 }, 1},
		{"key mode one key", Key, 1, func(m int) bool { return m == 1 }, 1},
		{"partition mode", Partition, 500, func(m int) bool { return m == 1 }, 1},
		{"unordered", Unordered, 1, func(m int) bool { return m > 1 }, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(3, 4))
			s := NewScheduler[rec](tc.mode)
			if s.Mode() != tc.mode {
				t.Fatalf("Mode() = %v", s.Mode())
			}
			started, maxAll, maxKey := run(t, s, mk(tc.keys), 16, r)
			if len(started) != n {
				t.Fatalf("started %d of %d", len(started), n)
			}
			if !tc.wantMaxAll(maxAll) {
				t.Errorf("max concurrency %d not as expected", maxAll)
			}
			if tc.wantMaxKey > 0 {
				for k, m := range maxKey {
					if m > tc.wantMaxKey {
						t.Fatalf("key %q ran %d at once", k, m)
					}
				}
			}
			if tc.mode == Partition && !slices.IsSorted(started) {
				t.Error("partition mode started out of offset order")
			}
		})
	}
}

func TestSchedulerNilKeysShareALane(t *testing.T) {
	s := NewScheduler[int](Key)
	s.Push(0, nil, 0)
	s.Push(1, []byte{}, 1)
	s.Push(2, []byte("a"), 2)
	a, _ := s.Next()
	b, _ := s.Next()
	if a.Offset != 0 || b.Offset != 2 {
		t.Fatalf("started %d, %d; want 0, 2", a.Offset, b.Offset)
	}
	if _, ok := s.Next(); ok {
		t.Fatal("empty key ran beside nil key")
	}
	s.Done(a)
	if c, ok := s.Next(); !ok || c.Offset != 1 {
		t.Fatalf("after nil key done: %v, %v", c.Offset, ok)
	}
}

func TestSchedulerLowestOffsetFirst(t *testing.T) {
	s := NewScheduler[int](Key)
	s.Push(0, []byte("a"), 0)
	s.Push(1, []byte("a"), 0)
	s.Push(2, []byte("b"), 0)
	s.Push(3, []byte("c"), 0)
	s.Push(4, []byte("b"), 0)
	var got []int64
	a, _ := s.Next() // 0
	got = append(got, a.Offset)
	s.Done(a) // lane a is ready again with offset 1, before b (2) and c (3)
	for {
		t, ok := s.Next()
		if !ok {
			break
		}
		got = append(got, t.Offset)
	}
	if want := []int64{0, 1, 2, 3}; !slices.Equal(got, want) {
		t.Fatalf("dispatch order %v, want %v", got, want)
	}
}

// TestSchedulerPeek: Peek names the record Next hands out, in every mode,
// and takes nothing.
func TestSchedulerPeek(t *testing.T) {
	for _, mode := range []Mode{Key, Partition, Unordered} {
		s := NewScheduler[int](mode)
		if _, ok := s.Peek(); ok {
			t.Errorf("%v: empty scheduler peeks a record", mode)
		}
		s.Push(3, []byte("a"), 0)
		s.Push(5, []byte("a"), 0)
		s.Push(8, []byte("b"), 0)
		for {
			off, ok := s.Peek()
			if again, _ := s.Peek(); again != off {
				t.Fatalf("%v: Peek took a record", mode)
			}
			task, next := s.Next()
			if ok != next || ok && task.Offset != off {
				t.Fatalf("%v: Peek = %d, %v; Next = %d, %v", mode, off, ok, task.Offset, next)
			}
			if !next {
				break
			}
			if mode != Unordered {
				s.Done(task)
			}
		}
	}
}

func TestSchedulerPushOrder(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Push of a lower offset did not panic")
		}
	}()
	s := NewScheduler[int](Partition)
	s.Push(4, nil, 0)
	s.Push(4, nil, 0)
}

// BenchmarkSchedulerTracker is the pipeline's per-record bookkeeping: push,
// dispatch, finish and commit-point tracking, 64 in flight over 1000 keys.
func BenchmarkSchedulerTracker(b *testing.B) {
	for _, mode := range []Mode{Key, Partition, Unordered} {
		b.Run(mode.String(), func(b *testing.B) {
			keys := make([][]byte, 1000)
			for i := range keys {
				keys[i] = fmt.Appendf(nil, "member-%d", i)
			}
			s := NewScheduler[int](mode)
			var tr Tracker
			var running ring[Task[int]]
			b.ReportAllocs()
			off := int64(0)
			for b.Loop() {
				s.Push(off, keys[off%int64(len(keys))], 0)
				tr.Add(off, 0)
				off++
				for running.len() < 64 {
					task, ok := s.Next()
					if !ok {
						break
					}
					running.push(task)
				}
				if running.len() == 64 || s.Waiting() > 128 {
					task := running.pop()
					s.Done(task)
					if _, err := tr.Done(task.Offset); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// TestTrackerBytes: Bytes counts the sizes of the offsets not yet below the
// commit point, done or not.
func TestTrackerBytes(t *testing.T) {
	var tr Tracker
	for i, size := range []int{10, 20, 30, -5} {
		tr.AddSized(int64(i), 0, size)
	}
	steps := []struct {
		done  int64
		bytes int
	}{
		{1, 60}, // a gap at 0: nothing leaves
		{0, 30}, // 0 and 1 leave
		{3, 30}, // a negative size counts as 0
		{2, 0},
	}
	if tr.Bytes() != 60 {
		t.Fatalf("bytes %d after adding, want 60", tr.Bytes())
	}
	for _, s := range steps {
		if _, err := tr.Done(s.done); err != nil {
			t.Fatal(err)
		}
		if tr.Bytes() != s.bytes {
			t.Errorf("after done %d: bytes %d, want %d", s.done, tr.Bytes(), s.bytes)
		}
	}
}
