// Package testkit starts, for a test, what the bridge's tests run against:
// Kafka (a kfake cluster over TCP, or the real cluster
// LOYALTY_BRIDGE_TEST_BROKERS names), a Schema Registry (srfake) with the
// codec's schemas registered, and the partner (the simulator over HTTP, with
// the loyalty client and its token cache wired to it). It also holds the
// small tools those tests share: Eventually (poll with a deadline),
// SyncBuffer (a buffer a running thing writes while the test reads it) and
// NetSwitch (a dialer whose connections can all be cut at once).
//
// It is imported by _test.go files only. cmd/loyalty-bridge's
// TestProductionBuildHasNoDevStack fails the build if a production package
// imports it, as it does for kfake, srfake and the simulator.
//
// Every helper takes the testing.TB first, calls tb.Helper, tears down what
// it started with tb.Cleanup, and fails tb with a message naming what did not
// come up. Options are structs whose zero values give what most tests want;
// a field is there because some test depends on a different value.
//
// It must not know the bridge, the pipeline or the service: tests of those
// packages import it, so it may import only what they are built on (the
// codec, the simulator, the loyalty client, the token sources, realkafka).
// For the same reason the tests inside those packages (package codec,
// package sim, package loyalty, package tokensource, package topicseed)
// cannot use it: that would be an import cycle.
package testkit
