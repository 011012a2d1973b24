package parking

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

// DefaultRetention is the parked topic's retention when the bridge creates
// it: a week, so that parked refunds outlive a long outage of the bridge
// (they are due again when it comes back), far beyond any original wait.
const DefaultRetention = 7 * 24 * time.Hour

// retentionMargin is what MinRetention adds to the original wait: a
// bridge down this long still finds every parked record when it returns.
const retentionMargin = 24 * time.Hour

// MinRetention is the least retention the parked topic may have for an
// original wait: the wait plus a day.
func MinRetention(originalWait time.Duration) time.Duration {
	return originalWait + retentionMargin
}

// TopicConfig is the configuration the parked topic is created with:
// delete retention (never compaction: records are keyed as their inputs
// were, and compaction would keep one per key) of DefaultRetention, or
// MinRetention when that is longer.
func TopicConfig(originalWait time.Duration) map[string]*string {
	policy := "delete"
	retention := strconv.FormatInt(max(DefaultRetention, MinRetention(originalWait)).Milliseconds(), 10)
	return map[string]*string{"cleanup.policy": &policy, "retention.ms": &retention}
}

// Ensure creates the parked topic when it does not exist, with as many
// partitions as source (the topic whose records are parked; one per
// input partition keeps the parked records of a key in order, as their
// inputs were), replicationFactor replicas (-1: the broker's default) and
// TopicConfig; or checks the one that exists: not compacted, kept at
// least MinRetention. It names what is wrong and how to fix it.
func Ensure(ctx context.Context, cl *kgo.Client, topic, source string, originalWait time.Duration, replicationFactor int16) (created bool, err error) {
	adm := kadm.NewClient(cl)
	details, err := adm.ListTopics(ctx, topic, source)
	if err != nil {
		return false, fmt.Errorf("parked topic %s: list topics: %w", topic, err)
	}
	sd, ok := details[source]
	if !ok || sd.Err != nil || len(sd.Partitions) == 0 {
		return false, fmt.Errorf("parked topic %s: the refund topic %s does not exist yet, so its partition count is unknown", topic, source)
	}
	need := len(sd.Partitions)
	d, ok := details[topic]
	if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
		cfg := TopicConfig(originalWait)
		resp, err := adm.CreateTopic(ctx, int32(need), replicationFactor, cfg, topic)
		if err == nil {
			err = resp.Err
		}
		if errors.Is(err, kerr.TopicAlreadyExists) {
			return Ensure(ctx, cl, topic, source, originalWait, replicationFactor)
		}
		if err != nil {
			return false, fmt.Errorf("parked topic %s: create with %d partitions (cleanup.policy=delete, retention.ms=%s): %w (create it so, or grant the bridge CREATE on it)",
				topic, need, *cfg["retention.ms"], err)
		}
		if err := topicseed.Wait(ctx, cl, int32(need), topic); err != nil {
			return true, fmt.Errorf("parked topic %s: %w", topic, err)
		}
		return true, nil
	}
	if d.Err != nil {
		return false, fmt.Errorf("parked topic %s: %w", topic, d.Err)
	}
	cfg, err := topicseed.Configs(ctx, cl, topic)
	if err != nil {
		return false, fmt.Errorf("parked topic %s: %w", topic, err)
	}
	var problems []string
	least := MinRetention(originalWait)
	if p := cfg["cleanup.policy"]; strings.Contains(p, "compact") {
		problems = append(problems, fmt.Sprintf("cleanup.policy=%s must not compact (parked records share their inputs' keys)", p))
	}
	if ms, below := topicseed.RetentionBelow(cfg["retention.ms"], least); below {
		problems = append(problems, fmt.Sprintf("retention.ms=%d is below --original-wait plus a day (%d ms)", ms, least.Milliseconds()))
	}
	if len(problems) > 0 {
		return false, fmt.Errorf("parked topic %s: %s (kafka-configs --alter --entity-type topics --entity-name %s)", topic, strings.Join(problems, "; "), topic)
	}
	return false, nil
}
