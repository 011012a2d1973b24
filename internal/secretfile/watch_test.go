package secretfile

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// kubeSecret lays out a Secret volume as the kubelet does: the file is a
// symlink through `..data`, itself a symlink to a timestamped directory;
// rotate writes a new directory and swaps `..data`.
type kubeSecret struct {
	t   *testing.T
	dir string
	n   int
}

func (k *kubeSecret) rotate(content string) {
	k.t.Helper()
	k.n++
	ts := filepath.Join(k.dir, "..ts"+string(rune('a'+k.n)))
	if err := os.Mkdir(ts, 0o755); err != nil {
		k.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ts, "password"), []byte(content), 0o400); err != nil {
		k.t.Fatal(err)
	}
	tmp := filepath.Join(k.dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		k.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(k.dir, "..data")); err != nil {
		k.t.Fatal(err)
	}
}

func TestWatchAndFile(t *testing.T) {
	k := &kubeSecret{t: t, dir: t.TempDir()}
	k.rotate("one")
	p := filepath.Join(k.dir, "password")
	if err := os.Symlink(filepath.Join("..data", "password"), p); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(plain, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	w := NewWatch(p, "", plain)
	kf, _, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	pf, _, err := Open(plain)
	if err != nil {
		t.Fatal(err)
	}
	check := func(step string, f *File, wantData string, wantChanged, wantErr bool) {
		t.Helper()
		data, changed, _, err := f.Current()
		if string(data) != wantData || changed != wantChanged || (err != nil) != wantErr {
			t.Fatalf("%s: Current %q, changed %v, err %v; want %q, %v, error %v", step, data, changed, err, wantData, wantChanged, wantErr)
		}
	}
	for _, step := range []struct {
		name    string
		do      func()
		watch   bool   // Watch.Changed after the step
		f       *File  // which File to ask
		data    string // its content after the step
		changed bool
		err     bool
	}{
		{"nothing", func() {}, false, kf, "one", false, false},
		{"kubelet swaps ..data", func() { k.rotate("two") }, true, kf, "two", true, false},
		{"asked again", func() {}, false, kf, "two", false, false},
		// Same size, same second: the mtime's nanoseconds or the inode tell.
		{"rewritten in place", func() { rewrite(t, plain, "uno") }, true, pf, "uno", true, false},
		{"removed: the last good value stays, the failure is told once", func() { os.Remove(plain) }, true, pf, "uno", false, true},
		{"still missing", func() {}, false, pf, "uno", false, false},
		{"back", func() { rewrite(t, plain, "tres") }, true, pf, "tres", true, false},
	} {
		step.do()
		if got := w.Changed(); got != step.watch {
			t.Fatalf("%s: Changed %v", step.name, got)
		}
		check(step.name, step.f, step.data, step.changed, step.err)
	}
	var none *Watch
	if none.Changed() {
		t.Fatal("a nil Watch changed")
	}
}

func rewrite(t *testing.T, path, content string) {
	t.Helper()
	old, err := os.Stat(path)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err == nil { // make sure the mtime moves even on a coarse clock
		if err := os.Chtimes(path, time.Time{}, old.ModTime().Add(time.Second)); err != nil {
			t.Fatal(err)
		}
	}
}
