package config

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loyalty-bridge/loyalty-bridge/internal/tracing"
)

// --tracing is off by default, and set from a flag, its variable or the
// YAML file; a bad value of either setting is refused naming its flag.
func TestTracingSettings(t *testing.T) {
	c, err := parse(t, nil, creds)
	if err != nil {
		t.Fatal(err)
	}
	if c.Tracing.Exporter != tracing.Off || c.Tracing.SampleRatio != tracing.DefaultSampleRatio {
		t.Fatalf("defaults: %+v", c.Tracing)
	}
	env := maps.Clone(creds)
	env["LOYALTY_BRIDGE_TRACING"] = "otlp"
	env["LOYALTY_BRIDGE_TRACING_SAMPLE_RATIO"] = "0.1"
	if c, err = parse(t, nil, env); err != nil || c.Tracing.Build().Exporter != tracing.OTLP || c.Tracing.Build().SampleRatio != 0.1 {
		t.Fatalf("from variables: %+v, %v", c.Tracing, err)
	}
	yml := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(yml, []byte("tracing: stdout\ntracing-sample-ratio: 0.5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err = parse(t, []string{"--config", yml}, creds); err != nil || c.Tracing.Exporter != tracing.Stdout || c.Tracing.SampleRatio != 0.5 {
		t.Fatalf("from YAML: %+v, %v", c.Tracing, err)
	}
	_, err = parse(t, []string{"--tracing", "zipkin", "--tracing-sample-ratio", "1.5"}, creds)
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{`--tracing "zipkin": want off, otlp or stdout`, "--tracing-sample-ratio 1.5: want a number from 0 to 1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}
