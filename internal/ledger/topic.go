package ledger

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/topicseed"
)

// TopicConfig is the configuration the ledger topic is created with:
// compacted, so each transaction keeps its latest state however many
// attempts it took, and deleted after the window, so the topic holds a
// window's worth of transactions.
func TopicConfig(window time.Duration) map[string]*string {
	policy := "compact,delete"
	retention := strconv.FormatInt(window.Milliseconds(), 10)
	return map[string]*string{"cleanup.policy": &policy, "retention.ms": &retention}
}

// Ensure creates the ledger topic when it does not exist, with as many
// partitions as the input topic that has most, replicationFactor replicas
// (-1: the broker's default) and TopicConfig; or checks the one that
// exists: enough partitions, compacted, kept at least the window. It
// names what is wrong and how to fix it.
func Ensure(ctx context.Context, cl *kgo.Client, topic string, inputs []string, window time.Duration, replicationFactor int16) (created bool, err error) {
	adm := kadm.NewClient(cl)
	details, err := adm.ListTopics(ctx, append([]string{topic}, inputs...)...)
	if err != nil {
		return false, fmt.Errorf("ledger topic %s: list topics: %w", topic, err)
	}
	var need int
	for _, in := range inputs {
		d, ok := details[in]
		if !ok || d.Err != nil {
			continue // the pipeline reports input topics it cannot read
		}
		need = max(need, len(d.Partitions))
	}
	if need == 0 {
		return false, fmt.Errorf("ledger topic %s: none of the input topics %s exists yet, so its partition count is unknown", topic, strings.Join(inputs, ", "))
	}
	d, ok := details[topic]
	if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
		// CreateTopic returns the topic's own error (kadm's doc), so a
		// refusal is err too.
		_, err := adm.CreateTopic(ctx, int32(need), replicationFactor, TopicConfig(window), topic)
		if errors.Is(err, kerr.TopicAlreadyExists) {
			return Ensure(ctx, cl, topic, inputs, window, replicationFactor)
		}
		if err != nil {
			return false, fmt.Errorf("ledger topic %s: create with %d partitions (cleanup.policy=compact,delete, retention.ms=%d): %w (create it so, or grant the bridge CREATE on it)",
				topic, need, window.Milliseconds(), err)
		}
		// Readable before the first record asks: a created topic reaches
		// the brokers' metadata a moment after CreateTopics answers.
		if err := topicseed.Wait(ctx, cl, int32(need), topic); err != nil {
			return true, fmt.Errorf("ledger topic %s: %w", topic, err)
		}
		return true, nil
	}
	if d.Err != nil {
		return false, fmt.Errorf("ledger topic %s: %w", topic, d.Err)
	}
	if len(d.Partitions) < need {
		return false, fmt.Errorf("ledger topic %s: %d partitions, fewer than an input topic's %d: the entries of input partition p live in ledger partition p (add partitions with kafka-topics --alter)",
			topic, len(d.Partitions), need)
	}
	cfg, err := topicseed.Configs(ctx, cl, topic)
	if err != nil {
		return false, fmt.Errorf("ledger topic %s: %w", topic, err)
	}
	var problems []string
	if p := cfg["cleanup.policy"]; !strings.Contains(p, "compact") {
		problems = append(problems, fmt.Sprintf("cleanup.policy=%s must include compact", p))
	}
	if ms, below := topicseed.RetentionBelow(cfg["retention.ms"], window); below {
		problems = append(problems, fmt.Sprintf("retention.ms=%d is below the dedup window (%d ms)", ms, window.Milliseconds()))
	}
	if len(problems) > 0 {
		return false, fmt.Errorf("ledger topic %s: %s (kafka-configs --alter --entity-type topics --entity-name %s)", topic, strings.Join(problems, "; "), topic)
	}
	return false, nil
}
