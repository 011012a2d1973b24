package service

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/ledger"
	"github.com/loyalty-bridge/loyalty-bridge/internal/pipeline"
	"github.com/loyalty-bridge/loyalty-bridge/internal/realkafka"
	"github.com/loyalty-bridge/loyalty-bridge/internal/replay"
	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

// lookupHolder stands before the simulator for one process: every
// lookup-transaction-id is answered by the simulator at once and held
// until release, counted in held; every other call goes straight through.
type lookupHolder struct {
	sim     http.Handler
	held    atomic.Int32
	release chan struct{}
	once    sync.Once
}

func (h *lookupHolder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/lookup-transaction-id") {
		h.sim.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	h.sim.ServeHTTP(rec, r)
	h.held.Add(1)
	select {
	case <-h.release:
	case <-r.Context().Done():
		return
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

func (h *lookupHolder) open() { h.once.Do(func() { close(h.release) }) }

// `replay` beside the live service, over the same offsets, against a
// partner that applies a repeated transactionId: every purchase applied
// once. The replay's records all consult the ledger (empty) and ask the
// partner first, and their lookups are answered "not found" and held; the
// live service then handles every record; then the replay's lookups come
// back. Before log order decided (c9454b3), the replay wrote each one
// again: 2 effects each. Now its intents come after the live service's in
// the ledger, so it sends nothing and answers ALREADY_APPLIED, from the
// live service's settled entries or a lookup once their writes settled.
//
// The live service runs at-least-once and exactly-once.
func TestReplayBesideTheLiveServiceAppliesOnce(t *testing.T) {
	for _, mode := range []pipeline.Delivery{pipeline.AtLeastOnce, pipeline.ExactlyOnce} {
		t.Run(mode.String(), func(t *testing.T) {
			const n = 12
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			s := newStackWith(t, 1, sim.Options{Members: 50, DuplicatePolicy: sim.DuplicateApply})
			holder := &lookupHolder{sim: s.Sim, release: make(chan struct{})}
			front := httptest.NewServer(holder)
			t.Cleanup(front.Close)
			t.Cleanup(holder.open) // before front.Close: a held call returns
			quick := func(c *config.Config) {
				c.API.Timeout = time.Second
				c.Partner.Profile.ApplyWindow = 500 * time.Millisecond
			}
			replayCfg := stackConfig(t, s, func(c *config.Config) {
				quick(c)
				c.API.BaseURL = front.URL
				// Held lookups are slow calls: an adaptive limit would let
				// fewer of them out at once.
				c.Processing.AdaptiveConcurrency = false
			})
			liveCfg := stackConfig(t, s, func(c *config.Config) {
				quick(c)
				c.Delivery.Mode = mode
				if mode == pipeline.ExactlyOnce {
					c.Delivery.TransactionalID = realkafka.Name(t, "txn")
				}
			})

			deps, err := Connect(ctx, replayCfg, Options{Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			defer deps.Close()
			cl, err := kgo.NewClient(kgo.SeedBrokers(s.Brokers...))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			ids := make([]string, n)
			for i := range ids {
				ids[i] = fmt.Sprintf("p-%d", i)
				ev := &events.PurchaseCompleted{TransactionID: ids[i], LoyaltyID: sim.MemberID(1 + i%5), Amount: 100_000,
					TransactionDate: time.Now(), Currency: "THB"}
				v, err := deps.Codec.Encode(s.Topics.Purchase, ev)
				if err != nil {
					t.Fatal(err)
				}
				if err := cl.ProduceSync(ctx, &kgo.Record{Topic: s.Topics.Purchase, Key: []byte(ids[i]), Value: v}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}

			br, err := deps.Bridge(true)
			if err != nil {
				t.Fatal(err)
			}
			r, err := replay.New(replay.Options{Kafka: deps.KafkaOpts, Codec: deps.Codec, Handle: br.Handle, Fallback: br.Fallback,
				Inputs: replayCfg.Topics.Build().Inputs(), MaxInFlight: n, Logger: deps.Log.Named("replay")})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			ranges, err := r.OffsetRanges(ctx, s.Topics.Purchase, 0, 0, -1)
			if err != nil {
				t.Fatal(err)
			}
			type replayed struct {
				sum *replay.Summary
				err error
			}
			done := make(chan replayed, 1)
			go func() {
				sum, err := r.Ranges(ctx, ranges)
				done <- replayed{sum, err}
			}()
			waitFor(t, "the replay's guard lookups", 30*time.Second, func() bool { return holder.held.Load() == n })

			runService(ctx, t, liveCfg)
			waitFor(t, "the live service's writes", 60*time.Second, func() bool {
				for _, id := range ids {
					if s.Sim.Effects(id) == 0 {
						return false
					}
				}
				return true
			})
			holder.open()
			var got replayed
			select {
			case got = <-done:
			case <-ctx.Done():
				t.Fatal("the replay never ended")
			}
			if got.err != nil {
				t.Fatal(got.err)
			}
			for _, id := range ids {
				if e := s.Sim.Effects(id); e != 1 {
					t.Errorf("%s applied %d times, want 1", id, e)
				}
			}
			if a := got.sum.Outcomes[string(events.OutcomeAlreadyApplied)]; a != n {
				t.Errorf("replay outcomes %v; want %d ALREADY_APPLIED", got.sum.Outcomes, n)
			}
		})
	}
}

// In exactly-once mode, settled entries sit in open transactions below
// intents: a round's while it commits, or a member's killed mid-commit,
// open until the broker times it out. Reading the ledger partition up to
// an intent (log order, package ledger) must not wait for them: with
// read_committed the live service sent nothing while a transaction stayed
// open on its ledger partition. A settled entry in such a transaction
// still tells a partner answer, so it is read.
func TestExactlyOnceIntentsDoNotWaitForOpenTransactions(t *testing.T) {
	const n = 12
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s := newStackWith(t, 1, sim.Options{Members: 50})
	cfg := stackConfig(t, s, func(c *config.Config) {
		c.Delivery.Mode = pipeline.ExactlyOnce
		c.Delivery.TransactionalID = realkafka.Name(t, "txn")
	})
	svc := runService(ctx, t, cfg)
	send := eventProducer(ctx, t, s.Brokers, svc)
	purchase := func(id string) {
		send(s.Topics.Purchase, id, &events.PurchaseCompleted{TransactionID: id, LoyaltyID: sim.MemberID(1), Amount: 100_000,
			TransactionDate: time.Now(), Currency: "THB"})
	}
	// The partition's ledger read (read_committed, which waits for open
	// transactions: a restore must not miss an intent behind one) is over
	// once the first record is applied.
	purchase("warm-up")
	waitFor(t, "the first record", 30*time.Second, func() bool { return s.Sim.Effects("warm-up") == 1 })
	openTransaction(ctx, t, s.Brokers, cfg.Ledger.Topic)
	for i := range n {
		purchase(fmt.Sprintf("p-%d", i))
	}
	waitFor(t, "the records after the open transaction", 20*time.Second, func() bool {
		for i := range n {
			if s.Sim.Effects(fmt.Sprintf("p-%d", i)) != 1 {
				return false
			}
		}
		return true
	})
}

// openTransaction writes a settled entry of another transaction to
// partition 0 of the ledger topic in a transaction it leaves open until
// the test ends: a member killed while committing its round.
func openTransaction(ctx context.Context, t *testing.T, brokers []string, topic string) {
	t.Helper()
	tx, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(ledger.Partitioner(topic)),
		kgo.TransactionalID(realkafka.Name(t, "zombie")), kgo.TransactionTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tx.Close)
	l, err := ledger.New(ledger.Options{Client: tx, Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	r, err := l.Settle(&kgo.Record{Topic: "elsewhere", Partition: 0}, ledger.Entry{Kind: ledger.Accrual, TransactionID: "zombie", Outcome: "APPLIED"})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tx.ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatal(err)
	}
}
