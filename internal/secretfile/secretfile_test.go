package secretfile

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, size int, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.Repeat("s", size)), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // WriteFile's mode is masked by the umask
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name    string
		path    string
		wantErr string
		warn    string
	}{
		{"owner only", write("a", 10, 0o400), "", ""},
		{"owner read-write", write("b", 10, 0o600), "", ""},
		{"world-readable", write("c", 10, 0o644), "", "readable by every user (mode 0644)"},
		// The test's files belong to the process's own group: the
		// Kubernetes fsGroup case, not warned about.
		{"group-readable, own group", write("d", 10, 0o440), "", ""},
		{"at the cap", write("e", MaxSize, 0o400), "", ""},
		{"over the cap", write("f", MaxSize+1, 0o400), "larger than a secret file may be", ""},
		{"a directory", dir, "not a regular file", ""},
		{"missing", filepath.Join(dir, "none"), "no such file", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, warning, err := Read(tc.path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(data) == 0 {
				t.Fatal("no content")
			}
			if (tc.warn == "") != (warning == "") || !strings.Contains(warning, tc.warn) {
				t.Fatalf("warning %q, want %q", warning, tc.warn)
			}
			if strings.Contains(warning, string(data)) {
				t.Fatal("warning carries the content")
			}
		})
	}
}

// A group-readable file of another group is readable by that group's
// members: warned about. Changing a file's group needs root or membership,
// so the test runs where it can.
func TestReadWarnsOfAnotherGroup(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s")
	if err := os.WriteFile(p, []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o440); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, -1, os.Getegid()+4242); err != nil {
		t.Skipf("cannot change the file's group here: %v", err)
	}
	_, warning, err := Read(p)
	if err != nil || !strings.Contains(warning, "readable by its group") {
		t.Fatalf("warning %q, err %v", warning, err)
	}
}

// A FIFO at the path is refused at once: opening it for reading would
// block until a writer came, hanging start-up.
func TestReadRefusesFIFO(t *testing.T) {
	p := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	errc := make(chan error, 1)
	go func() {
		_, _, err := Read(p)
		errc <- err
	}()
	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("err %v, want not a regular file", err)
		}
	case <-time.After(10 * time.Second):
		// Unblock the reader so that the test ends.
		if w, err := os.OpenFile(p, os.O_WRONLY, 0); err == nil {
			w.Close()
		}
		t.Fatal("Read of a FIFO blocked")
	}
}

// A file of a supplementary group of the process is the process's own
// group: not warned about. Setting the process's groups needs root.
func TestReadSupplementaryGroupIsOwn(t *testing.T) {
	groups, err := os.Getgroups()
	if err != nil {
		t.Skip(err)
	}
	gid := os.Getegid() + 4242
	if err := syscall.Setgroups(append(slices.Clone(groups), gid)); err != nil {
		t.Skipf("cannot set the process's groups here: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Setgroups(groups); err != nil {
			t.Errorf("restoring the groups: %v", err)
		}
	})
	p := filepath.Join(t.TempDir(), "s")
	if err := os.WriteFile(p, []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o440); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, -1, gid); err != nil {
		t.Skipf("cannot change the file's group here: %v", err)
	}
	_, warning, err := Read(p)
	if err != nil || warning != "" {
		t.Fatalf("warning %q, err %v", warning, err)
	}
}
