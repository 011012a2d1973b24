package ledger

import (
	"context"

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
