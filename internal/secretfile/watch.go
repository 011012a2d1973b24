package secretfile

import (
	"io/fs"
	"os"
	"slices"
	"sync"
	"syscall"
)

// Stamp identifies one version of a file by what a stat says of it: the
// device and inode, the size and the modification time. A file rewritten
// in place changes its size or mtime; a Kubernetes Secret volume swaps its
// `..data` symlink to a new directory, which gives the path a new inode
// (StampOf follows symlinks). A file that cannot be stat'ed has the zero
// Stamp, so its reappearance is a change too.
type Stamp struct {
	dev, ino uint64
	size     int64
	mtime    int64 // nanoseconds since the epoch
}

// StampOf stats path, following symlinks. It is cheap enough to call per
// record: one system call, no read.
func StampOf(path string) Stamp {
	st, err := os.Stat(path)
	if err != nil {
		return Stamp{}
	}
	return stampOf(st)
}

func stampOf(st fs.FileInfo) Stamp {
	s := Stamp{size: st.Size(), mtime: st.ModTime().UnixNano()}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		s.dev, s.ino = uint64(sys.Dev), uint64(sys.Ino) // Dev is int32 on some systems
	}
	return s
}

// Watch tells when any of a set of files has changed, by stat alone. Safe
// for concurrent use.
type Watch struct {
	paths []string

	mu   sync.Mutex
	last []Stamp
}

// NewWatch starts watching paths ("" entries are ignored) from their
// current state.
func NewWatch(paths ...string) *Watch {
	w := &Watch{paths: slices.DeleteFunc(slices.Clone(paths), func(p string) bool { return p == "" })}
	w.last = w.stamps()
	return w
}

func (w *Watch) stamps() []Stamp {
	out := make([]Stamp, len(w.paths))
	for i, p := range w.paths {
		out[i] = StampOf(p)
	}
	return out
}

// Changed reports whether any file changed since the previous call (since
// NewWatch for the first). A nil Watch never changes.
func (w *Watch) Changed() bool {
	if w == nil {
		return false
	}
	now := w.stamps()
	w.mu.Lock()
	defer w.mu.Unlock()
	changed := !slices.Equal(now, w.last)
	w.last = now
	return changed
}

// File is a secret file kept in memory and re-read when its Stamp changes:
// a rotated secret is picked up at the next Current, and Current costs a
// stat, no read, while the file stays as it is. Safe for concurrent use.
type File struct {
	path string

	mu    sync.Mutex
	data  []byte // last good content
	stamp Stamp  // of the file data came from
	// failed is the Stamp of the version whose read failed last (valid
	// when hasFailed): its failure is reported once.
	failed    Stamp
	hasFailed bool
}

// Open reads the file at path as Read does and keeps it.
func Open(path string) (f *File, warning string, err error) {
	data, st, err := read(path)
	if err != nil {
		return nil, "", err
	}
	return &File{path: path, data: data, stamp: stampOf(st)}, modeWarning(path, st), nil
}

// Path is the file's path.
func (f *File) Path() string { return f.path }

// Current returns the file's content, re-read if the file changed since
// the last read; changed says it was. A failed re-read leaves the last good
// content in place: Current returns it with the error, once per version of
// the file (then nil until the file changes again), so that a caller can
// log the failure without logging it per call. The error, like the
// warning, names the path, never the content. The returned slice must not
// be modified.
func (f *File) Current() (data []byte, changed bool, warning string, err error) {
	now := StampOf(f.path)
	f.mu.Lock()
	defer f.mu.Unlock()
	if now == f.stamp || (f.hasFailed && now == f.failed) {
		return f.data, false, "", nil
	}
	fresh, st, err := read(f.path)
	if err != nil {
		f.failed, f.hasFailed = now, true
		return f.data, false, "", err
	}
	f.data, f.stamp, f.hasFailed = fresh, stampOf(st), false
	return f.data, true, modeWarning(f.path, st), nil
}
