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
// devstack does not run the bridge; the dev command wires the bridge onto a
// Stack.
package devstack
