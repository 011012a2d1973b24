package secretfile

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"syscall"
)

// MaxSize is the largest secret file Read accepts: room for a 4096-bit RSA
// key with its certificate chain, far below anything that could hurt.
const MaxSize = 64 << 10

// Read returns the content of the secret file at path, and a warning when
// its mode lets others read it (see the package doc). A file over MaxSize,
// a directory, a FIFO or a device is an error.
func Read(path string) (data []byte, warning string, err error) {
	data, st, err := read(path)
	if err != nil {
		return nil, "", err
	}
	return data, modeWarning(path, st), nil
}

// read is Read, with the FileInfo of the file whose content it returns.
func read(path string) ([]byte, fs.FileInfo, error) {
	// Look before opening: opening a FIFO for reading blocks until a writer
	// comes, which would hang start-up on a wrong path.
	before, err := os.Stat(path)
	if err != nil {
		return nil, nil, err
	}
	if !before.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%s: not a regular file", path)
	}
	// O_NONBLOCK: should the path become a FIFO between the Stat and the
	// open, the open returns at once rather than wait for a writer; the
	// SameFile check below then refuses it. It changes nothing for a
	// regular file.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !st.Mode().IsRegular() || !os.SameFile(before, st) {
		return nil, nil, fmt.Errorf("%s: replaced while being opened; not read", path)
	}
	if st.Size() > MaxSize {
		return nil, nil, fmt.Errorf("%s: %d bytes, larger than a secret file may be (%d)", path, st.Size(), MaxSize)
	}
	// Read one byte past the limit: the file may grow after the Stat.
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, nil, err
	}
	if len(data) > MaxSize {
		return nil, nil, fmt.Errorf("%s: larger than a secret file may be (%d bytes)", path, MaxSize)
	}
	return data, st, nil
}

func modeWarning(path string, st fs.FileInfo) string {
	perm := st.Mode().Perm()
	switch {
	case perm&0o004 != 0:
		return fmt.Sprintf("secret file %s is readable by every user (mode %04o); make it 0400 or 0440", path, perm)
	case perm&0o040 != 0 && !ownGroup(st):
		return fmt.Sprintf("secret file %s is readable by its group, which is not this process's (mode %04o); make it 0400", path, perm)
	}
	return ""
}

// ownGroup reports whether the file's group is one the process is in: its
// effective group or a supplementary one (Kubernetes adds fsGroup as a
// supplementary group when the pod runs with another primary group).
func ownGroup(st fs.FileInfo) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	gid := int(sys.Gid)
	if gid == os.Getegid() {
		return true
	}
	groups, err := os.Getgroups()
	return err == nil && slices.Contains(groups, gid)
}
