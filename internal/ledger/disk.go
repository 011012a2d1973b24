package ledger

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap"
)

// DefaultCacheSize is the disk store's block cache, shared by every
// partition of the process: lookups of recent transactions (a duplicate
// usually follows its first copy within minutes) and the bloom filters of
// the newest tables stay in memory; older ones are read from the page
// cache or the disk.
const DefaultCacheSize = 64 << 20

// DefaultMemTableSize is the size of each of the disk store's memtables
// (up to memTables of them, being filled and being flushed: 64 MiB at
// most, with DefaultCacheSize 128 MiB for the store): one set for the
// process, however many partitions it keeps, and large enough that a
// restore's writes flush in few tables.
const DefaultMemTableSize = 16 << 20

// memTables is how many memtables may queue before writes wait for a
// flush.
const memTables = 4

// Why Pebble and not bbolt: the store takes a stream of writes with
// random keys (transaction ids; a restore's million entries, the
// bridge's intents and settled entries), which an LSM tree appends
// sequentially and a B+tree (bbolt) rewrites page by page in place with
// one writer at a time; lookups are mostly misses (a new transaction),
// which Pebble's bloom filters answer without reading a data block; and a
// partition wiped (its topic recreated) is one range deletion, where bbolt
// would delete key by key. One DB for the process, each partition under a
// key prefix: one block cache, one set of memtables and one WAL however
// many partitions the process keeps, where a DB per partition would
// multiply the memtables by the partitions.
//
// Keys:
//
//	'p' uvarint(len(topic)) topic partition(4, big-endian)   prefix of an input partition
//	prefix 'c'                                                its checkpoint
//	prefix 'e' record key                                     an entry: its record value
const (
	tagCheckpoint = 'c'
	tagEntry      = 'e'
	tagEnd        = 0xff // above every tag: the end of a prefix's keys
)

// mergerName names the put rule in the DB's files: a DB written with one
// rule is not opened with another.
const mergerName = "loyalty-bridge.ledger.latest-settled.v1"

// disk is the process's Pebble DB under Options.Dir.
type disk struct {
	dir    string
	log    *zap.Logger
	lock   *pebble.Lock
	health io.Closer // the disk-health checks' goroutine
	db     *pebble.DB

	// mu guards closed: every use of db holds it for reading, Close for
	// writing, so nothing uses db once closed.
	mu     sync.RWMutex
	closed bool
	stop   chan struct{} // closed by close: sweeps end
	sweeps sync.WaitGroup
}

// errClosed is what Intend and the disk store return once Close has
// begun.
var errClosed = errors.New("ledger: closed")

// openDisk opens (or creates) the store under dir. The directory is
// locked first, so that a store in use by another process is refused, not
// taken for a corrupt one; a store that does not open is wiped (the topic
// is the truth, and is read again) and opened afresh.
func openDisk(o Options, log *zap.Logger) (*disk, error) {
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("ledger store %s: %w", o.Dir, err)
	}
	lock, err := pebble.LockDirectory(o.Dir, vfs.Default)
	if err != nil {
		return nil, fmt.Errorf("ledger store %s: in use by another process? %w", o.Dir, err)
	}
	sweepReplayDirs(o.Dir, time.Now(), log)
	// Pebble's own disk-health checks, with their goroutine ours to stop
	// (Pebble's default leaves it running when an Open fails).
	fs, health := vfs.WithDiskHealthChecks(vfs.Default, 5*time.Second, nil, func(info vfs.DiskSlowInfo) {
		log.Warn("ledger store: slow disk", zap.String("path", info.Path), zap.Duration("duration", info.Duration))
	})
	d := &disk{dir: o.Dir, log: log, lock: lock, health: health, stop: make(chan struct{})}
	fail := func(err error) (*disk, error) {
		_ = health.Close()
		_ = lock.Close()
		return nil, err
	}
	cache := pebble.NewCache(o.CacheSize)
	defer cache.Unref() // the DB holds its own reference
	opts := func() *pebble.Options {
		po := &pebble.Options{
			Cache:                       cache,
			MemTableSize:                uint64(o.MemTableSize),
			MemTableStopWritesThreshold: memTables,
			Merger:                      &pebble.Merger{Name: mergerName, Merge: mergeLatest},
			Lock:                        lock,
			FS:                          fs,
			Logger:                      pebbleLogger{log.Named("pebble")},
			FormatMajorVersion:          pebble.FormatNewest,
		}
		for i := range po.Levels {
			po.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		}
		return po
	}
	d.db, err = pebble.Open(o.Dir, opts())
	if err != nil {
		log.Warn("ledger store unreadable: wiped, its partitions are read again from the ledger topic", zap.String("dir", o.Dir), zap.Error(err))
		if werr := wipeDir(o.Dir); werr != nil {
			return fail(fmt.Errorf("ledger store %s: unreadable (%w), and wiping it failed: %w", o.Dir, err, werr))
		}
		if d.db, err = pebble.Open(o.Dir, opts()); err != nil {
			return fail(fmt.Errorf("ledger store %s: %w", o.Dir, err))
		}
	}
	return d, nil
}

