package ledger

import (
	"encoding/binary"
	"errors"
	"hash/maphash"
	"math/bits"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
)

// memory is the in-memory backend. It holds no pointer per entry, so the
// garbage collector has nothing of it to mark but a slice header per
// chunk and per index table: a map of strings (two pointers an entry)
// took 186 heap bytes an entry, and a collection 180-340 ms of marking,
// at a million entries (BenchmarkLedgerMemory).
//
// Each entry (uvarint key length × 2 + 1 if the value's topic is left
// out, uvarint value length, key, value) is appended to the chunk being
// filled, a []byte of up to maxChunk bytes (an entry longer than that has
// a chunk of its own). The index (index.go) finds an entry by its key:
// uint64 slots, each the entry's chunk and offset and bits of the key's
// hash (tagBits), so that a probe reads the arena only for a key whose
// tag matches. Two keys with one hash are two slots, told apart by the
// keys in the arena.
//
// A value replaced (an intent by its settled outcome) or an entry
// forgotten leaves its bytes behind as garbage. Once the garbage exceeds
// half the live entries' bytes (and compactFloor), the chunks with the
// smallest live share are evacuated (their live entries copied to the
// chunk being filled, the chunk dropped), a few per add, until it is a
// quarter. So the chunks take at most 1.5 × the live entries' bytes +
// compactFloor + the chunk being filled (at most maxChunk, and an eighth
// of the live bytes rounded up to a power of two) + the bytes of the add
// in progress; the index 8 bytes a slot at a load of 3/8 to 3/4 (11 to 22
// bytes an entry). Each byte of garbage costs at most about four bytes
// copied.
//
// The chunks are mapped outside the Go heap (mmap; a heap slice where
// there is none). In the heap they counted toward the collector's goal,
// which is twice the live heap, so a million entries took about twice
// their bytes of RSS; outside it they take their own. Every read of a
// chunk's bytes happens under mu, and a chunk is unmapped under mu when
// it is evacuated or the store wiped; the rest are unmapped once the store
// is unreachable (a cleanup on the memory, which Forget drops while a
// lookup may still hold it).
//
// It keeps no checkpoint: a process reads a partition from the log start
// the first time, and from where it stopped while it keeps the partition.
type memory struct {
	mu   sync.Mutex
	seed maphash.Seed
	// hash, when not nil, replaces maphash (tests give every key one hash).
	hash func(key string) uint64

	// The index (index.go).
	tables [][]uint64 // each a power of two long
	counts []int      // entries in each table
	depth  []uint     // the hash bits each table's entries agree in
	dir    []int32    // the table for each value of the hash's top global bits
	global uint
	n      int // entries

	chunks [][]byte // nil where dropped; cap is the chunk's size
	live   []int    // bytes of live entries in each chunk
	free   []int    // indices of dropped chunks, for reuse
	cur    int      // the chunk being filled, -1 for none
	arena  int      // the chunks' sizes (their caps) together
	inUse  int      // live entries' bytes
	// mapped holds each chunk's mapping, for unmapping: apart from the
	// memory, so that the cleanup can have it without keeping the
	// memory reachable, and apart from chunks, so that only what mmap
	// returned is ever unmapped (a chunk appended past its capacity would
	// be a heap slice; reserve sees that none is).
	*mapped
	// topic is the first value's topic, its uvarint length first: a
	// value of it is kept without it (every value of a store has its
	// input topic).
	topic []byte
	// floor: less garbage than this is not compacted (compactFloor;
	// tests lower it to compact small stores).
	floor int
	// compacting: the garbage passed half the live bytes and is not yet
	// down to a quarter.
	compacting bool
}

// A slot: used bit, tag, chunk index, offset within the chunk.
const (
	offBits   = 20
	chunkBits = 20
	tagBits   = 63 - offBits - chunkBits
	slotUsed  = 1 << 63
	refMask   = 1<<(offBits+chunkBits) - 1

	minChunk = 4 << 10
	maxChunk = 1 << offBits
	// compactFloor: less garbage than this is never worth a compaction
	// (a small store would copy its entries over and over).
	compactFloor = 64 << 10
)

// errStoreFull is a store out of chunk indices: 2^20 chunks, a terabyte.
var errStoreFull = errors.New("ledger: memory store full")

