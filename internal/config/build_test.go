package config

import (
	"context"
	"encoding/base64"
	"encoding/pem"
	"flag"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
)

// parseSections parses args into a full configuration without validating
// the partner API (these tests need Kafka and the registry only).
func parseSections(t *testing.T, args ...string) *Config {
	t.Helper()
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c, b := Define(fs)
	if err := b.Parse(args, func(string) (string, bool) { return "", false }); err != nil {
		t.Fatal(err)
	}
	if err := c.Kafka.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := c.Registry.Validate(); err != nil {
		t.Fatal(err)
	}
	return c
}

// --compression reaches the batches on the wire: a consumer sees the codec
// each record batch was written with.
func TestCompressionReachesTheWire(t *testing.T) {
	cluster := testkit.StartKafka(t, testkit.KafkaOptions{Topics: []testkit.TopicSet{{Partitions: 1, Names: []string{"t"}}}}).Fake
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// kgo's CompressionType: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.
	want := map[Compression]uint8{CompressNone: 0, CompressGzip: 1, CompressSnappy: 2, CompressLZ4: 3, CompressZstd: 4}
	for codec, attr := range want {
		c := parseSections(t, "--brokers", strings.Join(cluster.ListenAddrs(), ","), "--compression", string(codec))
		opts, err := c.Kafka.Build()
		if err != nil {
			t.Fatal(err)
		}
		cl, err := kgo.NewClient(append(opts, kgo.DefaultProduceTopic("t"), kgo.ConsumeTopics("t"))...)
		if err != nil {
			t.Fatal(err)
		}
		// Compressible, so that the producer keeps the compressed batch.
		value := []byte(strings.Repeat(string(codec)+" compressible ", 64))
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		found := false
		for !found {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("%s: record not read back", codec)
			}
			fs.EachRecord(func(r *kgo.Record) {
				if string(r.Value) == string(value) {
					found = true
					if got := r.Attrs.CompressionType(); got != attr {
						t.Errorf("--compression %s: batch written with codec %d, want %d", codec, got, attr)
					}
				}
			})
		}
		cl.Close()
	}
}

// The registry section reaches a TLS registry with its CA file and basic
// auth; without the CA the system roots refuse the test certificate.
func TestRegistryTLSAndAuth(t *testing.T) {
	reg := srfake.New(srfake.WithAuth("Basic " + base64.StdEncoding.EncodeToString([]byte("u:p"))))
	defer reg.Close()
	ts := httptest.NewUnstartedServer(reg.Handler())
	ts.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake is expected
	ts.StartTLS()
	defer ts.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name string
		args []string
		want string // "" succeeds
	}{
		{"CA and auth", []string{"--schema-registry-ca-file", ca, "--schema-registry-username", "u", "--schema-registry-password", "p"}, ""},
		{"no CA", []string{"--schema-registry-username", "u", "--schema-registry-password", "p"}, "certificate"},
		{"wrong password", []string{"--schema-registry-ca-file", ca, "--schema-registry-username", "u", "--schema-registry-password", "x"}, "not authorized"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := parseSections(t, append([]string{"--schema-registry-url", ts.URL}, tc.args...)...)
			cl, err := c.Registry.Build()
			if err != nil {
				t.Fatal(err)
			}
			_, err = cl.Subjects(ctx)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("subjects: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("want an error with %q, got %v", tc.want, err)
			}
		})
	}
	c := parseSections(t, "--schema-registry-url", ts.URL, "--schema-registry-ca-file", filepath.Join(t.TempDir(), "none.pem"))
	if _, err := c.Registry.Build(); err == nil || !strings.Contains(err.Error(), "--schema-registry-ca-file") {
		t.Fatalf("missing CA file: %v", err)
	}
}
