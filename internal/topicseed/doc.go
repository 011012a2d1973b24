// Package topicseed creates topics on a real Kafka cluster and returns only
// once they can be used: every broker lists every partition with a leader,
// and every leader serves its partition.
//
// On a real cluster a created topic reaches each broker's metadata a moment
// after CreateTopics returns, and its leaders take up their partitions a
// moment after that. A client that comes too early is told
// NOT_LEADER_FOR_PARTITION or UNKNOWN_TOPIC_OR_PARTITION and retries only
// after its metadata back-off (kgo's MetadataMinAge, 5 s), which turns a
// quick start-up into a slow one. kfake has no such window.
//
// The package is used by devstack (production code, for `loyalty-bridge
// dev` on an external cluster) and by realkafka (tests), so it must not
// import testing. It builds no long-lived client: each call is handed one.
package topicseed
