package realkafka_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/loyalty-bridge/loyalty-bridge/internal/realkafka"
	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSeeds(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want []string
	}{
		{"", nil},
		{" , ", nil},
		{"127.0.0.1:19092", []string{"127.0.0.1:19092"}},
		{"127.0.0.1:19092, 127.0.0.1:19093,", []string{"127.0.0.1:19092", "127.0.0.1:19093"}},
	} {
		t.Setenv(realkafka.EnvBrokers, tc.env)
		if got := realkafka.Seeds(); strings.Join(got, "|") != strings.Join(tc.want, "|") || (got == nil) != (tc.want == nil) {
			t.Errorf("%s=%q: Seeds() = %q, want %q", realkafka.EnvBrokers, tc.env, got, tc.want)
		}
	}
}

func TestBrokersSkipsWithoutCluster(t *testing.T) {
	t.Setenv(realkafka.EnvBrokers, "")
	ran := false
	t.Run("inner", func(t *testing.T) {
		realkafka.Brokers(t)
		ran = true
	})
	if ran {
		t.Fatal("Brokers did not skip with no brokers named")
	}
}

func TestName(t *testing.T) {
	valid := regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)
	a, b := realkafka.Name(t, "in"), realkafka.Name(t, "in")
	if a == b {
		t.Errorf("two names are equal: %s", a)
	}
	if !strings.HasPrefix(a, "in-TestName-") || !valid.MatchString(a) {
		t.Errorf("Name = %q: want in-TestName-<hex>, a legal topic name", a)
	}
	t.Run(strings.Repeat("sub test/", 40), func(t *testing.T) {
		if n := realkafka.Name(t, "group"); !valid.MatchString(n) {
			t.Errorf("Name = %q (%d chars): not a legal topic name", n, len(n))
		}
	})
}

// TestRealBroker shows that the cluster in LOYALTY_BRIDGE_TEST_BROKERS is a
// Kafka the bridge can use: it creates topics with kadm (SeedTopics),
// produces and consumes in a group and commits the group's offset, and runs
// the exactly-once round the pipeline runs (consume, produce, commit offsets
// in one transaction), with an aborted transaction that a read_committed
// reader must not see.
func TestRealBroker(t *testing.T) {
	seeds := realkafka.Brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	admCl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	meta, err := adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	t.Logf("cluster %s: %d broker(s), controller %d", meta.Cluster, len(meta.Brokers), meta.Controller)

	in, out := realkafka.Name(t, "in"), realkafka.Name(t, "out")
	group := realkafka.Name(t, "group")
	realkafka.DeleteAtEnd(t, seeds, nil, group) // after SeedTopics' deletion: cleanups run last first
	realkafka.SeedTopics(t, seeds, 3, in, out)

	t.Run("produce, consume in a group, commit", func(t *testing.T) {
		prod, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(in))
		if err != nil {
			t.Fatal(err)
		}
		defer prod.Close()
		want := &kgo.Record{Key: []byte("member-1"), Value: []byte("hello")}
		if err := prod.ProduceSync(ctx, want).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}

		cons, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(in),
			kgo.ConsumerGroup(group), kgo.DisableAutoCommit(), fetchMaxWait)
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		got := pollOne(ctx, t, cons)
		if string(got.Value) != "hello" || got.Partition != want.Partition || got.Offset != want.Offset {
			t.Fatalf("consumed %s/%d@%d %q, want %s/%d@%d %q",
				got.Topic, got.Partition, got.Offset, got.Value, in, want.Partition, want.Offset, want.Value)
		}
		if err := cons.CommitRecords(ctx, got); err != nil {
			t.Fatalf("commit: %v", err)
		}
		waitCommitted(ctx, t, adm, group, in, got.Partition, got.Offset+1)
	})

	t.Run("transactions: consume, produce and commit in one", func(t *testing.T) {
		// An aborted transaction first: its record must never be read.
		txn, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(out),
			kgo.TransactionalID(realkafka.Name(t, "txn")), kgo.TransactionTimeout(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer txn.Close()
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := txn.ProduceSync(ctx, &kgo.Record{Key: []byte("member-1"), Value: []byte("aborted")}).FirstErr(); err != nil {
			t.Fatalf("produce in a transaction: %v", err)
		}
		if err := txn.EndTransaction(ctx, kgo.TryAbort); err != nil {
			t.Fatalf("abort: %v", err)
		}

		// The pipeline's exactly-once round: the group session reads the
		// input, the output and the input's offset commit in one transaction.
		sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(seeds...),
			kgo.TransactionalID(realkafka.Name(t, "session")), kgo.TransactionTimeout(30*time.Second),
			kgo.ConsumeTopics(in), kgo.ConsumerGroup(group), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.DefaultProduceTopic(out), fetchMaxWait)
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close()
		prod, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(in))
		if err != nil {
			t.Fatal(err)
		}
		defer prod.Close()
		if err := prod.ProduceSync(ctx, &kgo.Record{Key: []byte("member-1"), Value: []byte("second")}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		var rec *kgo.Record
		for rec == nil {
			fs := sess.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				t.Fatalf("poll: %v", err)
			}
			fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
			fs.EachRecord(func(r *kgo.Record) {
				if string(r.Value) == "second" {
					rec = r
				}
			})
		}
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		if err := sess.Client().ProduceSync(ctx, &kgo.Record{Key: rec.Key, Value: []byte("committed")}).FirstErr(); err != nil {
			t.Fatalf("produce in the session: %v", err)
		}
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil || !committed {
			t.Fatalf("end the session's transaction: committed %v, %v", committed, err)
		}

		// End returns once the coordinator has logged the commit; the
		// offsets become visible when its markers are written, a moment on.
		waitCommitted(ctx, t, adm, group, in, rec.Partition, rec.Offset+1)

		// Both transactions wrote under the same key, so to one partition:
		// read_committed reads "committed" there and nothing before it.
		reader, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(out),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()), fetchMaxWait)
		if err != nil {
			t.Fatal(err)
		}
		defer reader.Close()
		got := pollOne(ctx, t, reader)
		if string(got.Value) != "committed" {
			t.Fatalf("read_committed read %q first, want %q", got.Value, "committed")
		}
		if got.Offset == 0 {
			t.Fatalf("the committed record is at offset 0: the aborted one was not written before it")
		}
	})
}

