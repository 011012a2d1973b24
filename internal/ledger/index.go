package ledger

// The memory store's index finds an entry's slot by its key's hash, by
// extendible hashing: a directory, by the hash's top global bits, names
// one of many small open-addressing tables (linear probing), each of at
// most maxTable slots. A table past 3/4 full doubles while smaller than
// maxTable, and then splits in two by one more bit of the hash (or, when
// every key in it has that bit alike, doubles): growing moves at most
// maxTable entries, never the store's. One table doubling at a million
// entries held the store's lock for 170 ms.
//
// A slot is 0 when empty, else slotUsed, the hash's tag (bits 16 to 38,
// which neither the directory nor a table's position reads) and the
// entry's chunk and offset.

const (
	maxTable = 1024
	tagShift = 16
)

func tagOf(h uint64) uint64 { return h >> tagShift & (1<<tagBits - 1) }

// resetIndex empties the index: one table of 16 slots.
func (m *memory) resetIndex() {
	m.tables, m.counts, m.depth = [][]uint64{make([]uint64, 16)}, []int{0}, []uint{0}
	m.dir, m.global, m.n = []int32{0}, 0, 0
}

// table is the table of hash h. (A shift by 64 is 0: one table.)
func (m *memory) table(h uint64) int { return int(m.dir[h>>(64-m.global)]) }

// find is key's (hash h) table and slot, or the empty slot where it
// would go.
func find[K string | []byte](m *memory, h uint64, key K) (t, i int, found bool) {
	t = m.table(h)
	tab := m.tables[t]
	mask := len(tab) - 1
	tag := tagOf(h)
	for i = int(h) & mask; ; i = (i + 1) & mask {
		s := tab[i]
		if s == 0 {
			return t, i, false
		}
		if s>>(offBits+chunkBits)&(1<<tagBits-1) == tag && string(m.key(s)) == string(key) {
			return t, i, true
		}
	}
}

// full reports whether table t takes no more entry without growing.
func (m *memory) full(t int) bool { return (m.counts[t]+1)*4 > len(m.tables[t])*3 }

// grow makes room in table t.
func (m *memory) grow(t int) {
	old := m.tables[t]
	hs := make([]uint64, len(old)) // each entry's hash, read once
	d := m.depth[t]
	ones := 0
	for j, s := range old {
		if s != 0 {
			hs[j] = m.sumBytes(m.key(s))
			ones += int(hs[j] >> (63 - d) & 1)
		}
	}
	if len(old) < maxTable || ones == 0 || ones == m.counts[t] || d == 63 {
		m.tables[t] = make([]uint64, 2*len(old))
	} else {
		if d == m.global {
			dir := make([]int32, 2*len(m.dir))
			for i, x := range m.dir {
				dir[2*i], dir[2*i+1] = x, x
			}
			m.dir, m.global = dir, m.global+1
		}
		// Of the directory's entries for t, those whose next bit is 1
		// name the new table.
		u := int32(len(m.tables))
		for i, x := range m.dir {
			if int(x) == t && i>>(m.global-1-d)&1 == 1 {
				m.dir[i] = u
			}
		}
		m.tables[t], m.depth[t] = make([]uint64, len(old)), d+1
		m.tables, m.counts, m.depth = append(m.tables, make([]uint64, len(old))), append(m.counts, 0), append(m.depth, d+1)
	}
	m.counts[t] = 0
	for j, s := range old {
		if s == 0 {
			continue
		}
		u := m.table(hs[j])
		tab := m.tables[u]
		mask := len(tab) - 1
		i := int(hs[j]) & mask
		for tab[i] != 0 {
			i = (i + 1) & mask
		}
		tab[i] = s
		m.counts[u]++
	}
}

// delete empties slot i of table t, moving later entries of its cluster
// back (Knuth's algorithm R: no tombstones, so probes stay short).
func (m *memory) delete(t, i int) {
	tab := m.tables[t]
	mask := len(tab) - 1
	for j := i; ; {
		j = (j + 1) & mask
		s := tab[j]
		if s == 0 {
			break
		}
		home := int(m.sumBytes(m.key(s))) & mask
		// s stays unless its home is outside the cyclic range (i, j].
		if i <= j && (home <= i || home > j) || i > j && home <= i && home > j {
			tab[i] = s
			i = j
		}
	}
	tab[i] = 0
	m.counts[t]--
	m.n--
}

// slot is where the entry at ref (chunk and offset) of a key of hash h is
// indexed: its table and slot, found false when none is (it is garbage).
func (m *memory) slot(h, ref uint64) (t, i int, found bool) {
	t = m.table(h)
	tab := m.tables[t]
	mask := len(tab) - 1
	for i = int(h) & mask; tab[i] != 0; i = (i + 1) & mask {
		if tab[i]&refMask == ref {
			return t, i, true
		}
	}
	return t, i, false
}
