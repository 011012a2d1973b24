// Package devstack runs, in one process, everything the bridge needs around
// it for development, demos and tests: a kfake Kafka cluster reachable over
// TCP by any Kafka client, an srfake Schema Registry, and the partner API
// simulator, each on its own listener.
//
// With a data directory, Kafka records, topics and group offsets survive a
// restart (kfake's own persistence), and so do registered schemas with their
// ids (srfake keeps them in memory only, so devstack saves them beside
// Kafka's data and seeds them back; without that, persisted records would
// name schema ids the new registry does not know). The simulator's members
// and ledger are in memory and start afresh on every run; the partner key
// the stack generates is kept, so signatures made before a restart still
// verify.
//
// With Options.Brokers the stack uses an external Kafka cluster instead of
// kfake (the service's suites run on a real broker that way): it creates
// its topics there and waits until every broker serves them, since a real
// cluster, unlike kfake, takes a moment to. The registry and the simulator
// are still in-process. The topics outlive the stack; deleting them is the
// caller's business, as is choosing names no other user of the cluster has.
//
// devstack does not run the bridge; the dev command wires the bridge onto a
// Stack.
package devstack
