package ledger

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap"
)

// replayDirPrefix names the stores replays keep under the live store's
// directory (ReplayDir).
const replayDirPrefix = "replay-"

// staleAfter: a replay's store younger than this is never swept, even
// unlocked, because its replay may be between making it and opening it.
const staleAfter = time.Minute

// ReplayDir makes a store directory for one replay under parent (the live
// bridge's --ledger-dir, whose own store one process holds at a time), to
// be removed by the replay when it ends. It first removes what replays
// that did not end (a kill, a crash) left there: directories named like
// its own that no process holds locked and that are older than a minute.
func ReplayDir(parent string, log *zap.Logger) (string, error) {
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return "", fmt.Errorf("ledger store %s: %w", parent, err)
	}
	sweepReplayDirs(parent, time.Now(), log)
	dir, err := os.MkdirTemp(parent, replayDirPrefix)
	if err != nil {
		return "", fmt.Errorf("ledger store %s: %w", parent, err)
	}
	return dir, nil
}

// sweepReplayDirs removes the replay stores under parent that no process
// holds and that are older than staleAfter at now. Failures are logged:
// a leftover costs disk, not correctness.
func sweepReplayDirs(parent string, now time.Time, log *zap.Logger) {
	des, err := os.ReadDir(parent)
	if err != nil {
		log.Warn("ledger store: replay stores not swept", zap.String("dir", parent), zap.Error(err))
		return
	}
	for _, de := range des {
		if !de.IsDir() || !strings.HasPrefix(de.Name(), replayDirPrefix) {
			continue
		}
		dir := filepath.Join(parent, de.Name())
		removed, err := removeIfStale(dir, now)
		switch {
		case err != nil:
			log.Warn("ledger store: a replay's store not removed", zap.String("dir", dir), zap.Error(err))
		case removed:
			log.Info("ledger store: removed the store a replay left behind", zap.String("dir", dir))
		}
	}
}

// removeIfStale removes dir when it is older than staleAfter and its lock
// can be taken (Pebble's, a POSIX record lock: released when its process
// exits, however it exits).
func removeIfStale(dir string, now time.Time) (bool, error) {
	info, err := os.Stat(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, err
	}
	if now.Sub(info.ModTime()) < staleAfter {
		return false, nil
	}
	lock, err := pebble.LockDirectory(dir, vfs.Default)
	if err != nil {
		return false, nil // held: a replay is running
	}
	err = os.RemoveAll(dir)
	// Closing after the removal: a replay that starts on this directory
	// meanwhile finds it locked, or gone and made again by MkdirAll.
	_ = lock.Close()
	return err == nil, err
}