func newMemory() *memory {
	m := &memory{seed: maphash.MakeSeed(), cur: -1, floor: compactFloor, mapped: &mapped{}}
	m.resetIndex()
	runtime.AddCleanup(m, (*mapped).release, m.mapped)
	return m
}

// mapped is the mappings of a memory's chunks, by chunk index (nil where
// unmapped).
type mapped struct {
	regions [][]byte
	// released is set once the cleanup has run (tests wait for it).
	released atomic.Bool
}

func (p *mapped) unmap(c int) {
	if c < len(p.regions) && p.regions[c] != nil {
		unmapChunk(p.regions[c])
		p.regions[c] = nil
	}
}

func (p *mapped) unmapAll() {
	for c := range p.regions {
		p.unmap(c)
	}
	p.regions = nil
}

// release is the cleanup of an unreachable memory.
func (p *mapped) release() {
	p.unmapAll()
	p.released.Store(true)
}

func (m *memory) saved() (checkpoint, error) { return checkpoint{}, nil }

func (m *memory) add(entries []kv, _ *checkpoint) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	written := 0
	for _, e := range entries {
		written += len(e.k) + len(e.v)
		h := m.sum(e.k)
		t, i, found := find(m, h, e.k)
		if found {
			// No garbage for a value kept already.
			if old, _ := m.stored(m.tables[t][i]); keepsOlder(old, e.v) || equal(m, m.tables[t][i], e.v) {
				continue
			}
		} else if m.full(t) {
			m.grow(t)
			t, i, _ = find(m, h, e.k)
		}
		ref, err := m.write(e.k, e.v)
		if err != nil {
			return err
		}
		if found {
			m.drop(m.tables[t][i])
		} else {
			m.n++
			m.counts[t]++
		}
		m.tables[t][i] = slotUsed | tagOf(h)<<(offBits+chunkBits) | ref
	}
	// Each byte written leaves at most one of garbage; evacuating the
	// sparsest chunks frees at least one byte for four copied.
	m.compact(maxChunk + 4*written)
	return nil
}

// get copies the value out: the arena's bytes are moved by a compaction.
func (m *memory) get(key string) ([]byte, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, i, found := find(m, m.sum(key), key)
	if !found {
		return nil, false, nil
	}
	v, elided := m.stored(m.tables[t][i])
	if !elided {
		return slices.Clone(v), true, nil
	}
	at, _ := topicAt(v)
	out := make([]byte, 0, len(v)+len(m.topic))
	return append(append(append(out, v[:at]...), m.topic...), v[at:]...), true, nil
}

func (m *memory) holds(key, value []byte) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, i, found := find(m, m.sumBytes(key), key)
	return found && equal(m, m.tables[t][i], value), nil
}

// forget scans every entry; the caller calls it once per scanShare of the
// window's movement. It reads the chunks in order, not through the index,
// whose slots lead all over them (at a million entries 90 ms against 213;
// the map of strings took 140-150), and looks up only the old entries'
// slots (an old entry its key's slot does not point at is garbage
// already). It takes the lock for one chunk at a time: under it whole, a
// million entries kept every lookup and add waiting for 90-139 ms. An
// entry that a compaction moves meanwhile, from a chunk not yet read to
// one read, is forgotten by the next call instead; get checks an entry's
// age anyway, so forget only bounds the memory.
func (m *memory) forget(since int64) {
	for c := 0; ; c++ {
		m.mu.Lock()
		if c >= len(m.chunks) {
			m.compact(maxChunk)
			m.mu.Unlock()
			return
		}
		m.forgetChunk(c, since)
		m.mu.Unlock()
	}
}

// forgetChunk drops chunk c's live entries made before since; the caller
// holds the lock.
func (m *memory) forgetChunk(c int, since int64) {
	b := m.chunks[c]
	for off := 0; off < len(b); {
		kl, n1 := binary.Uvarint(b[off:])
		vl, n2 := binary.Uvarint(b[off+n1:])
		keyAt := off + n1 + n2
		v := keyAt + int(kl>>1)
		end := v + int(vl)
		if valueAt(b[v:end]) < since {
			if t, i, live := m.slot(m.sumBytes(b[keyAt:v]), uint64(c)<<offBits|uint64(off)); live {
				m.drop(m.tables[t][i])
				m.delete(t, i)
			}
		}
		off = end
	}
}

func (m *memory) wipe() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.resetIndex()
	m.unmapAll()
	m.chunks, m.live, m.free, m.cur, m.arena, m.inUse, m.compacting = nil, nil, nil, -1, 0, 0, false
	return nil
}

