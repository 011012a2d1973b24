package testkit

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/loyalty-bridge/loyalty-bridge/internal/realkafka"
)

// TopicSet is topics created with the same number of partitions.
type TopicSet struct {
	Partitions int32
	Names      []string
}

// KafkaOptions configures StartKafka. The zero value is a one-broker kfake
// cluster with no topics.
type KafkaOptions struct {
	// Topics are created before StartKafka returns (on a real cluster, by
	// realkafka.SeedTopics, and deleted when the test ends).
	Topics []TopicSet
	// Brokers is kfake's number of brokers (default 1). Ignored on a real
	// cluster.
	Brokers int
	// Fake are more kfake options (SASL, TLS, …), after the brokers and
	// topics. Ignored on a real cluster.
	Fake []kfake.Opt
	// Real uses the cluster LOYALTY_BRIDGE_TEST_BROKERS names, when it names
	// one (realkafka.Seeds), instead of kfake. Only for suites written for
	// a shared cluster: topic and group names from realkafka.Name.
	Real bool
}

// Kafka is a running cluster.
type Kafka struct {
	// Brokers is the bootstrap list.
	Brokers []string
	// Fake is the kfake cluster (for ControlKey and friends); nil on a real
	// cluster.
	Fake *kfake.Cluster
}

// StartKafka starts a kfake cluster over TCP with o's topics, closed when tb
// ends; with o.Real and LOYALTY_BRIDGE_TEST_BROKERS set, it seeds o's topics
// on that cluster instead.
func StartKafka(tb testing.TB, o KafkaOptions) *Kafka {
	tb.Helper()
	if o.Real {
		if seeds := realkafka.Seeds(); len(seeds) > 0 {
			for _, ts := range o.Topics {
				realkafka.SeedTopics(tb, seeds, ts.Partitions, ts.Names...)
			}
			return &Kafka{Brokers: seeds}
		}
	}
	brokers := o.Brokers
	if brokers == 0 {
		brokers = 1
	}
	opts := []kfake.Opt{kfake.NumBrokers(brokers)}
	for _, ts := range o.Topics {
		opts = append(opts, kfake.SeedTopics(ts.Partitions, ts.Names...))
	}
	c, err := kfake.NewCluster(append(opts, o.Fake...)...)
	if err != nil {
		tb.Fatalf("testkit: kfake cluster did not start: %v", err)
	}
	tb.Cleanup(c.Close)
	return &Kafka{Brokers: c.ListenAddrs(), Fake: c}
}

// Client returns a client of k's (its seed brokers, then opts), closed when
// tb ends.
func (k *Kafka) Client(tb testing.TB, opts ...kgo.Opt) *kgo.Client {
	tb.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(k.Brokers...)}, opts...)...)
	if err != nil {
		tb.Fatalf("testkit: Kafka client for %v: %v", k.Brokers, err)
	}
	tb.Cleanup(cl.Close)
	return cl
}

// RefuseTxnOffsetCommit answers a kfake TxnOffsetCommit request (a
// ControlKey function's req) with code for every partition it names: a
// transaction's offsets refused after its records were written.
func RefuseTxnOffsetCommit(req kmsg.Request, code int16) kmsg.Response {
	q := req.(*kmsg.TxnOffsetCommitRequest)
	resp := q.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	resp.SetVersion(q.GetVersion())
	for _, qt := range q.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = qt.Topic
		for _, qp := range qt.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = qp.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// RefuseProduce answers a kfake Produce request (a ControlKey function's
// req) with code for every partition it names: none of its records is
// written.
func RefuseProduce(req kmsg.Request, code int16) kmsg.Response {
	q := req.(*kmsg.ProduceRequest)
	resp := q.ResponseKind().(*kmsg.ProduceResponse)
	resp.SetVersion(q.GetVersion())
	for _, qt := range q.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic, rt.TopicID = qt.Topic, qt.TopicID
		for _, qp := range qt.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition, rp.ErrorCode = qp.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
