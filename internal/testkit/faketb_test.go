package testkit

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"
)

// fakeTB stands in for a test so that a helper's failure can be checked:
// Fatal records the message and ends the helper's goroutine, as
// testing.T's does; Cleanup collects what runs keeps for the end.
type fakeTB struct {
	testing.TB // the real test, for Name, TempDir, Logf, …

	mu       sync.Mutex
	fatal    string
	cleanups []func()
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.fatal = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

func (f *fakeTB) Fatal(args ...any) { f.Fatalf("%s", fmt.Sprint(args...)) }

func (f *fakeTB) Cleanup(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cleanups = append(f.cleanups, fn)
}

// runFake runs helper with a fakeTB on a goroutine of its own, runs what it
// left for cleanup (last first), and returns its Fatal message ("" when it
// did not fail).
func runFake(t *testing.T, helper func(tb testing.TB)) string {
	t.Helper()
	f := &fakeTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		helper(f)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the helper neither returned nor failed within a minute")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
	return f.fatal
}
