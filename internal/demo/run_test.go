package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// cluster is kfake over TCP with the bridge's topics and a codec whose
// schemas are registered in srfake.
func cluster(t *testing.T) ([]string, *codec.Codec) {
	t.Helper()
	e := testkit.StartEvents(t, testkit.EventsOptions{Partitions: 2})
	return e.Brokers, e.Codec
}

// answer stands in for the bridge: it reads the input topics and writes a
// reply for every record, as the bridge's contract says (an error event
// keyed by the record's position when it does not decode, VALIDATION when
// it is invalid, otherwise a result), skipping those skip names. It runs
// until the returned stop is called.
func answer(t *testing.T, brokers []string, cd *codec.Codec, skip func(id string) bool) (stop func()) {
	t.Helper()
	topics := codec.DefaultTopics()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topics.Inputs()...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
				reply, err := replyTo(ctx, cd, topics, r, skip)
				if err == nil && reply != nil {
					err = cl.ProduceSync(ctx, reply).FirstErr()
				}
				if err != nil && ctx.Err() == nil {
					t.Errorf("answering %s/%d/%d: %v", r.Topic, r.Partition, r.Offset, err)
				}
			})
		}
	}()
	return func() { cancel(); wg.Wait(); cl.Close() }
}

func replyTo(ctx context.Context, cd *codec.Codec, topics codec.Topics, r *kgo.Record, skip func(string) bool) (*kgo.Record, error) {
	src := events.ErrorSource{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp}
	v, err := cd.Decode(ctx, r.Topic, r.Value)
	var de *codec.DecodeError
	var e *events.LoyaltyError
	switch {
	case errors.As(err, &de):
		e = &events.LoyaltyError{TransactionID: events.SourceID(r.Topic, r.Partition, r.Offset), Category: events.CategoryDecode,
			Detail: de.Error(), Source: src, ProcessedAt: time.Now()}
	case err != nil:
		return nil, err
	}
	if ev, ok := v.(events.Event); ok {
		if skip(ev.ID()) {
			return nil, nil
		}
		if verr := ev.Validate(); verr != nil {
			et := ev.Type()
			e = &events.LoyaltyError{TransactionID: ev.ID(), EventType: &et, Category: events.CategoryValidation, Detail: verr.Error(),
				Source: src, ProcessedAt: time.Now()}
		} else {
			res := &events.LoyaltyResult{TransactionID: ev.ID(), EventType: ev.Type(), Outcome: events.OutcomeApplied,
				ProcessedAt: time.Now(), Source: events.Source{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}}
			value, err := cd.EncodeResult(topics.ResultTopic(r.Topic), res)
			return &kgo.Record{Topic: topics.ResultTopic(r.Topic), Key: r.Key, Value: value}, err
		}
	}
	value, err := cd.EncodeError(topics.ErrorTopic(r.Topic), e)
	return &kgo.Record{Topic: topics.ErrorTopic(r.Topic), Key: r.Key, Value: value}, err
}

func members(i int) string { return fmt.Sprintf("M%04d", i) }

func TestRunAccountsForEveryEvent(t *testing.T) {
	brokers, cd := cluster(t)
	stop := answer(t, brokers, cd, func(string) bool { return false })
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	err := Run(ctx, RunOptions{Brokers: brokers, Codec: cd, N: 60, Members: members, Count: 5, Out: &out, Timeout: 50 * time.Second})
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	for _, want := range []string{"events answered", "loyalty.purchase", "APPLIED", "error DECODE", "error VALIDATION",
		"every event got its output"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// Events left unanswered fail the run once the timeout passes, with the
// table of what did come back.
func TestRunReportsMissingAnswers(t *testing.T) {
	brokers, cd := cluster(t)
	stop := answer(t, brokers, cd, func(id string) bool { return strings.Contains(id, "-redeem-") })
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	err := Run(ctx, RunOptions{Brokers: brokers, Codec: cd, N: 40, Members: members, Count: 5, Out: &out, Timeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), "events got their output") || strings.Contains(out.String(), "every event got") ||
		!strings.Contains(out.String(), "APPLIED") {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
}
