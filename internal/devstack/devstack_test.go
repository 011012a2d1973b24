package devstack

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"go.uber.org/goleak"

	"github.com/loyalty-bridge/loyalty-bridge/internal/realkafka"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

const testSchema = `{"type":"record","name":"T","namespace":"t","fields":[{"name":"a","type":"string"}]}`

func startTest(t *testing.T, dir string) *Stack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Start(ctx, Options{DataDir: dir, KafkaAddr: "127.0.0.1:0", RegistryAddr: "127.0.0.1:0", SimAddr: "127.0.0.1:0",
		Partitions: 2, Topics: []string{"in", "in.result"}, Sim: sim.Options{Members: 3}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A restart on the same data dir keeps topics, records, schema ids and the
// partner key: what a developer who stops `dev` with Ctrl-C expects.
func TestRestartKeepsState(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	s := startTest(t, dir)
	reg, err := sr.NewClient(sr.URLs(s.RegistryURL))
	if err != nil {
		t.Fatal(err)
	}
	ss, err := reg.CreateSchema(ctx, "in-value", sr.Schema{Schema: testSchema})
	if err != nil {
		t.Fatal(err)
	}
	// The same schema under a second subject shares its id.
	if again, err := reg.CreateSchema(ctx, "in.result-value", sr.Schema{Schema: testSchema}); err != nil || again.ID != ss.ID {
		t.Fatalf("second subject: %v %+v", err, again)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "in", Key: []byte("k"), Value: []byte("v1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	resp, err := http.Get(s.SimURL + "/realms/loyalty-partner/protocol/openid-connect/certs")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("simulator JWKS: HTTP %d", resp.StatusCode)
	}
	key := s.PartnerKey
	s.Close()
	s.Close() // idempotent

	s2 := startTest(t, dir)
	defer s2.Close()
	if !key.Equal(s2.PartnerKey) {
		t.Fatal("partner key regenerated on restart")
	}
	reg2, err := sr.NewClient(sr.URLs(s2.RegistryURL))
	if err != nil {
		t.Fatal(err)
	}
	got, err := reg2.SchemaByVersion(ctx, "in-value", -1)
	if err != nil {
		t.Fatal(err)
	}
	if shared, err := reg2.SchemaByVersion(ctx, "in.result-value", -1); err != nil || shared.ID != ss.ID {
		t.Fatalf("shared schema after restart: %v %+v", err, shared)
	}
	if got.ID != ss.ID || got.Version != ss.Version {
		t.Fatalf("schema after restart: id %d v%d, want id %d v%d", got.ID, got.Version, ss.ID, ss.Version)
	}
	// A second registration of a new schema must not clash with the seeded id.
	next, err := reg2.CreateSchema(ctx, "other-value", sr.Schema{Schema: `{"type":"string"}`})
	if err != nil {
		t.Fatal(err)
	}
	if next.ID == ss.ID {
		t.Fatalf("new schema reused id %d", next.ID)
	}
	cl2, err := kgo.NewClient(kgo.SeedBrokers(s2.Brokers...), kgo.ConsumeTopics("in"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	for {
		fs := cl2.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatal("record not found after restart")
		}
		var found bool
		fs.EachRecord(func(r *kgo.Record) { found = found || string(r.Value) == "v1" })
		if found {
			break
		}
	}
}

func TestStartErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := Start(ctx, Options{KafkaAddr: "nope", RegistryAddr: "127.0.0.1:0", SimAddr: "127.0.0.1:0"}); err == nil {
		t.Fatal("bad kafka address accepted")
	}
	s := startTest(t, "")
	defer s.Close()
	// The registry's port is taken: a clear error, and nothing left running
	// (the Kafka cluster started before it is closed again).
	running := goleak.IgnoreCurrent()
	busy := s.RegistryURL[len("http://"):]
	_, err := Start(ctx, Options{KafkaAddr: "127.0.0.1:0", RegistryAddr: busy, SimAddr: "127.0.0.1:0"})
	if err == nil {
		t.Fatal("busy registry port accepted")
	}
	if msg := err.Error(); !strings.Contains(msg, "schema registry on "+busy) || !strings.Contains(msg, "address already in use") {
		t.Errorf("error %q does not say that the registry's address %s is taken", msg, busy)
	}
	goleak.VerifyNone(t, running)
}

// With Brokers the stack starts no kfake and creates its topics on the
// external cluster, replicated min(3, brokers) times and served by the time
// Start returns; a second Start on the same topics keeps them.
func TestExternalBrokers(t *testing.T) {
	seeds := realkafka.Brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	topics := []string{realkafka.Name(t, "in"), realkafka.Name(t, "in.result")}
	realkafka.DeleteAtEnd(t, seeds, topics)
	opts := Options{Brokers: seeds, RegistryAddr: "127.0.0.1:0", SimAddr: "127.0.0.1:0", Partitions: 2, Topics: topics}
	for range 2 {
		s, err := Start(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		if s.Cluster != nil {
			t.Fatal("a kfake cluster started beside the external one")
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	details, err := kadm.NewClient(cl).ListTopics(ctx, topics...)
	if err == nil {
		err = details.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	brokers, err := kadm.NewClient(cl).ListBrokers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, td := range details.Sorted() {
		if len(td.Partitions) != 2 || len(td.Partitions[0].Replicas) != min(3, len(brokers)) {
			t.Errorf("%s: %d partitions, %d replicas; want 2 and %d", td.Topic, len(td.Partitions), len(td.Partitions[0].Replicas), min(3, len(brokers)))
		}
	}
	// Served at once: a produce does not wait out a metadata back-off.
	pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
	defer pcancel()
	if err := cl.ProduceSync(pctx, &kgo.Record{Topic: topics[0], Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}
