package ledger

import (
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"go.uber.org/zap"
)

// A checkpoint reads back as written, a next offset of 0 (a partition
// read while empty) included; a negative next offset, another version or
// another length does not read, and the store is read again from the
// topic.
func TestCheckpointRoundTrip(t *testing.T) {
	id := [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	for _, c := range []checkpoint{{}, {next: 0, firstAt: 1_795_000_000_123, topicID: id}, {next: 1 << 40, firstAt: -1}} {
		got, err := decodeCheckpoint(c.encode())
		if err != nil || got != c {
			t.Errorf("%+v read back as %+v, %v", c, got, err)
		}
	}
	long := append(checkpoint{next: 5}.encode(), 0)
	other := checkpoint{next: 5}.encode()
	other[0] = checkpointVersion + 1
	for name, b := range map[string][]byte{
		"negative next":   checkpoint{next: -1}.encode(),
		"another version": other,
		"a byte too many": long,
		"a byte short":    checkpoint{next: 5}.encode()[:32],
	} {
		if c, err := decodeCheckpoint(b); !errors.Is(err, errBadCheckpoint) {
			t.Errorf("%s: read as %+v, %v; want errBadCheckpoint", name, c, err)
		}
	}
}

// A disk store's sweep deletes an entry only if it is still old under the
// partition's write lock: an entry written between the sweep finding the
// key old and deleting it is kept, one made exactly at the window's start
// too (a fresh intent deleted would let its transaction be sent again).
func TestSweepKeepsAnEntryWrittenMeanwhile(t *testing.T) {
	d, err := openDisk(Options{Dir: t.TempDir(), CacheSize: 1 << 20, MemTableSize: 1 << 20}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := d.close(); err != nil {
			t.Error(err)
		}
	}()
	since := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	value := func(at time.Time) []byte {
		t.Helper()
		e := Entry{Kind: Accrual, TransactionID: "p-1", State: Intent, At: at, Topic: "in"}
		v, err := e.encode()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for i, tc := range []struct {
		name string
		at   time.Time // of the entry written meanwhile
	}{
		{"an hour inside the window", since.Add(time.Hour)},
		{"exactly at the window's start", since},
	} {
		p := d.partition("in", int32(i))
		key := "a/p-1"
		if err := p.add([]kv{{key, string(value(since.Add(-time.Hour)))}}, nil); err != nil {
			t.Fatal(err)
		}
		p.mu.Lock()
		swept := make(chan error, 1)
		go func() {
			_, err := p.sweep(since.UnixMilli())
			swept <- err
		}()
		waitForSweepToWaitForTheLock(t)
		// Written as p.add does, the lock being the test's.
		if err := d.db.Merge(p.key(tagEntry, key), value(tc.at), pebble.NoSync); err != nil {
			t.Fatal(err)
		}
		p.mu.Unlock()
		select {
		case err := <-swept:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the sweep never ended")
		}
		if v, found, err := p.get(key); err != nil || !found || string(v) != string(value(tc.at)) {
			t.Errorf("%s: an entry written during the sweep: found %v (%v), want it kept", tc.name, found, err)
		}
	}
}

// waitForSweepToWaitForTheLock returns once a sweep has found the old
// entries and waits for the partition's write lock to delete them.
func waitForSweepToWaitForTheLock(t *testing.T) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(10 * time.Second); ; {
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, "(*diskPartition).sweep") && strings.Contains(g, "sync.(*Mutex).Lock") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the sweep never waited for the partition's write lock")
		}
		time.Sleep(time.Millisecond) // polling, with a deadline
	}
}
