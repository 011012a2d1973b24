package sim

import (
	"container/heap"
	"sync"
	"time"
)

// replayCache remembers the jti of every partner JWT accepted until that
// JWT could not be accepted anyway (its exp, plus the clock skew allowed),
// so that each is accepted once. It holds at most max jtis: when that many
// are live, a new JWT is refused rather than a live jti forgotten, which
// would let its JWT be replayed. Safe for concurrent use.
type replayCache struct {
	mu     sync.Mutex
	max    int
	seen   map[replayKey]struct{}
	expiry expiryHeap // the entries of seen, soonest forgotten first
	full   bool       // the last new jti found the cache full
}

// replayKey is a jti in its kind's namespace: iss is always the client_id,
// and each kind (typ) has its own jtis.
type replayKey struct{ typ, jti string }

type replayEntry struct {
	key      replayKey
	forgetAt time.Time
}

// replayOutcome is what use found.
type replayOutcome int

const (
	replayFresh replayOutcome = iota // remembered from now on: accept
	replaySeen                       // used before: refuse
	replayFull                       // cache full of live jtis: refuse
)

func (rc *replayCache) init(maxEntries int) {
	rc.max = maxEntries
	rc.seen = map[replayKey]struct{}{}
}

// use records key, to be forgotten at forgetAt, unless it is remembered
// already or the cache is full of entries live at now. changed reports
// that the cache became full or stopped being full with this call.
func (rc *replayCache) use(key replayKey, forgetAt, now time.Time) (out replayOutcome, changed bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for len(rc.expiry) > 0 && !rc.expiry[0].forgetAt.After(now) {
		delete(rc.seen, heap.Pop(&rc.expiry).(replayEntry).key)
	}
	if _, ok := rc.seen[key]; ok {
		return replaySeen, false
	}
	full := len(rc.seen) >= rc.max
	changed, rc.full = full != rc.full, full
	if full {
		return replayFull, changed
	}
	rc.seen[key] = struct{}{}
	heap.Push(&rc.expiry, replayEntry{key, forgetAt})
	return replayFresh, changed
}

// expiryHeap is a container/heap of entries by forgetAt.
type expiryHeap []replayEntry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].forgetAt.Before(h[j].forgetAt) }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(replayEntry)) }
func (h *expiryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
