package benchkit

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/ledger"
)

// ledgerAgeTxPrefix starts the transactionIds of the entries ageLedger
// writes; eventIndex reads none of them as an event's.
const ledgerAgeTxPrefix = txPrefix + "ledger-age-"

// ageLedger makes the ledger of the bridge that runs in group as old as a
// deployment's age after the ledger's rollout (Scenario.LedgerAge): it
// creates the ledger topic as the bridge would (its default name, window
// and replication factor, so that the bridge's own check accepts it) and
// writes, for each of the input topic's partitions, one settled entry
// dated age ago, in the ledger partition the bridge reads for it. Only the
// input topic the bench writes gets entries: the bridge's other inputs
// stay empty.
//
// The entries go through the ledger's own Settle, so they are encoded as
// the bridge reads them, and are acknowledged before ageLedger returns.
func (s *stack) ageLedger(ctx context.Context, group string, partitions int32, age time.Duration) error {
	topic := config.DefaultLedgerTopic(group)
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Brokers...), kgo.RecordPartitioner(ledger.Partitioner(topic)))
	if err != nil {
		return fmt.Errorf("age the ledger: client: %w", err)
	}
	defer cl.Close()
	// --dedup-window and --ledger-replication-factor as the bridge has
	// them by default (Config.Validate refuses bridge arguments that
	// change the ledger).
	if _, err := ledger.Ensure(ctx, cl, topic, s.topics.Inputs(), ledger.DefaultWindow, -1); err != nil {
		return fmt.Errorf("age the ledger: %w", err)
	}
	at := time.Now().Add(-age)
	l, err := ledger.New(ledger.Options{Client: cl, Topic: topic, Now: func() time.Time { return at }})
	if err != nil {
		return fmt.Errorf("age the ledger: %w", err)
	}
	defer l.Close()
	rs := make([]*kgo.Record, 0, partitions)
	for p := range partitions {
		// No input record stands behind the entry: offset -1.
		in := &kgo.Record{Topic: s.inputTopic(), Partition: p, Offset: -1}
		r, err := l.Settle(in, ledger.Entry{Kind: ledger.Accrual, TransactionID: ledgerAgeTxPrefix + strconv.Itoa(int(p)),
			Outcome: string(events.OutcomeNoOp)})
		if err != nil {
			return fmt.Errorf("age the ledger: partition %d: %w", p, err)
		}
		rs = append(rs, r)
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		return fmt.Errorf("age the ledger: write %d entries to %s: %w", len(rs), topic, err)
	}
	return nil
}
