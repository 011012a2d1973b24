package realkafka

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/topicseed"
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
// leader serves its partition (topicseed.Create: it is kfake.SeedTopics for
// a real cluster). The topics are deleted when tb ends. Failures fail tb.
func SeedTopics(tb testing.TB, seeds []string, partitions int32, topics ...string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), SeedTimeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		tb.Fatalf("realkafka: client: %v", err)
	}
	defer cl.Close()
	created, err := topicseed.Create(ctx, cl, partitions, -1, false, topics...)
	DeleteAtEnd(tb, seeds, created)
	if err != nil {
		tb.Fatalf("realkafka: %v", err)
	}
}

// SeedTimeout bounds SeedTopics, and the deletion of its topics.
const SeedTimeout = 30 * time.Second

// DeleteAtEnd deletes topics and then groups from the cluster at seeds when
// tb ends: for topics and groups a harness made itself (SeedTopics deletes
// its own). Cleanups run last in first out, so call it before starting what
// uses them: members still in a group keep it from being deleted. Failures
// are logged, not fatal: the names are unique, and nothing reads them again.
func DeleteAtEnd(tb testing.TB, seeds []string, topics []string, groups ...string) {
	tb.Helper()
	if len(topics) == 0 && len(groups) == 0 {
		return
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), SeedTimeout)
		defer cancel()
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
		if err != nil {
			tb.Logf("realkafka: delete %v %v: %v", topics, groups, err)
			return
		}
		defer cl.Close()
		if len(topics) > 0 {
			if err := topicseed.Delete(ctx, cl, topics...); err != nil {
				tb.Logf("realkafka: %v", err)
			}
		}
		if len(groups) > 0 {
			resps, err := kadm.NewClient(cl).DeleteGroups(ctx, groups...)
			if err != nil {
				tb.Logf("realkafka: delete groups %v: %v", groups, err)
			}
			for _, r := range resps {
				// A test that never joined left no group behind.
				if r.Err != nil && !errors.Is(r.Err, kerr.GroupIDNotFound) {
					tb.Logf("realkafka: delete group %s: %v", r.Group, r.Err)
				}
			}
		}
	})
}
