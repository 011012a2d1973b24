package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
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
type lateApplies struct {
	mu      sync.Mutex
	next    int
	timers  map[int]*time.Timer
	runs    map[int]func()
	stopped bool
	// wg waits for late writes being applied, so that Close leaves none
	// running.
	wg sync.WaitGroup
}

func (l *lateApplies) pending() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.runs)
}

// add arms run to be called once after d, unless stopped first.
func (l *lateApplies) add(d time.Duration, run func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
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

// fire runs the write id if it is still pending: a timer and a flush may
// both reach it, and only the first applies it.
func (l *lateApplies) fire(id int) {
	l.mu.Lock()
	run, ok := l.runs[id]
	if ok {
		delete(l.runs, id)
		l.timers[id].Stop()
		delete(l.timers, id)
		l.wg.Add(1)
	}
	l.mu.Unlock()
	if ok {
		defer l.wg.Done()
		run()
	}
}

// flush applies every pending write now, in the order they arrived.
func (l *lateApplies) flush() {
	l.mu.Lock()
	ids := slices.Sorted(maps.Keys(l.runs))
	l.mu.Unlock()
	for _, id := range ids {
		l.fire(id)
	}
}

// stop drops the pending writes and waits for those being applied.
func (l *lateApplies) stop() {
	l.mu.Lock()
	l.stopped = true
	for id, t := range l.timers {
		t.Stop()
		delete(l.timers, id)
		delete(l.runs, id)
	}
	l.mu.Unlock()
	l.wg.Wait()
}

// FlushLateApplies applies every late write still pending now (POST
// /__sim/late-applies/flush), so that a test decides when they land
// instead of waiting Faults.LateApplyDelay.
func (s *Server) FlushLateApplies() { s.late.flush() }

// lateCheck reports whether an abandoned request would have reached its
// handler: a late apply is of a write the partner accepted.
func (s *Server) lateCheck(rt *route, r *http.Request) bool {
	return s.authorize(r).status == 0 && rt.checkContentType(r).status == 0
}

// scheduleLate arms rt's handler on a copy of r (whose body serve has
// buffered) after d, cut off from the client, which is gone or answered.
func (s *Server) scheduleLate(rt *route, r *http.Request, d time.Duration) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	late := r.Clone(context.WithoutCancel(r.Context()))
	s.late.add(d, func() {
		late.Body = io.NopCloser(bytes.NewReader(body))
		w := &discardWriter{header: http.Header{}}
		rep := rt.handle(s, &call{w: w, r: late})
		s.countMu.Lock()
		s.lateLanded++
		s.countMu.Unlock()
		s.log.Info("late write landed", zap.String("endpoint", rt.name), zap.Int("status", rep.status))
	})
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
