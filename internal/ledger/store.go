package ledger

import (
	"encoding/binary"
	"errors"
	"strconv"
	"sync"
	"time"
)

// backend keeps one input partition's entries, each transaction's latest
// record value keyed by its record key: in memory (memory) or on disk
// (diskPartition). The restore and lookup code above it is the same for
// both. Safe for concurrent use.
type backend interface {
	// saved is the checkpoint a restore continues from: the zero
	// checkpoint when there is none (a memory store, or a disk store not
	// yet written), errBadCheckpoint when the one stored does not read.
	saved() (checkpoint, error)
	// add keeps each entry by the put rule (a late-read intent never hides
	// its settled outcome) and, when cp is not nil, records cp with them:
	// both are kept, or neither.
	add(entries []kv, cp *checkpoint) error
	// get is key's value, found or not: a copy, the caller's (decodeValue
	// copies what it keeps, so one copy is all a lookup makes).
	get(key string) (value []byte, found bool, err error)
	// holds reports whether key's value is value (the tail's check of
	// each entry it reads back: no copy of either in memory).
	holds(key, value []byte) (bool, error)
	// forget drops the entries made before since (Unix ms): a memory store
	// at once, a disk store in the background.
	forget(since int64)
	// wipe drops every entry and the checkpoint.
	wipe() error
	// size counts the entries kept (on disk: a scan).
	size() (int, error)
}

// kv is one entry: its record key and value.
type kv struct{ k, v string }

// keepsOlder is the put rule: of a key's two values (older first) it
// keeps the later one, unless a late-read intent would hide its settled
// outcome. Over a sequence that is the last settled value, or the last
// when none is settled, however the sequence is grouped: the disk
// store's merge operator relies on that.
func keepsOlder[A, B string | []byte](older A, later B) bool {
	return valueState(older) == stateSettled && valueState(later) == stateIntent
}

// checkpoint is how far a store has read its ledger partition: the next
// ledger offset to read, the earliest entry's time (Unix ms, for Covers)
// and the ledger topic's id (zero when the broker has none), so that a
// topic deleted and created again is not taken for the one read.
type checkpoint struct {
	next    int64
	firstAt int64
	topicID [16]byte
}

const checkpointVersion = 1

// errBadCheckpoint is a stored checkpoint that does not read: the store
// is wiped and read again from the topic.
var errBadCheckpoint = errors.New("ledger: checkpoint not understood")

func (c checkpoint) encode() []byte {
	b := make([]byte, 0, 1+8+8+16)
	b = append(b, checkpointVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(c.next))
	b = binary.BigEndian.AppendUint64(b, uint64(c.firstAt))
	return append(b, c.topicID[:]...)
}

func decodeCheckpoint(b []byte) (checkpoint, error) {
	if len(b) != 1+8+8+16 || b[0] != checkpointVersion {
		return checkpoint{}, errBadCheckpoint
	}
	c := checkpoint{next: int64(binary.BigEndian.Uint64(b[1:])), firstAt: int64(binary.BigEndian.Uint64(b[9:]))}
	copy(c.topicID[:], b[17:])
	if c.next < 0 {
		return checkpoint{}, errBadCheckpoint
	}
	return c, nil
}

// store is what the process keeps of one input partition: its entries
// (the backend) and how far it has read them.
type store struct {
	name storeKey
	b    backend

	mu         sync.Mutex
	loaded     bool // the backend's checkpoint was read
	restored   bool
	assignment uint64
	running    chan struct{} // closed when the read in progress ends
	next       int64         // next ledger offset to read
	topicID    [16]byte      // of the ledger topic read up to next
	// firstAt is the earliest entry's time (Unix ms): the ledger speaks
	// for the partition's records produced well after it (Covers).
	firstAt int64
	// scanned is when entries past the window were last forgotten (Unix
	// ms of the window's start then): at most once per scanShare of the
	// window's movement.
	scanned int64
}

// scanShare: the entries are scanned for old ones each time the window
// has moved by this share of itself (a 24 h window: every hour), so an
// entry outlives the window by that much at most.
const scanShare = 24

func (s *store) key() (string, int32) { return s.name.topic, s.name.partition }
func (s *store) topic() string        { return s.name.topic + "/" + strconv.Itoa(int(s.name.partition)) }

// add keeps entries read from the topic up to next (cp: nil for the
// process's own writes, which advance no checkpoint).
func (s *store) add(entries []kv, next int64, cp bool) error {
	s.mu.Lock()
	for _, e := range entries {
		if at := valueAt(e.v); s.firstAt == 0 || at < s.firstAt {
			s.firstAt = at
		}
	}
	var c *checkpoint
	if cp {
		c = &checkpoint{next: next, firstAt: s.firstAt, topicID: s.topicID}
	}
	s.mu.Unlock()
	return s.b.add(entries, c)
}

// get returns key's entry unless it was made before since, forgetting
// every entry made before since once the window has moved enough.
func (s *store) get(key string, since time.Time, window time.Duration) (*Entry, error) {
	from := since.UnixMilli()
	s.mu.Lock()
	scan := from-s.scanned >= window.Milliseconds()/scanShare
	if scan {
		s.scanned = from
	}
	s.mu.Unlock()
	if scan {
		s.b.forget(from)
	}
	v, ok, err := s.b.get(key)
	if err != nil || !ok || valueAt(v) < from {
		return nil, err
	}
	kind, id, err := parseKey([]byte(key))
	if err != nil {
		return nil, nil
	}
	e, err := decodeValue(kind, id, v)
	if err != nil {
		return nil, nil // only values encode made are kept
	}
	return e, nil
}
