// Package realkafka lets a test suite run against a real Apache Kafka
// cluster instead of kfake, when one is named in the environment.
//
// LOYALTY_BRIDGE_TEST_BROKERS holds the cluster's bootstrap list, comma
// separated (scripts/kafka start prints it, or point it at a cluster of your
// own). Brokers returns it, or skips a test that needs a real cluster when it
// is unset; Seeds lets a harness choose between kfake and the real cluster
// without skipping. Name makes topic and group names that do not collide:
// unlike a kfake cluster made per test, a real cluster outlives the test, is
// shared by every test in the run and by earlier runs.
//
// The package owns only that choice and those names. It starts no broker
// (scripts/kafka does), creates no topic and builds no client: each suite
// does that with the options it tests.
package realkafka
