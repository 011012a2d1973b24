package ordering

import "fmt"

// Scheduler orders the records of one partition for dispatch according to a
// Mode. Records are pushed in offset order; Next hands out those that may run
// now; Done reports that a handed-out record finished, which may let the next
// record of its lane run. Create one with NewScheduler; it is not safe for
// concurrent use.
//
// A Scheduler holds every pushed record until Next hands it out, so its
// memory is bounded by what the caller pushes.
type Scheduler[T any] struct {
	mode     Mode
	lanes    map[string]*lane[T] // Key mode: lanes with records waiting or running
	single   lane[T]             // Partition mode: the only lane
	ready    laneHeap[T]         // lanes whose first record may run now
	fifo     ring[item[T]]       // Unordered mode: waiting records
	free     []*lane[T]          // recycled lanes, with their buffers
	last     int64
	pushed   bool
	waiting  int
	inflight int
}

// Task is a record handed out by Next. Pass it back to Done unchanged.
type Task[T any] struct {
	Offset int64
	Value  T
	lane   *lane[T]
}

type item[T any] struct {
	offset int64
	value  T
}

type lane[T any] struct {
	key  string
	q    ring[item[T]]
	busy bool
	idx  int // position in the ready heap, -1 if not in it
}

// NewScheduler returns an empty Scheduler for mode.
func NewScheduler[T any](mode Mode) *Scheduler[T] {
	s := &Scheduler[T]{mode: mode}
	s.single.idx = -1
	if mode == Key {
		s.lanes = make(map[string]*lane[T])
	}
	return s
}

// Mode returns the scheduler's mode.
func (s *Scheduler[T]) Mode() Mode { return s.mode }

// Push adds the record at offset with its key. Offsets must strictly
// increase; Push panics otherwise. The key is only read during the call.
// A nil and an empty key are the same key.
func (s *Scheduler[T]) Push(offset int64, key []byte, v T) {
	if s.pushed && offset <= s.last {
		panic(fmt.Sprintf("ordering: offset %d pushed after %d", offset, s.last))
	}
	s.last, s.pushed = offset, true
	s.waiting++
	it := item[T]{offset: offset, value: v}
	var l *lane[T]
	switch s.mode {
	case Unordered:
		s.fifo.push(it)
		return
	case Partition:
		l = &s.single
	default:
		l = s.lanes[string(key)] // no allocation for the lookup
		if l == nil {
			l = s.newLane(string(key))
			s.lanes[l.key] = l
		}
	}
	l.q.push(it)
	if !l.busy && l.q.len() == 1 {
		s.ready.push(l)
	}
}

func (s *Scheduler[T]) newLane(key string) *lane[T] {
	if n := len(s.free); n > 0 {
		l := s.free[n-1]
		s.free = s.free[:n-1]
		l.key = key
		return l
	}
	return &lane[T]{key: key, idx: -1}
}

// Next returns a record that may run now, the one with the lowest offset
// among them, and counts it in flight. ok is false if every waiting record
// is behind one in flight, or none is waiting.
func (s *Scheduler[T]) Next() (t Task[T], ok bool) {
	if s.mode == Unordered {
		if s.fifo.len() == 0 {
			return t, false
		}
		it := s.fifo.pop()
		s.waiting--
		s.inflight++
		return Task[T]{Offset: it.offset, Value: it.value}, true
	}
	if len(s.ready) == 0 {
		return t, false
	}
	l := s.ready.pop()
	it := l.q.pop()
	l.busy = true
	s.waiting--
	s.inflight++
	return Task[T]{Offset: it.offset, Value: it.value, lane: l}, true
}

// Peek returns the offset of the record Next would hand out now, without
// handing it out; ok is false when Next would return none.
func (s *Scheduler[T]) Peek() (offset int64, ok bool) {
	if s.mode == Unordered {
		if s.fifo.len() == 0 {
			return 0, false
		}
		return s.fifo.at(0).offset, true
	}
	if len(s.ready) == 0 {
		return 0, false
	}
	return s.ready[0].q.at(0).offset, true
}

// Done reports that a task returned by Next finished (successfully or not:
// the scheduler only cares that its lane may move on).
func (s *Scheduler[T]) Done(t Task[T]) {
	s.inflight--
	l := t.lane
	if l == nil { // Unordered
		return
	}
	l.busy = false
	if l.q.len() > 0 {
		s.ready.push(l)
		return
	}
	if s.mode == Key {
		delete(s.lanes, l.key)
		l.key = ""
		if len(s.free) < 64 {
			s.free = append(s.free, l)
		}
	}
}

// Waiting returns how many pushed records Next has not handed out yet.
func (s *Scheduler[T]) Waiting() int { return s.waiting }

// InFlight returns how many handed-out records are not Done.
func (s *Scheduler[T]) InFlight() int { return s.inflight }

// Lanes returns how many keys have records waiting or in flight (Key mode).
func (s *Scheduler[T]) Lanes() int { return len(s.lanes) }

// laneHeap is a min-heap of lanes by the offset of their first record.
type laneHeap[T any] []*lane[T]

func (h laneHeap[T]) less(i, j int) bool { return h[i].q.at(0).offset < h[j].q.at(0).offset }

func (h laneHeap[T]) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}

func (h *laneHeap[T]) push(l *lane[T]) {
	l.idx = len(*h)
	*h = append(*h, l)
	for i := l.idx; i > 0; {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h.swap(i, p)
		i = p
	}
}

func (h *laneHeap[T]) pop() *lane[T] {
	old := *h
	n := len(old) - 1
	old.swap(0, n)
	l := old[n]
	old[n] = nil
	*h = old[:n]
	l.idx = -1
	for i := 0; ; {
		m, a, b := i, 2*i+1, 2*i+2
		if a < n && h.less(a, m) {
			m = a
		}
		if b < n && h.less(b, m) {
			m = b
		}
		if m == i {
			break
		}
		h.swap(i, m)
		i = m
	}
	return l
}
