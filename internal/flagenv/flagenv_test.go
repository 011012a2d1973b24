package flagenv

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParsePrecedence(t *testing.T) {
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		args       []string
		env        map[string]string
		wantURL    string
		wantSecret string
		wantWait   time.Duration
	}{
		{"defaults", nil, nil, "http://default", "", time.Second},
		{"env", nil, map[string]string{"LB_API_BASE_URL": "http://env", "LB_WAIT": "3s"}, "http://env", "", 3 * time.Second},
		{"flag beats env", []string{"--base-url", "http://flag"}, map[string]string{"LB_API_BASE_URL": "http://env"}, "http://flag", "", time.Second},
		{"secret file", nil, map[string]string{"LB_CLIENT_SECRET_FILE": secretFile}, "http://default", "from-file", time.Second},
		{"secret env beats file", nil, map[string]string{"LB_CLIENT_SECRET": "direct", "LB_CLIENT_SECRET_FILE": secretFile}, "http://default", "direct", time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("x", flag.ContinueOnError)
			url := fs.String("base-url", "http://default", "service address")
			secret := fs.String("client-secret", "", "secret")
			wait := fs.Duration("wait", time.Second, "wait")
			b := New(fs, "LB_")
			b.Env("base-url", "LB_API_BASE_URL")
			b.Secret("client-secret", "")
			b.All()
			lookup := func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }
			if err := b.Parse(tt.args, lookup); err != nil {
				t.Fatal(err)
			}
			if *url != tt.wantURL || *secret != tt.wantSecret || *wait != tt.wantWait {
				t.Fatalf("got %q %q %v, want %q %q %v", *url, *secret, *wait, tt.wantURL, tt.wantSecret, tt.wantWait)
			}
		})
	}
}

func TestParseErrorsNameVariableNotValue(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Duration("wait", time.Second, "wait")
	fs.String("password", "", "password")
	b := New(fs, "LB_")
	b.Secret("password", "")
	b.All()
	env := map[string]string{"LB_WAIT": "not-a-duration-hunter2", "LB_PASSWORD_FILE": "/nonexistent/file"}
	err := b.Parse(nil, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err == nil {
		t.Fatal("want error")
	}
	msg := err.Error()
	for _, want := range []string{"LB_WAIT", "LB_PASSWORD_FILE"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not name %s", msg, want)
		}
	}
	if strings.Contains(msg, "hunter2") {
		t.Errorf("error %q echoes the value", msg)
	}
}

func TestUsageNamesVariable(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.String("password", "", "password")
	b := New(fs, "LB_")
	b.Secret("password", "")
	if got := fs.Lookup("password").Usage; got != "password (env LB_PASSWORD or LB_PASSWORD_FILE)" {
		t.Fatalf("usage = %q", got)
	}
}

func TestParseWithFile(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "bridge.yaml")
	if err := os.WriteFile(cfg, []byte("brokers: [a:9092, b:9092]\ngroup: from-file\nwait: 5s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("brokerz: x\nwait: soon\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr []string
		brokers string
		group   string
		wait    time.Duration
	}{
		{name: "file", args: []string{"--config", cfg}, brokers: "a:9092,b:9092", group: "from-file", wait: 5 * time.Second},
		{name: "env beats file", args: []string{"--config", cfg}, env: map[string]string{"LB_GROUP": "from-env"}, brokers: "a:9092,b:9092", group: "from-env", wait: 5 * time.Second},
		{name: "flag beats file", args: []string{"--config", cfg, "--wait", "1m"}, brokers: "a:9092,b:9092", group: "from-file", wait: time.Minute},
		{name: "file from env", env: map[string]string{"LB_CONFIG": cfg}, brokers: "a:9092,b:9092", group: "from-file", wait: 5 * time.Second},
		{name: "unknown and invalid keys", args: []string{"--config", bad}, wantErr: []string{`unknown setting "brokerz"`, "invalid value for wait"}},
		{name: "missing file", args: []string{"--config", filepath.Join(dir, "nope.yaml")}, wantErr: []string{"config file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("x", flag.ContinueOnError)
			fs.String("config", "", "file")
			brokers := fs.String("brokers", "127.0.0.1:9092", "brokers")
			group := fs.String("group", "loyalty-bridge", "group")
			wait := fs.Duration("wait", time.Second, "wait")
			b := New(fs, "LB_")
			b.All()
			err := b.ParseWithFile(tt.args, func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }, "config")
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatal("want error")
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if *brokers != tt.brokers || *group != tt.group || *wait != tt.wait {
				t.Fatalf("got %q %q %v", *brokers, *group, *wait)
			}
		})
	}
}

// A *_FILE secret goes through the secret-file checks: a world-readable
// file is a warning, a huge one an error naming the variable, and neither
// carries the content.
func TestSecretFileChecks(t *testing.T) {
	dir := t.TempDir()
	open := filepath.Join(dir, "open")
	if err := os.WriteFile(open, []byte("s3cret-canary\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o644); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge")
	if err := os.WriteFile(huge, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	parse := func(file string) (*Binder, *string, error) {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		pw := fs.String("password", "", "")
		b := New(fs, "X_")
		b.Secret("password", "")
		err := b.Parse(nil, func(k string) (string, bool) {
			if k == "X_PASSWORD_FILE" {
				return file, true
			}
			return "", false
		})
		return b, pw, err
	}
	b, pw, err := parse(open)
	if err != nil || *pw != "s3cret-canary" {
		t.Fatalf("read %q, err %v", *pw, err)
	}
	if w := b.Warnings(); len(w) != 1 || !strings.Contains(w[0], "X_PASSWORD_FILE") || strings.Contains(w[0], "canary") {
		t.Fatalf("warnings %q", w)
	}
	if _, _, err := parse(huge); err == nil || !strings.Contains(err.Error(), "X_PASSWORD_FILE") {
		t.Fatalf("a 1 MiB secret file: %v", err)
	}
}

// A file shared with other commands may hold their settings; other unknown
// keys are still refused.
func TestShareFile(t *testing.T) {
	yml := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(yml, []byte("brokers: k:9092\nmax-in-flight: 8\nmisspelt: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	brokers := fs.String("brokers", "", "")
	fs.String("config", "", "")
	b := New(fs, "X_")
	b.ShareFile("max-in-flight")
	b.All()
	err := b.ParseWithFile([]string{"--config", yml}, func(string) (string, bool) { return "", false }, "config")
	if err == nil || !strings.Contains(err.Error(), `"misspelt"`) || strings.Contains(err.Error(), "max-in-flight") {
		t.Fatalf("got %v", err)
	}
	if *brokers != "k:9092" {
		t.Fatalf("brokers %q", *brokers)
	}
}
