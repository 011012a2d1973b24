package ledger

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// A replay's store left behind is removed by the next replay or the next
// start of the live store; one in use, one just made, and anything else
// under the directory are kept, also when the live store is wiped.
func TestReplayStoresLeftBehindAreSwept(t *testing.T) {
	parent := t.TempDir()
	mk := func(name string) string {
		t.Helper()
		dir := filepath.Join(parent, name)
		if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o700); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	left := mk("replay-left")
	held := mk("replay-held")
	other := mk("not-a-replay")
	lock, err := pebble.LockDirectory(held, vfs.Default)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()

	// The live store wiped: replay stores are not its own.
	if err := wipeDir(parent); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{left, held} {
		if _, err := os.Stat(dir); err != nil {
			t.Fatalf("wipe removed the replay store %s: %v", dir, err)
		}
	}
	mk("not-a-replay")

	// Just made: kept, whatever its lock says.
	sweepReplayDirs(parent, time.Now(), zap.NewNop())
	if _, err := os.Stat(left); err != nil {
		t.Fatalf("a store younger than %s removed: %v", staleAfter, err)
	}

	// Kept until exactly staleAfter old, removed then, and said so.
	info, err := os.Stat(left)
	if err != nil {
		t.Fatal(err)
	}
	sweepReplayDirs(parent, info.ModTime().Add(staleAfter-time.Nanosecond), zap.NewNop())
	if _, err := os.Stat(left); err != nil {
		t.Fatalf("a store a nanosecond younger than %s removed: %v", staleAfter, err)
	}
	core, logs := observer.New(zapcore.InfoLevel)
	sweepReplayDirs(parent, info.ModTime().Add(staleAfter), zap.New(core))
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Fatalf("the store a replay left behind is still there (%v)", err)
	}
	if n := logs.FilterMessageSnippet("removed the store a replay left behind").FilterField(zap.String("dir", left)).Len(); n != 1 {
		t.Errorf("%d lines saying %s was removed, want 1: %v", n, left, logs.All())
	}
	for _, dir := range []string{held, other} {
		if _, err := os.Stat(dir); err != nil {
			t.Fatalf("%s removed: %v", dir, err)
		}
	}

	// ReplayDir makes a new one beside them.
	dir, err := ReplayDir(parent, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(dir) != parent || filepath.Base(dir)[:len(replayDirPrefix)] != replayDirPrefix {
		t.Fatalf("replay store %s, want %s%s* under %s", dir, parent, replayDirPrefix, parent)
	}
}
