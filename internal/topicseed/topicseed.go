package topicseed

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// MaxReplicationFactor caps ReplicationFactor: three copies survive the loss
// of one node with min.insync.replicas=2, and more buy a test nothing.
const MaxReplicationFactor = 3

// pollInterval is how long the waits pause between two looks.
const pollInterval = 20 * time.Millisecond

// ReplicationFactor is min(MaxReplicationFactor, the brokers the cluster
// lists): one on a single node, three on three or more.
func ReplicationFactor(ctx context.Context, cl *kgo.Client) (int16, error) {
	brokers, err := kadm.NewClient(cl).ListBrokers(ctx)
	if err != nil {
		return 0, fmt.Errorf("list brokers: %w", err)
	}
	return int16(min(MaxReplicationFactor, len(brokers))), nil
}

// Create creates topics with partitions each and replicationFactor copies
// (-1: the cluster's default.replication.factor), then waits as Wait does.
// A topic that already exists is an error unless existingOK; an existing
// topic keeps its partition count, and the wait then accepts any count for
// every topic. The created topics are returned even on error, so a caller
// can delete them.
func Create(ctx context.Context, cl *kgo.Client, partitions int32, replicationFactor int16, existingOK bool, topics ...string) (created []string, err error) {
	resps, err := kadm.NewClient(cl).CreateTopics(ctx, partitions, replicationFactor, nil, topics...)
	if err != nil {
		return nil, fmt.Errorf("create topics %v: %w", topics, err)
	}
	var errs []error
	wantPartitions := partitions
	for _, t := range topics {
		r, ok := resps[t]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("create topic %s: no answer", t))
		case r.Err == nil:
			created = append(created, t)
		case existingOK && errors.Is(r.Err, kerr.TopicAlreadyExists):
			wantPartitions = 0
		default:
			errs = append(errs, fmt.Errorf("create topic %s: %w", t, r.Err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return created, err
	}
	return created, Wait(ctx, cl, wantPartitions, topics...)
}

// Wait returns once every broker the cluster lists has every topic in its
// metadata with every partition led (and, if partitions > 0, exactly that
// many partitions), and every partition's leader answers ListOffsets for
// it. It gives up when ctx ends.
func Wait(ctx context.Context, cl *kgo.Client, partitions int32, topics ...string) error {
	if err := waitListed(ctx, cl, partitions, topics); err != nil {
		return fmt.Errorf("topics %v created but not listed by every broker: %w", topics, err)
	}
	if err := waitServed(ctx, cl, topics); err != nil {
		return fmt.Errorf("topics %v created but not served by their leaders: %w", topics, err)
	}
	return nil
}

// Delete deletes topics, reporting every failure.
func Delete(ctx context.Context, cl *kgo.Client, topics ...string) error {
	resps, err := kadm.NewClient(cl).DeleteTopics(ctx, topics...)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		return fmt.Errorf("delete topics %v: %w", topics, err)
	}
	return nil
}

// waitListed polls the metadata of each broker the cluster lists. The
// brokers are listed afresh on each pass: one killed a moment ago is listed
// until the controller fences it, and must then drop out of the wait.
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
				if rerr == nil && !listed(resp, partitions, len(topics)) {
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
		case <-time.After(pollInterval):
		}
	}
}

func listed(resp *kmsg.MetadataResponse, partitions int32, topics int) bool {
	for _, t := range resp.Topics {
		if t.ErrorCode != 0 || len(t.Partitions) == 0 || partitions > 0 && int32(len(t.Partitions)) != partitions {
			return false
		}
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 || p.Leader < 0 {
				return false
			}
		}
	}
	return len(resp.Topics) == topics
}

// waitServed polls ListOffsets, which each partition's leader answers, until
// every partition the metadata lists answers without error.
func waitServed(ctx context.Context, cl *kgo.Client, topics []string) error {
	adm := kadm.NewClient(cl)
	for {
		want := -1
		md, err := adm.Metadata(ctx, topics...)
		if err == nil {
			err = md.Topics.Error()
			want = 0
			for _, t := range md.Topics {
				want += len(t.Partitions)
			}
		}
		n := 0
		if err == nil {
			var ends kadm.ListedOffsets
			ends, err = adm.ListEndOffsets(ctx, topics...)
			if err == nil {
				err = ends.Error()
			}
			ends.Each(func(kadm.ListedOffset) { n++ })
		}
		if err == nil && n == want {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %d of %d partitions, %v)", ctx.Err(), n, want, err)
		case <-time.After(pollInterval):
		}
	}
}

// Configs returns topic's configuration, each key with its value (the
// broker's default where the topic sets none): for a command that checks
// a topic it relies on (compaction, retention).
func Configs(ctx context.Context, cl *kgo.Client, topic string) (map[string]string, error) {
	rcs, err := kadm.NewClient(cl).DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("describe configs: %w", err)
	}
	rc, err := rcs.On(topic, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		return nil, fmt.Errorf("describe configs: %w", err)
	}
	out := make(map[string]string, len(rc.Configs))
	for _, c := range rc.Configs {
		out[c.Key] = c.MaybeValue()
	}
	return out, nil
}

// RetentionBelow reports whether a topic's retention.ms value keeps
// records for less than least (-1, forever, never is; a value that does
// not parse is not judged).
func RetentionBelow(retentionMs string, least time.Duration) (ms int64, below bool) {
	ms, err := strconv.ParseInt(retentionMs, 10, 64)
	return ms, err == nil && ms >= 0 && ms < least.Milliseconds()
}
