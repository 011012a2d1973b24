package config

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// What WriteYAML writes reads back as the same settings, secrets masked.
func TestWriteYAMLReadsBack(t *testing.T) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	_, b := Define(fs)
	env := map[string]string{"LOYALTY_BRIDGE_API_PASSWORD": "s3cret: #1", "LOYALTY_BRIDGE_BROKERS": "k1:9092,k2:9092"}
	if err := b.Parse([]string{"--group", "a group", "--api-base-url", "https://partner.example/x?y=1&z"},
		func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	WriteYAML(&out, b, "config")
	if strings.Contains(out.String(), "s3cret") || !strings.Contains(out.String(), `password: "********"`) ||
		strings.Contains(out.String(), "\nconfig:") {
		t.Fatalf("output:\n%s", out.String())
	}

	file := filepath.Join(t.TempDir(), "run.yaml")
	if err := os.WriteFile(file, out.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	fs2 := flag.NewFlagSet("run", flag.ContinueOnError)
	fs2.SetOutput(io.Discard)
	_, b2 := Define(fs2)
	if err := b2.ParseWithFile([]string{"--config", file}, func(string) (string, bool) { return "", false }, "config"); err != nil {
		t.Fatal(err)
	}
	fs.VisitAll(func(f *flag.Flag) {
		got := fs2.Lookup(f.Name).Value.String()
		switch {
		case f.Name == "config":
		case f.Name == "password":
			if got != "********" {
				t.Errorf("password read back as %q", got)
			}
		case got != f.Value.String():
			t.Errorf("%s: wrote %q, read back %q", f.Name, f.Value.String(), got)
		}
	})
}
