package ledger

import "github.com/twmb/franz-go/pkg/kgo"

// Partitioner is franz-go's default partitioner for every topic but the
// ledger topic, whose records go to the partition they name (that of
// their input record): for the client that produces the bridge's outputs,
// settled entries among them.
func Partitioner(topic string) kgo.Partitioner {
	return partitioner{topic: topic, manual: kgo.ManualPartitioner(),
		// franz-go's default (kgo's config.go), so that the reply topics
		// are partitioned exactly as without a ledger.
		other: kgo.UniformBytesPartitioner(64<<10, true, true, nil)}
}

type partitioner struct {
	topic         string
	manual, other kgo.Partitioner
}

func (p partitioner) ForTopic(t string) kgo.TopicPartitioner {
	if t == p.topic {
		return p.manual.ForTopic(t)
	}
	return p.other.ForTopic(t)
}