func (m *memory) size() (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n, nil
}

func (m *memory) sum(key string) uint64 {
	if m.hash != nil {
		return m.hash(key)
	}
	return maphash.String(m.seed, key)
}

func (m *memory) sumBytes(key []byte) uint64 {
	if m.hash != nil {
		return m.hash(string(key))
	}
	return maphash.Bytes(m.seed, key)
}

// entry is the bytes of slot s's entry, where its key starts, and
// whether its value's topic was left out.
func (m *memory) entry(s uint64) (e []byte, keyAt, keyLen int, elided bool) {
	c := m.chunks[s>>offBits&(1<<chunkBits-1)][s&(1<<offBits-1):]
	kl, n1 := binary.Uvarint(c)
	vl, n2 := binary.Uvarint(c[n1:])
	return c[:n1+n2+int(kl>>1)+int(vl)], n1 + n2, int(kl >> 1), kl&1 == 1
}

func (m *memory) key(s uint64) []byte {
	e, at, n, _ := m.entry(s)
	return e[at : at+n]
}

// stored is slot s's value as kept: without its topic when elided. Its
// header (state, At) is the value's.
func (m *memory) stored(s uint64) (v []byte, elided bool) {
	e, at, n, elided := m.entry(s)
	return e[at+n:], elided
}

// equal reports whether slot s holds value v, its topic put back.
func equal[V string | []byte](m *memory, s uint64, v V) bool {
	kept, elided := m.stored(s)
	if !elided {
		return string(kept) == string(v)
	}
	at, _ := topicAt(kept)
	t := len(m.topic)
	return len(v) == len(kept)+t && string(kept[:at]) == string(v[:at]) &&
		string(m.topic) == string(v[at:at+t]) && string(kept[at:]) == string(v[at+t:])
}

// topicAt is where a value's topic (its uvarint length first) starts:
// after the header and the numbers (entry.go's layout).
func topicAt[V string | []byte](v V) (int, bool) {
	if len(v) < headerLen {
		return 0, false
	}
	i, which, ok := uvarintAt(v, headerLen)
	for b := range 5 { // the numbers present, partition, offset
		if ok && (b >= 3 || which&(1<<b) != 0) {
			i, _, ok = uvarintAt(v, i) // a varint has a uvarint's length
		}
	}
	return i, ok
}

// uvarintAt reads the uvarint at v[i:]: the index after it and its value.
func uvarintAt[V string | []byte](v V, i int) (next int, x uint64, ok bool) {
	for shift := 0; shift < 64 && i < len(v); shift += 7 {
		b := v[i]
		i++
		x |= uint64(b&0x7f) << shift
		if b < 0x80 {
			return i, x, true
		}
	}
	return 0, 0, false
}

// drop counts slot s's entry as garbage.
func (m *memory) drop(s uint64) {
	e, _, _, _ := m.entry(s)
	m.live[s>>offBits&(1<<chunkBits-1)] -= len(e)
	m.inUse -= len(e)
}

// write appends an entry to the arena and returns its place (a slot's
// chunk and offset bits). A value of the store's topic is kept without
// it (with its length, 1 + len(topic) bytes: 17 of about 100 for
// loyalty.purchase).
func (m *memory) write(key, value string) (uint64, error) {
	kl, head, tail := uint64(len(key))<<1, value, ""
	if at, ok := topicAt(value); ok {
		if next, t, ok := uvarintAt(value, at); ok && t <= uint64(len(value)-next) {
			topic := value[at : next+int(t)]
			if m.topic == nil {
				m.topic = []byte(topic)
			}
			if string(m.topic) == topic {
				kl, head, tail = kl|1, value[:at], value[next+int(t):]
			}
		}
	}
	vl := len(head) + len(tail)
	n := uvarintLen(int(kl)) + uvarintLen(vl) + len(key) + vl
	c, err := m.reserve(n)
	if err != nil {
		return 0, err
	}
	b := m.chunks[c]
	off := len(b)
	b = binary.AppendUvarint(b, kl)
	b = binary.AppendUvarint(b, uint64(vl))
	b = append(b, key...)
	b = append(b, head...)
	m.chunks[c] = append(b, tail...)
	m.live[c] += n
	m.inUse += n
	return uint64(c)<<offBits | uint64(off), nil
}