// fetchMaxWait is the pipeline's: with kgo's default (5 s), a fetch already
// waiting on idle partitions holds back one just assigned, and a test that
// should take a second takes six.
var fetchMaxWait = kgo.FetchMaxWait(250 * time.Millisecond)

// pollOne polls cl until it returns a record and returns the first.
func pollOne(ctx context.Context, t *testing.T, cl *kgo.Client) *kgo.Record {
	t.Helper()
	for {
		fs := cl.PollRecords(ctx, 1)
		if err := ctx.Err(); err != nil {
			t.Fatalf("poll: %v", err)
		}
		var ferr error
		fs.EachError(func(topic string, p int32, err error) { ferr = errors.Join(ferr, err) })
		if ferr != nil {
			t.Fatalf("fetch: %v", ferr)
		}
		if recs := fs.Records(); len(recs) > 0 {
			return recs[0]
		}
	}
}

// waitCommitted polls the group's committed offset of topic/partition until
// it is want, and fails t if ctx ends first.
func waitCommitted(ctx context.Context, t *testing.T, adm *kadm.Client, group, topic string, partition int32, want int64) {
	t.Helper()
	var last string
	for {
		offs, err := adm.FetchOffsets(ctx, group)
		if err == nil {
			o, ok := offs.Lookup(topic, partition)
			if ok && o.At == want {
				return
			}
			last = fmt.Sprintf("%+v (found %v)", o.Offset, ok)
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			t.Fatalf("committed offset of %s/%d for group %s: last %s, want %d", topic, partition, group, last, want)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// The recorder decodes every request of the clients given its Opt, on kfake
// and on a real cluster alike, and none of any other client's.
func TestRequests(t *testing.T) {
	topic := realkafka.Name(t, "requests")
	seeds := testkit.StartKafka(t, testkit.KafkaOptions{Real: true, Topics: []testkit.TopicSet{{Partitions: 1, Names: []string{topic}}}}).Brokers
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var rec realkafka.Requests
	watched, err := kgo.NewClient(kgo.SeedBrokers(seeds...), rec.Opt())
	if err != nil {
		t.Fatal(err)
	}
	defer watched.Close()
	other, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(watched).ListEndOffsets(ctx, topic); err != nil {
		t.Fatal(err)
	}
	seen, err := rec.Seen()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, req := range seen {
		switch r := req.(type) {
		case *kmsg.MetadataRequest:
			for _, mt := range r.Topics {
				if mt.Topic != nil && *mt.Topic == topic {
					kinds["metadata"]++
				}
			}
		case *kmsg.ListOffsetsRequest:
			for _, lt := range r.Topics {
				if lt.Topic == topic {
					kinds["list offsets"]++
				}
			}
		case *kmsg.ProduceRequest:
			kinds["produce"]++
		case *kmsg.ApiVersionsRequest:
			kinds["api versions"]++
		}
	}
	if kinds["metadata"] == 0 || kinds["list offsets"] == 0 || kinds["api versions"] == 0 || kinds["produce"] != 0 {
		t.Errorf("requests seen by kind: %v (of %d)", kinds, len(seen))
	}
}
