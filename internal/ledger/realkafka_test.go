package ledger_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/ledger"
	"github.com/loyalty-bridge/loyalty-bridge/internal/realkafka"
)

// On a real broker the topic Ensure creates is compacted (an intent is
// dropped once its settled entry is written; every transaction keeps its
// latest state) and deleted after retention.ms, and a ledger read from
// the start after segments were deleted starts at what is left. kfake
// does neither, so only a real broker can show it: segments of seconds
// here (scripts/kafka checks every second).
func TestLedgerTopicCompactsAndExpiresOnRealKafka(t *testing.T) {
	realkafka.Brokers(t)
	w := cluster(t)
	a, cl := w.open(t, nil)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	alter := func(kv ...string) {
		t.Helper()
		var ac []kadm.AlterConfig
		for i := 0; i < len(kv); i += 2 {
			ac = append(ac, kadm.AlterConfig{Op: kadm.SetConfig, Name: kv[i], Value: &kv[i+1]})
		}
		resp, err := adm.AlterTopicConfigs(ctx, ac, w.topic)
		if err == nil {
			_, err = resp.On(w.topic, nil)
		}
		if err != nil {
			t.Fatalf("alter %v: %v", kv, err)
		}
	}
	alter("segment.ms", "500", "min.cleanable.dirty.ratio", "0.01", "min.compaction.lag.ms", "0", "delete.retention.ms", "0")

	const n = 100
	for i := range n {
		id := fmt.Sprintf("p-%d", i)
		if err := a.Intend(ctx, w.rec(0, int64(i)), ledger.Entry{Kind: ledger.Accrual, TransactionID: id}); err != nil {
			t.Fatal(err)
		}
		r, err := a.Settle(w.rec(0, int64(i)), ledger.Entry{Kind: ledger.Accrual, TransactionID: id, Outcome: "APPLIED"})
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// Segments roll only when a record comes after segment.ms: a trickle
	// of another transaction's entries keeps them rolling.
	filler := 0
	trickle := func() {
		t.Helper()
		filler++
		if err := a.Intend(ctx, w.rec(0, 1000), ledger.Entry{Kind: ledger.Accrual, TransactionID: "filler"}); err != nil {
			t.Fatal(err)
		}
	}
	ours := func() (records int) {
		t.Helper()
		rd := w.client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{w.topic: {0: kgo.NewOffset().AtStart()}}),
			kgo.FetchMaxWait(100*time.Millisecond))
		defer rd.Close()
		end, err := adm.ListEndOffsets(ctx, w.topic)
		if err != nil {
			t.Fatal(err)
		}
		last, _ := end.Lookup(w.topic, 0)
		for next := int64(-1); next < last.Offset-1; {
			fs := rd.PollRecords(ctx, 1000)
			if ctx.Err() != nil {
				t.Fatal(ctx.Err())
			}
			fs.EachRecord(func(r *kgo.Record) {
				next = r.Offset
				if strings.HasPrefix(string(r.Key), "a/p-") {
					records++
				}
			})
		}
		return records
	}
	deadline := time.Now().Add(2 * time.Minute)
	for got := ours(); got > n; got = ours() {
		if time.Now().After(deadline) {
			t.Fatalf("not compacted after 2 minutes: %d records for %d transactions", got, n)
		}
		trickle()
		if err := waitCtx(ctx, 500*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := w.open(t, nil)
	for i := range n {
		if e := w.lookup(t, b, 0, 1, ledger.Accrual, fmt.Sprintf("p-%d", i)); e == nil || e.State != ledger.Settled {
			t.Fatalf("p-%d after compaction: %+v, want settled", i, e)
		}
	}

	// No more compaction: each pass merged the cleaned segments with the
	// trickle's newest ones, so the first segment's newest record stayed
	// about a second old, at the edge of retention.ms, and one CI run
	// never saw it deleted in 2 minutes.
	alter("retention.ms", "1000", "min.compaction.lag.ms", "3600000")
	// Its own bound: the log cleaner may have taken most of the first.
	deadline = time.Now().Add(2 * time.Minute)
	for {
		starts, err := adm.ListStartOffsets(ctx, w.topic)
		if err != nil {
			t.Fatal(err)
		}
		if s, _ := starts.Lookup(w.topic, 0); s.Offset >= 2*n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("segments not deleted after retention.ms")
		}
		trickle()
		if err := waitCtx(ctx, 500*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	// A new process reads from offset 0, long deleted (Ensure would
	// refuse this topic's retention, rightly).
	c, err := ledger.New(ledger.Options{Client: cl, ReaderOpts: []kgo.Opt{kgo.SeedBrokers(w.brokers...)}, Topic: w.topic})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if e := w.lookup(t, c, 0, 1, ledger.Accrual, "p-0"); e != nil {
		t.Fatalf("p-0 after its segment was deleted: %+v", e)
	}
	if e := w.lookup(t, c, 0, 1, ledger.Accrual, "filler"); e == nil {
		t.Fatal("the entry written last is gone too")
	}
	t.Logf("compacted and expired with %d filler entries", filler)
}

// waitCtx waits d or until ctx ends: the pace of a trickle of records
// that makes the broker roll segments, not a synchronisation.
func waitCtx(ctx context.Context, d time.Duration) error {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
