package offsetspan

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/loyalty-bridge/loyalty-bridge/internal/realkafka"
	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// topics of the fixture, each the test's own.
type topics struct {
	plain   string // 2 partitions, offsets 0–4 each
	txn     string // 1 partition: committed 0, marker 1, aborted 2, marker 3, committed 4, marker 5
	trimmed string // 1 partition, offsets 0–3, log start 2
}

// fixture writes the topics above on the real cluster named by
// realkafka.Seeds (deleted at the end), or on kfake over TCP.
func fixture(t *testing.T) ([]kgo.Opt, topics) {
	t.Helper()
	tp := topics{plain: realkafka.Name(t, "plain"), txn: realkafka.Name(t, "txn"), trimmed: realkafka.Name(t, "trimmed")}
	seeds := testkit.StartKafka(t, testkit.KafkaOptions{Real: true,
		Topics: []testkit.TopicSet{{Partitions: 2, Names: []string{tp.plain}}, {Partitions: 1, Names: []string{tp.txn, tp.trimmed}}}}).Brokers
	base := []kgo.Opt{kgo.SeedBrokers(seeds...)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	cl, err := kgo.NewClient(append(slices.Clone(base), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for p := range int32(2) {
		for i := range 5 {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: tp.plain, Partition: p, Value: fmt.Appendf(nil, "%d", i)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range 4 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: tp.trimmed, Value: fmt.Appendf(nil, "%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	del := kadm.Offsets{}
	del.Add(kadm.Offset{Topic: tp.trimmed, Partition: 0, At: 2})
	if _, err := kadm.NewClient(cl).DeleteRecords(ctx, del); err != nil {
		t.Fatal(err)
	}

	tx, err := kgo.NewClient(append(slices.Clone(base), kgo.TransactionalID(realkafka.Name(t, "upstream")),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))...)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	for i, commit := range []bool{true, false, true} {
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := tx.ProduceSync(ctx, &kgo.Record{Topic: tp.txn, Value: fmt.Appendf(nil, "%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := tx.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	return base, tp
}

func TestRead(t *testing.T) {
	base, tp := fixture(t)
	plain, txn, trimmed := tp.plain, tp.txn, tp.trimmed
	short := map[string]string{plain: "plain", txn: "txn", trimmed: "trimmed"}
	named := strings.NewReplacer("plain/", plain+"/", "txn/", txn+"/", "trimmed/", trimmed+"/")
	errStop := errors.New("stop")
	for _, tc := range []struct {
		name    string
		spans   []Span
		fetch   []kgo.ConsumerOpt
		stopAt  int      // emit fails at this record (1-based); 0: never
		want    []string // topic/partition/offset, the fixture's short names, partitions in order
		wantErr string   // a part of the error, with short names; "" : none
	}{
		{name: "ends on a commit marker", spans: []Span{{txn, 0, 0, 6}}, want: []string{"txn/0/0", "txn/0/4"}},
		{name: "ends on an abort marker", spans: []Span{{txn, 0, 0, 4}}, want: []string{"txn/0/0"}},
		{name: "ends on an aborted record", spans: []Span{{txn, 0, 1, 3}}},
		{name: "empty span", spans: []Span{{plain, 0, 3, 3}}},
		{name: "no spans"},
		{name: "empty span beside one read", spans: []Span{{plain, 0, 3, 3}, {plain, 1, 1, 3}}, want: []string{"plain/1/1", "plain/1/2"}},
		{name: "two partitions", spans: []Span{{plain, 0, 2, 5}, {plain, 1, 0, 2}},
			want: []string{"plain/0/2", "plain/0/3", "plain/0/4", "plain/1/0", "plain/1/1"}},
		{name: "small fetches", spans: []Span{{plain, 0, 0, 5}}, fetch: []kgo.ConsumerOpt{kgo.FetchMaxPartitionBytes(1)},
			want: []string{"plain/0/0", "plain/0/1", "plain/0/2", "plain/0/3", "plain/0/4"}},
		{name: "within retention", spans: []Span{{trimmed, 0, 2, 4}}, want: []string{"trimmed/0/2", "trimmed/0/3"}},
		{name: "past retention", spans: []Span{{trimmed, 0, 0, 4}},
			wantErr: "reading trimmed/0: records deleted while being read (retention?)"},
		{name: "two spans of a partition", spans: []Span{{plain, 0, 0, 1}, {plain, 0, 3, 4}}, wantErr: "two spans of plain/0"},
		{name: "emit fails", spans: []Span{{plain, 0, 0, 5}}, stopAt: 2, want: []string{"plain/0/0", "plain/0/1"}, wantErr: "stop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			// Partitions interleave; within one, emit order must be offset order.
			byPart := map[string][]string{}
			n := 0
			err := Read(ctx, base, tc.spans, func(r *kgo.Record) error {
				p := fmt.Sprintf("%s/%d", short[r.Topic], r.Partition)
				byPart[p] = append(byPart[p], fmt.Sprintf("%s/%d", p, r.Offset))
				if n++; n == tc.stopAt {
					return errStop
				}
				return nil
			}, tc.fetch...)
			wantErr := named.Replace(tc.wantErr)
			switch {
			case wantErr == "" && err != nil:
				t.Fatalf("error %v", err)
			case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
				t.Fatalf("error %v, want one with %q", err, wantErr)
			case tc.stopAt > 0 && !errors.Is(err, errStop):
				t.Fatalf("error %v is not emit's", err)
			}
			var got []string
			for _, p := range slices.Sorted(maps.Keys(byPart)) {
				got = append(got, byPart[p]...)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("emitted %v, want %v", got, tc.want)
			}
		})
	}
}
