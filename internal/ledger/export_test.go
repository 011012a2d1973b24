package ledger

import (
	"context"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// Compact flushes and compacts the disk store, for the benchmarks' bytes
// on disk.
func (l *Ledger) Compact() error {
	return l.disk.use(func(db *pebble.DB) error {
		if err := db.Flush(); err != nil {
			return err
		}
		return db.Compact(context.Background(), []byte{0}, []byte{0xff}, true)
	})
}

// Sweeping reports whether the disk store is forgetting old entries of
// an input partition in the background.
func (l *Ledger) Sweeping(topic string, partition int32) bool {
	p, ok := l.store(topic, partition).b.(*diskPartition)
	return ok && p.sweeping.Load()
}

// Following is what the tail reads: for each ledger partition, the input
// topics whose stores it delivers to.
func (l *Ledger) Following() map[int32][]string {
	l.tail.mu.Lock()
	defer l.tail.mu.Unlock()
	out := map[int32][]string{}
	for p, f := range l.tail.parts {
		out[p] = []string{}
		for topic := range f.stores {
			out[p] = append(out[p], topic)
		}
		slices.Sort(out[p])
	}
	return out
}

// Watches are the watches open on key in ledger partition p.
func (l *Ledger) Watches(p int32, key string) []*Watch {
	l.tail.mu.Lock()
	defer l.tail.mu.Unlock()
	if f := l.tail.parts[p]; f != nil {
		return slices.Clone(f.watches[key])
	}
	return nil
}

// WatchedKeys is how many keys of ledger partition p have watches open.
func (l *Ledger) WatchedKeys(p int32) int {
	l.tail.mu.Lock()
	defer l.tail.mu.Unlock()
	if f := l.tail.parts[p]; f != nil {
		return len(f.watches)
	}
	return 0
}

// TailPos is the next offset the tail reads of ledger partition p, -1 when
// it does not read it.
func (l *Ledger) TailPos(p int32) int64 {
	l.tail.mu.Lock()
	defer l.tail.mu.Unlock()
	if f := l.tail.parts[p]; f != nil {
		return f.pos
	}
	return -1
}

// StoreSizes are the disk store's block cache and memtable sizes New
// settled on.
func (l *Ledger) StoreSizes() (cache, memTable int64) { return l.o.CacheSize, l.o.MemTableSize }

// SaveCheckpoint stores a checkpoint of input partition topic/partition at
// ledger offset next with no topic id, as a store read from brokers
// without topic ids holds.
func (l *Ledger) SaveCheckpoint(topic string, partition int32, next int64) error {
	return l.store(topic, partition).b.add(nil, &checkpoint{next: next})
}
