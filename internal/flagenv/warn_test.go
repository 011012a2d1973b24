package flagenv

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/secretfile"
)

// secretSet is a flag set with one secret, --password (X_PASSWORD, or
// X_PASSWORD_FILE), one plain setting and --config.
func secretSet() (*Binder, *string) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	pw := fs.String("password", "", "")
	fs.String("user", "", "")
	fs.String("config", "", "")
	b := New(fs, "X_")
	b.Secret("password", "")
	b.All()
	return b, pw
}

// A secret given as a flag is readable by every user in the process list:
// one warning naming the flag and the variables to use instead, never the
// value. From the environment, a *_FILE or the file it is not warned of.
func TestSecretOnCommandLineWarns(t *testing.T) {
	const canary = "hunter2-canary"
	secretFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(secretFile, []byte(canary), 0o600); err != nil {
		t.Fatal(err)
	}
	yml := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(yml, []byte("password: "+canary+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		warn bool
	}{
		{"flag", []string{"--password", canary}, nil, true},
		{"flag with =", []string{"-password=" + canary, "--user", "u"}, nil, true},
		{"flag beside its variable", []string{"--password", canary}, map[string]string{"X_PASSWORD": "other"}, true},
		{"variable", nil, map[string]string{"X_PASSWORD": canary}, false},
		{"file variable", nil, map[string]string{"X_PASSWORD_FILE": secretFile}, false},
		{"config file", []string{"--config", yml}, nil, false},
		{"a plain setting", []string{"--user", "u"}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, pw := secretSet()
			lookup := func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
			if err := b.ParseWithFile(tc.args, lookup, "config"); err != nil {
				t.Fatal(err)
			}
			if *pw == "" && tc.name != "a plain setting" {
				t.Fatal("no password read")
			}
			w := b.Warnings()
			if !tc.warn {
				if len(w) != 0 {
					t.Fatalf("warnings %q", w)
				}
				return
			}
			if len(w) != 1 || !strings.Contains(w[0], "--password is given on the command line") ||
				!strings.Contains(w[0], "X_PASSWORD_FILE") || strings.Contains(w[0], "canary") {
				t.Fatalf("warnings %q", w)
			}
		})
	}
	// Parse, without a file, warns too; a warning added again (a section
	// that validates twice) is there once.
	b, _ := secretSet()
	if err := b.Parse([]string{"--password", canary}, func(string) (string, bool) { return "", false }); err != nil {
		t.Fatal(err)
	}
	if len(b.Warnings()) != 1 {
		t.Fatalf("warnings %q", b.Warnings())
	}
	b.Warn(b.Warnings()[0])
	if len(b.Warnings()) != 1 {
		t.Fatalf("warnings %q", b.Warnings())
	}
}

// The --config file goes through secretfile.Read: bounded in size, a
// regular file only (a FIFO or a device is refused, not read), and its
// mode warned about when it sets a secret. A file of plain settings may be
// readable by all (a Kubernetes ConfigMap is mounted 0644).
func TestConfigFileChecks(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // WriteFile's mode is masked by the umask
			t.Fatal(err)
		}
		return p
	}
	const canary = "hunter2-canary"
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// A writer that never writes nor closes: reading the FIFO would wait
	// for ever. (Without one, opening it waits: secretfile.Read's stat
	// before open is what refuses that case.)
	w, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	for _, tc := range []struct {
		name    string
		path    string
		wantErr string
		warn    string
	}{
		{"plain settings", write("a.yaml", "user: u\n", 0o600), "", ""},
		{"plain settings, readable by all", write("b.yaml", "user: u\n", 0o644), "", ""},
		{"a secret, owner only", write("c.yaml", "password: "+canary+"\n", 0o600), "", ""},
		{"a secret, readable by all", write("d.yaml", "user: u\npassword: "+canary+"\n", 0o644), "", "config file sets --password: secret file"},
		{"an empty secret, readable by all", write("e.yaml", "password: ''\n", 0o644), "", ""},
		{"over the cap", write("f.yaml", "user: u\n#"+strings.Repeat("x", secretfile.MaxSize)+"\n", 0o600), "larger than a secret file may be", ""},
		{"a directory", dir, "not a regular file", ""},
		{"a device", os.DevNull, "not a regular file", ""},
		{"a FIFO", fifo, "not a regular file", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := secretSet()
			done := make(chan error, 1)
			go func() {
				done <- b.ParseWithFile([]string{"--config", tc.path}, func(string) (string, bool) { return "", false }, "config")
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("parse still reading the file after 10s")
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "config file") {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ws := b.Warnings()
			if tc.warn == "" {
				if len(ws) != 0 {
					t.Fatalf("warnings %q", ws)
				}
				return
			}
			if len(ws) != 1 || !strings.Contains(ws[0], tc.warn) || !strings.Contains(ws[0], "readable by every user") ||
				strings.Contains(ws[0], "canary") {
				t.Fatalf("warnings %q, want %q", ws, tc.warn)
			}
		})
	}
}
