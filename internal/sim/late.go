package sim

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
)

// lateApplies are the writes answered 504 (or abandoned by their client)
// that the Server applies later (Faults.LateApplyRate). Each is a timer,
// not a goroutine, until it fires.
//
// Exactly once: a write leaves runs under mu before it is applied, so the
// timer, a flush and stop (which drops it) race for it and one wins.
// Applying happens outside mu, so that a write landing never holds mu while
// it takes the Server's other locks.
type lateApplies struct {
	mu      sync.Mutex
	next    int
	timers  map[int]*time.Timer
	runs    map[int]func()
	stopped bool
	// landing counts writes being applied now; idle is signalled when it
	// drops to 0, so that flush and stop return only once they landed.
	landing int
	idle    *sync.Cond
	// dropped counts writes stop dropped and those accepted after it.
	dropped int
}

// counts returns the writes pending and those dropped.
func (l *lateApplies) counts() (pending, dropped int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.runs), l.dropped
}

// add arms run to be called once after d, unless stopped first.
func (l *lateApplies) add(d time.Duration, run func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		l.dropped++
		return
	}
	if l.runs == nil {
		l.timers, l.runs = map[int]*time.Timer{}, map[int]func(){}
	}
	id := l.next
	l.next++
	l.runs[id] = run
	l.timers[id] = time.AfterFunc(d, func() { l.fire(id) })
}

// fire applies the write id if it is still pending: a timer and a flush may
// both reach it, and only the first applies it.
func (l *lateApplies) fire(id int) {
	l.mu.Lock()
	run, ok := l.runs[id]
	if ok {
		delete(l.runs, id)
		l.timers[id].Stop()
		delete(l.timers, id)
		l.landing++
	}
	l.mu.Unlock()
	if !ok {
		return
	}
	defer l.landed()
	run()
}

func (l *lateApplies) landed() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.landing--
	if l.landing == 0 && l.idle != nil {
		l.idle.Broadcast()
	}
}

// waitLanded returns once no write is being applied. mu must be held.
func (l *lateApplies) waitLanded() {
	if l.idle == nil {
		l.idle = sync.NewCond(&l.mu)
	}
	for l.landing > 0 {
		l.idle.Wait()
	}
}

// flush applies every pending write now, in the order they arrived, and
// returns once every write that was pending or landing when it was called
// has landed (a timer may have taken one just before).
func (l *lateApplies) flush() {
	l.mu.Lock()
	ids := slices.Sorted(maps.Keys(l.runs))
	l.mu.Unlock()
	for _, id := range ids {
		l.fire(id)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.waitLanded()
}

// stop drops the pending writes and waits for those being applied; writes
// accepted later are dropped too.
func (l *lateApplies) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	for id, t := range l.timers {
		t.Stop()
		delete(l.timers, id)
		delete(l.runs, id)
		l.dropped++
	}
	l.waitLanded()
}

// FlushLateApplies applies every late write still pending now (POST
// /__sim/late-applies/flush), so that a test decides when they land
// instead of waiting Faults.LateApplyDelay. It returns once they landed.
// After Close there is nothing to flush: Close dropped them.
func (s *Server) FlushLateApplies() { s.late.flush() }

// lateCheck reports whether an abandoned request would have reached its
// handler: a late apply is of a write the partner accepted.
func (s *Server) lateCheck(rt *route, r *http.Request) bool {
	return s.authorize(r).status == 0 && rt.checkContentType(r).status == 0
}

// acceptLate runs rt's handler on c now, as the partner checks a request
// on arrival (body, member, date, sign and its jti), and arms what it
// would apply to land d later. A request refused on arrival never lands;
// its client got a 504 or nothing all the same.
func (s *Server) acceptLate(rt *route, c *call, d time.Duration) {
	c.later = func(apply func() reply) {
		s.late.add(d, func() {
			rep := apply()
			s.countMu.Lock()
			s.lateLanded++
			s.countMu.Unlock()
			s.log.Info("late write landed", zap.String("endpoint", rt.name), zap.Int("status", rep.status))
		})
	}
	if rep := rt.handle(s, c); rep.status != http.StatusGatewayTimeout {
		s.log.Info("late write refused on arrival", zap.String("endpoint", rt.name), zap.Int("status", rep.status))
	}
}

// discardWriter is the ResponseWriter of a late write: nobody reads its
// answer.
type discardWriter struct{ header http.Header }

func (d *discardWriter) Header() http.Header         { return d.header }
func (d *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d *discardWriter) WriteHeader(int)             {}

// withoutNumbers sets every JSON number under the envelope's data to null
// or, when absent, leaves it out (Faults.NullNumbersRate).
func withoutNumbers(rep reply, absent bool) reply {
	env, isEnvelope := rep.body.(envelope)
	if !isEnvelope || env.Data == nil {
		return rep
	}
	b, err := json.Marshal(env.Data)
	if err != nil {
		return rep
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var data any
	if err := dec.Decode(&data); err != nil {
		return rep
	}
	env.Data = stripNumbers(data, absent)
	rep.body = env
	return rep
}

func stripNumbers(v any, absent bool) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if _, isNumber := e.(json.Number); isNumber {
				if absent {
					delete(x, k)
				} else {
					x[k] = nil
				}
				continue
			}
			x[k] = stripNumbers(e, absent)
		}
	case []any:
		for i, e := range x {
			if _, isNumber := e.(json.Number); isNumber {
				// An element cannot be left out without shifting the
				// others: it is null either way.
				x[i] = nil
				continue
			}
			x[i] = stripNumbers(e, absent)
		}
	}
	return v
}