// wipeDir removes everything in dir but the lock file and the stores of
// replays (ReplayDir), which may be running.
func wipeDir(dir string) error {
	des, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, de := range des {
		if de.Name() == "LOCK" || (de.IsDir() && strings.HasPrefix(de.Name(), replayDirPrefix)) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, de.Name())); err != nil {
			return err
		}
	}
	return nil
}

// close ends the sweeps and closes the DB; later uses fail with
// errClosed.
func (d *disk) close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	close(d.stop)
	d.mu.Unlock()
	d.sweeps.Wait()
	err := errors.Join(d.db.Close(), d.health.Close(), d.lock.Close())
	if err != nil {
		return fmt.Errorf("ledger store %s: close: %w", d.dir, err)
	}
	return nil
}

// use runs f with the DB unless it is closed.
func (d *disk) use(f func(db *pebble.DB) error) error {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.closed {
		return errClosed
	}
	return f(d.db)
}

// partition is the backend of one input partition.
func (d *disk) partition(topic string, partition int32) *diskPartition {
	p := make([]byte, 0, 1+binary.MaxVarintLen64+len(topic)+4)
	p = append(p, 'p')
	p = binary.AppendUvarint(p, uint64(len(topic)))
	p = append(p, topic...)
	p = binary.BigEndian.AppendUint32(p, uint32(partition))
	return &diskPartition{d: d, prefix: p}
}

// diskPartition is an input partition's entries in the process's DB.
type diskPartition struct {
	d      *disk
	prefix []byte
	// mu orders the writes with the sweep's deletions: a sweep deletes
	// an entry only while no write can replace it.
	mu       sync.Mutex
	sweeping atomic.Bool
}

func (p *diskPartition) key(tag byte, k string) []byte {
	b := make([]byte, 0, len(p.prefix)+1+len(k))
	b = append(append(b, p.prefix...), tag)
	return append(b, k...)
}

