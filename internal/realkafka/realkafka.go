package realkafka

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// EnvBrokers is the environment variable that names a real cluster's
// bootstrap brokers, comma separated.
const EnvBrokers = "LOYALTY_BRIDGE_TEST_BROKERS"

// Seeds returns the brokers listed in EnvBrokers, blanks dropped, or nil when
// it is unset or blank: then the caller uses kfake.
func Seeds() []string {
	var seeds []string
	for _, s := range strings.Split(os.Getenv(EnvBrokers), ",") {
		if s = strings.TrimSpace(s); s != "" {
			seeds = append(seeds, s)
		}
	}
	return seeds
}

// Brokers returns Seeds, or skips tb when EnvBrokers names no broker: for
// tests that mean something only against a real cluster.
func Brokers(tb testing.TB) []string {
	tb.Helper()
	seeds := Seeds()
	if len(seeds) == 0 {
		tb.Skipf("no real Kafka cluster: set %s (scripts/kafka start prints it)", EnvBrokers)
	}
	return seeds
}

// Name returns a topic or group name for tb that no other test, and no
// earlier run against the same cluster, uses: what, then tb's name made safe
// for Kafka (letters, digits, '.', '_', '-'), then 8 random hex digits.
// Kafka limits names to 249 characters; a long test name is cut.
func Name(tb testing.TB, what string) string {
	tb.Helper()
	var b strings.Builder
	b.WriteString(what)
	b.WriteByte('-')
	for _, r := range tb.Name() {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	name := b.String()
	if len(name) > 200 {
		name = name[:200]
	}
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	return name + "-" + hex.EncodeToString(suffix[:])
}

// SeedTopics creates topics with partitions each on the cluster at seeds,
// replicated as the cluster's default.replication.factor says, and returns
// once every broker's metadata lists every partition with a leader and every
// leader serves its partition. It is kfake.SeedTopics for a real cluster:
// there, a created topic reaches each broker's metadata a moment after
// CreateTopics returns, and its leaders take up their partitions a moment
// after that. A client that comes too early is told NOT_LEADER_FOR_PARTITION
// and retries only after its metadata back-off (kgo's MetadataMinAge, 5 s).
// The topics are deleted when tb ends. Failures fail tb.
func SeedTopics(tb testing.TB, seeds []string, partitions int32, topics ...string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), SeedTimeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		tb.Fatalf("realkafka: client: %v", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	created, err := adm.CreateTopics(ctx, partitions, -1, nil, topics...)
	if err == nil {
		err = created.Error()
	}
	if err != nil {
		tb.Fatalf("realkafka: create topics %v: %v", topics, err)
	}
	tb.Cleanup(func() { deleteTopics(tb, seeds, topics) })
	if err := waitListed(ctx, cl, partitions, topics); err != nil {
		tb.Fatalf("realkafka: topics %v created but not listed by every broker: %v", topics, err)
	}
	if err := waitServed(ctx, adm, partitions, topics); err != nil {
		tb.Fatalf("realkafka: topics %v created but not served by their leaders: %v", topics, err)
	}
}

// SeedTimeout bounds SeedTopics, and the deletion of its topics.
const SeedTimeout = 30 * time.Second

// waitListed polls the metadata of each broker the cluster lists until
// every one lists every topic with every partition led. The brokers are
// listed afresh on each pass: one killed a moment ago is listed until the
// controller fences it, and must then drop out of the wait.
func waitListed(ctx context.Context, cl *kgo.Client, partitions int32, topics []string) error {
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	adm := kadm.NewClient(cl)
	var last error
	for {
		brokers, err := adm.ListBrokers(ctx)
		if err == nil {
			for _, b := range brokers {
				resp, rerr := req.RequestWith(ctx, cl.Broker(int(b.NodeID)))
				if rerr == nil && !listed(resp, partitions) {
					rerr = errors.New("topics not listed yet")
				}
				if rerr != nil {
					err = fmt.Errorf("broker %d: %w", b.NodeID, rerr)
					break
				}
			}
		}
		if err == nil {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitServed polls ListOffsets, which each partition's leader answers, until
// every partition of topics answers without error.
func waitServed(ctx context.Context, adm *kadm.Client, partitions int32, topics []string) error {
	want := int(partitions) * len(topics)
	for {
		ends, err := adm.ListEndOffsets(ctx, topics...)
		if err == nil {
			err = ends.Error()
		}
		n := 0
		ends.Each(func(kadm.ListedOffset) { n++ })
		if err == nil && n == want {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %d of %d partitions, %v)", ctx.Err(), n, want, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func listed(resp *kmsg.MetadataResponse, partitions int32) bool {
	for _, t := range resp.Topics {
		if t.ErrorCode != 0 || int32(len(t.Partitions)) != partitions {
			return false
		}
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 || p.Leader < 0 {
				return false
			}
		}
	}
	return len(resp.Topics) > 0
}

func deleteTopics(tb testing.TB, seeds []string, topics []string) {
	ctx, cancel := context.WithTimeout(context.Background(), SeedTimeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		tb.Logf("realkafka: delete topics %v: %v", topics, err)
		return
	}
	defer cl.Close()
	resps, err := kadm.NewClient(cl).DeleteTopics(ctx, topics...)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		tb.Logf("realkafka: delete topics %v: %v", topics, err)
	}
}
