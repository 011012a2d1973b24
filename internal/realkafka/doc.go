// Package realkafka lets a test suite run against a real Apache Kafka
// cluster instead of kfake, when one is named in the environment.
//
// LOYALTY_BRIDGE_TEST_BROKERS holds the cluster's bootstrap list, comma
// separated (scripts/kafka start prints it, or point it at a cluster of your
// own). Brokers returns it, or skips a test that needs a real cluster when it
// is unset; Seeds lets a harness choose between kfake and the real cluster
// without skipping.
//
// A real cluster differs from a kfake cluster made per test in two ways that
// a suite must allow for, and the package covers both. It outlives the test
// and is shared by every test in the run and by earlier runs, so names must
// not collide: Name makes them. And a topic it has created reaches each
// broker's metadata a moment later, so a client that asks at once waits out
// its metadata back-off: SeedTopics, the real-cluster kfake.SeedTopics,
// returns only when every broker lists the topics, and deletes them when
// the test ends (the waiting itself is topicseed's, which devstack shares).
// DeleteAtEnd does the same for topics and groups a harness made itself.
//
// LOYALTY_BRIDGE_TEST_KAFKA_SECURE names the secure.env file that
// scripts/kafka start --secure writes: the same cluster's TLS and SASL
// listeners, its private CA, a client certificate and the SASL users.
// SecureCluster reads it, or skips a test when it is unset.
//
// A real cluster has no kfake ControlKey: Requests shows a test the
// requests its own clients send (through their dialer), on either cluster.
//
// The package starts no broker (scripts/kafka does) and builds no client
// for the code under test: each suite does that with the options it tests.
package realkafka