// reserve returns the chunk that n more bytes go to, a new one when the
// chunk being filled has no room.
func (m *memory) reserve(n int) (int, error) {
	if m.cur >= 0 && cap(m.chunks[m.cur])-len(m.chunks[m.cur]) >= n {
		return m.cur, nil
	}
	c := len(m.chunks)
	if len(m.free) > 0 {
		c, m.free = m.free[len(m.free)-1], m.free[:len(m.free)-1]
	} else if c == 1<<chunkBits {
		return 0, errStoreFull
	} else {
		m.chunks, m.live, m.regions = append(m.chunks, nil), append(m.live, 0), append(m.regions, nil)
	}
	// A chunk's size grows with the store: small stores stay small, and
	// the free end of the one being filled is at most an eighth of the
	// live bytes (rounded up) or maxChunk.
	size := min(maxChunk, max(minChunk, 1<<bits.Len(uint(m.inUse/8))))
	b, err := mapChunk(max(size, n))
	if err != nil {
		m.free = append(m.free, c)
		return 0, err
	}
	// The chunk's bytes are only ever appended within its capacity
	// (reserve's n is what the caller appends), so m.chunks[c] stays a
	// view of this mapping.
	m.chunks[c], m.regions[c], m.live[c], m.cur = b, b, 0, c
	m.arena += cap(b)
	return c, nil
}

// garbage is the chunks' bytes that hold no live entry, the free end of
// the chunk being filled aside.
func (m *memory) garbage() int {
	g := m.arena - m.inUse
	if m.cur >= 0 {
		g -= cap(m.chunks[m.cur]) - len(m.chunks[m.cur])
	}
	return g
}

// compact evacuates chunks, the smallest live share first, from when
// the garbage exceeds half the live bytes to when it is a quarter of
// them, a few at a time: a call copies about budget bytes at most, so a
// lookup waits for a few chunks' copy, not the store's (at a million
// entries a whole compaction held the lock for 190 ms).
func (m *memory) compact(budget int) {
	if !m.compacting {
		if g := m.garbage(); g <= m.inUse/2 || g < m.floor {
			return
		}
		m.compacting = true
		// The chunk being filled is evacuated like the others (its free
		// end counts as garbage from now): a store whose garbage is all
		// in it would otherwise free nothing.
		m.cur = -1
	}
	var order []int
	for c, b := range m.chunks {
		if b != nil && c != m.cur {
			order = append(order, c)
		}
	}
	// Smallest live share first: the least copied for the most freed.
	slices.SortFunc(order, func(a, b int) int {
		return m.live[a]*cap(m.chunks[b]) - m.live[b]*cap(m.chunks[a])
	})
	for _, c := range order {
		if m.garbage() <= m.inUse/4 {
			break
		}
		if budget <= 0 {
			return
		}
		budget -= m.live[c]
		if err := m.evacuate(c); err != nil {
			break // out of chunk indices or memory: the garbage stays
		}
	}
	// Done, or nothing left to evacuate but the chunk being filled.
	m.compacting = false
}

// evacuate copies chunk c's live entries to the chunk being filled and
// drops c. An entry is live when its key's slot points at it.
func (m *memory) evacuate(c int) error {
	b := m.chunks[c]
	for off := 0; off < len(b); {
		kl, n1 := binary.Uvarint(b[off:])
		vl, n2 := binary.Uvarint(b[off+n1:])
		keyAt := off + n1 + n2
		end := keyAt + int(kl>>1) + int(vl)
		t, i, live := m.slot(m.sumBytes(b[keyAt:keyAt+int(kl>>1)]), uint64(c)<<offBits|uint64(off))
		if live {
			// Chunk c is not the one being filled, so reserve never
			// returns it and b's bytes stay where they are.
			to, err := m.reserve(end - off)
			if err != nil {
				return err
			}
			o := len(m.chunks[to])
			m.chunks[to] = append(m.chunks[to], b[off:end]...)
			m.live[to] += end - off
			m.live[c] -= end - off
			m.tables[t][i] = m.tables[t][i]&^refMask | uint64(to)<<offBits | uint64(o)
		}
		off = end
	}
	// Every live entry moved: nothing of c is in use.
	m.arena -= cap(b)
	m.unmap(c)
	m.chunks[c], m.live[c] = nil, 0
	m.free = append(m.free, c)
	return nil
}

func uvarintLen(n int) int { return (bits.Len64(uint64(n)|1) + 6) / 7 }
