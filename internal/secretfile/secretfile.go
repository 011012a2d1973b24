package secretfile

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// MaxSize is the largest secret file Read accepts: room for a 4096-bit RSA
// key with its certificate chain, far below anything that could hurt.
const MaxSize = 64 << 10

// Read returns the content of the secret file at path, and a warning when
// its mode lets others read it (see the package doc). A file over MaxSize,
// a directory or a device is an error.
func Read(path string) (data []byte, warning string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, "", err
	}
	if !st.Mode().IsRegular() {
		return nil, "", fmt.Errorf("%s: not a regular file", path)
	}
	if st.Size() > MaxSize {
		return nil, "", fmt.Errorf("%s: %d bytes, larger than a secret file may be (%d)", path, st.Size(), MaxSize)
	}
	// Read one byte past the limit: the file may grow after the Stat.
	data, err = io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, "", err
	}
	if len(data) > MaxSize {
		return nil, "", fmt.Errorf("%s: larger than a secret file may be (%d bytes)", path, MaxSize)
	}
	return data, modeWarning(path, st), nil
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

func ownGroup(st fs.FileInfo) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	return int(sys.Gid) == os.Getegid()
}