func (p *diskPartition) saved() (c checkpoint, err error) {
	err = p.d.use(func(db *pebble.DB) error {
		v, closer, err := db.Get(p.key(tagCheckpoint, ""))
		if errors.Is(err, pebble.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		defer closer.Close()
		c, err = decodeCheckpoint(v)
		return err
	})
	return c, err
}

// add writes entries as merges (the put rule is the merge operator, so a
// write needs no read) and cp in one batch. Not synced: the WAL keeps
// batches in order, so a crash loses a suffix of them at most, and a
// checkpoint never survives without its entries; what is lost is read
// again from the topic.
func (p *diskPartition) add(entries []kv, cp *checkpoint) error {
	return p.d.use(func(db *pebble.DB) error {
		b := db.NewBatch()
		defer b.Close()
		for _, e := range entries {
			if err := b.Merge(p.key(tagEntry, e.k), []byte(e.v), nil); err != nil {
				return err
			}
		}
		if cp != nil {
			if err := b.Set(p.key(tagCheckpoint, ""), cp.encode(), nil); err != nil {
				return err
			}
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		return b.Commit(pebble.NoSync)
	})
}

func (p *diskPartition) get(key string) (v []byte, found bool, err error) {
	err = p.d.use(func(db *pebble.DB) error {
		b, closer, err := db.Get(p.key(tagEntry, key))
		if errors.Is(err, pebble.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		v, found = bytes.Clone(b), len(b) >= headerLen
		return closer.Close()
	})
	return v, found, err
}

func (p *diskPartition) holds(key, value []byte) (bool, error) {
	v, found, err := p.get(string(key))
	return found && bytes.Equal(v, value), err
}

func (p *diskPartition) wipe() error {
	return p.d.use(func(db *pebble.DB) error {
		p.mu.Lock()
		defer p.mu.Unlock()
		return db.DeleteRange(p.prefix, append(bytes.Clone(p.prefix), tagEnd), pebble.Sync)
	})
}

func (p *diskPartition) size() (n int, err error) {
	err = p.d.use(func(db *pebble.DB) error {
		it, err := db.NewIter(&pebble.IterOptions{LowerBound: p.key(tagEntry, ""), UpperBound: p.key(tagEntry+1, "")})
		if err != nil {
			return err
		}
		for it.First(); it.Valid(); it.Next() {
			n++
		}
		return errors.Join(it.Error(), it.Close())
	})
	return n, err
}

// sweepChunk is how many entries a sweep reads at a time: the DB is held
// (against Close) for one chunk, and the partition's writes wait for the
// deletion of one chunk's old entries at most.
const sweepChunk = 4096

// forget starts a sweep of the partition's entries made before since,
// unless one is running: the lookup that notices the window has moved
// does not wait for it.
func (p *diskPartition) forget(since int64) {
	if !p.sweeping.CompareAndSwap(false, true) {
		return
	}
	d := p.d
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.closed {
		p.sweeping.Store(false)
		return
	}
	d.sweeps.Add(1)
	go func() {
		defer d.sweeps.Done()
		defer p.sweeping.Store(false)
		n, err := p.sweep(since)
		if err != nil && !errors.Is(err, errClosed) {
			d.log.Warn("ledger store: forgetting entries past the window", zap.Error(err))
			return
		}
		d.log.Debug("ledger store: entries past the window forgotten", zap.Int("entries", n))
	}()
}

// sweep deletes the entries made before since, a chunk at a time: old
// ones are found without a lock, then each is read again under the
// partition's write lock and deleted only if still old (an intent written
// meanwhile is never deleted with its old value).
func (p *diskPartition) sweep(since int64) (deleted int, err error) {
	from, end := p.key(tagEntry, ""), p.key(tagEntry+1, "")
	for from != nil {
		select {
		case <-p.d.stop:
			return deleted, errClosed
		default:
		}
		var old [][]byte
		err := p.d.use(func(db *pebble.DB) error {
			it, err := db.NewIter(&pebble.IterOptions{LowerBound: from, UpperBound: end})
			if err != nil {
				return err
			}
			from = nil
			n := 0
			for it.First(); it.Valid(); it.Next() {
				if n++; n > sweepChunk {
					from = bytes.Clone(it.Key())
					break
				}
				v, err := it.ValueAndErr()
				if err != nil {
					return errors.Join(err, it.Close())
				}
				if len(v) < headerLen || valueAt(string(v[:headerLen])) < since {
					old = append(old, bytes.Clone(it.Key()))
				}
			}
			return errors.Join(it.Error(), it.Close())
		})
		if err != nil {
			return deleted, err
		}
		if len(old) == 0 {
			continue
		}
		err = p.d.use(func(db *pebble.DB) error {
			p.mu.Lock()
			defer p.mu.Unlock()
			b := db.NewBatch()
			defer b.Close()
			for _, k := range old {
				v, closer, err := db.Get(k)
				if errors.Is(err, pebble.ErrNotFound) {
					continue
				}
				if err != nil {
					return err
				}
				stale := len(v) < headerLen || valueAt(string(v[:headerLen])) < since
				if err := closer.Close(); err != nil {
					return err
				}
				if stale {
					if err := b.Delete(k, nil); err != nil {
						return err
					}
					deleted++
				}
			}
			return b.Commit(pebble.NoSync)
		})
		if err != nil {
			return deleted, err
		}
	}
	return deleted, nil
}

// mergeLatest is the put rule as Pebble's merge operator: a key's value
// is its last settled value, or its last value when none is settled.
func mergeLatest(_, value []byte) (pebble.ValueMerger, error) {
	return &latest{v: bytes.Clone(value)}, nil
}

type latest struct{ v []byte }

// settled is false for a value too short to have a state: it never wins
// over one that has.
func settled(v []byte) bool { return len(v) >= headerLen && v[1] == stateSettled }

func (l *latest) MergeNewer(value []byte) error {
	if settled(value) || !settled(l.v) {
		l.v = bytes.Clone(value)
	}
	return nil
}

func (l *latest) MergeOlder(value []byte) error {
	if settled(value) && !settled(l.v) {
		l.v = bytes.Clone(value)
	}
	return nil
}

func (l *latest) Finish(bool) ([]byte, io.Closer, error) { return l.v, nil, nil }

// pebbleLogger writes Pebble's messages to the process's logger.
type pebbleLogger struct{ l *zap.Logger }

func (p pebbleLogger) Infof(format string, args ...any) { p.l.Debug(fmt.Sprintf(format, args...)) }
func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Warn(fmt.Sprintf(format, args...))
}

// Fatalf is Pebble's for a broken invariant, after which it must not
// continue: the process exits, and its partitions are read again from the
// topic by their next owner.
func (p pebbleLogger) Fatalf(format string, args ...any) { p.l.Fatal(fmt.Sprintf(format, args...)) }
